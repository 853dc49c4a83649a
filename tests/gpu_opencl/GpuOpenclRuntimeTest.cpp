// Tests of the gpu_opencl plugin through the application C API (lt.h) with device
// "gpu_opencl": lazy ops, materialisation, results against plain loops.
#include <gtest/gtest.h>

#include <CL/cl.h>

#include <cmath>
#include <string>
#include <vector>

#include "lazytensor/lt.h"

namespace {

class GpuOpenclRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    cl_uint n = 0;
    ASSERT_TRUE(clGetPlatformIDs(0, nullptr, &n) == CL_SUCCESS && n > 0)
        << "gpu_opencl was built but no OpenCL platform is found (install-deps installs PoCL)";
    lt_runtime_options o{};
    o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
    o.device = "gpu_opencl";
    o.plugin_path = LT_PLUGIN_DIR;
    o.fallback = "error";  // everything here must run on gpu_opencl itself
    lt_error* e = lt_runtime_create(&o, &rt_);
    ASSERT_EQ(e, nullptr) << (e ? lt_error_message(e) : "");
    dev_ = lt_runtime_default_device(rt_);
    ASSERT_STREQ(lt_device_backend(dev_), "gpu_opencl");
  }
  void TearDown() override {
    for (lt_tensor* t : owned_) lt_tensor_free(t);
    if (rt_) lt_runtime_destroy(rt_);
  }
  // Takes the out-parameter's address: it is read only after the call has filled it.
  lt_tensor* Own(lt_error* e, lt_tensor** t) {
    EXPECT_EQ(e, nullptr) << (e ? lt_error_message(e) : "");
    if (e) lt_error_destroy(e);
    owned_.push_back(*t);
    return *t;
  }
  lt_tensor* FromHost(const std::vector<float>& v, std::vector<int64_t> shape) {
    lt_tensor* t = nullptr;
    return Own(lt_tensor_from_host(dev_, LT_DTYPE_F32, shape.data(), shape.size(), v.data(),
                                   v.size() * 4, &t),
               &t);
  }
  std::vector<float> ToHost(lt_tensor* t) {
    std::vector<float> v(static_cast<size_t>(lt_tensor_numel(t)));
    lt_error* e = lt_tensor_to_host(t, v.data(), v.size() * 4);
    EXPECT_EQ(e, nullptr) << (e ? lt_error_message(e) : "");
    if (e) lt_error_destroy(e);
    return v;
  }
  lt_runtime* rt_ = nullptr;
  lt_device* dev_ = nullptr;
  std::vector<lt_tensor*> owned_;
};

TEST_F(GpuOpenclRuntime, SoftmaxOfAffineMatchesLoops) {
  const int64_t R = 8, C = 40;
  std::vector<float> x(R * C), w(C);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i));
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.1f * static_cast<float>(i);
  lt_tensor* X = FromHost(x, {R, C});
  lt_tensor* W = FromHost(w, {C});
  lt_tensor *m = nullptr, *s = nullptr;
  Own(lt_mul(X, W, &m), &m);
  Own(lt_softmax(m, 1, &s), &s);
  auto got = ToHost(s);
  for (int64_t i = 0; i < R; ++i) {
    float mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < C; ++j) mx = std::max(mx, x[i * C + j] * w[j]);
    for (int64_t j = 0; j < C; ++j) sum += std::exp(x[i * C + j] * w[j] - mx);
    for (int64_t j = 0; j < C; ++j)
      ASSERT_NEAR(got[i * C + j], std::exp(x[i * C + j] * w[j] - mx) / sum, 1e-5f);
  }
}

TEST_F(GpuOpenclRuntime, MatmulThroughTheCore) {
  const int64_t M = 20, K = 30, N = 10;
  std::vector<float> a(M * K), b(K * N);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::cos(static_cast<float>(i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::sin(0.5f * static_cast<float>(i));
  lt_tensor* A = FromHost(a, {M, K});
  lt_tensor* B = FromHost(b, {K, N});
  lt_tensor* C = nullptr;
  Own(lt_matmul(A, B, &C), &C);
  auto got = ToHost(C);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += a[i * K + k] * b[k * N + j];
      ASSERT_NEAR(got[i * N + j], acc, 1e-4f);
    }
}

// A reduction over the dynamic dimension: softmax over a growing sequence length compiles once
// dynamic (the row length, the row stride and the launch are kernel arguments and launch
// numbers); every later length reuses that build.
TEST_F(GpuOpenclRuntime, SoftmaxOverAGrowingSequenceIsOneDynamicProgram) {
  const int64_t R = 3, S = 24;
  for (int64_t s = 1; s <= S; ++s) {
    std::vector<float> x(static_cast<size_t>(R * s));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * static_cast<float>(i + s));
    lt_tensor* y = nullptr;
    Own(lt_softmax(FromHost(x, {R, s}), 1, &y), &y);
    auto got = ToHost(y);
    ASSERT_EQ(got.size(), x.size());
    for (int64_t i = 0; i < R; ++i) {
      float mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < s; ++j) mx = std::max(mx, x[i * s + j]);
      for (int64_t j = 0; j < s; ++j) sum += std::exp(x[i * s + j] - mx);
      for (int64_t j = 0; j < s; ++j)
        ASSERT_NEAR(got[i * s + j], std::exp(x[i * s + j] - mx) / sum, 1e-6f) << "length " << s;
    }
  }
  auto metric = [&](const char* name) {
    double v = -1;
    lt_error* e = lt_metric_get(rt_, name, &v);
    if (e) lt_error_destroy(e);
    return v;
  };
  EXPECT_EQ(metric("dynamic.compiles"), 1);
  EXPECT_EQ(metric("dynamic.hits"), S - 2);  // lengths 3..S (2 is the dynamic compile)
  EXPECT_EQ(metric("compiles"), 2);
}

}  // namespace
