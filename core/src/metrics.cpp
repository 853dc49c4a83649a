// metrics.cpp — the metrics report (text and JSON): a summary, the cached graphs by time with
// their regions, time spent on the fallback and in the core, every counter, recompile reasons;
// and lookup of one metric by name.
#include <algorithm>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "executor.h"
#include "plan_cache.h"
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
  // Memory accounting (docs/memory.md): live device values now and their peak since the last
  // lt_metrics_reset, per device and summed over devices (the sum of each device's peak).
  double live = 0, peak = 0;
  for (auto& d : rt->devices) {
    const auto l = static_cast<double>(d->allocator->bytes_live());
    const auto p = static_cast<double>(d->allocator->bytes_peak());
    f["memory." + d->name + ".bytes_live"] = l;
    f["memory." + d->name + ".bytes_peak"] = p;
    live += l;
    peak += p;
  }
  f["memory.bytes_live"] = live;
  f["memory.bytes_peak"] = peak;
  f["donation.buffers"] = ld(m.donated_buffers);
  f["donation.bytes"] = ld(m.donated_bytes);
  f["donation.bytes_last_graph"] = ld(m.donated_bytes_last);
  f["cache_entries"] = static_cast<double>(rt->plans->size());
  f["cache_capacity"] = static_cast<double>(rt->config.cache_capacity);
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
  f["graphs_cut"] = 0;  // graphs cut into regions of at most max_region_nodes (cut.h)
  f["regions_cut"] = 0;
  std::lock_guard lk(m.mu);
  for (auto& [k, v] : m.named) f[k] = v;
  return f;
}

// One cached graph's timing, copied out of its plan (the plan keeps running meanwhile).
struct GraphRow {
  uint64_t key = 0, runs = 0, run_ns = 0, compile_ns = 0;
  std::string device, label;
  std::vector<std::pair<std::string, uint64_t>> regions;                  // label, execute-call ns
  std::vector<std::vector<std::pair<std::string, double>>> region_stats;  // the plugin's
  uint64_t total() const { return run_ns + compile_ns; }
};

std::vector<GraphRow> graph_rows(Runtime* rt) {
  std::vector<GraphRow> rows;
  rt->plans->for_each_plan([&](const Plan& p) {
    GraphRow r;
    r.key = p.key;
    r.device = p.device;
    r.label = p.label;
    r.runs = p.runs.load(std::memory_order_relaxed);
    r.run_ns = p.run_ns.load(std::memory_order_relaxed);
    r.compile_ns = p.compile_ns.load(std::memory_order_relaxed);
    if (const CompiledPlan* cp = p.compiled()) {
      for (size_t i = 0; i < cp->region_labels.size() && i < cp->regions.size(); ++i)
        r.regions.emplace_back(cp->region_labels[i],
                               cp->region_ns[i].load(std::memory_order_relaxed));
      r.region_stats = cp->region_stats;
    }
    rows.push_back(std::move(r));
  });
  std::stable_sort(rows.begin(), rows.end(),
                   [](const GraphRow& a, const GraphRow& b) { return a.total() > b.total(); });
  return rows;
}

// Regions that ran on the fallback or in the core, summed over graphs by label ("fallback
// cpu_eager: exp", "core (custom op CPU kernel): my.op"): time and runs.
std::vector<std::pair<std::string, std::pair<uint64_t, uint64_t>>> off_target(
    const std::vector<GraphRow>& rows) {
  std::vector<std::pair<std::string, std::pair<uint64_t, uint64_t>>> out;
  for (const GraphRow& g : rows)
    for (const auto& region : g.regions) {
      const std::string& label = region.first;  // (not a structured binding: clang 15 cannot
                                                // capture one in the lambda below)
      if (label.rfind("fallback ", 0) != 0 && label.rfind("core ", 0) != 0) continue;
      auto it =
          std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == label; });
      if (it == out.end()) it = out.insert(out.end(), {label, {0, 0}});
      it->second.first += region.second;
      it->second.second += g.runs;
    }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  return out;
}

std::string ms(uint64_t ns) {
  return fmt::format("{:.3f} ms", static_cast<double>(ns) / 1e6);
}

constexpr size_t kTopGraphs = 10;

}  // namespace

void reset_graph_timings(Runtime* rt) noexcept {
  rt->plans->reset_timings();
}

