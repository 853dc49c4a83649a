// CpuEagerPluginTest.cpp — drives the cpu_eager plugin through its C table without the core:
// table/version checks, buffers, hand-built graphs against plain loops, error values, and a
// 1,000,000-node chain.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <thread>
#include <atomic>
#include <string>
#include <vector>

#include "lazytensor/lt_plugin.h"
#include "lazytensor/lt_random.h"
#include "plugin_harness.hpp"

namespace {

using lt::plugin_test::Attr;
using lt::plugin_test::GraphBuilder;
using lt::plugin_test::Status;

class CpuEager : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    api_ = lt::plugin_test::load_api(LT_CPU_EAGER_PLUGIN_PATH, &why);
    ASSERT_NE(api_, nullptr) << why;
  }
  void SetUp() override {
    ASSERT_NE(api_, nullptr);
    lt_plugin_context* ctx = nullptr;
    ASSERT_EQ(code(lt::plugin_test::create_context(api_, {}, &ctx)), LT_STATUS_OK) << last_message_;
    ctx_ = ctx;
  }
  void TearDown() override {
    for (lt_plugin_buffer* b : buffers_) api_->buffer_free(ctx_, b);
    if (ctx_) api_->destroy(ctx_);
  }

  lt::plugin_test::Context context() const { return {api_, ctx_}; }
  // Returns the code, keeping a failure's message for the assertion that reports it.
  lt_status_code code(Status s) {
    if (!s.ok()) last_message_ = std::move(s.message);
    return s.code;
  }
  // Returns the error's code (OK for NULL) and destroys it, keeping its message.
  lt_status_code check(lt_plugin_error* e) { return code(lt::plugin_test::take(api_, e)); }

  lt_plugin_buffer* alloc(size_t nbytes) {
    lt_plugin_buffer* b = nullptr;
    EXPECT_EQ(code(context().alloc(nbytes, &b)), LT_STATUS_OK) << last_message_;
    buffers_.push_back(b);
    return b;
  }
  template <class T>
  lt_plugin_buffer* upload(const std::vector<T>& v) {
    lt_plugin_buffer* b = alloc(v.size() * sizeof(T));
    EXPECT_EQ(code(context().upload(b, v.data(), v.size() * sizeof(T))), LT_STATUS_OK)
        << last_message_;
    return b;
  }
  template <class T>
  std::vector<T> download(lt_plugin_buffer* b, size_t n) {
    std::vector<T> v(n);
    EXPECT_EQ(code(context().download(b, v.data(), n * sizeof(T))), LT_STATUS_OK) << last_message_;
    return v;
  }

  lt_status_code compile(const lt_graph& g, lt_plugin_executable** ex) {
    return code(context().compile(g, ex));
  }
  lt_status_code execute(lt_plugin_executable* ex, std::vector<lt_plugin_buffer*> in,
                         std::vector<lt_plugin_buffer*> out) {
    return code(context().execute(ex, in, out));
  }
  // Compiles, runs once with `in`, and returns output 0 as T (n elements).
  template <class T>
  std::vector<T> run(const lt_graph& g, std::vector<lt_plugin_buffer*> in, size_t n) {
    lt_plugin_executable* ex = nullptr;
    EXPECT_EQ(compile(g, &ex), LT_STATUS_OK) << last_message_;
    if (!ex) return {};
    lt_plugin_buffer* out = alloc(std::max<size_t>(n, 1) * sizeof(T));
    EXPECT_EQ(execute(ex, in, {out}), LT_STATUS_OK) << last_message_;
    api_->executable_destroy(ctx_, ex);
    return download<T>(out, n);
  }
  template <class T>
  std::vector<T> run(GraphBuilder& gb, std::vector<lt_plugin_buffer*> in, size_t n) {
    return run<T>(gb.graph(), std::move(in), n);
  }

  static const lt_plugin_api* api_;
  lt_plugin_context* ctx_ = nullptr;
  std::vector<lt_plugin_buffer*> buffers_;
  std::string last_message_;
};
const lt_plugin_api* CpuEager::api_ = nullptr;

