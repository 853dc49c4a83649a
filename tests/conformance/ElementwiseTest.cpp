// ElementwiseTest.cpp — conformance of unary, binary, where and cast ops against plain-loop
// references: every dtype, broadcasting corners, zero-sized and rank-0 tensors, non-contiguous
// inputs, integer and NaN corner semantics from docs/ops.md; and each differentiable unary op's
// gradient (autograd, on the backend under test) against its derivative.
#include <lazytensor/autograd.hpp>

#include "conformance.h"

#include <iostream>
#include <limits>
#include <source_location>

namespace ltc {
namespace {

using lt::DType;
using lt::Tensor;

class Elementwise : public ConformanceTest {
 protected:
  // A case's tolerance: its op class's, widened to the case's documented f64 bound if any.
  template <class Case>
  Tol case_tol(const Case& c, DType dt) const {
    Tol t = tol(c.cls, dt);
    if (dt == lt::f64) t.atol = std::max(t.atol, c.f64_atol);
    return t;
  }
};
LT_CONFORMANCE_SUITE(Elementwise);

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

double gelu_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double gelu_grad(double x) {
  const double k = std::sqrt(2.0 / M_PI), t = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}
double sigmoid_ref(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

struct UnaryCase {
  const char* name;
  // The API's free functions take the caller's std::source_location (defaulted).
  Tensor (*op)(const Tensor&, std::source_location);
  std::vector<DType> dtypes;
  Fill fill;
  OpClass cls;
  double (*ref)(double);
  double (*grad)(double) = nullptr;  // d ref / dx, for differentiable ops
  double f64_atol = 0;               // where the op's documented f64 accuracy is coarser
};

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {"neg", lt::neg, numeric_dtypes(), Fill::kAny, OpClass::kExact, [](double x) { return -x; },
       [](double) { return -1.0; }},
      {"abs", lt::abs, numeric_dtypes(), Fill::kAny, OpClass::kExact,
       [](double x) { return std::abs(x); },
       [](double x) { return x > 0   ? 1.0
                             : x < 0 ? -1.0
                                     : 0.0; }},
      {"relu", lt::relu, numeric_dtypes(), Fill::kAny, OpClass::kExact,
       [](double x) { return x > 0 ? x : 0.0; }, [](double x) { return x > 0 ? 1.0 : 0.0; }},
      {"exp", lt::exp, float_dtypes(), Fill::kAny, OpClass::kTranscendent,
       [](double x) { return std::exp(x); }, [](double x) { return std::exp(x); }},
      {"log", lt::log, float_dtypes(), Fill::kPositive, OpClass::kTranscendent,
       [](double x) { return std::log(x); }, [](double x) { return 1 / x; }},
      {"sqrt", lt::sqrt, float_dtypes(), Fill::kPositive, OpClass::kTranscendent,
       [](double x) { return std::sqrt(x); }, [](double x) { return 0.5 / std::sqrt(x); }},
      {"rsqrt", lt::rsqrt, float_dtypes(), Fill::kPositive, OpClass::kTranscendent,
       [](double x) { return 1.0 / std::sqrt(x); },
       [](double x) { return -0.5 / (x * std::sqrt(x)); }},
      {"tanh", lt::tanh, float_dtypes(), Fill::kAny, OpClass::kTranscendent,
       [](double x) { return std::tanh(x); },
       [](double x) { return 1 - std::tanh(x) * std::tanh(x); }},
      {"sigmoid", lt::sigmoid, float_dtypes(), Fill::kAny, OpClass::kTranscendent, sigmoid_ref,
       [](double x) { return sigmoid_ref(x) * (1 - sigmoid_ref(x)); }},
      {"gelu", lt::gelu, float_dtypes(), Fill::kAny, OpClass::kTranscendent, gelu_ref, gelu_grad},
      {"silu", lt::silu, float_dtypes(), Fill::kAny, OpClass::kTranscendent,
       [](double x) { return x * sigmoid_ref(x); },
       [](double x) { return sigmoid_ref(x) * (1 + x * (1 - sigmoid_ref(x))); }},
      {"erf", lt::erf, float_dtypes(), Fill::kAny, OpClass::kTranscendent,
       [](double x) { return std::erf(x); },
       [](double x) { return 2 / std::sqrt(M_PI) * std::exp(-x * x); }, 2e-8},
      {"softplus", lt::softplus, float_dtypes(), Fill::kAny, OpClass::kTranscendent,
       [](double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); },
       sigmoid_ref},
      {"sin", lt::sin, float_dtypes(), Fill::kAny, OpClass::kTranscendent,
       [](double x) { return std::sin(x); }, [](double x) { return std::cos(x); }},
      {"cos", lt::cos, float_dtypes(), Fill::kAny, OpClass::kTranscendent,
       [](double x) { return std::cos(x); }, [](double x) { return -std::sin(x); }},
      {"floor", lt::floor, float_dtypes(), Fill::kAny, OpClass::kExact,
       [](double x) { return std::floor(x); }, [](double) { return 0.0; }},
      {"not",
       lt::logical_not,
       {lt::bool_},
       Fill::kAny,
       OpClass::kExact,
       [](double x) { return x == 0 ? 1.0 : 0.0; }},
  };
  return cases;
}

