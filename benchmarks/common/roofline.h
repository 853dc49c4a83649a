// roofline.h — the roofline every benchmark in benchmarks/ reports beside its time: its flops
// and bytes per iteration, the machine's limits measured in the same process (OpenBLAS sgemm at
// the thread count in use, a triad over TBB's threads), the roofline time
// max(flops / sgemm rate, bytes / bandwidth) and the fraction of it reached (issue #26). The
// bandwidth is the triad's at the benchmark's own footprint (its bytes per iteration, repeated
// as the benchmark repeats them): a step whose data stays in cache is held to the cache's
// bandwidth, one that streams from memory to STREAM's (also reported, as dram_GBps).
// tools/roofline.py turns the JSON of any benchmark program into one table
// (docs/performance.md). OPENBLAS_CORETYPE is respected: the helper never sets it.
#pragma once

#include <benchmark/benchmark.h>
#include <cblas.h>
#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace lt::bench {

// LT_BENCH_THREADS=n caps TBB (the kernels' pool) and OpenBLAS at n threads for the program's
// life, so a run compares with a peer measured at the same count (PyTorch's --threads). Call
// first thing in main() and keep the result alive; null when the variable is unset.
inline std::unique_ptr<tbb::global_control> apply_thread_budget() {
  const char* env = std::getenv("LT_BENCH_THREADS");
  const int n = env ? std::atoi(env) : 0;
  if (n <= 0) return nullptr;
  openblas_set_num_threads(n);
  return std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                               static_cast<size_t>(n));
}

// A rate measured on both clocks: wall (what a benchmark's real_time compares with) and the
// process's CPU time (what its cpu_time compares with at LT_BENCH_THREADS=1: on a shared
// machine wall time also counts the time spent waiting for a core, CPU time does not).
struct Rate {
  double wall = 0, cpu = 0;
};

// The machine's limits, measured once per process at the first report().
struct Limits {
  Rate sgemm_flops;  // FLOP/s of cblas_sgemm 1024^3 with OpenBLAS's threads
  Rate triad_bytes;  // B/s of a = b + s*c, STREAM-sized (memory), over TBB's threads
  int threads = 0;   // TBB's (and the kernels') thread budget
};

// Largest cache of cpu0 from sysfs (glibc's sysconf over-reports in VMs); 32 MB if absent.
inline size_t last_level_cache_bytes() {
  size_t best = 0;
  for (int i = 0; i < 8; ++i) {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    size_t kb = 0;
    if (f >> kb) best = std::max(best, kb << 10);
  }
  return best ? best : size_t{32} << 20;
}

// Best seconds of `reps` calls after one warm-up, on each clock: the limit is what the machine
// can do.
template <class F>
Rate best_seconds(F&& f, int reps) {
  using clock = std::chrono::steady_clock;
  f();
  Rate best{1e30, 1e30};
  for (int i = 0; i < reps; ++i) {
    const std::clock_t c0 = std::clock();
    auto t0 = clock::now();
    f();
    best.wall = std::min(best.wall, std::chrono::duration<double>(clock::now() - t0).count());
    best.cpu = std::min(best.cpu, double(std::clock() - c0) / CLOCKS_PER_SEC);
  }
  best.cpu = std::max(best.cpu, 1e-9);
  return best;
}

// Work per second from seconds per call.
inline Rate per_second(double work, Rate seconds) {
  return {work / seconds.wall, work / seconds.cpu};
}

// B/s of a = b + s*c over TBB's threads with arrays of `floats` each, repeated so that arrays
// that fit in a cache are measured from it.
inline Rate triad_bandwidth(size_t floats) {
  const size_t n = std::max<size_t>(floats, 4096);
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  const int inner = static_cast<int>(std::clamp<size_t>((size_t{64} << 20) / (12 * n), 1, 1000));
  Rate s = best_seconds(
      [&] {
        for (int k = 0; k < inner; ++k) {
          tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 1 << 14), [&](auto r) {
            for (size_t i = r.begin(); i < r.end(); ++i) a[i] = b[i] + 3.0f * c[i];
          });
          benchmark::DoNotOptimize(a.data());
        }
      },
      5);
  return per_second(12.0 * double(n) * inner, s);  // STREAM: 2 reads + 1 write per element
}

