// CpuJitTest.cpp — cpu_jit through its plugin table: one kernel per fused chain, softmax
// (declined, then decomposed) in one kernel, random and arange ops fused, host-kernel steps
// (gather, pools, concat, pad, argmax, scatter_add) inside the same program, plugin compile
// cache, numerics vs plain loops, exp/log/tanh/sigmoid/gelu accuracy sweeps against
// double-precision libm. Every test runs once per vector width the
// plugin can be narrowed to (option vector_bits), so each math code path (AVX-512 vscalefps,
// the generic exponent arithmetic, SSE) is checked on a host that has them all.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "lazytensor/lt_random.h"
#include "plugin_harness.hpp"

namespace {

using lt::fusion::OwnedGraph;
using lt::plugin_test::Session;
using lt::plugin_test::Status;

class CpuJit : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    api_ = lt::plugin_test::load_api(LT_CPU_JIT_PLUGIN, &why);
    ASSERT_NE(api_, nullptr) << why;
  }
  static void TearDownTestSuite() { sessions_.clear(); }
  // One context per vector_bits value, shared by the tests of that width.
  void SetUp() override {
    ASSERT_NE(api_, nullptr);
    std::unique_ptr<Session>& s = sessions_[GetParam()];
    if (!s || !s->ctx()) {
      s = std::make_unique<Session>(api_);
      // No persistent compile cache: these tests look at what the code generator makes (the
      // dumped modules), which a warm cache would skip.
      ASSERT_EQ(s->create({{"vector_bits", GetParam()}, {"disk_cache", "0"}}).message, "");
    }
    session_ = s.get();
    ctx_ = s->ctx();
  }

  // Creates a context with `options`; returns the error message ("" on success).
  std::string create(const lt::plugin_test::Options& options, lt_plugin_context** out) {
    return lt::plugin_test::create_context(api_, options, out).message;
  }

  std::string err(lt_plugin_error* e) { return lt::plugin_test::take(api_, e).message; }

  lt::plugin_test::Stats stats(lt_plugin_executable* ex) {
    Status st;
    lt::plugin_test::Stats m = session_->stats(ex, &st);
    EXPECT_EQ(st.message, "");
    return m;
  }

  // Whether the plugin claims node i of g.
  int supported(const lt_graph& g, size_t i) {
    int s = -1;
    EXPECT_EQ(session_->supports(g, i, &s).message, "");
    return s;
  }

  // Compiles g (every node must be claimed, but the composites that reach cpu_jit decomposed:
  // compile decomposes them as the core does), runs it on raw inputs, returns raw outputs and
  // the kernel count.
  std::vector<std::vector<char>> run_raw(OwnedGraph& og, const std::vector<std::vector<char>>& in,
                                         double* kernels = nullptr) {
    const lt_graph& g = og.view();
    for (size_t i = 0; i < g.num_nodes; ++i) {
      const std::string op = g.nodes[i].op;
      const bool decomposed = op == "random_uniform";
      EXPECT_EQ(supported(g, i), decomposed ? 0 : 1) << "node " << i << " " << op;
    }
    std::vector<std::vector<char>> out;
    lt::plugin_test::Stats exe_stats;
    Status st = session_->run(g, in, &out, &exe_stats);
    EXPECT_EQ(st.message, "");
    if (!st.ok()) return {};
    if (kernels) *kernels = exe_stats["kernels"];
    return out;
  }
  // The same on float inputs and outputs.
  std::vector<std::vector<float>> run(OwnedGraph& og, const std::vector<std::vector<float>>& in,
                                      double* kernels = nullptr) {
    std::vector<std::vector<char>> in_bytes;
    for (const auto& v : in) in_bytes.push_back(lt::plugin_test::raw(v));
    std::vector<std::vector<float>> res;
    for (const auto& o : run_raw(og, in_bytes, kernels))
      res.push_back(lt::plugin_test::as<float>(o));
    return res;
  }

  // Runs g with LT_CPU_JIT_DUMP set to a fresh directory and counts the fdiv instructions
  // in the optimised module it dumps (the graph must not be in the compile cache yet).
  int fdivs(OwnedGraph& g, const std::vector<std::vector<float>>& in) {
    static int calls = 0;
    std::filesystem::path dir =
        std::filesystem::path(::testing::TempDir()) /
        ("lt_cpu_jit_fdivs_" + std::to_string(::getpid()) + "_" + std::to_string(calls++));
    std::filesystem::create_directories(dir);
    ::setenv("LT_CPU_JIT_DUMP", dir.c_str(), 1);
    run(g, in);
    ::unsetenv("LT_CPU_JIT_DUMP");
    int count = 0, files = 0;
    for (const auto& f : std::filesystem::directory_iterator(dir)) {
      ++files;
      std::ifstream text(f.path());
      for (std::string line; std::getline(text, line);)
        count += line.find(" = fdiv ") != std::string::npos;
    }
    std::filesystem::remove_all(dir);
    EXPECT_EQ(files, 1) << "expected one dumped module";
    return count;
  }

  static std::vector<float> random(size_t n, float lo, float hi, unsigned seed = 1) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
  }

  static const lt_plugin_api* api_;
  static std::map<std::string, std::unique_ptr<Session>> sessions_;
  Session* session_ = nullptr;
  lt_plugin_context* ctx_ = nullptr;
};
const lt_plugin_api* CpuJit::api_ = nullptr;
std::map<std::string, std::unique_ptr<Session>> CpuJit::sessions_;

INSTANTIATE_TEST_SUITE_P(VectorBits, CpuJit, ::testing::Values("auto", "256", "128"),
                         [](const auto& info) { return "bits_" + info.param; });

TEST_P(CpuJit, OptionsAreCheckedAndNamed) {
  lt_plugin_context* c = nullptr;
  EXPECT_NE(create({{"vector_bits", "300"}}, &c).find("vector_bits = '300'"), std::string::npos);
  EXPECT_EQ(c, nullptr);
  EXPECT_NE(create({{"opt_level", "3"}}, &c).find("unknown option 'opt_level'"), std::string::npos);
  EXPECT_EQ(c, nullptr);
}

