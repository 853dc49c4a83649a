// CpuJitCoreTest.cpp — cpu_jit through the core (lt.h, device "cpu_jit", fallback "error"):
// kernel counts of fused graphs (plugin.cpu_jit.kernels), one compile for repeated steps,
// slices fused as index maps, conv2d with a fused epilogue, values against plain loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "lazytensor/lt.h"

namespace {

std::string take(lt_error* e) {
  if (!e) return "";
  std::string m = lt_error_message(e);
  lt_error_destroy(e);
  return m;
}

class CpuJitCore : public ::testing::Test {
 protected:
  void SetUp() override {
    lt_runtime_options o{};
    o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
    o.device = "cpu_jit";
    o.fallback = "error";
    std::string e = take(lt_runtime_create(&o, &rt_));
    ASSERT_EQ(e, "") << "cpu_jit was built but does not load";
    ASSERT_EQ(take(lt_runtime_find_device(rt_, "cpu_jit", &dev_)), "");
  }
  void TearDown() override {
    for (lt_tensor* t : owned_) lt_tensor_free(t);
    if (rt_) lt_runtime_destroy(rt_);
  }

  lt_tensor* own(lt_tensor* t) {
    owned_.push_back(t);
    return t;
  }
  lt_tensor* from(const std::vector<float>& v, std::vector<int64_t> shape) {
    lt_tensor* t = nullptr;
    EXPECT_EQ(take(lt_tensor_from_host(dev_, LT_DTYPE_F32, shape.data(), shape.size(), v.data(),
                                       v.size() * sizeof(float), &t)),
              "");
    return own(t);
  }
  std::vector<float> read(lt_tensor* t, size_t n) {
    std::vector<float> v(n);
    EXPECT_EQ(take(lt_tensor_to_host(t, v.data(), n * sizeof(float))), "");
    return v;
  }
  double metric(const char* name) {
    double v = -1;
    EXPECT_EQ(take(lt_metric_get(rt_, name, &v)), "") << name;
    return v;
  }
  // Unary / binary helpers that keep every intermediate alive until TearDown.
  using Un = lt_error* (*)(lt_tensor*, lt_tensor**);
  using Bin = lt_error* (*)(lt_tensor*, lt_tensor*, lt_tensor**);
  lt_tensor* un(Un f, lt_tensor* a) {
    lt_tensor* o = nullptr;
    EXPECT_EQ(take(f(a, &o)), "");
    return own(o);
  }
  lt_tensor* bin(Bin f, lt_tensor* a, lt_tensor* b) {
    lt_tensor* o = nullptr;
    EXPECT_EQ(take(f(a, b, &o)), "");
    return own(o);
  }
  lt_tensor* slice(lt_tensor* a, std::vector<int64_t> starts, std::vector<int64_t> stops,
                   std::vector<int64_t> steps) {
    lt_tensor* o = nullptr;
    EXPECT_EQ(take(lt_slice(a, starts.data(), stops.data(), steps.data(), starts.size(), &o)), "");
    return own(o);
  }

  // 8 elementwise ops: y = exp(-|tanh(sigmoid(x*x + x) - x)|) * x + x ... (see reference).
  lt_tensor* chain8(lt_tensor* x) {
    lt_tensor* a = bin(lt_mul, x, x);
    lt_tensor* b = bin(lt_add, a, x);
    lt_tensor* c = un(lt_sigmoid, b);
    lt_tensor* d = bin(lt_sub, c, x);
    lt_tensor* e = un(lt_tanh, d);
    lt_tensor* f = un(lt_abs, e);
    lt_tensor* g = un(lt_neg, f);
    return un(lt_exp, g);
  }
  static float chain8_ref(float x) {
    double s = 1.0 / (1.0 + std::exp(-(double(x) * x + x)));
    return static_cast<float>(std::exp(-std::fabs(std::tanh(s - x))));
  }