inline Limits measure_limits() {
  Limits l;
  l.threads = static_cast<int>(
      tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  {
    const int n = 1024;
    std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
    Rate s = best_seconds(
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n,
                      b.data(), n, 0.0f, c.data(), n);
          benchmark::DoNotOptimize(c.data());
        },
        5);
    l.sgemm_flops = per_second(2.0 * n * n * n, s);
  }
  // STREAM's rule: each array at least 4x the last-level cache, so memory is measured.
  l.triad_bytes = triad_bandwidth(std::max<size_t>(size_t{4} << 20, last_level_cache_bytes()));
  return l;
}

inline const Limits& limits() {
  static const Limits l = measure_limits();
  return l;
}

// The triad's bandwidth at a footprint of `bytes` (rounded up to a power of two, measured once
// per size); memory's (STREAM-sized) beyond the last-level cache.
inline Rate bandwidth_at(double bytes) {
  static std::mutex mu;
  static std::map<size_t, Rate> cache;
  const Limits& l = limits();
  if (bytes >= double(last_level_cache_bytes())) return l.triad_bytes;
  size_t p2 = 4096;
  while (double(p2) < bytes) p2 <<= 1;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(p2);
  if (it == cache.end()) {
    Rate r = triad_bandwidth(p2 / 12);
    r.wall = std::max(r.wall, l.triad_bytes.wall);
    r.cpu = std::max(r.cpu, l.triad_bytes.cpu);
    it = cache.emplace(p2, r).first;
  }
  return it->second;
}

// Roofline seconds of one iteration doing `flops` and moving `bytes` on this machine, on each
// clock.
inline Rate roofline_seconds(double flops, double bytes) {
  const Rate f = limits().sgemm_flops, b = bandwidth_at(bytes);
  return {std::max(flops / f.wall, bytes / b.wall), std::max(flops / f.cpu, bytes / b.cpu)};
}

// Adds the roofline counters to `st`; call after the timing loop (the limits are measured
// outside any timed region). flops and bytes are per iteration: bytes the minimum traffic of
// the step (each input read once, each output written once), flops its multiply-adds x2 plus
// one per elementwise operation. Counters: flop, byte (per iteration), GFLOPs, GBps
// (achieved), sgemm_GFLOPs, triad_GBps (limits; the triad at this footprint), roofline_us,
// of_roofline (roofline time / measured time: 1.0 is the limit), dram_GBps (STREAM-sized
// triad), threads; and the CPU-clock twins sgemm_cpu_GFLOPs, triad_cpu_GBps, roofline_cpu_us
// for comparing cpu_time at one thread (tools/roofline.py --clock cpu).
inline void report(benchmark::State& st, double flops, double bytes) {
  using benchmark::Counter;
  const Limits& l = limits();
  const Rate roof = roofline_seconds(flops, bytes), bw = bandwidth_at(bytes);
  st.counters["flop"] = flops;
  st.counters["byte"] = bytes;
  st.counters["GFLOPs"] = Counter(flops * 1e-9, Counter::kIsIterationInvariantRate);
  st.counters["GBps"] = Counter(bytes * 1e-9, Counter::kIsIterationInvariantRate);
  st.counters["sgemm_GFLOPs"] = l.sgemm_flops.wall * 1e-9;
  st.counters["triad_GBps"] = bw.wall * 1e-9;
  st.counters["dram_GBps"] = l.triad_bytes.wall * 1e-9;
  st.counters["roofline_us"] = roof.wall * 1e6;
  st.counters["of_roofline"] = Counter(roof.wall, Counter::kIsIterationInvariantRate);
  st.counters["sgemm_cpu_GFLOPs"] = l.sgemm_flops.cpu * 1e-9;
  st.counters["triad_cpu_GBps"] = bw.cpu * 1e-9;
  st.counters["roofline_cpu_us"] = roof.cpu * 1e6;
  st.counters["threads"] = l.threads;
}

}  // namespace lt::bench