TEST_P(CpuJit, ElementwiseChainOfEightCompilesToOneKernel) {
  const int64_t R = 300, C = 70;
  OwnedGraph g;
  int32_t x = g.add("input", LT_DTYPE_F32, {R, C}, {});
  int32_t b = g.add("input", LT_DTYPE_F32, {C}, {});
  int32_t v = g.add("exp", LT_DTYPE_F32, {R, C}, {x});
  v = g.add("add", LT_DTYPE_F32, {R, C}, {v, b});
  v = g.add("tanh", LT_DTYPE_F32, {R, C}, {v});
  v = g.add("mul", LT_DTYPE_F32, {R, C}, {v, x});
  v = g.add("sigmoid", LT_DTYPE_F32, {R, C}, {v});
  v = g.add("sub", LT_DTYPE_F32, {R, C}, {v, b});
  v = g.add("relu", LT_DTYPE_F32, {R, C}, {v});
  v = g.add("neg", LT_DTYPE_F32, {R, C}, {v});
  g.set_inputs({x, b});
  g.set_outputs({v});
  auto xs = random(R * C, -3, 3), bs = random(C, -1, 1, 2);
  double kernels = 0;
  auto out = run(g, {xs, bs}, &kernels);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(kernels, 1.0);
  for (int64_t i = 0; i < R * C; ++i) {
    double xv = xs[i], bv = bs[i % C];
    double r = std::tanh(std::exp(xv) + bv) * xv;
    r = 1 / (1 + std::exp(-r)) - bv;
    r = -(r > 0 ? r : 0);
    ASSERT_NEAR(out[0][i], r, 1e-5 * (1 + std::fabs(r))) << i;
  }
}

// The innermost loop runs in unmasked chunks of the vector width plus a masked remainder;
// the outer loop is split across threads at arbitrary points. Every remainder length, rows
// shorter than a chunk, and threaded (>= 32K element) kernels must compute every element.
TEST_P(CpuJit, ChunkedLoopsCoverEveryRemainderLength) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {1, 1},  {1, 15},  {1, 16},  {1, 17},   {1, 63},    {1, 64},   {1, 65},    {3, 31},
      {5, 33}, {7, 127}, {2, 129}, {1, 1000}, {1, 40001}, {300, 70}, {1000, 47}, {64, 1024}};
  for (auto [R, C] : shapes) {
    OwnedGraph g;
    int32_t x = g.add("input", LT_DTYPE_F32, {R, C}, {});
    int32_t b = g.add("input", LT_DTYPE_F32, {C}, {});
    int32_t m = g.add("mul", LT_DTYPE_F32, {R, C}, {x, b});
    int32_t e = g.add("exp", LT_DTYPE_F32, {R, C}, {m});
    int32_t t = g.add("tanh", LT_DTYPE_F32, {R, C}, {x});
    int32_t y = g.add("add", LT_DTYPE_F32, {R, C}, {e, t});
    g.set_inputs({x, b});
    g.set_outputs({y});
    auto xs = random(R * C, -3, 3), bs = random(C, -1, 1, 3);
    auto out = run(g, {xs, bs});
    ASSERT_EQ(out.size(), 1u);
    for (int64_t i = 0; i < R * C; ++i) {
      double r = std::exp(double(xs[i]) * bs[i % C]) + std::tanh(double(xs[i]));
      ASSERT_NEAR(out[0][i], r, 1e-6 * (1 + std::fabs(r))) << R << "x" << C << " at " << i;
    }
  }
}

// softmax and log_softmax of a value a kernel computes are declined, so that the core
// decomposes them into max, sub, exp, sum and div, which fuse with that producer into one row
// kernel each; a region that holds them anyway is decomposed the same way by compile.
TEST_P(CpuJit, SoftmaxIsDeclinedAndItsDecompositionFuses) {
  const int64_t R = 37, C = 1000;
  lt_attr axis{"axis", LT_ATTR_INT, 1, 0.0, nullptr, 0, nullptr};
  OwnedGraph g;
  int32_t x = g.add("input", LT_DTYPE_F32, {R, C}, {});
  int32_t y = g.add("neg", LT_DTYPE_F32, {R, C}, {x});
  int32_t s = g.add("softmax", LT_DTYPE_F32, {R, C}, {y}, &axis, 1);
  int32_t l = g.add("log_softmax", LT_DTYPE_F32, {R, C}, {y}, &axis, 1);
  g.set_inputs({x});
  g.set_outputs({s, l});
  EXPECT_EQ(supported(g.view(), s), 0);
  EXPECT_EQ(supported(g.view(), l), 0);
  auto xs = random(R * C, -20, 20);
  std::vector<std::vector<char>> raw_out;
  lt::plugin_test::Stats exe_stats;
  ASSERT_EQ(session_->run(g.view(), {lt::plugin_test::raw(xs)}, &raw_out, &exe_stats).message, "");
  ASSERT_EQ(raw_out.size(), 2u);
  std::vector<std::vector<float>> out = {lt::plugin_test::as<float>(raw_out[0]),
                                         lt::plugin_test::as<float>(raw_out[1])};
  EXPECT_LE(exe_stats["kernels"], 2.0);
  EXPECT_GE(exe_stats["kernels"], 1.0);
  for (int64_t r = 0; r < R; ++r) {
    double m = -INFINITY, z = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, -(double)xs[r * C + c]);
    for (int64_t c = 0; c < C; ++c) z += std::exp(-xs[r * C + c] - m);
    for (int64_t c = 0; c < C; ++c) {
      double ref = std::exp(-xs[r * C + c] - m) / z;
      ASSERT_NEAR(out[0][r * C + c], ref, 1e-6 + 1e-5 * ref);
      ASSERT_NEAR(out[1][r * C + c], -xs[r * C + c] - m - std::log(z), 1e-4);
    }
  }
}

// A softmax of a value no kernel computes (here a graph input) has nothing to fuse with: it is
// taken whole and runs as a host step (the vector row), with the decomposition's results.
TEST_P(CpuJit, SoftmaxOfAnInputIsAHostStep) {
  const int64_t R = 37, C = 1000;
  lt_attr axis{"axis", LT_ATTR_INT, 1, 0.0, nullptr, 0, nullptr};
  OwnedGraph g;
  int32_t x = g.add("input", LT_DTYPE_F32, {R, C}, {});
  int32_t s = g.add("softmax", LT_DTYPE_F32, {R, C}, {x}, &axis, 1);
  g.set_inputs({x});
  g.set_outputs({s});
  EXPECT_EQ(supported(g.view(), s), 1);
  auto xs = random(R * C, -20, 20);
  xs[5 * C + 7] = NAN;  // a NaN row, as the decomposition gives it
  std::vector<std::vector<char>> raw_out;
  lt::plugin_test::Stats exe_stats;
  ASSERT_EQ(session_->run(g.view(), {lt::plugin_test::raw(xs)}, &raw_out, &exe_stats).message, "");
  ASSERT_EQ(raw_out.size(), 1u);
  std::vector<float> out = lt::plugin_test::as<float>(raw_out[0]);
  EXPECT_EQ(exe_stats["kernels"], 0.0);
  for (int64_t r = 0; r < R; ++r) {
    double m = -INFINITY, z = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, (double)xs[r * C + c]);
    for (int64_t c = 0; c < C; ++c) z += std::exp(xs[r * C + c] - m);
    for (int64_t c = 0; c < C; ++c) {
      if (r == 5) {
        ASSERT_TRUE(std::isnan(out[r * C + c])) << c;
        continue;
      }
      double ref = std::exp(xs[r * C + c] - m) / z;
      ASSERT_NEAR(out[r * C + c], ref, 1e-6 + 1e-5 * ref);
    }
  }
}

