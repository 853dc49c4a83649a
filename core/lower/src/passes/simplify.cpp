// simplify.cpp — algebraic simplification: identities that hold bitwise (x*1, x/1, x+(-0),
// x-(+0), integer x+0), double negation and double `not`, where(c, x, x), cast chains through a
// lossless dtype, reshape/permute/broadcast_to chains that compose or cancel, shape ops of a
// splat constant, explicit broadcasts an elementwise op does implicitly, and a slice that takes
// exactly one operand of a concat. Under `fast` also x+(+0) and x-(-0) (they turn -0 into +0).
// Every rewrite keeps the node's dtype and shape; the list with reasons is docs/optimizer.md.
#include <algorithm>
#include <cmath>

#include "work.hpp"

namespace lt::lower::opt {
namespace {

// Every value of `from` is a value of `to`, so a cast through `to` changes nothing.
bool lossless(lt_dtype from, lt_dtype to) {
  if (from == to || from == LT_DTYPE_BOOL) return true;
  switch (from) {
    case LT_DTYPE_I32:
      return to == LT_DTYPE_I64 || to == LT_DTYPE_F64;
    case LT_DTYPE_F32:
      return to == LT_DTYPE_F64;
    case LT_DTYPE_BF16:
    case LT_DTYPE_F16:
      return to == LT_DTYPE_F32 || to == LT_DTYPE_F64;
    default:
      return false;
  }
}

// NumPy broadcasting of two shapes; false when they do not broadcast.
bool broadcast(const Shape& a, const Shape& b, Shape* out) {
  const size_t r = std::max(a.size(), b.size());
  out->assign(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    (*out)[i] = da == 1 ? db : da;
  }
  return true;
}

bool is_value(const WNode& n, double want, bool check_sign) {
  double v = 0;
  if (!full_value(n, &v)) return false;
  if (v != want) return false;
  return !check_sign || std::signbit(v) == std::signbit(want);
}

class Simplifier {
 public:
  explicit Simplifier(Work& w) : w_(w) {}

  // One sweep in topological order; returns the rewrites made.
  size_t sweep() {
    size_t count = 0;
    const size_t n = w_.nodes.size();  // nodes appended by a rewrite are already simple
    users_.clear();                    // computed on first need (permute chains)
    for (size_t i = 0; i < n; ++i) {
      for (int32_t& o : w_.nodes[i].operands) o = w_.resolve(o);
      if (w_.nodes[i].op == "input" || w_.opaque(w_.nodes[i]) || !w_.nodes[i].info) continue;
      if (rewrite(static_cast<int32_t>(i))) ++count;
    }
    return count;
  }

 private:
  WNode& at(int32_t v) { return w_.nodes[static_cast<size_t>(v)]; }
  bool fast() const { return w_.level == OptLevel::kFast; }

  // `v` is replaced by `by` when both have one dtype and shape (always true by construction;
  // checked so that a wrong rule can never change a graph's types).
  bool use(int32_t v, int32_t by) {
    if (at(v).dtype != at(by).dtype || at(v).shape != at(by).shape) return false;
    w_.replace(v, by);
    return true;
  }

  bool rewrite(int32_t v) {
    const OpId op = at(v).info->id;
    const std::vector<int32_t> ops = at(v).operands;
    switch (op) {
      case kOpNeg:
      case kOpNot:
        if (at(ops[0]).is(op)) return use(v, at(ops[0]).operands[0]);
        return false;
      case kOpMul:
        for (int k = 0; k < 2; ++k)
          if (is_value(at(ops[static_cast<size_t>(k)]), 1.0, false) &&
              use(v, ops[static_cast<size_t>(1 - k)]))
            return true;
        return drop_broadcast(v);
      case kOpDiv:
        if (is_value(at(ops[1]), 1.0, false) && use(v, ops[0])) return true;
        return drop_broadcast(v);
      case kOpAdd:
        for (int k = 0; k < 2; ++k)
          if (is_zero_for(at(ops[static_cast<size_t>(k)]), at(v).dtype, -0.0) &&
              use(v, ops[static_cast<size_t>(1 - k)]))
            return true;
        return drop_broadcast(v);
      case kOpSub:
        if (is_zero_for(at(ops[1]), at(v).dtype, 0.0) && use(v, ops[0])) return true;
        return drop_broadcast(v);
      case kOpWhere:
        if (ops[1] == ops[2] && use(v, ops[1])) return true;
        return drop_broadcast(v);
      case kOpCast:
        return cast_chain(v);
      case kOpReshape:
        return layout_chain(v, kOpReshape);
      case kOpBroadcastTo:
        return layout_chain(v, kOpBroadcastTo);
      case kOpPermute:
        return permute_chain(v);
      case kOpSlice:
        return slice_of_concat(v) || full_shape_op(v);
      default:
        if (at(v).info->category == Category::kElementwise && ops.size() >= 2)
          return drop_broadcast(v);
        return false;
    }
  }

