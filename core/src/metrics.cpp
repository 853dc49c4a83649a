// metrics.cpp — the metrics report (text and JSON) and lookup of one metric by name.
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime.h"

namespace lt {
namespace {

// Every numeric metric under its public name (the JSON report uses the same names).
std::map<std::string, double> flat(Runtime* rt) {
  Metrics& m = rt->metrics;
  std::map<std::string, double> f;
  auto ld = [](const std::atomic<uint64_t>& a) { return static_cast<double>(a.load()); };
  f["ops_traced"] = ld(m.ops_traced);
  f["nodes_alive"] = static_cast<double>(g_nodes_alive.load());
  f["graphs_executed"] = ld(m.graphs_executed);
  f["cache_hits"] = ld(m.cache_hits);
  f["cache_misses"] = ld(m.cache_misses);
  f["compiles"] = ld(m.compiles);
  f["compile_ms"] = ld(m.compile_ns) / 1e6;
  f["execute_ms"] = ld(m.execute_ns) / 1e6;
  f["bytes_to_device"] = ld(m.bytes_to_device);
  f["bytes_from_device"] = ld(m.bytes_from_device);
  f["bytes_between_backends"] = ld(m.bytes_between_backends);
  f["fallback_nodes"] = ld(m.fallback_nodes);
  f["decomposed_nodes"] = ld(m.decomposed_nodes);
  f["compile_failures"] = ld(m.compile_failures);
  f["allocator.hits"] = ld(m.alloc_hits);
  f["allocator.misses"] = ld(m.alloc_misses);
  double hits = ld(m.alloc_hits), total = hits + ld(m.alloc_misses);
  f["allocator.hit_rate"] = total > 0 ? hits / total : 0.0;
  double cached = 0, in_use = 0;
  for (auto& d : rt->devices) {
    cached += static_cast<double>(d->allocator->bytes_cached());
    in_use += static_cast<double>(d->allocator->bytes_in_use());
  }
  f["allocator.bytes_cached"] = cached;
  f["allocator.bytes_in_use"] = in_use;
  {
    std::lock_guard lk(rt->cache_mu);
    f["cache_entries"] = static_cast<double>(rt->lru.size());
    f["cache_capacity"] = static_cast<double>(rt->config.cache_capacity);
  }
  // Context-wide plugin totals (e.g. tpu_sim's simulated time over every execution); the
  // per-executable "plugin.<backend>.<stat>" entries describe the last compiled program.
  // persistent_cache_hits / _misses: the sum over backends with a persistent compile cache.
  f["persistent_cache_hits"] = 0;
  f["persistent_cache_misses"] = 0;
  for (auto& p : rt->plugins) {
    nlohmann::json st = nlohmann::json::object();
    collect_ctx_stats(p.get(), st);
    for (auto& [k, v] : st.items()) {
      if (!v.is_number()) continue;
      f["plugin." + p->name + ".total." + k] = v.get<double>();
      if (k == "persistent_cache_hits" || k == "persistent_cache_misses") f[k] += v.get<double>();
    }
  }
  std::lock_guard lk(m.mu);
  for (auto& [k, v] : m.named) f[k] = v;
  return f;
}

}  // namespace

std::string metrics_report(Runtime* rt, bool json) {
  auto f = flat(rt);
  std::vector<std::string> reasons;
  {
    std::lock_guard lk(rt->metrics.mu);
    reasons.assign(rt->metrics.recompile_reasons.begin(), rt->metrics.recompile_reasons.end());
  }
  if (json) {
    nlohmann::json j = nlohmann::json::object();
    for (auto& [k, v] : f) j[k] = v;
    j["recompile_reasons"] = reasons;
    return j.dump(2);
  }
  std::ostringstream os;
  os << "LazyTensor metrics\n";
  for (auto& [k, v] : f) os << "  " << k << ": " << v << "\n";
  os << "  recompile_reasons (last " << reasons.size() << "):\n";
  for (auto& r : reasons) os << "    - " << r << "\n";
  return os.str();
}

bool metric_get(Runtime* rt, const std::string& name, double* out) {
  auto f = flat(rt);
  auto it = f.find(name);
  if (it == f.end()) return false;
  *out = it->second;
  return true;
}

}  // namespace lt
