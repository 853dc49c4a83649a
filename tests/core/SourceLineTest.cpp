// SourceLineTest.cpp — messages name the line of the user's program that traced a node (issue
// #28): a recompile reason names where the changed input was first used, a fallback warning
// where the node that fell back was traced (LT_AT records the caller's file and line in C).
#include <string>

#include "test_util.h"

namespace {

using namespace lt_test;

int g_mul_line = 0;

// y = x * 2 over an input named "x" of `rows` rows; the mul is traced with its line.
void scaled(lt_device* d, int64_t rows) {
  std::vector<float> v(static_cast<size_t>(rows * 4), 1.0f);
  lt_tensor* x = from_host(d, v, {rows, 4});
  LT_OK(lt_tensor_set_name(x, "x"));
  lt_tensor *two = nullptr, *y = nullptr;
  LT_OK(lt_scalar(d, LT_DTYPE_F32, 2.0, &two));
  g_mul_line = __LINE__ + 1;
  LT_OK(LT_AT(lt_mul(x, two, &y)));
  EXPECT_EQ(to_host(y), std::vector<float>(v.size(), 2.0f));
  for (auto* t : {x, two, y}) lt_tensor_free(t);
}

TEST(SourceLine, RecompileReasonNamesWhereTheChangedInputWasUsed) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  scaled(d, 32);
  scaled(d, 24);
  EXPECT_EQ(last_reason(h.rt), "input 0 'x' dim 0: 32 -> 24, first used at SourceLineTest.cpp:" +
                                   std::to_string(g_mul_line));
}

#ifdef LT_TEST_HAVE_CPU_EAGER
TEST(SourceLine, FallbackWarningNamesTheTracedLine) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial", "warn")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  lt_tensor* a = from_host(d, {0.5f, 1, 2, 3}, {4});
  lt_tensor* e = nullptr;
  ::testing::internal::CaptureStderr();
  const int line = __LINE__ + 1;
  LT_OK(LT_AT(lt_exp(a, &e)));  // the partial test backend declines exp: cpu_eager runs it
  std::vector<float> v = to_host(e);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NEAR(v[1], 2.7182818f, 1e-5);
  EXPECT_NE(err.find("op 'exp'"), std::string::npos) << err;
  EXPECT_NE(err.find("traced at SourceLineTest.cpp:" + std::to_string(line)), std::string::npos)
      << err;
  lt_tensor_free(a);
  lt_tensor_free(e);
}
#endif

}  // namespace
