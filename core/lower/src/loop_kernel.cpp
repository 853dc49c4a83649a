// loop_kernel.cpp — the loop-level schedule of a fused kernel (see loop_kernel.hpp).
#include "lazytensor/lower/loop_kernel.hpp"

#include <algorithm>

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

LoopKernel schedule_loops(const lt_graph& graph, std::span<const int32_t> nodes,
                          std::span<const int32_t> outputs, std::span<const int64_t> domain,
                          std::span<const int64_t> reduce_axes) {
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
  return k;
}

}  // namespace lt::lower
