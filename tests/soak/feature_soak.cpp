// feature_soak.cpp — lt_feature_soak GRAPHS [options]: the runtime's long-running features
// together on cpu_jit (issue #29): asynchronous execution, background compiles, dynamic shapes,
// the persistent compile cache (in a scratch directory, a small size cap so it evicts) and
// checkpoints, in one loop of graphs whose sizes, programs and constants change. Threads, memory
// maps, resident memory and open files are sampled all along; after the warm-up (the first
// tenth) they must stay within the bounds below, every checked value must be right and no call
// may fail. Prints the figures; exit status 1 names what broke a bound.
//
// By default graphs alternate between two runtimes (background compiles on one, dynamic shapes
// on the other, both asynchronous, one persistent cache). Options pick one runtime instead:
// --background 0|1, --async 0|1, --dynamic auto|off; --one-off makes every graph new (a
// constant that never repeats); --device D (default cpu_jit).
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lazytensor/checkpoint.hpp"
#include "lazytensor/lazytensor.hpp"

namespace {

namespace fs = std::filesystem;

// The bounds, past the warm-up (docs/reliability.md, "Long-running features").
constexpr int kThreadSlack = 4;       // threads beyond the warm-up's peak
constexpr int kMaxThreads = 64;       // threads, absolute
constexpr long kMapSlack = 512;       // memory maps beyond the warm-up's peak
constexpr double kRssSlackMiB = 128;  // resident memory beyond the warm-up's peak
constexpr long kFdSlack = 16;         // open files beyond the warm-up's peak

long status_field(const char* key) {
  std::ifstream st("/proc/self/status");
  std::string line;
  const std::string k = key;
  while (std::getline(st, line))
    if (line.rfind(k, 0) == 0) return std::atol(line.c_str() + k.size());
  return -1;
}
long count_lines(const char* path) {
  std::ifstream f(path);
  std::string line;
  long n = 0;
  while (std::getline(f, line)) ++n;
  return n;
}
long count_fds() {
  long n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
  }
  return n - 1;  // the directory stream's own
}

struct Sample {
  long threads = 0, maps = 0, fds = 0;
  double rss_mib = 0;
  static Sample now() {
    Sample s;
    s.threads = status_field("Threads:");
    s.maps = count_lines("/proc/self/maps");
    s.fds = count_fds();
    s.rss_mib = static_cast<double>(status_field("VmRSS:")) / 1024.0;
    return s;
  }
  void max_with(const Sample& o) {
    threads = std::max(threads, o.threads);
    maps = std::max(maps, o.maps);
    fds = std::max(fds, o.fds);
    rss_mib = std::max(rss_mib, o.rss_mib);
  }
};

// Graph i: x [n, 8] (n changes), h = x W + b, then a program-dependent tail, summed over
// columns. Returns the host's answer for checking.
struct Case {
  int64_t n;
  int program;
  float c;
};
Case case_of(long i, bool one_off) {
  Case k;
  k.n = 1 + (i * 7919) % 509;
  k.program = static_cast<int>(i % 5);
  k.c = one_off ? 1.0f + static_cast<float>(i) * 1e-6f : 0.5f + static_cast<float>(i % 3);
  return k;
}

