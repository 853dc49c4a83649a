// tpu_sim_runtime_test.cpp — tpu_sim behind the core (lt.h): work runs on the simulated TPU
// with its bf16 MXU numerics, i64 index bookkeeping stays on it, and ops it lacks fall back
// to cpu_eager and are counted.
#include <gtest/gtest.h>

#include <string>

#include "lazytensor/lt.h"

namespace {

class TpuSimRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    lt_runtime_options o{};
    o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
    o.device = "tpu_sim";
    o.plugin_path = LT_TPU_SIM_PLUGIN_DIR;
    o.fallback = "silent";
    lt_error* e = lt_runtime_create(&o, &rt_);
    ASSERT_EQ(e, nullptr) << lt_error_message(e);
    dev_ = lt_runtime_default_device(rt_);
    ASSERT_STREQ(lt_device_backend(dev_), "tpu_sim");
  }
  void TearDown() override { lt_runtime_destroy(rt_); }

  lt_tensor* from(const std::vector<float>& v, std::vector<int64_t> shape) {
    lt_tensor* t = nullptr;
    lt_error* e = lt_tensor_from_host(dev_, LT_DTYPE_F32, shape.data(), shape.size(), v.data(),
                                      v.size() * sizeof(float), &t);
    EXPECT_EQ(e, nullptr) << lt_error_message(e);
    return t;
  }
  double metric(const char* name) {
    double v = -1;
    lt_error* e = lt_metric_get(rt_, name, &v);
    EXPECT_EQ(e, nullptr) << name << ": " << (e ? lt_error_message(e) : "");
    lt_error_destroy(e);
    return v;
  }

  lt_runtime* rt_ = nullptr;
  lt_device* dev_ = nullptr;
};

TEST_F(TpuSimRuntime, MatmulRunsOnTheMxuInBf16) {
  // 1 + 2^-10 is not a bf16 value: the MXU rounds it to 1 (cpu_eager would keep it).
  lt_tensor* a = from({1.0009765625f}, {1, 1});
  lt_tensor* b = from({1.0f}, {1, 1});
  lt_tensor* c = nullptr;
  ASSERT_EQ(lt_matmul(a, b, &c), nullptr);
  float out = 0;
  lt_error* e = lt_tensor_to_host(c, &out, sizeof out);
  ASSERT_EQ(e, nullptr) << lt_error_message(e);
  EXPECT_EQ(out, 1.0f);
  EXPECT_GT(metric("plugin.tpu_sim.simulated_ns"), 0.0);
  lt_tensor_free(a), lt_tensor_free(b), lt_tensor_free(c);
}

TEST_F(TpuSimRuntime, CorrectCountStaysOnTpuSim) {
  // argmax -> eq against i64 labels -> cast -> sum: i64 index bookkeeping, no fallback.
  lt_tensor* a = from({1, 5, 2, 7, 0, 3}, {2, 3});
  lt_tensor* r = nullptr;
  ASSERT_EQ(lt_relu(a, &r), nullptr);
  lt_tensor *am = nullptr, *labels = nullptr, *eq = nullptr, *hits = nullptr, *cnt = nullptr;
  ASSERT_EQ(lt_argmax(r, 1, 0, &am), nullptr);
  const int64_t lv[2] = {1, 2}, shape[1] = {2};
  ASSERT_EQ(lt_tensor_from_host(dev_, LT_DTYPE_I64, shape, 1, lv, sizeof lv, &labels), nullptr);
  ASSERT_EQ(lt_eq(am, labels, &eq), nullptr);
  ASSERT_EQ(lt_cast(eq, LT_DTYPE_I64, &hits), nullptr);
  ASSERT_EQ(lt_sum(hits, nullptr, 0, 0, &cnt), nullptr);
  int64_t out = -1;
  lt_error* e = lt_tensor_to_host(cnt, &out, sizeof out);
  ASSERT_EQ(e, nullptr) << lt_error_message(e);
  EXPECT_EQ(out, 1);
  EXPECT_EQ(metric("fallback_nodes"), 0.0);
  for (lt_tensor* t : {a, r, am, labels, eq, hits, cnt}) lt_tensor_free(t);
}

TEST_F(TpuSimRuntime, I64DivisionFallsBackToCpuEagerAndIsCounted) {
  const int64_t v[3] = {1, int64_t(1) << 40, -3}, shape[1] = {3};
  lt_tensor *a = nullptr, *s = nullptr;
  ASSERT_EQ(lt_tensor_from_host(dev_, LT_DTYPE_I64, shape, 1, v, sizeof v, &a), nullptr);
  ASSERT_EQ(lt_div(a, a, &s), nullptr);
  int64_t out[3] = {};
  lt_error* e = lt_tensor_to_host(s, out, sizeof out);
  ASSERT_EQ(e, nullptr) << lt_error_message(e);
  EXPECT_EQ(out[1], 1);
  EXPECT_EQ(metric("fallback.div"), 1.0);
  lt_tensor_free(a), lt_tensor_free(s);
}

}  // namespace
