// CacheTest.cpp — compile cache: same program + same shapes hits, a changed input shape
// recompiles with a reason naming the input, a changed scalar value does not recompile.
#include "test_util.h"

#include <cmath>

using namespace lt_test;

namespace {
// y = relu(x * x + x * s)
std::vector<float> step(lt_device* d, const std::vector<float>& xv, std::vector<int64_t> shape,
                        double sv) {
  lt_tensor* x = from_host(d, xv, shape);
  lt_tensor *s = nullptr, *xx = nullptr, *xs = nullptr, *sum = nullptr, *y = nullptr;
  lt_error* e = lt_scalar(d, LT_DTYPE_F32, sv, &s);
  EXPECT_EQ(e, nullptr);
  EXPECT_EQ(lt_mul(x, x, &xx), nullptr);
  EXPECT_EQ(lt_mul(x, s, &xs), nullptr);
  EXPECT_EQ(lt_add(xx, xs, &sum), nullptr);
  EXPECT_EQ(lt_relu(sum, &y), nullptr);
  auto out = to_host(y);
  for (auto* t : {x, s, xx, xs, sum, y}) lt_tensor_free(t);
  return out;
}
}  // namespace

TEST(CompileCache, SameProgramSameShapesHits) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  EXPECT_EQ(step(d, {1, 2, 3, 4}, {2, 2}, 1.0), (std::vector<float>{2, 6, 12, 20}));
  EXPECT_EQ(step(d, {4, 3, 2, 1}, {2, 2}, 1.0), (std::vector<float>{20, 12, 6, 2}));
  EXPECT_EQ(metric(h.rt, "compiles"), 1);
  EXPECT_EQ(metric(h.rt, "cache_hits"), 1);
  EXPECT_EQ(metric(h.rt, "cache_misses"), 1);
}

TEST(CompileCache, ChangedScalarValueDoesNotRecompile) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  step(d, {1, 2}, {2}, 1.0);
  EXPECT_EQ(step(d, {1, 2}, {2}, -3.0), (std::vector<float>{0, 0}));
  EXPECT_EQ(step(d, {1, 2}, {2}, 2.0), (std::vector<float>{3, 8}));
  EXPECT_EQ(metric(h.rt, "compiles"), 1);
  EXPECT_EQ(metric(h.rt, "cache_hits"), 2);
}

TEST(CompileCache, ChangedInputShapeRecompilesWithReason) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  step(d, {1, 2, 3, 4}, {2, 2}, 1.0);
  step(d, {1, 2, 3, 4, 5, 6}, {3, 2}, 1.0);
  EXPECT_EQ(metric(h.rt, "compiles"), 2);
  char* s = nullptr;
  LT_OK(lt_metrics_report(h.rt, 1, &s));
  std::string js = s;
  lt_string_free(s);
  EXPECT_NE(js.find("input 0 dim 0: 2 -> 3"), std::string::npos) << js;
}

namespace {
// y = x * 2 + 1 over a named input.
void affine(lt_device* d, std::vector<int64_t> shape, const char* name) {
  std::vector<float> v(static_cast<size_t>(shape[0] * shape[1]), 1.0f);
  lt_tensor* x = from_host(d, v, shape);
  LT_OK(lt_tensor_set_name(x, name));
  EXPECT_STREQ(lt_tensor_name(x), name);
  lt_tensor *two = nullptr, *one = nullptr, *a = nullptr, *y = nullptr;
  LT_OK(lt_scalar(d, LT_DTYPE_F32, 2.0, &two));
  LT_OK(lt_scalar(d, LT_DTYPE_F32, 1.0, &one));
  LT_OK(lt_mul(x, two, &a));
  LT_OK(lt_add(a, one, &y));
  EXPECT_EQ(to_host(y), std::vector<float>(v.size(), 3.0f));
  for (auto* t : {x, two, one, a, y}) lt_tensor_free(t);
}
}  // namespace

