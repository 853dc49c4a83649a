// optimize.cpp — the pass manager of optimize.hpp: the ordered pass list per level, per-pass
// counts, and the after-pass hook.
#include "lazytensor/lower/optimize.hpp"

#include <algorithm>
#include <cstring>

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
// transposed and plain kernels round differently (even the sign of a zero):
// - it reads a transpose that only GEMMs read in place: so every permute a surviving matmul
//   reads must keep whether it has readers other than matmuls (a concat reading it became dead,
//   a slice of a concat now reads it: operands_kept);
// - it writes a 2-D matmul read once, by a transpose, as the transposed product B^T·A^T: so every
//   2-D matmul that a permute reads must survive with as many readers, and as many of them
//   permutes, as it had, outputs counted (CSE merged two transposes of it, a permute chain
//   through it cancelled: products_kept).
// When a rewrite changed either, the graph is compiled unoptimised. Linear; nothing is
// allocated for a graph with neither pattern. `now`: original node -> its live node in w, or -1.
// Node i < g.num_nodes of w is g's node i: its op (WNode::info) never changes.
bool operands_kept(const lt_graph& g, opt::Work& w, const std::vector<int32_t>& now) {
  // Per original node: read by a matmul that survives (read by anything but a matmul: load()).
  std::vector<uint8_t>& live_gemm = w.flags1;
  live_gemm.assign(g.num_nodes, 0);
  for (const opt::Work::GemmRead& m : w.matmuls) {
    if (now[static_cast<size_t>(m.node)] < 0) continue;
    const lt_graph_node& u = g.nodes[m.node];
    for (size_t k = 0; k < u.num_operands; ++k) live_gemm[static_cast<size_t>(u.operands[k])] = 1;
  }
  // The same "read by anything but a matmul" in the optimised graph.
  std::vector<uint8_t>& w_other = w.flags3;
  w_other.assign(w.nodes.size(), 0);
  for (size_t u = 0; u < w.nodes.size(); ++u) {
    const opt::WNode& n = w.nodes[u];
    if (n.dead || w.repl[u] != static_cast<int32_t>(u) || n.is(kOpMatmul)) continue;
    for (int32_t o : n.operands) w_other[static_cast<size_t>(w.resolve(o))] = 1;
  }
  for (int32_t pi : w.permutes) {
    const auto p = static_cast<size_t>(pi);
    if (!live_gemm[p]) continue;
    const int32_t q = now[p];
    if (q < 0 || !w.nodes[static_cast<size_t>(q)].is(kOpPermute)) return false;
    if (!w_other[static_cast<size_t>(q)] != !w.read_by_other[p]) return false;
  }
  return true;
}

bool products_kept(const lt_graph& g, opt::Work& w, const std::vector<int32_t>& now) {
  // Readers and permute readers per node, outputs counted as readers: in g (load()), then in w.
  std::vector<int32_t>&w_readers = w.ints4, &w_permutes = w.ints5;
  w_readers.assign(w.nodes.size(), 0);
  w_permutes.assign(w.nodes.size(), 0);
  for (int32_t o : w.outputs) ++w_readers[static_cast<size_t>(w.resolve(o))];
  for (size_t u = 0; u < w.nodes.size(); ++u) {
    const opt::WNode& n = w.nodes[u];
    if (n.dead || w.repl[u] != static_cast<int32_t>(u)) continue;
    for (int32_t o : n.operands) {
      const auto p = static_cast<size_t>(w.resolve(o));
      ++w_readers[p];
      w_permutes[p] += n.is(kOpPermute);
    }
  }
  for (const opt::Work::GemmRead& m : w.matmuls) {
    if (!m.permutes || g.nodes[m.node].rank != 2) continue;
    const int32_t q = now[static_cast<size_t>(m.node)];
    if (q < 0 || w_readers[static_cast<size_t>(q)] != m.readers ||
        w_permutes[static_cast<size_t>(q)] != m.permutes)
      return false;
  }
  return true;
}

bool gemm_layouts_kept(const lt_graph& g, opt::Work& w) {
  // Which of the two patterns the graph has (load() saw): a matmul reading a permute, a permute
  // reading a matmul.
  const bool reads_permute = w.matmul_reads_permute, read_by_permute = w.permute_reads_matmul;
  if (!reads_permute && !read_by_permute) return true;
  std::vector<int32_t>& now = w.ints1;
  now.assign(g.num_nodes, -1);
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    const opt::WNode& n = w.nodes[i];
    if (!n.dead && w.repl[i] == static_cast<int32_t>(i) && n.origin >= 0 &&
        now[static_cast<size_t>(n.origin)] < 0)
      now[static_cast<size_t>(n.origin)] = static_cast<int32_t>(i);
  }
  return (!reads_permute || operands_kept(g, w, now)) &&
         (!read_by_permute || products_kept(g, w, now));
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
  if (options.level == OptLevel::kExact && !gemm_layouts_kept(g, w)) {
    out.changed = false;
    out.kept_gemm_layout = true;
    return out;
  }
  out.changed = false;
  for (const PassStats& s : out.stats) out.changed |= s.removed || s.rewritten || s.folded;
  out.changed |= w.live != g.num_nodes;
  if (!out.changed) return out;  // the caller compiles `g` itself: no copy
  out.graph = w.to_graph(&out.origin, &out.constants);
  out.graph.hash = g.hash;
  return out;
}

}  // namespace lt::lower