// softmax(Q·K · c + mask)·V runs as the fused host attention step (host::find_attention): its
// softmax is claimed, the scale's kernel (a constant `full` times the scores) is replaced, so no
// kernel is generated, and the result is the decomposition's (a fully masked row is NaN).
TEST_P(CpuJit, AttentionIsOneFusedHostStep) {
  const int64_t B = 6, T = 40, N = 33, D = 8;
  lt_attr axis{"axis", LT_ATTR_INT, 2, 0.0, nullptr, 0, nullptr};
  lt_attr value{"value", LT_ATTR_FLOAT, 0, 0.35, nullptr, 0, nullptr};
  OwnedGraph g;
  int32_t q = g.add("input", LT_DTYPE_F32, {B, T, D}, {});
  int32_t k = g.add("input", LT_DTYPE_F32, {B, D, N}, {});
  int32_t v = g.add("input", LT_DTYPE_F32, {B, N, D}, {});
  int32_t mask = g.add("input", LT_DTYPE_F32, {T, N}, {});
  int32_t c = g.add("full", LT_DTYPE_F32, {}, {}, &value, 1);
  int32_t s = g.add("matmul", LT_DTYPE_F32, {B, T, N}, {q, k});
  int32_t x =
      g.add("add", LT_DTYPE_F32, {B, T, N}, {g.add("mul", LT_DTYPE_F32, {B, T, N}, {s, c}), mask});
  int32_t p = g.add("softmax", LT_DTYPE_F32, {B, T, N}, {x}, &axis, 1);
  int32_t o = g.add("matmul", LT_DTYPE_F32, {B, T, D}, {p, v});
  g.set_inputs({q, k, v, mask});
  g.set_outputs({o});
  auto qs = random(B * T * D, -1, 1), ks = random(B * D * N, -1, 1), vs = random(B * N * D, -1, 1),
       ms = random(T * N, -2, 1);
  for (int64_t j = 0; j < N; ++j) ms[3 * N + j] = -INFINITY;  // query row 3 sees no key
  double kernels = -1;
  std::vector<std::vector<float>> out = run(g, {qs, ks, vs, ms}, &kernels);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(kernels, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < T; ++i) {
      std::vector<double> e(N);
      double mx = -INFINITY, z = 0;
      for (int64_t j = 0; j < N; ++j) {
        float dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += qs[(b * T + i) * D + d] * ks[(b * D + d) * N + j];
        e[j] = double(dot * 0.35f + ms[i * N + j]);
        mx = std::max(mx, e[j]);
      }
      for (double& ej : e) z += (ej = std::exp(ej - mx));
      for (int64_t d = 0; d < D; ++d) {
        double ref = 0;
        for (int64_t j = 0; j < N; ++j) ref += e[j] / z * vs[(b * N + j) * D + d];
        const float got = out[0][(b * T + i) * D + d];
        if (i == 3)
          ASSERT_TRUE(std::isnan(got)) << b << " " << d;
        else
          ASSERT_NEAR(got, ref, 1e-5 * (1 + std::fabs(ref))) << b << " " << i << " " << d;
      }
    }
}

TEST_P(CpuJit, LayerNormGeluIsOneKernel) {
  const int64_t R = 16, C = 768;
  int64_t ax = 1;
  lt_attr at[2] = {{"axes", LT_ATTR_INTS, 0, 0.0, &ax, 1, nullptr},
                   {"keepdims", LT_ATTR_INT, 1, 0.0, nullptr, 0, nullptr}};
  OwnedGraph g;
  int32_t x = g.add("input", LT_DTYPE_F32, {R, C}, {});
  int32_t gamma = g.add("input", LT_DTYPE_F32, {C}, {});
  int32_t eps = g.add("input", LT_DTYPE_F32, {}, {});
  int32_t mu = g.add("mean", LT_DTYPE_F32, {R, 1}, {x}, at, 2);
  int32_t d = g.add("sub", LT_DTYPE_F32, {R, C}, {x, mu});
  int32_t d2 = g.add("mul", LT_DTYPE_F32, {R, C}, {d, d});
  int32_t var = g.add("mean", LT_DTYPE_F32, {R, 1}, {d2}, at, 2);
  int32_t ve = g.add("add", LT_DTYPE_F32, {R, 1}, {var, eps});
  int32_t rs = g.add("rsqrt", LT_DTYPE_F32, {R, 1}, {ve});
  int32_t y = g.add("mul", LT_DTYPE_F32, {R, C}, {d, rs});
  int32_t o = g.add("mul", LT_DTYPE_F32, {R, C}, {y, gamma});
  int32_t ge = g.add("gelu", LT_DTYPE_F32, {R, C}, {o});
  g.set_inputs({x, gamma, eps});
  g.set_outputs({ge, var});
  auto xs = random(R * C, -2, 5), gs = random(C, 0.5, 1.5, 3);
  std::vector<float> e = {1e-5f};
  double kernels = 0;
  auto out = run(g, {xs, gs, e}, &kernels);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(kernels, 1.0);
  for (int64_t r = 0; r < R; ++r) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < C; ++c) m += xs[r * C + c];
    m /= C;
    for (int64_t c = 0; c < C; ++c) v += (xs[r * C + c] - m) * (xs[r * C + c] - m);
    v /= C;
    ASSERT_NEAR(out[1][r], v, 1e-4 * v);
    for (int64_t c = 0; c < C; ++c) {
      double t = (xs[r * C + c] - m) / std::sqrt(v + 1e-5) * gs[c];
      double ref = 0.5 * t * (1 + std::tanh(0.7978845608028654 * (t + 0.044715 * t * t * t)));
      ASSERT_NEAR(out[0][r * C + c], ref, 1e-4 * (1 + std::fabs(ref)));
    }
  }
}