TEST_F(CpuEager, TableHasVersionNameAndEveryFunction) {
  EXPECT_EQ(api_->struct_size, LT_PLUGIN_API_STRUCT_SIZE);
  EXPECT_EQ(api_->abi_major, static_cast<uint32_t>(LT_PLUGIN_ABI_MAJOR));
  EXPECT_EQ(api_->abi_minor, static_cast<uint32_t>(LT_PLUGIN_ABI_MINOR));
  EXPECT_STREQ(api_->name, "cpu_eager");
  EXPECT_NE(api_->version, nullptr);
  const void* fns[] = {(void*)api_->error_message,
                       (void*)api_->error_code,
                       (void*)api_->error_destroy,
                       (void*)api_->create,
                       (void*)api_->destroy,
                       (void*)api_->device_count,
                       (void*)api_->device_info,
                       (void*)api_->buffer_alloc,
                       (void*)api_->buffer_free,
                       (void*)api_->buffer_upload,
                       (void*)api_->buffer_download,
                       (void*)api_->buffer_host_ptr,
                       (void*)api_->supports,
                       (void*)api_->compile,
                       (void*)api_->execute,
                       (void*)api_->executable_destroy,
                       (void*)api_->stats};
  for (const void* f : fns) EXPECT_NE(f, nullptr);
}

TEST_F(CpuEager, DescribesOneHostAddressableCpuDevice) {
  size_t n = 0;
  ASSERT_EQ(check(api_->device_count(ctx_, &n)), LT_STATUS_OK);
  EXPECT_EQ(n, 1u);
  lt_plugin_device_info_args a{};
  a.struct_size = LT_PLUGIN_DEVICE_INFO_ARGS_STRUCT_SIZE;
  a.context = ctx_;
  ASSERT_EQ(check(api_->device_info(&a)), LT_STATUS_OK);
  EXPECT_STREQ(a.name, "cpu");
  EXPECT_STREQ(a.kind, "cpu");
  EXPECT_EQ(a.host_addressable, 1);
  EXPECT_NE(std::string(a.description).find("OpenBLAS"), std::string::npos) << a.description;
  a.device = 1;
  EXPECT_EQ(check(api_->device_info(&a)), LT_STATUS_NOT_FOUND);
}

TEST_F(CpuEager, BufferRoundTripWithOffsetsAndAlignment) {
  std::vector<int32_t> v(1000);
  for (int i = 0; i < 1000; ++i) v[i] = i * 7 - 3;
  lt_plugin_buffer* b = upload(v);
  EXPECT_EQ(download<int32_t>(b, 1000), v);

  lt_plugin_buffer_args a{};
  a.struct_size = LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE;
  a.context = ctx_;
  a.buffer = b;
  ASSERT_EQ(check(api_->buffer_host_ptr(&a)), LT_STATUS_OK);
  ASSERT_NE(a.host_ptr, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.host_ptr) % 64, 0u);
  EXPECT_EQ(static_cast<int32_t*>(a.host_ptr)[10], v[10]);

  int32_t patch[2] = {-1, -2};
  a.offset = 4 * 998;
  a.nbytes = 8;
  a.src = patch;
  ASSERT_EQ(check(api_->buffer_upload(&a)), LT_STATUS_OK);
  EXPECT_EQ(download<int32_t>(b, 1000)[999], -2);

  a.offset = 4 * 999;  // 8 bytes from here run past the end
  EXPECT_EQ(check(api_->buffer_upload(&a)), LT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(last_message_.find("exceeds"), std::string::npos) << last_message_;
}

TEST_F(CpuEager, MatmulAddReluMatchesPlainLoop) {
  const int M = 7, K = 5, N = 6;
  std::vector<float> a(M * K), b(K * N), bias(N);
  for (int i = 0; i < M * K; ++i) a[i] = std::sin(0.3f * i);
  for (int i = 0; i < K * N; ++i) b[i] = std::cos(0.7f * i);
  for (int i = 0; i < N; ++i) bias[i] = 0.1f * i - 0.3f;
  GraphBuilder gb;
  int ia = gb.input(LT_DTYPE_F32, {M, K});
  int ib = gb.input(LT_DTYPE_F32, {K, N});
  int ic = gb.input(LT_DTYPE_F32, {N});
  int mm = gb.op("matmul", LT_DTYPE_F32, {M, N}, {ia, ib});
  int ad = gb.op("add", LT_DTYPE_F32, {M, N}, {mm, ic});
  gb.output(gb.op("relu", LT_DTYPE_F32, {M, N}, {ad}));
  auto got = run<float>(gb, {upload(a), upload(b), upload(bias)}, M * N);
  ASSERT_EQ(got.size(), size_t(M * N));
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += double(a[i * K + k]) * b[k * N + j];
      s = std::max(s + bias[j], 0.0);
      EXPECT_NEAR(got[i * N + j], s, 1e-5) << i << "," << j;
    }
  }
}

