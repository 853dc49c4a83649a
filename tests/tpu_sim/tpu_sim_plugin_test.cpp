// tpu_sim_plugin_test.cpp — the tpu_sim plugin driven directly through its C table with
// hand-built graphs: bf16 MXU numerics, vector ops, the cost model, HBM limits, options.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "plugin_harness.hpp"

namespace {

using lt::plugin_test::Attr;
using lt::plugin_test::GraphBuilder;
using lt::plugin_test::Session;
using lt::plugin_test::Status;

// The test's own bf16 round-to-nearest-even (independent of the plugin's).
float bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if (std::isnan(x)) return x;
  uint32_t lsb = (u >> 16) & 1u;
  u = (u + 0x7FFFu + lsb) & 0xFFFF0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

std::vector<float> random_floats(size_t n, unsigned seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

class TpuSim : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    api_ = lt::plugin_test::load_api(LT_TPU_SIM_PLUGIN, &why);
    ASSERT_NE(api_, nullptr) << "cannot load " << LT_TPU_SIM_PLUGIN << ": " << why;
  }
  // Compiles, runs on the given inputs and returns the first output (of `out_numel` T).
  template <typename T, typename In>
  std::vector<T> run(Session& s, GraphBuilder& g, const std::vector<std::vector<In>>& inputs,
                     size_t out_numel) {
    lt_plugin_executable* exe = nullptr;
    Status st = s.compile(g.graph(), &exe);
    EXPECT_TRUE(st.ok()) << st.message;
    if (!st.ok()) return {};
    std::vector<lt_plugin_buffer*> ins;
    for (auto& v : inputs) ins.push_back(s.upload(v));
    lt_plugin_buffer* out = nullptr;
    EXPECT_TRUE(s.alloc(out_numel * sizeof(T), &out).ok());
    st = s.execute(exe, ins, {out});
    EXPECT_TRUE(st.ok()) << st.message;
    auto result = s.download<T>(out, out_numel);
    for (auto* b : ins) s.free(b);
    s.free(out);
    s.destroy(exe);
    return result;
  }
  const lt_plugin_api* api_ = nullptr;
};

TEST_F(TpuSim, ExportsTableWithAbiAndName) {
  EXPECT_EQ(api_->struct_size, LT_PLUGIN_API_STRUCT_SIZE);
  EXPECT_EQ(api_->abi_major, uint32_t(LT_PLUGIN_ABI_MAJOR));
  EXPECT_STREQ(api_->name, "tpu_sim");
  EXPECT_NE(api_->stats, nullptr);
}

TEST_F(TpuSim, DeviceInfoDescribesDefaultV4Machine) {
  Session s(api_);
  ASSERT_TRUE(s.create().ok());
  size_t n = 0;
  ASSERT_EQ(api_->device_count(s.ctx(), &n), nullptr);
  EXPECT_EQ(n, 1u);
  lt_plugin_device_info_args info{};
  info.struct_size = LT_PLUGIN_DEVICE_INFO_ARGS_STRUCT_SIZE;
  info.context = s.ctx();
  ASSERT_EQ(api_->device_info(&info), nullptr);
  EXPECT_STREQ(info.kind, "tpu");
  EXPECT_EQ(info.host_addressable, 1);
  EXPECT_EQ(info.memory_bytes, 32ull << 30);
  std::string d = info.description;
  EXPECT_NE(d.find("v4"), std::string::npos) << d;
  EXPECT_NE(d.find("275.3 TFLOP/s"), std::string::npos) << d;
  EXPECT_NE(d.find("1200 GB/s"), std::string::npos) << d;
}

TEST_F(TpuSim, PresetsLoadPaperFigures) {
  struct Want {
    const char* preset;
    double tflops, hbm_gib;
  };
  for (Want w : {Want{"v2", 45.9, 16}, Want{"v3", 123.2, 32}, Want{"v4", 275.3, 32}}) {
    Session s(api_);
    Status st = s.create({{"preset", w.preset}});
    ASSERT_TRUE(st.ok()) << st.message;
    auto m = s.stats(nullptr);
    EXPECT_NEAR(m["peak_tflops"], w.tflops, 0.1) << w.preset;
    EXPECT_EQ(m["hbm_capacity_bytes"], w.hbm_gib * 1073741824.0) << w.preset;
  }
  Session s(api_);  // an override on top of a preset, in any order
  ASSERT_TRUE(s.create({{"hbm_gib", "8"}, {"preset", "v3"}, {"systolic_array", "256x128"}}).ok());
  auto m = s.stats(nullptr);
  EXPECT_EQ(m["hbm_capacity_bytes"], 8.0 * 1073741824.0);
  EXPECT_NEAR(m["peak_tflops"], 246.4, 0.1);
}

