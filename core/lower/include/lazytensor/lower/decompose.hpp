// decompose.hpp — every COMPOSITE op of lt_ops.def as primitives (the reference semantics of
// those ops), written once against the builder interface of builder.hpp, and the pass that
// rewrites a region for a backend: composites it does not claim are decomposed, implicit
// broadcasts it does not take are made explicit, recursively; the rest is left for fallback.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "lazytensor/lower/builder.hpp"
#include "lazytensor/lower/error.hpp"

namespace lt::lower {

namespace detail {

inline int64_t norm_axis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}
// Reduction axes as the op means them: normalised, sorted, unique; empty = every axis.
inline std::vector<int64_t> norm_axes(std::vector<int64_t> axes, size_t rank) {
  if (axes.empty()) {
    axes.resize(rank);
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int64_t& a : axes) a = norm_axis(a, rank);
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}
// A constant as dtype d stores it (so that arithmetic on it rounds as the op's kernels do).
inline double as_dtype(double v, lt_dtype d) {
  return d == LT_DTYPE_F32 ? static_cast<double>(static_cast<float>(v)) : v;
}

template <class B>
Value gelu(B& b, Value x) {
  // 0.5·x·(1 + tanh(u)), u = √(2/π)·(x + 0.044715·x³), written as x·sigmoid(2u): the same
  // function without the cancellation of 1 + tanh(u), which leaves nothing of an f32 result
  // below x = -5 (the relative error there is 1; cpu_jit's accuracy sweep measured it).
  Value x3 = b.mul(b.mul(x, x), x);
  Value u2 = b.mulc(b.add(x, b.mulc(x3, 0.044715)), 2 * 0.7978845608028654);
  return b.mul(x, b.sigmoid(u2));
}

// Horner's rule over coefficients, highest power first.
template <class B, size_t N>
Value horner(B& b, Value x, const double (&c)[N]) {
  Value r = b.scalar(c[0], b.desc(x).dtype);
  for (size_t i = 1; i < N; ++i) r = b.addc(b.mul(r, x), c[i]);
  return r;
}

// erf: x·P(x²) for |x| < 1; 1 − e^(−x²)·Q(1/|x|) with the sign of x beyond (|x| clamped to 4,
// where erf is 1 within 1.6e-8). Absolute error <= 1.6e-8 for every x (2.5e-10 on [-4, 4])
// in exact arithmetic: f32 results are within its rounding, f64 ones to 1.6e-8. Each branch
// sees only inputs it is defined for, so gradients through the unselected one stay finite.
// Coefficients: mpmath (dps 40) chebyfit of erf(√t)/√t on t ∈ [0, 1], degree 7, and of
// erfc(1/u)·e^(1/u²) on u ∈ [1/4, 1], degree 10.
inline constexpr double kErfP[] = {
    -9.6670445714869964e-6, 0.00011265959025606609, -0.00084840804055351063, 0.0052210318078580228,
    -0.026865430727670243,  0.11283782495236845,    -0.3761263846802871,     1.1283791670615434};
inline constexpr double kErfQ[] = {
    -0.032892208538434746, 0.23161031799951704, -0.7201687849689087,   1.2805354046933301,
    -1.3780948064690192,   0.80010673310153913, -0.023459579534468293, -0.29928776766379526,
    0.0057875958377361585, 0.56340513810863013, 4.1533124843099999e-5};

template <class B>
Value erf(B& b, Value x) {
  lt_dtype d = b.desc(x).dtype;
  Value ax = b.abs(x);
  Value xs = b.minimum(b.maximum(x, b.scalar(-1, d)), b.scalar(1, d));
  Value small = b.mul(xs, horner(b, b.mul(xs, xs), kErfP));
  Value al = b.minimum(b.maximum(ax, b.scalar(1, d)), b.scalar(4, d));
  Value tail = b.mul(b.exp(b.neg(b.mul(al, al))), horner(b, b.div(b.scalar(1, d), al), kErfQ));
  Value big = b.sub(b.scalar(1, d), tail);
  big = b.where(b.lt(x, b.scalar(0, d)), b.neg(big), big);
  return b.where(b.lt(ax, b.scalar(1, d)), small, big);
}

// softplus: max(x, 0) + log(1 + e^(−|x|)), the log taken as log1p by Goldberg's rule
// (u·log(1 + u)/((1 + u) − 1), or u where 1 + u rounds to 1), so that it keeps its relative
// accuracy for very negative x, where softplus(x) ~ e^x.
template <class B>
Value softplus(B& b, Value x) {
  lt_dtype d = b.desc(x).dtype;
  Value u = b.exp(b.neg(b.abs(x)));
  Value w = b.addc(u, 1.0);
  Value dw = b.sub(w, b.scalar(1, d));
  Value exact = b.eq(dw, b.scalar(0, d));
  Value safe = b.where(exact, b.scalar(1, d), dw);
  Value l1p = b.where(exact, u, b.div(b.mul(b.log(w), u), safe));
  return b.add(b.maximum(x, b.scalar(0, d)), l1p);
}

template <class B>
Value argmax(B& b, Value x, const Attrs& a) {
  // The first index holding the maximum; a NaN counts as the maximum (max propagates it, and
  // only NaNs then compare unequal to themselves).
  Desc d = b.desc(x);
  int64_t ax = norm_axis(a.i("axis"), d.shape.size()), n = d.shape[ax];
  Value m = b.max(x, {ax}, true);
  Value hit = b.or_(b.eq(x, m), b.ne(x, x));
  Shape is(d.shape.size(), 1);
  is[ax] = n;
  Value idx = b.reshape(b.arange(n, 0, 1, LT_DTYPE_I64), is);
  Value cand = b.where(hit, idx, b.scalar(static_cast<double>(n), LT_DTYPE_I64));
  return b.min(cand, {ax}, a.i("keepdims") != 0);
}

template <class B>
Value softmax(B& b, Value x, const Attrs& a, bool log_form) {
  int64_t ax = norm_axis(a.i("axis"), b.desc(x).shape.size());
  Value s = b.sub(x, b.max(x, {ax}, true));
  Value e = b.exp(s);
  Value z = b.sum(e, {ax}, true);
  return log_form ? b.sub(s, b.log(z)) : b.div(e, z);
}

template <class B>
Value random(B& b, OpId op, Value seed, const Attrs& a, const Desc& out) {
  lt_dtype d = out.dtype;
  if (op == kOpRandomUniform) {
    double lo = as_dtype(a.f("low"), d), hi = as_dtype(a.f("high"), d);
    Value u = b.random_unit(seed, out.shape, 1, 0, d);
    return b.add(b.scalar(lo, d), b.mul(b.scalar(as_dtype(hi - lo, d), d), u));
  }
  // Box-Muller on the streams 2i and 2i+1 (lt_random.h).
  Value u1 = b.sub(b.scalar(1, d), b.random_unit(seed, out.shape, 2, 0, d));
  Value u2 = b.random_unit(seed, out.shape, 2, 1, d);
  Value z = b.mul(b.sqrt(b.mulc(b.log(u1), -2.0)), b.cos(b.mulc(u2, 6.283185307179586476925)));
  return b.add(b.scalar(a.f("mean"), d), b.mul(b.scalar(a.f("std"), d), z));
}

// conv2d as im2col: the KH·KW strided slices of the padded input, stacked, times the
// weight reshaped to [O/groups, C/groups·KH·KW], one batched matmul per image and group.
template <class B>
Value conv2d(B& b, std::span<const Value> in, const Attrs& a, const Desc& out) {
  Desc dx = b.desc(in[0]), dw = b.desc(in[1]);
  const int64_t N = dx.shape[0], C = dx.shape[1], H = dx.shape[2], W = dx.shape[3];
  const int64_t O = dw.shape[0], KH = dw.shape[2], KW = dw.shape[3];
  const int64_t OH = out.shape[2], OW = out.shape[3], G = a.i("groups");
  const int64_t Cg = C / G, Og = O / G, K = Cg * KH * KW, P = OH * OW;
  auto s = a.ints("stride", 2), p = a.ints("padding", 2), dl = a.ints("dilation", 2);
  Value cols = in[0];
  if (KH == 1 && KW == 1 && s[0] == 1 && s[1] == 1 && p[0] == 0 && p[1] == 0) {
    cols = b.reshape(in[0], {N * G, K, H * W});
  } else {
    Value xp = b.pad(in[0], {0, 0, p[0], p[1]}, {0, 0, p[0], p[1]}, 0.0);
    std::vector<Value> pieces;
    for (int64_t kh = 0; kh < KH; ++kh)
      for (int64_t kw = 0; kw < KW; ++kw) {
        int64_t h0 = kh * dl[0], w0 = kw * dl[1];
        Value sl =
            b.slice(xp, {0, 0, h0, w0}, {N, C, h0 + (OH - 1) * s[0] + 1, w0 + (OW - 1) * s[1] + 1},
                    {1, 1, s[0], s[1]});
        pieces.push_back(b.reshape(sl, {N, C, 1, P}));
      }
    cols = b.reshape(b.concat(pieces, 2), {N * G, K, P});
  }
  Value w = b.reshape(in[1], {1, G, Og, K});
  w = b.reshape(b.broadcast_to(w, {N, G, Og, K}), {N * G, Og, K});
  Value y = b.reshape(b.matmul(w, cols), {N, O, OH, OW});
  if (in.size() > 2) y = b.add(y, b.reshape(in[2], {1, O, 1, 1}));
  return y;
}

// conv2d_backward_data: the input gradient is a stride-1 convolution of the output gradient,
// stride-dilated (zeros between its pixels) and padded by the dilated kernel's reach, with the
// kernel flipped and its channel axes swapped per group; the padding is cut off at the end.
template <class B>
Value conv2d_backward_data(B& b, std::span<const Value> in, const Attrs& a, const Desc& out) {
  Desc dg = b.desc(in[0]), dw = b.desc(in[1]);
  const int64_t N = dg.shape[0], O = dg.shape[1], OH = dg.shape[2], OW = dg.shape[3];
  const int64_t Cg = dw.shape[1], KH = dw.shape[2], KW = dw.shape[3];
  const int64_t C = out.shape[1], H = out.shape[2], W = out.shape[3], G = a.i("groups");
  auto s = a.ints("stride", 2), p = a.ints("padding", 2), dl = a.ints("dilation", 2);
  Value gd = in[0];
  if (s[0] > 1 || s[1] > 1) {
    Value g6 = b.reshape(in[0], {N, O, OH, 1, OW, 1});
    Value gp = b.pad(g6, {0, 0, 0, 0, 0, 0}, {0, 0, 0, s[0] - 1, 0, s[1] - 1}, 0.0);
    gd = b.slice(b.reshape(gp, {N, O, OH * s[0], OW * s[1]}), {0, 0, 0, 0},
                 {N, O, (OH - 1) * s[0] + 1, (OW - 1) * s[1] + 1}, {1, 1, 1, 1});
  }
  const int64_t Hp = H + 2 * p[0], Wp = W + 2 * p[1];
  const int64_t eh = (KH - 1) * dl[0], ew = (KW - 1) * dl[1];
  const int64_t rh = Hp - ((OH - 1) * s[0] + 1 + eh), rw = Wp - ((OW - 1) * s[1] + 1 + ew);
  Value gdp = b.pad(gd, {0, 0, eh, ew}, {0, 0, eh + rh, ew + rw}, 0.0);
  Value w4 = b.reshape(b.permute(b.reshape(in[1], {G, O / G, Cg, KH, KW}), {0, 2, 1, 3, 4}),
                       {C, O / G, KH, KW});
  // Flipped by a gather with reversed indices (IR slices step forward only).
  Value rh_idx = b.arange(KH, static_cast<double>(KH - 1), -1.0, LT_DTYPE_I64);
  Value rw_idx = b.arange(KW, static_cast<double>(KW - 1), -1.0, LT_DTYPE_I64);
  Value wf = b.gather(b.gather(w4, rh_idx, 2), rw_idx, 3);
  Value gxp = b.conv2d(gdp, wf, {1, 1}, {0, 0}, dl, G);
  if (p[0] == 0 && p[1] == 0) return gxp;
  return b.slice(gxp, {0, 0, p[0], p[1]}, {N, C, p[0] + H, p[1] + W}, {1, 1, 1, 1});
}

// conv2d_backward_weight: a convolution of the input (channels as the batch, the batch as
// channels) with the output gradient as its kernel: stride and dilation trade places; the
// result is cut to the kernel size (the last window may reach past it) and transposed back.
template <class B>
Value conv2d_backward_weight(B& b, std::span<const Value> in, const Attrs& a, const Desc& out) {
  Desc dx = b.desc(in[0]);
  const int64_t N = dx.shape[0], C = dx.shape[1], H = dx.shape[2], W = dx.shape[3];
  const int64_t O = out.shape[0], KH = out.shape[2], KW = out.shape[3], G = a.i("groups");
  const int64_t Cg = C / G;
  auto s = a.ints("stride", 2), p = a.ints("padding", 2), dl = a.ints("dilation", 2);
  Value x4 =
      b.reshape(b.permute(b.reshape(in[0], {N, G, Cg, H, W}), {2, 1, 0, 3, 4}), {Cg, G * N, H, W});
  Value k = b.permute(in[1], {1, 0, 2, 3});
  Value rw = b.conv2d(x4, k, dl, p, s, G);  // [Cg, O, KH', KW'], KH' >= KH
  Desc dr = b.desc(rw);
  if (dr.shape[2] != KH || dr.shape[3] != KW)
    rw = b.slice(rw, {0, 0, 0, 0}, {Cg, O, KH, KW}, {1, 1, 1, 1});
  return b.permute(rw, {1, 0, 2, 3});
}

// Pools: windows that tile the input exactly are a reshape and one reduction; others are the
// maximum / sum of the KH·KW strided slices of the padded input.
template <class B>
Value pool(B& b, OpId op, Value x, const Attrs& a, const Desc& out) {
  Desc dx = b.desc(x);
  const bool is_max = op == kOpMaxPool2d;
  const int64_t N = dx.shape[0], C = dx.shape[1], H = dx.shape[2], W = dx.shape[3];
  const int64_t OH = out.shape[2], OW = out.shape[3];
  auto k = a.ints("kernel", 2);
  auto s = a.has("stride") ? a.ints("stride", 2) : k;
  auto p = a.ints("padding", 2);
  Value acc = x;
  if (p[0] == 0 && p[1] == 0 && s == k && H == OH * k[0] && W == OW * k[1]) {
    Value r = b.reshape(x, {N, C, OH, k[0], OW, k[1]});
    acc = is_max ? b.max(r, {3, 5}, false) : b.sum(r, {3, 5}, false);
  } else {
    Value xp = b.pad(x, {0, 0, p[0], p[1]}, {0, 0, p[0], p[1]}, is_max ? -INFINITY : 0.0);
    for (int64_t kh = 0; kh < k[0]; ++kh)
      for (int64_t kw = 0; kw < k[1]; ++kw) {
        Value sl =
            b.slice(xp, {0, 0, kh, kw}, {N, C, kh + (OH - 1) * s[0] + 1, kw + (OW - 1) * s[1] + 1},
                    {1, 1, s[0], s[1]});
        acc = kh == 0 && kw == 0 ? sl : is_max ? b.maximum(acc, sl) : b.add(acc, sl);
      }
  }
  return is_max ? acc : b.mulc(acc, 1.0 / static_cast<double>(k[0] * k[1]));
}

}  // namespace detail

