// MixedPrecisionTest.cpp — bf16 and f16 arithmetic on every backend this build made: results
// are the f32 computation on the widened operands, rounded once on store (checked against a
// double-precision reference rounded by this file's own conversions), conversions are exact
// over every 16-bit pattern, autograd flows through casts, nothing leaves its backend, and
// tpu_sim's matrix unit takes bf16 natively at half the memory traffic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "lazytensor/autograd.hpp"
#include "lazytensor/lazytensor.hpp"

namespace {

// ---- the reference conversions: written here, independent of the library's -------------

float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
// Round to nearest even by exact arithmetic on the value (not the bit trick the library uses).
uint16_t ref_bf16(float x) {
  if (std::isnan(x)) return static_cast<uint16_t>((f32_bits(x) >> 16) | 0x40);
  uint32_t u = f32_bits(x);
  uint32_t lo = u & 0xFFFF0000u, hi = lo + 0x10000u;
  // The value above the largest finite bf16 is 2^128 (its rounding goes to infinity).
  double vh = (hi & 0x7FFFFFFFu) == 0x7F800000u ? std::copysign(std::ldexp(1.0, 128), x)
                                                : double(bits_f32(hi));
  double dl = std::fabs(double(x) - double(bits_f32(lo))), dh = std::fabs(vh - double(x));
  if (std::isinf(x)) return static_cast<uint16_t>(u >> 16);
  if (dl < dh || (dl == dh && ((lo >> 16) & 1) == 0)) return static_cast<uint16_t>(lo >> 16);
  return static_cast<uint16_t>(hi >> 16);
}
float from_bf16(uint16_t b) {
  return bits_f32(uint32_t{b} << 16);
}
uint16_t ref_f16(float x) {
  _Float16 h = static_cast<_Float16>(x);  // the compiler's conversion: round to nearest even
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}
float from_f16(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}
uint16_t round_to(lt_dtype d, double v) {
  return d == LT_DTYPE_BF16 ? ref_bf16(static_cast<float>(v)) : ref_f16(static_cast<float>(v));
}
float widen(lt_dtype d, uint16_t b) {
  return d == LT_DTYPE_BF16 ? from_bf16(b) : from_f16(b);
}

lt::Tensor bits_tensor(const lt::Device& dev, lt_dtype d, const std::vector<uint16_t>& bits,
                       std::vector<int64_t> shape) {
  lt_tensor* t = nullptr;
  lt::check(lt_tensor_from_host(dev.get(), d, shape.data(), shape.size(), bits.data(),
                                bits.size() * 2, &t));
  return lt::Tensor(t);
}
std::vector<uint16_t> bits_of(const lt::Tensor& t) {
  std::vector<uint8_t> bytes = t.to_bytes();
  std::vector<uint16_t> out(bytes.size() / 2);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

class MixedPrecision : public lt::test::BackendTest {
 protected:
  MixedPrecision() : BackendTest(lt::test::with_fallback("error")) {}
};

// One ulp of the storage type at v (relative bound of its mantissa).
double ulp(lt_dtype d, double v) {
  return std::max(std::fabs(v), d == LT_DTYPE_F16 ? 6.1e-5 : 1.2e-38) *
         (d == LT_DTYPE_BF16 ? 1.0 / 128 : 1.0 / 1024);
}

TEST_P(MixedPrecision, ArithmeticRoundsOnceOnStore) {
  // bf16 (8 significant bits): 1 + 2^-8 is a tie and goes to even; 1 + 3*2^-9 rounds up.
  lt::Tensor a =
      bits_tensor(dev_, LT_DTYPE_BF16, {ref_bf16(1), ref_bf16(1), ref_bf16(1), ref_bf16(3)}, {4});
  lt::Tensor b = bits_tensor(
      dev_, LT_DTYPE_BF16,
      {ref_bf16(0.00390625f), ref_bf16(0.005859375f), ref_bf16(0.0078125f), ref_bf16(0)}, {4});
  lt::Tensor s = a + b;
  EXPECT_EQ(s.dtype(), LT_DTYPE_BF16);
  EXPECT_EQ(s.cast(LT_DTYPE_F32).to_vector<float>(),
            (std::vector<float>{1.0f, 1.0078125f, 1.0078125f, 3.0f}));
  EXPECT_TRUE(std::isnan((b / b).cast(LT_DTYPE_F32).to_vector<float>()[3]));  // 0/0 stays NaN

  // f16 (11 significant bits, max 65504): 2048 + 1 ties to even, 2048 + 3 -> 2052, overflow
  // to inf, and a product below the smallest normal keeps its subnormal.
  lt::Tensor h = bits_tensor(dev_, LT_DTYPE_F16,
                             {ref_f16(2048), ref_f16(2048), ref_f16(60000), ref_f16(0.0001f)}, {4});
  lt::Tensor k = bits_tensor(dev_, LT_DTYPE_F16,
                             {ref_f16(1), ref_f16(3), ref_f16(10000), ref_f16(0.01f)}, {4});
  std::vector<float> sum = (h + k).cast(LT_DTYPE_F32).to_vector<float>();
  EXPECT_EQ(sum[0], 2048.0f);
  EXPECT_EQ(sum[1], 2052.0f);
  EXPECT_TRUE(std::isinf(sum[2]) && sum[2] > 0);
  std::vector<uint16_t> prod = bits_of(h * k);
  EXPECT_EQ(prod[3], ref_f16(from_f16(ref_f16(0.0001f)) * from_f16(ref_f16(0.01f))));
  EXPECT_EQ(prod[3] & 0x7C00, 0) << "1e-6 is an f16 subnormal";
  EXPECT_NE(prod[3], 0);

  // Mixed operands promote: bf16 + f32 computes and returns f32.
  lt::Tensor f = lt::Tensor::from<float>(dev_, std::vector<float>{0.001f, 0, 0, 0}, {4});
  lt::Tensor m = a + f;
  EXPECT_EQ(m.dtype(), LT_DTYPE_F32);
  EXPECT_FLOAT_EQ(m.to_vector<float>()[0], 1.001f);
}

// Every unary / binary / reduction / contraction / NN op on bf16 and f16 against the f32
// computation in double on the widened inputs, rounded once: within one ulp of the storage
// type (the backend computes in f32, the reference in double; f32 error is far below it).
TEST_P(MixedPrecision, OpsMatchTheWidenedComputationRoundedOnce) {
  for (lt_dtype d : {LT_DTYPE_BF16, LT_DTYPE_F16}) {
    SCOPED_TRACE(lt_dtype_name(d));
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    const int64_t R = 6, C = 8;
    std::vector<uint16_t> xb(R * C), yb(R * C);
    for (auto& v : xb) v = round_to(d, u(rng));
    for (auto& v : yb) v = round_to(d, u(rng));
    std::vector<double> x(xb.size()), y(yb.size());
    for (size_t i = 0; i < xb.size(); ++i) x[i] = widen(d, xb[i]), y[i] = widen(d, yb[i]);
    lt::Tensor X = bits_tensor(dev_, d, xb, {R, C}), Y = bits_tensor(dev_, d, yb, {R, C});

    auto expect_close = [&](const char* what, const lt::Tensor& got,
                            const std::vector<double>& want) {
      ASSERT_EQ(got.dtype(), d) << what;
      std::vector<uint16_t> g = bits_of(got);
      ASSERT_EQ(g.size(), want.size()) << what;
      for (size_t i = 0; i < g.size(); ++i) {
        double r = widen(d, round_to(d, want[i]));
        EXPECT_LE(std::fabs(widen(d, g[i]) - r), ulp(d, r) * 1.01)
            << what << " [" << i << "]: got " << widen(d, g[i]) << ", want " << r;
      }
    };
    auto map = [&](auto fn) {
      std::vector<double> r(x.size());
      for (size_t i = 0; i < x.size(); ++i) r[i] = fn(x[i], y[i]);
      return r;
    };
    expect_close("mul", X * Y, map([](double a, double b) { return a * b; }));
    expect_close("div", X / (Y.abs() + 0.5), map([&](double a, double b) {
                   return a / double(widen(d, round_to(d, std::fabs(b) + 0.5)));
                 }));
    expect_close("exp", X.exp(), map([](double a, double) { return std::exp(a); }));
    expect_close("tanh", X.tanh(), map([](double a, double) { return std::tanh(a); }));
    expect_close("sqrt", Y.abs().sqrt(),
                 map([](double, double b) { return std::sqrt(std::fabs(b)); }));
    expect_close("gelu", X.gelu(), map([](double a, double) {
                   return 0.5 * a *  // docs/ops.md: the tanh approximation
                          (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
                 }));

    // Reductions accumulate in f32 and round once: a row sum of bf16 values is not the sum
    // of bf16 partial sums.
    std::vector<double> rows(R, 0.0), rmax(R, -1e30);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c)
        rows[r] += x[r * C + c], rmax[r] = std::max(rmax[r], x[r * C + c]);
    expect_close("sum", X.sum({1}), rows);
    expect_close("max", X.max({1}), rmax);
    std::vector<double> soft(x.size());
    for (int64_t r = 0; r < R; ++r) {
      double z = 0;
      for (int64_t c = 0; c < C; ++c) z += std::exp(x[r * C + c] - rmax[r]);
      for (int64_t c = 0; c < C; ++c) soft[r * C + c] = std::exp(x[r * C + c] - rmax[r]) / z;
    }
    expect_close("softmax", X.softmax(1), soft);

    // matmul [R, C] x [C, R]: products exact in f32, sums in f32, one rounding. tpu_sim's
    // matrix unit multiplies bf16: an f16 (or f32) product there has bf16 inputs.
    const bool mxu_bf16 = GetParam() == "tpu_sim";
    auto mx = [&](double v) { return mxu_bf16 ? double(from_bf16(ref_bf16(float(v)))) : v; };
    std::vector<double> mm(R * R, 0.0);
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < R; ++j)
        for (int64_t k = 0; k < C; ++k) mm[i * R + j] += mx(x[i * C + k]) * mx(y[j * C + k]);
    expect_close("matmul", lt::matmul(X, Y.permute({1, 0})), mm);
  }
}

// Conversions are exact: every bf16 and f16 bit pattern widens to the f32 it stands for, and
// f32 values (edge cases and random bit patterns) round to nearest even, NaN staying NaN.
TEST_P(MixedPrecision, ConversionsAreExactOverEveryPattern) {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  for (lt_dtype d : {LT_DTYPE_BF16, LT_DTYPE_F16}) {
    SCOPED_TRACE(lt_dtype_name(d));
    std::vector<float> w = bits_tensor(dev_, d, all, {65536}).cast(LT_DTYPE_F32).to_vector<float>();
    size_t bad = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      float want = widen(d, all[i]);
      bool same = std::isnan(want) ? std::isnan(w[i]) : f32_bits(w[i]) == f32_bits(want);
      if (!same && bad++ < 5) ADD_FAILURE() << std::hex << "pattern 0x" << i << ": " << w[i];
    }
    EXPECT_EQ(bad, 0u);

    std::vector<float> f = {
        0.0f,          -0.0f,         1.0f,          65504.0f, 65519.99f, 65520.0f,  1e-8f,
        2.9802322e-8f, 5.9604645e-8f, 6.1035156e-5f, 3.0e38f,  INFINITY,  -INFINITY, NAN};
    std::mt19937 rng(11);
    for (int i = 0; i < 200000; ++i) f.push_back(bits_f32(static_cast<uint32_t>(rng())));
    for (int i = 0; i < 50000; ++i)  // the f16 range, ties included
      f.push_back(bits_f32(0x33000000u + static_cast<uint32_t>(rng() % 0x14800000u) / 4096 * 4096));
    std::vector<uint16_t> got =
        bits_of(lt::Tensor::from<float>(dev_, f, {int64_t(f.size())}).cast(d));
    bad = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      uint16_t want = round_to(d, f[i]);
      bool same = std::isnan(f[i]) ? std::isnan(widen(d, got[i])) : got[i] == want;
      if (!same && bad++ < 5)
        ADD_FAILURE() << std::hex << "f32 0x" << f32_bits(f[i]) << " -> 0x" << got[i] << ", want 0x"
                      << want;
    }
    EXPECT_EQ(bad, 0u);
  }
}