TEST_F(TpuSim, BadOptionValuesGiveClearErrors) {
  struct Bad {
    const char* key;
    const char* value;
    const char* mentions;
  };
  for (Bad b : {Bad{"preset", "v9", "v9"}, Bad{"cores", "-1", "cores"},
                Bad{"clock_mhz", "fast", "clock_mhz"}, Bad{"hbm_gib", "0", "hbm_gib"},
                Bad{"systolic_array", "128x", "systolic_array"},
                Bad{"mxus_per_core", "2.5", "mxus_per_core"},
                Bad{"launch_overhead_us", "nan", "launch_overhead_us"},
                Bad{"warp_size", "32", "unknown option 'warp_size'"}}) {
    Session s(api_);
    Status st = s.create({{b.key, b.value}});
    EXPECT_EQ(st.code, LT_STATUS_INVALID_ARGUMENT) << b.key;
    EXPECT_NE(st.message.find(b.mentions), std::string::npos) << st.message;
    EXPECT_EQ(s.ctx(), nullptr);
  }
}

TEST_F(TpuSim, MatmulMatchesBf16Reference) {
  const int64_t M = 37, K = 300, N = 53;
  GraphBuilder g;
  int32_t a = g.input(LT_DTYPE_F32, {M, K});
  int32_t b = g.input(LT_DTYPE_F32, {K, N});
  g.output(g.op("matmul", LT_DTYPE_F32, {M, N}, {a, b}));
  auto av = random_floats(size_t(M * K), 1), bv = random_floats(size_t(K * N), 2);
  Session s(api_);
  ASSERT_TRUE(s.create().ok());
  auto got = run<float>(s, g, std::vector<std::vector<float>>{av, bv}, size_t(M * N));
  ASSERT_EQ(got.size(), size_t(M * N));
  double max_err_bf16 = 0, max_err_f32 = 0;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      float ref = 0.f, ref32 = 0.f, mag = 0.f;
      for (int64_t k = 0; k < K; ++k) {
        ref += bf16(av[i * K + k]) * bf16(bv[k * N + j]);
        ref32 += av[i * K + k] * bv[k * N + j];
        mag += std::fabs(av[i * K + k] * bv[k * N + j]);
      }
      float v = got[size_t(i * N + j)];
      // Only the summation order may differ: products of bf16 values are exact in f32.
      EXPECT_NEAR(v, ref, 1e-6 * mag + 1e-7) << i << "," << j;
      max_err_bf16 = std::max(max_err_bf16, double(std::fabs(v - ref)));
      max_err_f32 = std::max(max_err_f32, double(std::fabs(v - ref32)));
    }
  }
  // The inputs really were rounded: the result is far closer to bf16 than to f32 math.
  EXPECT_GT(max_err_f32, 20 * max_err_bf16 + 1e-4);
}

TEST_F(TpuSim, BatchedMatmulAndConv2dUseBf16) {
  Session s(api_);
  ASSERT_TRUE(s.create().ok());
  {
    GraphBuilder g;
    int32_t a = g.input(LT_DTYPE_F32, {2, 3, 4});
    int32_t b = g.input(LT_DTYPE_F32, {2, 4, 5});
    g.output(g.op("matmul", LT_DTYPE_F32, {2, 3, 5}, {a, b}));
    auto av = random_floats(24, 3), bv = random_floats(40, 4);
    auto got = run<float>(s, g, std::vector<std::vector<float>>{av, bv}, 30);
    for (int bt = 0; bt < 2; ++bt) {
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 5; ++j) {
          float ref = 0;
          for (int k = 0; k < 4; ++k)
            ref += bf16(av[bt * 12 + i * 4 + k]) * bf16(bv[bt * 20 + k * 5 + j]);
          EXPECT_NEAR(got[size_t(bt * 15 + i * 5 + j)], ref, 1e-6);
        }
      }
    }
  }
  {  // conv2d, stride 2, padding 1, groups 2, bias
    const int64_t N = 2, C = 4, H = 7, W = 6, O = 6, KH = 3, KW = 3, G = 2;
    const int64_t OH = (H + 2 - 3) / 2 + 1, OW = (W + 2 - 3) / 2 + 1;
    GraphBuilder g;
    int32_t x = g.input(LT_DTYPE_F32, {N, C, H, W});
    int32_t w = g.input(LT_DTYPE_F32, {O, C / G, KH, KW});
    int32_t bias = g.input(LT_DTYPE_F32, {O});
    g.output(g.op("conv2d", LT_DTYPE_F32, {N, O, OH, OW}, {x, w, bias},
                  {Attr::Ints("stride", {2, 2}), Attr::Ints("padding", {1, 1}),
                   Attr::Ints("dilation", {1, 1}), Attr::Int("groups", G)}));
    auto xv = random_floats(size_t(N * C * H * W), 5), wv = random_floats(size_t(O * C / G * 9), 6),
         bv = random_floats(size_t(O), 7);
    auto got =
        run<float>(s, g, std::vector<std::vector<float>>{xv, wv, bv}, size_t(N * O * OH * OW));
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t o = 0; o < O; ++o) {
        for (int64_t oh = 0; oh < OH; ++oh) {
          for (int64_t ow = 0; ow < OW; ++ow) {
            float acc = 0;
            int64_t gidx = o / (O / G);
            for (int64_t c = 0; c < C / G; ++c) {
              for (int64_t kh = 0; kh < KH; ++kh) {
                for (int64_t kw = 0; kw < KW; ++kw) {
                  int64_t ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                  acc += bf16(xv[size_t(((n * C + gidx * (C / G) + c) * H + ih) * W + iw)]) *
                         bf16(wv[size_t(((o * (C / G) + c) * KH + kh) * KW + kw)]);
                }
              }
            }
            acc += bv[size_t(o)];
            EXPECT_NEAR(got[size_t(((n * O + o) * OH + oh) * OW + ow)], acc, 1e-5);
          }
        }
      }
    }
  }
}

