// AsyncStepBenchmark.cpp — trace/execute overlap of config async_execution in a training loop:
// an MLP (SGD, lt_sync per step) run once with synchronous execution, timing the trace (forward,
// backward, update recorded) and the lt_sync (collect, cache lookup, execute) of every step
// apart, and once with async_execution, timing whole steps; run_ms is the plans' own run time
// (metric execute_ms). Shapes: execute-bound, balanced, trace-bound, and balanced plus 1 ms of
// simulated device time that leaves the host's cores free. Overlap shows as an async step shorter
// than trace + execute; the ratios (medians over repetitions) are printed at the end on stderr.
#include <algorithm>
#include <cstdlib>
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_runtime.h"
#include "lazytensor/autograd.hpp"
#include "lazytensor/models/mlp.hpp"
#include "lazytensor/nn.hpp"
#include "lazytensor/optim.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// One runtime per mode; LT_ASYNC_EXECUTION is read when a runtime is created.
lt::Runtime& runtime(bool async) {
  ::setenv("LT_ASYNC_EXECUTION", async ? "1" : "0", 1);
  return lt::bench::runtime(lt::bench::runtime_options("silent"), async ? "async" : "sync");
}

// "bench.device_time": copies its input after sleeping 1 ms, i.e. time a device spends on the
// step without using the host's cores (an accelerator's kernels; on this VM every backend
// computes on the same two cores the host traces on). Run by the core on the worker.
lt_status_code device_time_infer(lt_custom_op_args* a) {
  a->out_dtype = a->inputs[0].dtype;
  a->out_rank = a->inputs[0].rank;
  for (size_t i = 0; i < a->out_rank; ++i) a->out_shape[i] = a->inputs[0].shape[i];
  return LT_STATUS_OK;
}
lt_status_code device_time_kernel(lt_custom_op_args* a) {
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::memcpy(a->out_data, a->inputs[0].data, a->out_nbytes);
  return LT_STATUS_OK;
}
void register_device_time() {
  static bool once = [] {
    lt_custom_op_def d{};
    d.struct_size = LT_CUSTOM_OP_DEF_STRUCT_SIZE;
    d.name = "bench.device_time";
    d.min_inputs = d.max_inputs = 1;
    d.infer = device_time_infer;
    d.cpu_kernel = device_time_kernel;
    lt::check(lt_register_custom_op(&d));
    return true;
  }();
  (void)once;
}

// Per configuration and mode, one entry per repetition (medians are printed at the end).
struct Figures {
  std::vector<double> trace_ms, sync_ms, step_ms;
};
std::map<std::string, Figures>& figures() {
  static std::map<std::string, Figures> f;
  return f;
}
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
std::string config_name(int64_t batch, int64_t width, int64_t depth) {
  return "b" + std::to_string(batch) + "_w" + std::to_string(width) + "_d" + std::to_string(depth);
}

