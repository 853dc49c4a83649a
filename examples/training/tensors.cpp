// tensors.cpp — docs/training.md, part 1: tensors are recorded, not run; reading a value (or
// lt::sync) runs everything pending as one compiled graph; the same graph again is a cache hit.
#include <lazytensor/lazytensor.hpp>

#include <cstdio>
#include <iostream>

int main() try {
  lt::Runtime rt = lt::Runtime::create();  // LT_DEVICE=cpu_jit etc. picks the backend
  lt::Device dev = rt.default_device();
  lt::Tensor x = lt::Tensor::from<float>(dev, {1, 2, 3, 4, 5, 6}, {2, 3});
  lt::Tensor t = lt::linspace(dev, 0, 1, 3);     // [0, 0.5, 1]
  lt::Tensor y = (x * t + 1.0).relu().sum({1});  // recorded only
  std::cout << "y = " << y << "\n";              // compiled and run here
  std::printf("compiles so far: %.0f\n", rt.metric("compiles"));

  // A loop of identical steps: each lt::sync ends a step; steps 2.. reuse the compiled graph.
  lt::Tensor v = lt::ones(dev, {3});
  lt::sync(dev);  // computes v and t now, so that every step below is the same graph
  for (int step = 0; step < 5; ++step) {
    v = v * 0.5 + t;
    lt::sync(dev);
  }
  std::cout << "v = " << v << "\n";
  std::printf("compiles %.0f, cache hits %.0f\n", rt.metric("compiles"), rt.metric("cache_hits"));
  return rt.metric("cache_hits") >= 4 ? 0 : 1;  // the loop hit the cache
} catch (const lt::Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
