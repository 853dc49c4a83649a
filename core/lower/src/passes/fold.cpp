// fold.cpp — constant folding: a subgraph that reads no graph input (built from full and arange
// through built-in ops) is evaluated once, at compile time, by the caller's evaluator (the
// shared host kernels in the core). A result whose elements are all one value becomes a `full`
// node; any other becomes a constant input whose bytes the executable keeps. Bitwise exact:
// the host kernels are the reference semantics every backend matches.
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "work.hpp"

namespace lt::lower::opt {
namespace {

// The value of a splat result as a `full` writes it back, if it round-trips exactly.
bool splat_value(const std::vector<unsigned char>& bytes, lt_dtype d, double* v) {
  const size_t es = lt_dtype_size(d);
  if (!es || bytes.size() % es) return false;
  for (size_t off = es; off < bytes.size(); off += es)
    if (std::memcmp(bytes.data(), bytes.data() + off, es)) return false;
  if (bytes.empty()) return *v = 0.0, true;
  const unsigned char* p = bytes.data();
  switch (d) {
    case LT_DTYPE_F32: {
      float f;
      std::memcpy(&f, p, 4);
      *v = f;
      return f == f;  // a NaN's payload is not promised by `full`: keep the bytes instead
    }
    case LT_DTYPE_F64: {
      double f;
      std::memcpy(&f, p, 8);
      *v = f;
      return f == f;
    }
    case LT_DTYPE_I32: {
      int32_t i;
      std::memcpy(&i, p, 4);
      *v = i;
      return true;
    }
    case LT_DTYPE_I64: {
      int64_t i;
      std::memcpy(&i, p, 8);
      *v = static_cast<double>(i);
      return i > -(int64_t{1} << 53) && i < (int64_t{1} << 53);
    }
    case LT_DTYPE_BOOL:
      *v = p[0] ? 1.0 : 0.0;
      return p[0] <= 1;
    default:
      return false;  // bf16 / f16: kept as bytes
  }
}

}  // namespace

size_t fold(Work& w, PassStats& s) {
  w.fold_made_from = w.nodes.size();  // what fold makes comes after (the next simplify's cue)
  if (!w.opt || !w.opt->eval) return 0;
  const size_t n = w.nodes.size();
  auto live = [&](size_t i) { return !w.nodes[i].dead && w.repl[i] == static_cast<int32_t>(i); };
  // Constant: a built-in op whose operands are all constant (full and arange have none).
  // Candidates are read by a non-constant node or an output (`edge`). One sweep in index order
  // decides both (a node's operands come before it), after the leaves rewrites made, which
  // come after their readers (a made node has no operands).
  std::vector<uint8_t>& is_const = w.flags1;
  std::vector<uint8_t>& edge = w.flags2;
  is_const.assign(n, 0);
  edge.assign(n, 0);
  bool any_source = false, any_op = false;
  auto source = [&](size_t i) {
    const WNode& node = w.nodes[i];
    if (!node.info || w.opaque(node)) return;
    is_const[i] = 1;
    any_source = true;
  };
  for (size_t i = w.loaded; i < n; ++i)
    if (live(i)) source(i);
  for (size_t i = 0; i < w.loaded && i < n; ++i) {
    if (!live(i)) continue;
    const WNode& node = w.nodes[i];
    if (node.operands.empty()) {
      source(i);
      continue;
    }
    bool c = !node.is_input() && node.info && !w.opaque(node);
    for (size_t k = 0; k < node.operands.size() && c; ++k)
      c = is_const[static_cast<size_t>(w.operand(static_cast<int32_t>(i), k))];
    is_const[i] = c;
    any_op = any_op || c;
    if (!c)
      for (size_t k = 0; k < node.operands.size(); ++k)
        edge[static_cast<size_t>(w.operand(static_cast<int32_t>(i), k))] = 1;
  }
  if (!any_source || !any_op) return 0;  // only lone leaves: as cheap as their copies
  for (int32_t o : w.outputs) edge[static_cast<size_t>(w.resolve(o))] = 1;
  std::vector<int32_t>& cand = w.ints1;
  cand.clear();
  for (size_t i = 0; i < n; ++i) {
    if (!is_const[i] || w.nodes[i].operands.empty() || !edge[i]) continue;
    const size_t bytes = static_cast<size_t>(w.nodes[i].numel()) * lt_dtype_size(w.nodes[i].dtype);
    if (bytes <= w.opt->max_fold_bytes) cand.push_back(static_cast<int32_t>(i));
  }
  if (cand.empty()) return 0;
  // One graph of every candidate's cone, candidates as its outputs.
  std::vector<uint8_t>& in_cone = w.flags3;
  in_cone.assign(n, 0);
  std::vector<int32_t>& stack = w.ints2;
  stack = cand;
  while (!stack.empty()) {
    const int32_t v = stack.back();
    stack.pop_back();
    if (in_cone[static_cast<size_t>(v)]) continue;
    in_cone[static_cast<size_t>(v)] = 1;
    for (int32_t o : w.nodes[static_cast<size_t>(v)].operands) stack.push_back(w.resolve(o));
  }
  // Equal nodes of the cones are evaluated once (the same op, dtype, shape and attributes of
  // the same operands computes the same bytes: the host kernels are deterministic, a random
  // op's value is its attributes' and seed's): a GPT step holds its causal mask twice, and
  // CSE, which would merge the two, runs after fold. Each candidate still gets its own bytes.
  OwnedGraph cone;
  std::vector<int32_t>& index = w.ints3;
  index.assign(n, -1);
  std::vector<int32_t> rep;        // per cone node: the working graph's node it was made from
  std::vector<int32_t> cone_ops;   // every cone node's operands (cone indices), node after node
  std::vector<uint32_t> ops_from;  // where each cone node's operands start in cone_ops
  std::unordered_multimap<uint64_t, int32_t> made;  // a cone node's hash -> the cone node
  std::vector<int32_t> ops;
  auto same = [&](const WNode& a, int32_t j) {
    const WNode& b = w.nodes[static_cast<size_t>(rep[static_cast<size_t>(j)])];
    const size_t at = ops_from[static_cast<size_t>(j)];
    const size_t num =
        (static_cast<size_t>(j) + 1 < ops_from.size() ? ops_from[static_cast<size_t>(j) + 1]
                                                      : cone_ops.size()) -
        at;
    return num == ops.size() && same_op_and_attrs(a, b) &&
           std::equal(ops.begin(), ops.end(), cone_ops.begin() + static_cast<ptrdiff_t>(at));
  };
  auto add_to_cone = [&](size_t i) {
    const WNode& node = w.nodes[i];
    ops.clear();
    for (int32_t o : node.operands) ops.push_back(index[static_cast<size_t>(w.resolve(o))]);
    uint64_t h = reinterpret_cast<uintptr_t>(node.info) * 0x9E3779B97F4A7C15ULL;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001B3ULL + (h >> 29); };
    mix(static_cast<uint64_t>(node.dtype));
    for (int64_t d : node.shape) mix(static_cast<uint64_t>(d));
    for (int32_t o : ops) mix(static_cast<uint64_t>(o) + 0x51);
    mix(node.attrs.size());
    for (auto [it, end] = made.equal_range(h); it != end; ++it)
      if (same(node, it->second)) {
        index[i] = it->second;
        return;
      }
    index[i] = cone.add_borrowed(node.op, node.dtype, node.shape, ops, node.attrs);
    rep.push_back(static_cast<int32_t>(i));
    ops_from.push_back(static_cast<uint32_t>(cone_ops.size()));
    cone_ops.insert(cone_ops.end(), ops.begin(), ops.end());
    made.emplace(h, index[i]);
  };
  for (size_t i = 0; i < n; ++i)  // leaves first (made ones come after their readers)
    if (in_cone[i] && w.nodes[i].operands.empty()) add_to_cone(i);
  for (size_t i = 0; i < n; ++i)
    if (in_cone[i] && !w.nodes[i].operands.empty()) add_to_cone(i);
  std::vector<int32_t> outs;  // the cone's outputs, each once
  std::vector<size_t> slot;   // per candidate: its value's place in outs
  for (int32_t c : cand) {
    const int32_t o = index[static_cast<size_t>(c)];
    const auto at = std::find(outs.begin(), outs.end(), o);
    slot.push_back(static_cast<size_t>(at - outs.begin()));
    if (at == outs.end()) outs.push_back(o);
  }
  cone.set_inputs({});
  cone.set_outputs(outs);
  std::vector<std::vector<unsigned char>> values;
  try {
    values = w.opt->eval(cone.view());
  } catch (...) {
    return 0;  // the evaluator lacks an op: nothing is folded
  }
  if (values.size() != outs.size()) return 0;
  std::vector<size_t> uses_left(outs.size(), 0);  // the last candidate of a value takes it
  for (size_t k : slot) ++uses_left[k];
  size_t folded = 0;
  for (size_t k = 0; k < cand.size(); ++k) {
    const WNode& c = w.nodes[static_cast<size_t>(cand[k])];
    std::vector<unsigned char> bytes =
        --uses_left[slot[k]] ? values[slot[k]] : std::move(values[slot[k]]);
    if (bytes.size() != static_cast<size_t>(c.numel()) * lt_dtype_size(c.dtype)) continue;
    double v = 0;
    WNode f;
    if (splat_value(bytes, c.dtype, &v)) {
      f = make_full(w, c.dtype, c.shape, v);
    } else {
      f.op = "input";
      f.dtype = c.dtype;
      f.shape = c.shape;
      f.constant = static_cast<int32_t>(w.constants.size());
      w.constants.push_back(std::move(bytes));
    }
    f.tag = c.tag;
    f.origin = c.origin;
    const int32_t nf = w.add(f);
    w.replace(cand[k], nf);
    ++folded;
  }
  s.folded += folded;
  return folded;
}

}  // namespace lt::lower::opt