TEST_F(TpuSim, VectorUnitOpsInF32WithBroadcasting) {
  Session s(api_);
  ASSERT_TRUE(s.create().ok());
  // out = sum(exp(a + b), axis 1) with b broadcast along rows, through a fused chain.
  GraphBuilder g;
  int32_t a = g.input(LT_DTYPE_F32, {3, 4});
  int32_t b = g.input(LT_DTYPE_F32, {4});
  int32_t add = g.op("add", LT_DTYPE_F32, {3, 4}, {a, b});
  int32_t e = g.op("exp", LT_DTYPE_F32, {3, 4}, {add});
  g.output(
      g.op("sum", LT_DTYPE_F32, {3}, {e}, {Attr::Ints("axes", {1}), Attr::Int("keepdims", 0)}));
  std::vector<float> av = random_floats(12, 8), bv = random_floats(4, 9);
  auto got = run<float>(s, g, std::vector<std::vector<float>>{av, bv}, 3);
  for (int i = 0; i < 3; ++i) {
    float ref = 0;
    for (int j = 0; j < 4; ++j) ref += std::exp(av[size_t(i * 4 + j)] + bv[size_t(j)]);
    EXPECT_NEAR(got[size_t(i)], ref, 1e-5f * std::fabs(ref));
  }
}

TEST_F(TpuSim, IntegerOpsWrapAndDivideByZeroIsZero) {
  Session s(api_);
  ASSERT_TRUE(s.create().ok());
  GraphBuilder g;
  int32_t a = g.input(LT_DTYPE_I32, {4});
  int32_t b = g.input(LT_DTYPE_I32, {4});
  g.output(g.op("div", LT_DTYPE_I32, {4}, {a, b}));
  std::vector<int32_t> av{7, -7, INT32_MIN, 5}, bv{2, 2, -1, 0};
  auto got = run<int32_t>(s, g, std::vector<std::vector<int32_t>>{av, bv}, 4);
  EXPECT_EQ(got, (std::vector<int32_t>{3, -3, INT32_MIN, 0}));
}

TEST_F(TpuSim, LayoutOps) {
  Session s(api_);
  ASSERT_TRUE(s.create().ok());
  std::vector<float> x(6);
  for (int i = 0; i < 6; ++i) x[size_t(i)] = float(i);  // [[0,1,2],[3,4,5]]
  {
    GraphBuilder g;
    int32_t a = g.input(LT_DTYPE_F32, {2, 3});
    g.output(g.op("permute", LT_DTYPE_F32, {3, 2}, {a}, {Attr::Ints("perm", {1, 0})}));
    EXPECT_EQ(run<float>(s, g, std::vector<std::vector<float>>{x}, 6),
              (std::vector<float>{0, 3, 1, 4, 2, 5}));
  }
  {
    GraphBuilder g;
    int32_t a = g.input(LT_DTYPE_F32, {2, 3});
    g.output(g.op("slice", LT_DTYPE_F32, {2, 2}, {a},
                  {Attr::Ints("starts", {1, 2}), Attr::Ints("steps", {-1, -2})}));
    EXPECT_EQ(run<float>(s, g, std::vector<std::vector<float>>{x}, 4),
              (std::vector<float>{5, 3, 2, 0}));
  }
  {
    GraphBuilder g;
    int32_t a = g.input(LT_DTYPE_F32, {2, 3});
    int32_t p =
        g.op("pad", LT_DTYPE_F32, {2, 5}, {a},
             {Attr::Ints("before", {0, 1}), Attr::Ints("after", {0, 1}), Attr::Float("value", -1)});
    g.output(g.op("concat", LT_DTYPE_F32, {4, 5}, {p, p}, {Attr::Int("axis", 0)}));
    auto got = run<float>(s, g, std::vector<std::vector<float>>{x}, 20);
    std::vector<float> row = {-1, 0, 1, 2, -1, -1, 3, 4, 5, -1};
    row.insert(row.end(), row.begin(), row.end());
    EXPECT_EQ(got, row);
  }
  {
    GraphBuilder g;
    int32_t a = g.input(LT_DTYPE_F32, {2, 3});
    int32_t idx = g.input(LT_DTYPE_I32, {4});
    g.output(g.op("gather", LT_DTYPE_F32, {2, 4}, {a, idx}, {Attr::Int("axis", 1)}));
    lt_plugin_executable* exe = nullptr;
    ASSERT_TRUE(s.compile(g.graph(), &exe).ok());
    auto* ab = s.upload(x);
    auto* ib = s.upload(std::vector<int32_t>{2, -5, 9, 1});
    lt_plugin_buffer* out = nullptr;
    ASSERT_TRUE(s.alloc(32, &out).ok());
    ASSERT_TRUE(s.execute(exe, {ab, ib}, {out}).ok());
    EXPECT_EQ(s.download<float>(out, 8), (std::vector<float>{2, 0, 2, 1, 5, 3, 5, 4}));
    s.free(ab), s.free(ib), s.free(out), s.destroy(exe);
  }
}