TEST_P(CpuJit, MatmulBiasReluMatchesLoops) {
  const int64_t M = 33, K = 70, N = 45;
  OwnedGraph g;
  int32_t a = g.add("input", LT_DTYPE_F32, {M, K}, {});
  int32_t b = g.add("input", LT_DTYPE_F32, {K, N}, {});
  int32_t bias = g.add("input", LT_DTYPE_F32, {N}, {});
  int32_t mm = g.add("matmul", LT_DTYPE_F32, {M, N}, {a, b});
  int32_t ad = g.add("add", LT_DTYPE_F32, {M, N}, {mm, bias});
  int32_t r = g.add("relu", LT_DTYPE_F32, {M, N}, {ad});
  g.set_inputs({a, b, bias});
  g.set_outputs({r});
  auto as = random(M * K, -1, 1), bs = random(K * N, -1, 1, 5), cs = random(N, -1, 1, 6);
  double kernels = 0;
  auto out = run(g, {as, bs, cs}, &kernels);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(kernels, 1.0);  // the epilogue; the gemm itself is OpenBLAS
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = cs[j];
      for (int64_t k = 0; k < K; ++k) s += (double)as[i * K + k] * bs[k * N + j];
      ASSERT_NEAR(out[0][i * N + j], s > 0 ? s : 0, 1e-4);
    }
}

// gemm runs serially below 2^18 multiply-adds, as TBB column panels (or one task per batch
// entry) of single-threaded OpenBLAS up to 2^24, and on OpenBLAS's threads above: every
// path, ragged last panels included, must give the product.
TEST_P(CpuJit, MatmulEveryThreadingPathMatchesLoops) {
  struct Case {
    int64_t batch, M, K, N;
  };
  const Case cases[] = {{1, 7, 9, 11},    {1, 32, 200, 800}, {1, 32, 200, 801}, {1, 3, 500, 1000},
                        {16, 32, 40, 50}, {3, 20, 100, 130}, {1, 256, 256, 257}};
  for (const Case& c : cases) {
    std::vector<int64_t> sa = {c.M, c.K}, sb = {c.K, c.N}, so = {c.M, c.N};
    if (c.batch > 1) {
      sa.insert(sa.begin(), c.batch);
      sb.insert(sb.begin(), c.batch);
      so.insert(so.begin(), c.batch);
    }
    OwnedGraph g;
    int32_t a = g.add("input", LT_DTYPE_F32, sa, {});
    int32_t b = g.add("input", LT_DTYPE_F32, sb, {});
    int32_t mm = g.add("matmul", LT_DTYPE_F32, so, {a, b});
    g.set_inputs({a, b});
    g.set_outputs({mm});
    auto as = random(c.batch * c.M * c.K, -1, 1, 7), bs = random(c.batch * c.K * c.N, -1, 1, 8);
    auto out = run(g, {as, bs});
    ASSERT_EQ(out.size(), 1u);
    for (int64_t p = 0; p < c.batch; ++p)
      for (int64_t i = 0; i < c.M; ++i)
        for (int64_t j = 0; j < c.N; ++j) {
          double s = 0;
          for (int64_t k = 0; k < c.K; ++k)
            s += (double)as[(p * c.M + i) * c.K + k] * bs[(p * c.K + k) * c.N + j];
          ASSERT_NEAR(out[0][(p * c.M + i) * c.N + j], s, 1e-4 * (1 + std::sqrt(double(c.K))))
              << c.batch << "x" << c.M << "x" << c.K << "x" << c.N << " at " << p << "," << i << ","
              << j;
        }
  }
}

TEST_P(CpuJit, ReductionOverLeadingAxisAndMaxWithNaN) {
  const int64_t R = 50, C = 9;
  int64_t ax = 0;
  lt_attr at[2] = {{"axes", LT_ATTR_INTS, 0, 0.0, &ax, 1, nullptr},
                   {"keepdims", LT_ATTR_INT, 0, 0.0, nullptr, 0, nullptr}};
  OwnedGraph g;
  int32_t x = g.add("input", LT_DTYPE_F32, {R, C}, {});
  int32_t s = g.add("sum", LT_DTYPE_F32, {C}, {x}, at, 2);
  int32_t m = g.add("max", LT_DTYPE_F32, {C}, {x}, at, 2);
  g.set_inputs({x});
  g.set_outputs({s, m});
  auto xs = random(R * C, -1, 1);
  xs[7 * C + 3] = NAN;
  auto out = run(g, {xs});
  ASSERT_EQ(out.size(), 2u);
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0, mx = -INFINITY;
    for (int64_t r = 0; r < R; ++r) {
      sum += xs[r * C + c];
      mx = std::max(mx, (double)xs[r * C + c]);
    }
    if (c == 3) {
      EXPECT_TRUE(std::isnan(out[0][c]));
      EXPECT_TRUE(std::isnan(out[1][c]));
    } else {
      EXPECT_NEAR(out[0][c], sum, 1e-4);
      EXPECT_EQ(out[1][c], (float)mx);
    }
  }
}

// Reductions over outer axes into a contiguous kept axis run as column reductions (the inner
// loop along the kept axis); a kernel that also stores a full-size output runs row-wise. Both
// must give the loops' answers, kept extents of every remainder length included.
TEST_P(CpuJit, ColumnReductionsMatchLoops) {
  for (int64_t C : {1, 7, 16, 37, 130}) {
    const int64_t A = 3, B = 5;
    int64_t axes[2] = {0, 1};
    lt_attr at[2] = {{"axes", LT_ATTR_INTS, 0, 0.0, axes, 2, nullptr},
                     {"keepdims", LT_ATTR_INT, 0, 0.0, nullptr, 0, nullptr}};
    for (bool full_output : {false, true}) {
      OwnedGraph g;
      int32_t x = g.add("input", LT_DTYPE_F32, {A, B, C}, {});
      int32_t y = g.add("input", LT_DTYPE_F32, {A, B, C}, {});
      int32_t xy = g.add("mul", LT_DTYPE_F32, {A, B, C}, {x, y});
      int32_t s = g.add("sum", LT_DTYPE_F32, {C}, {xy}, at, 2);
      int32_t m = g.add("mean", LT_DTYPE_F32, {C}, {xy}, at, 2);
      int32_t lo = g.add("min", LT_DTYPE_F32, {C}, {x}, at, 2);
      g.set_inputs({x, y});
      if (full_output)
        g.set_outputs({s, m, lo, xy});
      else
        g.set_outputs({s, m, lo});
      auto xs = random(A * B * C, -1, 1, 11), ys = random(A * B * C, -1, 1, 12);
      auto out = run(g, {xs, ys});
      ASSERT_EQ(out.size(), full_output ? 4u : 3u);
      for (int64_t c = 0; c < C; ++c) {
        double sum = 0, mn = INFINITY;
        for (int64_t r = 0; r < A * B; ++r) {
          sum += double(xs[r * C + c]) * ys[r * C + c];
          mn = std::min(mn, double(xs[r * C + c]));
        }
        EXPECT_NEAR(out[0][c], sum, 1e-5) << C << " " << c;
        EXPECT_NEAR(out[1][c], sum / double(A * B), 1e-6) << C << " " << c;
        EXPECT_EQ(out[2][c], float(mn)) << C << " " << c;
      }
      if (full_output)
        for (int64_t i = 0; i < A * B * C; ++i) ASSERT_EQ(out[3][i], xs[i] * ys[i]);
    }
  }
}

