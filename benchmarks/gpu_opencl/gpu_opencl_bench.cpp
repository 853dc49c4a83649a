// gpu_opencl_bench.cpp — steady-state time of six workloads (the cpu_jit set) through the
// core on gpu_opencl and on cpu_eager; each gpu_opencl run also reports
// speedup_vs_cpu_eager = cpu_eager time / gpu_opencl time measured in the same process.
// Inputs are uploaded once; an iteration records the ops, materialises the result (a
// compile-cache hit after the first) and frees it. --benchmark_format=json for JSON.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lazytensor/lt.h"
#include "bench_runtime.h"
#include "roofline.h"

namespace {

// One runtime per backend for the whole process, with fallback refused so a number is
// never silently measured on another backend.
lt_device* device_for(const std::string& backend, std::string* err) {
  lt::RuntimeOptions o = lt::bench::runtime_options("error", backend);
  o.plugin_path = LT_PLUGIN_DIR;
  lt::Runtime* rt = lt::bench::try_runtime(o, err);
  return rt ? lt_runtime_default_device(rt->get()) : nullptr;
}

struct Check {
  std::string* err;
  bool ok = true;
  void operator()(lt_error* e) {
    if (!e) return;
    if (ok) *err = lt_error_message(e);
    ok = false;
    lt_error_destroy(e);
  }
};

lt_tensor* upload(lt_device* d, std::vector<int64_t> shape, float scale, Check& c) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i));
  lt_tensor* t = nullptr;
  c(lt_tensor_from_host(d, LT_DTYPE_F32, shape.data(), shape.size(), v.data(), v.size() * 4, &t));
  if (t) c(lt_tensor_materialize(t));
  return t;
}

// A workload: uploads its inputs, then `step` records the ops and returns the result.
struct Workload {
  std::vector<std::vector<int64_t>> inputs;
  std::function<lt_tensor*(const std::vector<lt_tensor*>&, std::vector<lt_tensor*>&, Check&)> step;
};

// Owns the intermediate handles of one step.
lt_tensor* keep(std::vector<lt_tensor*>& tmp, lt_tensor* t) {
  tmp.push_back(t);
  return t;
}

Workload elementwise_chain() {
  return {{{4 << 20}, {4 << 20}}, [](auto& in, auto& tmp, Check& c) {
            lt_tensor *t = nullptr, *x = in[0], *y = in[1];
            c(lt_mul(x, y, &t));
            x = keep(tmp, t);
            c(lt_add(x, y, &t));
            x = keep(tmp, t);
            c(lt_tanh(x, &t));
            x = keep(tmp, t);
            c(lt_mul(x, in[0], &t));
            x = keep(tmp, t);
            c(lt_exp(x, &t));
            x = keep(tmp, t);
            c(lt_sub(x, y, &t));
            x = keep(tmp, t);
            c(lt_relu(x, &t));
            x = keep(tmp, t);
            c(lt_sigmoid(x, &t));
            return keep(tmp, t);
          }};
}

Workload softmax() {
  return {{{4096, 1024}}, [](auto& in, auto& tmp, Check& c) {
            lt_tensor* t = nullptr;
            c(lt_softmax(in[0], 1, &t));
            return keep(tmp, t);
          }};
}

Workload layernorm_gelu() {
  return {{{1024, 768}, {768}, {768}}, [](auto& in, auto& tmp, Check& c) {
            const int64_t axis = 1;
            lt_tensor *m = nullptr, *d = nullptr, *sq = nullptr, *v = nullptr, *eps = nullptr,
                      *ve = nullptr, *r = nullptr, *y = nullptr, *g = nullptr, *b = nullptr,
                      *o = nullptr;
            c(lt_mean(in[0], &axis, 1, 1, &m));
            keep(tmp, m);
            c(lt_sub(in[0], m, &d));
            keep(tmp, d);
            c(lt_mul(d, d, &sq));
            keep(tmp, sq);
            c(lt_mean(sq, &axis, 1, 1, &v));
            keep(tmp, v);
            c(lt_full(lt_tensor_device(in[0]), nullptr, 0, 1e-5, LT_DTYPE_F32, &eps));
            keep(tmp, eps);
            c(lt_add(v, eps, &ve));
            keep(tmp, ve);
            c(lt_rsqrt(ve, &r));
            keep(tmp, r);
            c(lt_mul(d, r, &y));
            keep(tmp, y);
            c(lt_mul(y, in[1], &g));
            keep(tmp, g);
            c(lt_add(g, in[2], &b));
            keep(tmp, b);
            c(lt_gelu(b, &o));
            return keep(tmp, o);
          }};
}

