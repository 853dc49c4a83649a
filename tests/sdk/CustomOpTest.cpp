// CustomOpTest.cpp — run-time custom ops (lt_register_custom_op / lt::register_custom_op): used
// in graphs with built-in ops on cpu_eager and cpu_jit (the core runs the CPU kernel, counted as
// fallback), inference errors, kernel errors, registration errors and the custom gradient.
#include <gtest/gtest.h>

#include <lazytensor/custom_op.hpp>
#include <lazytensor/lazytensor.hpp>

#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

// square_plus(x; alpha) = x*x + alpha, f32/f64; gradient 2x * g.
// pair_mul(a, b) = a*b for equal shapes only (no broadcasting: an inference error instead).
// fails_at_run(x): inference accepts, the kernel always fails.
void register_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    lt::CustomOpDef sq;
    sq.name = "sdk_test.square_plus";
    sq.attr_names = {"alpha"};
    sq.infer = [](const std::vector<lt::TensorSpec>& in, const lt::CustomAttrs&) {
      if (in[0].dtype != lt::f32 && in[0].dtype != lt::f64)
        throw lt::Error(LT_STATUS_DTYPE_MISMATCH,
                        std::string("expects f32 or f64, got ") + lt::dtype_name(in[0].dtype));
      return in[0];
    };
    sq.cpu_kernel = [](const std::vector<lt::HostInput>& in, const lt::HostOutput& out,
                       const lt::CustomAttrs& attrs) {
      double alpha = attrs.get_float("alpha", 0.0);
      if (in[0].dtype == lt::f32) {
        auto x = in[0].as<float>();
        auto y = out.as<float>();
        for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * x[i] + static_cast<float>(alpha);
      } else {
        auto x = in[0].as<double>();
        auto y = out.as<double>();
        for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * x[i] + alpha;
      }
    };
    sq.grad = [](const std::vector<lt::Tensor>& in, const lt::Tensor&, const lt::Tensor& g,
                 const lt::CustomAttrs&) { return std::vector<lt::Tensor>{in[0] * 2.0 * g}; };
    lt::register_custom_op(sq);

    lt::CustomOpDef pm;
    pm.name = "sdk_test.pair_mul";
    pm.min_inputs = pm.max_inputs = 2;
    pm.infer = [](const std::vector<lt::TensorSpec>& in, const lt::CustomAttrs&) {
      if (in[0].shape != in[1].shape || in[0].dtype != in[1].dtype)
        throw lt::Error(LT_STATUS_SHAPE_MISMATCH, "operands must have equal shapes, got rank " +
                                                      std::to_string(in[0].shape.size()) +
                                                      " and rank " +
                                                      std::to_string(in[1].shape.size()));
      return in[0];
    };
    pm.cpu_kernel = [](const std::vector<lt::HostInput>& in, const lt::HostOutput& out,
                       const lt::CustomAttrs&) {
      auto a = in[0].as<float>(), b = in[1].as<float>();
      auto y = out.as<float>();
      for (size_t i = 0; i < y.size(); ++i) y[i] = a[i] * b[i];
    };
    lt::register_custom_op(pm);  // no gradient

    lt::CustomOpDef bad;
    bad.name = "sdk_test.fails_at_run";
    bad.infer = [](const std::vector<lt::TensorSpec>& in, const lt::CustomAttrs&) { return in[0]; };
    bad.cpu_kernel = [](const std::vector<lt::HostInput>&, const lt::HostOutput&,
                        const lt::CustomAttrs&) { throw std::runtime_error("kernel exploded"); };
    lt::register_custom_op(bad);
  });
}

lt::Runtime& runtime() {
  return lt::test::runtime(lt::test::with_fallback("silent"));
}

class CustomOp : public lt::test::BackendTest {
 protected:
  CustomOp() : BackendTest(lt::test::with_fallback("silent")) {}
  void SetUp() override {
    register_ops();
    BackendTest::SetUp();
  }
};

std::vector<float> values(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.1f * static_cast<float>(i) - 0.7f;
  return v;
}

TEST_P(CustomOp, MixesWithBuiltinOpsInOneGraph) {
  std::vector<float> xv = values(12);
  lt::Tensor x = lt::Tensor::from(dev_, xv, {3, 4});
  // 0 until the op first falls back
  double before = lt::test::metric_or_zero(runtime(), "fallback.sdk_test.square_plus");
  // exp(square_plus(x, 0.5)) + x, then pair_mul with x: built-ins before and after the custom
  // nodes, so the graph is split into backend / host / backend regions.
  lt::Tensor s = lt::apply("sdk_test.square_plus", {x}, {lt::Attr::Float("alpha", 0.5)});
  lt::Tensor y = lt::apply("sdk_test.pair_mul", {lt::exp(s) + x, x});
  std::vector<float> got = y.to_vector<float>();
  ASSERT_EQ(got.size(), xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    float want = (std::exp(xv[i] * xv[i] + 0.5f) + xv[i]) * xv[i];
    EXPECT_NEAR(got[i], want, 1e-5f * (1 + std::fabs(want))) << i;
  }
  EXPECT_EQ(y.dtype(), lt::f32);
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{3, 4}));
  double after = runtime().metric("fallback.sdk_test.square_plus");
  EXPECT_EQ(after, before + 1) << "no backend claims it: the core ran its CPU kernel";
  // Same graph again: a compile-cache hit, same values.
  double hits = runtime().metric("cache_hits");
  lt::Tensor y2 = lt::apply(
      "sdk_test.pair_mul",
      {lt::exp(lt::apply("sdk_test.square_plus", {x}, {lt::Attr::Float("alpha", 0.5)})) + x, x});
  EXPECT_EQ(y2.to_vector<float>(), got);
  EXPECT_EQ(runtime().metric("cache_hits"), hits + 1);
}

