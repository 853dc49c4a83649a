// cse.cpp — common-subexpression elimination: two nodes of the same op, dtype, shape,
// attributes and operands (in either order for commutative ops) are one node. Never merged:
// inputs (two leaves may hold different data), custom ops and collectives (effects the graph
// does not show), and nodes whose rematerialisation tags differ (a recomputation in the backward
// pass must stay a recomputation, or checkpointing is undone). Random ops are merged only when
// seed operand, counter offset, stride and shape are all equal, which makes their values equal.
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

std::vector<int32_t> key_operands(const WNode& n) {
  std::vector<int32_t> ops = n.operands;
  if (commutative(n) && ops.size() == 2 && ops[1] < ops[0]) std::swap(ops[0], ops[1]);
  return ops;
}

bool equal(const WNode& a, const WNode& b) {
  return a.op == b.op && a.dtype == b.dtype && a.shape == b.shape && a.tag == b.tag &&
         key_operands(a) == key_operands(b) && a.attrs == b.attrs;
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
    uint64_t h = std::hash<std::string>()(n.op);
    h = mix(mix(h, static_cast<uint64_t>(n.dtype)), n.tag);
    for (int64_t d : n.shape) h = mix(h, static_cast<uint64_t>(d));
    for (int32_t o : key_operands(n)) h = mix(h, static_cast<uint64_t>(o));
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
  w.compact();
  return merged;
}

}  // namespace lt::lower::opt