Workload matmul() {
  return {{{1024, 1024}, {1024, 1024}}, [](auto& in, auto& tmp, Check& c) {
            lt_tensor* t = nullptr;
            c(lt_matmul(in[0], in[1], &t));
            return keep(tmp, t);
          }};
}

// STREAM triad a = b + s*c on 4M f32: the memory-bandwidth reference of the cpu_jit set.
Workload triad() {
  return {{{4 << 20}, {4 << 20}}, [](auto& in, auto& tmp, Check& c) {
            lt_tensor *s = nullptr, *sc = nullptr, *a = nullptr;
            c(lt_full(lt_tensor_device(in[0]), nullptr, 0, 3.0, LT_DTYPE_F32, &s));
            keep(tmp, s);
            c(lt_mul(s, in[1], &sc));
            keep(tmp, sc);
            c(lt_add(in[0], sc, &a));
            return keep(tmp, a);
          }};
}

// LSTM cell as in the cpu_jit set: batch 32, input 128, hidden 200, 50 steps traced in a
// loop with one lt_sync per step (gates = x*W + h*U + b, sliced into i, f, g, o).
Workload lstm() {
  constexpr int64_t B = 32, I = 128, H = 200, T = 50;
  return {{{B, I}, {I, 4 * H}, {H, 4 * H}, {4 * H}}, [](auto& in, auto& tmp, Check& c) {
            lt_device* d = lt_tensor_device(in[0]);
            const int64_t hs[2] = {B, H};
            lt_tensor *h = nullptr, *cs = nullptr;
            c(lt_full(d, hs, 2, 0.0, LT_DTYPE_F32, &h));
            c(lt_full(d, hs, 2, 0.0, LT_DTYPE_F32, &cs));
            for (int64_t t = 0; t < T && c.ok; ++t) {
              lt_tensor *xw = nullptr, *hu = nullptr, *s1 = nullptr, *gates = nullptr;
              c(lt_matmul(in[0], in[1], &xw));
              c(lt_matmul(h, in[2], &hu));
              c(lt_add(xw, hu, &s1));
              c(lt_add(s1, in[3], &gates));
              lt_tensor* g[4] = {};
              for (int k = 0; k < 4; ++k) {
                int64_t starts[2] = {0, k * H}, stops[2] = {B, (k + 1) * H}, steps[2] = {1, 1};
                c(lt_slice(gates, starts, stops, steps, 2, &g[k]));
              }
              lt_tensor *ig = nullptr, *fg = nullptr, *gg = nullptr, *og = nullptr, *fc = nullptr,
                        *ic = nullptr, *c2 = nullptr, *tc = nullptr, *h2 = nullptr;
              c(lt_sigmoid(g[0], &ig));
              c(lt_sigmoid(g[1], &fg));
              c(lt_tanh(g[2], &gg));
              c(lt_sigmoid(g[3], &og));
              c(lt_mul(fg, cs, &fc));
              c(lt_mul(ig, gg, &ic));
              c(lt_add(fc, ic, &c2));
              c(lt_tanh(c2, &tc));
              c(lt_mul(og, tc, &h2));
              for (lt_tensor* z :
                   {xw, hu, s1, gates, g[0], g[1], g[2], g[3], ig, fg, gg, og, fc, ic, tc, h, cs})
                if (z) lt_tensor_free(z);
              h = h2;
              cs = c2;
              c(lt_sync(d));
            }
            if (cs) keep(tmp, cs);
            return h ? keep(tmp, h) : nullptr;
          }};
}