const std::vector<Shape>& unary_shapes() {
  static const std::vector<Shape> s = {{}, {0}, {5}, {2, 3, 4}, {2, 0, 3}, {1, 1}};
  return s;
}

TEST_P(Elementwise, UnaryOpsMatchReferenceForEveryDtypeAndShape) {
  for (const UnaryCase& c : unary_cases()) {
    for (DType dt : c.dtypes) {
      for (const Shape& shape : unary_shapes()) {
        Host a = make(dt, shape, c.fill, 1);
        std::string what = std::string(c.name) + " " + lt::dtype_name(dt) + str(shape);
        expect_close(c.op(upload(dev(), a), std::source_location::current()),
                     ref_unary(a, dt, c.ref), case_tol(c, dt), what);
      }
      // Non-contiguous inputs: a permuted view and a negative-step slice.
      Host p = make(dt, {3, 4, 2}, c.fill, 2);
      expect_close(c.op(upload_permuted(dev(), p), std::source_location::current()),
                   ref_unary(p, dt, c.ref), case_tol(c, dt),
                   std::string(c.name) + " permuted " + lt::dtype_name(dt));
      Host r = make(dt, {4, 3}, c.fill, 3);
      expect_close(c.op(upload_reversed(dev(), r), std::source_location::current()),
                   ref_unary(r, dt, c.ref), case_tol(c, dt),
                   std::string(c.name) + " reversed slice " + lt::dtype_name(dt));
    }
  }
}

// Autograd on the backend under test: d sum(op(x)) / dx = op'(x), elementwise (for composite
// ops a backend lacks, through the gradient of their decomposition).
TEST_P(Elementwise, UnaryGradientsMatchTheDerivative) {
  for (const UnaryCase& c : unary_cases()) {
    if (!c.grad) continue;
    for (DType dt : float_dtypes()) {
      Host a = make(dt, {2, 3, 4}, c.fill, 4);
      Tensor x = upload(dev(), a);
      lt::set_requires_grad(x);
      lt::backward(c.op(x, std::source_location::current()).sum());
      expect_close(lt::grad(x), ref_unary(a, dt, c.grad), case_tol(c, dt),
                   std::string("d/dx ") + c.name + " " + lt::dtype_name(dt));
    }
  }
}

TEST_P(Elementwise, UnaryIntegerAndNaNCorners) {
  const double imin = std::numeric_limits<int32_t>::min();
  Host i = from_values(lt::i32, {3}, {imin, -7, 7});
  expect_close(lt::abs(upload(dev(), i)), from_values(lt::i32, {3}, {imin, 7, 7}),
               tol(OpClass::kExact, lt::i32), "abs(INT_MIN) stays INT_MIN");
  expect_close(lt::neg(upload(dev(), i)), from_values(lt::i32, {3}, {imin, 7, -7}),
               tol(OpClass::kExact, lt::i32), "neg wraps");
  for (DType dt : float_dtypes()) {
    Host f = from_values(dt, {4}, {kNaN, -kInf, kInf, -0.5});
    expect_close(lt::relu(upload(dev(), f)), from_values(dt, {4}, {kNaN, 0, kInf, 0}),
                 tol(OpClass::kExact, dt), "relu keeps NaN");
    expect_close(lt::log(upload(dev(), from_values(dt, {2}, {-1, 0}))),
                 from_values(dt, {2}, {kNaN, -kInf}), tol(OpClass::kTranscendent, dt),
                 "log of negative is NaN, log 0 is -inf");
  }
}

