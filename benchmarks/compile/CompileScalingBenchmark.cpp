// CompileScalingBenchmark.cpp — how compile time grows with the graph, per backend. Each case
// traces a fresh graph of about N nodes and times the compile of its first read (the
// runtime's compile_ms metric; execution excluded):
//   chain/N  a = a * 1.0001 + 0.0001, N/2 times, then read (issue #15's 20,000-node case)
//   wide/N   N/2 independent x * s_i + 1 over one [64] input, all synced at once
//   mlp/N    forward + backward + SGD of an MLP [32, 64] with ~N/40 Linear+ReLU layers
// Counters: nodes (ops traced), compile_ms, us_per_node. Linear compile = flat us_per_node.
// --benchmark_filter picks backends and sizes (gpu_opencl on PoCL takes minutes at 100k).
#include <cstdlib>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "lazytensor/autograd.hpp"
#include "bench_runtime.h"
#include "lazytensor/lazytensor.hpp"
#include "lazytensor/nn.hpp"

namespace {

lt::Runtime& runtime(const std::string& backend) {
  return lt::bench::runtime(lt::bench::runtime_options("", backend));
}

// Traces the case; returns the tensors whose read compiles it.
std::vector<lt::Tensor> trace(const std::string& kind, int64_t n, const lt::Device& dev,
                              std::vector<std::unique_ptr<lt::nn::Linear>>& keep) {
  if (kind == "chain") {
    lt::Tensor a = lt::Tensor::from(dev, std::vector<float>{1.0f}, {1});
    for (int64_t i = 0; i < n / 2; ++i) a = a * 1.0001f + 0.0001f;
    return {a};
  }
  if (kind == "wide") {
    lt::Tensor x = lt::Tensor::from(dev, std::vector<float>(64, 1.0f), {64});
    std::vector<lt::Tensor> out;
    for (int64_t i = 0; i < n / 2; ++i) out.push_back(x * static_cast<float>(i) + 1.0f);
    return out;
  }
  // mlp: ~40 traced ops per layer (forward, backward, update).
  const int64_t layers = std::max<int64_t>(1, n / 40);
  for (int64_t l = 0; l < layers; ++l)
    keep.push_back(std::make_unique<lt::nn::Linear>(dev, 64, 64, static_cast<uint64_t>(l)));
  for (auto& m : keep) {
    m->weight.materialize();
    m->bias.materialize();
  }
  lt::Tensor h = lt::Tensor::from(dev, std::vector<float>(32 * 64, 0.5f), {32, 64});
  for (auto& m : keep) h = (*m)(h).relu();
  lt::Tensor loss = (h * h).mean();
  lt::backward(loss);
  std::vector<lt::Tensor> out{loss};
  for (auto& m : keep) {
    for (lt::Tensor* p : {&m->weight, &m->bias}) {
      *p = lt::detach(*p - lt::grad(*p) * 0.01f);
      out.push_back(*p);
    }
  }
  return out;
}

void BM_Compile(benchmark::State& state, std::string backend, std::string kind, int64_t n) {
  lt::Runtime& rt = runtime(backend);
  lt::Device dev = rt.default_device();
  double compile_ms = 0, nodes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<std::unique_ptr<lt::nn::Linear>> keep;
    lt::sync(dev);
    const double ops0 = rt.metric("ops_traced");
    std::vector<lt::Tensor> out = trace(kind, n, dev, keep);
    nodes = rt.metric("ops_traced") - ops0;
    const double c0 = rt.metric("compile_ms");
    state.ResumeTiming();
    lt::sync(dev);
    state.PauseTiming();
    compile_ms = rt.metric("compile_ms") - c0;
    state.ResumeTiming();
  }
  state.counters["nodes"] = nodes;
  state.counters["compile_ms"] = compile_ms;
  state.counters["us_per_node"] = nodes > 0 ? 1e3 * compile_ms / nodes : 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Compile times are measured cold: the persistent compile cache is off unless LT_CACHE_DIR
  // names one (docs/compile-cache.md).
  ::setenv("LT_CACHE_DIR", "off", /*overwrite=*/0);
  benchmark::Initialize(&argc, argv);
  try {
    lt::Runtime& probe = runtime("");
    for (const auto& d : probe.devices()) {
      for (const char* kind : {"chain", "wide", "mlp"}) {
        for (int64_t n : {1000, 10000, 100000}) {
          benchmark::RegisterBenchmark(
              (std::string(kind) + "/" + std::to_string(n) + "/" + d.backend()).c_str(), BM_Compile,
              d.backend(), std::string(kind), n)
              ->Unit(benchmark::kMillisecond)
              ->Iterations(1)
              ->UseRealTime();
        }
      }
    }
  } catch (const lt::Error& e) {
    std::fprintf(stderr, "bench_compile: %s\n", e.what());
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
