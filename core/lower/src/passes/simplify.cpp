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
  explicit Simplifier(Work& w) : w_(w), gemm_read_(w.flags1) {}

  // One sweep in index order (topological but for made nodes, which have no operands); returns
  // the rewrites made. Dead and replaced nodes are skipped; nodes made during the sweep are
  // already simple. `only` (if given) restricts the sweep to those nodes: in index order a
  // node's operands are final when it is visited, so what a later sweep can still rewrite is a
  // node rewritten in place (its new form may match again), listed in `again`.
  // `fresh`: a first sweep (what matmuls read is found again).
  size_t sweep(const std::vector<int32_t>* only, std::vector<int32_t>* again, bool fresh) {
    size_t count = 0;
    const size_t n = w_.nodes.size();
    if (fresh) {
      gemm_read_.assign(n, 0);  // what a live matmul reads (permute chains under exact)
      if (!fast())
        for (size_t i = 0; i < n; ++i)
          if (live(i) && w_.nodes[i].is(kOpMatmul))
            for (size_t k = 0; k < w_.nodes[i].operands.size(); ++k)
              gemm_read_[static_cast<size_t>(w_.operand(static_cast<int32_t>(i), k))] = 1;
    }
    gemm_read_.resize(n, 0);
    again->clear();
    auto visit = [&](size_t i) {
      if (!live(i)) return;
      const WNode& node = w_.nodes[i];
      if (node.is_input() || !node.info || w_.opaque(node)) return;
      for (size_t k = 0; k < node.operands.size(); ++k) w_.operand(static_cast<int32_t>(i), k);
      if (!may_match(node) || !rewrite(static_cast<int32_t>(i))) return;
      ++count;
      if (live(i)) again->push_back(static_cast<int32_t>(i));
    };
    if (only)
      for (int32_t v : *only) visit(static_cast<size_t>(v));
    else
      for (size_t i = 0; i < n; ++i) visit(i);
    return count;
  }

 private:
  WNode& at(int32_t v) { return w_.nodes[static_cast<size_t>(v)]; }
  bool live(size_t i) const { return !w_.nodes[i].dead && w_.repl[i] == static_cast<int32_t>(i); }
  bool fast() const { return w_.level == OptLevel::kFast; }
  int32_t in(int32_t v, size_t k) { return w_.operand(v, k); }

  // `v` is replaced by `by` when both have one dtype and shape (always true by construction;
  // checked so that a wrong rule can never change a graph's types).
  bool use(int32_t v, int32_t by) {
    if (at(v).dtype != at(by).dtype || !same_shape(at(v).shape, at(by).shape)) return false;
    if (static_cast<size_t>(v) < gemm_read_.size() && gemm_read_[static_cast<size_t>(v)] &&
        static_cast<size_t>(by) < gemm_read_.size())
      gemm_read_[static_cast<size_t>(by)] = 1;
    w_.replace(v, by);
    return true;
  }

  // False when no rule of rewrite() can match `n` (operands resolved): what most nodes of a
  // training step are (matmuls, reductions, unary math, arithmetic on computed values), so
  // the sweep passes them without a call. Each case is the first test of its rule below.
  bool may_match(const WNode& n) const {
    auto reads = [&](OpId op) {
      for (int32_t o : n.operands)
        if (w_.nodes[static_cast<size_t>(o)].is(op)) return true;
      return false;
    };
    switch (n.info->id) {
      case kOpMul:
      case kOpDiv:
      case kOpAdd:
      case kOpSub:
        return reads(kOpFull) || reads(kOpBroadcastTo);
      case kOpWhere:
        return n.operands[1] == n.operands[2] || reads(kOpBroadcastTo);
      case kOpNeg:
      case kOpNot:
      case kOpCast:
      case kOpReshape:
      case kOpBroadcastTo:
      case kOpPermute:
      case kOpSlice:
        return true;
      default:
        return n.info->category == Category::kElementwise && n.operands.size() >= 2 &&
               reads(kOpBroadcastTo);
    }
  }

  bool rewrite(int32_t v) {
    const OpId op = at(v).info->id;
    const size_t arity = at(v).operands.size();
    switch (op) {
      case kOpNeg:
      case kOpNot:
        if (at(in(v, 0)).is(op)) return use(v, in(in(v, 0), 0));
        return false;
      case kOpMul:
        for (size_t k = 0; k < 2; ++k)
          if (is_value(at(in(v, k)), 1.0, false) && use(v, in(v, 1 - k))) return true;
        return drop_broadcast(v);
      case kOpDiv:
        if (is_value(at(in(v, 1)), 1.0, false) && use(v, in(v, 0))) return true;
        return drop_broadcast(v);
      case kOpAdd:
        for (size_t k = 0; k < 2; ++k)
          if (is_zero_for(at(in(v, k)), at(v).dtype, -0.0) && use(v, in(v, 1 - k))) return true;
        return drop_broadcast(v);
      case kOpSub:
        if (is_zero_for(at(in(v, 1)), at(v).dtype, 0.0) && use(v, in(v, 0))) return true;
        return drop_broadcast(v);
      case kOpWhere:
        if (in(v, 1) == in(v, 2) && use(v, in(v, 1))) return true;
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
        if (at(v).info->category == Category::kElementwise && arity >= 2) return drop_broadcast(v);
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
    const int32_t x = in(v, 0);
    if (at(x).dtype == at(v).dtype) return use(v, x);
    if (!at(x).is(kOpCast)) return false;
    const int32_t src = in(x, 0);
    const lt_dtype t = at(src).dtype, u = at(x).dtype, target = at(v).dtype;
    if (!lossless(t, u)) return false;
    if (target == t) return use(v, src);
    if (!is_float(target) && target != LT_DTYPE_BOOL) return false;
    w_.set_operand(v, 0, src);
    return true;
  }

  // reshape(reshape(x)) -> reshape(x); broadcast_to(broadcast_to(x)) -> broadcast_to(x); either
  // to x's own shape -> x; either of a splat constant -> the constant at the new shape.
  bool layout_chain(int32_t v, OpId op) {
    const int32_t x = in(v, 0);
    if (same_shape(at(x).shape, at(v).shape) && at(x).dtype == at(v).dtype) return use(v, x);
    if (full_shape_op(v)) return true;
    if (!at(x).is(op) || at(x).tag != at(v).tag) return false;
    w_.set_operand(v, 0, in(x, 0));
    if (same_shape(at(in(v, 0)).shape, at(v).shape)) return use(v, in(v, 0));
    return true;
  }

  // permute(permute(x, p), q) -> permute(x, p o q); an identity permutation -> x.
  bool permute_chain(int32_t v) {
    const lt_attr* q = at(v).attr("perm");
    if (!q || q->kind != LT_ATTR_INTS) return false;
    const int32_t x = in(v, 0);
    auto identity = [](std::span<const int64_t> p) {
      for (size_t i = 0; i < p.size(); ++i)
        if (p[i] != static_cast<int64_t>(i)) return false;
      return true;
    };
    const std::span<const int64_t> qs(q->ints, q->ints_len);
    if (!fast() && feeds_matmul(v, x)) return false;
    if (full_shape_op(v)) return true;
    if (identity(qs)) return use(v, x);
    if (!at(x).is(kOpPermute) || at(x).tag != at(v).tag) return false;
    const lt_attr* p = at(x).attr("perm");
    if (!p || p->kind != LT_ATTR_INTS || p->ints_len != qs.size()) return false;
    std::vector<int64_t> r(qs.size());
    for (size_t i = 0; i < r.size(); ++i) r[i] = p->ints[static_cast<size_t>(qs[i])];
    const int32_t src = in(x, 0);
    if (identity(r)) return use(v, src);
    std::vector<OwnedAttr> attrs;
    for (const lt_attr& a : at(v).attrs) {
      attrs.push_back(OwnedAttr::copy(a));
      if (attrs.back().name == "perm") attrs.back().ints = r;
    }
    w_.set_operand(v, 0, src);
    w_.set_attrs(v, std::move(attrs));
    return true;
  }

  // A shape op (reshape, permute, broadcast_to, slice) of a splat constant is that constant at
  // the new shape: every element is the same value.
  bool full_shape_op(int32_t v) {
    const int32_t x = in(v, 0);
    double value = 0;
    if (!full_value(at(x), &value) || at(x).dtype != at(v).dtype) return false;
    WNode f = make_full(w_, at(v).dtype, at(v).shape, value);
    f.tag = at(v).tag;
    f.origin = at(v).origin;
    const int32_t nf = w_.add(f);
    return use(v, nf);
  }

  // An elementwise op reading broadcast_to(y) where implicit broadcasting of y gives the same
  // output shape reads y: the values are the same, and no backend has to copy the broadcast.
  bool drop_broadcast(int32_t v) {
    bool changed = false;
    const size_t arity = at(v).operands.size();
    for (size_t k = 0; k < arity; ++k) {
      const int32_t b = in(v, k);
      if (!at(b).is(kOpBroadcastTo) || at(b).tag != at(v).tag) continue;
      const int32_t y = in(b, 0);
      Shape out(at(y).shape.begin(), at(y).shape.end()), tmp;
      for (size_t j = 0; j < arity; ++j) {
        if (j == k) continue;
        const Shape other(at(in(v, j)).shape.begin(), at(in(v, j)).shape.end());
        if (!broadcast(out, other, &tmp)) return changed;
        out = tmp;
      }
      if (!same_shape(out, at(v).shape)) continue;
      w_.set_operand(v, k, y);
      changed = true;
    }
    return changed;
  }

  // slice(concat(x0..xn, axis)) that takes exactly x_k (step 1, the whole of every other dim)
  // -> x_k. The IR form of a slice is its normalised starts, its steps and its output shape.
  bool slice_of_concat(int32_t v) {
    const int32_t c = in(v, 0);
    if (!at(c).is(kOpConcat)) return false;
    const lt_attr* starts = at(v).attr("starts");
    const lt_attr* steps = at(v).attr("steps");
    const size_t rank = at(c).shape.size();
    if (!starts || starts->kind != LT_ATTR_INTS || starts->ints_len != rank ||
        at(v).shape.size() != rank)
      return false;
    if (steps && (steps->kind != LT_ATTR_INTS || steps->ints_len != rank)) return false;
    int64_t axis = 0;
    if (const lt_attr* a = at(c).attr("axis")) axis = a->i;
    if (axis < 0) axis += static_cast<int64_t>(rank);
    if (axis < 0 || axis >= static_cast<int64_t>(rank)) return false;
    const size_t ax = static_cast<size_t>(axis);
    for (size_t d = 0; d < rank; ++d) {
      if (steps && steps->ints[d] != 1) return false;
      if (d != ax && (starts->ints[d] != 0 || at(v).shape[d] != at(c).shape[d])) return false;
    }
    int64_t offset = 0;
    for (size_t k = 0; k < at(c).operands.size(); ++k) {
      const int32_t x = in(c, k);
      const int64_t len = at(x).shape[ax];
      if (starts->ints[ax] == offset && at(v).shape[ax] == len && len > 0) return use(v, x);
      offset += len;
    }
    return false;
  }

  // A GEMM's rounding depends on its operands' layout (the host kernels read a transpose in
  // place, OpenBLAS sums in another order), so under `exact` a permute chain that a matmul
  // reads, directly or through its operand, keeps its layout.
  bool feeds_matmul(int32_t v, int32_t x) const {
    for (int32_t node : {v, x})
      if (static_cast<size_t>(node) < gemm_read_.size() && gemm_read_[static_cast<size_t>(node)])
        return true;
    return false;
  }

  Work& w_;
  std::vector<uint8_t>& gemm_read_;  // Work's scratch
};

}  // namespace

