// tpu_sim_bench.cpp — host wall time of the tpu_sim executor against the simulated TPU time
// of the same program (counters), for square matmuls and one MLP training step.
// Run with --benchmark_format=json for the counters as JSON.
#include <benchmark/benchmark.h>

#include <random>

#include "plugin_harness.hpp"
#include "roofline.h"

namespace {

using lt::plugin_test::Attr;
using lt::plugin_test::GraphBuilder;
using lt::plugin_test::Session;

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// Compiles `g`, runs it each iteration, and reports the cost model's figures as counters.
void run_graph(benchmark::State& state, GraphBuilder& g,
               const std::vector<std::vector<float>>& inputs,
               const std::vector<size_t>& output_numels, const char* preset) {
  const lt_plugin_api* api = lt::plugin_test::load_api(LT_TPU_SIM_PLUGIN);
  if (!api) return state.SkipWithError("cannot load the tpu_sim plugin");
  Session s(api);
  if (!s.create({{"preset", preset}}).ok()) return state.SkipWithError("create failed");
  lt_plugin_executable* exe = nullptr;
  auto st = s.compile(g.graph(), &exe);
  if (!st.ok()) return state.SkipWithError(st.message.c_str());
  std::vector<lt_plugin_buffer*> ins, outs;
  for (auto& v : inputs) ins.push_back(s.upload(v));
  for (size_t n : output_numels) {
    lt_plugin_buffer* b = nullptr;
    s.alloc(n * sizeof(float), &b);
    outs.push_back(b);
  }
  for (auto _ : state) {
    auto r = s.execute(exe, ins, outs);
    if (!r.ok()) return state.SkipWithError(r.message.c_str());
  }
  auto m = s.stats(exe);
  state.counters["simulated_ns"] = m["simulated_ns"];
  state.counters["mxu_utilization"] = m["mxu_utilization"];
  state.counters["hbm_bytes"] = m["hbm_bytes"];
  state.counters["tpu_flops"] = m["flops"];
  state.counters["host_flops_per_s"] =
      benchmark::Counter(m["flops"], benchmark::Counter::kIsIterationInvariantRate);
  state.counters["simulated_tflops"] =
      m["simulated_ns"] > 0 ? m["flops"] / m["simulated_ns"] / 1e3 : 0.0;
  // The host's roofline of the same work (the simulator runs it on the host's cores; the
  // simulated chip's own is mxu_utilization): the program's flops and its HBM traffic.
  lt::bench::report(state, m["flops"], m["hbm_bytes"]);
  for (auto* b : ins) s.free(b);
  for (auto* b : outs) s.free(b);
  s.destroy(exe);
}

void BM_Matmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  GraphBuilder g;
  int32_t a = g.input(LT_DTYPE_F32, {n, n});
  int32_t b = g.input(LT_DTYPE_F32, {n, n});
  g.output(g.op("matmul", LT_DTYPE_F32, {n, n}, {a, b}));
  run_graph(state, g, {random_floats(size_t(n * n), 1), random_floats(size_t(n * n), 2)},
            {size_t(n * n)}, "v4");
}
BENCHMARK(BM_Matmul)->Arg(128)->Arg(129)->Arg(256)->Arg(512)->Arg(1024)->Unit(
    benchmark::kMillisecond);

// One SGD step of a 784-512-10 MLP with softmax cross-entropy on a batch: forward, backward
// (transposes through permute) and the weight update, as one graph (one "mark step").
void BM_MlpStep(benchmark::State& state) {
  const int64_t B = state.range(0), I = 784, H = 512, O = 10;
  GraphBuilder g;
  const auto F = LT_DTYPE_F32;
  int32_t x = g.input(F, {B, I}), y = g.input(F, {B, O});
  int32_t w1 = g.input(F, {I, H}), b1 = g.input(F, {H});
  int32_t w2 = g.input(F, {H, O}), b2 = g.input(F, {O});
  int32_t lr = g.input(F, {});
  int32_t h0 = g.op("matmul", F, {B, H}, {x, w1});
  int32_t h1 = g.op("add", F, {B, H}, {h0, b1});
  int32_t h = g.op("relu", F, {B, H}, {h1});
  int32_t z0 = g.op("matmul", F, {B, O}, {h, w2});
  int32_t z = g.op("add", F, {B, O}, {z0, b2});
  int32_t p = g.op("softmax", F, {B, O}, {z}, {Attr::Int("axis", 1)});
  int32_t dz = g.op("sub", F, {B, O}, {p, y});
  int32_t ht = g.op("permute", F, {H, B}, {h}, {Attr::Ints("perm", {1, 0})});
  int32_t dw2 = g.op("matmul", F, {H, O}, {ht, dz});
  int32_t db2 = g.op("sum", F, {O}, {dz}, {Attr::Ints("axes", {0}), Attr::Int("keepdims", 0)});
  int32_t w2t = g.op("permute", F, {O, H}, {w2}, {Attr::Ints("perm", {1, 0})});
  int32_t dh0 = g.op("matmul", F, {B, H}, {dz, w2t});
  int32_t zero = g.op("full", F, {}, {}, {Attr::Float("value", 0)});
  int32_t mask = g.op("gt", LT_DTYPE_BOOL, {B, H}, {h1, zero});
  int32_t dh = g.op("where", F, {B, H}, {mask, dh0, zero});
  int32_t xt = g.op("permute", F, {I, B}, {x}, {Attr::Ints("perm", {1, 0})});
  int32_t dw1 = g.op("matmul", F, {I, H}, {xt, dh});
  int32_t db1 = g.op("sum", F, {H}, {dh}, {Attr::Ints("axes", {0}), Attr::Int("keepdims", 0)});
  auto update = [&](int32_t w, int32_t dw, std::vector<int64_t> shape) {
    int32_t step = g.op("mul", F, shape, {dw, lr});
    g.output(g.op("sub", F, shape, {w, step}));
  };
  update(w1, dw1, {I, H});
  update(b1, db1, {H});
  update(w2, dw2, {H, O});
  update(b2, db2, {O});
  std::vector<float> yv(size_t(B * O), 0.f);
  for (int64_t i = 0; i < B; ++i) yv[size_t(i * O + i % O)] = 1.f;
  run_graph(state, g,
            {random_floats(size_t(B * I), 1),
             yv,
             random_floats(size_t(I * H), 2),
             random_floats(size_t(H), 3),
             random_floats(size_t(H * O), 4),
             random_floats(size_t(O), 5),
             {0.01f}},
            {size_t(I * H), size_t(H), size_t(H * O), size_t(O)}, "v4");
}
BENCHMARK(BM_MlpStep)->Arg(128)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
