// fold.cpp — constant folding: a subgraph that reads no graph input (built from full and arange
// through built-in ops) is evaluated once, at compile time, by the caller's evaluator (the
// shared host kernels in the core). A result whose elements are all one value becomes a `full`
// node; any other becomes a constant input whose bytes the executable keeps. Bitwise exact:
// the host kernels are the reference semantics every backend matches.
#include <cstring>

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
  if (!w.opt || !w.opt->eval) return 0;
  const size_t n = w.nodes.size();
  std::vector<uint8_t> is_const(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const WNode& node = w.nodes[i];
    if (node.op == "input" || w.opaque(node) || !node.info) continue;
    bool c = true;
    for (int32_t o : node.operands) c = c && is_const[static_cast<size_t>(o)];
    is_const[i] = c;
  }
  // Candidates: constant nodes with operands (a lone full or arange is as cheap as its copy),
  // read by a non-constant node or an output, and not already a splat.
  const auto users = w.users();
  std::vector<uint8_t> is_output(n, 0);
  for (int32_t o : w.outputs) is_output[static_cast<size_t>(o)] = 1;
  std::vector<int32_t> cand;
  for (size_t i = 0; i < n; ++i) {
    if (!is_const[i] || w.nodes[i].operands.empty()) continue;
    const size_t bytes = static_cast<size_t>(w.nodes[i].numel()) * lt_dtype_size(w.nodes[i].dtype);
    if (bytes > w.opt->max_fold_bytes) continue;
    bool edge = is_output[i];
    for (int32_t u : users[i]) edge = edge || !is_const[static_cast<size_t>(u)];
    if (edge) cand.push_back(static_cast<int32_t>(i));
  }
  if (cand.empty()) return 0;
  // One graph of every candidate's cone, candidates as its outputs.
  std::vector<uint8_t> in_cone(n, 0);
  std::vector<int32_t> stack = cand;
  while (!stack.empty()) {
    const int32_t v = stack.back();
    stack.pop_back();
    if (in_cone[static_cast<size_t>(v)]) continue;
    in_cone[static_cast<size_t>(v)] = 1;
    for (int32_t o : w.nodes[static_cast<size_t>(v)].operands) stack.push_back(o);
  }
  Work cone;
  std::vector<int32_t> index(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (!in_cone[i]) continue;
    WNode copy = w.nodes[i];
    for (int32_t& o : copy.operands) o = index[static_cast<size_t>(o)];
    index[i] = cone.add(std::move(copy));
  }
  for (int32_t c : cand) cone.outputs.push_back(index[static_cast<size_t>(c)]);
  std::vector<std::vector<unsigned char>> values;
  try {
    OwnedGraph g = cone.to_graph();
    values = w.opt->eval(g.view());
  } catch (...) {
    return 0;  // the evaluator lacks an op: nothing is folded
  }
  if (values.size() != cand.size()) return 0;
  size_t folded = 0;
  for (size_t k = 0; k < cand.size(); ++k) {
    const WNode& c = w.nodes[static_cast<size_t>(cand[k])];
    if (values[k].size() != static_cast<size_t>(c.numel()) * lt_dtype_size(c.dtype)) continue;
    double v = 0;
    WNode f;
    if (splat_value(values[k], c.dtype, &v)) {
      f = make_full(c.dtype, c.shape, v);
    } else {
      f.op = "input";
      f.dtype = c.dtype;
      f.shape = c.shape;
      f.constant = static_cast<int32_t>(w.constants.size());
      w.constants.push_back(std::move(values[k]));
    }
    f.tag = c.tag;
    f.origin = c.origin;
    const int32_t nf = w.add(std::move(f));
    w.replace(cand[k], nf);
    ++folded;
  }
  s.folded += folded;
  w.compact();
  return folded;
}

}  // namespace lt::lower::opt