// The reason compares with the last graph of the same program, not the last graph compiled:
// an unrelated graph in between (an evaluation pass) does not turn it into an op change.
TEST(CompileCache, ReasonNamesTheInputAndDimAgainstTheSameProgram) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  affine(d, {32, 4}, "x");
  EXPECT_NE(last_reason(h.rt).find("first graph compiled"), std::string::npos);
  step(d, {1, 2, 3, 4}, {2, 2}, 1.0);  // another program in between
  EXPECT_NE(last_reason(h.rt).find("new program"), std::string::npos) << last_reason(h.rt);
  affine(d, {24, 4}, "x");
  EXPECT_EQ(last_reason(h.rt), "input 0 'x' dim 0: 32 -> 24");
  affine(d, {24, 5}, "");  // unnamed: the index alone
  EXPECT_EQ(last_reason(h.rt), "input 0 dim 1: 4 -> 5");
  EXPECT_EQ(metric(h.rt, "compiles"), 4);
}

TEST(CompileCache, DistinguishesSharedOperandsFromDistinctOnes) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  lt_tensor* a = from_host(d, {1, 2}, {2});
  lt_tensor* b = from_host(d, {10, 20}, {2});
  lt_tensor *aa = nullptr, *ab = nullptr;
  LT_OK(lt_add(a, a, &aa));
  EXPECT_EQ(to_host(aa), (std::vector<float>{2, 4}));
  LT_OK(lt_add(a, b, &ab));
  EXPECT_EQ(to_host(ab), (std::vector<float>{11, 22}));
  EXPECT_EQ(metric(h.rt, "compiles"), 2);
  for (auto* t : {a, b, aa, ab}) lt_tensor_free(t);
}

TEST(CompileCache, LruCapacityFromConfigEvicts) {
  std::string cfg = ::testing::TempDir() + "/lt_cache_cap.json";
  FILE* f = fopen(cfg.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fprintf(f, "{\"cache_capacity\": 1}\n");
  fclose(f);
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial", "silent", cfg.c_str())};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  step(d, {1, 2}, {2}, 1.0);
  step(d, {1, 2, 3}, {3}, 1.0);
  step(d, {1, 2}, {2}, 1.0);  // evicted: compiles again
  EXPECT_EQ(metric(h.rt, "compiles"), 3);
  EXPECT_EQ(metric(h.rt, "cache_entries"), 1);
}

TEST(CompileCache, DumpDirGetsReadableGraphs) {
  std::string dir = ::testing::TempDir() + "/lt_dump_test";
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial", "silent", nullptr, dir.c_str())};
  ASSERT_NE(h.rt, nullptr);
  step(lt_runtime_default_device(h.rt), {1, 2}, {2}, 1.0);
  std::string cmd = "grep -l 'relu(' " + dir + "/lt_graph_*_partial.txt > /dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

namespace {
// exp(x) is traced before tanh(x); `swapped` reads tanh first, so the collect stage's walk from
// the root meets the ops out of program order and takes its sorting path, else its one-walk path.
std::vector<float> two_ops(lt_device* d, const std::vector<float>& xv, bool swapped) {
  lt_tensor* x = from_host(d, xv, {static_cast<int64_t>(xv.size())});
  lt_tensor *e = nullptr, *t = nullptr, *y = nullptr;
  EXPECT_EQ(lt_exp(x, &e), nullptr);
  EXPECT_EQ(lt_tanh(x, &t), nullptr);
  EXPECT_EQ(swapped ? lt_sub(t, e, &y) : lt_sub(e, t, &y), nullptr);
  auto out = to_host(y);
  for (auto* v : {x, e, t, y}) lt_tensor_free(v);
  return out;
}
}  // namespace

TEST(CompileCache, OpsMetOutOfProgramOrderComputeAndHitAsInOrder) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  const std::vector<float> xv{-1.5f, 0.f, 2.f};
  std::vector<float> in_order, swapped;
  for (float v : xv) {
    in_order.push_back(std::exp(v) - std::tanh(v));
    swapped.push_back(std::tanh(v) - std::exp(v));
  }
  for (int round = 0; round < 2; ++round) {
    auto a = two_ops(d, xv, false), b = two_ops(d, xv, true);
    ASSERT_EQ(a.size(), xv.size());
    ASSERT_EQ(b.size(), xv.size());
    for (size_t i = 0; i < xv.size(); ++i) {
      EXPECT_NEAR(a[i], in_order[i], 1e-5f * (1 + std::fabs(in_order[i])));
      EXPECT_NEAR(b[i], swapped[i], 1e-5f * (1 + std::fabs(swapped[i])));
    }
  }
  // Two programs (the operands of sub differ in order), each compiled once and hit once.
  EXPECT_EQ(metric(h.rt, "compiles"), 2);
  EXPECT_EQ(metric(h.rt, "cache_hits"), 2);
}