// state.range(0): batch, (1): width, (2): hidden layers, (3): 1 ms of simulated device time
// per step (bench.device_time on the loss) or none.
void BM_Step(benchmark::State& state, std::string device, bool async) {
  lt::Device dev = runtime(async).find_device(device);
  const int64_t batch = state.range(0), width = state.range(1);
  std::vector<int64_t> widths(static_cast<size_t>(state.range(2)) + 2, width);
  widths.front() = 256;
  widths.back() = 10;
  lt::models::Mlp model(dev, widths, 1);
  model.materialize();
  lt::optim::SGD opt(model.parameters(), 0.01);
  std::mt19937 gen(1);
  std::normal_distribution<float> n(0, 1);
  std::vector<float> xs(static_cast<size_t>(batch * 256)), ys(static_cast<size_t>(batch * 10));
  for (float& v : xs) v = n(gen);
  for (int64_t i = 0; i < batch; ++i) ys[static_cast<size_t>(i * 10 + i % 10)] = 1.0f;
  lt::Tensor x = lt::Tensor::from(dev, xs, {batch, 256}),
             y = lt::Tensor::from(dev, ys, {batch, 10});
  lt::Tensor loss, device_time;
  const bool simulated = state.range(3) != 0;
  if (simulated) register_device_time();
  auto trace = [&] {
    loss = lt::nn::cross_entropy(model(x), y);
    if (simulated) device_time = lt::apply(dev, "bench.device_time", {loss});
    lt::backward(loss);
    opt.step();
  };
  for (int i = 0; i < 3; ++i) trace(), lt::sync(dev);  // compile and warm up, untimed
  (void)loss.item<float>();
  double trace_ns = 0, sync_ns = 0;
  auto run_ms = [&] {  // plans' run time so far (waits for queued steps)
    double v = 0;
    lt::check(lt_metric_get(runtime(async).get(), "execute_ms", &v));
    return v;
  };
  const double run0 = run_ms();
  auto t0 = Clock::now();
  for (auto _ : state) {
    auto a = Clock::now();
    trace();
    auto b = Clock::now();
    lt::sync(dev);
    auto c = Clock::now();
    trace_ns += std::chrono::duration<double, std::nano>(b - a).count();
    sync_ns += std::chrono::duration<double, std::nano>(c - b).count();
  }
  benchmark::DoNotOptimize(loss.item<float>());  // the last step has run
  const double iters = static_cast<double>(state.iterations());
  const double step_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / iters;
  state.counters["run_ms"] = (run_ms() - run0) / iters;  // the plans' execution alone
  Figures& f = figures()[device + "/" + config_name(batch, width, state.range(2)) +
                         (simulated ? "_device1ms" : "") + (async ? "/async" : "/sync")];
  f.trace_ms.push_back(trace_ns / 1e6 / iters);
  f.sync_ms.push_back(sync_ns / 1e6 / iters);
  f.step_ms.push_back(step_ms);
  state.counters["trace_ms"] = f.trace_ms.back();
  state.counters["sync_ms"] = f.sync_ms.back();  // synchronous: collect + lookup + execute
  state.counters["step_ms"] = step_ms;
}

}  // namespace

int main(int argc, char** argv) {
  ::setenv("LT_CACHE_DIR", "off", /*overwrite=*/0);
  benchmark::Initialize(&argc, argv);
  std::vector<std::string> names;
  try {
    for (const auto& d : runtime(false).devices())
      if (d.backend() == "cpu_jit" || d.backend() == "cpu_eager") names.push_back(d.backend());
  } catch (const lt::Error& e) {
    std::fprintf(stderr, "bench_async: %s\n", e.what());
    return 1;
  }
  for (const auto& name : names)
    for (bool async : {false, true})
      benchmark::RegisterBenchmark(
          ("AsyncStep/mlp256_w_d_10/" + name + (async ? "/async" : "/sync")).c_str(), BM_Step, name,
          async)
          ->ArgNames({"batch", "width", "depth", "device_ms"})
          ->Args({32, 256, 6, 0})  // execute-bound
          ->Args({16, 64, 24, 0})  // trace and execute of the same order
          ->Args({8, 32, 48, 0})   // trace-bound
          ->Args({16, 64, 24, 1})  // plus 1 ms of device time that leaves the host's cores free
          ->Iterations(300)        // fixed, so every call is a measurement (no estimation runs)
          ->Repetitions(5)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  // The overlap: an async step against trace + execute of a synchronous one (stderr, so
  // --benchmark_format=json stays clean). Below 1.0 means the host traced while the device ran.
  for (const auto& [key, fs] : figures()) {
    const std::string base = key.substr(0, key.rfind('/'));
    if (key.substr(key.rfind('/')) != "/sync" || !figures().count(base + "/async")) continue;
    const Figures& fa = figures()[base + "/async"];
    const double trace = median(fs.trace_ms), exec = median(fs.sync_ms);
    const double async_step = median(fa.step_ms);
    std::fprintf(stderr,
                 "%s: trace %.3f ms + execute (lt_sync) %.3f ms = %.3f ms; sync step %.3f ms; "
                 "async step %.3f ms; async / (trace + execute) = %.3f (medians of %zu)\n",
                 base.c_str(), trace, exec, trace + exec, median(fs.step_ms), async_step,
                 async_step / (trace + exec), fa.step_ms.size());
  }
  return 0;
}
