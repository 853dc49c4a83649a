// gemm_layout.cpp — the host executor's two GEMM layout decisions over a graph (gemm_layout.hpp).
#include "lazytensor/lower/gemm_layout.hpp"

#include <cstring>

namespace lt::lower {
namespace {

bool named(const lt_graph_node& n, const char* op) {
  return n.op && std::strcmp(n.op, op) == 0;
}

// The perm of a permute node swaps its last two dims only.
bool swaps_last_two(const lt_graph_node& n) {
  if (n.rank < 2) return false;
  const lt_attr* perm = nullptr;
  for (size_t k = 0; k < n.num_attrs; ++k)
    if (n.attrs[k].name && std::strcmp(n.attrs[k].name, "perm") == 0) perm = &n.attrs[k];
  if (!perm || perm->kind != LT_ATTR_INTS || perm->ints_len != n.rank) return false;
  for (size_t d = 0; d + 2 < n.rank; ++d)
    if (perm->ints[d] != static_cast<int64_t>(d)) return false;
  return perm->ints[n.rank - 2] == static_cast<int64_t>(n.rank) - 1 &&
         perm->ints[n.rank - 1] == static_cast<int64_t>(n.rank) - 2;
}

enum class Named : uint8_t { kOther, kMatmul, kPermute };

// What op each node is, the name compared once per distinct name pointer (graphs from the core
// name every node of an op with one interned string): a compile asks this of every node.
struct KindCache {
  static constexpr size_t kSlots = 64;
  const char* names[kSlots] = {};
  Named kinds[kSlots] = {};
  Named operator()(const char* op) {
    const size_t h = (reinterpret_cast<uintptr_t>(op) >> 3) % kSlots;
    if (names[h] != op || !op) {
      names[h] = op;
      kinds[h] = !op                                               ? Named::kOther
                 : op[0] == 'm' && std::strcmp(op, "matmul") == 0  ? Named::kMatmul
                 : op[0] == 'p' && std::strcmp(op, "permute") == 0 ? Named::kPermute
                                                                   : Named::kOther;
    }
    return kinds[h];
  }
};

}  // namespace

bool is_matrix_transpose(const lt_graph_node& n) {
  return named(n, "permute") && swaps_last_two(n);
}

bool is_host_gemm(const lt_graph_node& n) {
  return named(n, "matmul") && is_host_gemm_dtype(n.dtype);
}

GemmLayouts::GemmLayouts(const lt_graph& g) : in_place(g.num_nodes, 0), transposed(g.num_nodes, 0) {
  const size_t n = g.num_nodes;
  KindCache kind_of;
  std::vector<Facts> facts(n);
  bool any_gemm = false, any_permute = false;
  for (size_t i = 0; i < n; ++i) {
    const lt_graph_node& node = g.nodes[i];
    const Named k = kind_of(node.op);
    facts[i].kind = k == Named::kMatmul    ? (is_host_gemm_dtype(node.dtype) ? kGemm : kOther)
                    : k == Named::kPermute ? kPermute
                                           : kOther;
    any_gemm = any_gemm || facts[i].kind == kGemm;
    any_permute = any_permute || k == Named::kPermute;
    for (size_t j = 0; j < node.num_operands; ++j)
      read(facts[static_cast<size_t>(node.operands[j])], static_cast<int32_t>(i),
           facts[i].kind == kGemm);
  }
  if (!any_gemm || !any_permute) {  // neither decision can hold
    for (size_t i = 0; i < n; ++i)
      if (facts[i].kind == kGemm) gemms.push_back(static_cast<int32_t>(i));
    return;
  }
  for (size_t k = 0; k < g.num_outputs; ++k) output(facts[g.outputs[k]]);
  decide(g, facts);
}

GemmLayouts::GemmLayouts(const lt_graph& g, const std::vector<Facts>& facts)
    : in_place(g.num_nodes, 0), transposed(g.num_nodes, 0) {
  decide(g, facts);
}

void GemmLayouts::decide(const lt_graph& g, const std::vector<Facts>& facts) {
  const size_t n = g.num_nodes;
  for (size_t i = 0; i < n; ++i) {
    if (facts[i].kind == kGemm) gemms.push_back(static_cast<int32_t>(i));
    if (facts[i].kind == kPermute && !facts[i].other) {
      in_place[i] = transpose_read_in_place(swaps_last_two(g.nodes[i]), facts[i].other);
      any = any || in_place[i];
    }
  }
  for (const int32_t gm : gemms) {
    const auto m = static_cast<size_t>(gm);
    if (facts[m].count != 1) continue;
    const lt_graph_node& node = g.nodes[m];
    const bool two_d = node.rank == 2 && node.num_operands == 2 &&
                       g.nodes[node.operands[0]].rank == 2 && g.nodes[node.operands[1]].rank == 2;
    const auto t = static_cast<size_t>(facts[m].reader);  // read once: its one reader
    const bool t_2d =
        facts[t].kind == kPermute && g.nodes[t].rank == 2 && swaps_last_two(g.nodes[t]);
    transposed[m] = gemm_writes_transposed(two_d, true, t_2d, in_place[t]);
    any = any || transposed[m];
  }
}

}  // namespace lt::lower
