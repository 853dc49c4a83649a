// VecTest.cpp — the host kernels' vector loops (vec.h: SLEEF math, sums, max/min, softmax rows,
// the batch-1 GEMV) against double-precision references, every length 0..70 (vector tails) and
// special values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "vec.h"

namespace {

using lt::host::vec::Table;
constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Isa {
  const char* name;
  bool present;
  const Table* (*table)();
};

std::vector<Isa> isas() {
  __builtin_cpu_init();
  return {{"avx2", __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"),
           [] { return &lt::host::vec::avx2_table(); }},
          {"avx512", __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"),
           [] { return &lt::host::vec::avx512_table(); }}};
}

class Vec : public ::testing::TestWithParam<int> {
 protected:
  // The ISA's table, or null when this CPU lacks it (the test then skips: hardware absent).
  const Table* t() {
    const Isa isa = isas()[GetParam()];
    return isa.present ? isa.table() : nullptr;
  }
};

// x in [-lo, hi] spread over n values, deterministic.
std::vector<float> ramp(int n, float lo, float hi) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = lo + (hi - lo) * float((i * 37) % 101) / 100.0f;
  return v;
}

void expect_near_rel(float got, double want, double rtol, const std::string& what,
                     double atol = 1e-7) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": got " << got;
  } else if (std::isinf(want)) {
    EXPECT_EQ(got, static_cast<float>(want)) << what;
  } else {
    EXPECT_NEAR(got, want, rtol * std::fabs(want) + atol) << what;
  }
}