// A scalar, a pad's fill and a cast of the same value give the same bits: storage dtypes round
// through f32 as the casts do (never straight from double), and integer scalars saturate as
// the casts do.
TEST_P(MixedPrecision, ScalarsAndFillsRoundLikeCasts) {
  // 1 + 2^-11 + 2^-40: above f16's tie between 1 and 1 + 2^-10 as a double, exactly on it (and
  // so rounded to even, to 1) once rounded to f32.
  const double v = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  ASSERT_EQ(round_to(LT_DTYPE_F16, v), 0x3C00);
  for (lt_dtype d : {LT_DTYPE_BF16, LT_DTYPE_F16}) {
    SCOPED_TRACE(lt_dtype_name(d));
    const uint16_t want = round_to(d, v), two = round_to(d, 2.0);
    lt::Tensor f = lt::Tensor::from<float>(dev_, {static_cast<float>(v)}, {1});
    EXPECT_EQ(bits_of(f.cast(d)), std::vector<uint16_t>{want});
    EXPECT_EQ(bits_of(lt::Tensor::scalar(dev_, v, d)), std::vector<uint16_t>{want});
    lt::Tensor x = bits_tensor(dev_, d, {two}, {1});
    EXPECT_EQ(bits_of(x.pad({1}, {2}, v)), (std::vector<uint16_t>{want, two, want, want}));
  }
  const int64_t top = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(lt::Tensor::scalar(dev_, 1e19, LT_DTYPE_I64).to_vector<int64_t>(),
            std::vector<int64_t>{top});
  EXPECT_EQ(lt::Tensor::from<float>(dev_, {1e19f}, {1}).cast(LT_DTYPE_I64).to_vector<int64_t>(),
            std::vector<int64_t>{top});
}