size_t simplify(Work& w, PassStats& s) {
  Simplifier simp(w);
  size_t total = 0;
  std::vector<int32_t>& again = w.ints1;
  std::vector<int32_t>& next = w.ints2;
  again.clear();
  next.clear();
  if (w.fold_made_from) {
    // After a fold: the graph is the one the first simplify left but for the nodes that now
    // read what fold made, so those are swept first; only when one of them is rewritten is
    // the whole graph swept again, as before.
    std::vector<int32_t>& readers = w.ints3;
    readers.clear();
    for (size_t i = 0; i < w.fold_made_from; ++i) {
      const WNode& n = w.nodes[i];
      if (n.dead || w.repl[i] != static_cast<int32_t>(i)) continue;
      for (size_t k = 0; k < n.operands.size(); ++k)
        if (static_cast<size_t>(w.operand(static_cast<int32_t>(i), k)) >= w.fold_made_from) {
          readers.push_back(static_cast<int32_t>(i));
          break;
        }
    }
    const size_t n = simp.sweep(&readers, &next, true);
    if (!n) return 0;
    total += n;
    next.clear();
  }
  for (int round = 0; round < 8; ++round) {  // in-place rewrites may match again
    const size_t n = simp.sweep(round ? &again : nullptr, &next, round == 0);
    total += n;
    if (!n || next.empty()) break;
    again.swap(next);
  }
  s.rewritten += total;
  return total;
}

}  // namespace lt::lower::opt
