// NnTest.cpp — conformance of conv2d (stride, padding, dilation, groups, bias) and its two
// gradient ops, max/avg pools and softmax/log_softmax (every axis, large inputs) against plain
// loops.
#include <lazytensor/autograd.hpp>

#include "conformance.h"

#include <limits>

namespace ltc {
namespace {

using lt::DType;
using lt::Tensor;

class Nn : public ConformanceTest {};
LT_CONFORMANCE_SUITE(Nn);

struct ConvCase {
  Shape x, w;
  bool bias;
  Shape stride, padding, dilation;
  int64_t groups;
};

Host ref_conv(const Host& x, const Host& w, const Host* b, const ConvCase& c) {
  int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  int64_t O = w.shape[0], Cg = w.shape[1], KH = w.shape[2], KW = w.shape[3];
  int64_t OH = (H + 2 * c.padding[0] - c.dilation[0] * (KH - 1) - 1) / c.stride[0] + 1;
  int64_t OW = (W + 2 * c.padding[1] - c.dilation[1] * (KW - 1) - 1) / c.stride[1] + 1;
  (void)C;
  Host r{x.dtype, {N, O, OH, OW}, {}};
  int64_t og = O / c.groups;
  for (const Shape& i : all_indices(r.shape)) {
    int64_t n = i[0], o = i[1], oh = i[2], ow = i[3], g = o / og;
    double s = b ? b->v[size_t(o)] : 0.0;
    for (int64_t ci = 0; ci < Cg; ++ci) {
      for (int64_t kh = 0; kh < KH; ++kh) {
        for (int64_t kw = 0; kw < KW; ++kw) {
          int64_t h = oh * c.stride[0] - c.padding[0] + kh * c.dilation[0];
          int64_t ww = ow * c.stride[1] - c.padding[1] + kw * c.dilation[1];
          if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
          s += x.at({n, g * Cg + ci, h, ww}) * w.at({o, ci, kh, kw});
        }
      }
    }
    r.v.push_back(round_to(x.dtype, s));
  }
  return r;
}

TEST_P(Nn, Conv2dStridePaddingDilationGroupsBias) {
  const std::vector<ConvCase> cases = {
      {{1, 1, 5, 5}, {1, 1, 3, 3}, false, {1, 1}, {0, 0}, {1, 1}, 1},
      {{2, 3, 6, 5}, {4, 3, 3, 2}, true, {1, 1}, {1, 0}, {1, 1}, 1},
      {{1, 2, 7, 7}, {3, 2, 3, 3}, true, {2, 2}, {1, 1}, {1, 1}, 1},
      {{1, 2, 9, 8}, {2, 2, 3, 3}, false, {1, 2}, {2, 1}, {2, 2}, 1},
      {{2, 4, 5, 5}, {6, 2, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 2},
      {{1, 4, 6, 6}, {4, 1, 3, 3}, true, {2, 1}, {0, 2}, {1, 2}, 4},  // depthwise
      {{1, 3, 4, 4}, {2, 3, 1, 1}, true, {1, 1}, {0, 0}, {1, 1}, 1},  // 1x1
      {{0, 2, 4, 4}, {2, 2, 3, 3}, true, {1, 1}, {0, 0}, {1, 1}, 1},  // empty batch
  };
  for (DType dt : float_dtypes()) {
    for (const ConvCase& c : cases) {
      Host x = make(dt, c.x, Fill::kAny, 60), w = make(dt, c.w, Fill::kAny, 61);
      Host b = make(dt, {c.w[0]}, Fill::kAny, 62);
      Tensor bias = c.bias ? upload(dev(), b) : Tensor();
      std::string what = std::string("conv2d ") + lt::dtype_name(dt) + " x" + str(c.x) + " w" +
                         str(c.w) + " stride" + str(c.stride) + " pad" + str(c.padding) + " dil" +
                         str(c.dilation) + " groups " + std::to_string(c.groups) +
                         (c.bias ? " bias" : "");
      Host bm = abs_of(b);
      expect_close_scaled(lt::conv2d(upload(dev(), x), upload(dev(), w), bias, c.stride, c.padding,
                                     c.dilation, c.groups),
                          ref_conv(x, w, c.bias ? &b : nullptr, c),
                          ref_conv(abs_of(x), abs_of(w), c.bias ? &bm : nullptr, c),
                          tol(OpClass::kMatmul, dt), what);
    }
  }
  // A non-contiguous input (a permuted view) gives the same result.
  ConvCase c = cases[1];
  Host x = make(lt::f32, c.x, Fill::kAny, 63), w = make(lt::f32, c.w, Fill::kAny, 64);
  expect_close_scaled(lt::conv2d(upload_permuted(dev(), x), upload_reversed(dev(), w), Tensor(),
                                 c.stride, c.padding, c.dilation, c.groups),
                      ref_conv(x, w, nullptr, c), ref_conv(abs_of(x), abs_of(w), nullptr, c),
                      tol(OpClass::kMatmul, lt::f32), "conv2d non-contiguous inputs");
}

// Both gradients of conv2d by plain loops: every (output pixel, kernel tap) pair that reads
// x[n, c, h, w] with weight w[o, ci, kh, kw] sends gy back to each of them.
std::pair<Host, Host> ref_conv_grads(const Host& x, const Host& w, const Host& gy,
                                     const ConvCase& c) {
  const int64_t C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t O = w.shape[0], Cg = w.shape[1], KH = w.shape[2], KW = w.shape[3];
  std::vector<double> dx(size_t(numel_of(x.shape)), 0.0), dw(size_t(numel_of(w.shape)), 0.0);
  const int64_t og = O / c.groups;
  for (const Shape& i : all_indices(gy.shape)) {
    const int64_t n = i[0], o = i[1], g = o / og;
    const double gv = gy.at(i);
    for (int64_t ci = 0; ci < Cg; ++ci)
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
          int64_t h = i[2] * c.stride[0] - c.padding[0] + kh * c.dilation[0];
          int64_t ww = i[3] * c.stride[1] - c.padding[1] + kw * c.dilation[1];
          if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
          const int64_t xi = ((n * C + g * Cg + ci) * H + h) * W + ww;
          const int64_t wi = ((o * Cg + ci) * KH + kh) * KW + kw;
          dx[size_t(xi)] += gv * w.v[size_t(wi)];
          dw[size_t(wi)] += gv * x.v[size_t(xi)];
        }
  }
  Host rx{x.dtype, x.shape, {}}, rw{w.dtype, w.shape, {}};
  for (double v : dx) rx.v.push_back(round_to(x.dtype, v));
  for (double v : dw) rw.v.push_back(round_to(w.dtype, v));
  return {rx, rw};
}

// conv2d's gradients (the ops conv2d_backward_data and conv2d_backward_weight that autograd
// records, or their decomposition where a backend lacks them) against plain loops: strides,
// padding, dilation, groups, depthwise, 1x1 with stride 2, batch 1, an empty batch.
TEST_P(Nn, Conv2dGradientsStridePaddingDilationGroups) {
  const std::vector<ConvCase> cases = {
      {{1, 1, 5, 5}, {2, 1, 3, 3}, false, {1, 1}, {1, 1}, {1, 1}, 1},
      {{2, 3, 6, 5}, {4, 3, 3, 2}, false, {1, 1}, {1, 0}, {1, 1}, 1},
      {{2, 2, 7, 7}, {3, 2, 3, 3}, false, {2, 2}, {1, 1}, {1, 1}, 1},
      {{1, 2, 8, 8}, {2, 2, 3, 3}, false, {2, 2}, {0, 0}, {1, 1}, 1},  // last row unread
      {{1, 2, 9, 8}, {2, 2, 3, 3}, false, {1, 2}, {2, 1}, {2, 2}, 1},
      {{2, 4, 5, 5}, {6, 2, 3, 3}, false, {1, 1}, {1, 1}, {1, 1}, 2},
      {{1, 4, 6, 6}, {4, 1, 3, 3}, false, {2, 1}, {0, 2}, {1, 2}, 4},  // depthwise
      {{3, 4, 6, 6}, {5, 4, 1, 1}, false, {2, 2}, {0, 0}, {1, 1}, 1},  // 1x1, stride 2
      {{0, 2, 4, 4}, {2, 2, 3, 3}, false, {1, 1}, {0, 0}, {1, 1}, 1},  // empty batch
  };
  for (DType dt : float_dtypes()) {
    for (const ConvCase& c : cases) {
      Host x = make(dt, c.x, Fill::kAny, 70), w = make(dt, c.w, Fill::kAny, 71);
      Tensor xt = upload(dev(), x), wt = upload(dev(), w);
      lt::set_requires_grad(xt);
      lt::set_requires_grad(wt);
      Tensor y = lt::conv2d(xt, wt, Tensor(), c.stride, c.padding, c.dilation, c.groups);
      Host gy = make(dt, y.shape(), Fill::kAny, 72);
      lt::backward((y * upload(dev(), gy)).sum());
      auto [dx, dw] = ref_conv_grads(x, w, gy, c);
      auto [mx, mw] = ref_conv_grads(abs_of(x), abs_of(w), abs_of(gy), c);
      std::string what = std::string(lt::dtype_name(dt)) + " x" + str(c.x) + " w" + str(c.w) +
                         " stride" + str(c.stride) + " pad" + str(c.padding) + " dil" +
                         str(c.dilation) + " groups " + std::to_string(c.groups);
      expect_close_scaled(lt::grad(xt), dx, mx, tol(OpClass::kMatmul, dt), "conv2d dx " + what);
      expect_close_scaled(lt::grad(wt), dw, mw, tol(OpClass::kMatmul, dt), "conv2d dw " + what);
    }
  }
}

// The gradient ops check that the output gradient is what the forward convolution gives.
TEST_P(Nn, Conv2dGradientOpsRejectAMismatchedGradient) {
  Tensor dy = upload(dev(), make(lt::f32, {1, 3, 4, 4}, Fill::kAny, 73));
  Tensor w = upload(dev(), make(lt::f32, {3, 2, 3, 3}, Fill::kAny, 74));
  expect_error(
      [&] {
        lt::apply("conv2d_backward_data", {dy, w}, {lt::Attr::Ints("input_size", {7, 6})});
      },
      LT_STATUS_SHAPE_MISMATCH, {"conv2d_backward_data", "output gradient"});
  Tensor x = upload(dev(), make(lt::f32, {1, 2, 6, 6}, Fill::kAny, 75));
  expect_error(
      [&] {
        lt::apply("conv2d_backward_weight", {x, dy}, {lt::Attr::Ints("kernel_size", {2, 2})});
      },
      LT_STATUS_SHAPE_MISMATCH, {"conv2d_backward_weight", "output gradient"});
  // The shapes that fit run and agree with the loops.
  ConvCase c{{1, 2, 6, 6}, {3, 2, 3, 3}, false, {1, 1}, {0, 0}, {1, 1}, 1};
  Host xh = make(lt::f32, c.x, Fill::kAny, 75), wh = make(lt::f32, c.w, Fill::kAny, 74);
  Host gh = make(lt::f32, {1, 3, 4, 4}, Fill::kAny, 73);
  auto [dx, dw] = ref_conv_grads(xh, wh, gh, c);
  auto [mx, mw] = ref_conv_grads(abs_of(xh), abs_of(wh), abs_of(gh), c);
  expect_close_scaled(
      lt::apply("conv2d_backward_data", {dy, w}, {lt::Attr::Ints("input_size", {6, 6})}), dx, mx,
      tol(OpClass::kMatmul, lt::f32), "conv2d_backward_data by name");
  expect_close_scaled(
      lt::apply("conv2d_backward_weight", {x, dy}, {lt::Attr::Ints("kernel_size", {3, 3})}), dw, mw,
      tol(OpClass::kMatmul, lt::f32), "conv2d_backward_weight by name");
}

Host ref_pool(const Host& x, const Shape& k, const Shape& s, const Shape& p, bool is_max) {
  int64_t H = x.shape[2], W = x.shape[3];
  int64_t OH = (H + 2 * p[0] - k[0]) / s[0] + 1, OW = (W + 2 * p[1] - k[1]) / s[1] + 1;
  Host r{x.dtype, {x.shape[0], x.shape[1], OH, OW}, {}};
  for (const Shape& i : all_indices(r.shape)) {
    double acc = is_max ? -INFINITY : 0.0;
    for (int64_t kh = 0; kh < k[0]; ++kh) {
      for (int64_t kw = 0; kw < k[1]; ++kw) {
        int64_t h = i[2] * s[0] - p[0] + kh, w = i[3] * s[1] - p[1] + kw;
        if (h < 0 || h >= H || w < 0 || w >= W) continue;
        double v = x.at({i[0], i[1], h, w});
        acc = is_max ? std::max(acc, v) : acc + v;
      }
    }
    r.v.push_back(round_to(x.dtype, is_max ? acc : acc / double(k[0] * k[1])));
  }
  return r;
}

TEST_P(Nn, MaxAndAvgPoolWithStrideAndPadding) {
  struct PoolCase {
    Shape x, k, s, p;
  };
  const std::vector<PoolCase> cases = {
      {{1, 1, 4, 4}, {2, 2}, {2, 2}, {0, 0}},
      {{2, 3, 5, 5}, {3, 3}, {1, 1}, {1, 1}},
      {{1, 2, 7, 6}, {3, 2}, {2, 2}, {1, 0}},
      {{1, 1, 3, 3}, {3, 3}, {1, 1}, {0, 0}},
      {{1, 1, 5, 4}, {2, 3}, {3, 1}, {1, 1}},
      {{2, 3, 7, 9}, {2, 2}, {2, 2}, {0, 0}},  // the host kernels' 2x2 path; last row/col unread
  };
  for (DType dt : float_dtypes()) {
    for (const PoolCase& c : cases) {
      Host x = make(dt, c.x, Fill::kAny, 65);
      std::string what = std::string(lt::dtype_name(dt)) + " x" + str(c.x) + " k" + str(c.k) +
                         " s" + str(c.s) + " p" + str(c.p);
      expect_close(lt::max_pool2d(upload(dev(), x), c.k, c.s, c.p),
                   ref_pool(x, c.k, c.s, c.p, true), tol(OpClass::kExact, dt),
                   "max_pool2d " + what);
      expect_close(lt::avg_pool2d(upload(dev(), x), c.k, c.s, c.p),
                   ref_pool(x, c.k, c.s, c.p, false), tol(OpClass::kReduce, dt),
                   "avg_pool2d " + what);
      expect_close(lt::max_pool2d(upload_permuted(dev(), x), c.k, c.s, c.p),
                   ref_pool(x, c.k, c.s, c.p, true), tol(OpClass::kExact, dt),
                   "max_pool2d (permuted input) " + what);
    }
  }
  // Max pool pads with -inf: an all-negative input never yields a padded 0.
  Host neg = from_values(lt::f32, {1, 1, 2, 2}, {-5, -6, -7, -8});
  expect_close(lt::max_pool2d(upload(dev(), neg), {2, 2}, {1, 1}, {1, 1}),
               from_values(lt::f32, {1, 1, 3, 3}, {-5, -5, -6, -5, -5, -6, -7, -7, -8}), {},
               "max_pool2d padding is -inf");
}

Host ref_softmax(const Host& a, int64_t axis, bool log) {
  Host r = a;
  Shape outer = a.shape;
  outer[size_t(axis)] = 1;
  int64_t n = a.shape[size_t(axis)];
  auto st = strides_of(a.shape);
  for (const Shape& o : all_indices(outer)) {
    int64_t base = 0;
    for (size_t d = 0; d < o.size(); ++d) base += o[d] * st[d];
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < n; ++i) m = std::max(m, a.v[size_t(base + i * st[size_t(axis)])]);
    for (int64_t i = 0; i < n; ++i) s += std::exp(a.v[size_t(base + i * st[size_t(axis)])] - m);
    for (int64_t i = 0; i < n; ++i) {
      double x = a.v[size_t(base + i * st[size_t(axis)])];
      r.v[size_t(base + i * st[size_t(axis)])] =
          round_to(a.dtype, log ? x - m - std::log(s) : std::exp(x - m) / s);
    }
  }
  return r;
}

TEST_P(Nn, SoftmaxAndLogSoftmaxEveryAxisAndLargeInputs) {
  for (DType dt : float_dtypes()) {
    Host a = make(dt, {2, 3, 4}, Fill::kAny, 66);
    for (int64_t axis : {0, 1, 2}) {
      std::string what = std::string(lt::dtype_name(dt)) + " axis " + std::to_string(axis);
      expect_close(lt::softmax(upload(dev(), a), axis), ref_softmax(a, axis, false),
                   tol(OpClass::kSoftmax, dt), "softmax " + what);
      expect_close(lt::log_softmax(upload(dev(), a), axis), ref_softmax(a, axis, true),
                   tol(OpClass::kSoftmax, dt), "log_softmax " + what);
      expect_close(lt::softmax(upload_permuted(dev(), a), axis), ref_softmax(a, axis, false),
                   tol(OpClass::kSoftmax, dt), "softmax (permuted input) " + what);
    }
    expect_close(lt::softmax(upload(dev(), a), -1), ref_softmax(a, 2, false),
                 tol(OpClass::kSoftmax, dt), "softmax axis -1");
    // Subtracting the max keeps exp from overflowing.
    Host big = from_values(dt, {2, 3}, {1000, 1001, 1002, -1000, -1001, -1002});
    expect_close(lt::softmax(upload(dev(), big), 1), ref_softmax(big, 1, false),
                 tol(OpClass::kSoftmax, dt), "softmax of large values");
    expect_close(lt::log_softmax(upload(dev(), big), 1), ref_softmax(big, 1, true),
                 tol(OpClass::kSoftmax, dt), "log_softmax of large values");
  }
}

}  // namespace
}  // namespace ltc