TEST_P(CustomOp, InferenceErrorsNameTheOpAndKeepTheirCode) {
  lt::Tensor a = lt::Tensor::from(dev_, values(6), {2, 3});
  lt::Tensor b = lt::Tensor::from(dev_, values(4), {4});
  try {
    lt::apply("sdk_test.pair_mul", {a, b});
    FAIL() << "expected a shape error";
  } catch (const lt::Error& e) {
    EXPECT_EQ(e.code(), LT_STATUS_SHAPE_MISMATCH);
    EXPECT_NE(std::string(e.what()).find("sdk_test.pair_mul"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 2 and rank 1"), std::string::npos) << e.what();
  }
  lt::Tensor i = lt::Tensor::from(dev_, std::vector<int32_t>{1, 2, 3}, {3});
  try {
    lt::apply("sdk_test.square_plus", {i});
    FAIL() << "expected a dtype error";
  } catch (const lt::Error& e) {
    EXPECT_EQ(e.code(), LT_STATUS_DTYPE_MISMATCH);
    EXPECT_NE(std::string(e.what()).find("got i32"), std::string::npos) << e.what();
  }
  try {
    lt::apply("sdk_test.square_plus", {a}, {lt::Attr::Float("beta", 1)});
    FAIL() << "expected an attribute error";
  } catch (const lt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown attribute 'beta'"), std::string::npos);
  }
}

TEST_P(CustomOp, KernelFailureIsAnErrorNotACrash) {
  lt::Tensor a = lt::Tensor::from(dev_, values(6), {2, 3});
  lt::Tensor y = lt::apply("sdk_test.fails_at_run", {a + a});
  try {
    y.to_vector<float>();
    FAIL() << "expected the kernel's error";
  } catch (const lt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("sdk_test.fails_at_run: kernel exploded"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ((a * a).to_vector<float>().size(), 6u) << "the runtime still works";
}

TEST_P(CustomOp, GradientFlowsThroughTheCustomRule) {
  std::vector<float> xv = values(5);
  lt::Tensor x = lt::Tensor::from(dev_, xv, {5});
  ASSERT_EQ(lt_tensor_set_requires_grad(x.get(), 1), nullptr);
  lt::Tensor s = lt::apply("sdk_test.square_plus", {x}, {lt::Attr::Float("alpha", 3)});
  lt::Tensor loss = lt::sum(s * 3.0);
  lt::check(lt_backward(loss.get(), nullptr));
  lt_tensor* g = nullptr;
  lt::check(lt_tensor_grad(x.get(), &g));
  ASSERT_NE(g, nullptr);
  std::vector<float> gv = lt::Tensor(g).to_vector<float>();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_NEAR(gv[i], 6 * xv[i], 1e-5) << i;

  // An op registered without a gradient: backward names it.
  lt::Tensor p = lt::apply("sdk_test.pair_mul", {x, x});
  lt_error* e = lt_backward(lt::sum(p).get(), nullptr);
  ASSERT_NE(e, nullptr);
  std::string m = lt_error_message(e);
  lt_error_destroy(e);
  EXPECT_NE(m.find("sdk_test.pair_mul"), std::string::npos) << m;
}

#ifdef LT_CUSTOM_OP_BACKENDS
LT_INSTANTIATE_PER_BACKEND(CustomOp, (std::vector<std::string>{LT_CUSTOM_OP_BACKENDS}));
#endif

TEST(CustomOpRegistration, RejectsDuplicatesBuiltinNamesAndMissingCallbacks) {
  register_ops();
  auto infer = [](lt_custom_op_args*) { return LT_STATUS_OK; };
  lt_custom_op_def d{};
  d.struct_size = LT_CUSTOM_OP_DEF_STRUCT_SIZE;
  d.min_inputs = d.max_inputs = 1;
  d.infer = infer;
  d.cpu_kernel = infer;
  for (const char* name : {"add", "sdk_test.pair_mul", "Bad Name", ""}) {
    d.name = name;
    lt_error* e = lt_register_custom_op(&d);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(lt_error_code(e), LT_STATUS_INVALID_ARGUMENT);
    lt_error_destroy(e);
  }
  d.name = "sdk_test.no_kernel";
  d.cpu_kernel = nullptr;
  lt_error* e = lt_register_custom_op(&d);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(std::string(lt_error_message(e)).find("cpu_kernel"), std::string::npos);
  lt_error_destroy(e);
  e = lt_register_custom_op(nullptr);
  EXPECT_NE(e, nullptr);
  lt_error_destroy(e);
}

}  // namespace