TEST_F(CpuEager, LargeMatmulUsesBlasPathCorrectly) {
  const int M = 96, K = 80, N = 72;  // above the BLAS threshold
  std::vector<double> a(M * K), b(K * N);
  for (int i = 0; i < M * K; ++i) a[i] = (i % 13) - 6;
  for (int i = 0; i < K * N; ++i) b[i] = (i % 7) - 3;
  GraphBuilder gb;
  int ia = gb.input(LT_DTYPE_F64, {M, K});
  int ib = gb.input(LT_DTYPE_F64, {K, N});
  gb.output(gb.op("matmul", LT_DTYPE_F64, {M, N}, {ia, ib}));
  auto got = run<double>(gb, {upload(a), upload(b)}, M * N);
  for (int i = 0; i < M; i += 5) {
    for (int j = 0; j < N; j += 3) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += a[i * K + k] * b[k * N + j];
      EXPECT_EQ(got[i * N + j], s);
    }
  }
}

TEST_F(CpuEager, IntegerDivisionAndSaturatingCastsAreDefined) {
  const int32_t mn = std::numeric_limits<int32_t>::min();
  GraphBuilder gb;
  int ia = gb.input(LT_DTYPE_I32, {4});
  int ib = gb.input(LT_DTYPE_I32, {4});
  gb.output(gb.op("div", LT_DTYPE_I32, {4}, {ia, ib}));
  auto got =
      run<int32_t>(gb, {upload<int32_t>({7, mn, -7, 5}), upload<int32_t>({0, -1, 2, -2})}, 4);
  EXPECT_EQ(got, (std::vector<int32_t>{0, mn, -3, -2}));

  GraphBuilder gc;
  int x = gc.input(LT_DTYPE_F32, {5});
  gc.output(gc.op("cast", LT_DTYPE_I32, {5}, {x}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto c = run<int32_t>(gc, {upload<float>({nan, 1e10f, -1e10f, -2.9f, 2.9f})}, 5);
  EXPECT_EQ(c, (std::vector<int32_t>{0, std::numeric_limits<int32_t>::max(), mn, -2, 2}));
}

TEST_F(CpuEager, BroadcastReduceAndArgmaxOverAxisSubsets) {
  // x [2,3,4] = i; sum over axes {0,2} keepdims -> [1,3,1]
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = float(i);
  GraphBuilder gb;
  int ix = gb.input(LT_DTYPE_F32, {2, 3, 4});
  gb.output(gb.op("sum", LT_DTYPE_F32, {1, 3, 1}, {ix},
                  {Attr::Ints("axes", {0, 2}), Attr::Int("keepdims", 1)}));
  auto s = run<float>(gb, {upload(x)}, 3);
  for (int j = 0; j < 3; ++j) {
    float want = 0;
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 4; ++k) want += x[i * 12 + j * 4 + k];
    EXPECT_EQ(s[j], want);
  }
  GraphBuilder ga;
  int iy = ga.input(LT_DTYPE_F32, {2, 3});
  ga.output(ga.op("argmax", LT_DTYPE_I64, {3}, {iy}, {Attr::Int("axis", 0)}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto am = run<int64_t>(ga, {upload<float>({1, 5, nan, 2, 5, 3})}, 3);
  EXPECT_EQ(am, (std::vector<int64_t>{1, 0, 0}));
}

TEST_F(CpuEager, SliceNegativeStepGatherClampScatterDrop) {
  GraphBuilder gb;
  int ia = gb.input(LT_DTYPE_I64, {6});
  gb.output(gb.op("slice", LT_DTYPE_I64, {3}, {ia},
                  {Attr::Ints("starts", {5}), Attr::Ints("steps", {-2})}));
  EXPECT_EQ(run<int64_t>(gb, {upload<int64_t>({0, 1, 2, 3, 4, 5})}, 3),
            (std::vector<int64_t>{5, 3, 1}));

  GraphBuilder gg;
  int a = gg.input(LT_DTYPE_F32, {2, 3});
  int idx = gg.input(LT_DTYPE_I32, {3});
  gg.output(gg.op("gather", LT_DTYPE_F32, {2, 3}, {a, idx}, {Attr::Int("axis", 1)}));
  EXPECT_EQ(run<float>(gg, {upload<float>({1, 2, 3, 4, 5, 6}), upload<int32_t>({-5, 9, 1})}, 6),
            (std::vector<float>{1, 3, 2, 4, 6, 5}));

  GraphBuilder gs;
  int b = gs.input(LT_DTYPE_I32, {4});
  int si = gs.input(LT_DTYPE_I64, {4});
  int up = gs.input(LT_DTYPE_I32, {4});
  gs.output(gs.op("scatter_add", LT_DTYPE_I32, {4}, {b, si, up}, {Attr::Int("axis", 0)}));
  EXPECT_EQ(run<int32_t>(gs,
                         {upload<int32_t>({0, 0, 0, 0}), upload<int64_t>({1, 1, -1, 4}),
                          upload<int32_t>({10, 20, 30, 40})},
                         4),
            (std::vector<int32_t>{0, 30, 0, 0}));
}

TEST_F(CpuEager, Conv2dWithStridePaddingDilationGroupsBiasMatchesLoop) {
  const int N = 2, C = 4, H = 7, W = 6, O = 6, G = 2, KH = 3, KW = 2;
  const int sh = 2, sw = 1, ph = 1, pw = 2, dh = 1, dw = 2;
  const int OH = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1;
  const int OW = (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1;
  std::vector<float> x(N * C * H * W), w(O * (C / G) * KH * KW), bias(O);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.1f * i);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.2f * i);
  for (int i = 0; i < O; ++i) bias[i] = 0.5f * i;
  GraphBuilder gb;
  int ix = gb.input(LT_DTYPE_F32, {N, C, H, W});
  int iw = gb.input(LT_DTYPE_F32, {O, C / G, KH, KW});
  int ib = gb.input(LT_DTYPE_F32, {O});
  gb.output(gb.op("conv2d", LT_DTYPE_F32, {N, O, OH, OW}, {ix, iw, ib},
                  {Attr::Ints("stride", {sh, sw}), Attr::Ints("padding", {ph, pw}),
                   Attr::Ints("dilation", {dh, dw}), Attr::Int("groups", G)}));
  auto got = run<float>(gb, {upload(x), upload(w), upload(bias)}, N * O * OH * OW);
  const int Cg = C / G, Og = O / G;
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < O; ++o)
      for (int oh = 0; oh < OH; ++oh)
        for (int ow = 0; ow < OW; ++ow) {
          double s = bias[o];
          for (int c = 0; c < Cg; ++c)
            for (int kh = 0; kh < KH; ++kh)
              for (int kw = 0; kw < KW; ++kw) {
                int ih = oh * sh - ph + kh * dh, iw2 = ow * sw - pw + kw * dw;
                if (ih < 0 || ih >= H || iw2 < 0 || iw2 >= W) continue;
                s += double(x[((n * C + (o / Og) * Cg + c) * H + ih) * W + iw2]) *
                     w[((o * Cg + c) * KH + kh) * KW + kw];
              }
          EXPECT_NEAR(got[((n * O + o) * OH + oh) * OW + ow], s, 1e-4);
        }
}

TEST_F(CpuEager, RandomUniformFollowsLtRandom) {
  GraphBuilder gb;
  int seed = gb.input(LT_DTYPE_I64, {});
  gb.output(gb.op("random_uniform", LT_DTYPE_F32, {100}, {seed},
                  {Attr::Float("low", -2.0), Attr::Float("high", 3.0)}));
  auto got = run<float>(gb, {upload<int64_t>({1234})}, 100);
  for (int i = 0; i < 100; ++i) {
    float u = lt_random_unit_f32(1234, i);
    EXPECT_EQ(got[i], -2.0f + 5.0f * u);
  }
}

TEST_F(CpuEager, SupportsKnownOpsOnlyWithHandledDtypes) {
  GraphBuilder gb;
  int a = gb.input(LT_DTYPE_F32, {3});
  int b = gb.input(LT_DTYPE_BF16, {3});
  gb.op("add", LT_DTYPE_F32, {3}, {a, a});
  gb.op("frobnicate", LT_DTYPE_F32, {3}, {a});
  gb.op("add", LT_DTYPE_BF16, {3}, {b, b});
  gb.op("exp", LT_DTYPE_I32, {3}, {a});
  lt_graph g = gb.graph();
  lt_plugin_supports_args s{};
  s.struct_size = LT_PLUGIN_SUPPORTS_ARGS_STRUCT_SIZE;
  s.context = ctx_;
  s.graph = &g;
  const int want[] = {1, 1, 1, 0, 0, 0};  // bf16 is storage only: no add
  for (size_t i = 0; i < 6; ++i) {
    s.node = i;
    s.supported = -1;
    ASSERT_EQ(check(api_->supports(&s)), LT_STATUS_OK) << last_message_;
    EXPECT_EQ(s.supported, want[i]) << "node " << i;
  }
  s.node = 6;
  EXPECT_EQ(check(api_->supports(&s)), LT_STATUS_INVALID_ARGUMENT);
}

TEST_F(CpuEager, BadCallsReturnErrorValuesNamingTheProblem) {
  lt_plugin_executable* ex = nullptr;
  {
    GraphBuilder gb;
    int a = gb.input(LT_DTYPE_F32, {3});
    gb.output(gb.op("frobnicate", LT_DTYPE_F32, {3}, {a}));
    EXPECT_EQ(compile(gb.graph(), &ex), LT_STATUS_UNKNOWN_OP);
    EXPECT_NE(last_message_.find("frobnicate"), std::string::npos) << last_message_;
  }
  {
    GraphBuilder gb;
    int a = gb.input(LT_DTYPE_F32, {2, 3});
    int b = gb.input(LT_DTYPE_F32, {4});
    gb.output(gb.op("add", LT_DTYPE_F32, {2, 3}, {a, b}));
    EXPECT_EQ(compile(gb.graph(), &ex), LT_STATUS_SHAPE_MISMATCH);
    EXPECT_NE(last_message_.find("cpu_eager: node 2 (add): shapes [2,3] and [4] do not broadcast"),
              std::string::npos)
        << last_message_;
  }
  {
    GraphBuilder gb;
    int a = gb.input(LT_DTYPE_F32, {3});
    gb.output(gb.op("neg", LT_DTYPE_F32, {3}, {a + 5}));  // operand does not precede the node
    EXPECT_EQ(compile(gb.graph(), &ex), LT_STATUS_INVALID_ARGUMENT);
  }
  {
    GraphBuilder gb;
    int a = gb.input(LT_DTYPE_F32, {3});
    gb.output(gb.op("neg", LT_DTYPE_F32, {3}, {a}));
    lt_graph g = gb.graph();
    g.struct_size = 8;
    EXPECT_EQ(compile(g, &ex), LT_STATUS_ABI_MISMATCH);
    ASSERT_EQ(compile(gb.graph(), &ex), LT_STATUS_OK);
    lt_plugin_buffer* small = alloc(4);
    lt_plugin_buffer* ok = alloc(12);
    EXPECT_EQ(execute(ex, {}, {ok}), LT_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(execute(ex, {small}, {ok}), LT_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(last_message_.find("needs 12"), std::string::npos) << last_message_;
    EXPECT_EQ(execute(ex, {ok}, {nullptr}), LT_STATUS_INVALID_ARGUMENT);
    api_->executable_destroy(ctx_, ex);
  }
  lt_plugin_create_args c{};
  c.struct_size = LT_PLUGIN_CREATE_ARGS_STRUCT_SIZE;
  c.core_abi_major = LT_PLUGIN_ABI_MAJOR + 1;
  EXPECT_EQ(check(api_->create(&c)), LT_STATUS_ABI_MISMATCH);
  EXPECT_EQ(check(api_->create(nullptr)), LT_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(check(api_->compile(nullptr)), LT_STATUS_INVALID_ARGUMENT);
}

TEST_F(CpuEager, StatsReportKernelsAndExecutions) {
  GraphBuilder gb;
  int a = gb.input(LT_DTYPE_F32, {3});
  int n = gb.op("neg", LT_DTYPE_F32, {3}, {a});
  gb.op("exp", LT_DTYPE_F32, {3}, {n});  // dead: not an output, never run
  gb.output(gb.op("abs", LT_DTYPE_F32, {3}, {n}));
  gb.output(a);  // an input returned as an output is copied
  lt_plugin_executable* ex = nullptr;
  ASSERT_EQ(compile(gb.graph(), &ex), LT_STATUS_OK) << last_message_;
  lt_plugin_buffer* in = upload<float>({1, -2, 3});
  lt_plugin_buffer* o0 = alloc(12);
  lt_plugin_buffer* o1 = alloc(12);
  ASSERT_EQ(execute(ex, {in}, {o0, o1}), LT_STATUS_OK) << last_message_;
  ASSERT_EQ(execute(ex, {in}, {o0, o1}), LT_STATUS_OK) << last_message_;
  EXPECT_EQ(download<float>(o0, 3), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(download<float>(o1, 3), (std::vector<float>{1, -2, 3}));
  Status st;
  std::map<std::string, double> stats = context().stats(ex, &st);
  ASSERT_EQ(code(st), LT_STATUS_OK);
  EXPECT_EQ(stats["kernels"], 2);
  EXPECT_EQ(stats["executions"], 2);
  api_->executable_destroy(ctx_, ex);
}

TEST_F(CpuEager, LayoutOpsMatchHandComputedResults) {
  using G = GraphBuilder;
  {
    G g;
    int a = g.input(LT_DTYPE_I32, {2, 3});
    g.output(g.op("permute", LT_DTYPE_I32, {3, 2}, {a}, {Attr::Ints("perm", {1, 0})}));
    EXPECT_EQ(run<int32_t>(g, {upload<int32_t>({1, 2, 3, 4, 5, 6})}, 6),
              (std::vector<int32_t>{1, 4, 2, 5, 3, 6}));
  }
  {
    G g;
    int a = g.input(LT_DTYPE_F64, {3, 1});
    g.output(g.op("broadcast_to", LT_DTYPE_F64, {2, 3, 2}, {a}));
    EXPECT_EQ(run<double>(g, {upload<double>({1, 2, 3})}, 12),
              (std::vector<double>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  }
  {
    G g;
    int a = g.input(LT_DTYPE_I64, {2, 1});
    int b = g.input(LT_DTYPE_I64, {2, 2});
    g.output(g.op("concat", LT_DTYPE_I64, {2, 3}, {a, b}, {Attr::Int("axis", 1)}));
    EXPECT_EQ(run<int64_t>(g, {upload<int64_t>({1, 2}), upload<int64_t>({3, 4, 5, 6})}, 6),
              (std::vector<int64_t>{1, 3, 4, 2, 5, 6}));
  }
  {
    G g;
    int a = g.input(LT_DTYPE_F32, {1, 2});
    g.output(g.op(
        "pad", LT_DTYPE_F32, {2, 5}, {a},
        {Attr::Ints("before", {1, 2}), Attr::Ints("after", {0, 1}), Attr::Float("value", -1)}));
    EXPECT_EQ(run<float>(g, {upload<float>({7, 8})}, 10),
              (std::vector<float>{-1, -1, -1, -1, -1, -1, -1, 7, 8, -1}));
  }
  {
    G g;  // where with a broadcast condition and a rank-0 operand
    int c = g.input(LT_DTYPE_BOOL, {2, 1});
    int a = g.input(LT_DTYPE_F32, {2, 2});
    int b = g.input(LT_DTYPE_F32, {});
    g.output(g.op("where", LT_DTYPE_F32, {2, 2}, {c, a, b}));
    EXPECT_EQ(run<float>(
                  g, {upload<uint8_t>({1, 0}), upload<float>({1, 2, 3, 4}), upload<float>({9})}, 4),
              (std::vector<float>{1, 2, 9, 9}));
  }
}

TEST_F(CpuEager, NnOpsMatchHandComputedResults) {
  using G = GraphBuilder;
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  {
    G g;
    int a = g.input(LT_DTYPE_F32, {1, 1, 3, 3});
    g.output(g.op("max_pool2d", LT_DTYPE_F32, {1, 1, 2, 2}, {a},
                  {Attr::Ints("kernel", {2, 2}), Attr::Ints("stride", {2, 2}),
                   Attr::Ints("padding", {1, 1})}));
    EXPECT_EQ(run<float>(g, {upload(x)}, 4), (std::vector<float>{1, 3, 7, 9}));
  }
  {
    G g;
    int a = g.input(LT_DTYPE_F32, {1, 1, 3, 3});
    g.output(g.op("avg_pool2d", LT_DTYPE_F32, {1, 1, 2, 2}, {a},
                  {Attr::Ints("kernel", {2, 2}), Attr::Ints("stride", {1, 1}),
                   Attr::Ints("padding", {0, 0})}));
    EXPECT_EQ(run<float>(g, {upload(x)}, 4), (std::vector<float>{3, 4, 6, 7}));
  }
  {
    G g;
    int a = g.input(LT_DTYPE_F64, {2, 3});
    g.output(g.op("log_softmax", LT_DTYPE_F64, {2, 3}, {a}, {Attr::Int("axis", 0)}));
    auto got = run<double>(g, {upload<double>({1, 2, 3, 1, 4, 1000})}, 6);
    EXPECT_NEAR(got[0], -std::log(2.0), 1e-12);
    EXPECT_NEAR(got[1], 2 - 4 - std::log(1 + std::exp(-2.0)), 1e-12);
    EXPECT_NEAR(got[5], 0.0, 1e-12);
    EXPECT_NEAR(got[2], -997.0, 1e-9);
  }
  {
    G g;
    int a = g.input(LT_DTYPE_F32, {2, 2});
    g.output(g.op("softmax", LT_DTYPE_F32, {2, 2}, {a}, {Attr::Int("axis", 1)}));
    auto got = run<float>(g, {upload<float>({0, 0, 1, 1})}, 4);
    for (float v : got) EXPECT_FLOAT_EQ(v, 0.5f);
  }
}

TEST_F(CpuEager, ZeroSizedAndRankZeroTensors) {
  using G = GraphBuilder;
  {
    G g;  // mean over an empty axis is NaN; sum is 0
    int a = g.input(LT_DTYPE_F32, {3, 0});
    int m =
        g.op("mean", LT_DTYPE_F32, {3}, {a}, {Attr::Ints("axes", {1}), Attr::Int("keepdims", 0)});
    int s =
        g.op("sum", LT_DTYPE_F32, {3}, {a}, {Attr::Ints("axes", {1}), Attr::Int("keepdims", 0)});
    g.output(g.op("add", LT_DTYPE_F32, {3}, {m, s}));
    auto got = run<float>(g, {alloc(0)}, 3);
    for (float v : got) EXPECT_TRUE(std::isnan(v));
  }
  {
    G g;  // empty results from every family
    int a = g.input(LT_DTYPE_F32, {0, 4});
    int b = g.input(LT_DTYPE_F32, {4, 0});
    int e = g.op("exp", LT_DTYPE_F32, {0, 4}, {a});
    int mm = g.op("matmul", LT_DTYPE_F32, {0, 0}, {e, b});
    g.output(g.op("sum", LT_DTYPE_F32, {}, {mm}, {Attr::Ints("axes", {0, 1})}));
    EXPECT_EQ(run<float>(g, {alloc(0), alloc(0)}, 1), (std::vector<float>{0}));
  }
  {
    G g;  // K = 0 matmul gives zeros
    int a = g.input(LT_DTYPE_F64, {2, 0});
    int b = g.input(LT_DTYPE_F64, {0, 3});
    g.output(g.op("matmul", LT_DTYPE_F64, {2, 3}, {a, b}));
    EXPECT_EQ(run<double>(g, {alloc(0), alloc(0)}, 6), std::vector<double>(6, 0.0));
  }
  {
    G g;  // rank-0 arithmetic, full and arange
    int a = g.input(LT_DTYPE_I64, {});
    int f = g.op("full", LT_DTYPE_I64, {}, {}, {Attr::Float("value", 1e30)});
    g.output(g.op("sub", LT_DTYPE_I64, {}, {a, f}));
    EXPECT_EQ(run<int64_t>(g, {upload<int64_t>({-2})}, 1),
              (std::vector<int64_t>{std::numeric_limits<int64_t>::max()}));  // -2 - INT64_MAX wraps
    G h;
    h.output(h.op("arange", LT_DTYPE_I32, {4}, {},
                  {Attr::Float("start", 3), Attr::Float("step", -1.5)}));
    EXPECT_EQ(run<int32_t>(h, {}, 4), (std::vector<int32_t>{3, 1, 0, -1}));
  }
}

TEST_F(CpuEager, OneExecutableRunsFromManyThreadsAtOnce) {
  GraphBuilder gb;
  int a = gb.input(LT_DTYPE_F32, {50000});
  int e = gb.op("mul", LT_DTYPE_F32, {50000}, {a, a});
  int s = gb.op("sum", LT_DTYPE_F32, {}, {e}, {Attr::Ints("axes", {0})});
  gb.output(gb.op("sqrt", LT_DTYPE_F32, {}, {s}));
  lt_plugin_executable* ex = nullptr;
  ASSERT_EQ(compile(gb.graph(), &ex), LT_STATUS_OK) << last_message_;
  std::vector<lt_plugin_buffer*> ins, outs;
  for (int t = 0; t < 4; ++t) {
    ins.push_back(upload(std::vector<float>(50000, float(t))));
    outs.push_back(alloc(4));
  }
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 20; ++r) {
        if (!context().execute(ex, {ins[t]}, {outs[t]}).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (int t = 0; t < 4; ++t) {
    EXPECT_NEAR(download<float>(outs[t], 1)[0], t * std::sqrt(50000.0), 1e-3 * (t + 1));
  }
  api_->executable_destroy(ctx_, ex);
}

TEST_F(CpuEager, StorageTypesCastThroughF32AndMoveAsBytes) {
  using G = GraphBuilder;
  G g;
  int a = g.input(LT_DTYPE_F32, {2, 3});
  int b = g.op("cast", LT_DTYPE_BF16, {2, 3}, {a});
  int p = g.op("permute", LT_DTYPE_BF16, {3, 2}, {b}, {Attr::Ints("perm", {1, 0})});
  int h = g.op("cast", LT_DTYPE_F16, {3, 2}, {p});
  g.output(g.op("cast", LT_DTYPE_F32, {3, 2}, {h}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 1 + 2^-9 rounds to 1 in bf16 (8 mantissa bits); 3.015625 is exact in both.
  auto got = run<float>(
      g, {upload<float>({1.0f + 1.0f / 512, 3.015625f, -2.5f, nan, 65504.0f, 1e-3f})}, 6);
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_EQ(got[2], 3.015625f);
  EXPECT_NEAR(got[5], 1e-3f, 1e-5f);
  EXPECT_EQ(got[4], -2.5f);
  EXPECT_TRUE(std::isinf(got[3]));  // 65504 becomes 65536 in bf16, beyond f16's range
}

TEST_F(CpuEager, MillionNodeChainCompilesAndRuns) {
  const int kNodes = 1000000;
  // Built by hand, not with GraphBuilder: shared operand/shape storage keeps the graph small.
  static const int64_t shape[1] = {4};
  std::vector<lt_graph_node> nodes;
  nodes.reserve(kNodes + 2);
  lt_graph_node input{};
  input.op = "input";
  input.dtype = LT_DTYPE_F32;
  input.rank = 1;
  input.shape = shape;
  nodes.push_back(input);
  nodes.push_back(input);
  int32_t inputs[2] = {0, 1};
  const int x = inputs[0], one = inputs[1];
  std::vector<int32_t> ops(2 * static_cast<size_t>(kNodes));
  int prev = x;
  for (int i = 0; i < kNodes; ++i) {
    ops[2 * i] = prev;
    ops[2 * i + 1] = one;
    lt_graph_node n{};
    n.op = "add";
    n.dtype = LT_DTYPE_F32;
    n.rank = 1;
    n.shape = shape;
    n.num_operands = 2;
    n.operands = &ops[2 * i];
    nodes.push_back(n);
    prev = static_cast<int>(nodes.size() - 1);
  }
  int32_t output = prev;
  lt_graph g{};
  g.struct_size = LT_GRAPH_STRUCT_SIZE;
  g.num_nodes = nodes.size();
  g.nodes = nodes.data();
  g.num_inputs = 2;
  g.inputs = inputs;
  g.num_outputs = 1;
  g.outputs = &output;
  auto got = run<float>(g, {upload<float>({0, 1, 2, 3}), upload<float>({1, 1, 1, 1})}, 4);
  EXPECT_EQ(got, (std::vector<float>{1e6f, 1e6f + 1, 1e6f + 2, 1e6f + 3}));
}

}  // namespace