  // A zero that is an identity of + (and, for `sub`, of -) bitwise: `exact_zero` is -0.0 for
  // x + z and +0.0 for x - z; an integer 0 always; under fast any zero.
  bool is_zero_for(const WNode& z, lt_dtype d, double exact_zero) const {
    if (z.dtype != d) return false;
    if (is_int(d)) return is_value(z, 0.0, false);
    if (!is_float(d)) return false;
    return is_value(z, exact_zero, !fast());
  }

  // cast(x: T, T) -> x; cast(cast(x: T, U), V) -> cast(x, V) when U holds every T exactly
  // and V is a float or bool (the same value converts the same way; float-to-integer
  // conversions out of range are left alone); -> x when V is T.
  bool cast_chain(int32_t v) {
    const int32_t x = at(v).operands[0];
    if (at(x).dtype == at(v).dtype) return use(v, x);
    if (!at(x).is(kOpCast)) return false;
    const int32_t src = at(x).operands[0];
    const lt_dtype t = at(src).dtype, u = at(x).dtype, target = at(v).dtype;
    if (!lossless(t, u)) return false;
    if (target == t) return use(v, src);
    if (!is_float(target) && target != LT_DTYPE_BOOL) return false;
    at(v).operands[0] = src;
    return true;
  }

  // reshape(reshape(x)) -> reshape(x); broadcast_to(broadcast_to(x)) -> broadcast_to(x); either
  // to x's own shape -> x; either of a splat constant -> the constant at the new shape.
  bool layout_chain(int32_t v, OpId op) {
    const int32_t x = at(v).operands[0];
    if (at(x).shape == at(v).shape && at(x).dtype == at(v).dtype) return use(v, x);
    if (full_shape_op(v)) return true;
    if (!at(x).is(op) || at(x).tag != at(v).tag) return false;
    at(v).operands[0] = at(x).operands[0];
    if (at(at(v).operands[0]).shape == at(v).shape) return use(v, at(v).operands[0]);
    return true;
  }

  // permute(permute(x, p), q) -> permute(x, p o q); an identity permutation -> x.
  bool permute_chain(int32_t v) {
    const OwnedAttr* q = at(v).attr("perm");
    if (!q) return false;
    const int32_t x = at(v).operands[0];
    auto identity = [](const std::vector<int64_t>& p) {
      for (size_t i = 0; i < p.size(); ++i)
        if (p[i] != static_cast<int64_t>(i)) return false;
      return true;
    };
    if (!fast() && feeds_matmul(v, x)) return false;
    if (full_shape_op(v)) return true;
    if (identity(q->ints)) return use(v, x);
    if (!at(x).is(kOpPermute) || at(x).tag != at(v).tag) return false;
    const OwnedAttr* p = at(x).attr("perm");
    if (!p || p->ints.size() != q->ints.size()) return false;
    std::vector<int64_t> r(q->ints.size());
    for (size_t i = 0; i < r.size(); ++i) r[i] = p->ints[static_cast<size_t>(q->ints[i])];
    const int32_t src = at(x).operands[0];
    if (identity(r)) return use(v, src);
    at(v).operands[0] = src;
    for (OwnedAttr& a : at(v).attrs)
      if (a.name == "perm") a.ints = r;
    return true;
  }

