// LeaksTest.cpp — tensors freed in any order leak nothing (node count returns to zero; the
// same cases also run under valgrind through ctest).
#include "test_util.h"

using namespace lt_test;

namespace {
struct Graph {
  lt_tensor *a, *b, *c, *d, *e;
};
Graph build(lt_device* dev) {
  Graph g{};
  g.a = from_host(dev, {1, 2, 3, 4}, {2, 2});
  g.b = from_host(dev, {5, 6}, {2});
  EXPECT_EQ(lt_add(g.a, g.b, &g.c), nullptr);
  EXPECT_EQ(lt_matmul(g.c, g.a, &g.d), nullptr);
  EXPECT_EQ(lt_relu(g.d, &g.e), nullptr);
  return g;
}
}  // namespace

TEST(Leaks, AnyFreeOrderLeavesNoNodes) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* dev = lt_runtime_default_device(h.rt);
  double alive0 = metric(h.rt, "nodes_alive");
  for (int order = 0; order < 4; ++order) {
    Graph g = build(dev);
    if (order == 1) to_host(g.e);
    if (order == 2) EXPECT_EQ(lt_sync(dev), nullptr);
    lt_tensor* ts[5] = {g.a, g.b, g.c, g.d, g.e};
    if (order % 2 == 0) {
      for (int i = 0; i < 5; ++i) lt_tensor_free(ts[i]);
    } else {
      for (int i = 4; i >= 0; --i) lt_tensor_free(ts[i]);
    }
    EXPECT_EQ(metric(h.rt, "nodes_alive") - alive0, 0) << "order " << order;
  }
}

TEST(Leaks, TensorsOutliveRuntimeHandle) {
  lt_runtime* rt = make_runtime(plugin_dir("partial"), "partial");
  ASSERT_NE(rt, nullptr);
  lt_device* dev = lt_runtime_default_device(rt);
  Graph g = build(dev);
  lt_runtime_destroy(rt);  // tensors keep the internals alive
  auto v = to_host(g.e);
  EXPECT_EQ(v.size(), 4u);
  lt_tensor* extra = lt_tensor_retain(g.e);
  for (auto* t : {g.a, g.b, g.c, g.d, g.e, extra}) lt_tensor_free(t);
}