// Decomposes a node of composite op `op` (operands `in`, attributes `a`, output `out`) into
// other ops through builder `b`; returns the value standing for the node's output. `a` may
// hold the IR form or the user form of the attributes (axes are normalised here).
template <class B>
Value decompose(B& b, OpId op, std::span<const Value> in, const Attrs& a, const Desc& out) {
  lt_dtype d = out.dtype;
  switch (op) {
    case kOpRsqrt:
      return b.div(b.scalar(1, d), b.sqrt(in[0]));
    case kOpSigmoid:
      return b.div(b.scalar(1, d), b.addc(b.exp(b.neg(in[0])), 1.0));
    case kOpRelu:
      return b.maximum(in[0], b.scalar(0, d));
    case kOpGelu:
      return detail::gelu(b, in[0]);
    case kOpSilu:
      return b.mul(in[0], b.sigmoid(in[0]));
    case kOpErf:
      return detail::erf(b, in[0]);
    case kOpSoftplus:
      return detail::softplus(b, in[0]);
    case kOpMean: {
      Desc dx = b.desc(in[0]);
      auto axes = detail::norm_axes(a.ints("axes"), dx.shape.size());
      double count = 1;
      for (int64_t ax : axes) count *= static_cast<double>(dx.shape[ax]);
      return b.mulc(b.sum(in[0], axes, a.i("keepdims") != 0), 1.0 / count);
    }
    case kOpArgmax:
      return detail::argmax(b, in[0], a);
    case kOpRandomUniform:
    case kOpRandomNormal:
      return detail::random(b, op, in[0], a, out);
    case kOpConv2d:
      return detail::conv2d(b, in, a, out);
    case kOpConv2dBackwardData:
      return detail::conv2d_backward_data(b, in, a, out);
    case kOpConv2dBackwardWeight:
      return detail::conv2d_backward_weight(b, in, a, out);
    case kOpMaxPool2d:
    case kOpAvgPool2d:
      return detail::pool(b, op, in[0], a, out);
    case kOpSoftmax:
    case kOpLogSoftmax:
      return detail::softmax(b, in[0], a, op == kOpLogSoftmax);
    default:
      fail(LT_STATUS_INTERNAL, std::string(op_info(op).name) + " has no decomposition");
  }
}

