// DynamicShapesTest.cpp — dynamic dimensions (docs/dynamic-shapes.md) on every backend this
// build made: an MLP forward over batch sizes 1..64 compiles a bounded number of times and
// gives the static-shape run's values; training steps with a last partial batch; a program
// whose numbers do not follow one size stays static; the off switch; the lowering library's
// expressions (derive, instantiate, match) on their own.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "lazytensor/lazytensor.hpp"
#include "lazytensor/lower/dynamic.hpp"
#include "lazytensor/lower/error.hpp"

namespace {

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

struct Mlp {
  std::vector<float> w1 = randn(32 * 64, 1), b1 = randn(64, 2), w2 = randn(64 * 10, 3),
                     b2 = randn(10, 4);
  // log_softmax(relu(x W1 + b1) W2 + b2) for x [batch, 32].
  std::vector<float> forward(const lt::Device& dev, const std::vector<float>& x, int64_t batch) {
    auto t = [&](const std::vector<float>& v, lt::IntList s) {
      return lt::Tensor::from(dev, v, s);
    };
    lt::Tensor h = (t(x, {batch, 32}).matmul(t(w1, {32, 64})) + t(b1, {64})).relu();
    return (h.matmul(t(w2, {64, 10})) + t(b2, {10})).log_softmax(1).to_vector<float>();
  }
};

lt::Runtime runtime(const std::string& backend, const char* dynamic = "auto") {
  lt::RuntimeOptions o;
  o.device = backend;
  o.fallback = "silent";
  o.dynamic_shapes = dynamic;
  return lt::Runtime::create(o);
}

// Relative error norm-wise (‖got − want‖ / ‖want‖): a padded matmul may take another BLAS
// kernel than the unpadded one and round a few elements differently in the last bit.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double err = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::isfinite(got[i]), std::isfinite(want[i])) << what << " element " << i;
    if (!std::isfinite(want[i])) continue;
    err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  EXPECT_LE(std::sqrt(err), rel * std::sqrt(norm)) << what;
}

// The static reference compiles once per size: on PoCL that is seconds each on a cold cache, so
// gpu_opencl compares a spread of sizes (every size still runs through the dynamic path).
bool compare_at(const std::string& backend, int64_t b, int64_t last) {
  return backend != "gpu_opencl" || b <= 3 || b % 7 == 0 || b == last;
}

class Dynamic : public ::testing::TestWithParam<std::string> {};

// The bound: batch 1..64 through one MLP forward compiles at most twice where the
// backend runs dynamic graphs (the first size static, then one dynamic executable), at most 8
// times where it needs static shapes (buckets), with the static run's values (1e-6 relative).
TEST_P(Dynamic, MlpForwardOverBatchSizes) {
  const std::string backend = GetParam();
  Mlp mlp;
  lt::Runtime rt = runtime(backend), fixed = runtime(backend, "off");
  lt::Device dev = rt.default_device(), ref = fixed.default_device();
  int64_t compared = 0;
  for (int64_t b = 1; b <= 64; ++b) {
    std::vector<float> x = randn(static_cast<size_t>(b) * 32, 100 + uint32_t(b));
    std::vector<float> got = mlp.forward(dev, x, b);
    if (!compare_at(backend, b, 64)) continue;
    expect_close(got, mlp.forward(ref, x, b), 1e-6, backend + " batch " + std::to_string(b));
    ++compared;
  }
  const double compiles = rt.metric("compiles");
  EXPECT_EQ(fixed.metric("compiles"), compared);  // the static reference: one per size
  if (backend == "tpu_sim") {
    EXPECT_LE(compiles, 8) << rt.metrics_report();
  } else {
    EXPECT_LE(compiles, 2) << rt.metrics_report();
    EXPECT_EQ(lt::test::metric_or_zero(rt, "dynamic.compiles"), 1);
    EXPECT_EQ(lt::test::metric_or_zero(rt, "dynamic.hits"),
              62);  // sizes 3..64 (size 2 is the dynamic compile)
  }
}

// Reductions, softmax and contractions over the dynamic dim: a backend that cannot run the
// program at every size runs it padded to buckets, masked so that the values are those of the
// unpadded computation (summation order aside: 1e-5 relative).
TEST_P(Dynamic, ReductionsOverTheDynamicDimPadExactly) {
  const std::string backend = GetParam();
  std::vector<float> w = randn(16 * 1024, 7);  // rows of 1024: cpu_jit generates kernels
  auto program = [&](const lt::Device& dev, const std::vector<float>& xv, int64_t b) {
    lt::Tensor x = lt::Tensor::from(dev, xv, {b, 16});
    lt::Tensor a = x.matmul(lt::Tensor::from(dev, w, {16, 1024}));
    lt::Tensor s = a.softmax(0);                    // over the batch
    lt::Tensor m = (s * a).mean({0});               // a mean over the batch
    lt::Tensor c = x.t().matmul(x).reshape({256});  // contracts over the batch
    lt::Tensor mx = a.max({0}), mn = (a * -1.0).min({0});
    return lt::concat({m, c, mx, mn}, 0).to_vector<float>();
  };
  lt::Runtime rt = runtime(backend), fixed = runtime(backend, "off");
  for (int64_t b = 1; b <= 40; ++b) {
    std::vector<float> x = randn(static_cast<size_t>(b) * 16, 300 + uint32_t(b));
    std::vector<float> got = program(rt.default_device(), x, b);
    if (compare_at(backend, b, 40))
      expect_close(got, program(fixed.default_device(), x, b), 1e-5,
                   backend + " batch " + std::to_string(b));
  }
  // 1 and 2 static (the first size, then the dynamic attempt), then buckets 4, 8, 16, 32, 64
  // where the backend pads; one dynamic executable where it runs every size.
  EXPECT_LE(rt.metric("compiles"), 7) << rt.metrics_report();
  EXPECT_GE(lt::test::metric_or_zero(rt, "dynamic.compiles") +
                lt::test::metric_or_zero(rt, "dynamic.bucketed_programs"),
            1);
}