  lt_runtime* rt_ = nullptr;
  lt_device* dev_ = nullptr;
  std::vector<lt_tensor*> owned_;
};

std::vector<float> ramp(size_t n, float lo, float hi) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * static_cast<float>(i) / n;
  return v;
}

TEST_F(CpuJitCore, ElementwiseChainOfEightOpsIsOneKernel) {
  std::vector<float> xv = ramp(70000, -3, 3);  // above the threading threshold
  lt_tensor* y = chain8(from(xv, {70000}));
  std::vector<float> out = read(y, xv.size());
  for (size_t i = 0; i < xv.size(); i += 97)
    ASSERT_NEAR(out[i], chain8_ref(xv[i]), 2e-6) << "x=" << xv[i];
  EXPECT_EQ(metric("plugin.cpu_jit.kernels"), 1.0);
  EXPECT_EQ(metric("fallback_nodes"), 0.0);
}

// The softmax of a computed value (here -x): decomposed and fused with its producer.
TEST_F(CpuJitCore, SoftmaxIsAtMostTwoKernels) {
  std::vector<float> xv = ramp(64 * 33, -5, 5);
  lt_tensor *n = nullptr, *y = nullptr;
  ASSERT_EQ(take(lt_neg(from(xv, {64, 33}), &n)), "");
  own(n);
  ASSERT_EQ(take(lt_softmax(n, 1, &y)), "");
  own(y);
  std::vector<float> out = read(y, xv.size());
  for (int r = 0; r < 64; ++r) {
    double mx = -1e30, s = 0;
    for (int c = 0; c < 33; ++c) mx = std::max<double>(mx, -xv[r * 33 + c]);
    for (int c = 0; c < 33; ++c) s += std::exp(-xv[r * 33 + c] - mx);
    for (int c = 0; c < 33; ++c)
      ASSERT_NEAR(out[r * 33 + c], std::exp(-xv[r * 33 + c] - mx) / s, 1e-6);
  }
  EXPECT_LE(metric("plugin.cpu_jit.kernels"), 2.0);
  EXPECT_GE(metric("plugin.cpu_jit.kernels"), 1.0);
}

TEST_F(CpuJitCore, RepeatedIdenticalStepsCompileOnce) {
  std::vector<float> xv = ramp(4096, -2, 2);
  for (int step = 0; step < 5; ++step) {
    for (float& v : xv) v *= 0.9f;
    lt_tensor* y = chain8(from(xv, {4096}));
    std::vector<float> out = read(y, xv.size());
    ASSERT_NEAR(out[17], chain8_ref(xv[17]), 2e-6);
    ASSERT_NEAR(out[4000], chain8_ref(xv[4000]), 2e-6);
  }
  EXPECT_EQ(metric("compiles"), 1.0);
  EXPECT_EQ(metric("cache_hits"), 4.0);
}

// LSTM gate split: the four slices of `gates` are strided loads inside the gate kernel.
TEST_F(CpuJitCore, SlicesFuseIntoTheConsumingKernel) {
  const int B = 160, H = 7;  // cell: 1120 elements (a group under 1024 runs as host steps)
  std::vector<float> av = ramp(B * 4 * H, -2, 2), bv = ramp(B * 4 * H, 1, -1),
                     cv = ramp(B * H, -1, 1);
  lt_tensor* gates = bin(lt_add, from(av, {B, 4 * H}), from(bv, {B, 4 * H}));
  lt_tensor* c = from(cv, {B, H});
  lt_tensor* g[4];
  for (int k = 0; k < 4; ++k) g[k] = slice(gates, {0, k * H}, {B, (k + 1) * H}, {1, 1});
  lt_tensor* c2 = bin(lt_add, bin(lt_mul, un(lt_sigmoid, g[1]), c),
                      bin(lt_mul, un(lt_sigmoid, g[0]), un(lt_tanh, g[2])));
  lt_tensor* h2 = bin(lt_mul, un(lt_sigmoid, g[3]), un(lt_tanh, c2));
  std::vector<float> out = read(h2, B * H);
  // One kernel for gates (it is materialised: read at four offsets), one for the cell.
  EXPECT_EQ(metric("plugin.cpu_jit.kernels"), 2.0);
  auto sg = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < H; ++j) {
      auto gate = [&](int k) {
        return double(av[b * 4 * H + k * H + j]) + bv[b * 4 * H + k * H + j];
      };
      double cc = sg(gate(1)) * cv[b * H + j] + sg(gate(0)) * std::tanh(gate(2));
      ASSERT_NEAR(out[b * H + j], sg(gate(3)) * std::tanh(cc), 2e-6) << b << "," << j;
    }
}