struct BinaryCase {
  const char* name;
  Tensor (*op)(const Tensor&, const Tensor&, std::source_location);
  std::vector<DType> dtypes;
  bool bool_out;
  Fill fill_a, fill_b;
  OpClass cls;
  double (*ref)(double, double);
};

double int_div(double x, double y) {
  return y == 0 ? 0.0 : std::trunc(x / y);
}

const std::vector<BinaryCase>& binary_cases() {
  static const std::vector<DType> cmp = {lt::f32, lt::f64, lt::i32, lt::i64, lt::bool_};
  static const std::vector<BinaryCase> cases = {
      {"add", lt::add, numeric_dtypes(), false, Fill::kAny, Fill::kAny, OpClass::kExact,
       [](double x, double y) { return x + y; }},
      {"sub", lt::sub, numeric_dtypes(), false, Fill::kAny, Fill::kAny, OpClass::kExact,
       [](double x, double y) { return x - y; }},
      {"mul", lt::mul, numeric_dtypes(), false, Fill::kAny, Fill::kAny, OpClass::kExact,
       [](double x, double y) { return x * y; }},
      {"div", lt::div, float_dtypes(), false, Fill::kAny, Fill::kNonZero, OpClass::kDiv,
       [](double x, double y) { return x / y; }},
      {"div(int)", lt::div, int_dtypes(), false, Fill::kAny, Fill::kAny, OpClass::kExact, int_div},
      {"pow", lt::pow, float_dtypes(), false, Fill::kPositive, Fill::kAny, OpClass::kTranscendent,
       [](double x, double y) { return std::pow(x, y); }},
      {"maximum", lt::maximum, numeric_dtypes(), false, Fill::kAny, Fill::kAny, OpClass::kExact,
       [](double x, double y) { return std::max(x, y); }},
      {"minimum", lt::minimum, numeric_dtypes(), false, Fill::kAny, Fill::kAny, OpClass::kExact,
       [](double x, double y) { return std::min(x, y); }},
      {"eq", lt::eq, cmp, true, Fill::kAny, Fill::kAny, OpClass::kExact,
       [](double x, double y) { return double(x == y); }},
      {"ne", lt::ne, cmp, true, Fill::kAny, Fill::kAny, OpClass::kExact,
       [](double x, double y) { return double(x != y); }},
      {"lt", lt::lt, cmp, true, Fill::kAny, Fill::kAny, OpClass::kExact,
       [](double x, double y) { return double(x < y); }},
      {"le", lt::le, cmp, true, Fill::kAny, Fill::kAny, OpClass::kExact,
       [](double x, double y) { return double(x <= y); }},
      {"gt", lt::gt, cmp, true, Fill::kAny, Fill::kAny, OpClass::kExact,
       [](double x, double y) { return double(x > y); }},
      {"ge", lt::ge, cmp, true, Fill::kAny, Fill::kAny, OpClass::kExact,
       [](double x, double y) { return double(x >= y); }},
      {"and",
       lt::and_,
       {lt::bool_},
       true,
       Fill::kAny,
       Fill::kAny,
       OpClass::kExact,
       [](double x, double y) { return double(x != 0 && y != 0); }},
      {"or",
       lt::or_,
       {lt::bool_},
       true,
       Fill::kAny,
       Fill::kAny,
       OpClass::kExact,
       [](double x, double y) { return double(x != 0 || y != 0); }},
  };
  return cases;
}

