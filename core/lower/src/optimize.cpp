// optimize.cpp — the pass manager of optimize.hpp: the ordered pass list per level, per-pass
// counts, and the after-pass hook.
#include "lazytensor/lower/optimize.hpp"

#include "passes/work.hpp"

namespace lt::lower {
namespace {

using PassFn = size_t (*)(opt::Work&, PassStats&);

struct PassEntry {
  const char* name;
  PassFn run;
};

// Simplify first (it exposes constants and equal nodes), fold the constant subgraphs, simplify
// again what folding exposed (x * 1 once 1 is known), then merge equal nodes and drop the dead.
constexpr PassEntry kPasses[] = {{"simplify", opt::simplify},
                                 {"fold", opt::fold},
                                 {"simplify", opt::simplify},
                                 {"cse", opt::cse},
                                 {"dce", opt::dce}};

}  // namespace

bool parse_opt_level(std::string_view s, OptLevel* out) {
  if (s == "none") return *out = OptLevel::kNone, true;
  if (s == "exact") return *out = OptLevel::kExact, true;
  if (s == "fast") return *out = OptLevel::kFast, true;
  return false;
}

const char* opt_level_name(OptLevel l) {
  switch (l) {
    case OptLevel::kNone:
      return "none";
    case OptLevel::kExact:
      return "exact";
    case OptLevel::kFast:
      return "fast";
  }
  return "?";
}

std::vector<std::string> pass_names(OptLevel level) {
  std::vector<std::string> out;
  if (level == OptLevel::kNone) return out;
  for (const PassEntry& p : kPasses) out.emplace_back(p.name);
  return out;
}

Optimized optimize(const lt_graph& g, const OptimizeOptions& options) {
  Optimized out;
  const bool dynamic = LT_GRAPH_HAS_DYNAMIC(&g);
  if (options.level == OptLevel::kNone || dynamic) {
    out.changed = false;
    return out;
  }
  opt::Work w = opt::Work::from_graph(g, options);
  w.compact();  // the caller's order may hold nodes no output reads
  size_t k = 0;
  for (const PassEntry& p : kPasses) {
    PassStats s;
    s.pass = p.name;
    s.nodes_before = w.nodes.size();
    p.run(w, s);
    s.nodes_after = w.nodes.size();
    if (options.after_pass) {
      OwnedGraph snap = w.to_graph();
      options.after_pass(std::to_string(++k) + "_" + p.name, snap.view());
    }
    out.stats.push_back(std::move(s));
  }
  out.changed = false;
  for (const PassStats& s : out.stats) out.changed |= s.removed || s.rewritten || s.folded;
  out.changed |= w.nodes.size() != g.num_nodes;
  if (!out.changed) return out;  // the caller compiles `g` itself: no copy
  out.graph = w.to_graph();
  out.graph.set_hash(g.hash);
  out.constants = std::move(w.constants);
  for (const opt::WNode& n : w.nodes) out.origin.push_back(n.origin);
  return out;
}

}  // namespace lt::lower