TEST_F(TpuSim, NnAndConversionOps) {
  Session s(api_);
  ASSERT_TRUE(s.create().ok());
  {  // softmax over the last axis, then max_pool2d 2x2 stride 2 on the [1,1,2,4] result
    GraphBuilder g;
    int32_t a = g.input(LT_DTYPE_F32, {1, 1, 2, 4});
    int32_t sm = g.op("softmax", LT_DTYPE_F32, {1, 1, 2, 4}, {a}, {Attr::Int("axis", 3)});
    g.output(g.op("max_pool2d", LT_DTYPE_F32, {1, 1, 1, 2}, {sm},
                  {Attr::Ints("kernel", {2, 2}), Attr::Ints("stride", {2, 2}),
                   Attr::Ints("padding", {0, 0})}));
    std::vector<float> x{0, 0, 0, 0, 1, 2, 3, 4};
    auto got = run<float>(s, g, std::vector<std::vector<float>>{x}, 2);
    float z = std::exp(1.f) + std::exp(2.f) + std::exp(3.f) + std::exp(4.f);
    EXPECT_NEAR(got[0], 0.25f, 1e-6f);
    EXPECT_NEAR(got[1], std::exp(4.f) / z, 1e-6f);
  }
  {  // cast f32 -> i32 truncates, saturates, NaN -> 0; where picks with a broadcast cond
    GraphBuilder g;
    int32_t a = g.input(LT_DTYPE_F32, {2, 3});
    int32_t c = g.input(LT_DTYPE_BOOL, {3});
    int32_t i = g.op("cast", LT_DTYPE_I32, {2, 3}, {a});
    int32_t neg = g.op("neg", LT_DTYPE_I32, {2, 3}, {i});
    g.output(g.op("where", LT_DTYPE_I32, {2, 3}, {c, i, neg}));
    lt_plugin_executable* exe = nullptr;
    ASSERT_TRUE(s.compile(g.graph(), &exe).ok());
    auto* ab = s.upload(std::vector<float>{-2.7f, 1e10f, NAN, 3.9f, -1e10f, 0.5f});
    auto* cb = s.upload(std::vector<uint8_t>{1, 1, 0});
    lt_plugin_buffer* out = nullptr;
    ASSERT_TRUE(s.alloc(24, &out).ok());
    ASSERT_TRUE(s.execute(exe, {ab, cb}, {out}).ok());
    EXPECT_EQ(s.download<int32_t>(out, 6),
              (std::vector<int32_t>{-2, INT32_MAX, 0, 3, INT32_MIN, 0}));
    s.free(ab), s.free(cb), s.free(out), s.destroy(exe);
  }
}

