// cpu_jit_bench.cpp — cpu_eager vs cpu_jit through the core C API, plus STREAM-like triads
// for the machine's bandwidth (one with the chain's array size, one sized by STREAM's rule)
// and a direct cblas_sgemm for the matmul baseline; every goal of issue #3 is a ratio of
// two benchmarks of one run, and every kernel benchmark reports its roofline (roofline.h,
// issue #26). Run: cpu_jit_bench --benchmark_format=json, or tools/roofline.py (see
// docs/performance.md).
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "lazytensor/lt.h"
#include "bench_runtime.h"
#include "roofline.h"

namespace {

void check(lt_error* e) {
  if (e) {
    std::fprintf(stderr, "lt error: %s\n", lt_error_message(e));
    std::abort();
  }
}

lt_runtime* runtime() {
  return lt::bench::runtime(lt::bench::runtime_options("silent")).get();
}

lt_device* dev(const char* name) {
  lt_device* d = nullptr;
  check(lt_runtime_find_device(runtime(), name, &d));
  return d;
}

lt_tensor* host(lt_device* d, std::vector<int64_t> shape, float lo = -1, float hi = 1) {
  size_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = lo + (hi - lo) * static_cast<float>((i * 7919) % 1000) / 1000;
  lt_tensor* t = nullptr;
  check(lt_tensor_from_host(d, LT_DTYPE_F32, shape.data(), shape.size(), v.data(), n * 4, &t));
  return t;
}

lt_tensor* scalar(lt_device* d, double v) {
  lt_tensor* t = nullptr;
  check(lt_scalar(d, LT_DTYPE_F32, v, &t));
  return t;
}

const char* kDev[] = {"cpu_eager", "cpu_jit"};

// STREAM triad a = b + s·c, TBB over every core: the bandwidth reference. STREAM's rule is
// that each array is at least 4x the last-level cache, so the triad measures memory, not
// cache; kChainFloats-sized arrays (what the chain touches) partly stay in a large L3.
constexpr size_t kChainFloats = size_t{4} << 20;

size_t stream_floats() {  // 4·LLC bytes per array, in floats
  return std::max(kChainFloats, lt::bench::last_level_cache_bytes());
}

struct Triad {
  explicit Triad(size_t n) : a(n), b(n, 1.0f), c(n, 2.0f) {}
  void run() {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, a.size(), 1 << 16), [&](auto r) {
      for (size_t i = r.begin(); i < r.end(); ++i) a[i] = b[i] + 3.0f * c[i];
    });
    benchmark::DoNotOptimize(a.data());
  }
  int64_t bytes() const { return static_cast<int64_t>(a.size()) * 12; }
  std::vector<float> a, b, c;
};

// Arg 0: arrays of the chain's size; arg 1: STREAM-sized arrays (the machine's bandwidth).
void BM_Triad(benchmark::State& st) {
  Triad t(st.range(0) ? stream_floats() : kChainFloats);
  for (auto _ : st) t.run();
  st.SetBytesProcessed(int64_t(st.iterations()) * t.bytes());
  st.SetLabel(st.range(0) ? "STREAM-sized (4x LLC per array)" : "4M floats per array");
  lt::bench::report(st, 2.0 * double(t.a.size()), double(t.bytes()));
}
BENCHMARK(BM_Triad)->Arg(0)->Arg(1)->UseRealTime();

// sigmoid(x) * tanh(0.5*x + 1) + x on 4M floats (reads 4 B, writes 4 B per element).
void chain_step(lt_tensor* x, lt_tensor* h, lt_tensor* one) {
  lt_tensor *s, *m, *a, *t, *p, *r;
  check(lt_sigmoid(x, &s));
  check(lt_mul(h, x, &m));
  check(lt_add(m, one, &a));
  check(lt_tanh(a, &t));
  check(lt_mul(s, t, &p));
  check(lt_add(p, x, &r));
  check(lt_tensor_materialize(r));
  for (lt_tensor* z : {s, m, a, t, p, r}) lt_tensor_free(z);
}

