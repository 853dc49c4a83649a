// FallbackTest.cpp — partitioning: nodes the target ("partial") declines run on cpu_eager
// under the fallback policy, are counted per op, and give correct results.
#include "test_util.h"

#include <cmath>

using namespace lt_test;

#ifdef LT_TEST_HAVE_CPU_EAGER

TEST(Partitioner, SendsUnsupportedOpToFallbackAndCountsIt) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial", "silent")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  lt_tensor* a = from_host(d, {-1, 0.5f, 2, -3}, {2, 2});
  lt_tensor *x = nullptr, *e = nullptr, *y = nullptr, *s = nullptr;
  LT_OK(lt_relu(a, &x));    // partial
  LT_OK(lt_exp(x, &e));     // fallback
  LT_OK(lt_add(e, a, &y));  // partial again, consuming a fallback value
  int64_t ax = 1;
  LT_OK(lt_sum(y, &ax, 1, 0, &s));  // fallback
  auto v = to_host(s);
  ASSERT_EQ(v.size(), 2u);
  float r0 = (1 + -1) + (std::exp(0.5f) + 0.5f), r1 = (std::exp(2.f) + 2) + (1 - 3);
  EXPECT_NEAR(v[0], r0, 1e-5);
  EXPECT_NEAR(v[1], r1, 1e-5);
  EXPECT_EQ(metric(h.rt, "fallback.exp"), 1);
  EXPECT_EQ(metric(h.rt, "fallback.sum"), 1);
  EXPECT_EQ(metric(h.rt, "fallback.add"), -1);  // never fell back: metric absent
  EXPECT_GT(metric(h.rt, "bytes_between_backends"), 0);
  EXPECT_EQ(metric(h.rt, "plugin.partial.kernels") >= 1, true);
  for (auto* t : {a, x, e, y, s}) lt_tensor_free(t);
}

TEST(Partitioner, ErrorPolicyRefusesNamingOpAndBackend) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial", "error")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  lt_tensor* a = from_host(d, {1, 2}, {2});
  lt_tensor* g = nullptr;
  LT_OK(lt_gelu(a, &g));
  std::vector<float> out(2);
  Err e(lt_tensor_to_host(g, out.data(), 8));
  EXPECT_EQ(e.code(), LT_STATUS_FALLBACK_REFUSED);
  EXPECT_NE(e.msg().find("gelu"), std::string::npos) << e.msg();
  EXPECT_NE(e.msg().find("partial"), std::string::npos) << e.msg();
  // Supported work still runs under the same policy.
  lt_tensor* m = nullptr;
  LT_OK(lt_mul(a, a, &m));
  EXPECT_EQ(to_host(m), (std::vector<float>{1, 4}));
  for (auto* t : {a, g, m}) lt_tensor_free(t);
}

TEST(Partitioner, FailedCompileRunsRegionOnFallback) {
  // A config file passes plugin option fail_compile=1 to "partial".
  std::string cfg = ::testing::TempDir() + "/lt_fail_compile.toml";
  FILE* f = fopen(cfg.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fprintf(f, "[plugins.partial]\nfail_compile = 1\n");
  fclose(f);
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial", "silent", cfg.c_str())};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  lt_tensor* a = from_host(d, {1, 2}, {2});
  lt_tensor* m = nullptr;
  LT_OK(lt_mul(a, a, &m));
  EXPECT_EQ(to_host(m), (std::vector<float>{1, 4}));
  EXPECT_EQ(metric(h.rt, "compile_failures"), 1);
  EXPECT_EQ(metric(h.rt, "fallback.mul"), 1);
  for (auto* t : {a, m}) lt_tensor_free(t);
}

TEST(Partitioner, CpuEagerIsTheDefaultWithoutOtherBackends) {
  RuntimeHandle h{make_runtime("", "cpu_eager")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  EXPECT_STREQ(lt_device_backend(d), "cpu_eager");
  lt_tensor* a = from_host(d, {1, 4, 9}, {3});
  lt_tensor* s = nullptr;
  LT_OK(lt_sqrt(a, &s));
  EXPECT_EQ(to_host(s), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(metric(h.rt, "fallback_nodes"), 0);
  for (auto* t : {a, s}) lt_tensor_free(t);
}

#else
TEST(Partitioner, NeedsCpuEager) {
  GTEST_SKIP() << "cpu_eager plugin not built";
}
#endif