TEST_F(TpuSim, SupportsRejectsLackingOpsAndDtypes) {
  Session s(api_);
  ASSERT_TRUE(s.create().ok());
  GraphBuilder g;
  int32_t f = g.input(LT_DTYPE_F32, {8});
  int32_t d = g.input(LT_DTYPE_F64, {8});
  int32_t l = g.input(LT_DTYPE_I64, {8});
  int32_t seed = g.input(LT_DTYPE_I64, {});
  int32_t idx = g.input(LT_DTYPE_I32, {8});
  int32_t ok_add = g.op("add", LT_DTYPE_F32, {8}, {f, f});
  int32_t f64_add = g.op("add", LT_DTYPE_F64, {8}, {d, d});
  int32_t i64_neg = g.op("neg", LT_DTYPE_I64, {8}, {l});
  int32_t i64_add = g.op("add", LT_DTYPE_I64, {8}, {l, l});
  int32_t i64_div = g.op("div", LT_DTYPE_I64, {8}, {l, l});
  int32_t argmax =
      g.op("argmax", LT_DTYPE_I64, {}, {f}, {Attr::Int("axis", 0), Attr::Int("keepdims", 0)});
  int32_t bools = g.input(LT_DTYPE_BOOL, {8});
  int32_t argmax_bool =
      g.op("argmax", LT_DTYPE_I64, {}, {bools}, {Attr::Int("axis", 0), Attr::Int("keepdims", 0)});
  int32_t i64_eq = g.op("eq", LT_DTYPE_BOOL, {8}, {l, l});
  int32_t i64_sum =
      g.op("sum", LT_DTYPE_I64, {}, {l}, {Attr::Ints("axes", {0}), Attr::Int("keepdims", 0)});
  int32_t f64_cast = g.op("cast", LT_DTYPE_F64, {8}, {l});
  int32_t scatter = g.op("scatter_add", LT_DTYPE_F32, {8}, {f, idx, f}, {Attr::Int("axis", 0)});
  int32_t rnd = g.op("random_uniform", LT_DTYPE_F32, {8}, {seed},
                     {Attr::Float("low", 0), Attr::Float("high", 1)});
  int32_t to_f32 = g.op("cast", LT_DTYPE_F32, {8}, {d});
  int32_t exp_i32 = g.op("exp", LT_DTYPE_I32, {8}, {idx});
  const lt_graph* graph = &g.graph();
  auto supported = [&](int32_t node) {
    lt_plugin_supports_args a{};
    a.struct_size = LT_PLUGIN_SUPPORTS_ARGS_STRUCT_SIZE;
    a.context = s.ctx();
    a.graph = graph;
    a.node = size_t(node);
    EXPECT_EQ(api_->supports(&a), nullptr);
    return a.supported;
  };
  // i64 is emulated (two s32 words): index bookkeeping and add/sub/mul run here, div does not.
  // The counter-based random ops run on the vector unit.
  for (int32_t n : {ok_add, argmax, i64_eq, i64_sum, i64_neg, i64_add, scatter, rnd}) {
    EXPECT_EQ(supported(n), 1) << graph->nodes[n].op;
  }
  for (int32_t n : {f64_add, i64_div, argmax_bool, f64_cast, to_f32, exp_i32}) {
    EXPECT_EQ(supported(n), 0) << graph->nodes[n].op;
  }
  // compile refuses the same nodes rather than miscomputing them
  GraphBuilder g2;
  int32_t x = g2.input(LT_DTYPE_I64, {8});
  g2.output(g2.op("div", LT_DTYPE_I64, {8}, {x, x}));
  lt_plugin_executable* exe = nullptr;
  Status st = s.compile(g2.graph(), &exe);
  EXPECT_EQ(st.code, LT_STATUS_UNSUPPORTED);
  EXPECT_NE(st.message.find("div"), std::string::npos) << st.message;
  EXPECT_NE(st.message.find("i64"), std::string::npos) << st.message;
}

// The evaluation pass of a classifier (argmax == label, counted) stays on the chip.
TEST_F(TpuSim, I64IndexBookkeepingCountsCorrectPredictions) {
  Session s(api_);
  ASSERT_TRUE(s.create().ok());
  GraphBuilder g;
  int32_t x = g.input(LT_DTYPE_F32, {3, 3});
  int32_t y = g.input(LT_DTYPE_I32, {3});
  int32_t am =
      g.op("argmax", LT_DTYPE_I64, {3}, {x}, {Attr::Int("axis", 1), Attr::Int("keepdims", 0)});
  int32_t eq = g.op("eq", LT_DTYPE_BOOL, {3}, {am, g.op("cast", LT_DTYPE_I64, {3}, {y})});
  int32_t cnt = g.op("sum", LT_DTYPE_I64, {}, {g.op("cast", LT_DTYPE_I64, {3}, {eq})},
                     {Attr::Ints("axes", {0}), Attr::Int("keepdims", 0)});
  g.output(g.op("reshape", LT_DTYPE_I64, {1}, {cnt}));
  g.output(am);
  lt_plugin_executable* exe = nullptr;
  Status st = s.compile(g.graph(), &exe);
  ASSERT_TRUE(st.ok()) << st.message;
  // row 0: max at 1; row 1: ties keep the first (0); row 2: the first NaN is the maximum (2)
  auto* xb = s.upload(std::vector<float>{1, 5, 2, 7, 7, 3, 0, 1, NAN});
  auto* yb = s.upload(std::vector<int32_t>{1, 2, 2});
  lt_plugin_buffer *cb = nullptr, *ab = nullptr;
  ASSERT_TRUE(s.alloc(8, &cb).ok());
  ASSERT_TRUE(s.alloc(24, &ab).ok());
  ASSERT_TRUE(s.execute(exe, {xb, yb}, {cb, ab}).ok());
  EXPECT_EQ(s.download<int64_t>(cb, 1), (std::vector<int64_t>{2}));
  EXPECT_EQ(s.download<int64_t>(ab, 3), (std::vector<int64_t>{1, 0, 2}));
  auto st_exe = s.stats(exe);
  EXPECT_GT(st_exe["simulated_ns"], 0.0);
  s.free(xb), s.free(yb), s.free(cb), s.free(ab), s.destroy(exe);
}

