// DepthTest.cpp — a 2,000,000-node chain traces, runs and frees without recursion.
#include "test_util.h"

#include <cmath>
#include <cstdlib>
#include <string>

using namespace lt_test;

TEST(Depth, MillionStepChainTracesRunsAndFrees) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  double alive0 = metric(h.rt, "nodes_alive");
  lt_tensor *a = nullptr, *m = nullptr, *c = nullptr;
  LT_OK(lt_scalar(d, LT_DTYPE_F32, -1.0, &a));  // the fixed point of a*1.0001+0.0001
  LT_OK(lt_scalar(d, LT_DTYPE_F32, 1.0001, &m));
  LT_OK(lt_scalar(d, LT_DTYPE_F32, 0.0001, &c));
  for (int i = 0; i < 1000000; ++i) {
    lt_tensor *t = nullptr, *n = nullptr;
    ASSERT_EQ(lt_mul(a, m, &t), nullptr);
    ASSERT_EQ(lt_add(t, c, &n), nullptr);
    lt_tensor_free(t);
    lt_tensor_free(a);
    a = n;
  }
  EXPECT_GE(metric(h.rt, "nodes_alive") - alive0, 2000000);
  auto v = to_host(a);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NEAR(v[0], -1.0f, 1e-3);
  EXPECT_LT(metric(h.rt, "nodes_alive") - alive0, 10);
  for (auto* t : {a, m, c}) lt_tensor_free(t);
  EXPECT_EQ(metric(h.rt, "nodes_alive") - alive0, 0);
}

TEST(Depth, UnmaterialisedMillionChainFreesIteratively) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  double alive0 = metric(h.rt, "nodes_alive");
  lt_tensor* a = from_host(d, {0.5f}, {1});
  for (int i = 0; i < 1000000; ++i) {
    lt_tensor* n = nullptr;
    ASSERT_EQ(lt_relu(a, &n), nullptr);
    lt_tensor_free(a);
    a = n;
  }
  lt_tensor_free(a);  // frees the whole pending chain
  EXPECT_EQ(metric(h.rt, "nodes_alive") - alive0, 0);
}

TEST(Depth, ShortChainMatchesHostLoop) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  lt_tensor *a = nullptr, *m = nullptr, *c = nullptr;
  LT_OK(lt_scalar(d, LT_DTYPE_F32, 0.0, &a));
  LT_OK(lt_scalar(d, LT_DTYPE_F32, 0.999, &m));
  LT_OK(lt_scalar(d, LT_DTYPE_F32, 0.01, &c));
  float ref = 0;
  for (int i = 0; i < 2000; ++i) {
    lt_tensor *t = nullptr, *n = nullptr;
    ASSERT_EQ(lt_mul(a, m, &t), nullptr);
    ASSERT_EQ(lt_add(t, c, &n), nullptr);
    lt_tensor_free(t);
    lt_tensor_free(a);
    a = n;
    ref = ref * 0.999f + 0.01f;
  }
  EXPECT_FLOAT_EQ(to_host(a)[0], ref);
  for (auto* t : {a, m, c}) lt_tensor_free(t);
}

// max_region_nodes (here 100 through LT_MAX_REGION_NODES) cuts a 1,000-node chain into regions
// of at most 100 nodes: same values, and the cut is in the metrics (issue #18).
TEST(Depth, LongChainIsCutIntoRegionsOfBoundedSize) {
  ::setenv("LT_MAX_REGION_NODES", "100", 1);
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ::unsetenv("LT_MAX_REGION_NODES");
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  EXPECT_EQ(metric(h.rt, "graphs_cut"), 0);
  EXPECT_EQ(metric(h.rt, "regions_cut"), 0);
  lt_tensor *a = nullptr, *m = nullptr, *c = nullptr;
  LT_OK(lt_scalar(d, LT_DTYPE_F32, 0.0, &a));
  LT_OK(lt_scalar(d, LT_DTYPE_F32, 0.999, &m));
  LT_OK(lt_scalar(d, LT_DTYPE_F32, 0.01, &c));
  float ref = 0;
  for (int i = 0; i < 500; ++i) {
    lt_tensor *t = nullptr, *n = nullptr;
    ASSERT_EQ(lt_mul(a, m, &t), nullptr);
    ASSERT_EQ(lt_add(t, c, &n), nullptr);
    lt_tensor_free(t);
    lt_tensor_free(a);
    a = n;
    ref = ref * 0.999f + 0.01f;
  }
  EXPECT_FLOAT_EQ(to_host(a)[0], ref);
  EXPECT_EQ(metric(h.rt, "graphs_cut"), 1);
  EXPECT_GE(metric(h.rt, "regions_cut"), 9);  // 1,000 nodes: at least 10 regions
  for (auto* t : {a, m, c}) lt_tensor_free(t);
}

TEST(Depth, MaxRegionNodesMustBePositive) {
  ::setenv("LT_MAX_REGION_NODES", "0", 1);
  lt_runtime_options o{};
  o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
  std::string path = plugin_dir("partial");
  o.plugin_path = path.c_str();
  lt_runtime* rt = nullptr;
  Err e(lt_runtime_create(&o, &rt));
  ::unsetenv("LT_MAX_REGION_NODES");
  EXPECT_EQ(e.code(), LT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(e.msg().find("LT_MAX_REGION_NODES"), std::string::npos) << e.msg();
  lt_runtime_destroy(rt);
}