// Gradients flow through casts: a bf16 computation inside an f32 model gives f32 gradients
// within bf16 accuracy of the f32 ones, and a bf16 leaf gets a bf16 gradient.
TEST_P(MixedPrecision, AutogradFlowsThroughCasts) {
  std::vector<float> xv = {0.5f, -1.25f, 2.0f, 0.75f, -0.5f, 1.5f};
  auto loss = [&](lt::Tensor x, lt_dtype d) {
    lt::Tensor h = x.cast(d);
    lt::Tensor z = (lt::matmul(h, h.permute({1, 0})).tanh() * 3.0).sum();
    return z.cast(LT_DTYPE_F32);
  };
  lt::Tensor x32 = lt::Tensor::from<float>(dev_, xv, {2, 3});
  lt::set_requires_grad(x32);
  lt::backward(loss(x32, LT_DTYPE_F32));
  std::vector<float> g32 = lt::grad(x32).to_vector<float>();
  for (lt_dtype d : {LT_DTYPE_BF16, LT_DTYPE_F16}) {
    lt::Tensor x = lt::Tensor::from<float>(dev_, xv, {2, 3});
    lt::set_requires_grad(x);
    lt::backward(loss(x, d));
    lt::Tensor g = lt::grad(x);
    ASSERT_EQ(g.dtype(), LT_DTYPE_F32);
    std::vector<float> gv = g.to_vector<float>();
    const double tol = d == LT_DTYPE_BF16 ? 0.05 : 0.01;
    EXPECT_TRUE(lt::test::all_close(gv, g32, tol, tol)) << lt_dtype_name(d);
  }
  lt::Tensor leaf = lt::Tensor::from<float>(dev_, xv, {2, 3}).cast(LT_DTYPE_BF16);
  lt::set_requires_grad(leaf);
  lt::backward((leaf * leaf).sum().cast(LT_DTYPE_F32));
  lt::Tensor gl = lt::grad(leaf);
  EXPECT_EQ(gl.dtype(), LT_DTYPE_BF16);
  std::vector<float> glv = gl.cast(LT_DTYPE_F32).to_vector<float>();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(glv[i], 2 * xv[i]);  // exact in bf16
}