TEST_F(TpuSim, I64CastsSaturateFromFloatAndWrapToI32) {
  Session s(api_);
  ASSERT_TRUE(s.create().ok());
  {
    GraphBuilder g;
    int32_t a = g.input(LT_DTYPE_F32, {5});
    g.output(g.op("cast", LT_DTYPE_I64, {5}, {a}));
    auto got =
        run<int64_t>(s, g, std::vector<std::vector<float>>{{1e30f, -1e30f, NAN, -2.7f, 3.9f}}, 5);
    EXPECT_EQ(got, (std::vector<int64_t>{INT64_MAX, INT64_MIN, 0, -2, 3}));
  }
  {
    GraphBuilder g;
    int32_t a = g.input(LT_DTYPE_I64, {3});
    int32_t i = g.op("cast", LT_DTYPE_I32, {3}, {a});
    g.output(i);
    auto got = run<int32_t>(
        s, g, std::vector<std::vector<int64_t>>{{(int64_t(1) << 32) + 5, -1, int64_t(1) << 31}}, 3);
    EXPECT_EQ(got, (std::vector<int32_t>{5, -1, INT32_MIN}));
  }
  {  // layout ops move 8-byte elements: transpose of an i64 [2,3]
    GraphBuilder g;
    int32_t a = g.input(LT_DTYPE_I64, {2, 3});
    g.output(g.op("permute", LT_DTYPE_I64, {3, 2}, {a}, {Attr::Ints("perm", {1, 0})}));
    int64_t big = int64_t(1) << 40;
    auto got =
        run<int64_t>(s, g, std::vector<std::vector<int64_t>>{{0, 1, 2, big, big + 1, big + 2}}, 6);
    EXPECT_EQ(got, (std::vector<int64_t>{0, big, 1, big + 1, 2, big + 2}));
  }
}

// max_pool2d's gradient: i64 flat indices (add/mul wrap like s64) and scatter_add into zeros.
TEST_F(TpuSim, I64ArithmeticAndScatterAdd) {
  Session s(api_);
  ASSERT_TRUE(s.create().ok());
  {
    GraphBuilder g;
    int32_t a = g.input(LT_DTYPE_I64, {3});
    int32_t b = g.input(LT_DTYPE_I64, {3});
    int32_t sum = g.op("add", LT_DTYPE_I64, {3}, {a, b});
    int32_t prod = g.op("mul", LT_DTYPE_I64, {3}, {sum, b});
    g.output(g.op("neg", LT_DTYPE_I64, {3}, {prod}));
    const int64_t big = int64_t(1) << 40;
    auto got =
        run<int64_t>(s, g, std::vector<std::vector<int64_t>>{{big, INT64_MAX, -3}, {1, 1, 2}}, 3);
    EXPECT_EQ(got, (std::vector<int64_t>{-(big + 1), INT64_MIN, 2}));  // INT64_MAX + 1 wraps
  }
  {  // rows of a [4,2] get updates[j] at idx[j]; 9 and -1 are dropped, 1 repeats
    GraphBuilder g;
    int32_t a = g.input(LT_DTYPE_F32, {4, 2});
    int32_t ix = g.input(LT_DTYPE_I64, {4});
    int32_t up = g.input(LT_DTYPE_F32, {4, 2});
    g.output(g.op("scatter_add", LT_DTYPE_F32, {4, 2}, {a, ix, up}, {Attr::Int("axis", 0)}));
    lt_plugin_executable* exe = nullptr;
    Status st = s.compile(g.graph(), &exe);
    ASSERT_TRUE(st.ok()) << st.message;
    auto* ab = s.upload(std::vector<float>{1, 1, 1, 1, 1, 1, 1, 1});
    auto* ib = s.upload(std::vector<int64_t>{1, 9, 1, -1});
    auto* ub = s.upload(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});
    lt_plugin_buffer* out = nullptr;
    ASSERT_TRUE(s.alloc(32, &out).ok());
    ASSERT_TRUE(s.execute(exe, {ab, ib, ub}, {out}).ok());
    EXPECT_EQ(s.download<float>(out, 8), (std::vector<float>{1, 1, 7, 9, 1, 1, 1, 1}));
    s.free(ab), s.free(ib), s.free(ub), s.free(out), s.destroy(exe);
  }
}