// A matrix transpose read only by GEMMs is folded into the GEMM (OpenBLAS reads the operand
// transposed); one that is also a graph output is materialised as well. Either way the
// product is the loops'.
TEST_P(CpuJit, MatmulReadsTransposedOperandsInPlace) {
  for (bool also_output : {false, true}) {
    const int64_t Bt = 2, M = 19, K = 23, N = 300;
    int64_t swap3[3] = {0, 2, 1};
    lt_attr perm3 = {"perm", LT_ATTR_INTS, 0, 0.0, swap3, 3, nullptr};
    OwnedGraph g;
    int32_t at = g.add("input", LT_DTYPE_F32, {Bt, K, M}, {});  // A stored transposed
    int32_t bt = g.add("input", LT_DTYPE_F32, {Bt, N, K}, {});  // B stored transposed
    int32_t a = g.add("permute", LT_DTYPE_F32, {Bt, M, K}, {at}, &perm3, 1);
    int32_t b = g.add("permute", LT_DTYPE_F32, {Bt, K, N}, {bt}, &perm3, 1);
    int32_t mm = g.add("matmul", LT_DTYPE_F32, {Bt, M, N}, {a, b});
    g.set_inputs({at, bt});
    if (also_output)
      g.set_outputs({mm, a});
    else
      g.set_outputs({mm});
    auto as = random(Bt * K * M, -1, 1, 21), bs = random(Bt * N * K, -1, 1, 22);
    auto out = run(g, {as, bs});
    ASSERT_EQ(out.size(), also_output ? 2u : 1u);
    for (int64_t p = 0; p < Bt; ++p)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k)
            s += double(as[(p * K + k) * M + i]) * bs[(p * N + j) * K + k];
          ASSERT_NEAR(out[0][(p * M + i) * N + j], s, 1e-4) << p << "," << i << "," << j;
        }
    if (also_output)
      for (int64_t p = 0; p < Bt; ++p)
        for (int64_t i = 0; i < M; ++i)
          for (int64_t k = 0; k < K; ++k)
            ASSERT_EQ(out[1][(p * M + i) * K + k], as[(p * K + k) * M + i]);
  }
}

// A group over fewer elements than one vector gains nothing from generated code: a scalar
// chain runs as host steps (no kernel, no LLVM time), with the loops' answer.
TEST_P(CpuJit, ScalarChainRunsAsHostSteps) {
  OwnedGraph g;
  int32_t a = g.add("input", LT_DTYPE_F32, {1}, {});
  int32_t m = g.add("input", LT_DTYPE_F32, {1}, {});
  int32_t c = g.add("input", LT_DTYPE_F32, {1}, {});
  int32_t v = a;
  for (int i = 0; i < 500; ++i) {
    v = g.add("mul", LT_DTYPE_F32, {1}, {v, m});
    v = g.add("add", LT_DTYPE_F32, {1}, {v, c});
  }
  g.set_inputs({a, m, c});
  g.set_outputs({v});
  double kernels = -1;
  auto out = run(g, {{1.0f}, {1.0001f}, {0.0001f}}, &kernels);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(kernels, 0.0);
  float want = 1.0f;
  for (int i = 0; i < 500; ++i) want = want * 1.0001f + 0.0001f;
  EXPECT_EQ(out[0][0], want);
}

TEST_P(CpuJit, IdenticalGraphsCompileOnce) {
  auto make = [] {
    OwnedGraph g;
    int32_t x = g.add("input", LT_DTYPE_F32, {123}, {});
    int32_t y = g.add("sqrt", LT_DTYPE_F32, {123}, {x});
    int32_t z = g.add("floor", LT_DTYPE_F32, {123}, {y});
    g.set_inputs({x});
    g.set_outputs({z});
    return g;
  };
  double before = stats(nullptr)["compiles"];
  double hits = stats(nullptr)["cache_hits"];
  for (int i = 0; i < 3; ++i) {
    OwnedGraph g = make();
    auto out = run(g, {random(123, 0, 100)});
    ASSERT_EQ(out.size(), 1u);
  }
  EXPECT_EQ(stats(nullptr)["compiles"], before + 1);
  EXPECT_EQ(stats(nullptr)["cache_hits"], hits + 2);
}

// The Program cache is an LRU of option program_cache entries: a graph evicted from it
// compiles again (and its code is freed once no executable uses it).
TEST_P(CpuJit, ProgramCacheIsBoundedLru) {
  Session s(api_);
  ASSERT_EQ(s.create({{"vector_bits", GetParam()}, {"program_cache", "2"}}).message, "");
  auto graph = [](const char* op) {
    OwnedGraph g;
    int32_t x = g.add("input", LT_DTYPE_F32, {2048}, {});
    int32_t y = g.add(op, LT_DTYPE_F32, {2048}, {x});
    int32_t z = g.add("floor", LT_DTYPE_F32, {2048}, {y});
    g.set_inputs({x});
    g.set_outputs({z});
    return g;
  };
  auto compiles = [&] {
    Status st;
    double c = s.stats(nullptr, &st)["compiles"];
    EXPECT_EQ(st.message, "");
    return c;
  };
  std::vector<std::vector<char>> in{lt::plugin_test::raw(random(2048, 0, 100))}, out;
  for (const char* op : {"sqrt", "exp", "sqrt", "tanh", "exp", "sqrt"}) {
    OwnedGraph g = graph(op);
    ASSERT_EQ(s.run(g.view(), in, &out).message, "");
  }
  // sqrt, exp: 2 compiles; sqrt: hit; tanh evicts exp (sqrt was used later); exp: compiles
  // again and evicts sqrt; sqrt: compiles again.
  EXPECT_EQ(compiles(), 5.0);
}