void BM_Chain(benchmark::State& st) {
  lt_device* d = dev(kDev[st.range(0)]);
  lt_tensor* x = host(d, {int64_t(kChainFloats)}, -4, 4);
  lt_tensor *h = scalar(d, 0.5), *one = scalar(d, 1.0);
  for (auto _ : st) chain_step(x, h, one);
  st.SetLabel(kDev[st.range(0)]);
  lt::bench::report(st, 6.0 * kChainFloats, 8.0 * kChainFloats);
  for (lt_tensor* z : {x, h, one}) lt_tensor_free(z);
}
BENCHMARK(BM_Chain)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// The chain on cpu_jit interleaved with the STREAM-sized triad (one triad every 8 chain
// steps), so both see the same machine load: counters chain_GBps, triad_GBps and
// of_triad = chain_GBps / triad_GBps (the goal: >= 0.7). Time is the chain's.
void BM_ChainVsTriad(benchmark::State& st) {
  lt_device* d = dev("cpu_jit");
  lt_tensor* x = host(d, {int64_t(kChainFloats)}, -4, 4);
  lt_tensor *h = scalar(d, 0.5), *one = scalar(d, 1.0);
  Triad triad(stream_floats());
  double chain_s = 0, triad_s = 0;
  int64_t triads = 0;
  using clock = std::chrono::steady_clock;
  for (auto _ : st) {
    auto t0 = clock::now();
    chain_step(x, h, one);
    double s = std::chrono::duration<double>(clock::now() - t0).count();
    st.SetIterationTime(s);
    chain_s += s;
    if (st.iterations() % 8 == 0) {
      t0 = clock::now();
      triad.run();
      triad_s += std::chrono::duration<double>(clock::now() - t0).count();
      ++triads;
    }
  }
  double chain_bw = double(st.iterations()) * kChainFloats * 8 / chain_s / 1e9;
  double triad_bw = triads ? double(triads) * triad.bytes() / triad_s / 1e9 : 0;
  st.counters["chain_GBps"] = chain_bw;
  st.counters["triad_GBps"] = triad_bw;
  st.counters["of_triad"] = triad_bw > 0 ? chain_bw / triad_bw : 0;
  lt::bench::report(st, 6.0 * kChainFloats, 8.0 * kChainFloats);
  for (lt_tensor* z : {x, h, one}) lt_tensor_free(z);
}
BENCHMARK(BM_ChainVsTriad)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_Softmax(benchmark::State& st) {
  lt_device* d = dev(kDev[st.range(0)]);
  lt_tensor* x = host(d, {4096, 1024}, -5, 5);
  for (auto _ : st) {
    lt_tensor* y;
    check(lt_softmax(x, 1, &y));
    check(lt_tensor_materialize(y));
    lt_tensor_free(y);
  }
  st.SetLabel(kDev[st.range(0)]);
  // One read and one write of 4096x1024 floats; max, subtract, exp, sum, scale per element.
  lt::bench::report(st, 5.0 * 4096 * 1024, 8.0 * 4096 * 1024);
  lt_tensor_free(x);
}
BENCHMARK(BM_Softmax)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_LayerNormGelu(benchmark::State& st) {
  lt_device* d = dev(kDev[st.range(0)]);
  lt_tensor* x = host(d, {1024, 768}, -2, 3);
  lt_tensor* gamma = host(d, {768}, 0.5, 1.5);
  lt_tensor* beta = host(d, {768}, -0.1, 0.1);
  lt_tensor* eps = scalar(d, 1e-5);
  int64_t ax = 1;
  for (auto _ : st) {
    lt_tensor *mu, *dd, *d2, *var, *ve, *rs, *y, *yg, *yb, *ge;
    check(lt_mean(x, &ax, 1, 1, &mu));
    check(lt_sub(x, mu, &dd));
    check(lt_mul(dd, dd, &d2));
    check(lt_mean(d2, &ax, 1, 1, &var));
    check(lt_add(var, eps, &ve));
    check(lt_rsqrt(ve, &rs));
    check(lt_mul(dd, rs, &y));
    check(lt_mul(y, gamma, &yg));
    check(lt_add(yg, beta, &yb));
    check(lt_gelu(yb, &ge));
    check(lt_tensor_materialize(ge));
    for (lt_tensor* z : {mu, dd, d2, var, ve, rs, y, yg, yb, ge}) lt_tensor_free(z);
  }
  st.SetLabel(kDev[st.range(0)]);
  // x read once, y written once (gamma, beta negligible); about 20 operations per element
  // (two means, the normalisation, the affine map and gelu's polynomial and tanh).
  lt::bench::report(st, 20.0 * 1024 * 768, 8.0 * 1024 * 768 + 8.0 * 768);
  for (lt_tensor* z : {x, gamma, beta, eps}) lt_tensor_free(z);
}
BENCHMARK(BM_LayerNormGelu)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// LSTM cell, batch 32, input 128, hidden 200, 50 steps traced in a loop, one sequence per
// iteration (gates = x·W + h·U + b, then sliced into i, f, g, o).
void BM_Lstm(benchmark::State& st) {
  lt_device* d = dev(kDev[st.range(0)]);
  const int64_t B = 32, I = 128, H = 200, T = 50;
  lt_tensor* W = host(d, {I, 4 * H}, -0.1, 0.1);
  lt_tensor* U = host(d, {H, 4 * H}, -0.1, 0.1);
  lt_tensor* bias = host(d, {4 * H}, -0.1, 0.1);
  lt_tensor* x = host(d, {B, I});
  for (auto _ : st) {
    lt_tensor* h = host(d, {B, H}, 0, 0);
    lt_tensor* c = host(d, {B, H}, 0, 0);
    for (int64_t t = 0; t < T; ++t) {
      lt_tensor *xw, *hu, *s1, *gates;
      check(lt_matmul(x, W, &xw));
      check(lt_matmul(h, U, &hu));
      check(lt_add(xw, hu, &s1));
      check(lt_add(s1, bias, &gates));
      lt_tensor* g[4];
      for (int k = 0; k < 4; ++k) {
        int64_t starts[2] = {0, k * H}, stops[2] = {B, (k + 1) * H}, steps[2] = {1, 1};
        check(lt_slice(gates, starts, stops, steps, 2, &g[k]));
      }
      lt_tensor *ig, *fg, *gg, *og, *fc, *ic, *c2, *tc, *h2;
      check(lt_sigmoid(g[0], &ig));
      check(lt_sigmoid(g[1], &fg));
      check(lt_tanh(g[2], &gg));
      check(lt_sigmoid(g[3], &og));
      check(lt_mul(fg, c, &fc));
      check(lt_mul(ig, gg, &ic));
      check(lt_add(fc, ic, &c2));
      check(lt_tanh(c2, &tc));
      check(lt_mul(og, tc, &h2));
      for (lt_tensor* z : {xw, hu, s1, gates, g[0], g[1], g[2], g[3], ig, fg, gg, og, fc, ic, tc})
        lt_tensor_free(z);
      lt_tensor_free(h);
      lt_tensor_free(c);
      h = h2;
      c = c2;
      check(lt_sync(d));
    }
    check(lt_tensor_materialize(h));
    lt_tensor_free(h);
    lt_tensor_free(c);
  }
  st.SetLabel(kDev[st.range(0)]);
  // Per step: the two GEMMs (2·B·(I+H)·4H) and about 10 operations per gate element; the
  // weights (1 MB) stay in cache, so traffic is x, W, U, b once and h, c per step.
  const double flops = T * (2.0 * B * (I + H) * 4 * H + 10.0 * B * 4 * H);
  const double bytes = 4.0 * ((I + H) * 4 * H + 4 * H + B * I) + T * 4.0 * 4 * B * H;
  lt::bench::report(st, flops, bytes);
  for (lt_tensor* z : {W, U, bias, x}) lt_tensor_free(z);
}
BENCHMARK(BM_Lstm)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Matmul(benchmark::State& st) {
  lt_device* d = dev("cpu_jit");
  lt_tensor* a = host(d, {1024, 1024});
  lt_tensor* b = host(d, {1024, 1024});
  for (auto _ : st) {
    lt_tensor* c;
    check(lt_matmul(a, b, &c));
    check(lt_tensor_materialize(c));
    lt_tensor_free(c);
  }
  lt::bench::report(st, 2.0 * 1024 * 1024 * 1024, 12.0 * 1024 * 1024);
  lt_tensor_free(a);
  lt_tensor_free(b);
}
BENCHMARK(BM_Matmul)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_MatmulCblas(benchmark::State& st) {
  std::vector<float> a(1 << 20, 0.5f), b(1 << 20, 0.25f), c(1 << 20);
  for (auto _ : st) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1024, 1024, 1024, 1.0f, a.data(), 1024,
                b.data(), 1024, 0.0f, c.data(), 1024);
    benchmark::DoNotOptimize(c.data());
  }
  lt::bench::report(st, 2.0 * 1024 * 1024 * 1024, 12.0 * 1024 * 1024);
}
BENCHMARK(BM_MatmulCblas)->UseRealTime()->Unit(benchmark::kMillisecond);