float tail_host(int program, float h, float c) {
  switch (program) {
    case 0:
      return h * c;
    case 1:
      return std::tanh(h) * c;
    case 2:
      return std::max(h, 0.0f) + c;
    case 3:
      return (h * h) * c;
    default:
      return std::exp(-std::fabs(h)) * c;
  }
}
lt::Tensor tail(int program, const lt::Tensor& h, const lt::Tensor& c) {
  switch (program) {
    case 0:
      return h * c;
    case 1:
      return h.tanh() * c;
    case 2:
      return h.relu() + c;
    case 3:
      return (h * h) * c;
    default:
      return (-(h.abs())).exp() * c;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: lt_feature_soak GRAPHS [--background 0|1] [--async 0|1] [--dynamic "
                 "auto|off] [--one-off] [--device D]\n");
    return 2;
  }
  const long graphs = std::atol(argv[1]);
  struct LaneConfig {
    bool background, async;
    std::string dynamic;
  };
  // Default: two runtimes side by side in the one loop, since a background compile is static
  // (a miss goes to the pool, not to the dynamic-shape path): one with background compiles, one
  // with dynamic shapes, both asynchronous, sharing the persistent cache. An option picks one.
  std::vector<LaneConfig> lanes = {{true, true, "auto"}, {false, true, "auto"}};
  bool one_off = false, picked = false;
  LaneConfig one{true, true, "auto"};
  std::string device = "cpu_jit";
  for (int a = 2; a < argc; ++a) {
    std::string o = argv[a];
    auto next = [&] { return a + 1 < argc ? std::string(argv[++a]) : std::string(); };
    if (o == "--background")
      one.background = next() == "1", picked = true;
    else if (o == "--async")
      one.async = next() == "1", picked = true;
    else if (o == "--dynamic")
      one.dynamic = next(), picked = true;
    else if (o == "--one-off")
      one_off = true;
    else if (o == "--device")
      device = next();
    else {
      std::fprintf(stderr, "lt_feature_soak: unknown option %s\n", o.c_str());
      return 2;
    }
  }
  if (picked) lanes = {one};
  std::string templ = (fs::temp_directory_path() / "lt_feature_soak_XXXXXX").string();
  if (!::mkdtemp(templ.data())) return 2;
  const fs::path dir = templ;
  int bad = 0;
  try {
    // The persistent cache in the scratch directory, capped at 8 MiB so that it evicts.
    ::setenv("LT_CACHE_DIR", (dir / "cache").c_str(), 1);
    std::vector<float> wv(64), bv(8);
    for (size_t k = 0; k < wv.size(); ++k)
      wv[k] = 0.05f * static_cast<float>((k * 37) % 11) - 0.25f;
    for (size_t k = 0; k < bv.size(); ++k) bv[k] = 0.01f * static_cast<float>(k);
    struct Lane {
      LaneConfig cfg;
      lt::Runtime rt;
      lt::Device dev;
      lt::Tensor w, b;
    };
    std::vector<Lane> runs;
    for (size_t l = 0; l < lanes.size(); ++l) {
      const LaneConfig& c = lanes[l];
      const std::string config = (dir / ("soak" + std::to_string(l) + ".toml")).string();
      std::ofstream(config) << "async_execution = " << (c.async ? "true" : "false") << "\n"
                            << "background_compile = " << (c.background ? "true" : "false") << "\n"
                            << "dynamic_shapes = \"" << c.dynamic << "\"\n"
                            << "[plugins.cpu_jit]\ndisk_cache_mb = 8\n";
      lt::RuntimeOptions o;
      o.config_path = config;
      o.fallback = "silent";
      Lane lane{c, lt::Runtime::create(o), {}, {}, {}};
      lane.dev = lane.rt.find_device(device);
      lane.w = lt::Tensor::from<float>(lane.dev, wv, {8, 8});
      lane.b = lt::Tensor::from<float>(lane.dev, bv, {8});
      runs.push_back(std::move(lane));
    }
    const std::string ckpt = (dir / "soak.safetensors").string();

    Sample warm, peak;
    const long warm_end = std::max(1L, graphs / 10);
    long checked = 0, saves = 0;
    for (long i = 0; i < graphs; ++i) {
      const Case k = case_of(i, one_off);
      std::vector<float> xv(static_cast<size_t>(k.n * 8));
      for (size_t j = 0; j < xv.size(); ++j)
        xv[j] = static_cast<float>((j * 13 + static_cast<size_t>(i)) % 17) * 0.0625f - 0.5f;
      Lane& lane = runs[static_cast<size_t>(i) % runs.size()];
      const lt::Device& dev = lane.dev;
      lt::Tensor x = lt::Tensor::from<float>(dev, xv, {k.n, 8});
      // The constant: a graph parameter (lt_scalar), or with --one-off a `full` node whose value
      // is part of the graph, so that no two graphs are alike.
      lt::Tensor c = one_off ? lt::full(dev, {8}, k.c) : lt::Tensor::scalar(dev, k.c, lt::f32);
      lt::Tensor y = tail(k.program, x.matmul(lane.w) + lane.b, c).sum({1});
      lt::sync(dev);
      if (i % 16 < static_cast<long>(runs.size())) {  // read back and check against the host
        std::vector<float> got = y.to_vector<float>();
        for (int64_t r = 0; r < k.n; ++r) {
          float want = 0;
          for (int col = 0; col < 8; ++col) {
            float h = bv[static_cast<size_t>(col)];
            for (int q = 0; q < 8; ++q)
              h += xv[static_cast<size_t>(r * 8 + q)] * wv[static_cast<size_t>(q * 8 + col)];
            want += tail_host(k.program, h, k.c);
          }
          const float g = got[static_cast<size_t>(r)];
          if (!(std::fabs(g - want) <= 1e-3f * (1.0f + std::fabs(want)))) {
            std::printf("FAIL: graph %ld (program %d, n %lld) row %lld: %g, want %g\n", i,
                        k.program, static_cast<long long>(k.n), static_cast<long long>(r), g, want);
            return 1;
          }
        }
        ++checked;
      }
      if (i % 2000 == 1999) {  // a checkpoint of the weights and this graph's result, read back
        lt::save(ckpt, {{"w", lane.w}, {"b", lane.b}, {"y", y}}, {{"graph", std::to_string(i)}});
        lt::Checkpoint ck(ckpt);
        if (ck.tensor("w", dev).to_vector<float>() != wv ||
            ck.metadata("graph") != std::to_string(i) ||
            ck.tensor("y", dev).to_vector<float>() != y.to_vector<float>()) {
          std::printf("FAIL: checkpoint %ld read back different values\n", i);
          return 1;
        }
        ++saves;
      }
      if (i % 64 == 0 || i == graphs - 1) {
        Sample s = Sample::now();
        if (i < warm_end)
          warm.max_with(s);
        else
          peak.max_with(s);
      }
    }
    for (Lane& lane : runs) lt::sync(lane.dev);
    peak.max_with(Sample::now());
    std::printf(
        "lt_feature_soak %s: %ld graphs%s, %ld checked, %ld checkpoints | warm-up peak: %ld "
        "threads, %ld maps, %ld fds, %.1f MiB | after: %ld threads, %ld maps, %ld fds, "
        "%.1f MiB\n",
        device.c_str(), graphs, one_off ? " (one-off)" : "", checked, saves, warm.threads,
        warm.maps, warm.fds, warm.rss_mib, peak.threads, peak.maps, peak.fds, peak.rss_mib);
    for (Lane& lane : runs) {
      auto metric = [&](const char* name) {  // 0 for a counter never created
        double v = 0;
        if (lt_error* e = lt_metric_get(lane.rt.get(), name, &v)) lt_error_destroy(e);
        return v;
      };
      std::printf(
          "  runtime (background %d, async %d, dynamic %s): compiles %.0f, background "
          "started %.0f, queue full %.0f, stand-in steps %.0f, dynamic hits %.0f, cache "
          "%.0f/%.0f, persistent cache hits %.0f, misses %.0f\n",
          lane.cfg.background, lane.cfg.async, lane.cfg.dynamic.c_str(), metric("compiles"),
          metric("background_compile.started"), metric("background_compile.queue_full"),
          metric("background_compile.eager_steps"), metric("dynamic.hits"), metric("cache_entries"),
          metric("cache_capacity"), metric("plugin.cpu_jit.total.persistent_cache_hits"),
          metric("plugin.cpu_jit.total.persistent_cache_misses"));
    }
    if (std::getenv("LT_SOAK_REPORT"))  // every metric of every runtime
      for (Lane& lane : runs) std::printf("%s\n", lane.rt.metrics_report().c_str());
    if (peak.threads > warm.threads + kThreadSlack || peak.threads > kMaxThreads)
      std::printf("FAIL: %ld threads (warm-up %ld)\n", peak.threads, warm.threads), bad = 1;
    if (peak.maps > warm.maps + kMapSlack)
      std::printf("FAIL: %ld memory maps (warm-up %ld)\n", peak.maps, warm.maps), bad = 1;
    if (peak.rss_mib > warm.rss_mib + kRssSlackMiB)
      std::printf("FAIL: %.1f MiB resident (warm-up %.1f)\n", peak.rss_mib, warm.rss_mib), bad = 1;
    if (peak.fds > warm.fds + kFdSlack)
      std::printf("FAIL: %ld open files (warm-up %ld)\n", peak.fds, warm.fds), bad = 1;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    bad = 1;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return bad;
}