// Whether backend-side node `i` of `g` runs natively (the plugin's supports answer).
using Supported = std::function<bool(const lt_graph& g, size_t i)>;

struct DecomposeReport {
  std::vector<std::string> decomposed;  // one op name per node replaced by its decomposition
  std::vector<std::string> widened;     // one op name per bf16/f16 node computed in f32
  size_t broadcasts = 0;                // elementwise nodes given explicit broadcast_to operands
  std::vector<int8_t> supported;        // per node of the result: 1 runs natively, 0 does not
  std::vector<int32_t> origin;          // per node of the result: the OpId of the original node
                                        // it was created to replace, -1 if it is an original
  std::vector<int32_t> source;          // per node of the result: the input graph's node it
                                        // copies or was created to replace (source lines)
};

// Rewrites region `g` for a backend: each node it does not support is replaced, if it is a
// composite, by its decomposition, or, if it is an elementwise node with broadcasting operands,
// by the same op on broadcast_to operands, or, if it computes on bf16/f16 (storage types for
// most backends), by the same op in f32 between casts (widen: operands cast to f32, the result
// rounded back on store); recursively on what that creates. A rewrite of which
// the backend runs nothing is undone when `fallback` (the fallback backend's answer; none given:
// always) runs the original node: it then falls back whole, as one node. Inputs and outputs
// keep their order and meaning. Returns false, leaving `out` untouched, when no node needed
// rewriting.
bool decompose(const lt_graph& g, const Supported& supported, OwnedGraph* out,
               DecomposeReport* report = nullptr, const Supported& fallback = nullptr);

// The region a backend compiles, as the core hands it over. The core decomposed it against the
// backend's supports() already, so this only checks every node (one pass, no copy); a region
// from another caller (a test driving the C table) that still holds a declined node is
// decomposed here, into *out, as the core would: a graph is decomposed once. Returns whether it
// wrote *out; throws lower::Error (UNSUPPORTED) naming a node that stays declined.
bool decompose_declined(const lt_graph& g, const Supported& supported, OwnedGraph* out);

}  // namespace lt::lower
