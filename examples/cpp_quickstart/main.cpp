// cpp_quickstart — define-by-run C++ on lt::Tensor: ordinary functions, a loop, an `if` on a
// value read back, containers of tensors; then a printed tensor and the metrics report.
#include <lazytensor/lazytensor.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <vector>

namespace {

// A plain function of tensors: only records nodes; nothing runs until a value is read.
lt::Tensor normalize(const lt::Tensor& v) {
  return v / (v * v).sum().sqrt();
}

// One dense layer, another ordinary function.
lt::Tensor dense(const lt::Tensor& x, const lt::Tensor& w, const lt::Tensor& b) {
  return lt::relu(lt::matmul(x, w) + b);
}

}  // namespace

int main() try {
  lt::Runtime runtime = lt::Runtime::create();
  lt::Device device = runtime.default_device();
  std::cout << "device: " << device << "\n";

  // Power iteration for the dominant eigenvalue of a symmetric matrix. The loop body is the
  // same graph each time, so after the first step it is a compile-cache hit.
  lt::Tensor a = lt::Tensor::from<float>(device, {4, 1, 0, 1, 3, 1, 0, 1, 2}, {3, 3});
  lt::Tensor v = normalize(lt::ones(device, {3, 1}));
  float previous = 0.0f;
  for (int step = 1; step <= 100; ++step) {
    v = normalize(lt::matmul(a, v));
    lt::sync(device);  // end of step: everything pending becomes one graph
    if (step % 5 == 0) {
      float lambda = lt::matmul(v.t(), lt::matmul(a, v)).sum().item<float>();
      std::printf("step %3d: eigenvalue estimate %.6f\n", step, lambda);
      if (std::abs(lambda - previous) < 1e-5f) break;  // data-dependent control flow
      previous = lambda;
    }
  }
  std::cout << "eigenvector: " << v.reshape({3}) << "\n";

  // A tiny two-layer network over a batch, layers kept in a container.
  lt::Tensor x = lt::arange(device, -4, 4).reshape({2, 4}) / 2.0;
  std::vector<std::pair<lt::Tensor, lt::Tensor>> layers = {
      {lt::random_normal(device, {4, 5}, /*seed=*/1, 0.0, 0.5), lt::zeros(device, {5})},
      {lt::random_normal(device, {5, 3}, /*seed=*/2, 0.0, 0.5), lt::zeros(device, {3})},
  };
  lt::Tensor h = x;
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto& [w, b] = layers[i];
    h = i + 1 < layers.size() ? dense(h, w, b) : lt::matmul(h, w) + b;  // no relu on logits
  }
  lt::Tensor probs = lt::softmax(h, -1);
  std::cout << "probs = " << probs << "\n";
  std::cout << "argmax = " << lt::argmax(probs, 1) << "\n";
  std::vector<float> row_sums = probs.sum({1}).to_vector<float>();
  std::printf("row sums: %.4f %.4f\n", row_sums[0], row_sums[1]);

  std::cout << "--- metrics ---\n" << runtime.metrics_report() << "\n";
  return 0;
} catch (const lt::Error& e) {
  std::fprintf(stderr, "lazytensor error (code %d): %s\n", static_cast<int>(e.code()), e.what());
  return 1;
}