TEST_F(TpuSim, MalformedGraphIsInvalidArgumentNamingTheNode) {
  Session s(api_);
  ASSERT_TRUE(s.create().ok());
  GraphBuilder g;
  int32_t a = g.input(LT_DTYPE_F32, {4, 5});
  int32_t b = g.input(LT_DTYPE_F32, {6, 7});
  g.output(g.op("matmul", LT_DTYPE_F32, {4, 7}, {a, b}));
  lt_plugin_executable* exe = nullptr;
  Status st = s.compile(g.graph(), &exe);
  EXPECT_EQ(st.code, LT_STATUS_SHAPE_MISMATCH);  // the shared validator's category for shapes
  EXPECT_NE(st.message.find("matmul"), std::string::npos) << st.message;
  EXPECT_NE(st.message.find("[4,5]"), std::string::npos) << st.message;
}

// --- cost model -----------------------------------------------------------------------

std::map<std::string, double> compile_stats(Session& s, GraphBuilder& g) {
  lt_plugin_executable* exe = nullptr;
  Status st = s.compile(g.graph(), &exe);
  EXPECT_TRUE(st.ok()) << st.message;
  if (!st.ok()) return {};
  auto m = s.stats(exe);
  s.destroy(exe);
  return m;
}

std::map<std::string, double> matmul_stats(Session& s, int64_t M, int64_t K, int64_t N) {
  GraphBuilder g;
  int32_t a = g.input(LT_DTYPE_F32, {M, K});
  int32_t b = g.input(LT_DTYPE_F32, {K, N});
  g.output(g.op("matmul", LT_DTYPE_F32, {M, N}, {a, b}));
  return compile_stats(s, g);
}

TEST_F(TpuSim, LargeSquareMatmulIsComputeBound) {
  Session s(api_);
  ASSERT_TRUE(s.create().ok());  // v4: 275.25 TFLOP/s
  const double peak = s.stats(nullptr)["peak_tflops"] * 1e12;
  const int64_t n = 8192;
  auto m = matmul_stats(s, n, n, n);
  const double flops = 2.0 * double(n) * double(n) * double(n);
  EXPECT_EQ(m["flops"], flops);
  const double ideal_ns = flops / peak * 1e9;
  EXPECT_NEAR(m["simulated_ns"], ideal_ns, 0.10 * ideal_ns);
  EXPECT_GE(m["simulated_ns"], ideal_ns);
  EXPECT_GT(m["mxu_utilization"], 0.9);
  EXPECT_LE(m["mxu_utilization"], 1.0);
  EXPECT_GT(m["hbm_bytes"], 3.0 * double(n * n) * 4.0);  // at least A, B and C once
}

TEST_F(TpuSim, LargeElementwiseIsBandwidthBound) {
  Session s(api_);
  ASSERT_TRUE(s.create().ok());
  const int64_t rows = 8192, cols = 8192;
  GraphBuilder g;
  int32_t a = g.input(LT_DTYPE_F32, {rows, cols});
  int32_t b = g.input(LT_DTYPE_F32, {rows, cols});
  g.output(g.op("add", LT_DTYPE_F32, {rows, cols}, {a, b}));
  auto m = compile_stats(s, g);
  const double bytes = 3.0 * double(rows * cols) * 4.0;
  EXPECT_EQ(m["hbm_bytes"], bytes);
  const double ideal_ns = bytes / 1200e9 * 1e9;
  EXPECT_NEAR(m["simulated_ns"], ideal_ns, 0.10 * ideal_ns);
  EXPECT_EQ(m["flops"], 0.0);
  EXPECT_EQ(m["mxu_utilization"], 0.0);
}

TEST_F(TpuSim, ElementwiseChainIsFusedInVmem) {
  Session s(api_);
  ASSERT_TRUE(s.create().ok());
  GraphBuilder g;
  int32_t a = g.input(LT_DTYPE_F32, {1024, 1024});
  int32_t e = g.op("exp", LT_DTYPE_F32, {1024, 1024}, {a});
  int32_t t = g.op("tanh", LT_DTYPE_F32, {1024, 1024}, {e});
  g.output(g.op("neg", LT_DTYPE_F32, {1024, 1024}, {t}));
  auto m = compile_stats(s, g);
  EXPECT_EQ(m["hbm_bytes"], 2.0 * 1024 * 1024 * 4);  // read a once, write the result once
}

