// CreationTest.cpp — conformance of full, arange and the counter-based random ops: exact values
// from the lt_random.h formula, same seed same values, statistics within bounds, and identical
// results across every loaded device.
#include "conformance.h"

#include <lazytensor/lt_random.h>

namespace ltc {
namespace {

using lt::DType;
using lt::Tensor;

class Creation : public ConformanceTest {};
LT_CONFORMANCE_SUITE(Creation);

TEST_P(Creation, FullEveryDtypeAndShape) {
  for (DType dt : {lt::f32, lt::f64, lt::i32, lt::i64, lt::bool_}) {
    for (const Shape& s : std::vector<Shape>{{}, {0}, {3}, {2, 3}, {2, 0, 4}}) {
      for (double value : {0.0, 2.75, -3.5}) {
        Host want{dt, s, std::vector<double>(size_t(numel_of(s)), 0)};
        double v = dt == lt::i32 || dt == lt::i64 ? std::trunc(value) : value;
        for (double& x : want.v) x = round_to(dt, v);
        expect_close(
            lt::full(dev(), s, value, dt), want, {},
            std::string("full ") + lt::dtype_name(dt) + str(s) + " " + std::to_string(value));
      }
    }
  }
}

TEST_P(Creation, ArangeIncludingNegativeAndEmptyRanges) {
  struct Case {
    double start, stop, step;
  };
  for (DType dt : numeric_dtypes()) {
    for (Case c : {Case{0, 5, 1}, Case{2, 11, 3}, Case{5, 0, -1}, Case{3, 3, 1}, Case{4, 1, 1},
                   Case{-2, 2, 0.5}, Case{1, 0, -0.25}}) {
      if (!is_float(dt) && std::trunc(c.step) != c.step) continue;
      int64_t n = std::max<int64_t>(0, int64_t(std::ceil((c.stop - c.start) / c.step)));
      Host want{dt, {n}, {}};
      for (int64_t i = 0; i < n; ++i) want.v.push_back(round_to(dt, c.start + double(i) * c.step));
      expect_close(lt::arange(dev(), c.start, c.stop, c.step, dt), want, tol(OpClass::kExact, dt),
                   std::string("arange ") + lt::dtype_name(dt) + " " + std::to_string(c.start) +
                       ".." + std::to_string(c.stop) + " by " + std::to_string(c.step));
    }
  }
}

// Element i of random_uniform / random_normal per lt_random.h (the contract's formula).
Host ref_uniform(DType dt, const Shape& s, uint64_t seed, double lo, double hi) {
  Host h{dt, s, {}};
  for (int64_t i = 0; i < numel_of(s); ++i) {
    float u = lt_random_unit_f32(seed, uint64_t(i));
    if (dt == lt::f32) {
      h.v.push_back(float(lo) + (float(hi) - float(lo)) * u);
    } else {
      h.v.push_back(lo + (hi - lo) * double(u));
    }
  }
  return h;
}

Host ref_normal(DType dt, const Shape& s, uint64_t seed, double mean, double stddev) {
  Host h{dt, s, {}};
  for (int64_t i = 0; i < numel_of(s); ++i) {
    double u1 = 1.0 - double(lt_random_unit_f32(seed, uint64_t(2 * i)));
    double u2 = double(lt_random_unit_f32(seed, uint64_t(2 * i + 1)));
    double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    h.v.push_back(round_to(dt, mean + stddev * z));
  }
  return h;
}

TEST_P(Creation, RandomFollowsTheCounterBasedFormula) {
  for (DType dt : float_dtypes()) {
    for (const Shape& s : std::vector<Shape>{{}, {0}, {7}, {3, 5}}) {
      expect_close(lt::random_uniform(dev(), s, 1234, -2.0, 3.0, dt),
                   ref_uniform(dt, s, 1234, -2.0, 3.0), tol(OpClass::kExact, dt),
                   std::string("random_uniform ") + lt::dtype_name(dt) + str(s));
      // Box-Muller in f32 is within transcendental rounding of the f64 reference; near u1 = 1
      // the log loses relative precision, hence the absolute term.
      Tol tn = tol(OpClass::kTranscendent, dt);
      tn.atol = std::max(tn.atol, dt == lt::f32 ? 1e-4 : 1e-9);
      expect_close(lt::random_normal(dev(), s, 99, 1.5, 2.0, dt), ref_normal(dt, s, 99, 1.5, 2.0),
                   tn, std::string("random_normal ") + lt::dtype_name(dt) + str(s));
    }
  }
}

TEST_P(Creation, RandomSameSeedSameValuesNewSeedNewValues) {
  Host a = download(lt::random_uniform(dev(), {64}, 7));
  Host b = download(lt::random_uniform(dev(), {64}, 7));
  Host c = download(lt::random_uniform(dev(), {64}, 8));
  EXPECT_EQ(a.v, b.v) << "same seed must give the same values";
  EXPECT_NE(a.v, c.v) << "a different seed must give different values";
  Host n1 = download(lt::random_normal(dev(), {64}, 7));
  Host n2 = download(lt::random_normal(dev(), {64}, 7));
  EXPECT_EQ(n1.v, n2.v);
}

TEST_P(Creation, RandomStatisticsWithinBounds) {
  const int64_t n = 20000;
  Host u = download(lt::random_uniform(dev(), {n}, 2024, -1.0, 3.0));
  double sum = 0, sq = 0;
  for (double x : u.v) {
    ASSERT_GE(x, -1.0);
    ASSERT_LT(x, 3.0);
    sum += x;
    sq += x * x;
  }
  double mean = sum / n, var = sq / n - mean * mean;
  // Uniform(-1, 3): mean 1, variance 16/12; bounds are > 6 standard errors.
  EXPECT_NEAR(mean, 1.0, 0.05);
  EXPECT_NEAR(var, 16.0 / 12.0, 0.05);
  Host g = download(lt::random_normal(dev(), {n}, 2025, -2.0, 0.5));
  sum = sq = 0;
  int64_t within_2sd = 0;
  for (double x : g.v) {
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sq += x * x;
    within_2sd += std::abs(x + 2.0) < 1.0;
  }
  mean = sum / n;
  var = sq / n - mean * mean;
  EXPECT_NEAR(mean, -2.0, 0.025);
  EXPECT_NEAR(var, 0.25, 0.02);
  EXPECT_NEAR(double(within_2sd) / n, 0.9545, 0.01);
}

TEST_P(Creation, RandomIdenticalAcrossDevices) {
  Host mine_u = download(lt::random_uniform(dev(), {4, 8}, 31337, -1.0, 1.0));
  Host mine_n = download(lt::random_normal(dev(), {4, 8}, 31337));
  for (const lt::Device& other : rt().devices()) {
    if (other == dev()) continue;
    std::string with = " vs " + other.name();
    Tol tu = std::max(tol(OpClass::kExact, lt::f32),
                      tolerance(OpClass::kExact, lt::f32, other.backend()),
                      [](Tol x, Tol y) { return x.rtol < y.rtol; });
    expect_close(lt::random_uniform(other, {4, 8}, 31337, -1.0, 1.0), mine_u, tu,
                 "random_uniform" + with);
    Tol tn = tolerance(OpClass::kTranscendent, lt::f32, other.backend());
    Tol tn_mine = tol(OpClass::kTranscendent, lt::f32);
    tn.rtol = 2 * std::max(tn.rtol, tn_mine.rtol);
    tn.atol = std::max(1e-4, 2 * std::max(tn.atol, tn_mine.atol));
    expect_close(lt::random_normal(other, {4, 8}, 31337), mine_n, tn, "random_normal" + with);
  }
}

}  // namespace
}  // namespace ltc