// Declined: arithmetic on bf16 (a storage type: the host kernels only convert it) and the
// composites the core decomposes for cpu_jit (softmax of a computed value fuses better
// decomposed; silu has no kernel of its own). A region that still holds such a node does not
// compile.
TEST_P(CpuJit, DeclinesWhatItCannotRunAndWhatFusesBetterDecomposed) {
  OwnedGraph g;
  lt_attr axis{"axis", LT_ATTR_INT, 0, 0.0, nullptr, 0, nullptr};
  int32_t x = g.add("input", LT_DTYPE_BF16, {4}, {});
  int32_t y = g.add("input", LT_DTYPE_F32, {4}, {});
  int32_t e = g.add("exp", LT_DTYPE_BF16, {4}, {x});
  int32_t ey = g.add("exp", LT_DTYPE_F32, {4}, {y});  // a producer the softmax fuses with
  int32_t s = g.add("softmax", LT_DTYPE_F32, {4}, {ey}, &axis, 1);
  int32_t si = g.add("silu", LT_DTYPE_F32, {4}, {y});
  int32_t c = g.add("cast", LT_DTYPE_F32, {4}, {x});  // bf16 -> f32: a host kernel
  g.set_inputs({x, y});
  g.set_outputs({e, s, si, c});
  const lt_graph& gv = g.view();
  for (int32_t n : {e, s, si}) EXPECT_EQ(supported(gv, n), 0) << gv.nodes[n].op;
  EXPECT_EQ(supported(gv, c), 1);
  lt_plugin_compile_args a{};
  a.struct_size = LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE;
  a.context = ctx_;
  a.graph = &gv;
  // What supports() declines, compile() still takes, rewritten as the core rewrites it: the
  // composites decomposed, the bf16 exp computed in f32 between casts.
  EXPECT_EQ(err(api_->compile(&a)), "");
  EXPECT_NE(a.executable, nullptr);
  if (a.executable) api_->executable_destroy(ctx_, a.executable);
}

// random_unit / random_uniform / random_normal are generated code (lt_random.h's hash in
// vector integer arithmetic), fused with their elementwise consumers; arange too.
TEST_P(CpuJit, RandomAndArangeAreFusedAndMatchTheReference) {
  const int64_t n = 2048;  // >= 1024 elements: lone nodes are kernels too
  auto attr_i = [](const char* k, int64_t v) {
    return lt_attr{k, LT_ATTR_INT, v, 0.0, nullptr, 0, nullptr};
  };
  auto attr_f = [](const char* k, double v) {
    return lt_attr{k, LT_ATTR_FLOAT, 0, v, nullptr, 0, nullptr};
  };
  lt_attr unit_at[2] = {attr_i("stride", 3), attr_i("offset", 5)};
  lt_attr uni_at[2] = {attr_f("low", -2), attr_f("high", 3)};
  lt_attr nrm_at[2] = {attr_f("mean", 1), attr_f("std", 0.5)};
  lt_attr ar_at[2] = {attr_f("start", 0.5), attr_f("step", 0.1)};
  for (lt_dtype d : {LT_DTYPE_F32, LT_DTYPE_F64}) {
    OwnedGraph g;
    int32_t seed = g.add("input", LT_DTYPE_I64, {}, {});
    int32_t u = g.add("random_unit", d, {n}, {seed}, unit_at, 2);
    int32_t uu = g.add("random_uniform", d, {n}, {seed}, uni_at, 2);
    int32_t nn = g.add("random_normal", d, {n}, {seed}, nrm_at, 2);
    int32_t two = g.add("full", d, {}, {}, nullptr, 0);
    int32_t sum = g.add("add", d, {n}, {uu, two});  // fused into random_uniform's kernel
    int32_t ar = g.add("arange", LT_DTYPE_I32, {n}, {}, ar_at, 2);
    g.set_inputs({seed});
    g.set_outputs({u, sum, nn, ar});
    const uint64_t sv = 12345;
    double kernels = 0;
    auto out = run_raw(g, {lt::plugin_test::raw(std::vector<int64_t>{int64_t(sv)})}, &kernels);
    ASSERT_EQ(out.size(), 4u);
    EXPECT_EQ(kernels, 4.0);  // unit; uniform + add; normal; arange (the scalar: a host step)
    auto at = [&](int k, int64_t i) {
      return d == LT_DTYPE_F32 ? double(lt::plugin_test::as<float>(out[k])[i])
                               : lt::plugin_test::as<double>(out[k])[i];
    };
    auto ints = lt::plugin_test::as<int32_t>(out[3]);
    for (int64_t i = 0; i < n; ++i) {
      double w = lt_random_unit_f32(sv, 3 * uint64_t(i) + 5);
      ASSERT_EQ(at(0, i), w) << i;
      ASSERT_NEAR(at(1, i), -2 + 5 * double(lt_random_unit_f32(sv, i)), 1e-6) << i;
      double u1 = 1 - double(lt_random_unit_f32(sv, 2 * i)), u2 = lt_random_unit_f32(sv, 2 * i + 1);
      double z = std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      ASSERT_NEAR(at(2, i), 1 + 0.5 * z, 2e-5) << i;
      ASSERT_EQ(ints[i], int32_t(0.5 + double(i) * 0.1)) << i;
    }
  }
}

