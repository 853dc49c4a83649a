// CacheTest.cpp — compile-cache behaviour every backend must show: the same program on new
// data (and new scalar parameter values) reuses the compiled graph and still gives fresh,
// correct results; a new shape compiles again.
#include "conformance.h"

namespace ltc {
namespace {

class Cache : public ConformanceTest {
 protected:
  double metric(const char* name) { return rt().metric(name); }
  // One step of a small program; `scale` is an lt_scalar, a graph parameter.
  lt::Tensor step(const Host& x, double scale) {
    lt::Tensor t = upload(dev(), x);
    return ((t * lt::scalar(dev(), scale) + 1.0).tanh() * t).sum({1});
  }
  // tanh then a sum: the looser of the two op classes' tolerances.
  Tol step_tol() {
    Tol a = tol(OpClass::kTranscendent, lt::f32), b = tol(OpClass::kReduce, lt::f32);
    return {std::max(a.rtol, b.rtol), std::max(a.atol, b.atol)};
  }
  Host ref_step(const Host& x, double scale) {
    Host r{x.dtype, {x.shape[0]}, {}};
    for (int64_t i = 0; i < x.shape[0]; ++i) {
      double s = 0;
      for (int64_t j = 0; j < x.shape[1]; ++j) {
        double v = x.at({i, j});
        s += std::tanh(v * scale + 1.0) * v;
      }
      r.v.push_back(round_to(x.dtype, s));
    }
    return r;
  }
};
LT_CONFORMANCE_SUITE(Cache);

TEST_P(Cache, SameProgramOnNewDataAndScalarsIsACacheHit) {
  Host x0 = make(lt::f32, {4, 8}, Fill::kAny, 80);
  expect_close(step(x0, 0.5), ref_step(x0, 0.5), step_tol(), "warm-up");
  const double compiles = metric("compiles"), hits = metric("cache_hits");
  for (uint32_t k = 1; k <= 3; ++k) {
    Host x = make(lt::f32, {4, 8}, Fill::kAny, 80 + k);
    double scale = 0.25 * k;
    expect_close(step(x, scale), ref_step(x, scale), step_tol(),
                 "step " + std::to_string(k) + " (fresh data, new scalar)");
  }
  EXPECT_EQ(metric("compiles"), compiles) << "new data or scalar values must not recompile";
  EXPECT_GE(metric("cache_hits"), hits + 3);
  // A new shape is a different program.
  Host y = make(lt::f32, {3, 5}, Fill::kAny, 90);
  expect_close(step(y, 0.5), ref_step(y, 0.5), step_tol(), "new shape");
  EXPECT_GT(metric("compiles"), compiles) << "a new input shape must compile a new graph";
}

}  // namespace
}  // namespace ltc
