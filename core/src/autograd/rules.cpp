// rules.cpp — one gradient rule per differentiable op of docs/ops.md, keyed by op name.
// Every rule is written with other lazy ops (through the public C ops, i.e. lt_apply), so the
// backward pass is an ordinary lazy graph every backend can compile and fuse. Rules may
// return broadcast-shaped or differently-typed gradients: backward.cpp reduces and casts.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "autograd/autograd.h"
#include "custom_ops.h"  // custom-op gradients (SDK engineer)
#include "error.h"

namespace lt::autograd {
namespace {

// ---- small helpers: each returns an owned handle or throws lt::Error ----------------------

using T = lt_tensor*;

// `out` is read only after the call has run (argument evaluation order is unspecified).
// Core errors already name the op, so no prefix is added.
Ref wrap(lt_error* e, T* out, const char*) {
  check(e, nullptr);
  return Ref(*out);
}
int64_t norm_axis(int64_t a, size_t rank) {
  return a < 0 ? a + static_cast<int64_t>(rank) : a;
}
lt_device* dev(T t) {
  return lt_tensor_device(t);
}
Shape with_dim(Shape s, size_t axis, int64_t v) {
  s[axis] = v;
  return s;
}

#define LT_UNARY(name, cfn)             \
  Ref name(T a) {                       \
    T o = nullptr;                      \
    return wrap(cfn(a, &o), &o, #name); \
  }
#define LT_BINARY(name, cfn)               \
  Ref name(T a, T b) {                     \
    T o = nullptr;                         \
    return wrap(cfn(a, b, &o), &o, #name); \
  }
LT_UNARY(neg, lt_neg)
LT_UNARY(exp_, lt_exp)
LT_UNARY(log_, lt_log)
LT_UNARY(sin_, lt_sin)
LT_UNARY(cos_, lt_cos)
LT_UNARY(tanh_, lt_tanh)
LT_BINARY(add, lt_add)
LT_BINARY(sub, lt_sub)
LT_BINARY(mul, lt_mul)
LT_BINARY(div_, lt_div)
LT_BINARY(pow_, lt_pow)
LT_BINARY(eq, lt_eq)
LT_BINARY(gt, lt_gt)
LT_BINARY(lt_, lt_lt)
LT_BINARY(ge, lt_ge)
LT_BINARY(and_, lt_and)
LT_BINARY(maximum, lt_maximum)
LT_BINARY(minimum, lt_minimum)
LT_BINARY(matmul, lt_matmul)
#undef LT_UNARY
#undef LT_BINARY

// A rank-0 constant of `like`'s dtype (a `full` node: a compile-time constant).
Ref cst(T like, double v, lt_dtype dtype = LT_DTYPE_INVALID) {
  static const int64_t kNoDims[1] = {0};
  T o = nullptr;
  lt_dtype d = dtype == LT_DTYPE_INVALID ? lt_tensor_dtype(like) : dtype;
  return wrap(lt_full(dev(like), kNoDims, 0, v, d, &o), &o, "full");
}
Ref zeros(T like_device, const Shape& s, lt_dtype d) {
  static const int64_t kNoDims[1] = {0};
  T o = nullptr;
  return wrap(lt_full(dev(like_device), s.empty() ? kNoDims : s.data(), s.size(), 0.0, d, &o), &o,
              "full");
}
Ref where(T c, T a, T b) {
  T o = nullptr;
  return wrap(lt_where(c, a, b, &o), &o, "where");
}
Ref cast(T a, lt_dtype d) {
  T o = nullptr;
  return wrap(lt_cast(a, d, &o), &o, "cast");
}
Ref sum(T a, const std::vector<int64_t>& axes, bool keepdims) {
  T o = nullptr;
  return wrap(lt_sum(a, axes.data(), axes.size(), keepdims ? 1 : 0, &o), &o, "sum");
}
Ref reshape(T a, const Shape& s) {
  static const int64_t kNoDims[1] = {0};
  T o = nullptr;
  return wrap(lt_reshape(a, s.empty() ? kNoDims : s.data(), s.size(), &o), &o, "reshape");
}
Ref permute(T a, const std::vector<int64_t>& perm) {
  T o = nullptr;
  return wrap(lt_permute(a, perm.data(), perm.size(), &o), &o, "permute");
}
Ref broadcast_to(T a, const Shape& s) {
  T o = nullptr;
  return wrap(lt_broadcast_to(a, s.data(), s.size(), &o), &o, "broadcast_to");
}
Ref slice(T a, const std::vector<int64_t>& starts, const std::vector<int64_t>& stops,
          const std::vector<int64_t>& steps) {
  T o = nullptr;
  return wrap(lt_slice(a, starts.data(), stops.data(), steps.data(), starts.size(), &o), &o,
              "slice");
}
Ref pad(T a, const std::vector<int64_t>& before, const std::vector<int64_t>& after, double v) {
  T o = nullptr;
  return wrap(lt_pad(a, before.data(), after.data(), before.size(), v, &o), &o, "pad");
}
Ref gather(T a, T idx, int64_t axis) {
  T o = nullptr;
  return wrap(lt_gather(a, idx, axis, &o), &o, "gather");
}
Ref scatter_add(T a, T idx, T upd, int64_t axis) {
  T o = nullptr;
  return wrap(lt_scatter_add(a, idx, upd, axis, &o), &o, "scatter_add");
}
Ref arange(T like_device, double start, double stop, double step) {
  T o = nullptr;
  return wrap(lt_arange(dev(like_device), start, stop, step, LT_DTYPE_I64, &o), &o, "arange");
}
Ref conv2d(T x, T w, const int64_t* stride, const int64_t* padding, const int64_t* dilation,
           int64_t groups) {
  T o = nullptr;
  return wrap(lt_conv2d(x, w, nullptr, stride, padding, dilation, groups, &o), &o, "conv2d");
}

// Reduction axes as the op saw them: normalised, all axes when empty.
std::vector<int64_t> reduce_axes(const GradFn& fn, size_t rank) {
  std::vector<int64_t> axes;
  if (const auto* a = fn.attr_ints("axes")) {
    for (int64_t x : *a) axes.push_back(norm_axis(x, rank));
  }
  if (axes.empty()) {
    axes.resize(rank);
    std::iota(axes.begin(), axes.end(), 0);
  }
  return axes;
}
// `t` (shaped like the reduction's output) reshaped to keepdims form.
Ref keep_dims(const GradFn& fn, T t, const Shape& in_shape, const std::vector<int64_t>& axes) {
  if (fn.attr_int("keepdims", 0)) return Ref::retain(t);
  Shape s = in_shape;
  for (int64_t a : axes) s[static_cast<size_t>(a)] = 1;
  return reshape(t, s);
}
std::vector<int64_t> attr_pair(const GradFn& fn, const char* name, int64_t fallback) {
  const auto* v = fn.attr_ints(name);
  if (v && v->size() == 2) return *v;
  return {fallback, fallback};
}
std::vector<int64_t> swap_last2(size_t rank) {
  std::vector<int64_t> p(rank);
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[rank - 1], p[rank - 2]);
  return p;
}

T in(const GradFn& fn, size_t i) {
  return fn.inputs[i].get();
}

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

// conv2d: input gradient = a stride-1 convolution of the stride-dilated, padded output
// gradient with the flipped, channel-transposed kernel; weight gradient = a convolution of
// the input (channels as batch) with the output gradient as kernel (stride and dilation
// trade places). Groups map onto the grouped convolutions below.
void r_conv2d(const GradFn& fn, T g, std::vector<Ref>& r) {
  T x = in(fn, 0), w = in(fn, 1);
  Shape xs = shape_of(x), ws = shape_of(w), gs = shape_of(g);
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  const int64_t O = ws[0], Cg = ws[1], KH = ws[2], KW = ws[3];
  const int64_t OH = gs[2], OW = gs[3];
  const int64_t G = fn.attr_int("groups", 1), Og = O / G;
  auto s = attr_pair(fn, "stride", 1), p = attr_pair(fn, "padding", 0),
       dl = attr_pair(fn, "dilation", 1);
  const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
  if (fn.needs_grad[0]) {
    Ref gd = Ref::retain(g);
    if (s[0] > 1 || s[1] > 1) {
      Ref g6 = reshape(g, {N, O, OH, 1, OW, 1});
      Ref gp = pad(g6.get(), {0, 0, 0, 0, 0, 0}, {0, 0, 0, s[0] - 1, 0, s[1] - 1}, 0.0);
      Ref g4 = reshape(gp.get(), {N, O, OH * s[0], OW * s[1]});
      gd = slice(g4.get(), {0, 0, 0, 0}, {N, O, (OH - 1) * s[0] + 1, (OW - 1) * s[1] + 1},
                 {1, 1, 1, 1});
    }
    const int64_t Hp = H + 2 * p[0], Wp = W + 2 * p[1];
    const int64_t eh = (KH - 1) * dl[0], ew = (KW - 1) * dl[1];
    const int64_t rh = Hp - ((OH - 1) * s[0] + 1 + eh), rw = Wp - ((OW - 1) * s[1] + 1 + ew);
    Ref gdp = pad(gd.get(), {0, 0, eh, ew}, {0, 0, eh + rh, ew + rw}, 0.0);
    Ref w5 = reshape(w, {G, Og, Cg, KH, KW});
    Ref w5t = permute(w5.get(), {0, 2, 1, 3, 4});
    Ref w4 = reshape(w5t.get(), {C, Og, KH, KW});
    Ref wf = slice(w4.get(), {0, 0, KH - 1, KW - 1}, {C, Og, -(KH + 1), -(KW + 1)}, {1, 1, -1, -1});
    Ref gxp = conv2d(gdp.get(), wf.get(), one, zero, dl.data(), G);
    r[0] = (p[0] || p[1])
               ? slice(gxp.get(), {0, 0, p[0], p[1]}, {N, C, p[0] + H, p[1] + W}, {1, 1, 1, 1})
               : std::move(gxp);
  }
  if (fn.needs_grad[1]) {
    Ref x5 = reshape(x, {N, G, Cg, H, W});
    Ref x5t = permute(x5.get(), {2, 1, 0, 3, 4});
    Ref x4 = reshape(x5t.get(), {Cg, G * N, H, W});
    Ref k = permute(g, {1, 0, 2, 3});
    Ref rw = conv2d(x4.get(), k.get(), dl.data(), p.data(), s.data(), G);  // [Cg, O, KH', KW']
    Shape rs = shape_of(rw.get());
    Ref rk = (rs[2] != KH || rs[3] != KW)
                 ? slice(rw.get(), {0, 0, 0, 0}, {Cg, O, KH, KW}, {1, 1, 1, 1})
                 : std::move(rw);
    r[1] = permute(rk.get(), {1, 0, 2, 3});
  }
  if (fn.inputs.size() > 2 && fn.needs_grad[2]) r[2] = sum(g, {0, 2, 3}, false);
}

// Pools: im2col by gather with a constant index tensor (built from aranges), the window
// gradient computed per column, then scatter_add back (the adjoint of the gather).
struct PoolGeom {
  int64_t N, C, H, W, KH, KW, OH, OW, Hp, Wp;
  std::vector<int64_t> s, p;
};
PoolGeom pool_geom(const GradFn& fn) {
  Shape xs = shape_of(in(fn, 0)), ys = shape_of(fn.output);
  PoolGeom q;
  q.N = xs[0], q.C = xs[1], q.H = xs[2], q.W = xs[3];
  auto k = attr_pair(fn, "kernel", 1);
  q.KH = k[0], q.KW = k[1];
  q.s = attr_pair(fn, "stride", 1);
  q.p = attr_pair(fn, "padding", 0);
  q.OH = ys[2], q.OW = ys[3];
  q.Hp = q.H + 2 * q.p[0], q.Wp = q.W + 2 * q.p[1];
  return q;
}
// Flat index into the padded [Hp*Wp] plane of each (oh, ow, kh, kw) window element.
Ref window_index(T like, const PoolGeom& q) {
  Ref ai = arange(like, 0, static_cast<double>(q.OH * q.s[0] * q.Wp),
                  static_cast<double>(q.s[0] * q.Wp));
  Ref aj = arange(like, 0, static_cast<double>(q.OW * q.s[1]), static_cast<double>(q.s[1]));
  Ref ak = arange(like, 0, static_cast<double>(q.KH * q.Wp), static_cast<double>(q.Wp));
  Ref al = arange(like, 0, static_cast<double>(q.KW), 1);
  Ref i4 = reshape(ai.get(), {q.OH, 1, 1, 1}), j4 = reshape(aj.get(), {1, q.OW, 1, 1});
  Ref k4 = reshape(ak.get(), {1, 1, q.KH, 1}), l4 = reshape(al.get(), {1, 1, 1, q.KW});
  Ref ij = add(i4.get(), j4.get());
  Ref kl = add(k4.get(), l4.get());
  Ref all = add(ij.get(), kl.get());
  return reshape(all.get(), {q.OH * q.OW * q.KH * q.KW});
}
// Scatters per-window-element gradients [N,C,L] back to an [N,C,H,W] input gradient.
Ref fold(T gcols, T idx, const PoolGeom& q) {
  Ref z = zeros(gcols, {q.N, q.C, q.Hp * q.Wp}, lt_tensor_dtype(gcols));
  Ref sc = scatter_add(z.get(), idx, gcols, 2);
  Ref img = reshape(sc.get(), {q.N, q.C, q.Hp, q.Wp});
  if (!q.p[0] && !q.p[1]) return img;
  return slice(img.get(), {0, 0, q.p[0], q.p[1]}, {q.N, q.C, q.p[0] + q.H, q.p[1] + q.W},
               {1, 1, 1, 1});
}
void r_max_pool2d(const GradFn& fn, T g, std::vector<Ref>& r) {
  PoolGeom q = pool_geom(fn);
  T x = in(fn, 0);
  Ref xp = (q.p[0] || q.p[1]) ? pad(x, {0, 0, q.p[0], q.p[1]}, {0, 0, q.p[0], q.p[1]}, -INFINITY)
                              : Ref::retain(x);
  Ref flat = reshape(xp.get(), {q.N, q.C, q.Hp * q.Wp});
  Ref idx = window_index(g, q);
  Ref cols = gather(flat.get(), idx.get(), 2);
  Ref cols5 = reshape(cols.get(), {q.N, q.C, q.OH, q.OW, q.KH * q.KW});
  Ref y5 = reshape(fn.output, {q.N, q.C, q.OH, q.OW, 1});
  Ref hit = eq(cols5.get(), y5.get());
  Ref mask = cast(hit.get(), lt_tensor_dtype(g));
  Ref cnt = sum(mask.get(), {4}, true);
  Ref share = div_(mask.get(), cnt.get());
  Ref g5 = reshape(g, {q.N, q.C, q.OH, q.OW, 1});
  Ref gc = mul(share.get(), g5.get());
  Ref gflat = reshape(gc.get(), {q.N, q.C, q.OH * q.OW * q.KH * q.KW});
  r[0] = fold(gflat.get(), idx.get(), q);
}
void r_avg_pool2d(const GradFn& fn, T g, std::vector<Ref>& r) {
  PoolGeom q = pool_geom(fn);
  Ref idx = window_index(g, q);
  Ref inv = cst(g, 1.0 / static_cast<double>(q.KH * q.KW));
  Ref gs = mul(g, inv.get());
  Ref g5 = reshape(gs.get(), {q.N, q.C, q.OH, q.OW, 1});
  Ref gb = broadcast_to(g5.get(), {q.N, q.C, q.OH, q.OW, q.KH * q.KW});
  Ref gflat = reshape(gb.get(), {q.N, q.C, q.OH * q.OW * q.KH * q.KW});
  r[0] = fold(gflat.get(), idx.get(), q);
}
void r_softmax(const GradFn& fn, T g, std::vector<Ref>& r) {
  T y = fn.output;
  int64_t axis = norm_axis(fn.attr_int("axis", -1), lt_tensor_rank(y));
  Ref gy = mul(g, y);
  Ref s = sum(gy.get(), {axis}, true);
  Ref d = sub(g, s.get());
  r[0] = mul(y, d.get());
}
void r_log_softmax(const GradFn& fn, T g, std::vector<Ref>& r) {
  T y = fn.output;
  int64_t axis = norm_axis(fn.attr_int("axis", -1), lt_tensor_rank(y));
  Ref p = exp_(y);
  Ref s = sum(g, {axis}, true);
  Ref ps = mul(p.get(), s.get());
  r[0] = sub(g, ps.get());
}

// ---- collectives: the gradient of a reduction over ranks is the same reduction of the
// gradients (y = sum_r x_r on every rank, so dL/dx_r = sum_q g_q); all_gather's is this rank's
// rows of that sum. max has no rule: its winner is on another process.
void r_all_reduce(const GradFn& fn, T g, std::vector<Ref>& r) {
  int64_t op = fn.attr_int("reduce", 0);
  if (op == LT_REDUCE_MAX)
    fail(LT_STATUS_UNSUPPORTED,
         "all_reduce(max) has no gradient (the maximum may be another "
         "rank's)");
  T o = nullptr;
  r[0] = wrap(lt_all_reduce(g, static_cast<lt_reduce_op>(op), &o), &o, "all_reduce");
}
void r_all_gather(const GradFn& fn, T g, std::vector<Ref>& r) {
  Shape xs = shape_of(in(fn, 0));
  T o = nullptr;
  Ref total = wrap(lt_all_reduce(g, LT_REDUCE_SUM, &o), &o, "all_reduce");
  std::vector<int64_t> starts(xs.size(), 0), stops(xs.begin(), xs.end()), steps(xs.size(), 1);
  starts[0] = lt_dist_rank() * xs[0];
  stops[0] = starts[0] + xs[0];
  r[0] = slice(total.get(), starts, stops, steps);
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
