// rules_nn.cpp — the gradient rules of conv2d, pooling, softmax and the collectives, written
// with other lazy ops like every rule (rules.cpp).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/rule_kit.h"
#include "lazytensor/lt.h"

namespace lt::autograd::nn_rules {
namespace {
using namespace rule_kit;
}  // namespace

// conv2d: the two gradients are ops of their own, conv2d_backward_data and
// conv2d_backward_weight, so a backend with real kernels for them (the host kernels: oneDNN)
// runs them directly; the others get their decomposition (decompose.hpp: convolutions of the
// flipped, transposed and stride-dilated tensors, which this rule used to build inline).
namespace {
Ref conv2d_grad(const char* op, T a, T b, const char* size_name, const int64_t* size,
                const GradFn& fn) {
  auto s = attr_pair(fn, "stride", 1), p = attr_pair(fn, "padding", 0),
       dl = attr_pair(fn, "dilation", 1);
  const lt_attr at[5] = {{size_name, LT_ATTR_INTS, 0, 0, size, 2, nullptr},
                         {"stride", LT_ATTR_INTS, 0, 0, s.data(), 2, nullptr},
                         {"padding", LT_ATTR_INTS, 0, 0, p.data(), 2, nullptr},
                         {"dilation", LT_ATTR_INTS, 0, 0, dl.data(), 2, nullptr},
                         {"groups", LT_ATTR_INT, fn.attr_int("groups", 1), 0, nullptr, 0, nullptr}};
  T in[2] = {a, b};
  T o = nullptr;
  return wrap(lt_apply(dev(a), op, in, 2, at, 5, &o), &o, op);
}
}  // namespace

void r_conv2d(const GradFn& fn, T g, std::vector<Ref>& r) {
  T x = in(fn, 0), w = in(fn, 1);
  Shape xs = shape_of(x), ws = shape_of(w);
  if (fn.needs_grad[0]) {
    const int64_t hw[2] = {xs[2], xs[3]};
    r[0] = conv2d_grad("conv2d_backward_data", g, w, "input_size", hw, fn);
  }
  if (fn.needs_grad[1]) {
    const int64_t k[2] = {ws[2], ws[3]};
    r[1] = conv2d_grad("conv2d_backward_weight", x, g, "kernel_size", k, fn);
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
// Windows that tile the input (stride = kernel, no padding: lt-run's and most nets' pools)
// need no gather and no scatter: the input viewed as [N,C,OH,KH,OW,KW] lines up with the
// output viewed as [N,C,OH,1,OW,1], and the gradient is elementwise work cpu_jit fuses
// (measured: gather + scatter_add were a quarter of the cnn's training step). Rows and columns
// past the last window get zeros.
bool tiles(const PoolGeom& q) {
  return q.p[0] == 0 && q.p[1] == 0 && q.s[0] == q.KH && q.s[1] == q.KW;
}
Ref untile(T g6, const PoolGeom& q) {
  const int64_t th = q.OH * q.KH, tw = q.OW * q.KW;
  Ref g4 = reshape(g6, {q.N, q.C, th, tw});
  if (th == q.H && tw == q.W) return g4;
  return pad(g4.get(), {0, 0, 0, 0}, {0, 0, q.H - th, q.W - tw}, 0.0);
}
void max_pool_tiled(const GradFn& fn, T g, std::vector<Ref>& r, const PoolGeom& q) {
  T x = in(fn, 0);
  const int64_t th = q.OH * q.KH, tw = q.OW * q.KW;
  Ref xc = (th == q.H && tw == q.W) ? Ref::retain(x)
                                    : slice(x, {0, 0, 0, 0}, {q.N, q.C, th, tw}, {1, 1, 1, 1});
  Ref x6 = reshape(xc.get(), {q.N, q.C, q.OH, q.KH, q.OW, q.KW});
  Ref y6 = reshape(fn.output, {q.N, q.C, q.OH, 1, q.OW, 1});
  Ref hit = eq(x6.get(), y6.get());
  Ref mask = cast(hit.get(), lt_tensor_dtype(g));
  Ref cnt = sum(mask.get(), {3, 5}, true);  // ties share the gradient, as below
  Ref g6 = reshape(g, {q.N, q.C, q.OH, 1, q.OW, 1});
  Ref share = div_(g6.get(), cnt.get());
  Ref gx = mul(mask.get(), share.get());
  r[0] = untile(gx.get(), q);
}
void r_max_pool2d(const GradFn& fn, T g, std::vector<Ref>& r) {
  PoolGeom q = pool_geom(fn);
  if (tiles(q)) return max_pool_tiled(fn, g, r, q);
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
  if (tiles(q)) {
    Ref inv = cst(g, 1.0 / static_cast<double>(q.KH * q.KW));
    Ref gs = mul(g, inv.get());
    Ref g6 = reshape(gs.get(), {q.N, q.C, q.OH, 1, q.OW, 1});
    Ref gb = broadcast_to(g6.get(), {q.N, q.C, q.OH, q.KH, q.OW, q.KW});
    r[0] = untile(gb.get(), q);
    return;
  }
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

}  // namespace lt::autograd::nn_rules