// Broadcasting corners: [3,1]x[1,4], [4]x[2,3,4], rank-0 with anything, zero-sized dims.
const std::vector<std::pair<Shape, Shape>>& binary_shapes() {
  static const std::vector<std::pair<Shape, Shape>> s = {
      {{5}, {5}},       {{3, 1}, {1, 4}}, {{4}, {2, 3, 4}}, {{2, 3, 4}, {4}},
      {{}, {2, 3}},     {{2, 3}, {}},     {{}, {}},         {{2, 1, 3}, {4, 1}},
      {{0, 3}, {1, 3}}, {{2, 0}, {2, 1}}, {{}, {0}},        {{1}, {2, 2}},
  };
  return s;
}

TEST_P(Elementwise, BinaryOpsBroadcastLikeNumPy) {
  for (const BinaryCase& c : binary_cases()) {
    for (DType dt : c.dtypes) {
      DType out = c.bool_out ? lt::bool_ : dt;
      for (const auto& [sa, sb] : binary_shapes()) {
        Host a = make(dt, sa, c.fill_a, 4), b = make(dt, sb, c.fill_b, 5);
        std::string what =
            std::string(c.name) + " " + lt::dtype_name(dt) + " " + str(sa) + " x " + str(sb);
        expect_close(c.op(upload(dev(), a), upload(dev(), b), std::source_location::current()),
                     ref_binary(a, b, out, c.ref), tol(c.cls, dt), what);
      }
      // Non-contiguous operands: a permuted [4,3] view with a reversed [3] slice.
      Host a = make(dt, {4, 3}, c.fill_a, 6), b = make(dt, {3}, c.fill_b, 7);
      expect_close(c.op(upload_permuted(dev(), a), upload_reversed(dev(), b),
                        std::source_location::current()),
                   ref_binary(a, b, out, c.ref), tol(c.cls, dt),
                   std::string(c.name) + " non-contiguous " + lt::dtype_name(dt));
    }
  }
}

TEST_P(Elementwise, IntegerDivisionAndWrapAroundCorners) {
  const double imin = std::numeric_limits<int32_t>::min();
  const double imax = std::numeric_limits<int32_t>::max();
  Host x = from_values(lt::i32, {6}, {7, -7, 7, -7, 5, imin});
  Host y = from_values(lt::i32, {6}, {2, 2, -2, -2, 0, -1});
  expect_close(upload(dev(), x) / upload(dev(), y),
               from_values(lt::i32, {6}, {3, -3, -3, 3, 0, imin}), tol(OpClass::kExact, lt::i32),
               "i32 div truncates toward zero, x/0 = 0, INT_MIN/-1 = INT_MIN");
  Host big = from_values(lt::i32, {2}, {imax, imin});
  Host one = from_values(lt::i32, {2}, {1, 1});
  expect_close(upload(dev(), big) + upload(dev(), one), from_values(lt::i32, {2}, {imin, imin + 1}),
               tol(OpClass::kExact, lt::i32), "i32 add wraps");
  expect_close(upload(dev(), big) - upload(dev(), one).neg().neg(),
               from_values(lt::i32, {2}, {imax - 1, imax}), tol(OpClass::kExact, lt::i32),
               "i32 sub wraps");
  Host x64 = from_values(lt::i64, {3}, {9, -9, 4});
  Host y64 = from_values(lt::i64, {3}, {4, 4, 0});
  expect_close(upload(dev(), x64) / upload(dev(), y64), from_values(lt::i64, {3}, {2, -2, 0}),
               tol(OpClass::kExact, lt::i64), "i64 div");
}

TEST_P(Elementwise, NaNPropagatesThroughMaximumAndComparisons) {
  for (DType dt : float_dtypes()) {
    Host a = from_values(dt, {3}, {kNaN, 1, kNaN});
    Host b = from_values(dt, {3}, {1, kNaN, kNaN});
    Tensor ta = upload(dev(), a), tb = upload(dev(), b);
    Host nan3 = from_values(dt, {3}, {kNaN, kNaN, kNaN});
    expect_close(lt::maximum(ta, tb), nan3, tol(OpClass::kExact, dt), "maximum NaN");
    expect_close(lt::minimum(ta, tb), nan3, tol(OpClass::kExact, dt), "minimum NaN");
    Host f3 = from_values(lt::bool_, {3}, {0, 0, 0}), t3 = from_values(lt::bool_, {3}, {1, 1, 1});
    expect_close(ta == tb, f3, {}, "eq NaN");
    expect_close(ta != tb, t3, {}, "ne NaN");
    expect_close(ta < tb, f3, {}, "lt NaN");
    expect_close(ta <= tb, f3, {}, "le NaN");
    expect_close(ta > tb, f3, {}, "gt NaN");
    expect_close(ta >= tb, f3, {}, "ge NaN");
  }
}

