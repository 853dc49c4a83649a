// rules.cpp — one gradient rule per differentiable op of docs/ops.md, keyed by op name (the
// elementwise, reduction, matmul and layout rules here; nn and collectives in rules_nn.cpp).
// Every rule is written with other lazy ops (through the public C ops, i.e. lt_apply), so the
// backward pass is an ordinary lazy graph every backend can compile and fuse. Rules may
// return broadcast-shaped or differently-typed gradients: backward.cpp reduces and casts.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "autograd/autograd.h"
#include "autograd/rule_kit.h"
#include "custom_ops.h"  // custom-op gradients (SDK engineer)
#include "error.h"

namespace lt::autograd {
namespace {

using namespace rule_kit;
using namespace nn_rules;

// ---- rules ------------------------------------------------------------------------------

void r_neg(const GradFn&, T g, std::vector<Ref>& r) {
  r[0] = neg(g);
}
void r_abs(const GradFn& fn, T g, std::vector<Ref>& r) {
  T x = in(fn, 0);
  Ref z = cst(g, 0);
  Ref pos = gt(x, z.get()), negm = lt_(x, z.get());
  Ref ng = neg(g);
  Ref inner = where(negm.get(), ng.get(), z.get());
  r[0] = where(pos.get(), g, inner.get());
}
void r_exp(const GradFn& fn, T g, std::vector<Ref>& r) {
  r[0] = mul(g, fn.output);
}
void r_log(const GradFn& fn, T g, std::vector<Ref>& r) {
  r[0] = div_(g, in(fn, 0));
}
void r_sqrt(const GradFn& fn, T g, std::vector<Ref>& r) {
  Ref half = cst(g, 0.5);
  Ref gh = mul(g, half.get());
  r[0] = div_(gh.get(), fn.output);
}
void r_rsqrt(const GradFn& fn, T g, std::vector<Ref>& r) {
  T y = fn.output;  // d/dx x^-1/2 = -1/2 y^3
  Ref y2 = mul(y, y);
  Ref y3 = mul(y2.get(), y);
  Ref k = cst(g, -0.5);
  Ref gk = mul(g, k.get());
  r[0] = mul(gk.get(), y3.get());
}
void r_tanh(const GradFn& fn, T g, std::vector<Ref>& r) {
  T y = fn.output;
  Ref one = cst(g, 1.0);
  Ref y2 = mul(y, y);
  Ref d = sub(one.get(), y2.get());
  r[0] = mul(g, d.get());
}
void r_sigmoid(const GradFn& fn, T g, std::vector<Ref>& r) {
  T y = fn.output;
  Ref one = cst(g, 1.0);
  Ref omy = sub(one.get(), y);
  Ref d = mul(y, omy.get());
  r[0] = mul(g, d.get());
}
void r_relu(const GradFn& fn, T g, std::vector<Ref>& r) {
  Ref z = cst(in(fn, 0), 0);
  Ref pos = gt(in(fn, 0), z.get());
  Ref zg = cst(g, 0);
  r[0] = where(pos.get(), g, zg.get());
}
void r_gelu(const GradFn& fn, T g, std::vector<Ref>& r) {
  // y = 0.5 x (1 + t), t = tanh(k (x + c x^3));
  // dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)
  const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
  T x = in(fn, 0);
  Ref x2 = mul(x, x);
  Ref x3 = mul(x2.get(), x);
  Ref cc = cst(x, c), kk = cst(x, k), half = cst(x, 0.5), one = cst(x, 1.0), c3 = cst(x, 3 * c);
  Ref cx3 = mul(cc.get(), x3.get());
  Ref inner = add(x, cx3.get());
  Ref u = mul(kk.get(), inner.get());
  Ref t = tanh_(u.get());
  Ref opt = add(one.get(), t.get());
  Ref a = mul(half.get(), opt.get());
  Ref t2 = mul(t.get(), t.get());
  Ref omt2 = sub(one.get(), t2.get());
  Ref c3x2 = mul(c3.get(), x2.get());
  Ref p = add(one.get(), c3x2.get());
  Ref kp = mul(kk.get(), p.get());
  Ref hx = mul(half.get(), x);
  Ref b1 = mul(hx.get(), omt2.get());
  Ref b = mul(b1.get(), kp.get());
  Ref d = add(a.get(), b.get());
  r[0] = mul(g, d.get());
}
void r_sin(const GradFn& fn, T g, std::vector<Ref>& r) {
  Ref c = cos_(in(fn, 0));
  r[0] = mul(g, c.get());
}
void r_cos(const GradFn& fn, T g, std::vector<Ref>& r) {
  Ref s = sin_(in(fn, 0));
  Ref gs = mul(g, s.get());
  r[0] = neg(gs.get());
}
void r_floor(const GradFn& fn, T g, std::vector<Ref>& r) {
  r[0] = zeros(g, shape_of(in(fn, 0)), lt_tensor_dtype(g));
}

void r_add(const GradFn& fn, T g, std::vector<Ref>& r) {
  if (fn.needs_grad[0]) r[0] = Ref::retain(g);
  if (fn.needs_grad[1]) r[1] = Ref::retain(g);
}
void r_sub(const GradFn& fn, T g, std::vector<Ref>& r) {
  if (fn.needs_grad[0]) r[0] = Ref::retain(g);
  if (fn.needs_grad[1]) r[1] = neg(g);
}
void r_mul(const GradFn& fn, T g, std::vector<Ref>& r) {
  if (fn.needs_grad[0]) r[0] = mul(g, in(fn, 1));
  if (fn.needs_grad[1]) r[1] = mul(g, in(fn, 0));
}
void r_div(const GradFn& fn, T g, std::vector<Ref>& r) {
  T b = in(fn, 1);
  if (fn.needs_grad[0]) r[0] = div_(g, b);
  if (fn.needs_grad[1]) {
    Ref gy = mul(g, fn.output);
    Ref q = div_(gy.get(), b);
    r[1] = neg(q.get());
  }
}
void r_pow(const GradFn& fn, T g, std::vector<Ref>& r) {
  T a = in(fn, 0), b = in(fn, 1);
  if (fn.needs_grad[0]) {
    Ref one = cst(b, 1.0);
    Ref bm1 = sub(b, one.get());
    Ref p = pow_(a, bm1.get());
    Ref bp = mul(b, p.get());
    r[0] = mul(g, bp.get());
  }
  if (fn.needs_grad[1]) {
    // d/db a^b = a^b log a; defined as 0 where a <= 0 (as PyTorch does at a == 0).
    Ref za = cst(a, 0.0);
    Ref pos = gt(a, za.get());
    Ref one = cst(a, 1.0);
    Ref safe = where(pos.get(), a, one.get());
    Ref la = log_(safe.get());
    Ref gy = mul(g, fn.output);
    Ref v = mul(gy.get(), la.get());
    Ref zg = cst(g, 0.0);
    r[1] = where(pos.get(), v.get(), zg.get());
  }
}
// maximum/minimum: the winner takes the gradient; ties split it evenly.
void minmax_rule(const GradFn& fn, T g, std::vector<Ref>& r, bool is_max) {
  T a = in(fn, 0), b = in(fn, 1);
  Ref tie = eq(a, b);
  Ref half = cst(g, 0.5), zg = cst(g, 0.0);
  Ref gh = mul(g, half.get());
  Ref tie_g = where(tie.get(), gh.get(), zg.get());
  for (int i = 0; i < 2; ++i) {
    if (!fn.needs_grad[i]) continue;
    T self = i == 0 ? a : b, other = i == 0 ? b : a;
    Ref wins = is_max ? gt(self, other) : lt_(self, other);
    r[i] = where(wins.get(), g, tie_g.get());
  }
}
void r_maximum(const GradFn& fn, T g, std::vector<Ref>& r) {
  minmax_rule(fn, g, r, true);
}
void r_minimum(const GradFn& fn, T g, std::vector<Ref>& r) {
  minmax_rule(fn, g, r, false);
}
void r_where(const GradFn& fn, T g, std::vector<Ref>& r) {
  T c = in(fn, 0);
  Ref zg = cst(g, 0.0);
  if (fn.needs_grad[1]) r[1] = where(c, g, zg.get());
  if (fn.needs_grad[2]) r[2] = where(c, zg.get(), g);
}
void r_cast(const GradFn&, T g, std::vector<Ref>& r) {
  r[0] = Ref::retain(g);
}

void r_sum(const GradFn& fn, T g, std::vector<Ref>& r) {
  Shape xs = shape_of(in(fn, 0));
  auto axes = reduce_axes(fn, xs.size());
  Ref gk = keep_dims(fn, g, xs, axes);
  r[0] = broadcast_to(gk.get(), xs);
}
void r_mean(const GradFn& fn, T g, std::vector<Ref>& r) {
  Shape xs = shape_of(in(fn, 0));
  auto axes = reduce_axes(fn, xs.size());
  int64_t count = 1;
  for (int64_t a : axes) count *= xs[static_cast<size_t>(a)];
  Ref gk = keep_dims(fn, g, xs, axes);
  // 1/count as data (a scalar leaf, not a `full` attribute): a step at another batch size is
  // the same program, so it can run dynamic (docs/dynamic-shapes.md).
  T inv_t = nullptr;
  Ref inv =
      wrap(lt_scalar(dev(g), lt_tensor_dtype(g), count > 0 ? 1.0 / double(count) : 0.0, &inv_t),
           &inv_t, "scalar");
  Ref scaled = mul(gk.get(), inv.get());
  r[0] = broadcast_to(scaled.get(), xs);
}
// max/min over axes: the gradient goes to the elements equal to the result, split evenly.
void r_reduce_extreme(const GradFn& fn, T g, std::vector<Ref>& r) {
  T x = in(fn, 0);
  Shape xs = shape_of(x);
  auto axes = reduce_axes(fn, xs.size());
  Ref yk = keep_dims(fn, fn.output, xs, axes);
  Ref gk = keep_dims(fn, g, xs, axes);
  Ref hit = eq(x, yk.get());
  Ref mask = cast(hit.get(), lt_tensor_dtype(g));
  Ref count = sum(mask.get(), axes, true);
  Ref share = div_(mask.get(), count.get());
  r[0] = mul(share.get(), gk.get());
}

void r_matmul(const GradFn& fn, T g, std::vector<Ref>& r) {
  T a = in(fn, 0), b = in(fn, 1);
  Shape as = shape_of(a), bs = shape_of(b);
  if (as.size() == 1 && bs.size() == 1) {
    if (fn.needs_grad[0]) r[0] = mul(g, b);
    if (fn.needs_grad[1]) r[1] = mul(g, a);
    return;
  }
  // Promote 1-D operands as NumPy does, and restore the squeezed dims of g.
  Ref A = as.size() == 1 ? reshape(a, {1, as[0]}) : Ref::retain(a);
  Ref B = bs.size() == 1 ? reshape(b, {bs[0], 1}) : Ref::retain(b);
  Shape gs = shape_of(g);
  if (as.size() == 1) gs.insert(gs.end() - (bs.size() == 1 ? 0 : 1), 1);
  if (bs.size() == 1) gs.push_back(1);
  Ref G = reshape(g, gs);
  // Batch dims that were broadcast are summed away; 1-D operands get their shape back.
  if (fn.needs_grad[0]) {
    Ref Bt = permute(B.get(), swap_last2(shape_of(B.get()).size()));
    Ref ga = reduce_to_shape(matmul(G.get(), Bt.get()), shape_of(A.get()));
    r[0] = as.size() == 1 ? reshape(ga.get(), as) : std::move(ga);
  }
  if (fn.needs_grad[1] && bs.size() == 2 && as.size() > 2) {
    // A shared weight under batched rows (x[..., T, K] @ w[K, N]): one GEMM over all rows,
    // x^T[K, rows] @ g[rows, N], instead of a GEMM per batch element and a sum over them.
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < as.size(); ++d) rows *= as[d];
    Ref A2 = reshape(A.get(), {rows, as.back()});
    Ref G2 = reshape(G.get(), {rows, bs[1]});
    Ref At = permute(A2.get(), swap_last2(2));
    r[1] = matmul(At.get(), G2.get());
  } else if (fn.needs_grad[1]) {
    Ref At = permute(A.get(), swap_last2(shape_of(A.get()).size()));
    Ref gb = reduce_to_shape(matmul(At.get(), G.get()), shape_of(B.get()));
    r[1] = bs.size() == 1 ? reshape(gb.get(), bs) : std::move(gb);
  }
}

void r_reshape(const GradFn& fn, T g, std::vector<Ref>& r) {
  r[0] = reshape(g, shape_of(in(fn, 0)));
}
void r_permute(const GradFn& fn, T g, std::vector<Ref>& r) {
  const auto* perm = fn.attr_ints("perm");
  if (!perm) raise(LT_STATUS_INTERNAL, "permute without 'perm' attribute");
  std::vector<int64_t> inv(perm->size());
  for (size_t i = 0; i < perm->size(); ++i)
    inv[static_cast<size_t>(norm_axis((*perm)[i], perm->size()))] = static_cast<int64_t>(i);
  r[0] = permute(g, inv);
}
void r_broadcast_to(const GradFn&, T g, std::vector<Ref>& r) {
  r[0] = Ref::retain(g);
}

// slice: scatter g back into zeros. Step-1 axes become one pad; other steps use scatter_add
// with the touched indices (arange), which also covers negative steps.
void r_slice(const GradFn& fn, T g, std::vector<Ref>& r) {
  T x = in(fn, 0);
  Shape xs = shape_of(x), os = shape_of(fn.output);
  size_t rank = xs.size();
  const auto* starts = fn.attr_ints("starts");
  const auto* steps = fn.attr_ints("steps");
  lt_dtype gd = lt_tensor_dtype(g);
  for (int64_t d : os)
    if (d == 0) {
      r[0] = zeros(g, xs, gd);
      return;
    }
  std::vector<int64_t> start(rank, 0), step(rank, 1);
  for (size_t d = 0; d < rank; ++d) {
    step[d] = steps && steps->size() == rank ? (*steps)[d] : 1;
    int64_t s = starts && starts->size() == rank ? (*starts)[d] : 0, n = xs[d];
    if (s < 0) s += n;
    s = step[d] > 0 ? std::clamp<int64_t>(s, 0, n) : std::clamp<int64_t>(s, -1, n - 1);
    start[d] = s;
  }
  Ref cur = Ref::retain(g);
  std::vector<int64_t> before(rank, 0), after(rank, 0);
  bool need_pad = false;
  for (size_t d = 0; d < rank; ++d) {
    int64_t len = os[d];
    if (step[d] == 1) {
      before[d] = start[d];
      after[d] = xs[d] - start[d] - len;
      need_pad |= before[d] != 0 || after[d] != 0;
      continue;
    }
    Ref idx = arange(g, static_cast<double>(start[d]),
                     static_cast<double>(start[d] + len * step[d]), static_cast<double>(step[d]));
    Ref z = zeros(g, with_dim(shape_of(cur.get()), d, xs[d]), gd);
    cur = scatter_add(z.get(), idx.get(), cur.get(), static_cast<int64_t>(d));
  }
  r[0] = need_pad ? pad(cur.get(), before, after, 0.0) : std::move(cur);
}
void r_concat(const GradFn& fn, T g, std::vector<Ref>& r) {
  Shape gs = shape_of(g);
  size_t rank = gs.size();
  int64_t axis = norm_axis(fn.attr_int("axis", 0), rank);
  int64_t off = 0;
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    int64_t n = shape_of(in(fn, i))[static_cast<size_t>(axis)];
    if (fn.needs_grad[i]) {
      std::vector<int64_t> starts(rank, 0), stops(gs.begin(), gs.end()), steps(rank, 1);
      starts[static_cast<size_t>(axis)] = off;
      stops[static_cast<size_t>(axis)] = off + n;
      r[i] = slice(g, starts, stops, steps);
    }
    off += n;
  }
}
void r_pad(const GradFn& fn, T g, std::vector<Ref>& r) {
  Shape xs = shape_of(in(fn, 0));
  const auto* before = fn.attr_ints("before");
  std::vector<int64_t> starts(xs.size(), 0), stops(xs), steps(xs.size(), 1);
  for (size_t d = 0; d < xs.size(); ++d) {
    starts[d] = before && before->size() == xs.size() ? (*before)[d] : 0;
    stops[d] = starts[d] + xs[d];
  }
  r[0] = slice(g, starts, stops, steps);
}
// Indices as gather used them: clamped to [0, n-1].
Ref clamp_index(T idx, int64_t n) {
  Ref lo = cst(idx, 0), hi = cst(idx, static_cast<double>(n > 0 ? n - 1 : 0));
  Ref a = maximum(idx, lo.get());
  return minimum(a.get(), hi.get());
}
void r_gather(const GradFn& fn, T g, std::vector<Ref>& r) {
  T a = in(fn, 0), idx = in(fn, 1);
  Shape as = shape_of(a);
  int64_t axis = norm_axis(fn.attr_int("axis", 0), as.size());
  Ref ci = clamp_index(idx, as[static_cast<size_t>(axis)]);
  Ref z = zeros(g, as, lt_tensor_dtype(g));
  r[0] = scatter_add(z.get(), ci.get(), g, axis);
}
void r_scatter_add(const GradFn& fn, T g, std::vector<Ref>& r) {
  T a = in(fn, 0), idx = in(fn, 1);
  Shape as = shape_of(a), is = shape_of(idx);
  int64_t axis = norm_axis(fn.attr_int("axis", 0), as.size());
  if (fn.needs_grad[0]) r[0] = Ref::retain(g);
  if (fn.needs_grad[2]) {
    // Updates at dropped (out-of-range) indices contributed nothing: their gradient is 0.
    int64_t n = as[static_cast<size_t>(axis)];
    Ref got = gather(g, idx, axis);
    Ref zero = cst(idx, 0), nn = cst(idx, static_cast<double>(n));
    Ref ge0 = ge(idx, zero.get()), ltn = lt_(idx, nn.get());
    Ref valid = and_(ge0.get(), ltn.get());
    Shape vs(static_cast<size_t>(axis), 1);
    vs.insert(vs.end(), is.begin(), is.end());
    vs.resize(vs.size() + as.size() - static_cast<size_t>(axis) - 1, 1);
    Ref vr = reshape(valid.get(), vs);
    Ref zg = cst(g, 0.0);
    r[2] = where(vr.get(), got.get(), zg.get());
  }
}