  // A shape op (reshape, permute, broadcast_to, slice) of a splat constant is that constant at
  // the new shape: every element is the same value.
  bool full_shape_op(int32_t v) {
    const int32_t x = at(v).operands[0];
    double value = 0;
    if (!full_value(at(x), &value) || at(x).dtype != at(v).dtype) return false;
    WNode f = make_full(at(v).dtype, at(v).shape, value);
    f.tag = at(v).tag;
    f.origin = at(v).origin;
    const int32_t nf = w_.add(std::move(f));
    return use(v, nf);
  }

  // An elementwise op reading broadcast_to(y) where implicit broadcasting of y gives the same
  // output shape reads y: the values are the same, and no backend has to copy the broadcast.
  bool drop_broadcast(int32_t v) {
    bool changed = false;
    std::vector<int32_t>& ops = at(v).operands;
    for (size_t k = 0; k < ops.size(); ++k) {
      const int32_t b = ops[k];
      if (!at(b).is(kOpBroadcastTo) || at(b).tag != at(v).tag) continue;
      const int32_t y = at(b).operands[0];
      Shape out = at(y).shape, tmp;
      for (size_t j = 0; j < ops.size(); ++j) {
        if (j == k) continue;
        if (!broadcast(out, at(ops[j]).shape, &tmp)) return changed;
        out = tmp;
      }
      if (out != at(v).shape) continue;
      at(v).operands[k] = y;
      changed = true;
    }
    return changed;
  }

  // slice(concat(x0..xn, axis)) that takes exactly x_k (step 1, the whole of every other dim)
  // -> x_k. The IR form of a slice is its normalised starts, its steps and its output shape.
  bool slice_of_concat(int32_t v) {
    const int32_t c = at(v).operands[0];
    if (!at(c).is(kOpConcat)) return false;
    const OwnedAttr* starts = at(v).attr("starts");
    const OwnedAttr* steps = at(v).attr("steps");
    const size_t rank = at(c).shape.size();
    if (!starts || starts->ints.size() != rank || at(v).shape.size() != rank) return false;
    if (steps && steps->ints.size() != rank) return false;
    int64_t axis = 0;
    if (const OwnedAttr* a = at(c).attr("axis")) axis = a->i;
    if (axis < 0) axis += static_cast<int64_t>(rank);
    if (axis < 0 || axis >= static_cast<int64_t>(rank)) return false;
    const size_t ax = static_cast<size_t>(axis);
    for (size_t d = 0; d < rank; ++d) {
      if (steps && steps->ints[d] != 1) return false;
      if (d != ax && (starts->ints[d] != 0 || at(v).shape[d] != at(c).shape[d])) return false;
    }
    int64_t offset = 0;
    for (int32_t x : at(c).operands) {
      const int64_t len = at(x).shape[ax];
      if (starts->ints[ax] == offset && at(v).shape[ax] == len && len > 0) return use(v, x);
      offset += len;
    }
    return false;
  }

  // A GEMM's rounding depends on its operands' layout (the host kernels read a transpose in
  // place, OpenBLAS sums in another order), so under `exact` a permute chain that a matmul
  // reads, directly or through its operand, keeps its layout.
  bool feeds_matmul(int32_t v, int32_t x) {
    if (users_.empty()) users_ = w_.users();
    for (int32_t node : {v, x})
      if (static_cast<size_t>(node) < users_.size())
        for (int32_t u : users_[static_cast<size_t>(node)])
          if (w_.nodes[static_cast<size_t>(u)].is(kOpMatmul)) return true;
    return false;
  }

  Work& w_;
  std::vector<std::vector<int32_t>> users_;
};

}  // namespace

size_t simplify(Work& w, PassStats& s) {
  Simplifier simp(w);
  size_t total = 0;
  for (int round = 0; round < 8; ++round) {  // rewrites enable rewrites: x*1 inside neg(neg(.))
    const size_t n = simp.sweep();
    if (!n) break;
    w.compact();
    total += n;
  }
  s.rewritten += total;
  return total;
}

}  // namespace lt::lower::opt
