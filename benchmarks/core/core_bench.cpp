// core_bench.cpp — core overheads: recording one op (goal < 1 us, aim 200 ns), a cache-hit sync
// of a 100-node graph, and a traced and synced 20,000-node chain (goal: at most 0.3 us per node),
// on the host test backend so the plugin's own cost stays small.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench_runtime.h"
#include "lazytensor/lazytensor.hpp"
#include "lazytensor/lt.h"

namespace {

lt_runtime* open_runtime(const char* plugin_dir, const char* device) {
  lt::RuntimeOptions o;
  o.plugin_path = plugin_dir;
  o.device = device;
  return lt::bench::runtime(o).get();
}

// The host test backend.
lt_device* device() {
  return lt_runtime_default_device(open_runtime(LT_BENCH_PLUGIN_DIR, "partial"));
}

// The reference backend, for the chain below on a real plugin.
lt_device* eager_device() {
  return lt_runtime_default_device(open_runtime(LT_BENCH_BACKEND_DIR, "cpu_eager"));
}

lt_tensor* host_tensor(lt_device* d, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n), 1.0f);
  lt_tensor* t = nullptr;
  lt_tensor_from_host(d, LT_DTYPE_F32, &n, 1, v.data(), v.size() * 4, &t);
  return t;
}

// One op recorded and its handle freed (the node dies with it): the pure trace cost.
void BM_TraceOneOp(benchmark::State& st) {
  lt_device* d = device();
  lt_tensor* a = host_tensor(d, 16);
  lt_tensor* b = host_tensor(d, 16);
  for (auto _ : st) {
    lt_tensor* c = nullptr;
    lt_add(a, b, &c);
    benchmark::DoNotOptimize(c);
    lt_tensor_free(c);
  }
  lt_tensor_free(a);
  lt_tensor_free(b);
}
BENCHMARK(BM_TraceOneOp);

// The same with the caller's source location recorded on the node (lt_trace_location, which the
// C++ API calls before every op): issue #28 allows it at most 10% over BM_TraceOneOp.
void BM_TraceOneOpWithLocation(benchmark::State& st) {
  lt_device* d = device();
  lt_tensor* a = host_tensor(d, 16);
  lt_tensor* b = host_tensor(d, 16);
  for (auto _ : st) {
    lt_tensor* c = nullptr;
    LT_AT(lt_add(a, b, &c));
    benchmark::DoNotOptimize(c);
    lt_tensor_free(c);
  }
  lt_tensor_free(a);
  lt_tensor_free(b);
}
BENCHMARK(BM_TraceOneOpWithLocation);

