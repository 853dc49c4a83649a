// StepGuardTest.cpp — the step-boundary guard (issue #28): a loop that reads its loss every step
// but never calls lt_sync grows one graph across steps and recompiles it at every read; it gets
// one warning within its first 5 steps, and a loop that syncs gets none.
#include "test_util.h"

namespace {

using namespace lt_test;

double metric_or_zero(lt_runtime* rt, const char* name) {
  double v = 0;
  lt_error* e = lt_metric_get(rt, name, &v);
  if (e) lt_error_destroy(e);
  return v;
}

// Five steps of "read the loss, update the weight"; `sync` calls lt_sync after each update.
void train(lt_runtime* rt, bool sync) {
  lt_device* d = lt_runtime_default_device(rt);
  lt_tensor* x = from_host(d, {1, 2, 3, 4}, {4});
  lt_tensor* w = from_host(d, {0.5f, 0.5f, 0.5f, 0.5f}, {4});
  for (int step = 0; step < 5; ++step) {
    lt_tensor* loss = nullptr;
    LT_OK(lt_mul(w, x, &loss));
    std::vector<float> v = to_host(loss);  // the read every step
    ASSERT_EQ(v.size(), 4u);
    lt_tensor* next = nullptr;
    LT_OK(lt_add(w, x, &next));  // the update, pending until a sync or a read of it
    lt_tensor_free(w);
    lt_tensor_free(loss);
    w = next;
    if (sync) LT_OK(lt_sync(d));
  }
  std::vector<float> final_w = to_host(w);
  EXPECT_FLOAT_EQ(final_w[3], 0.5f + 5 * 4);
  lt_tensor_free(w);
  lt_tensor_free(x);
}

TEST(StepGuard, ALoopThatNeverSyncsIsWarnedWithinFiveSteps) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  train(h.rt, false);
  EXPECT_EQ(metric_or_zero(h.rt, "step_boundary.warnings"), 1);
  EXPECT_GE(metric_or_zero(h.rt, "cache_misses"), 5);  // what the warning is about
}

TEST(StepGuard, ALoopThatSyncsEveryStepIsNotWarned) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  train(h.rt, true);
  EXPECT_EQ(metric_or_zero(h.rt, "step_boundary.warnings"), 0);
}

}  // namespace
