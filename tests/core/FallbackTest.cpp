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

TEST(Partitioner, PromotionCastsRunAndSeedsDoNotRecompile) {
  RuntimeHandle h{make_runtime("", "cpu_eager")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  int32_t iv[3] = {1, 2, 3};
  int64_t s3[1] = {3};
  lt_tensor *i = nullptr, *f = from_host(d, {0.5f, 0.25f, 0.125f}, {3}), *sum = nullptr;
  LT_OK(lt_tensor_from_host(d, LT_DTYPE_I32, s3, 1, iv, sizeof iv, &i));
  LT_OK(lt_add(i, f, &sum));
  EXPECT_EQ(lt_tensor_dtype(sum), LT_DTYPE_F32);
  EXPECT_EQ(to_host(sum), (std::vector<float>{1.5f, 2.25f, 3.125f}));
  std::vector<float> first;
  for (uint64_t seed : {7u, 8u, 7u}) {
    lt_tensor* r = nullptr;
    int64_t shp[1] = {8};
    LT_OK(lt_random_uniform(d, shp, 1, seed, -1, 1, LT_DTYPE_F32, &r));
    auto v = to_host(r);
    for (float x : v) EXPECT_TRUE(x >= -1 && x < 1);
    if (first.empty())
      first = v;
    else if (seed == 7)
      EXPECT_EQ(v, first);
    else
      EXPECT_NE(v, first);
    lt_tensor_free(r);
  }
  EXPECT_EQ(metric(h.rt, "compiles"), 2);  // the add, and one random program for 3 seeds
  for (auto* t : {i, f, sum}) lt_tensor_free(t);
}

TEST(Partitioner, TensorMovesBetweenBackends) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  lt_device *p = lt_runtime_default_device(h.rt), *e = nullptr;
  LT_OK(lt_runtime_find_device(h.rt, "cpu_eager", &e));
  lt_tensor* a = from_host(p, {1, 2, 3}, {3});
  lt_tensor *m = nullptr, *moved = nullptr, *ex = nullptr;
  LT_OK(lt_mul(a, a, &m));
  LT_OK(lt_tensor_to_device(m, e, &moved));
  EXPECT_EQ(lt_tensor_device(moved), e);
  LT_OK(lt_exp(moved, &ex));
  auto v = to_host(ex);
  EXPECT_NEAR(v[2], std::exp(9.0f), 1e-2);
  EXPECT_EQ(metric(h.rt, "fallback_nodes"), 0);  // exp ran on its own device, not as fallback
  for (auto* t : {a, m, moved, ex}) lt_tensor_free(t);
}

#endif  // these tests exist only where cpu_eager is built (no test that only skips)