// Row sum of 4096x1024 floats (one read, a 4096-float write): the one-pass row reduction.
void BM_RowSum(benchmark::State& st) {
  lt_device* d = dev(kDev[st.range(0)]);
  lt_tensor* x = host(d, {4096, 1024}, -1, 1);
  int64_t ax = 1;
  for (auto _ : st) {
    lt_tensor* y;
    check(lt_sum(x, &ax, 1, 0, &y));
    check(lt_tensor_materialize(y));
    lt_tensor_free(y);
  }
  st.SetLabel(kDev[st.range(0)]);
  lt::bench::report(st, 4096.0 * 1024, 4.0 * 4096 * 1024 + 4.0 * 4096);
  lt_tensor_free(x);
}
BENCHMARK(BM_RowSum)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// The other reductions of the same 16 MB input, one read each: the column sum (axis 0: the
// kernels' "innermost kept" loop), the row mean (the row sum's loop and a divide) and the row max
// (the vector max with its NaN check). PyTorch eager runs the same ops (benchmarks/pytorch/).
enum class Red { kColSum, kRowMean, kRowMax };
void reduce_16mb(benchmark::State& st, Red kind) {
  lt_device* d = dev(kDev[st.range(0)]);
  lt_tensor* x = host(d, {4096, 1024}, -1, 1);
  const int64_t ax = kind == Red::kColSum ? 0 : 1;
  const double outs = kind == Red::kColSum ? 1024 : 4096;
  for (auto _ : st) {
    lt_tensor* y;
    if (kind == Red::kRowMax)
      check(lt_max(x, &ax, 1, 0, &y));
    else if (kind == Red::kRowMean)
      check(lt_mean(x, &ax, 1, 0, &y));
    else
      check(lt_sum(x, &ax, 1, 0, &y));
    check(lt_tensor_materialize(y));
    lt_tensor_free(y);
  }
  st.SetLabel(kDev[st.range(0)]);
  lt::bench::report(st, 4096.0 * 1024, 4.0 * 4096 * 1024 + 4.0 * outs);
  lt_tensor_free(x);
}
void BM_ColSum(benchmark::State& st) {
  reduce_16mb(st, Red::kColSum);
}
void BM_RowMean(benchmark::State& st) {
  reduce_16mb(st, Red::kRowMean);
}
void BM_RowMax(benchmark::State& st) {
  reduce_16mb(st, Red::kRowMax);
}
BENCHMARK(BM_ColSum)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RowMean)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RowMax)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// MLP inference 784-512-512-10 (relu), batch = arg 1, one forward per iteration: the
// small-batch matmul/GEMV case (weights 2.6 MB read once per forward).
// MLP inference 784-512-512-10, relu between layers. BM_MlpInfer stores each weight [in, out]
// and computes x·W; BM_MlpInferLinear stores it [out, in] and computes x·Wᵀ through a permute,
// as nn::Linear does (PyTorch's layout). At batch 1 the two read the matrix in the two GEMV
// orders (y += x_i·row i, and y_o = row o · x).
void mlp_infer(benchmark::State& st, bool out_in) {
  lt_device* d = dev(kDev[st.range(0)]);
  const int64_t B = st.range(1), dims[4] = {784, 512, 512, 10};
  lt_tensor *w[3], *b[3];
  for (int l = 0; l < 3; ++l) {
    w[l] = out_in ? host(d, {dims[l + 1], dims[l]}, -0.05, 0.05)
                  : host(d, {dims[l], dims[l + 1]}, -0.05, 0.05);
    b[l] = host(d, {dims[l + 1]}, -0.1, 0.1);
  }
  lt_tensor* x = host(d, {B, dims[0]});
  const int64_t swap[2] = {1, 0};
  for (auto _ : st) {
    lt_tensor* h = lt_tensor_retain(x);
    for (int l = 0; l < 3; ++l) {
      lt_tensor *m, *a, *wt = nullptr;
      if (out_in) check(lt_permute(w[l], swap, 2, &wt));
      check(lt_matmul(h, out_in ? wt : w[l], &m));
      if (wt) lt_tensor_free(wt);
      check(lt_add(m, b[l], &a));
      lt_tensor_free(m);
      lt_tensor_free(h);
      if (l < 2) {
        check(lt_relu(a, &h));
        lt_tensor_free(a);
      } else {
        h = a;
      }
    }
    check(lt_tensor_materialize(h));
    lt_tensor_free(h);
  }
  double flops = 0, bytes = 4.0 * B * dims[0];
  for (int l = 0; l < 3; ++l) {
    flops += 2.0 * B * dims[l] * dims[l + 1] + 2.0 * B * dims[l + 1];
    bytes += 4.0 * (dims[l] * dims[l + 1] + dims[l + 1]);
  }
  bytes += 4.0 * B * dims[3];
  st.SetLabel(kDev[st.range(0)]);
  lt::bench::report(st, flops, bytes);
  for (int l = 0; l < 3; ++l) {
    lt_tensor_free(w[l]);
    lt_tensor_free(b[l]);
  }
  lt_tensor_free(x);
}
void BM_MlpInfer(benchmark::State& st) {
  mlp_infer(st, false);
}
void BM_MlpInferLinear(benchmark::State& st) {
  mlp_infer(st, true);
}
BENCHMARK(BM_MlpInfer)
    ->ArgsProduct({{0, 1}, {1, 8, 64}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MlpInferLinear)
    ->ArgsProduct({{0, 1}, {1, 8, 64}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Multi-head attention forward, batch 8, 4 heads, 128 tokens, head width 64:
// softmax(q·kᵀ / 8) · v on [8, 4, 128, 64] tensors.
void BM_Attention(benchmark::State& st) {
  lt_device* d = dev(kDev[st.range(0)]);
  const int64_t B = 8, H = 4, T = 128, D = 64;
  lt_tensor* q = host(d, {B, H, T, D});
  lt_tensor* k = host(d, {B, H, D, T});  // keys stored transposed, as a projection writes them
  lt_tensor* v = host(d, {B, H, T, D});
  lt_tensor* scale = scalar(d, 0.125);
  for (auto _ : st) {
    lt_tensor *s, *ss, *p, *o;
    check(lt_matmul(q, k, &s));
    check(lt_mul(s, scale, &ss));
    check(lt_softmax(ss, 3, &p));
    check(lt_matmul(p, v, &o));
    check(lt_tensor_materialize(o));
    for (lt_tensor* z : {s, ss, p, o}) lt_tensor_free(z);
  }
  st.SetLabel(kDev[st.range(0)]);
  const double flops = 2.0 * 2.0 * B * H * T * T * D + 5.0 * B * H * T * T;
  lt::bench::report(st, flops, 4.0 * 4.0 * B * H * T * D);
  for (lt_tensor* z : {q, k, v, scale}) lt_tensor_free(z);
}
BENCHMARK(BM_Attention)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// A 50-node fused elementwise graph, a new shape every iteration so every one compiles.
void BM_Compile50(benchmark::State& st) {
  lt_device* d = dev("cpu_jit");
  int64_t n = 1000;
  for (auto _ : st) {
    st.PauseTiming();
    lt_tensor* x = host(d, {++n});
    st.ResumeTiming();
    lt_tensor* v = lt_tensor_retain(x);
    for (int i = 0; i < 50; ++i) {
      lt_tensor* w;
      switch (i % 5) {
        case 0:
          check(lt_exp(v, &w));
          break;
        case 1:
          check(lt_tanh(v, &w));
          break;
        case 2:
          check(lt_mul(v, x, &w));
          break;
        case 3:
          check(lt_sigmoid(v, &w));
          break;
        default:
          check(lt_add(v, x, &w));
          break;
      }
      lt_tensor_free(v);
      v = w;
    }
    check(lt_tensor_materialize(v));
    lt_tensor_free(v);
    lt_tensor_free(x);
  }
}
BENCHMARK(BM_Compile50)->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(20);

}  // namespace

int main(int argc, char** argv) {
  // Compile times are measured cold: the persistent compile cache is off unless LT_CACHE_DIR
  // names one (docs/compile-cache.md).
  ::setenv("LT_CACHE_DIR", "off", /*overwrite=*/0);
  auto threads = lt::bench::apply_thread_budget();
  runtime();  // created here, after the settings above
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
