// OptimizeStageTest.cpp — the core's optimise stage through lt.h on cpu_eager: it runs on a
// plan-cache miss only, outputs that became inputs or constants read back right, and a bad
// level is an error naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "lazytensor/lt.h"

namespace {

struct Rt {
  lt_runtime* rt = nullptr;
  std::string error;
  explicit Rt(const char* level) {
    lt_runtime_options o{};
    o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
    o.plugin_path = LT_DIFFTEST_PLUGIN_DIR;
    o.device = "cpu_eager";
    o.optimize = level;
    if (lt_error* e = lt_runtime_create(&o, &rt)) {
      error = lt_error_message(e);
      lt_error_destroy(e);
    }
  }
  ~Rt() { lt_runtime_destroy(rt); }
  lt_device* dev() { return lt_runtime_default_device(rt); }
  double metric(const char* name) {
    double v = 0;
    lt_error_destroy(lt_metric_get(rt, name, &v));
    return v;
  }
};

lt_tensor* unary(const char* op, lt_tensor* x) {
  lt_tensor* out = nullptr;
  lt_error* e = lt_apply(nullptr, op, &x, 1, nullptr, 0, &out);
  EXPECT_EQ(e, nullptr) << (e ? lt_error_message(e) : "");
  lt_error_destroy(e);
  return out;
}

TEST(OptimizeStage, RunsOnAMissOnlyAndOutputsThatBecameInputsReadBack) {
  Rt r("exact");
  ASSERT_NE(r.rt, nullptr) << r.error;
  const float data[3] = {-0.0f, 1.5f, -2.0f};
  const int64_t shape[1] = {3};
  for (int step = 0; step < 3; ++step) {
    lt_tensor* x = nullptr;
    ASSERT_EQ(lt_tensor_from_host(r.dev(), LT_DTYPE_F32, shape, 1, data, sizeof data, &x), nullptr);
    lt_tensor* nn = unary("neg", unary("neg", x));  // becomes x itself
    lt_tensor* e1 = unary("exp", x);
    lt_tensor* e2 = unary("exp", x);  // merged with e1: two outputs, one node
    ASSERT_EQ(lt_sync(r.dev()), nullptr);
    float a[3], b[3], c[3];
    ASSERT_EQ(lt_tensor_to_host(nn, a, sizeof a), nullptr);
    ASSERT_EQ(lt_tensor_to_host(e1, b, sizeof b), nullptr);
    ASSERT_EQ(lt_tensor_to_host(e2, c, sizeof c), nullptr);
    EXPECT_EQ(std::memcmp(a, data, sizeof a), 0);  // -0 stays -0
    EXPECT_EQ(std::memcmp(b, c, sizeof b), 0);
    EXPECT_FLOAT_EQ(b[1], std::exp(1.5f));
    for (lt_tensor* t : {x, nn, e1, e2}) lt_tensor_free(t);
  }
  // The unfreed intermediate neg node is freed with nn; three steps, one compile.
  EXPECT_EQ(r.metric("optimize.graphs"), 1.0);
  EXPECT_EQ(r.metric("optimize.cse.removed"), 1.0);
  EXPECT_GE(r.metric("optimize.simplify.rewritten"), 1.0);
}

TEST(OptimizeStage, FoldedConstantsAreKeptWithThePlan) {
  Rt r("exact");
  ASSERT_NE(r.rt, nullptr) << r.error;
  for (int step = 0; step < 2; ++step) {
    lt_tensor* a = nullptr;
    ASSERT_EQ(lt_arange(r.dev(), 0, 4, 1, LT_DTYPE_F32, &a), nullptr);
    lt_tensor* e = unary("exp", a);  // a constant subgraph: folded, data kept with the plan
    float out[4];
    ASSERT_EQ(lt_tensor_to_host(e, out, sizeof out), nullptr);
    for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(out[i], std::exp(static_cast<float>(i)));
    lt_tensor_free(a);
    lt_tensor_free(e);
  }
  EXPECT_EQ(r.metric("optimize.fold.folded"), 1.0);
}

TEST(OptimizeStage, AnUnknownLevelIsAnErrorNamingIt) {
  Rt r("O3");
  EXPECT_EQ(r.rt, nullptr);
  EXPECT_NE(r.error.find("optimize 'O3'"), std::string::npos) << r.error;
}

}  // namespace