// Inputs of one workload on one backend's device.
struct Session {
  std::vector<lt_tensor*> inputs;
  lt_device* dev = nullptr;
  ~Session() {
    for (lt_tensor* t : inputs) lt_tensor_free(t);
  }
};

bool setup(Session& s, const Workload& w, const std::string& backend, std::string* err) {
  s.dev = device_for(backend, err);
  if (!s.dev) return false;
  Check c{err};
  for (auto& shape : w.inputs) s.inputs.push_back(upload(s.dev, shape, 1.0f, c));
  return c.ok;
}

bool run_once(Session& s, const Workload& w, std::string* err) {
  Check c{err};
  std::vector<lt_tensor*> tmp;
  lt_tensor* out = w.step(s.inputs, tmp, c);
  if (out) c(lt_tensor_materialize(out));
  for (lt_tensor* t : tmp) lt_tensor_free(t);
  return c.ok;
}

// Mean seconds per run after a warm-up; < 0 with `err` set on failure.
double seconds_per_run(Session& s, const Workload& w, std::string* err) {
  if (!run_once(s, w, err)) return -1;  // warm-up: compile
  int runs = 0;
  auto t0 = std::chrono::steady_clock::now();
  double el = 0;
  while (runs < 3 || (el < 1.0 && runs < 50)) {
    if (!run_once(s, w, err)) return -1;
    ++runs;
    el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return el / runs;
}

// Flops and minimum bytes of one step of each workload, for the roofline (roofline.h): the
// same accounting as cpu_jit_bench's rows of the same workloads.
std::pair<double, double> cost(Workload (*make)()) {
  const double n = 4 << 20;
  if (make == elementwise_chain) return {8 * n, 12 * n};  // 8 ops; reads x, y, writes one
  if (make == triad) return {2 * n, 12 * n};
  if (make == softmax) return {5.0 * 4096 * 1024, 8.0 * 4096 * 1024};
  if (make == layernorm_gelu) return {20.0 * 1024 * 768, 8.0 * 1024 * 768 + 8.0 * 768};
  if (make == matmul) return {2.0 * 1024 * 1024 * 1024, 12.0 * 1024 * 1024};
  const double B = 32, I = 128, H = 200, T = 50;  // lstm
  return {T * (2 * B * (I + H) * 4 * H + 10 * B * 4 * H),
          4 * ((I + H) * 4 * H + 4 * H + B * I) + T * 4 * 4 * B * H};
}

void bench(benchmark::State& state, Workload (*make)(), const char* backend) {
  Workload w = make();
  Session s;
  std::string err;
  if (!setup(s, w, backend, &err)) return state.SkipWithError(err.c_str());
  if (!run_once(s, w, &err)) return state.SkipWithError(err.c_str());  // compile
  for (auto _ : state) {
    if (!run_once(s, w, &err)) return state.SkipWithError(err.c_str());
  }
  state.SetLabel(backend);
  lt::bench::report(state, cost(make).first, cost(make).second);
  if (std::string(backend) == "gpu_opencl") {
    Session e;
    std::string eerr;
    double eager = setup(e, w, "cpu_eager", &eerr) ? seconds_per_run(e, w, &eerr) : -1;
    double self = seconds_per_run(s, w, &err);
    if (eager > 0 && self > 0) state.counters["speedup_vs_cpu_eager"] = eager / self;
    if (eager > 0) state.counters["cpu_eager_ms"] = eager * 1e3;
  }
}

#define LT_BENCH(fn)                                          \
  BENCHMARK_CAPTURE(bench, fn##_gpu_opencl, fn, "gpu_opencl") \
      ->Unit(benchmark::kMillisecond)                         \
      ->UseRealTime();                                        \
  BENCHMARK_CAPTURE(bench, fn##_cpu_eager, fn, "cpu_eager")   \
      ->Unit(benchmark::kMillisecond)                         \
      ->UseRealTime();

LT_BENCH(elementwise_chain)
LT_BENCH(triad)
LT_BENCH(softmax)
LT_BENCH(layernorm_gelu)
LT_BENCH(matmul)
LT_BENCH(lstm)

}  // namespace

BENCHMARK_MAIN();
