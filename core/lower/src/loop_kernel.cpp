// loop_kernel.cpp — the loop-level schedule of a fused kernel (see loop_kernel.hpp).
#include "lazytensor/lower/loop_kernel.hpp"

#include <algorithm>
#include <string_view>

namespace lt::lower {

bool LoopKernel::in_kernel(int32_t node) const {
  return std::binary_search(nodes.begin(), nodes.end(), node);
}

int LoopKernel::position(int32_t node) const {
  auto it = std::lower_bound(nodes.begin(), nodes.end(), node);
  return it != nodes.end() && *it == node ? static_cast<int>(it - nodes.begin()) : -1;
}

std::vector<int32_t> LoopKernel::reductions_by_phase() const {
  std::vector<int32_t> out;
  for (const std::vector<int32_t>& p : phases) out.insert(out.end(), p.begin(), p.end());
  return out;
}

int64_t LoopKernel::rows() const {
  int64_t n = 1;
  for (int64_t d : kept) n *= d;
  return n;
}

int64_t LoopKernel::row_length() const {
  int64_t n = 1;
  for (int64_t d : reduced) n *= d;
  return n;
}

namespace {

// Ops worth evaluating once rather than twice per element (a load and a store cost less).
bool transcendental(std::string_view op) {
  for (std::string_view t : {"exp", "log", "tanh", "sigmoid", "gelu", "sin", "cos", "pow", "erf"})
    if (op == t) return true;
  return false;
}

// Ops whose operands are read at the op's own index (a stashed value is read back at one index).
bool same_index(std::string_view op) {
  return fusion::is_elementwise_op(op) || fusion::is_reduction_op(op) || op.starts_with("random_");
}

// Whether `pred` holds for `from` or a node it reads inside the kernel, transitively: what the
// output pass evaluates for `from` (a reduction is known per row: its operands are not walked).
template <class Pred>
bool in_cone(const lt_graph& g, const LoopKernel& k, int32_t from, Pred pred) {
  std::vector<char> seen(k.nodes.size(), 0);
  std::vector<int32_t> stack{from};
  while (!stack.empty()) {
    const int32_t v = stack.back();
    stack.pop_back();
    if (pred(v)) return true;
    const lt_graph_node& n = g.nodes[v];
    if (v != from && fusion::is_reduction_op(n.op)) continue;
    for (size_t o = 0; o < n.num_operands; ++o)
      if (int p = k.position(n.operands[o]); p >= 0 && !seen[p]) {
        seen[p] = 1;
        stack.push_back(n.operands[o]);
      }
  }
  return false;
}

// The stashes of the last phase (see LoopKernel::Stash).
void plan_stashes(const lt_graph& g, LoopKernel& k, size_t row_bytes) {
  if (k.phases.empty() || !row_bytes) return;
  std::vector<int32_t> values;  // full-role, non-output sources of the last phase
  for (int32_t r : k.phases.back()) {
    const int32_t c = g.nodes[r].operands[0];
    const int p = k.position(c);
    if (p >= 0 && k.roles[p] == fusion::Role::kFull && !fusion::is_reduction_op(g.nodes[c].op) &&
        std::find(k.outputs.begin(), k.outputs.end(), c) == k.outputs.end() &&
        in_cone(g, k, c, [&](int32_t v) { return transcendental(g.nodes[v].op); }))
      values.push_back(c);
  }
  for (int32_t o : k.full_outputs) {
    const lt_graph_node& n = g.nodes[o];
    if (!std::equal(n.shape, n.shape + n.rank, k.domain.begin(), k.domain.end()) ||
        static_cast<size_t>(k.row_length()) * lt_dtype_size(n.dtype) > row_bytes ||
        in_cone(g, k, o, [&](int32_t v) { return !same_index(g.nodes[v].op); }))
      continue;
    for (int32_t c : values)
      if (g.nodes[c].dtype == n.dtype && in_cone(g, k, o, [c](int32_t v) { return v == c; })) {
        k.stashes.push_back({o, c});
        break;
      }
  }
}

}  // namespace

LoopKernel schedule_loops(const lt_graph& graph, std::span<const int32_t> nodes,
                          std::span<const int32_t> outputs, std::span<const int64_t> domain,
                          std::span<const int64_t> reduce_axes, const LoopOptions& options) {
  LoopKernel k;
  k.nodes.assign(nodes.begin(), nodes.end());
  k.outputs.assign(outputs.begin(), outputs.end());
  k.domain.assign(domain.begin(), domain.end());
  const std::vector<int64_t> axes(reduce_axes.begin(), reduce_axes.end());
  k.is_reduced.assign(domain.size(), 0);
  for (int64_t a : axes) k.is_reduced[static_cast<size_t>(a)] = 1;
  for (size_t d = 0; d < domain.size(); ++d)
    (k.is_reduced[d] ? k.reduced : k.kept).push_back(domain[d]);

  // Roles (by shape), and levels: a node's level is the most reductions on a path to it inside
  // the kernel, so a reduction of level p reads only what pass p - 1 completed.
  int phases = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const lt_graph_node& n = graph.nodes[nodes[i]];
    fusion::Role r = fusion::Role::kFull;
    if (!axes.empty() && !fusion::role_of(n.shape, n.rank, k.domain, axes, &r))
      r = fusion::Role::kFull;
    k.roles.push_back(r);
    int lv = 0;
    for (size_t o = 0; o < n.num_operands; ++o)
      if (int p = k.position(n.operands[o]); p >= 0) lv = std::max(lv, k.levels[p]);
    const bool reduction = fusion::is_reduction_op(n.op);
    k.levels.push_back(lv + reduction);
    phases = std::max(phases, k.levels.back());
    if (reduction) k.reductions.push_back(nodes[i]);
  }
  k.phases.resize(phases);
  k.row_nodes.resize(phases + 1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (fusion::is_reduction_op(graph.nodes[nodes[i]].op))
      k.phases[k.levels[i] - 1].push_back(nodes[i]);
    else if (k.roles[i] != fusion::Role::kFull)
      k.row_nodes[k.levels[i]].push_back(nodes[i]);
  }
  for (int32_t o : outputs) {
    const int p = k.position(o);
    if (p >= 0) (k.roles[p] == fusion::Role::kFull ? k.full_outputs : k.row_outputs).push_back(o);
  }
  plan_stashes(graph, k, options.stash_row_bytes);
  return k;
}

}  // namespace lt::lower
