// lanes.cpp — the vector row choice of a fused row kernel (see lanes.hpp).
#include "lazytensor/lower/lanes.hpp"

#include <vector>

#include "lazytensor/lower/fusion.hpp"

namespace lt::lower {

bool vector_rows(const lt_graph& graph, const LoopKernel& k, const LaneOp& lane) {
  if (k.reduced.empty() || k.row_length() <= 0 || k.loop_dims.empty()) return false;
  for (size_t d = k.kept.size(); d < k.domain.size(); ++d)
    if (!k.is_reduced[d]) return false;
  if (!k.dense_along(k.loop_dims.size() - 1)) return false;
  auto dtype_of = [&](int32_t n) { return graph.nodes[n].dtype; };
  for (int32_t r : k.reductions)
    if (!lane("", dtype_of(r))) return false;
  for (int32_t o : k.full_outputs)
    if (!lane("", dtype_of(o))) return false;
  // The nodes evaluated over a row: from the reductions' operands and the full outputs down to
  // the reductions (known per row) and the values read from buffers.
  std::vector<char> over_row(graph.num_nodes, 0);
  std::vector<int32_t> todo(k.full_outputs.begin(), k.full_outputs.end());
  for (int32_t r : k.reductions) todo.push_back(graph.nodes[r].operands[0]);
  while (!todo.empty()) {
    const int32_t n = todo.back();
    todo.pop_back();
    const lt_graph_node& node = graph.nodes[n];
    const std::string_view op = node.op;
    if (over_row[n] || fusion::is_reduction_op(op) || (!k.in_kernel(n) && op != "full")) continue;
    over_row[n] = 1;
    const bool read = op == "full" || op == "broadcast_to" || op == "slice";
    if (!lane(read ? "" : op, node.dtype)) return false;
    for (size_t i = 0; i < node.num_operands; ++i) todo.push_back(node.operands[i]);
  }
  const size_t last = k.loop_dims.size() - 1;
  for (const Access& a : k.accesses)
    if (a.buffer != a.user && over_row[a.user] && a.strides[last] != 0 &&
        (a.index || !lane("", dtype_of(a.buffer))))
      return false;
  return true;
}

}  // namespace lt::lower