// Ops without generated code run as host-kernel steps inside cpu_jit's own program, between
// generated kernels: no data leaves the backend. (So does a lone node over < 1024 elements.)
TEST_P(CpuJit, HostKernelStepsRunInsideTheProgram) {
  lt_attr ax0{"axis", LT_ATTR_INT, 0, 0.0, nullptr, 0, nullptr};
  lt_attr ax1{"axis", LT_ATTR_INT, 1, 0.0, nullptr, 0, nullptr};
  int64_t k2[2] = {2, 2}, before[2] = {1, 0}, after[2] = {0, 2};
  lt_attr pool[2] = {{"kernel", LT_ATTR_INTS, 0, 0.0, k2, 2, nullptr},
                     {"stride", LT_ATTR_INTS, 0, 0.0, k2, 2, nullptr}};
  lt_attr pad[3] = {{"before", LT_ATTR_INTS, 0, 0.0, before, 2, nullptr},
                    {"after", LT_ATTR_INTS, 0, 0.0, after, 2, nullptr},
                    {"value", LT_ATTR_FLOAT, 0, 7.0, nullptr, 0, nullptr}};
  const int64_t R = 64, C = 32, J = 40;  // >= 1024 elements: exp and neg are kernels
  OwnedGraph g;
  int32_t x = g.add("input", LT_DTYPE_F32, {R, C}, {});
  int32_t idx = g.add("input", LT_DTYPE_I64, {J}, {});
  int32_t ex = g.add("exp", LT_DTYPE_F32, {R, C}, {x});
  int32_t ga = g.add("gather", LT_DTYPE_F32, {J, C}, {ex, idx}, &ax0, 1);
  int32_t ng = g.add("neg", LT_DTYPE_F32, {J, C}, {ga});  // the gather's epilogue kernel
  int32_t cc = g.add("concat", LT_DTYPE_F32, {R, 2 * C}, {x, ex}, &ax1, 1);
  int32_t pd = g.add("pad", LT_DTYPE_F32, {R + 1, C + 2}, {x}, pad, 3);
  int32_t x4 = g.add("reshape", LT_DTYPE_F32, {1, 1, R, C}, {x});
  int32_t mp = g.add("max_pool2d", LT_DTYPE_F32, {1, 1, R / 2, C / 2}, {x4}, pool, 2);
  int32_t am = g.add("argmax", LT_DTYPE_I64, {R}, {x}, &ax1, 1);
  g.set_inputs({x, idx});
  g.set_outputs({ng, cc, pd, mp, am});
  auto xs = random(R * C, -2, 2, 9);
  std::vector<int64_t> is(J);
  for (int64_t j = 0; j < J; ++j) is[j] = (j * 7) % R;
  double kernels = 0;
  auto out = run_raw(g, {lt::plugin_test::raw(xs), lt::plugin_test::raw(is)}, &kernels);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(kernels, 2.0);  // exp; neg
  auto f = [&](int k) { return lt::plugin_test::as<float>(out[k]); };
  auto at = [&](int64_t r, int64_t c) { return xs[r * C + c]; };
  for (int64_t r = 0; r < J; ++r)
    for (int64_t c = 0; c < C; ++c) ASSERT_FLOAT_EQ(f(0)[r * C + c], -std::exp(at(is[r], c)));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < 2 * C; ++c)
      ASSERT_FLOAT_EQ(f(1)[r * 2 * C + c], c < C ? at(r, c) : std::exp(at(r, c - C)));
  for (int64_t r = 0; r < R + 1; ++r)
    for (int64_t c = 0; c < C + 2; ++c)
      ASSERT_EQ(f(2)[r * (C + 2) + c], r >= 1 && c < C ? at(r - 1, c) : 7.0f);
  for (int64_t r = 0; r < R / 2; ++r)
    for (int64_t c = 0; c < C / 2; ++c)
      ASSERT_EQ(f(3)[r * C / 2 + c], std::max({at(2 * r, 2 * c), at(2 * r, 2 * c + 1),
                                               at(2 * r + 1, 2 * c), at(2 * r + 1, 2 * c + 1)}));
  auto am_out = lt::plugin_test::as<int64_t>(out[4]);
  for (int64_t r = 0; r < R; ++r)
    ASSERT_EQ(am_out[r],
              std::max_element(xs.begin() + C * r, xs.begin() + C * r + C) - (xs.begin() + C * r));
}

TEST_P(CpuJit, MalformedGraphIsAnErrorNotACrash) {
  OwnedGraph g;
  g.add("input", LT_DTYPE_F32, {4}, {});
  g.add("exp", LT_DTYPE_F32, {4}, {3});
  g.set_inputs({0});
  g.set_outputs({1});
  lt_plugin_compile_args c{};
  c.struct_size = LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE;
  c.context = ctx_;
  c.graph = &g.view();
  EXPECT_NE(err(api_->compile(&c)).find("does not precede"), std::string::npos);
}

// Accuracy of the vectorised f32 transcendentals vs double libm over a dense sweep.
// Bounds match docs/backends/cpu_jit.md.
struct Sweep {
  const char* op;
  float lo, hi;
  double (*ref)(double);
  double max_rel;
};

TEST_P(CpuJit, TranscendentalAccuracySweep) {
  const Sweep sweeps[] = {
      {"exp", -87.0f, 88.0f, [](double x) { return std::exp(x); }, 3e-7},
      {"log", 1e-30f, 1e30f, [](double x) { return std::log(x); }, 3e-7},
      {"tanh", -10.0f, 10.0f, [](double x) { return std::tanh(x); }, 5e-7},
      {"sigmoid", -80.0f, 80.0f, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, 5e-7},
      {"gelu", -5.0f, 12.0f,
       [](double x) {
         return x / (1 + std::exp(-2 * 0.7978845608028654 * (x + 0.044715 * x * x * x)));
       },
       3e-6},
      // Below -5 gelu's condition number (~0.21·|x|³) dominates any f32 evaluation.
      {"gelu", -12.0f, -5.0f,
       [](double x) {
         // 0.5·x·(1 + tanh(u)) written as x·sigmoid(2u): the same function, without the
         // cancellation that makes the tanh form useless as a reference for x < -5.
         return x / (1 + std::exp(-2 * 0.7978845608028654 * (x + 0.044715 * x * x * x)));
       },
       4e-5},
  };
  const int64_t n = 1 << 18;
  for (const Sweep& s : sweeps) {
    std::vector<float> xs(n);
    for (int64_t i = 0; i < n; ++i) {
      if (std::string(s.op) == "log") {
        xs[i] = std::exp(std::log(s.lo) + (std::log(s.hi) - std::log(s.lo)) * i / (n - 1));
      } else {
        xs[i] = s.lo + (s.hi - s.lo) * static_cast<float>(i) / (n - 1);
      }
    }
    OwnedGraph g;
    int32_t x = g.add("input", LT_DTYPE_F32, {n}, {});
    int32_t y = g.add(s.op, LT_DTYPE_F32, {n}, {x});
    g.set_inputs({x});
    g.set_outputs({y});
    auto out = run(g, {xs});
    ASSERT_EQ(out.size(), 1u);
    double worst = 0;
    float at = 0;
    for (int64_t i = 0; i < n; ++i) {
      double r = s.ref(xs[i]);
      if (std::fabs(r) < 1e-30) continue;  // relative error meaningless at 0
      double e = std::fabs(out[0][i] - r) / std::fabs(r);
      if (e > worst) {
        worst = e;
        at = xs[i];
      }
    }
    EXPECT_LE(worst, s.max_rel) << s.op << " worst at x=" << at;
    std::printf("[ accuracy ] %-8s max rel err %.3g (%.2f ulp-equiv) at x=%g\n", s.op, worst,
                worst / 5.96e-8, at);
  }
}