// "off" keeps every size static; so does a program that changes in a way no size explains.
TEST_P(Dynamic, OffSwitchAndUnexplainedChangesStayStatic) {
  lt::Runtime rt = runtime(GetParam());
  lt::Device dev = rt.default_device();
  // The scalar's *value* is data (a runtime input), but a full()'s value is an attribute:
  // 1.5 -> 2.5 is not a size, so the program stays static.
  for (double v : {1.5, 2.5, 3.5}) {
    lt::Tensor y = lt::full(dev, {4}, v) * lt::Tensor::from(dev, std::vector<float>{1, 2, 3, 4});
    EXPECT_FLOAT_EQ(y.to_vector<float>()[3], float(4 * v));
  }
  EXPECT_EQ(rt.metric("compiles"), 3);
  EXPECT_EQ(lt::test::metric_or_zero(rt, "dynamic.compiles"), 0);
  EXPECT_EQ(lt::test::metric_or_zero(rt, "dynamic.static_programs"), 1);
}

// lt_tensor_mark_dynamic: a dim marked static never becomes dynamic; under "marked" only marked
// dims do; a bad dim is a clear error.
TEST_P(Dynamic, MarksForceOrForbid) {
  auto run = [&](const char* mode, int mark) {
    lt::Runtime rt = runtime(GetParam(), mode);
    lt::Device dev = rt.default_device();
    for (int64_t b = 1; b <= 5; ++b) {
      lt::Tensor x = lt::Tensor::from(dev, randn(size_t(b) * 1024, uint32_t(b)), {b, 1024});
      if (mark >= 0) x.mark_dynamic(0, mark == 1);
      EXPECT_EQ((x * 2.0).sum({1}).to_vector<float>().size(), size_t(b));
    }
    return std::pair(rt.metric("compiles"),
                     lt::test::metric_or_zero(rt, "dynamic.compiles") +
                         lt::test::metric_or_zero(rt, "dynamic.bucketed_programs"));
  };
  EXPECT_EQ(run("auto", 0), std::pair(5.0, 0.0));     // marked static: a compile per size
  EXPECT_EQ(run("marked", -1), std::pair(5.0, 0.0));  // "marked", unmarked: static
  auto [compiles, dynamic] = run("marked", 1);        // "marked", marked: dynamic or buckets
  EXPECT_EQ(dynamic, 1);
  EXPECT_LE(compiles, 4);
  lt::Runtime rt = runtime(GetParam());
  lt::Tensor x = lt::Tensor::from(rt.default_device(), std::vector<float>{1, 2}, {2});
  try {
    x.mark_dynamic(3);
    ADD_FAILURE() << "dim 3 of a rank-1 tensor was accepted";
  } catch (const lt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("dim 3 of a tensor of shape [2]"), std::string::npos)
        << e.what();
  }
}

LT_INSTANTIATE_PER_BACKEND(Dynamic, lt::test::built_backends());

// ---- the lowering library's expressions, without a backend ---------------------------------

lt::lower::OwnedGraph reshape_graph(int64_t b) {
  lt::lower::OwnedGraph g;
  int32_t x = g.add("input", LT_DTYPE_F32, {b, 3, 4}, {});
  int64_t shape[] = {b * 3, 4};
  lt_attr a{};
  a.name = "shape";
  a.kind = LT_ATTR_INTS;
  a.ints = shape;
  a.ints_len = 2;
  int32_t r = g.add("reshape", LT_DTYPE_F32, {b * 3, 4}, {x}, &a, 1);
  g.set_inputs({x});
  g.set_outputs({r});
  return g;
}