TEST_F(CpuJitCore, NegativeAndStridedSlicesReadTheRightElements) {
  std::vector<float> xv = ramp(6 * 10, 0, 60);  // x[r][c] = r*10 + c
  lt_tensor* x = from(xv, {6, 10});
  lt_tensor* y = bin(lt_add, slice(x, {5, 1}, {-7, 10}, {-2, 3}), slice(x, {0, 0}, {3, 3}, {1, 1}));
  std::vector<float> out = read(y, 9);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      ASSERT_FLOAT_EQ(out[i * 3 + j], xv[(5 - 2 * i) * 10 + 1 + 3 * j] + xv[i * 10 + j]);
  EXPECT_EQ(metric("fallback_nodes"), 0.0);
}

// conv2d (im2col + gemm, bias in the gemm, relu as the fused epilogue), with groups.
TEST_F(CpuJitCore, Conv2dWithBiasAndReluEpilogue) {
  const int N = 5, C = 4, H = 9, W = 8, O = 6, G = 2, KH = 3, KW = 2;  // out: 1200 elements
  const int64_t stride[2] = {2, 1}, pad[2] = {1, 1}, dil[2] = {1, 2};
  const int OH = (H + 2 * 1 - 1 * (KH - 1) - 1) / 2 + 1,
            OW = (W + 2 * 1 - 2 * (KW - 1) - 1) / 1 + 1;
  std::vector<float> xv = ramp(N * C * H * W, -1, 1), wv = ramp(O * (C / G) * KH * KW, 0.5, -0.7),
                     bv = ramp(O, -0.3, 0.3);
  lt_tensor* y = nullptr;
  ASSERT_EQ(take(lt_conv2d(from(xv, {N, C, H, W}), from(wv, {O, C / G, KH, KW}), from(bv, {O}),
                           stride, pad, dil, G, &y)),
            "");
  own(y);
  lt_tensor* r = un(lt_relu, y);
  std::vector<float> out = read(r, N * O * OH * OW);
  EXPECT_EQ(metric("fallback_nodes"), 0.0);
  EXPECT_EQ(metric("plugin.cpu_jit.kernels"), 1.0);  // the relu epilogue
  const int Cg = C / G, Og = O / G;
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < O; ++o)
      for (int oh = 0; oh < OH; ++oh)
        for (int ow = 0; ow < OW; ++ow) {
          double acc = bv[o];
          int gi = o / Og;
          for (int c = 0; c < Cg; ++c)
            for (int kh = 0; kh < KH; ++kh)
              for (int kw = 0; kw < KW; ++kw) {
                int ih = oh * 2 - 1 + kh, iw = ow - 1 + kw * 2;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += double(xv[((n * C + gi * Cg + c) * H + ih) * W + iw]) *
                       wv[((o * Cg + c) * KH + kh) * KW + kw];
              }
          ASSERT_NEAR(out[((n * O + o) * OH + oh) * OW + ow], std::max(acc, 0.0), 1e-5)
              << n << " " << o << " " << oh << " " << ow;
        }
}

// ---- reductions with more than one outer row (regression: a reduction's own output was
// addressed as if it were its operand, so every row landed in row 0 or on the wrong axis) ---

using Red = lt_error* (*)(lt_tensor*, const int64_t*, size_t, int, lt_tensor**);