// The `grad` column of lt_ops.def: GRAD(r) names r_<r> above; NONDIFF rows have no rule.
#define LT_GRAD_GRAD(r) &r_##r
#define LT_GRAD_NONDIFF nullptr
#define LT_GRAD_DECOMP &decomposed_rule

const std::unordered_map<std::string, Rule>& rule_table() {
  static const std::unordered_map<std::string, Rule> table = [] {
    std::unordered_map<std::string, Rule> t;
#define LT_OP(Camel, name, capi, cfn, cppfn, category, lo, hi, attrs, dtypes, rule, grad, kind) \
  if (Rule r = LT_GRAD_##grad) t.emplace(name, r);
#include "lazytensor/lt_ops.def"
#undef LT_OP
    return t;
  }();
  return table;
}

bool nondiff_row(const char* op) {
  static const std::unordered_set<std::string> ops = [] {
    std::unordered_set<std::string> t;
#define LT_GRAD_IS_NONDIFF_GRAD(r) false
#define LT_GRAD_IS_NONDIFF_NONDIFF true
#define LT_GRAD_IS_NONDIFF_DECOMP false
#define LT_OP(Camel, name, capi, cfn, cppfn, category, lo, hi, attrs, dtypes, rule, grad, kind) \
  if (LT_GRAD_IS_NONDIFF_##grad) t.emplace(name);
#include "lazytensor/lt_ops.def"
#undef LT_OP
    return t;
  }();
  return ops.count(op) != 0;
}

}  // namespace

Rule find_rule(const std::string& op) {
  const auto& t = rule_table();
  auto it = t.find(op);
  if (it != t.end()) return it->second;
  // Custom ops registered with a gradient callback (SDK engineer, core/src/custom_ops.cpp).
  return lt::find_custom_op_with_grad(op) ? lt::custom_grad_rule : nullptr;
}

bool is_non_differentiable(const char* op) {
  return nondiff_row(op);
}

}  // namespace lt::autograd
