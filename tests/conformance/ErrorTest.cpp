// ErrorTest.cpp — invalid shapes, dtypes and attributes give an lt::Error naming the op and the
// offending shapes or dtypes, and never crash; the runtime stays usable afterwards.
#include "conformance.h"

namespace ltc {
namespace {

using lt::Tensor;

class Errors : public ConformanceTest {
 protected:
  Tensor f(const Shape& s) { return upload(dev(), make(lt::f32, s)); }
  Tensor of(lt::DType dt, const Shape& s) { return upload(dev(), make(dt, s)); }
};
LT_CONFORMANCE_SUITE(Errors);

TEST_P(Errors, ElementwiseShapesAndDtypes) {
  expect_error(
      [&] {
        lt::add(f({2, 3}), f({4}));
      },
      LT_STATUS_SHAPE_MISMATCH, {"add", "[2,3]", "[4]"});
  expect_error(
      [&] {
        lt::mul(f({3, 1}), f({2, 4}));
      },
      LT_STATUS_SHAPE_MISMATCH, {"mul", "[3,1]", "[2,4]"});
  expect_error([&] { lt::exp(of(lt::i32, {2})); }, LT_STATUS_DTYPE_MISMATCH, {"exp", "i32"});
  expect_error([&] { lt::logical_not(f({2})); }, LT_STATUS_DTYPE_MISMATCH, {"not", "f32"});
  expect_error([&] { lt::and_(f({2}), f({2})); }, LT_STATUS_DTYPE_MISMATCH, {"and", "f32"});
  expect_error([&] { lt::where(f({2}), f({2}), f({2})); }, LT_STATUS_DTYPE_MISMATCH,
               {"where", "f32"});
  expect_error([&] { lt::where(of(lt::bool_, {3}), f({2}), f({2})); }, LT_STATUS_SHAPE_MISMATCH,
               {"where", "[3]", "[2]"});
}

TEST_P(Errors, ReductionAndLayoutAttributes) {
  expect_error([&] { lt::sum(f({2, 3}), {2}); }, LT_STATUS_OK, {"sum", "2", "[2,3]"});
  expect_error(
      [&] {
        lt::mean(of(lt::i32, {2, 3}), {0});
      },
      LT_STATUS_DTYPE_MISMATCH, {"mean", "i32"});
  expect_error([&] { lt::argmax(f({2, 3}), 5); }, LT_STATUS_OK, {"argmax", "5"});
  expect_error(
      [&] {
        f({2, 3}).reshape({4, 2});
      },
      LT_STATUS_SHAPE_MISMATCH, {"reshape", "[2,3]", "[4,2]"});
  expect_error([&] { f({2, 3}).reshape({-1, -1}); }, LT_STATUS_OK, {"reshape"});
  expect_error([&] { f({2, 3}).permute({0, 0}); }, LT_STATUS_OK, {"permute"});
  expect_error([&] { f({2, 3}).permute({0}); }, LT_STATUS_OK, {"permute"});
  expect_error(
      [&] {
        f({2, 3}).broadcast_to({3, 3});
      },
      LT_STATUS_SHAPE_MISMATCH, {"broadcast_to", "[2,3]", "[3,3]"});
  expect_error([&] { f({4}).slice({0}, {4}, {0}); }, LT_STATUS_INVALID_ARGUMENT, {"slice", "step"});
  expect_error([&] { f({4, 2}).slice({0}, {4}, {1}); }, LT_STATUS_OK, {"slice"});
  expect_error(
      [&] {
        lt::concat({f({2, 3}), f({2, 4})}, 0);
      },
      LT_STATUS_SHAPE_MISMATCH, {"concat", "[2,3]", "[2,4]"});
  // Mixed dtypes are promoted (lt_apply's rule), not refused.
  EXPECT_EQ(lt::concat({f({2}), of(lt::i32, {2})}, 0).dtype(), lt::f32);
  expect_error([&] { lt::concat({}, 0); }, LT_STATUS_INVALID_ARGUMENT, {"concat"});
  expect_error([&] { f({2, 3}).pad({-1, 0}, {0, 0}); }, LT_STATUS_INVALID_ARGUMENT, {"pad"});
  expect_error([&] { lt::gather(f({3}), f({2}), 0); }, LT_STATUS_DTYPE_MISMATCH, {"gather", "f32"});
  expect_error([&] { lt::gather(f({3}), of(lt::i32, {2}), 1); }, LT_STATUS_OK, {"gather"});
  expect_error([&] { lt::scatter_add(f({3}), of(lt::i32, {2}), f({3}), 0); },
               LT_STATUS_SHAPE_MISMATCH, {"scatter_add", "[3]"});
}

TEST_P(Errors, MatmulConvAndPools) {
  expect_error(
      [&] {
        lt::matmul(f({2, 3}), f({4, 5}));
      },
      LT_STATUS_SHAPE_MISMATCH, {"matmul", "[2,3]", "[4,5]"});
  expect_error([&] { lt::matmul(f({}), f({3})); }, LT_STATUS_OK, {"matmul"});
  expect_error(
      [&] {
        lt::conv2d(f({1, 3, 5, 5}), f({2, 4, 3, 3}));
      },
      LT_STATUS_SHAPE_MISMATCH, {"conv2d", "3", "4"});
  expect_error([&] { lt::conv2d(f({1, 3, 5}), f({2, 3, 3, 3})); }, LT_STATUS_OK, {"conv2d"});
  expect_error(
      [&] {
        lt::conv2d(f({1, 4, 5, 5}), f({3, 2, 3, 3}), Tensor(), {1, 1}, {0, 0}, {1, 1}, 2);
      },
      LT_STATUS_OK, {"conv2d"});
  expect_error(
      [&] {
        lt::conv2d(f({1, 3, 5, 5}), f({2, 3, 3, 3}), f({3}));
      },
      LT_STATUS_OK, {"conv2d"});
  expect_error(
      [&] {
        lt::conv2d(f({1, 3, 5, 5}), f({2, 3, 3, 3}), Tensor(), {0, 1});
      },
      LT_STATUS_INVALID_ARGUMENT, {"conv2d"});
  expect_error([&] { lt::conv2d(f({1, 1, 2, 2}), f({1, 1, 3, 3})); }, LT_STATUS_OK, {"conv2d"});
  expect_error([&] { lt::max_pool2d(f({1, 1, 2, 2}), {3, 3}); }, LT_STATUS_OK, {"max_pool2d"});
  expect_error(
      [&] {
        lt::avg_pool2d(f({1, 1, 4, 4}), {2, 2}, {1, 1}, {2, 2});
      },
      LT_STATUS_OK, {"avg_pool2d"});
  expect_error([&] { lt::softmax(of(lt::i32, {3}), 0); }, LT_STATUS_DTYPE_MISMATCH,
               {"softmax", "i32"});
  expect_error([&] { lt::log_softmax(f({3}), 1); }, LT_STATUS_OK, {"log_softmax"});
}

TEST_P(Errors, CreationHostDataAndGenericApply) {
  expect_error([&] { lt::arange(dev(), 0, 1, 0); }, LT_STATUS_INVALID_ARGUMENT, {"arange"});
  expect_error([&] { lt::full(dev(), {-2, 3}, 1.0); }, LT_STATUS_OK, {"full"});
  expect_error([&] { lt::random_uniform(dev(), {3}, 1, 0, 1, lt::i32); }, LT_STATUS_DTYPE_MISMATCH,
               {"random_uniform", "i32"});
  std::vector<float> three = {1, 2, 3};
  expect_error(
      [&] {
        lt_tensor* out = nullptr;
        lt::check(lt_tensor_from_host(dev().get(), lt::f32, Shape{2, 2}.data(), 2, three.data(),
                                      three.size() * sizeof(float), &out));
      },
      LT_STATUS_OK, {"[2,2]"});
  expect_error([&] { f({3}).to_vector<int32_t>(); }, LT_STATUS_DTYPE_MISMATCH, {"f32", "i32"});
  expect_error([&] { f({3}).item<float>(); }, LT_STATUS_SHAPE_MISMATCH, {"item", "[3]"});
  expect_error([&] { lt::apply(dev(), "no_such_op", {f({2})}); }, LT_STATUS_UNKNOWN_OP,
               {"no_such_op"});
  expect_error([&] { lt::apply(dev(), "add", {f({2})}); }, LT_STATUS_OK, {"add"});
  expect_error([&] { lt::exp(Tensor()); }, LT_STATUS_INVALID_ARGUMENT, {"exp", "null"});
  // After all of that the runtime still computes.
  Host a = make(lt::f32, {3});
  expect_close(upload(dev(), a) + 1.0, ref_unary(a, lt::f32, [](double x) { return x + 1; }),
               tol(OpClass::kExact, lt::f32), "runtime usable after errors");
}

TEST_P(Errors, GenericApplyMatchesNamedOps) {
  Host a = make(lt::f32, {2, 3}, Fill::kAny, 70), b = make(lt::f32, {3}, Fill::kAny, 71);
  expect_close(lt::apply(dev(), "add", {upload(dev(), a), upload(dev(), b)}),
               ref_binary(a, b, lt::f32, [](double x, double y) { return x + y; }),
               tol(OpClass::kExact, lt::f32), "apply add");
}

}  // namespace
}  // namespace ltc