// One op recorded through the C++ API, the way user code writes it: operator+ and the free
// function lt::exp, each passing the caller's std::source_location (issue #28: recording an op
// costs at most 10% more than before; compare with a build of the previous commit).
void BM_TraceOneOpCpp(benchmark::State& st) {
  lt::Device d(device());
  lt::Tensor a = lt::Tensor::from(d, std::vector<float>(16, 1.0f), {16});
  lt::Tensor b = lt::Tensor::from(d, std::vector<float>(16, 2.0f), {16});
  for (auto _ : st) {
    lt::Tensor c = a + b;
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_TraceOneOpCpp);

void BM_TraceOneFreeFunctionCpp(benchmark::State& st) {
  lt::Device d(device());
  lt::Tensor a = lt::Tensor::from(d, std::vector<float>(16, 1.0f), {16});
  for (auto _ : st) {
    lt::Tensor c = lt::exp(a);
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_TraceOneFreeFunctionCpp);

// Ops recorded into a growing chain (the next op uses the previous result), batches of 1000.
void BM_TraceChain(benchmark::State& st) {
  lt_device* d = device();
  lt_tensor* a = host_tensor(d, 16);
  for (auto _ : st) {
    lt_tensor* x = lt_tensor_retain(a);
    for (int i = 0; i < 1000; ++i) {
      lt_tensor* y = nullptr;
      lt_mul(x, a, &y);
      lt_tensor_free(x);
      x = y;
    }
    st.PauseTiming();
    lt_tensor_free(x);
    st.ResumeTiming();
  }
  st.SetItemsProcessed(st.iterations() * 1000);
  lt_tensor_free(a);
}
BENCHMARK(BM_TraceChain);

// A chain x = x * s + x0 of 2 * `pairs` nodes; its end goes to `live`.
void trace_chain(lt_tensor* x0, lt_tensor* s, int pairs, std::vector<lt_tensor*>& live) {
  lt_tensor* x = lt_tensor_retain(x0);
  for (int i = 0; i < pairs; ++i) {
    lt_tensor *m = nullptr, *n = nullptr;
    lt_mul(x, s, &m);
    lt_add(m, x0, &n);
    lt_tensor_free(m);
    lt_tensor_free(x);
    x = n;
  }
  live.push_back(x);
}

// 100-node graph traced and synced; after the first iteration every sync is a cache hit.
void trace100(lt_device*, lt_tensor* x0, lt_tensor* s, std::vector<lt_tensor*>& live) {
  trace_chain(x0, s, 50, live);
}

void BM_SyncCacheHit100(benchmark::State& st) {
  lt_device* d = device();
  lt_tensor* x0 = host_tensor(d, 16);
  lt_tensor* s = nullptr;
  lt_scalar(d, LT_DTYPE_F32, 0.5, &s);
  std::vector<lt_tensor*> live;
  trace100(d, x0, s, live);
  lt_sync(d);  // compile once
  for (lt_tensor* t : live) lt_tensor_free(t);
  live.clear();
  for (auto _ : st) {
    st.PauseTiming();
    trace100(d, x0, s, live);
    st.ResumeTiming();
    lt_sync(d);
    st.PauseTiming();
    for (lt_tensor* t : live) lt_tensor_free(t);
    live.clear();
    st.ResumeTiming();
  }
  double hits = 0;
  lt_error* e = lt_metric_get(open_runtime(LT_BENCH_PLUGIN_DIR, "partial"), "cache_hits", &hits);
  if (e) lt_error_destroy(e);
  st.counters["cache_hits"] = hits;
  lt_tensor_free(x0);
  lt_tensor_free(s);
}
BENCHMARK(BM_SyncCacheHit100);

// The same including the tracing of the 100 ops (one training-step-like iteration).
void BM_TraceAndSync100(benchmark::State& st) {
  lt_device* d = device();
  lt_tensor* x0 = host_tensor(d, 16);
  lt_tensor* s = nullptr;
  lt_scalar(d, LT_DTYPE_F32, 0.5, &s);
  std::vector<lt_tensor*> live;
  for (auto _ : st) {
    trace100(d, x0, s, live);
    lt_sync(d);
    for (lt_tensor* t : live) lt_tensor_free(t);
    live.clear();
  }
  lt_tensor_free(x0);
  lt_tensor_free(s);
}
BENCHMARK(BM_TraceAndSync100);

// A 20,000-node chain of scalar mul/add (the shape of a long unrolled loop), traced and synced
// every iteration; every sync after the first is a cache hit. items_per_second counts nodes, so
// its inverse is the cost per node of tracing, collecting, looking up and running.
void chain20k(benchmark::State& st, lt_device* d) {
  constexpr int kNodes = 20000;
  lt_tensor* x0 = host_tensor(d, 1);
  lt_tensor* s = nullptr;
  lt_scalar(d, LT_DTYPE_F32, 0.5, &s);
  std::vector<lt_tensor*> live;
  auto step = [&] {
    trace_chain(x0, s, kNodes / 2, live);
    lt_sync(d);
    lt_tensor_free(live.back());
    live.clear();
  };
  step();  // compile once
  for (auto _ : st) step();
  st.SetItemsProcessed(st.iterations() * kNodes);
  lt_tensor_free(x0);
  lt_tensor_free(s);
}
void BM_TraceAndSyncChain20k(benchmark::State& st) {
  chain20k(st, device());
}
BENCHMARK(BM_TraceAndSyncChain20k)->Unit(benchmark::kMillisecond);
void BM_TraceAndSyncChain20kCpuEager(benchmark::State& st) {
  chain20k(st, eager_device());
}
BENCHMARK(BM_TraceAndSyncChain20kCpuEager)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