std::string metrics_report(Runtime* rt, bool json) {
  drain_queues(rt);  // async_execution: the report covers every graph queued before it
  auto f = flat(rt);
  std::vector<std::string> reasons;
  {
    std::lock_guard lk(rt->metrics.mu);
    reasons.assign(rt->metrics.recompile_reasons.begin(), rt->metrics.recompile_reasons.end());
  }
  std::vector<GraphRow> rows = graph_rows(rt);
  // Graphs neither compiled nor run since the last reset (lt_metrics_reset) say nothing here.
  const size_t cached = rows.size();
  std::erase_if(rows, [](const GraphRow& g) { return g.runs == 0 && g.compile_ns == 0; });
  const auto off = off_target(rows);
  if (json) {
    nlohmann::json j = nlohmann::json::object();
    for (auto& [k, v] : f) j[k] = v;
    j["recompile_reasons"] = reasons;
    nlohmann::json graphs = nlohmann::json::array();
    for (const GraphRow& g : rows) {
      nlohmann::json regions = nlohmann::json::array();
      for (size_t k = 0; k < g.regions.size(); ++k) {
        nlohmann::json st = nlohmann::json::object();
        if (k < g.region_stats.size())
          for (const auto& [name, v] : g.region_stats[k]) st[name] = v;
        regions.push_back({{"label", g.regions[k].first},
                           {"run_ms", static_cast<double>(g.regions[k].second) / 1e6},
                           {"backend_stats", st}});
      }
      graphs.push_back({{"hash", fmt::format("{:016x}", g.key)},
                        {"device", g.device},
                        {"label", g.label},
                        {"runs", g.runs},
                        {"run_ms", static_cast<double>(g.run_ns) / 1e6},
                        {"compile_ms", static_cast<double>(g.compile_ns) / 1e6},
                        {"regions", regions}});
    }
    j["graphs"] = graphs;
    nlohmann::json ot = nlohmann::json::array();
    for (const auto& [label, t] : off)
      ot.push_back(
          {{"label", label}, {"run_ms", static_cast<double>(t.first) / 1e6}, {"runs", t.second}});
    j["off_target_regions"] = ot;
    return j.dump(2);
  }
  std::ostringstream os;
  auto num = [&](const char* k) { return static_cast<uint64_t>(f.count(k) ? f.at(k) : 0); };
  os << "LazyTensor metrics\n";
  os << fmt::format(
      "  {} graphs executed in {:.3f} ms; {} compiles in {:.3f} ms; compile cache {} hits, {} "
      "misses\n  {} ops traced; fallback nodes {}, decomposed nodes {}, compile failures {}\n",
      num("graphs_executed"), f["execute_ms"], num("compiles"), f["compile_ms"], num("cache_hits"),
      num("cache_misses"), num("ops_traced"), num("fallback_nodes"), num("decomposed_nodes"),
      num("compile_failures"));

  os << fmt::format(
      "\nTop graphs by time (compile + run; {} of {} cached graph{} active since the last "
      "reset{})\n",
      rows.size(), cached, cached == 1 ? "" : "s",
      rows.size() > kTopGraphs ? fmt::format(", first {} shown", kTopGraphs) : "");
  if (rows.empty())
    os << "  (none)\n";
  else
    os << fmt::format("  {:>2} {:<16} {:<12} {:>6} {:>12} {:>11} {:>11}  {}\n", "#", "graph",
                      "device", "runs", "run total", "run mean", "compile", "what");
  for (size_t i = 0; i < rows.size() && i < kTopGraphs; ++i) {
    const GraphRow& g = rows[i];
    os << fmt::format("  {:>2} {:016x} {:<12} {:>6} {:>12} {:>11} {:>11}  {}\n", i + 1, g.key,
                      g.device, g.runs, ms(g.run_ns), ms(g.runs ? g.run_ns / g.runs : 0),
                      ms(g.compile_ns), g.label);
    for (size_t r = 0; r < g.regions.size(); ++r) {
      os << fmt::format("       region {}: {:<48} {:>12}\n", r, g.regions[r].first,
                        ms(g.regions[r].second));
      std::string st;  // per executable, not cumulative: "executions" is stale here
      if (r < g.region_stats.size())
        for (const auto& [name, v] : g.region_stats[r])
          if (name != "executions") st += fmt::format("{}{} {:g}", st.empty() ? "" : ", ", name, v);
      if (!st.empty()) os << "         backend reports: " << st << "\n";
    }
  }
  os << "  (run: the graph's whole execution, transfers included; region: its backend's execute\n"
        "  call; backend reports: what the plugin says about that executable, e.g. tpu_sim's\n"
        "  simulated time per run split by unit. No backend reports per-op time: an op is timed\n"
        "  alone only where it is a region of its own, on the fallback or in the core.)\n";

  os << "\nTime on the fallback and in the core, by region (summed over cached graphs)\n";
  if (off.empty()) os << "  (none: every node ran on its graph's backend)\n";
  for (const auto& [label, t] : off)
    os << fmt::format("  {:<56} {:>12} {:>8} runs\n", label, ms(t.first), t.second);

  os << "\nCounters\n";
  for (auto& [k, v] : f) os << "  " << k << ": " << v << "\n";
  os << "\nRecompile reasons (last " << reasons.size() << ")\n";
  for (auto& r : reasons) os << "  - " << r << "\n";
  return os.str();
}

bool metric_get(Runtime* rt, const std::string& name, double* out) {
  drain_queues(rt);
  auto f = flat(rt);
  auto it = f.find(name);
  if (it == f.end()) return false;
  *out = it->second;
  return true;
}

}  // namespace lt