// Plain-loop reference of op over `axes` of a dense row-major tensor (keepdims does not
// change the element order).
std::vector<double> ref_reduce(const std::vector<float>& x, const std::vector<int64_t>& shape,
                               const std::vector<int64_t>& axes, const std::string& op) {
  size_t rank = shape.size();
  std::vector<char> red(rank, 0);
  for (int64_t a : axes) red[a] = 1;
  std::vector<int64_t> oshape;
  for (size_t d = 0; d < rank; ++d) oshape.push_back(red[d] ? 1 : shape[d]);
  int64_t on = 1, n = 1;
  for (size_t d = 0; d < rank; ++d) {
    on *= oshape[d];
    n *= shape[d];
  }
  double init = op == "max" ? -INFINITY : op == "min" ? INFINITY : 0.0;
  std::vector<double> acc(on, init), cnt(on, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, o = 0, ostride = 1;
    for (size_t d = rank; d-- > 0;) {
      int64_t c = rem % shape[d];
      rem /= shape[d];
      if (!red[d]) o += c * ostride;
      ostride *= oshape[d];
    }
    double v = x[i];
    acc[o] = op == "max" ? std::max(acc[o], v) : op == "min" ? std::min(acc[o], v) : acc[o] + v;
    cnt[o] += 1;
  }
  if (op == "mean")
    for (int64_t o = 0; o < on; ++o) acc[o] /= cnt[o];
  return acc;
}

TEST_F(CpuJitCore, ReductionsOverEveryAxisSubsetWithManyRows) {
  // The brief's example: arange(24).reshape({2,3,4}).sum({1}) == [[12,15,18,21],[48,51,54,57]].
  {
    lt_tensor* x = from(ramp(24, 0, 24), {2, 3, 4});
    int64_t ax[] = {1};
    lt_tensor* y = nullptr;
    ASSERT_EQ(take(lt_sum(x, ax, 1, 0, &y)), "");
    own(y);
    std::vector<float> want = {12, 15, 18, 21, 48, 51, 54, 57};
    EXPECT_EQ(read(y, 8), want);
    int64_t last[] = {2};
    ASSERT_EQ(take(lt_sum(x, last, 1, 0, &y)), "");
    own(y);
    want = {6, 22, 38, 54, 70, 86};
    EXPECT_EQ(read(y, 6), want);
  }
  const std::vector<int64_t> shape = {3, 5, 7};
  std::vector<float> xv = ramp(3 * 5 * 7, -4, 5);
  std::swap(xv[11], xv[90]);  // max/min not at the ends of a row
  const std::vector<std::vector<int64_t>> subsets = {{0},    {1},    {2},      {0, 1},
                                                     {0, 2}, {1, 2}, {0, 1, 2}};
  const std::pair<const char*, Red> ops[] = {
      {"sum", lt_sum}, {"mean", lt_mean}, {"max", lt_max}, {"min", lt_min}};
  for (const auto& [name, fn] : ops)
    for (const auto& axes : subsets)
      for (int keep : {0, 1}) {
        lt_tensor* y = nullptr;
        ASSERT_EQ(take(fn(from(xv, shape), axes.data(), axes.size(), keep, &y)), "");
        own(y);
        std::vector<double> want = ref_reduce(xv, shape, axes, name);
        std::vector<float> got = read(y, want.size());
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 1e-4) << name << " axes size " << axes.size() << " first "
                                             << axes[0] << " keepdims " << keep << " at " << i;
      }
  EXPECT_EQ(metric("fallback_nodes"), 0.0);
}