TEST(DynamicExprs, GeneralizeInstantiateMatch) {
  lt::lower::OwnedGraph g8 = reshape_graph(8), g5 = reshape_graph(5), g11 = reshape_graph(11);
  std::vector<int64_t> values;
  std::vector<lt_dim_expr> exprs;
  std::string why;
  ASSERT_TRUE(lt::lower::generalize(g8.view(), g5.view(), &values, &exprs, &why)) << why;
  ASSERT_EQ(values, std::vector<int64_t>{5});
  // x dim 0 = s, reshape's shape[0] = 3s, its dim 0 = 3s.
  ASSERT_EQ(exprs.size(), 3u);
  EXPECT_EQ(exprs[2].attr, 0);
  EXPECT_EQ(exprs[2].scale, 3);
  EXPECT_EQ(exprs[2].offset, 0);
  g5.set_dynamic(values, exprs);
  lt::lower::validate(g5.view());
  lt::lower::OwnedGraph at11 = lt::lower::instantiate(g5.view(), std::vector<int64_t>{11});
  EXPECT_TRUE(lt::lower::same_structure(at11.view(), g11.view()));
  EXPECT_EQ(at11.view().nodes[1].attrs[0].ints[0], 33);
  std::vector<int64_t> found;
  ASSERT_TRUE(lt::lower::match(g5.view(), g11.view(), &found));
  EXPECT_EQ(found, std::vector<int64_t>{11});
  // A graph whose reshape does not follow the size does not match.
  lt::lower::OwnedGraph odd = reshape_graph(11);
  EXPECT_TRUE(lt::lower::match(g5.view(), odd.view(), &found));
  lt::lower::OwnedGraph other;
  int32_t x = other.add("input", LT_DTYPE_F32, {11, 3, 4}, {});
  int64_t shape[] = {3, 44};
  lt_attr a{};
  a.name = "shape";
  a.kind = LT_ATTR_INTS;
  a.ints = shape;
  a.ints_len = 2;
  other.set_outputs({other.add("reshape", LT_DTYPE_F32, {3, 44}, {x}, &a, 1)});
  other.set_inputs({x});
  EXPECT_FALSE(lt::lower::match(g5.view(), other.view(), &found));
}

TEST(DynamicExprs, ValidateRejectsWrongExpressions) {
  lt::lower::OwnedGraph g = reshape_graph(4);
  g.set_dynamic({4}, {{0, -1, 0, 0, 2, 0}});  // says dim 0 = 2s = 8, but it is 4
  EXPECT_THROW(lt::lower::validate(g.view()), lt::lower::Error);
  g.set_dynamic({4}, {{0, -1, 7, 0, 1, 0}});  // no dim 7
  EXPECT_THROW(lt::lower::validate(g.view()), lt::lower::Error);
  g.set_dynamic({4}, {{0, -1, 0, 3, 1, 0}});  // no symbol 3
  EXPECT_THROW(lt::lower::validate(g.view()), lt::lower::Error);
}

TEST(DynamicExprs, SplitNumbersTakesOnlySuffixedIntegerLiterals) {
  lt::lower::NumberedText t = lt::lower::split_numbers(
      "if (gid >= 96L) x = p1[i0*12L] + 1.5f + v16 + 7 + 0x10L + 2L;", 'L');
  EXPECT_EQ(t.numbers, (std::vector<int64_t>{96, 12, 2}));
  EXPECT_EQ(t.text, "if (gid >= \x01) x = p1[i0*\x01] + 1.5f + v16 + 7 + 0x10L + \x01;");
}

// A toy generator whose text moves with the batch in its element count and a clamp: one
// template, each moving number a parameter of its kernel; a size that changes the code is
// refused.
TEST(DynamicExprs, TemplateSourceMakesMovingNumbersParameters) {
  auto text = [](const lt_graph& g) {
    const int64_t n = g.nodes[1].shape[0] * g.nodes[1].shape[1];
    return "// prelude 8L\n__kernel void k0(__global float* p) {\n  if (gid >= " +
           std::to_string(n) + "L) return;\n  x = min(gid, " + std::to_string(n - 1) +
           "L) * 4L + " + std::to_string(n) + "L;\n}\n\n__kernel void k1(__global float* q) {\n}\n";
  };
  lt::lower::OwnedGraph g3 = reshape_graph(3), g5 = reshape_graph(5), g7 = reshape_graph(7);
  std::vector<int64_t> values;
  std::vector<lt_dim_expr> exprs;
  std::string why;
  ASSERT_TRUE(lt::lower::generalize(g3.view(), g5.view(), &values, &exprs, &why)) << why;
  g5.set_dynamic(values, exprs);
  lt::lower::SourceTemplate t;
  ASSERT_TRUE(lt::lower::template_source(g5.view(), text, "\n__kernel ", "const long", &t, &why))
      << why;
  EXPECT_EQ(
      t.source,
      "// prelude 8L\n__kernel void k0(__global float* p, const long lt_n0, const long lt_n1) "
      "{\n  if (gid >= lt_n0) return;\n  x = min(gid, lt_n1) * 4L + lt_n0;\n}\n\n"
      "__kernel void k1(__global float* q) {\n}\n");
  std::vector<std::vector<int64_t>> args;
  ASSERT_TRUE(t.arguments(text(g7.view()), &args));
  EXPECT_EQ(args, (std::vector<std::vector<int64_t>>{{84, 83}}));
  EXPECT_FALSE(t.arguments("// prelude 8L\n", &args));
  auto changes = [&](const lt_graph& g) {
    return text(g) + std::string(g.nodes[1].shape[0] % 2, ' ');
  };
  EXPECT_FALSE(lt::lower::template_source(g5.view(), changes, "\n__kernel ", "long", &t, &why));
}

}  // namespace