TEST_P(Elementwise, MixedDtypesPromote) {
  struct Case {
    DType a, b, out;
  };
  for (Case c : {Case{lt::i32, lt::f32, lt::f32}, Case{lt::bool_, lt::i32, lt::i32},
                 Case{lt::i64, lt::f64, lt::f64}, Case{lt::i32, lt::i64, lt::i64},
                 Case{lt::f32, lt::f64, lt::f64}, Case{lt::bool_, lt::f32, lt::f32}}) {
    Host a = make(c.a, {2, 3}, Fill::kAny, 8), b = make(c.b, {3}, Fill::kAny, 9);
    std::string what =
        std::string("add ") + lt::dtype_name(c.a) + " + " + lt::dtype_name(c.b) + " promotes";
    expect_close(upload(dev(), a) + upload(dev(), b),
                 ref_binary(a, b, c.out, [](double x, double y) { return x + y; }),
                 tol(OpClass::kExact, c.out), what);
  }
}

TEST_P(Elementwise, ScalarOperandsTakeTheTensorDtype) {
  Host f = make(lt::f32, {2, 3}, Fill::kNonZero, 10);
  Tensor t = upload(dev(), f);
  Tol tf = tol(OpClass::kDiv, lt::f32);
  expect_close(t + 2.5, ref_unary(f, lt::f32, [](double x) { return x + 2.5; }), tf, "t + 2.5");
  expect_close(2.5 - t, ref_unary(f, lt::f32, [](double x) { return 2.5 - x; }), tf, "2.5 - t");
  expect_close(t * -3.0, ref_unary(f, lt::f32, [](double x) { return x * -3.0; }), tf, "t * -3");
  expect_close(1.0 / t, ref_unary(f, lt::f32, [](double x) { return float(1.0) / float(x); }), tf,
               "1 / t");
  expect_close(-t, ref_unary(f, lt::f32, [](double x) { return -x; }), tf, "-t");
  expect_close(t > 0.0, ref_unary(f, lt::bool_, [](double x) { return double(x > 0); }), {},
               "t > 0");
  Host i = make(lt::i32, {4}, Fill::kAny, 11);
  expect_close(upload(dev(), i) * 2.0, ref_unary(i, lt::i32, [](double x) { return x * 2; }), {},
               "i32 * 2 stays i32");
}

TEST_P(Elementwise, WhereBroadcastsAllThreeOperands) {
  for (DType dt : {lt::f32, lt::f64, lt::i32, lt::i64, lt::bool_}) {
    for (auto [sc, sa, sb] :
         std::vector<std::tuple<Shape, Shape, Shape>>{{{3, 1}, {1, 4}, {}},
                                                      {{}, {2, 3}, {3}},
                                                      {{2, 3}, {2, 3}, {2, 3}},
                                                      {{0, 2}, {2}, {1}},
                                                      {{4}, {2, 1, 4}, {3, 1}},
                                                      // the kernels' contiguous fast paths,
                                                      // vector tails included: one scalar
                                                      // operand (relu's gradient), or none
                                                      {{3, 37}, {3, 37}, {}},
                                                      {{3, 37}, {}, {3, 37}},
                                                      {{67}, {67}, {67}}}) {
      Host c = make(lt::bool_, sc, Fill::kAny, 12), a = make(dt, sa, Fill::kAny, 13),
           b = make(dt, sb, Fill::kAny, 14);
      Shape out = broadcast_shapes(broadcast_shapes(sc, sa), sb);
      Host want{dt, out, {}};
      for (const Shape& idx : all_indices(out)) {
        bool cond = c.v[size_t(broadcast_flat(idx, sc))] != 0;
        want.v.push_back(cond ? a.v[size_t(broadcast_flat(idx, sa))]
                              : b.v[size_t(broadcast_flat(idx, sb))]);
      }
      expect_close(lt::where(upload(dev(), c), upload(dev(), a), upload(dev(), b)), want,
                   tol(OpClass::kExact, dt),
                   std::string("where ") + lt::dtype_name(dt) + str(sc) + str(sa) + str(sb));
    }
  }
}

