// TrainStepBenchmark.cpp — one SGD training step (forward + backward + update + lt_sync,
// a cached graph) of an MLP 784-512-512-10 at batch 128, registered once per loaded
// backend so one run compares them (e.g. cpu_jit vs cpu_eager). Reports ms per step and,
// after the runs, the ratio of each backend to cpu_eager. Also: what autograd adds to the
// cost of recording one op.
#include <cstdlib>
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <random>

#include "lazytensor/models/mlp.hpp"
#include "lazytensor/models/train_step.hpp"
#include "bench_runtime.h"
#include "roofline.h"

namespace {

lt::Runtime& runtime() {
  return lt::bench::runtime(lt::bench::runtime_options("silent"));
}

std::map<std::string, double>& ms_per_step() {
  static std::map<std::string, double> m;
  return m;
}

void BM_TrainStep(benchmark::State& state, std::string device) {
  lt::Device dev = runtime().find_device(device);
  lt::models::Mlp model(dev, {784, 512, 512, 10}, 1);
  model.materialize();
  lt::optim::SGD opt(model.parameters(), 0.01);
  std::mt19937 gen(1);
  std::normal_distribution<float> n(0, 1);
  std::vector<float> xs(128 * 784), ys(128 * 10, 0.0f);
  for (float& v : xs) v = n(gen);
  for (int i = 0; i < 128; ++i) ys[static_cast<size_t>(i * 10 + i % 10)] = 1.0f;
  lt::Tensor x = lt::Tensor::from(dev, xs, {128, 784}), y = lt::Tensor::from(dev, ys, {128, 10});
  auto forward = [&] { return lt::nn::cross_entropy(model(x), y); };
  auto step = [&] { return lt::models::train_step(forward, opt).loss; };
  step();  // compile outside the timed loop
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(step().get());
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
      static_cast<double>(state.iterations());
  ms_per_step()[device] = ms;
  state.counters["ms_per_step"] = ms;
  // Forward, input-gradient and weight-gradient GEMMs (3 x 2 x batch x weights) plus the
  // elementwise work; traffic: the batch once, weights read twice, gradient written and read,
  // weights updated (activations, 2 MB at batch 128, stay in cache).
  const double weights = 784.0 * 512 + 512.0 * 512 + 512.0 * 10, b = 128;
  state.SetLabel(device);
  lt::bench::report(state, 6.0 * b * weights + 20.0 * b * (512 + 512 + 10),
                    4.0 * (b * (784 + 10) + 5.0 * weights));
}

// Cost of recording one op when autograd is off (no tensor requires gradients), when the
// op's input requires gradients (history recorded), and inside a no-grad scope.
void BM_RecordMul(benchmark::State& state) {
  lt::Device dev = runtime().find_device("cpu_eager");
  const int mode = static_cast<int>(state.range(0));
  lt::Tensor x = lt::ones(dev, {4});
  if (mode > 0) lt::set_requires_grad(x);
  lt::Tensor k = lt::scalar(dev, 1.0001);
  std::vector<lt::Tensor> keep;
  keep.reserve(1 << 16);
  for (auto _ : state) {
    if (keep.size() == keep.capacity()) {
      state.PauseTiming();
      keep.clear();
      state.ResumeTiming();
    }
    if (mode == 2) {
      lt::NoGradGuard g;
      keep.push_back(x * k);
    } else {
      keep.push_back(x * k);
    }
  }
  state.SetLabel(mode == 0 ? "no autograd" : mode == 1 ? "recording history" : "no-grad scope");
}
BENCHMARK(BM_RecordMul)->Arg(0)->Arg(1)->Arg(2);

}  // namespace

int main(int argc, char** argv) {
  // Compile times are measured cold: the persistent compile cache is off unless LT_CACHE_DIR
  // names one (docs/compile-cache.md).
  ::setenv("LT_CACHE_DIR", "off", /*overwrite=*/0);
  auto threads = lt::bench::apply_thread_budget();
  benchmark::Initialize(&argc, argv);
  std::vector<std::string> names;
  try {
    for (const auto& d : runtime().devices()) names.push_back(d.backend());
  } catch (const lt::Error& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    return 1;
  }
  for (const auto& name : names) {
    benchmark::RegisterBenchmark(("TrainStep/mlp784_512_512_10/b128/sgd/" + name).c_str(),
                                 BM_TrainStep, name)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  // The comparison the brief asks for, on stderr so --benchmark_format=json stays clean.
  auto& m = ms_per_step();
  if (m.count("cpu_eager")) {
    for (const auto& [name, ms] : m) {
      std::fprintf(stderr, "ratio %s / cpu_eager: %.3f (%.3f ms vs %.3f ms per step)\n",
                   name.c_str(), ms / m["cpu_eager"], ms, m["cpu_eager"]);
    }
  }
  return 0;
}