// A reduction fused with its producer and consumers: x - mean(x, axis) over a middle and a
// leading axis, with the mean itself also an output (both roles stored by one kernel).
TEST_F(CpuJitCore, FusedCenteringOverMiddleAndLeadingAxes) {
  const std::vector<int64_t> shape = {4, 3, 5};
  std::vector<float> xv = ramp(60, -3, 3);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = xv[i] * xv[i] - 0.1f * i;
  for (int64_t axis : {0, 1, 2}) {
    lt_tensor* x = from(xv, shape);
    lt_tensor* sq = bin(lt_mul, x, x);
    lt_tensor* m = nullptr;
    ASSERT_EQ(take(lt_mean(sq, &axis, 1, 1, &m)), "");
    own(m);
    lt_tensor* c = bin(lt_sub, sq, m);
    std::vector<float> sqv(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) sqv[i] = xv[i] * xv[i];
    std::vector<double> mw = ref_reduce(sqv, shape, {axis}, "mean");
    std::vector<float> cg = read(c, 60), mg = read(m, mw.size());
    for (size_t i = 0; i < mw.size(); ++i) ASSERT_NEAR(mg[i], mw[i], 1e-4) << axis << " " << i;
    for (int64_t i = 0; i < 60; ++i) {
      int64_t a = i / 15, b = (i / 5) % 3, k = i % 5;
      int64_t o = axis == 0 ? b * 5 + k : axis == 1 ? a * 5 + k : a * 3 + b;
      ASSERT_NEAR(cg[i], sqv[i] - mw[o], 1e-3) << "axis " << axis << " at " << i;
    }
  }
  EXPECT_EQ(metric("fallback_nodes"), 0.0);
}

// A strided slice (index map) feeding a multi-row reduction.
TEST_F(CpuJitCore, SliceFeedingARowReduction) {
  std::vector<float> xv = ramp(6 * 10, 0, 60);                         // x[r][c] = r*10 + c
  lt_tensor* s = slice(from(xv, {6, 10}), {5, 1}, {-7, 10}, {-2, 3});  // rows 5,3,1; cols 1,4,7
  int64_t ax = 1;
  lt_tensor* y = nullptr;
  ASSERT_EQ(take(lt_sum(s, &ax, 1, 0, &y)), "");
  own(y);
  std::vector<float> got = read(y, 3);
  for (int i = 0; i < 3; ++i) {
    int r = 5 - 2 * i;
    EXPECT_FLOAT_EQ(got[i], 3 * (r * 10) + 1 + 4 + 7) << i;
  }
}

// Above the threading threshold the outer loop is split across TBB chunks; every chunk must
// write its own rows. Also two reductions over different axes chained, and a reduced
// (keepdims=0) result combined with an external tensor of the reduced shape.
TEST_F(CpuJitCore, ThreadedAndChainedReductions) {
  const std::vector<int64_t> shape = {64, 50, 33};
  std::vector<float> xv = ramp(64 * 50 * 33, -1, 1);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] += 0.001f * float(i % 7);
  for (int64_t axis : {0, 1, 2}) {
    lt_tensor* y = nullptr;
    ASSERT_EQ(take(lt_sum(from(xv, shape), &axis, 1, 0, &y)), "");
    own(y);
    std::vector<double> want = ref_reduce(xv, shape, {axis}, "sum");
    std::vector<float> got = read(y, want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-3) << "axis " << axis << " at " << i;
  }
  // max over axis 1 of (sum over axis 2) + w, w of shape [64, 50].
  std::vector<float> wv = ramp(64 * 50, 3, -3);
  int64_t a2 = 2, a1 = 1;
  lt_tensor* s = nullptr;
  ASSERT_EQ(take(lt_sum(from(xv, shape), &a2, 1, 0, &s)), "");
  own(s);
  lt_tensor* t = bin(lt_add, s, from(wv, {64, 50}));
  lt_tensor* m = nullptr;
  ASSERT_EQ(take(lt_max(t, &a1, 1, 0, &m)), "");
  own(m);
  std::vector<double> sw = ref_reduce(xv, shape, {2}, "sum");
  std::vector<float> tv(sw.size());
  for (size_t i = 0; i < sw.size(); ++i) tv[i] = float(sw[i] + wv[i]);
  std::vector<double> want = ref_reduce(tv, {64, 50}, {1}, "max");
  std::vector<float> got = read(m, 64);
  for (size_t i = 0; i < 64; ++i) ASSERT_NEAR(got[i], want[i], 1e-3) << i;
  EXPECT_EQ(metric("fallback_nodes"), 0.0);
}

}  // namespace