TEST_P(CpuJit, TranscendentalSpecialValues) {
  std::vector<float> xs = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 100.0f, -200.0f};
  const char* ops[] = {"exp", "log", "tanh", "sigmoid", "gelu"};
  for (const char* op : ops) {
    OwnedGraph g;
    int32_t x = g.add("input", LT_DTYPE_F32, {(int64_t)xs.size()}, {});
    int32_t y = g.add(op, LT_DTYPE_F32, {(int64_t)xs.size()}, {x});
    g.set_inputs({x});
    g.set_outputs({y});
    auto out = run(g, {xs});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(std::isnan(out[0][0])) << op;
    std::string o = op;
    if (o == "exp") {
      EXPECT_EQ(out[0][1], INFINITY);
      EXPECT_EQ(out[0][2], 0.0f);
      EXPECT_EQ(out[0][3], 1.0f);
      EXPECT_EQ(out[0][5], INFINITY);
    } else if (o == "log") {
      EXPECT_EQ(out[0][1], INFINITY);
      EXPECT_TRUE(std::isnan(out[0][2]));
      EXPECT_EQ(out[0][3], -INFINITY);
    } else if (o == "tanh") {
      EXPECT_EQ(out[0][1], 1.0f);
      EXPECT_EQ(out[0][2], -1.0f);
      EXPECT_EQ(out[0][3], 0.0f);
      EXPECT_TRUE(std::signbit(out[0][4]));  // tanh(-0) = -0
      EXPECT_EQ(out[0][5], 1.0f);
      EXPECT_EQ(out[0][6], -1.0f);
    } else if (o == "sigmoid") {
      EXPECT_EQ(out[0][1], 1.0f);
      EXPECT_EQ(out[0][2], 0.0f);
      EXPECT_EQ(out[0][3], 0.5f);
    } else {
      EXPECT_EQ(out[0][1], INFINITY);
      EXPECT_EQ(out[0][5], 100.0f);
      EXPECT_EQ(out[0][6], 0.0f);
    }
  }
}

// sigmoid(a)·tanh(b), the LSTM/GRU gate product: both are bounded quotients, so the JIT
// multiplies them with one division (vecmath.h, merge_quotients). Compared with the
// kernels of tanh(b) + a, which have the same loops and one division per loop body.
TEST_P(CpuJit, GateProductUsesOneDivision) {
  const int64_t n = 2048;  // groups under 1024 elements run as host steps
  auto graph = [&](bool product, bool sigmoid_out) {
    auto g = std::make_unique<OwnedGraph>();
    int32_t a = g->add("input", LT_DTYPE_F32, {n}, {});
    int32_t b = g->add("input", LT_DTYPE_F32, {n}, {});
    int32_t t = g->add("tanh", LT_DTYPE_F32, {n}, {b});
    int32_t s = product ? g->add("sigmoid", LT_DTYPE_F32, {n}, {a}) : a;
    int32_t y = g->add(product ? "mul" : "add", LT_DTYPE_F32, {n}, {s, t});
    g->set_inputs({a, b});
    g->set_outputs(sigmoid_out ? std::vector<int32_t>{y, s} : std::vector<int32_t>{y});
    return g;
  };
  auto as = random(n, -6, 6, 3), bs = random(n, -3, 3, 4);
  int one = fdivs(*graph(false, false), {as, bs});
  ASSERT_GT(one, 0);
  EXPECT_EQ(fdivs(*graph(true, false), {as, bs}), one);
  // sigmoid(a) is also an output, so it needs its own division: nothing to merge.
  EXPECT_EQ(fdivs(*graph(true, true), {as, bs}), 2 * one);
}

// Merged gate products stay within float accuracy of the two-division form for every
// kind of input: huge, tiny, infinite, NaN, signed zeros; and products of three merge too.
TEST_P(CpuJit, GateProductsAreAccurateEverywhere) {
  std::vector<float> av = {-INFINITY, -200,   -104, -89, -87, -85, -60, -20, -1,       -0.0f,
                           0,         1e-20f, 0.5f, 3,   20,  88,  89,  200, INFINITY, NAN};
  std::vector<float> bv = {-INFINITY, -20,   -9, -8.5f, -3, -1e-3f, -0.0f,    0,
                           1e-30f,    0.25f, 1,  7.9f,  9,  50,     INFINITY, NAN};
  std::vector<float> as, bs;
  for (float a : av)
    for (float b : bv) {
      as.push_back(a);
      bs.push_back(b);
    }
  const int64_t n = static_cast<int64_t>(as.size());
  OwnedGraph g;
  int32_t a = g.add("input", LT_DTYPE_F32, {n}, {});
  int32_t b = g.add("input", LT_DTYPE_F32, {n}, {});
  int32_t sa = g.add("sigmoid", LT_DTYPE_F32, {n}, {a});
  int32_t tb = g.add("tanh", LT_DTYPE_F32, {n}, {b});
  int32_t p = g.add("mul", LT_DTYPE_F32, {n}, {sa, tb});
  int32_t sb = g.add("sigmoid", LT_DTYPE_F32, {n}, {b});
  int32_t p3 = g.add("mul", LT_DTYPE_F32, {n}, {p, sb});  // sigmoid(a)·tanh(b)·sigmoid(b)
  int32_t ta = g.add("tanh", LT_DTYPE_F32, {n}, {a});
  int32_t tt = g.add("mul", LT_DTYPE_F32, {n}, {ta, g.add("tanh", LT_DTYPE_F32, {n}, {b})});
  g.set_inputs({a, b});
  g.set_outputs({p3, tt});
  auto out = run(g, {as, bs});
  ASSERT_EQ(out.size(), 2u);
  auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
  for (int64_t i = 0; i < n; ++i) {
    double x = as[i], y = bs[i];
    double want[2] = {sig(x) * std::tanh(y) * sig(y), std::tanh(x) * std::tanh(y)};
    for (int k = 0; k < 2; ++k) {
      float got = out[k][i];
      if (std::isnan(want[k])) {
        EXPECT_TRUE(std::isnan(got)) << k << " a=" << x << " b=" << y;
        continue;
      }
      // 2e-6 relative, plus 1e-33 absolute: a merged denominator that overflows gives 0
      // where the exact product is below that (vecmath.h).
      EXPECT_NEAR(got, want[k], 2e-6 * std::fabs(want[k]) + 1e-33) << k << " a=" << x << " b=" << y;
    }
  }
}

}  // namespace
