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

uint64_t attr_hash(const OwnedAttr& a) {
  uint64_t h = std::hash<std::string>()(a.name) ^ static_cast<uint64_t>(a.kind);
  uint64_t fb = 0;
  std::memcpy(&fb, &a.f, sizeof fb);
  h = mix(mix(h, static_cast<uint64_t>(a.i)), fb);
  for (int64_t v : a.ints) h = mix(h, static_cast<uint64_t>(v));
  return mix(h, std::hash<std::string>()(a.s));
}

// Operand k in canonical order (a commutative op's two operands sorted).
int32_t key_operand(const WNode& n, size_t k) {
  if (n.operands.size() == 2 && commutative(n)) {
    const int32_t lo = std::min(n.operands[0], n.operands[1]);
    const int32_t hi = std::max(n.operands[0], n.operands[1]);
    return k == 0 ? lo : hi;
  }
  return n.operands[k];
}

bool equal(const WNode& a, const WNode& b) {
  if (a.info != b.info || a.op != b.op || a.dtype != b.dtype || a.tag != b.tag ||
      a.shape != b.shape || a.operands.size() != b.operands.size() || !(a.attrs == b.attrs))
    return false;
  for (size_t k = 0; k < a.operands.size(); ++k)
    if (key_operand(a, k) != key_operand(b, k)) return false;
  return true;
}

}  // namespace

size_t cse(Work& w, PassStats& s) {
  // Under `exact`, permutes a matmul reads stay apart: merged with one that something else
  // reads, the transpose is materialised and the GEMM reads another layout, rounding otherwise
  // (see simplify.cpp).
  std::vector<uint8_t> gemm_operand(w.nodes.size(), 0);
  if (w.level != OptLevel::kFast)
    for (const WNode& n : w.nodes)
      if (n.is(kOpMatmul))
        for (int32_t o : n.operands) gemm_operand[static_cast<size_t>(o)] = 1;
  std::unordered_multimap<uint64_t, int32_t> seen;
  seen.reserve(w.nodes.size());
  size_t merged = 0;
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    WNode& n = w.nodes[i];
    for (int32_t& o : n.operands) o = w.resolve(o);  // nodes are in topological order
    if (n.op == "input" || w.opaque(n)) continue;
    if (n.is(kOpPermute) && gemm_operand[i]) continue;
    uint64_t h = n.info ? static_cast<uint64_t>(n.info->id) : std::hash<std::string>()(n.op);
    h = mix(mix(h, static_cast<uint64_t>(n.dtype)), n.tag);
    for (int64_t d : n.shape) h = mix(h, static_cast<uint64_t>(d));
    for (size_t k = 0; k < n.operands.size(); ++k)
      h = mix(h, static_cast<uint64_t>(key_operand(n, k)));
    for (const OwnedAttr& a : n.attrs) h = mix(h, attr_hash(a));
    bool found = false;
    auto [lo, hi] = seen.equal_range(h);
    for (auto it = lo; it != hi; ++it)
      if (equal(w.nodes[static_cast<size_t>(it->second)], n)) {
        w.replace(static_cast<int32_t>(i), it->second);
        ++merged;
        found = true;
        break;
      }
    if (!found) seen.emplace(h, static_cast<int32_t>(i));
  }
  s.removed += merged;
  if (merged) w.compact();
  return merged;
}

}  // namespace lt::lower::opt