using Ref = double (*)(double);
double sigmoid_ref(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
double gelu_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST_P(Vec, UnaryMathMatchesDoubleReferenceAtEveryTailLength) {
  if (!t()) GTEST_SKIP() << "this CPU lacks " << isas()[GetParam()].name;
  const Table& tb = *t();
  struct Case {
    const char* name;
    lt::host::vec::UnaryF32 fn;
    Ref ref;
    float lo, hi;
    double atol;  // gelu: 1 + tanh cancels in f32 below -5, as in the scalar formula
  } cases[] = {{"exp", tb.exp, [](double x) { return std::exp(x); }, -80, 80, 1e-7},
               {"log", tb.log, [](double x) { return std::log(x); }, 1e-6f, 1e6f, 1e-7},
               {"tanh", tb.tanh, [](double x) { return std::tanh(x); }, -12, 12, 1e-7},
               {"sigmoid", tb.sigmoid, sigmoid_ref, -30, 30, 1e-7},
               {"gelu", tb.gelu, gelu_ref, -8, 8, 1e-6},
               {"sin", tb.sin, [](double x) { return std::sin(x); }, -100, 100, 1e-7},
               {"cos", tb.cos, [](double x) { return std::cos(x); }, -100, 100, 1e-7}};
  for (const Case& c : cases) {
    ASSERT_NE(c.fn, nullptr) << c.name;
    for (int n = 0; n <= 70; ++n) {
      std::vector<float> x = ramp(n, c.lo, c.hi), y(n + 1, 42.0f);
      c.fn(y.data(), x.data(), n);
      for (int i = 0; i < n; ++i)
        expect_near_rel(y[i], c.ref(x[i]), 2e-6, std::string(c.name) + " n=" + std::to_string(n),
                        c.atol);
      EXPECT_EQ(y[n], 42.0f) << c.name << " wrote past n=" << n;
    }
  }
}

TEST_P(Vec, UnaryMathKeepsSpecialValues) {
  if (!t()) GTEST_SKIP() << "this CPU lacks " << isas()[GetParam()].name;
  const Table& tb = *t();
  const std::vector<float> x = {kNaN, kInf, -kInf, 0.0f, -0.0f, 89.0f, -104.0f, 1e30f, -1e30f};
  std::vector<float> y(x.size());
  auto each = [&](lt::host::vec::UnaryF32 f, Ref ref, const char* name) {
    f(y.data(), x.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i)
      expect_near_rel(y[i], ref(x[i]), 2e-6, std::string(name) + " of " + std::to_string(x[i]));
  };
  each(
      tb.exp, [](double v) { return static_cast<double>(std::exp(static_cast<float>(v))); }, "exp");
  each(
      tb.tanh, [](double v) { return std::tanh(v); }, "tanh");
  each(tb.sigmoid, sigmoid_ref, "sigmoid");
  each(
      tb.log, [](double v) { return static_cast<double>(std::log(static_cast<float>(v))); }, "log");
}

// The blocked sum's bound (vec_simd.inc): a block of at most 64 vectors sums in float, each lane
// adding at most 8 values and then a tree of three adds, so its error is within 12 roundings
// (2^-24 each) of the block's sum of magnitudes, and blocks add in double. The tolerance below
// is 16 roundings of the whole input's sum of magnitudes, against a plain double loop.
double blocked_sum_tolerance(const std::vector<float>& x) {
  double mag = 0;
  for (float v : x) mag += std::fabs(static_cast<double>(v));
  return 16 * std::ldexp(mag, -24) + 1e-30;
}

TEST_P(Vec, SumIsWithinTheBlockedBoundOfADoubleLoop) {
  if (!t()) GTEST_SKIP() << "this CPU lacks " << isas()[GetParam()].name;
  const Table& tb = *t();
  for (int n : {0,   1,   7,   8,   15,  16,  17,  31,   32,   33,   63,   64,   65,   127,   128,
                129, 255, 256, 257, 511, 512, 513, 1000, 1023, 1024, 1025, 2048, 4099, 100003}) {
    std::vector<float> x = ramp(n, -3, 5);
    if (n > 3) x[n / 2] = 1e8f;  // the small terms of its block round away, no others
    double want = 0;
    for (float v : x) want += v;
    EXPECT_NEAR(tb.sum(x.data(), n), want, blocked_sum_tolerance(x)) << "n=" << n;
  }
}

// The point of the double between blocks: 2^20 copies of 0.1 in one float accumulator drift by
// about 1% (each add rounds at the running total's scale); blocked, every block makes the same
// error here, so the total's relative error is a block's: within the 16 roundings stated above.
TEST_P(Vec, SumDoesNotDriftLikeOneFloatAccumulator) {
  if (!t()) GTEST_SKIP() << "this CPU lacks " << isas()[GetParam()].name;
  const Table& tb = *t();
  const std::vector<float> x(1 << 20, 0.1f);
  const double want = static_cast<double>(0.1f) * x.size();
  float naive = 0;
  for (float v : x) naive += v;
  ASSERT_GT(std::fabs(naive - want), 1e-3 * want);  // the drift this guards against is real
  EXPECT_NEAR(tb.sum(x.data(), static_cast<int64_t>(x.size())), want, 16 * std::ldexp(want, -24));
}

// Values whose float partial overflows though the double sum does not: that block is summed again
// in double, so the result is the double loop's (here exactly 0 or one value).
TEST_P(Vec, SumDoesNotOverflowWhereTheDoubleLoopDoesNot) {
  if (!t()) GTEST_SKIP() << "this CPU lacks " << isas()[GetParam()].name;
  const Table& tb = *t();
  for (int n : {16, 64, 100, 1024, 1030, 5000}) {
    std::vector<float> x(n);
    // +big on even lanes of every vector and -big on odd ones: each lane's float sum overflows.
    for (int i = 0; i < n; ++i) x[i] = (i % 2 ? -3e38f : 3e38f);
    double want = 0;
    for (float v : x) want += v;
    EXPECT_EQ(tb.sum(x.data(), n), want) << "n=" << n;
    x.push_back(3e38f);
    EXPECT_EQ(tb.sum(x.data(), n + 1), want + 3e38f) << "n=" << n + 1;
  }
}

TEST_P(Vec, SumPropagatesNaNAndInfinity) {
  if (!t()) GTEST_SKIP() << "this CPU lacks " << isas()[GetParam()].name;
  const Table& tb = *t();
  for (int n : {1, 9, 100, 1024, 3000}) {
    for (int at : {0, n / 2, n - 1}) {
      std::vector<float> x = ramp(n, -3, 5);
      x[at] = kNaN;
      EXPECT_TRUE(std::isnan(tb.sum(x.data(), n))) << "NaN at " << at << " of " << n;
      x[at] = kInf;
      EXPECT_EQ(tb.sum(x.data(), n), kInf) << "+inf at " << at << " of " << n;
      x[at] = -kInf;
      EXPECT_EQ(tb.sum(x.data(), n), -kInf) << "-inf at " << at << " of " << n;
      if (n > 1) {
        x[(at + 1) % n] = kInf;  // inf - inf
        EXPECT_TRUE(std::isnan(tb.sum(x.data(), n))) << "+inf and -inf in " << n;
      }
    }
  }
}

TEST_P(Vec, MaxMinFindTheExtremeAndRefuseNaN) {
  if (!t()) GTEST_SKIP() << "this CPU lacks " << isas()[GetParam()].name;
  const Table& tb = *t();
  for (int n = 1; n <= 70; ++n) {
    for (int at = 0; at < n; at += 5) {
      std::vector<float> x = ramp(n, -3, 5);
      x[at] = 9.0f;
      float r = 0;
      ASSERT_TRUE(tb.max(x.data(), n, &r));
      EXPECT_EQ(r, 9.0f) << "n=" << n << " at=" << at;
      x[at] = -kInf;
      ASSERT_TRUE(tb.min(x.data(), n, &r));
      EXPECT_EQ(r, -kInf) << "n=" << n << " at=" << at;
      x[at] = kNaN;
      EXPECT_FALSE(tb.max(x.data(), n, &r)) << "NaN at " << at << " of " << n;
      EXPECT_FALSE(tb.min(x.data(), n, &r)) << "NaN at " << at << " of " << n;
    }
  }
}

TEST_P(Vec, SoftmaxRowUnderflowsToExactZeroFarBelowTheMax) {
  if (!t()) GTEST_SKIP() << "this CPU lacks " << isas()[GetParam()].name;
  const Table& tb = *t();
  // Entries 80..120 below the max: e^-d is a denormal or 0 in f32, never garbage.
  std::vector<float> x(41), y(41);
  for (int i = 0; i < 41; ++i) x[i] = -80.0f - float(i);
  x[0] = 0.0f;
  ASSERT_TRUE(tb.softmax_row(y.data(), x.data(), 41, false));
  EXPECT_NEAR(y[0], 1.0f, 1e-6f);
  for (int i = 1; i < 41; ++i) {
    EXPECT_GE(y[i], 0.0f) << i;
    EXPECT_LE(y[i], 2.0f * std::exp(double(x[i]))) << i;
  }
}

TEST_P(Vec, SoftmaxRowMatchesReference) {
  if (!t()) GTEST_SKIP() << "this CPU lacks " << isas()[GetParam()].name;
  const Table& tb = *t();
  for (int n : {1, 2, 7, 8, 9, 16, 17, 33, 100, 1024, 1031}) {
    std::vector<float> x = ramp(n, -20, 20), y(n + 1, 42.0f), ly(n + 1, 42.0f);
    if (n > 2) x[1] = -kInf;
    double m = -INFINITY, s = 0;
    for (float v : x) m = std::max<double>(m, v);
    for (float v : x) s += std::exp(double(v) - m);
    ASSERT_TRUE(tb.softmax_row(y.data(), x.data(), n, false));
    ASSERT_TRUE(tb.softmax_row(ly.data(), x.data(), n, true));
    for (int i = 0; i < n; ++i) {
      const std::string at = "n=" + std::to_string(n) + " i=" + std::to_string(i);
      expect_near_rel(y[i], std::exp(double(x[i]) - m) / s, 2e-6, "softmax " + at);
      expect_near_rel(ly[i], double(x[i]) - m - std::log(s), 2e-6, "log_softmax " + at);
    }
    EXPECT_EQ(y[n], 42.0f);
    EXPECT_EQ(ly[n], 42.0f);
  }
  // Rows the scalar loop owns: a NaN, +inf, or all -inf.
  std::vector<float> nan_row = {1, kNaN, 2}, inf_row = {1, kInf, 2}, ninf_row = {-kInf, -kInf},
                     out(3);
  EXPECT_FALSE(tb.softmax_row(out.data(), nan_row.data(), 3, false));
  EXPECT_FALSE(tb.softmax_row(out.data(), inf_row.data(), 3, false));
  EXPECT_FALSE(tb.softmax_row(out.data(), ninf_row.data(), 2, true));
}

// The batch-1 GEMV's two forms against a plain double loop: every tail length on both sides
// of a vector and of the eight-row (axpy) and four-row (dot) blocks, leading dimensions wider
// than a row (the gap holds NaN, so a lane read past the row shows), strided x or y, and
// accumulation onto what y held. Special values: the plain loop's IEEE results (a NaN or inf in
// a row poisons only the outputs it feeds; 0 * inf is NaN).
struct GemvCase {
  int64_t rows, cols;
  bool special;
};

void check_gemv(const Table& tb, bool axpy, const GemvCase& c) {
  const int64_t ld = c.cols + 3, inc = axpy ? 2 : 3;  // x's stride (axpy) or y's (dot)
  std::vector<float> m(c.rows * ld, kNaN);
  for (int64_t i = 0; i < c.rows; ++i)
    for (int64_t j = 0; j < c.cols; ++j) m[i * ld + j] = float((i * 7 + j * 3) % 17) * 0.1f - 0.8f;
  // x has one entry per matrix row (axpy) or column (dot); y one per column (axpy) or row (dot).
  const int64_t nx = axpy ? c.rows : c.cols, ny = axpy ? c.cols : c.rows;
  const int64_t sx = axpy ? inc : 1, sy = axpy ? 1 : inc;
  std::vector<float> x(nx * sx + 1, kNaN), y(ny * sy + 1, 42.0f);
  for (int64_t i = 0; i < nx; ++i) x[i * sx] = float((i * 5) % 11) * 0.2f - 1.0f;
  for (int64_t i = 0; i < ny; ++i) y[i * sy] = float(i % 3);
  if (c.special && c.rows > 2 && c.cols > 2) {
    m[1 * ld + 1] = kNaN;  // axpy: poisons y[1]; dot: y[1]
    m[2 * ld + 2] = kInf;
    x[2 * sx] = 0.0f;  // 0 * inf: NaN in y[2] (both forms)
  }
  const std::vector<float> y0 = y;
  if (axpy)
    tb.gemv_axpy(m.data(), ld, c.rows, c.cols, x.data(), sx, y.data());
  else
    tb.gemv_dot(m.data(), ld, c.rows, c.cols, x.data(), y.data(), sy);
  for (int64_t o = 0; o < ny; ++o) {
    double want = y0[o * sy], mag = std::fabs(want);
    for (int64_t p = 0; p < nx; ++p) {
      const double e = axpy ? double(x[p * sx]) * m[p * ld + o] : double(m[o * ld + p]) * x[p];
      want += e;
      mag += std::fabs(e);
    }
    const std::string at = std::string(axpy ? "axpy " : "dot ") + std::to_string(c.rows) + "x" +
                           std::to_string(c.cols) + " out " + std::to_string(o);
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(y[o * sy])) << at << ": got " << y[o * sy];
    else if (std::isinf(want))
      EXPECT_EQ(y[o * sy], float(want)) << at;
    else
      EXPECT_NEAR(y[o * sy], want, 1e-5 * (mag + 1)) << at;
  }
  // Nothing between strided outputs or past the last one is written.
  for (size_t i = 0; i < y.size(); ++i)
    if (i % sy != 0 || int64_t(i) >= ny * sy) EXPECT_EQ(y[i], 42.0f) << "y[" << i << "] written";
}

