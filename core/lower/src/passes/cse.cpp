// cse.cpp — common-subexpression elimination: two nodes of the same op, dtype, shape,
// attributes and operands (in either order for commutative ops) are one node. Never merged:
// inputs (two leaves may hold different data), custom ops and collectives (effects the graph
// does not show), and nodes whose rematerialisation tags differ (a recomputation in the backward
// pass must stay a recomputation, or checkpointing is undone). Random ops are merged only when
// seed operand, counter offset, stride and shape are all equal, which makes their values equal.
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "work.hpp"

namespace lt::lower::opt {
namespace {

// Commutative bitwise: a op b == b op a for every value (NaN payloads aside). maximum and
// minimum are not: the host kernels return the first operand of max(+0, -0).
bool commutative(const WNode& n) {
  if (!n.info) return false;
  switch (n.info->id) {
    case kOpAdd:
    case kOpMul:
    case kOpEq:
    case kOpNe:
    case kOpAnd:
    case kOpOr:
      return true;
    default:
      return false;
  }
}

uint64_t mix(uint64_t h, uint64_t v) {
  v *= 0x9E3779B97F4A7C15ULL;
  h ^= v + 0x7F4A7C159E3779B9ULL + (h << 6) + (h >> 2);
  return h;
}

// The name is left out (equal() compares it): one op's attributes come in one order, and
// hashing each name's characters was a tenth of the pass.
uint64_t attr_hash(const lt_attr& a) {
  uint64_t h = static_cast<uint64_t>(a.kind);
  uint64_t fb = 0;
  std::memcpy(&fb, &a.f, sizeof fb);
  h = mix(mix(h, static_cast<uint64_t>(a.i)), fb);
  if (a.kind == LT_ATTR_INTS)
    for (size_t k = 0; k < a.ints_len; ++k) h = mix(h, static_cast<uint64_t>(a.ints[k]));
  if (a.kind == LT_ATTR_STRING)
    for (const char* c = a.s; c && *c; ++c) h = h * 131 + static_cast<unsigned char>(*c);
  return h;
}

// Operand k in canonical order (a commutative op's two operands sorted; resolved already).
int32_t key_operand(const WNode& n, size_t k) {
  if (n.operands.size() == 2 && commutative(n)) {
    const int32_t lo = std::min(n.operands[0], n.operands[1]);
    const int32_t hi = std::max(n.operands[0], n.operands[1]);
    return k == 0 ? lo : hi;
  }
  return n.operands[k];
}

bool equal(const WNode& a, const WNode& b) {
  if (a.tag != b.tag || a.operands.size() != b.operands.size() || !same_op_and_attrs(a, b))
    return false;
  for (size_t k = 0; k < a.operands.size(); ++k)
    if (key_operand(a, k) != key_operand(b, k)) return false;
  return true;
}

}  // namespace

size_t cse(Work& w, PassStats& s) {
  const size_t n = w.nodes.size();
  // Under `exact`, permutes a matmul reads stay apart: merged with one that something else
  // reads, the transpose is materialised and the GEMM reads another layout, rounding otherwise
  // (see simplify.cpp).
  std::vector<uint8_t>& gemm_operand = w.flags1;
  gemm_operand.assign(n, 0);
  if (w.level != OptLevel::kFast)
    for (size_t i = 0; i < n; ++i)
      if (!w.nodes[i].dead && w.nodes[i].is(kOpMatmul))
        for (size_t k = 0; k < w.nodes[i].operands.size(); ++k)
          gemm_operand[static_cast<size_t>(w.operand(static_cast<int32_t>(i), k))] = 1;
  // Open addressing over node ids, sized for every node at most half full. A slot holds the
  // node's id + 1 (0: empty) in its low half and the upper half of its hash in its high half:
  // one array of 8-byte slots, not two (the table is the largest thing the optimiser touches,
  // and a compile meets it cold: its first use in a process maps fresh pages).
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  std::vector<uint64_t>& slot = w.hashes;
  slot.assign(cap, 0);
  size_t merged = 0;
  // Looks node i up: merges it into an equal node (and returns that node) or enters it (-1).
  auto enter = [&](int32_t i) -> int32_t {
    const WNode& node = w.nodes[static_cast<size_t>(i)];
    uint64_t h = node.info ? static_cast<uint64_t>(node.info->id) : 0x5bd1e995u;
    h = mix(mix(h, static_cast<uint64_t>(node.dtype)), node.tag);
    for (int64_t d : node.shape) h = mix(h, static_cast<uint64_t>(d));
    for (size_t k = 0; k < node.operands.size(); ++k)
      h = mix(h, static_cast<uint64_t>(key_operand(node, k)));
    for (const lt_attr& a : node.attrs) h = mix(h, attr_hash(a));
    const uint64_t tag = h & ~uint64_t{0xffffffff};
    for (size_t p = h & (cap - 1);; p = (p + 1) & (cap - 1)) {
      if (slot[p] == 0) {
        slot[p] = tag | (static_cast<uint64_t>(i) + 1);
        return -1;
      }
      const auto other = static_cast<int32_t>((slot[p] & 0xffffffff) - 1);
      if ((slot[p] & ~uint64_t{0xffffffff}) == tag &&
          equal(w.nodes[static_cast<size_t>(other)], node)) {
        w.replace(i, other);
        ++merged;
        return other;
      }
    }
  };
  // A node with an operand that only it reads has no equal (an equal node would read that
  // operand too), so it is not looked up, unless a merge later gives that operand a second
  // reader: then it is entered at that moment, before any node after the merge is looked up,
  // which is where it would have been. Most values of a training step have one reader.
  std::vector<int32_t>& skipped_by = w.ints2;  // operand -> the node skipped for reading it
  skipped_by.assign(n, -1);
  auto visit = [&](size_t i) {
    WNode& node = w.nodes[i];
    if (node.dead || w.repl[i] != static_cast<int32_t>(i)) return;
    if (node.is_input() || w.opaque(node)) return;
    for (size_t k = 0; k < node.operands.size(); ++k) w.operand(static_cast<int32_t>(i), k);
    if (node.is(kOpPermute) && gemm_operand[i]) return;
    for (int32_t o : node.operands)
      if (w.uses[static_cast<size_t>(o)] == 1) {
        skipped_by[static_cast<size_t>(o)] = static_cast<int32_t>(i);
        return;
      }
    for (int32_t rep = enter(static_cast<int32_t>(i));
         rep >= 0 && skipped_by[static_cast<size_t>(rep)] >= 0;) {
      const int32_t late = skipped_by[static_cast<size_t>(rep)];
      skipped_by[static_cast<size_t>(rep)] = -1;
      const bool gone =
          w.nodes[static_cast<size_t>(late)].dead || w.repl[static_cast<size_t>(late)] != late;
      rep = gone ? -1 : enter(late);
    }
  };
  // Leaves a rewrite made (no operands, appended after their readers) first, then the rest in
  // index order: every node's operands are then merged before the node is looked up.
  for (size_t i = 0; i < n; ++i)
    if (w.nodes[i].operands.empty()) visit(i);
  for (size_t i = 0; i < n; ++i)
    if (!w.nodes[i].operands.empty()) visit(i);
  s.removed += merged;
  return merged;
}

}  // namespace lt::lower::opt
