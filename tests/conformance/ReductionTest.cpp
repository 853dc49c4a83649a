// ReductionTest.cpp — conformance of sum, mean, max, min and argmax over every axis subset of a
// rank-3 tensor, with and without keepdims, negative axes, empty and non-contiguous inputs.
#include "conformance.h"

#include <limits>

namespace ltc {
namespace {

using lt::DType;
using lt::Tensor;

class Reduction : public ConformanceTest {};
LT_CONFORMANCE_SUITE(Reduction);

const double kNaN = std::numeric_limits<double>::quiet_NaN();

enum class Red { kSum, kMean, kMax, kMin };

// Plain-loop reduction of `a` over sorted non-negative `axes` (empty = all axes).
Host ref_reduce(const Host& a, Shape axes, bool keepdims, Red red) {
  size_t r = a.shape.size();
  if (axes.empty()) {
    for (size_t d = 0; d < r; ++d) axes.push_back(int64_t(d));
  }
  std::vector<bool> reduced(r, false);
  for (int64_t ax : axes) reduced[size_t(ax)] = true;
  Shape kept;  // the output shape with keepdims (reduced dims are 1)
  for (size_t d = 0; d < r; ++d) kept.push_back(reduced[d] ? 1 : a.shape[d]);
  int64_t n_out = numel_of(kept);
  int64_t count = numel_of(a.shape) / std::max<int64_t>(n_out, 1);
  if (numel_of(a.shape) == 0) {
    count = 1;
    for (size_t d = 0; d < r; ++d) count *= reduced[d] ? a.shape[d] : 1;
  }
  std::vector<double> acc(size_t(n_out), red == Red::kMax   ? -INFINITY
                                         : red == Red::kMin ? INFINITY
                                                            : 0.0);
  auto st = strides_of(kept);
  size_t k = 0;
  for (const Shape& idx : all_indices(a.shape)) {
    int64_t o = 0;
    for (size_t d = 0; d < r; ++d) o += (reduced[d] ? 0 : idx[d]) * st[d];
    double x = a.v[k++];
    double& y = acc[size_t(o)];
    if (red == Red::kSum || red == Red::kMean)
      y += x;
    else if (std::isnan(x) || std::isnan(y))
      y = kNaN;
    else
      y = red == Red::kMax ? std::max(x, y) : std::min(x, y);
  }
  if (red == Red::kMean) {
    for (double& y : acc) y = count == 0 ? kNaN : y / double(count);
  }
  Shape out;
  for (size_t d = 0; d < r; ++d) {
    if (!reduced[d])
      out.push_back(a.shape[d]);
    else if (keepdims)
      out.push_back(1);
  }
  Host h{a.dtype, out, acc};
  for (double& y : h.v) y = round_to(a.dtype, y);
  return h;
}

Host ref_argmax(const Host& a, int64_t axis, bool keepdims) {
  Shape out = a.shape;
  out[size_t(axis)] = 1;
  Host h{lt::i64, out, {}};
  for (Shape idx : all_indices(out)) {
    int64_t best = 0;
    double bv = 0;
    for (int64_t i = 0; i < a.shape[size_t(axis)]; ++i) {
      idx[size_t(axis)] = i;
      double x = a.at(idx);
      if (i == 0 || (!std::isnan(bv) && (std::isnan(x) || x > bv))) {
        best = i;
        bv = x;
      }
    }
    h.v.push_back(double(best));
  }
  if (!keepdims) h.shape.erase(h.shape.begin() + axis);
  return h;
}

struct RedCase {
  const char* name;
  Red red;
  Tensor (*op)(const Tensor&, lt::IntList, bool);
  std::vector<DType> dtypes;
};

const std::vector<RedCase>& red_cases() {
  static const std::vector<RedCase> c = {
      {"sum", Red::kSum, lt::sum, numeric_dtypes()},
      {"mean", Red::kMean, lt::mean, float_dtypes()},
      {"max", Red::kMax, lt::max, numeric_dtypes()},
      {"min", Red::kMin, lt::min, numeric_dtypes()},
  };
  return c;
}

TEST_P(Reduction, EveryAxisSubsetOfRank3WithAndWithoutKeepdims) {
  const std::vector<Shape> subsets = {{}, {0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {0, 1, 2}};
  for (const RedCase& c : red_cases()) {
    for (DType dt : c.dtypes) {
      Host a = make(dt, {2, 3, 4}, Fill::kAny, 20);
      Tensor ta = upload(dev(), a);
      Tensor tp = upload_permuted(dev(), a);
      OpClass cls = c.red == Red::kSum || c.red == Red::kMean ? OpClass::kReduce : OpClass::kExact;
      for (const Shape& axes : subsets) {
        for (bool keep : {false, true}) {
          std::string what = std::string(c.name) + " " + lt::dtype_name(dt) + " axes " + str(axes) +
                             (keep ? " keepdims" : "");
          Host want = ref_reduce(a, axes, keep, c.red);
          expect_close(c.op(ta, axes, keep), want, tol(cls, dt), what);
          expect_close(c.op(tp, axes, keep), want, tol(cls, dt), what + " (permuted input)");
        }
      }
      // Negative axes count from the end.
      expect_close(c.op(ta, {-1}, false), ref_reduce(a, {2}, false, c.red), tol(cls, dt),
                   std::string(c.name) + " axis -1");
      expect_close(c.op(ta, {-3, -1}, true), ref_reduce(a, {0, 2}, true, c.red), tol(cls, dt),
                   std::string(c.name) + " axes -3,-1 keepdims");
      // Rank 0 and a reversed slice.
      Host s = make(dt, {}, Fill::kAny, 21);
      expect_close(c.op(upload(dev(), s), {}, false), s, tol(cls, dt),
                   std::string(c.name) + " of rank 0");
      Host r = make(dt, {5, 3}, Fill::kAny, 22);
      expect_close(c.op(upload_reversed(dev(), r), {0}, false), ref_reduce(r, {0}, false, c.red),
                   tol(cls, dt), std::string(c.name) + " of a reversed slice");
    }
  }
}

TEST_P(Reduction, EmptyInputs) {
  for (DType dt : numeric_dtypes()) {
    Host a = make(dt, {0, 3}, Fill::kAny, 23);
    expect_close(lt::sum(upload(dev(), a), {0}), from_values(dt, {3}, {0, 0, 0}),
                 tol(OpClass::kReduce, dt),
                 std::string("sum over empty axis ") + lt::dtype_name(dt));
    expect_close(lt::sum(upload(dev(), a), {1}), from_values(dt, {0}, {}),
                 tol(OpClass::kReduce, dt), "sum keeping the empty axis");
  }
  for (DType dt : float_dtypes()) {
    Host a = make(dt, {0, 2}, Fill::kAny, 24);
    expect_close(lt::mean(upload(dev(), a), {0}), from_values(dt, {2}, {kNaN, kNaN}),
                 tol(OpClass::kReduce, dt), "mean over empty axis is NaN");
  }
  Tensor e = upload(dev(), make(lt::f32, {0, 3}));
  expect_error([&] { lt::max(e, {0}).materialize(); }, LT_STATUS_OK, {"max"});
  expect_error([&] { lt::argmax(e, 0).materialize(); }, LT_STATUS_OK, {"argmax"});
}

TEST_P(Reduction, NaNPropagatesThroughMaxAndMin) {
  for (DType dt : float_dtypes()) {
    Host a = from_values(dt, {2, 3}, {1, kNaN, 3, 4, 5, 6});
    expect_close(lt::max(upload(dev(), a), {1}), from_values(dt, {2}, {kNaN, 6}),
                 tol(OpClass::kExact, dt), "max with NaN");
    expect_close(lt::min(upload(dev(), a), {1}), from_values(dt, {2}, {kNaN, 4}),
                 tol(OpClass::kExact, dt), "min with NaN");
  }
}

TEST_P(Reduction, ArgmaxEveryAxisFirstMaximumAndNaN) {
  for (DType dt : numeric_dtypes()) {
    Host a = make(dt, {2, 3, 4}, Fill::kAny, 25);
    Tensor ta = upload(dev(), a), tp = upload_permuted(dev(), a);
    for (int64_t axis = 0; axis < 3; ++axis) {
      for (bool keep : {false, true}) {
        std::string what = std::string("argmax ") + lt::dtype_name(dt) + " axis " +
                           std::to_string(axis) + (keep ? " keepdims" : "");
        Host want = ref_argmax(a, axis, keep);
        expect_close(lt::argmax(ta, axis, keep), want, {}, what);
        expect_close(lt::argmax(tp, axis, keep), want, {}, what + " (permuted input)");
      }
    }
    expect_close(lt::argmax(ta, -1), ref_argmax(a, 2, false), {}, "argmax axis -1");
  }
  Host ties = from_values(lt::i32, {2, 4}, {1, 5, 5, 2, 7, 7, 7, 7});
  expect_close(lt::argmax(upload(dev(), ties), 1), from_values(lt::i64, {2}, {1, 0}), {},
               "argmax returns the first maximum");
  Host nan = from_values(lt::f32, {4}, {1, kNaN, 9, kNaN});
  expect_close(lt::argmax(upload(dev(), nan), 0), from_values(lt::i64, {}, {1}), {},
               "argmax: the first NaN counts as the maximum");
}

}  // namespace
}  // namespace ltc