TEST_P(Vec, GemvFormsMatchPlainLoops) {
  if (!t()) GTEST_SKIP() << "this CPU lacks " << isas()[GetParam()].name;
  const Table& tb = *t();
  for (bool special : {false, true})
    for (int64_t rows : {0, 1, 3, 4, 5, 7, 8, 9, 16, 17, 33})
      for (int64_t cols : {0, 1, 5, 8, 15, 16, 17, 31, 32, 33, 64, 70})
        for (bool axpy : {true, false}) check_gemv(tb, axpy, {rows, cols, special});
  // The MLP's shapes: 784 -> 512 and 512 -> 10.
  for (bool axpy : {true, false}) {
    check_gemv(tb, axpy, {784, 512, false});
    check_gemv(tb, axpy, {512, 10, true});
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, Vec, ::testing::Values(0, 1),
                         [](const auto& info) { return std::string(isas()[info.param].name); });

TEST(VecTable, ScalarCapLeavesEveryLoopToTheKernels) {
  // vec::table() is chosen once per process; the cap is read then, so this checks what the
  // table reports about itself: a named ISA has every loop, "scalar" none.
  const Table& tb = lt::host::vec::table();
  const bool vector = std::string(tb.isa) != "scalar";
  for (auto f : {tb.exp, tb.log, tb.tanh, tb.sigmoid, tb.gelu, tb.sin, tb.cos})
    EXPECT_EQ(f != nullptr, vector) << tb.isa;
  EXPECT_EQ(tb.sum != nullptr, vector);
  EXPECT_EQ(tb.softmax_row != nullptr, vector);
  EXPECT_EQ(tb.gemv_axpy != nullptr, vector);
  EXPECT_EQ(tb.gemv_dot != nullptr, vector);
}

}  // namespace
