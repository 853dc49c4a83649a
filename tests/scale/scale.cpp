// scale.cpp — lt_scale DEVICE CASE N BOUND_MIB: the scale lane of issue #18.
//   chain: a 256-element f32 tensor through N steps of `a = a * m + c` (2N elementwise nodes,
//          a graph N steps deep), traced, then read once; checked against the same loop on the
//          host.
//   wide:  N independent pending tensors `y_i = x_i * m + c` (x_i: 8 floats each, its own
//          input), materialised by one lt_sync, every value checked.
// Peak resident memory is measured from just before tracing (the peak is reset through
// /proc/self/clear_refs after the runtime, its plugins and the inputs exist) to the end; it
// must stay under BOUND_MIB. Prints the time of each phase, the peak growth and the core's
// metrics (compiles, regions cut). Exit status 1 names what failed. The CTest timeout is the
// hang bound; nothing here asserts a speed.
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "lazytensor/lt.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A line of /proc/self/status ("VmHWM:   1234 kB") in MiB, or -1.
double status_mib(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(in, line))
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':')
      return std::atof(line.c_str() + n + 1) / 1024.0;
  return -1;
}

// Resets the peak (VmHWM) to the current resident size; false where the kernel refuses.
bool reset_peak() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

[[noreturn]] void die(const char* what, lt_error* e) {
  std::fprintf(stderr, "lt_scale: %s: %s\n", what, e ? lt_error_message(e) : "");
  std::exit(1);
}
#define OK(call)                 \
  do {                           \
    if (lt_error* e_ = (call)) { \
      die(#call, e_);            \
    }                            \
  } while (0)

lt_tensor* from_host(lt_device* d, const std::vector<float>& v) {
  const int64_t shape[1] = {static_cast<int64_t>(v.size())};
  lt_tensor* t = nullptr;
  OK(lt_tensor_from_host(d, LT_DTYPE_F32, shape, 1, v.data(), v.size() * sizeof(float), &t));
  return t;
}

double metric(lt_runtime* rt, const char* name) {
  double v = 0;
  if (lt_metric_get(rt, name, &v)) return -1;
  return v;
}

// y = x * m + c, freeing nothing.
lt_tensor* mul_add(lt_tensor* x, lt_tensor* m, lt_tensor* c) {
  lt_tensor *t = nullptr, *y = nullptr;
  OK(lt_mul(x, m, &t));
  OK(lt_add(t, c, &y));
  lt_tensor_free(t);
  return y;
}

constexpr float kM = 0.999999f, kC = 1e-6f;  // contracts towards 1 by e^-1 per 10^6 steps

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: lt_scale DEVICE chain|wide N BOUND_MIB\n");
    return 2;
  }
  const std::string device = argv[1], which = argv[2];
  const long n = std::atol(argv[3]);
  const double bound = std::atof(argv[4]);
  if ((which != "chain" && which != "wide") || n <= 0) return 2;

  lt_runtime_options o{};
  o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
  o.device = device.c_str();
  o.fallback = "error";  // every node must run on the backend under test
  lt_runtime* rt = nullptr;
  OK(lt_runtime_create(&o, &rt));
  lt_device* dev = lt_runtime_default_device(rt);

  const size_t width = which == "chain" ? 256 : 8;
  lt_tensor* m = from_host(dev, std::vector<float>(width, kM));
  lt_tensor* c = from_host(dev, std::vector<float>(width, kC));
  std::vector<float> a0(width);
  for (size_t j = 0; j < width; ++j) a0[j] = -2.0f + 4.0f * static_cast<float>(j) / width;

  // Warm-up: a small graph of the same ops, so the plugin's lazily created state (OpenCL
  // context, LLVM target, thread pools) is in the baseline rather than counted as growth.
  {
    lt_tensor* w = from_host(dev, a0);
    lt_tensor* y = mul_add(w, m, c);
    std::vector<float> out(width);
    OK(lt_tensor_to_host(y, out.data(), out.size() * sizeof(float)));
    lt_tensor_free(y);
    lt_tensor_free(w);
  }

  const bool peak_ok = reset_peak();
  const double rss0 = status_mib("VmRSS");
  double t_trace = 0, t_run = 0, t_free = 0, traced = 0;  // traced: RSS growth of the pending graph
  long bad = 0;
  auto t0 = Clock::now();
  if (which == "chain") {
    lt_tensor* a = from_host(dev, a0);
    for (long i = 0; i < n; ++i) {
      lt_tensor* next = mul_add(a, m, c);
      lt_tensor_free(a);
      a = next;
    }
    t_trace = seconds_since(t0);
    traced = status_mib("VmRSS") - rss0;
    t0 = Clock::now();
    std::vector<float> out(width);
    OK(lt_tensor_to_host(a, out.data(), out.size() * sizeof(float)));
    t_run = seconds_since(t0);
    // The host loop in f32 (a backend may contract into an FMA: the tolerance covers the
    // rounding differences, which do not grow, the map being a contraction).
    for (size_t j = 0; j < width; ++j) {
      float r = a0[j];
      for (long i = 0; i < n; ++i) r = r * kM + kC;
      if (!(std::fabs(out[j] - r) <= 2e-3f * std::fmax(1.0f, std::fabs(r)))) {
        if (bad++ < 5) std::printf("FAIL: element %zu is %g, expected %g\n", j, out[j], r);
      }
    }
    t0 = Clock::now();
    lt_tensor_free(a);
    t_free = seconds_since(t0);
  } else {
    std::vector<lt_tensor*> ys(static_cast<size_t>(n));
    std::vector<float> x(width);
    for (long i = 0; i < n; ++i) {
      for (size_t j = 0; j < width; ++j) x[j] = static_cast<float>(i % 1000) + j;
      lt_tensor* xi = from_host(dev, x);
      ys[static_cast<size_t>(i)] = mul_add(xi, m, c);
      lt_tensor_free(xi);
    }
    t_trace = seconds_since(t0);
    traced = status_mib("VmRSS") - rss0;
    t0 = Clock::now();
    OK(lt_sync(dev));
    t_run = seconds_since(t0);
    std::vector<float> out(width);
    for (long i = 0; i < n; ++i) {
      lt_tensor* y = ys[static_cast<size_t>(i)];
      if (!lt_tensor_is_materialized(y)) {
        if (bad++ < 5) std::printf("FAIL: tensor %ld is still pending after lt_sync\n", i);
        continue;
      }
      OK(lt_tensor_to_host(y, out.data(), out.size() * sizeof(float)));
      for (size_t j = 0; j < width; ++j) {
        const float r = (static_cast<float>(i % 1000) + j) * kM + kC;
        if (!(std::fabs(out[j] - r) <= 1e-6f * std::fmax(1.0f, std::fabs(r))) && bad++ < 5)
          std::printf("FAIL: tensor %ld element %zu is %g, expected %g\n", i, j, out[j], r);
      }
    }
    t0 = Clock::now();
    for (lt_tensor* y : ys) lt_tensor_free(y);
    t_free = seconds_since(t0);
  }
  const double peak = status_mib("VmHWM"), growth = peak - rss0;
  std::printf(
      "lt_scale %s %s %ld: trace %.2f s, %s %.2f s (compile %.2f s, execute %.2f s), free %.2f "
      "s | pending graph +%.1f MiB, peak RSS +%.1f MiB over %.1f MiB (bound %.0f MiB)%s | compiles "
      "%.0f, regions cut "
      "%.0f, graphs cut %.0f\n",
      device.c_str(), which.c_str(), n, t_trace, which == "chain" ? "read" : "sync", t_run,
      metric(rt, "compile_ms") / 1e3, metric(rt, "execute_ms") / 1e3, t_free, traced, growth, rss0,
      bound, peak_ok ? "" : " (peak not reset: includes start-up)", metric(rt, "compiles"),
      metric(rt, "regions_cut"), metric(rt, "graphs_cut"));
  if (device == "gpu_opencl")  // programs built by PoCL vs. found in the plugin's caches
    std::printf("gpu_opencl: %.0f programs built, %.0f program cache hits\n",
                metric(rt, "plugin.gpu_opencl.total.programs_built"),
                metric(rt, "plugin.gpu_opencl.total.program_cache_hits"));
  if (growth > bound) std::printf("FAIL: peak resident memory grew %.1f MiB\n", growth), bad++;
  lt_tensor_free(m);
  lt_tensor_free(c);
  lt_runtime_destroy(rt);
  return bad ? 1 : 0;
}
