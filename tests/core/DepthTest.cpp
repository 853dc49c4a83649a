// DepthTest.cpp — a 2,000,000-node chain traces, runs and frees without recursion.
#include "test_util.h"

#include <cmath>

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
