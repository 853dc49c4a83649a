// gemm_layout.cpp — the host executor's two GEMM layout decisions over a graph (gemm_layout.hpp).
#include "lazytensor/lower/gemm_layout.hpp"

#include <cstring>

namespace lt::lower {
namespace {

bool named(const lt_graph_node& n, const char* op) {
  return n.op && std::strcmp(n.op, op) == 0;
}

}  // namespace

bool is_matrix_transpose(const lt_graph_node& n) {
  if (!named(n, "permute") || n.rank < 2) return false;
  const lt_attr* perm = nullptr;
  for (size_t k = 0; k < n.num_attrs; ++k)
    if (n.attrs[k].name && std::strcmp(n.attrs[k].name, "perm") == 0) perm = &n.attrs[k];
  if (!perm || perm->kind != LT_ATTR_INTS || perm->ints_len != n.rank) return false;
  for (size_t d = 0; d + 2 < n.rank; ++d)
    if (perm->ints[d] != static_cast<int64_t>(d)) return false;
  return perm->ints[n.rank - 2] == static_cast<int64_t>(n.rank) - 1 &&
         perm->ints[n.rank - 1] == static_cast<int64_t>(n.rank) - 2;
}

bool is_host_gemm(const lt_graph_node& n) {
  return named(n, "matmul") && (n.dtype == LT_DTYPE_F32 || n.dtype == LT_DTYPE_F64);
}

GemmLayouts::GemmLayouts(const lt_graph& g) : in_place(g.num_nodes, 0), transposed(g.num_nodes, 0) {
  // Per node: read by anything but a host GEMM (outputs count), how many operand slots and
  // outputs read it, and the last slot's reader.
  std::vector<char> other(g.num_nodes, 0), gemm(g.num_nodes, 0);
  std::vector<int32_t> readers(g.num_nodes, 0), reader(g.num_nodes, -1);
  for (size_t k = 0; k < g.num_outputs; ++k) {
    other[g.outputs[k]] = 1;
    ++readers[g.outputs[k]];
  }
  bool maybe = false;  // a permute and a matmul both present
  bool permute = false, matmul = false;
  for (size_t i = 0; i < g.num_nodes; ++i) {
    const lt_graph_node& n = g.nodes[i];
    gemm[i] = is_host_gemm(n);
    matmul = matmul || gemm[i];
    permute = permute || named(n, "permute");
    for (size_t k = 0; k < n.num_operands; ++k) {
      const int32_t o = n.operands[k];
      other[o] = other[o] || !gemm[i];
      ++readers[o];
      reader[o] = static_cast<int32_t>(i);
    }
  }
  maybe = permute && matmul;
  if (!maybe) return;
  for (size_t i = 0; i < g.num_nodes; ++i)
    in_place[i] = transpose_read_in_place(is_matrix_transpose(g.nodes[i]), other[i]);
  for (size_t m = 0; m < g.num_nodes; ++m) {
    if (!gemm[m]) continue;
    const lt_graph_node& n = g.nodes[m];
    const bool two_d = n.rank == 2 && n.num_operands == 2 && g.nodes[n.operands[0]].rank == 2 &&
                       g.nodes[n.operands[1]].rank == 2;
    const int32_t t = reader[m];
    const bool read_once = readers[m] == 1 && t >= 0;  // one slot, no output
    const bool t_2d = read_once && g.nodes[t].rank == 2 && is_matrix_transpose(g.nodes[t]);
    transposed[m] = gemm_writes_transposed(two_d, read_once, t_2d, read_once && in_place[t]);
  }
  for (size_t i = 0; i < g.num_nodes && !any; ++i) any = in_place[i] || transposed[i];
}

}  // namespace lt::lower