TEST_F(TpuSim, MatmulDimensionOf129PaysForPaddingTo256) {
  Session s(api_);
  ASSERT_TRUE(s.create().ok());
  for (int dim = 0; dim < 3; ++dim) {
    int64_t d128[3] = {2048, 2048, 2048}, d129[3] = {2048, 2048, 2048},
            d256[3] = {2048, 2048, 2048};
    d128[dim] = 128, d129[dim] = 129, d256[dim] = 256;
    auto m128 = matmul_stats(s, d128[0], d128[1], d128[2]);
    auto m129 = matmul_stats(s, d129[0], d129[1], d129[2]);
    auto m256 = matmul_stats(s, d256[0], d256[1], d256[2]);
    EXPECT_EQ(m129["padded_flops"], m256["padded_flops"]) << "dim " << dim;
    EXPECT_EQ(m129["mxu_ns"], m256["mxu_ns"]) << "dim " << dim;
    EXPECT_NEAR(m129["mxu_ns"], 2.0 * m128["mxu_ns"], 1e-6 * m128["mxu_ns"]) << "dim " << dim;
    EXPECT_NEAR(m129["flops"], m128["flops"] * 129.0 / 128.0, 1.0);
    EXPECT_LT(m129["mxu_utilization"], 0.55 * m256["mxu_utilization"] * 256.0 / 129.0 * 1.0);
  }
}

TEST_F(TpuSim, ProgramOverHbmCapacityFailsWithSizes) {
  Session s(api_);
  ASSERT_TRUE(s.create({{"preset", "v2"}}).ok());  // 16 GiB
  GraphBuilder g;
  int32_t a = g.input(LT_DTYPE_F32, {65536, 32768});  // 8 GiB each
  int32_t b = g.input(LT_DTYPE_F32, {65536, 32768});
  int32_t sum = g.op("add", LT_DTYPE_F32, {65536, 32768}, {a, b});
  g.output(g.op("reshape", LT_DTYPE_F32, {32768, 65536}, {sum}));
  lt_plugin_executable* exe = nullptr;
  Status st = s.compile(g.graph(), &exe);
  EXPECT_EQ(st.code, LT_STATUS_OUT_OF_MEMORY);
  EXPECT_NE(st.message.find("needs 32.0 GiB of HBM"), std::string::npos) << st.message;
  EXPECT_NE(st.message.find("capacity 16.0 GiB"), std::string::npos) << st.message;
  EXPECT_NE(st.message.find("peak intermediates 8.0 GiB"), std::string::npos) << st.message;
}

TEST_F(TpuSim, BufferAllocCountsAgainstHbm) {
  Session s(api_);
  ASSERT_TRUE(s.create({{"hbm_gib", "0.0009765625"}}).ok());  // 1 MiB
  lt_plugin_buffer *a = nullptr, *b = nullptr;
  ASSERT_TRUE(s.alloc(600 << 10, &a).ok());
  Status st = s.alloc(600 << 10, &b);
  EXPECT_EQ(st.code, LT_STATUS_OUT_OF_MEMORY);
  EXPECT_NE(st.message.find("cannot allocate 600.0 KiB of HBM: 600.0 KiB of 1.0 MiB in use"),
            std::string::npos)
      << st.message;
  EXPECT_EQ(s.stats(nullptr)["hbm_in_use_bytes"], double(600 << 10));
  s.free(a);
  ASSERT_TRUE(s.alloc(600 << 10, &b).ok());
  s.free(b);
  EXPECT_EQ(s.stats(nullptr)["hbm_in_use_bytes"], 0.0);
}

TEST_F(TpuSim, ExecuteAccumulatesContextStats) {
  Session s(api_);
  ASSERT_TRUE(s.create({{"launch_overhead_us", "10"}}).ok());
  GraphBuilder g;
  int32_t a = g.input(LT_DTYPE_F32, {64, 64});
  g.output(g.op("matmul", LT_DTYPE_F32, {64, 64}, {a, a}));
  lt_plugin_executable* exe = nullptr;
  ASSERT_TRUE(s.compile(g.graph(), &exe).ok());
  auto* in = s.upload(std::vector<float>(64 * 64, 1.f));
  lt_plugin_buffer* out = nullptr;
  ASSERT_TRUE(s.alloc(64 * 64 * 4, &out).ok());
  ASSERT_TRUE(s.execute(exe, {in}, {out}).ok());
  ASSERT_TRUE(s.execute(exe, {in}, {out}).ok());
  auto e = s.stats(exe), c = s.stats(nullptr);
  EXPECT_GE(e["simulated_ns"], 10000.0);  // the launch cost
  EXPECT_EQ(e["executions"], 2.0);
  EXPECT_EQ(c["executions"], 2.0);
  EXPECT_DOUBLE_EQ(c["simulated_ns"], 2 * e["simulated_ns"]);
  EXPECT_DOUBLE_EQ(c["flops"], 2 * 2.0 * 64 * 64 * 64);
  EXPECT_GT(c["mxu_utilization"], 0.0);
  EXPECT_EQ(s.download<float>(out, 1)[0], 64.f);
  // wrong buffer counts are refused, not run
  Status st = s.execute(exe, {}, {out});
  EXPECT_EQ(st.code, LT_STATUS_INVALID_ARGUMENT);
  s.free(in), s.free(out), s.destroy(exe);
}

}  // namespace
