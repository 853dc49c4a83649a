// GptStepBenchmark.cpp — one training step of the character-level GPT of lt-run --model gpt
// at its default size (4 layers, width 256, 4 heads, context 128, batch 32, vocabulary 96:
// forward + backward + gradient clipping + AdamW update + lt_sync, a cached graph) on every
// loaded backend, and a plain OpenBLAS sgemm of 1024^3 in the same run as the machine's GEMM
// limit. Counters: tokens/s, GFLOP/s (model FLOPs: 3x the forward multiply-adds x2) and that
// as a fraction of the sgemm's GFLOP/s; tpu_sim adds its simulated step time and MXU
// utilisation, once per preset (v2, v3, v4: the simulated figures are the point there; the
// host time is the simulator's). Pick backends with --benchmark_filter (gpu_opencl on PoCL
// compiles the step for minutes the first time).
#include <cstdlib>
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lazytensor/amp.hpp"
#include "lazytensor/models/train_step.hpp"
#include "bench_runtime.h"
#include "roofline.h"

namespace {

constexpr int64_t kBatch = 32, kVocab = 96;

lt::Runtime& runtime() {
  return lt::bench::runtime();
}

// A runtime whose tpu_sim uses `preset` (a config file naming it), made once per preset.
lt::Runtime& runtime(const std::string& preset) {
  if (preset.empty()) return runtime();
  auto path = std::filesystem::temp_directory_path() / ("bench_gpt_tpu_sim_" + preset + ".toml");
  lt::RuntimeOptions o;
  o.config_path = path.string();
  std::ofstream(path) << "[plugins.tpu_sim]\npreset = \"" << preset << "\"\n";
  lt::Runtime& rt = lt::bench::runtime(o);  // read once, at its first use
  std::filesystem::remove(path);
  return rt;
}

double& sgemm_gflops() {
  static double g = 0;
  return g;
}

void BM_Sgemm(benchmark::State& state) {
  const int n = 1024;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  auto run = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
  };
  run();
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) run();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sgemm_gflops() = 2.0 * n * n * n * static_cast<double>(state.iterations()) / s / 1e9;
  state.counters["GFLOP/s"] = sgemm_gflops();
}

double plugin_total(lt::Runtime& rt, const std::string& backend, const char* stat) {
  try {
    return rt.metric("plugin." + backend + ".total." + stat);
  } catch (const lt::Error&) {
    return 0;
  }
}

void BM_GptStep(benchmark::State& state, std::string backend, std::string preset,
                lt::DType precision) {
  lt::amp::Autocast autocast(precision);  // bf16: matmuls in bf16, f32 accumulation
  lt::Runtime& rt = runtime(preset);
  lt::Device dev = rt.find_device(backend);
  lt::models::GptConfig c;
  c.vocab = kVocab;
  lt::models::GptTraining gpt(dev, c);
  lt::models::Gpt& model = gpt.model();
  std::vector<lt::Tensor*> params = gpt.parameters();
  std::vector<int64_t> tokens(100000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>(i * 7919 % kVocab);
  uint64_t step = 0;
  lt::models::StepOptions clipped;
  clipped.clip = 1.0;
  auto run = [&] { return gpt.step(tokens, kBatch, 1, step++, clipped).loss; };
  auto tc = std::chrono::steady_clock::now();
  run();  // compiles
  state.counters["compile_s"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - tc).count();
  const double sim0 = plugin_total(rt, backend, "simulated_ns"),
               flop0 = plugin_total(rt, backend, "flops");
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(run().get());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double iters = static_cast<double>(state.iterations());
  const double gflops = model.train_flops(kBatch, c.context) * iters / s / 1e9;
  state.counters["tokens/s"] = static_cast<double>(kBatch * c.context) * iters / s;
  state.counters["GFLOP/s"] = gflops;
  if (sgemm_gflops() > 0) state.counters["of_sgemm"] = gflops / sgemm_gflops();
  // Roofline: the model's FLOPs; traffic the parameters read in the forward and backward
  // passes, their gradients written and read, and AdamW's two moments read and written, with
  // the weights updated (8 passes over 4-byte parameters); activations are not counted.
  double nparams = 0;
  for (lt::Tensor* p : params) nparams += static_cast<double>(p->numel());
  state.SetLabel(backend);
  lt::bench::report(state, model.train_flops(kBatch, c.context), 8.0 * 4.0 * nparams);
  const double sim = plugin_total(rt, backend, "simulated_ns") - sim0;
  if (sim > 0) {
    const double peak = plugin_total(rt, backend, "peak_tflops") * 1e12;
    state.counters["simulated_step_ms"] = sim / 1e6 / iters;
    if (peak > 0)
      state.counters["mxu_utilization"] =
          (plugin_total(rt, backend, "flops") - flop0) / (sim * 1e-9 * peak);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Compile times are measured cold: the persistent compile cache is off unless LT_CACHE_DIR
  // names one (docs/compile-cache.md).
  ::setenv("LT_CACHE_DIR", "off", /*overwrite=*/0);
  auto threads = lt::bench::apply_thread_budget();
  benchmark::Initialize(&argc, argv);
  benchmark::RegisterBenchmark("Sgemm/1024", BM_Sgemm)->Unit(benchmark::kMillisecond);
  try {
    for (const auto& d : runtime().devices()) {
      if (d.backend() == "tpu_sim") {
        for (const char* preset : {"v2", "v3", "v4"})
          for (lt::DType p : {lt::f32, lt::bf16})
            benchmark::RegisterBenchmark(("GptStep/l4_w256_h4_t128_b32/tpu_sim_" +
                                          std::string(preset) + "/" + lt::dtype_name(p))
                                             .c_str(),
                                         BM_GptStep, d.backend(), std::string(preset), p)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime()
                ->MinTime(2.0);
        continue;
      }
      for (lt::DType p : {lt::f32, lt::bf16})
        benchmark::RegisterBenchmark(
            ("GptStep/l4_w256_h4_t128_b32/" + d.backend() + "/" + lt::dtype_name(p)).c_str(),
            BM_GptStep, d.backend(), std::string(), p)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime()
            ->MinTime(5.0);
    }
  } catch (const lt::Error& e) {
    std::fprintf(stderr, "bench_gpt: %s\n", e.what());
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
