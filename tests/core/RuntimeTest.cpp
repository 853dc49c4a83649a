// RuntimeTest.cpp — the vertical slice: runtime creation, plugin loading, tensors from host,
// lazy ops with shape inference, materialisation through a plugin, lt_tensor_to_host.
#include "test_util.h"

using namespace lt_test;

TEST(Runtime, CreatesDevicesFromTestPlugin) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  EXPECT_GE(lt_runtime_device_count(h.rt), 1u);
  lt_device* d = lt_runtime_default_device(h.rt);
  ASSERT_NE(d, nullptr);
  EXPECT_STREQ(lt_device_name(d), "partial:0");
  EXPECT_STREQ(lt_device_backend(d), "partial");
  EXPECT_EQ(lt_device_runtime(d), h.rt);
  lt_device* found = nullptr;
  LT_OK(lt_runtime_find_device(h.rt, "partial:0", &found));
  EXPECT_EQ(found, d);
  Err e(lt_runtime_find_device(h.rt, "nope:3", &found));
  EXPECT_EQ(e.code(), LT_STATUS_NOT_FOUND);
  EXPECT_NE(e.msg().find("nope:3"), std::string::npos);
}

TEST(Runtime, TracesLazilyAndMaterialisesOnRead) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  lt_tensor* a = from_host(d, {1, 2, 3, 4, 5, 6}, {2, 3});
  lt_tensor* b = from_host(d, {10, 20, 30}, {3});
  lt_tensor *s = nullptr, *m = nullptr, *r = nullptr;
  LT_OK(lt_add(a, b, &s));  // broadcast [2,3] + [3]
  LT_OK(lt_mul(s, a, &m));
  LT_OK(lt_relu(m, &r));
  EXPECT_FALSE(lt_tensor_is_materialized(r));
  ASSERT_EQ(lt_tensor_rank(r), 2u);
  EXPECT_EQ(lt_tensor_shape(r)[0], 2);
  EXPECT_EQ(lt_tensor_shape(r)[1], 3);
  EXPECT_EQ(lt_tensor_dtype(r), LT_DTYPE_F32);
  auto v = to_host(r);
  EXPECT_TRUE(lt_tensor_is_materialized(r));
  std::vector<float> want = {11, 44, 99, 56, 125, 216};
  EXPECT_EQ(v, want);
  EXPECT_EQ(metric(h.rt, "graphs_executed"), 1);
  EXPECT_EQ(metric(h.rt, "ops_traced"), 3);
  for (auto* t : {a, b, s, m, r}) lt_tensor_free(t);
}

// The reshape/broadcast_to of the lowering run on the cpu_eager fallback: built with it only.
#ifdef LT_TEST_HAVE_CPU_EAGER
TEST(Runtime, MatmulNumpySemanticsLowered) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  // [2,2,3] x [3] -> [2,2]; [3] x [3,2] -> [2]; batched broadcast [2,2,3] x [1,3,2] -> [2,2,2]
  std::vector<float> av = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  lt_tensor* a = from_host(d, av, {2, 2, 3});
  lt_tensor* v = from_host(d, {1, 0, -1}, {3});
  lt_tensor* w = from_host(d, {1, 2, 3, 4, 5, 6}, {1, 3, 2});
  lt_tensor *av_out = nullptr, *vw = nullptr, *aw = nullptr, *w2 = nullptr;
  LT_OK(lt_matmul(a, v, &av_out));
  ASSERT_EQ(lt_tensor_rank(av_out), 2u);
  EXPECT_EQ(to_host(av_out), (std::vector<float>{-2, -2, -2, -2}));
  int64_t s32[2] = {3, 2};
  LT_OK(lt_reshape(w, s32, 2, &w2));
  LT_OK(lt_matmul(v, w2, &vw));
  ASSERT_EQ(lt_tensor_rank(vw), 1u);
  EXPECT_EQ(to_host(vw), (std::vector<float>{-4, -4}));
  LT_OK(lt_matmul(a, w, &aw));
  ASSERT_EQ(lt_tensor_rank(aw), 3u);
  EXPECT_EQ(to_host(aw), (std::vector<float>{22, 28, 49, 64, 76, 100, 103, 136}));
  for (auto* t : {a, v, w, av_out, vw, aw, w2}) lt_tensor_free(t);
}
#endif

TEST(Runtime, SyncMaterialisesEveryPendingTensorAsOneGraph) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  lt_tensor* a = from_host(d, {1, 2}, {2});
  lt_tensor *x = nullptr, *y = nullptr;
  LT_OK(lt_add(a, a, &x));
  LT_OK(lt_mul(x, a, &y));
  LT_OK(lt_sync(d));
  EXPECT_TRUE(lt_tensor_is_materialized(x));
  EXPECT_TRUE(lt_tensor_is_materialized(y));
  EXPECT_EQ(metric(h.rt, "graphs_executed"), 1);
  EXPECT_EQ(to_host(x), (std::vector<float>{2, 4}));
  EXPECT_EQ(to_host(y), (std::vector<float>{2, 8}));
  EXPECT_EQ(metric(h.rt, "graphs_executed"), 1);  // reads after sync run nothing
  for (auto* t : {a, x, y}) lt_tensor_free(t);
}

TEST(Runtime, ScalarsAreParametersAndRoundTrip) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  lt_tensor* s = nullptr;
  LT_OK(lt_scalar(d, LT_DTYPE_F32, 2.5, &s));
  EXPECT_EQ(lt_tensor_rank(s), 0u);
  EXPECT_EQ(to_host(s), (std::vector<float>{2.5f}));
  lt_tensor* a = from_host(d, {1, 2, 3}, {3});
  lt_tensor* m = nullptr;
  LT_OK(lt_mul(a, s, &m));
  EXPECT_EQ(to_host(m), (std::vector<float>{2.5f, 5, 7.5f}));
  for (auto* t : {s, a, m}) lt_tensor_free(t);
}

TEST(Runtime, MetricsReportTextAndJson) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  char* s = nullptr;
  LT_OK(lt_metrics_report(h.rt, 1, &s));
  std::string js = s;
  lt_string_free(s);
  EXPECT_NE(js.find("\"cache_hits\""), std::string::npos);
  EXPECT_NE(js.find("\"recompile_reasons\""), std::string::npos);
  LT_OK(lt_metrics_report(h.rt, 0, &s));
  EXPECT_NE(std::string(s).find("allocator.hit_rate"), std::string::npos);
  lt_string_free(s);
  double v = 0;
  Err e(lt_metric_get(h.rt, "no_such_metric", &v));
  EXPECT_EQ(e.code(), LT_STATUS_NOT_FOUND);
  EXPECT_EQ(lt_version() >> 16, static_cast<uint32_t>(LT_VERSION_MAJOR));
  EXPECT_STREQ(lt_version_string(), "0.1.0");
}
