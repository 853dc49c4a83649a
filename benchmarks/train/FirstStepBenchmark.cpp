// FirstStepBenchmark.cpp — what background compiles (config background_compile) buy: the GPT
// training step of lt-run (2 layers, width 128, batch 16, context 64) in a fresh runtime, its
// first step's latency and its steady step time, three ways: cpu_eager (nothing to compile),
// cpu_jit compiling before the first step runs (the default), and cpu_jit with
// LT_BACKGROUND_COMPILE=1 (the first steps run on cpu_eager while LLVM compiles on a thread; the
// steady figure is taken once the compiled plan runs). The persistent compile cache is off
// (LT_CACHE_DIR=off), so every first step is a cold compile. Counters: first_step_ms,
// steady_step_ms, eager_steps (steps the stand-in ran before the switch).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "lazytensor/models/train_step.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kBatch = 16, kVocab = 64;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void BM_FirstStep(benchmark::State& state, std::string backend, bool background) {
  ::setenv("LT_CACHE_DIR", "off", 1);
  ::setenv("LT_BACKGROUND_COMPILE", background ? "1" : "0", 1);
  double first = 0, steady = 0, eager = 0;
  for (auto _ : state) {
    lt::RuntimeOptions o;
    o.device = backend;
    lt::Runtime rt = lt::Runtime::create(o);
    lt::Device dev = rt.default_device();
    lt::models::GptConfig c;
    c.vocab = kVocab;
    c.layers = 2;
    c.dim = 128;
    c.heads = 4;
    c.context = 64;
    lt::models::GptTraining gpt(dev, c);
    std::vector<int64_t> tokens(20000);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>(i * 7919 % kVocab);
    uint64_t step = 0;
    auto run = [&] { return gpt.step(tokens, kBatch, 1, step++).loss.item<float>(); };
    auto t0 = Clock::now();
    run();
    first += ms_since(t0);
    // With background compiles, steps run on the stand-in until their graph's compile is in
    // (the first step's graph and the steady one differ: the optimizer's state starts in the
    // first): run until a step runs compiled, i.e. adds no eager step.
    auto eager_steps = [&] {
      try {
        return rt.metric("background_compile.eager_steps");
      } catch (const lt::Error&) {
        return 0.0;
      }
    };
    for (double before = -1; background && eager_steps() != before;) {
      before = eager_steps();
      run();
    }
    if (background) eager += eager_steps();
    const int steps = 10;
    t0 = Clock::now();
    for (int i = 0; i < steps; ++i) run();
    steady += ms_since(t0) / steps;
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["first_step_ms"] = first / n;
  state.counters["steady_step_ms"] = steady / n;
  if (background) state.counters["eager_steps"] = eager / n;
  ::unsetenv("LT_BACKGROUND_COMPILE");
}

BENCHMARK_CAPTURE(BM_FirstStep, cpu_eager, std::string("cpu_eager"), false)
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_FirstStep, cpu_jit, std::string("cpu_jit"), false)
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_FirstStep, cpu_jit_background, std::string("cpu_jit"), true)
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