double cast_ref(DType from, DType to, double x) {
  (void)from;
  if (to == lt::bool_) return x != 0 || std::isnan(x) ? 1.0 : 0.0;
  if (to == lt::i32 || to == lt::i64) {
    if (std::isnan(x)) return 0;
    double lo = to == lt::i32 ? -2147483648.0 : -9223372036854775808.0;
    double hi = to == lt::i32 ? 2147483647.0 : 9223372036854775807.0;
    x = std::trunc(x);
    return std::min(std::max(x, lo), hi);
  }
  return x;
}

TEST_P(Elementwise, CastTruncatesSaturatesAndMapsNaN) {
  const std::vector<DType> all = {lt::f32, lt::f64, lt::i32, lt::i64, lt::bool_};
  for (DType from : all) {
    Host a;
    if (is_float(from)) {
      a = from_values(from, {9}, {-2.7, -0.5, 0, 0.5, 2.7, 1e10, -1e10, kNaN, 0.1});
    } else if (from == lt::bool_) {
      a = from_values(from, {4}, {0, 1, 1, 0});
    } else {
      a = from_values(from, {5}, {-5, 0, 7, 2147483647, -2147483648.0});
    }
    for (DType to : all) {
      Host want{to, a.shape, {}};
      for (double x : a.v) {
        double r = cast_ref(from, to, x);
        want.v.push_back(to == lt::i64 && std::abs(r) >= 9.2e18 ? r : round_to(to, r));
      }
      expect_close(upload(dev(), a).cast(to), want, tol(OpClass::kExact, to),
                   std::string("cast ") + lt::dtype_name(from) + " -> " + lt::dtype_name(to));
    }
  }
  // f64 -> f32 rounds to nearest.
  Host d = from_values(lt::f64, {2}, {1.0 + 1e-9, 0.1});
  expect_close(upload(dev(), d).cast(lt::f32), from_values(lt::f32, {2}, {1.0, 0.1}), {0, 0},
               "f64 -> f32 rounds to nearest");
}

}  // namespace
}  // namespace ltc

namespace ltc {
namespace {

// bf16 and f16 are storage types: a backend either refuses them with a clear error (the test
// then skips, naming the backend) or stores them with round-to-nearest-even.
TEST_P(Elementwise, StorageDtypesRoundTripWithRoundToNearestEven) {
  struct Case {
    lt::DType dt;
    std::vector<double> in, out;
  };
  const std::vector<Case> cases = {
      {lt::bf16,
       {1.5, -2.25, 0.09375, 100, 1.00390625, 1.01171875},
       {1.5, -2.25, 0.09375, 100, 1.0, 1.015625}},
      {lt::f16,
       {1.5, -2.25, 0.09375, 100, 1.00048828125, 1.00146484375},
       {1.5, -2.25, 0.09375, 100, 1.0, 1.001953125}},
  };
  for (const Case& c : cases) {
    Host in = from_values(lt::f32, {6}, c.in);
    lt::Tensor stored;
    try {
      stored = upload(dev(), in).cast(c.dt);
      stored.materialize();
    } catch (const lt::Error& e) {
      EXPECT_TRUE(e.code() == LT_STATUS_UNSUPPORTED || e.code() == LT_STATUS_DTYPE_MISMATCH ||
                  e.code() == LT_STATUS_FALLBACK_REFUSED)
          << e.what();
      std::cout << "[ INFO     ] " << backend() << " does not store " << lt::dtype_name(c.dt)
                << ": " << e.what() << "\n";
      continue;
    }
    EXPECT_EQ(stored.dtype(), c.dt);
    expect_close(stored.cast(lt::f32), from_values(lt::f32, {6}, c.out), {0, 0},
                 std::string("f32 -> ") + lt::dtype_name(c.dt) + " -> f32");
  }
}

}  // namespace
}  // namespace ltc