LT_INSTANTIATE_PER_BACKEND(MixedPrecision, lt::test::built_backends());

// What the core did: the backends without 16-bit arithmetic run the widened f32 ops (counted
// as widened.<op>); tpu_sim multiplies bf16 on its matrix unit as it is, moving half the bytes
// of the f32 product.
TEST(MixedPrecisionMetrics, WidenedOpsAreCountedAndTheMxuTakesBf16) {
  lt::Runtime& rt = lt::test::no_fallback_runtime();
  lt::Device eager = rt.find_device("cpu_eager");
  lt::Tensor a = lt::Tensor::from<float>(eager, std::vector<float>(64, 0.5f), {8, 8});
  rt.reset_metrics();
  (a.cast(LT_DTYPE_BF16) * a.cast(LT_DTYPE_BF16)).to_bytes();
  std::string report = rt.metrics_report(true);
  EXPECT_NE(report.find("\"widened.mul\": 1"), std::string::npos) << report;

  std::vector<std::string> built = lt::test::built_backends();
  if (std::find(built.begin(), built.end(), "tpu_sim") == built.end()) return;
  lt::Device tpu = rt.find_device("tpu_sim");
  auto hbm_bytes = [&](lt_dtype d) {
    lt::Tensor m = lt::Tensor::from<float>(tpu, std::vector<float>(256 * 256, 0.25f), {256, 256});
    lt::Tensor x = m.cast(d);
    x.to_bytes();  // the cast runs in its own graph
    rt.reset_metrics();
    lt::matmul(x, x).to_bytes();
    std::string r = rt.metrics_report(true);
    EXPECT_EQ(r.find("widened.matmul"), std::string::npos) << r;
    size_t at = r.find("\"plugin.tpu_sim.hbm_bytes\": ");
    EXPECT_NE(at, std::string::npos) << r;
    return at == std::string::npos ? 0.0 : std::stod(r.substr(at + 28));
  };
  double f32 = hbm_bytes(LT_DTYPE_F32), bf16 = hbm_bytes(LT_DTYPE_BF16);
  EXPECT_GT(f32, 0);
  EXPECT_DOUBLE_EQ(bf16 * 2, f32);
}

}  // namespace
