// optimize.cpp — the pass manager of optimize.hpp: the ordered pass list per level, per-pass
// counts, and the after-pass hook.
#include "lazytensor/lower/optimize.hpp"

#include <algorithm>
#include <cstring>

#include "lazytensor/lower/gemm_layout.hpp"
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

// Under `exact`, the layouts the host executor gives a GEMM must not change, for OpenBLAS's
// transposed and plain kernels round differently (even the sign of a zero). Its two decisions
// (lower/gemm_layout.hpp: a transpose only GEMMs read is read in place; a 2-D GEMM read once, by
// a materialised transpose, writes the transposed product) are taken on the traced graph and on
// the optimised one, and every GEMM of the optimised graph must meet the same decisions as the
// traced GEMM it computes, on its product and on each operand: else the graph is compiled
// unoptimised. (The seed 819443 of the differential tester: a concat that read a transpose died,
// and the GEMM beside it would have read the transpose in place.)
bool gemm_layouts_kept(const lt_graph& g, const opt::Work& w, const lt_graph& out,
                       std::span<const int32_t> origin) {
  const GemmLayouts after(out);
  if (after.gemms.empty()) return true;        // no GEMM left to round otherwise
  const GemmLayouts before(g, w.gemm_facts);   // noted by load()
  if (!before.any && !after.any) return true;  // every GEMM plain on both sides
  for (const int32_t j : after.gemms) {
    const lt_graph_node& n = out.nodes[j];
    const int32_t o = origin[static_cast<size_t>(j)];
    if (o < 0 || !is_host_gemm(g.nodes[o])) return false;  // no rewrite makes a GEMM under exact
    const lt_graph_node& t = g.nodes[o];
    if (after.transposed[j] != before.transposed[o] || t.num_operands != n.num_operands)
      return false;
    for (size_t k = 0; k < n.num_operands; ++k)
      if (after.in_place[n.operands[k]] != before.in_place[t.operands[k]]) return false;
  }
  return true;
}

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

const lt_graph& OptGraph::view() {
  graph_ = graph_over(nodes, inputs, outputs, hash);
  return graph_;
}

void OptGraph::borrow(const lt_graph& g) {
  nodes.assign(g.nodes, g.nodes + g.num_nodes);
  size_t total = 0;
  for (const lt_graph_node& n : nodes) total += n.num_operands;
  operands.resize(total);
  size_t at = 0;
  for (lt_graph_node& n : nodes) {
    std::copy(n.operands, n.operands + n.num_operands, operands.begin() + at);
    n.operands = operands.data() + at;
    at += n.num_operands;
  }
  inputs.assign(g.inputs, g.inputs + g.num_inputs);
  outputs.assign(g.outputs, g.outputs + g.num_outputs);
  hash = g.hash;
}

Optimized optimize(const lt_graph& g, const OptimizeOptions& options) {
  Optimized out;
  const bool dynamic = LT_GRAPH_HAS_DYNAMIC(&g);
  if (options.level == OptLevel::kNone || dynamic) {
    out.changed = false;
    return out;
  }
  // One Work per thread, its arrays reused from graph to graph (trimmed after a big one); a
  // nested call (an after-pass hook that optimises) gets a Work of its own.
  thread_local opt::Work kept;
  thread_local bool busy = false;
  opt::Work own;
  const bool nested = busy;
  busy = true;
  struct Done {  // however this call ends
    bool nested;
    opt::Work& w;
    ~Done() {
      if (nested) return;
      w.trim();
      busy = false;
    }
  } done{nested, nested ? own : kept};
  opt::Work& w = done.w;
  w.load(g, options);
  out.stats.reserve(std::size(kPasses));
  size_t k = 0;
  bool folded = false;
  for (const PassEntry& p : kPasses) {
    PassStats s;
    s.pass = p.name;
    s.nodes_before = w.live;
    // Simplify again only what folding exposed: without a folded constant the graph is the one
    // the first simplify left, and a sweep would find nothing.
    const bool skip = p.run == opt::simplify && k > 0 && !folded;
    if (!skip) p.run(w, s);
    folded = folded || s.folded;
    s.nodes_after = w.live;
    ++k;
    if (options.after_pass) {
      OptGraph snap = w.to_graph();
      options.after_pass(std::to_string(k) + "_" + p.name, snap.view());
    }
    out.stats.push_back(std::move(s));
  }
  out.changed = false;
  for (const PassStats& s : out.stats) out.changed |= s.removed || s.rewritten || s.folded;
  out.changed |= w.live != g.num_nodes;
  if (!out.changed) return out;  // the caller compiles `g` itself: no copy
  out.graph = w.to_graph(&out.origin, &out.constants);
  // Only a graph with both a matmul and a permute can have a GEMM layout to keep.
  if (options.level == OptLevel::kExact && w.matmul_and_permute &&
      !gemm_layouts_kept(g, w, out.graph.view(), out.origin)) {
    out.changed = false;
    out.kept_gemm_layout = true;
    out.graph = OptGraph{};
    out.origin.clear();
    out.constants.clear();
    return out;
  }
  out.graph.hash = g.hash;
  return out;
}

}  // namespace lt::lower
