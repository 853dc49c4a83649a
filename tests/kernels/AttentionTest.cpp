// AttentionTest.cpp — the fused attention kernel (host::attention) against a plain-loop run of the
// decomposition it replaces (matmul, scale, mask, max, sub, exp, sum, div, matmul), including NaN
// inputs, -inf / +inf masks and fully masked rows; and the matcher plus StepProgram's fused step
// against the same graph run node by node.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "lazytensor/host/attention.hpp"
#include "lazytensor/host/steps.hpp"
#include "lazytensor/lower/builder.hpp"

namespace {

using lt::host::AttentionDims;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Case {
  int64_t batch, m, n, d, dv;
};

// The decomposition in plain loops: each op rounded to f32 as the host kernels do, the
// products accumulated in double.
std::vector<float> reference(const AttentionDims& a, const std::vector<float>& q,
                             const std::vector<float>& k, const std::vector<float>& v,
                             const float* scale, const float* mask, const uint8_t* cond = nullptr,
                             float fill = 0) {
  std::vector<float> out(a.batch * a.m * a.dv);
  std::vector<float> x(a.n);
  for (int64_t b = 0; b < a.batch; ++b) {
    int64_t moff = 0, coff = 0, rest = b;
    for (size_t i = a.lead.size(); i-- > 0;) {
      moff += (rest % a.lead[i]) * a.mask_stride[i];
      if (cond) coff += (rest % a.lead[i]) * a.cond_stride[i];
      rest /= a.lead[i];
    }
    for (int64_t i = 0; i < a.m; ++i) {
      for (int64_t j = 0; j < a.n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < a.d; ++p)
          s += double(q[(b * a.m + i) * a.d + p]) *
               k[a.trans_k ? (b * a.n + j) * a.d + p : (b * a.d + p) * a.n + j];
        x[j] = float(s);
        if (scale) x[j] = a.scale_divides ? x[j] / *scale : x[j] * *scale;
        if (cond && !cond[coff + i * a.cond_si + j * a.cond_sj]) x[j] = fill;
        if (mask) x[j] = x[j] + mask[moff + i * a.mask_si + j * a.mask_sj];
      }
      float mx = -kInf;  // max propagates NaN
      for (int64_t j = 0; j < a.n; ++j) mx = (x[j] != x[j] || mx != mx) ? kNaN : std::max(mx, x[j]);
      float sum = 0;
      for (int64_t j = 0; j < a.n; ++j) sum += (x[j] = std::exp(x[j] - mx));
      for (int64_t j = 0; j < a.n; ++j) x[j] = x[j] / sum;
      for (int64_t c = 0; c < a.dv; ++c) {
        double o = 0;
        for (int64_t j = 0; j < a.n; ++j)
          o += double(x[j]) * v[a.trans_v ? (b * a.dv + c) * a.n + j : (b * a.n + j) * a.dv + c];
        out[(b * a.m + i) * a.dv + c] = float(o);
      }
    }
  }
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    const bool nan_g = std::isnan(got[i]), nan_w = std::isnan(want[i]);
    if (nan_g != nan_w ||
        (!nan_w && std::fabs(got[i] - want[i]) > 2e-5f * (1 + std::fabs(want[i])))) {
      ADD_FAILURE() << what << " element " << i << ": got " << got[i] << ", want " << want[i];
      ++bad;
    }
  }
}

std::vector<float> randoms(size_t n, std::mt19937& rng, float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> x(n);
  for (float& e : x) e = u(rng);
  return x;
}

TEST(Attention, MatchesTheDecompositionForEveryBlockingScaleMaskAndTranspose) {
  // Blocks of 16-64 query rows: one partial block, several, a last one of one row; keys from 1 to
  // 300 (16-row blocks there); a head dim of 1.
  const Case cases[] = {{2, 5, 7, 3, 4}, {3, 130, 33, 16, 8}, {1, 65, 300, 8, 5}, {2, 17, 1, 1, 2}};
  std::mt19937 rng(7);
  for (const Case& c : cases)
    for (int flags = 0; flags < 16; ++flags) {
      AttentionDims a;
      a.batch = c.batch, a.m = c.m, a.n = c.n, a.d = c.d, a.dv = c.dv;
      a.trans_k = flags & 1, a.trans_v = flags & 2, a.scale_divides = flags & 4;
      const bool with_mask = flags & 8;
      a.lead = {c.batch};
      a.mask_stride = {0};
      std::vector<float> mask;
      if (with_mask) {  // one [m, n] mask for every batch entry, a few -inf
        a.mask_si = c.n, a.mask_sj = 1;
        mask = randoms(c.m * c.n, rng, -2, 2);
        for (size_t i = 0; i < mask.size(); i += 3) mask[i] = -kInf;
      }
      const std::vector<float> q = randoms(c.batch * c.m * c.d, rng),
                               k = randoms(c.batch * c.n * c.d, rng),
                               v = randoms(c.batch * c.n * c.dv, rng);
      const float scale = 0.37f;
      std::vector<float> out(c.batch * c.m * c.dv, kNaN);
      lt::host::attention(a, q.data(), k.data(), v.data(), &scale,
                          with_mask ? mask.data() : nullptr, out.data());
      expect_close(out, reference(a, q, k, v, &scale, with_mask ? mask.data() : nullptr),
                   "case m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                       " flags=" + std::to_string(flags));
      // No scale at all.
      lt::host::attention(a, q.data(), k.data(), v.data(), nullptr, nullptr, out.data());
      expect_close(out, reference(a, q, k, v, nullptr, nullptr), "unscaled");
    }
}

TEST(Attention, KeepsTheDecompositionsNaNAndInfinityRows) {
  // [2 heads of a batch of 2] x 40 queries x 24 keys; the mask is [2, 1, 40, 24]: per batch
  // entry, broadcast over heads.
  AttentionDims a;
  a.batch = 4, a.m = 40, a.n = 24, a.d = 6, a.dv = 3;
  a.lead = {2, 2};
  a.mask_stride = {40 * 24, 0};
  a.mask_si = 24, a.mask_sj = 1;
  std::mt19937 rng(11);
  std::vector<float> q = randoms(a.batch * a.m * a.d, rng), k = randoms(a.batch * a.n * a.d, rng),
                     v = randoms(a.batch * a.n * a.dv, rng), mask(2 * 40 * 24, 0.0f);
  for (int64_t i = 0; i < a.m; ++i)  // causal in batch entry 0
    for (int64_t j = i + 1; j < a.n; ++j) mask[i * a.n + j] = -kInf;
  for (int64_t j = 0; j < a.n; ++j) mask[40 * 24 + 5 * 24 + j] = -kInf;  // a fully masked row
  mask[40 * 24 + 7 * 24 + 3] = kInf;                                     // +inf: a NaN row
  mask[40 * 24 + 9 * 24 + 4] = kNaN;                                     // NaN: a NaN row
  q[(1 * a.m + 11) * a.d + 2] = kNaN;  // NaN in a query: that row of head 1
  v[(3 * a.n + 6) * a.dv + 1] = kNaN;  // NaN in a value: column 1 of head 3 wherever read
  const float scale = 0.125f;
  std::vector<float> out(a.batch * a.m * a.dv);
  lt::host::attention(a, q.data(), k.data(), v.data(), &scale, mask.data(), out.data());
  const std::vector<float> want = reference(a, q, k, v, &scale, mask.data());
  expect_close(out, want, "special rows");
  // The cases really are there: batch entry 1 (heads 2, 3) has NaN rows 5, 7 and 9; head 1 row
  // 11; head 0's first row sees key 0 only (its output is v's row 0).
  for (int64_t head : {2, 3})
    for (int64_t row : {5, 7, 9}) EXPECT_TRUE(std::isnan(out[(head * a.m + row) * a.dv]));
  EXPECT_TRUE(std::isnan(out[(1 * a.m + 11) * a.dv]));
  EXPECT_FALSE(std::isnan(out[(1 * a.m + 12) * a.dv]));
  for (int64_t c = 0; c < a.dv; ++c) EXPECT_FLOAT_EQ(out[c], v[c]);
}

TEST(Attention, SelectsWithACausalConditionLikeTheDecomposition) {
  // where(cond, scores * scale, fill) + mask: cond [m, n] causal for every head, fill -1e9 (as
  // lt::models::Gpt writes it) and -inf (a fully masked first row when keys start later).
  for (float fill : {-1e9f, -kInf}) {
    AttentionDims a;
    a.batch = 3, a.m = 37, a.n = 37, a.d = 5, a.dv = 4;
    a.lead = {3};
    a.mask_stride = {0};
    a.cond_stride = {0};
    a.cond_si = a.n, a.cond_sj = 1;
    std::vector<uint8_t> cond(a.m * a.n);
    for (int64_t i = 0; i < a.m; ++i)
      for (int64_t j = 0; j < a.n; ++j) cond[i * a.n + j] = j <= i - (fill < -1e30f ? 1 : 0);
    std::mt19937 rng(5);
    const std::vector<float> q = randoms(a.batch * a.m * a.d, rng),
                             k = randoms(a.batch * a.n * a.d, rng),
                             v = randoms(a.batch * a.n * a.dv, rng);
    const float scale = 0.5f;
    std::vector<float> out(a.batch * a.m * a.dv);
    lt::host::attention(a, q.data(), k.data(), v.data(), &scale, nullptr, out.data(), cond.data(),
                        fill);
    expect_close(out, reference(a, q, k, v, &scale, nullptr, cond.data(), fill), "where");
    // Row 0 sees key 0 only with fill -1e9 (its output is v's row 0); with -inf none: NaN.
    if (fill > -1e30f)
      EXPECT_FLOAT_EQ(out[0], v[0]);
    else
      EXPECT_TRUE(std::isnan(out[0]));
  }
}

// A graph the core hands a backend for softmax(Q·Kᵀ·scale + mask)·V over [B, H, T, D] (the
// batched matmuls as reshapes around rank-3 ones), optionally reading K through a transpose.
struct AttentionGraph {
  lt::lower::OwnedGraph g;
  int32_t q, k, v, scale, mask, softmax, out;
};

void build(AttentionGraph& ag, bool transposed_k, bool softmax_is_output, bool causal = false) {
  using lt::lower::Shape;
  lt::lower::Builder b(ag.g);
  const int64_t B = 2, H = 3, T = 40, D = 8;
  auto input = [&](Shape s) { return ag.g.add("input", LT_DTYPE_F32, std::move(s), {}); };
  ag.q = input({B, H, T, D});
  ag.k = input(transposed_k ? Shape{B * H, T, D} : Shape{B, H, D, T});
  ag.v = input({B, H, T, D});
  ag.scale = input({});
  ag.mask = input({T, T});
  const int32_t kk = transposed_k ? b.permute(ag.k, {0, 2, 1}) : b.reshape(ag.k, {B * H, D, T});
  const int32_t s = b.reshape(b.matmul(b.reshape(ag.q, {B * H, T, D}), kk), {B, H, T, T});
  int32_t scaled = b.mul(s, ag.scale);
  if (causal) {  // lt::models::Gpt's mask: where(j <= i, scores, -1e9)
    const int32_t i = b.reshape(b.arange(T, 0, 1, LT_DTYPE_I64), {T, 1});
    const int32_t j = b.reshape(b.arange(T, 0, 1, LT_DTYPE_I64), {1, T});
    scaled = b.where(b.binary(lt::kOpLe, j, i), scaled, b.scalar(-1e9, LT_DTYPE_F32));
  }
  const int32_t x = b.add(scaled, ag.mask);
  lt_attr axis{"axis", LT_ATTR_INT, 3, 0, nullptr, 0, nullptr};
  ag.softmax = ag.g.add("softmax", LT_DTYPE_F32, {B, H, T, T}, {x}, &axis, 1);
  const int32_t o = b.matmul(b.reshape(ag.softmax, {B * H, T, T}), b.reshape(ag.v, {B * H, T, D}));
  ag.out = b.reshape(o, {B, H, T, D});
  ag.g.set_inputs({ag.q, ag.k, ag.v, ag.scale, ag.mask});
  ag.g.set_outputs(softmax_is_output ? std::vector<int32_t>{ag.out, ag.softmax}
                                     : std::vector<int32_t>{ag.out});
}

// Data for build()'s inputs in order: Q, K, V, the scale (0.35) and a [T, T] mask in [-3, 1).
std::vector<std::vector<float>> attention_inputs(std::mt19937& rng) {
  std::vector<std::vector<float>> in;
  for (int i = 0; i < 3; ++i) in.push_back(randoms(2 * 3 * 40 * 8, rng));
  in.push_back({0.35f});
  in.push_back(randoms(40 * 40, rng, -3, 1));
  return in;
}

// Runs the graph through a StepProgram, fused (find_attention) or node by node.
std::vector<float> run(const lt_graph& g, bool fused, const std::vector<std::vector<float>>& in) {
  lt::host::StepProgram p(g);
  std::vector<int32_t> skip(g.num_nodes, 0);
  std::vector<lt::host::AttentionMatch> found =
      fused ? lt::host::find_attention(g) : std::vector<lt::host::AttentionMatch>{};
  for (const auto& m : found)
    for (int32_t v : m.interior) skip[v] = 1;
  for (size_t i = 0; i < g.num_nodes; ++i) {
    if (std::string_view(g.nodes[i].op) == "input" || skip[i]) continue;
    bool added = false;
    for (const auto& m : found) {
      if (m.output != static_cast<int32_t>(i)) continue;
      p.add_attention(m);
      added = true;
    }
    if (!added) p.add_node(static_cast<int32_t>(i));
  }
  p.finish();
  std::vector<void*> ins;
  for (const auto& x : in) ins.push_back(const_cast<float*>(x.data()));
  std::vector<float> out(2 * 3 * 40 * 8), extra(2 * 3 * 40 * 40);
  std::vector<void*> outs = {out.data(), extra.data()};
  p.run(ins.data(), outs.data());
  return out;
}

TEST(Attention, FindsThePatternAndRunsItAsOneStep) {
  for (bool transposed_k : {false, true}) {
    AttentionGraph ag;
    build(ag, transposed_k, false);
    const lt_graph& g = ag.g.view();
    const std::vector<lt::host::AttentionMatch> found = lt::host::find_attention(g);
    ASSERT_EQ(found.size(), 1u);
    const lt::host::AttentionMatch& m = found[0];
    EXPECT_EQ(m.output, static_cast<int32_t>(g.num_nodes) - 2);  // the matmul before the reshape
    EXPECT_EQ(m.scale, ag.scale);
    EXPECT_EQ(m.mask, ag.mask);
    EXPECT_FALSE(m.scale_divides);
    EXPECT_EQ(m.trans_k, transposed_k);
    if (transposed_k)
      EXPECT_EQ(m.k, ag.k);  // the permute's operand
    else
      EXPECT_EQ(g.nodes[m.k].operands[0], ag.k);  // K's reshape
    EXPECT_TRUE(lt::host::in_attention(g, ag.softmax));
    // Interior: (permute,) matmul, reshape, mul, add, softmax, reshape; not the final reshape.
    EXPECT_EQ(m.interior.size(), transposed_k ? 7u : 6u);
    std::mt19937 rng(3);
    std::vector<std::vector<float>> in = attention_inputs(rng);
    for (size_t i = 0; i < in[4].size(); i += 41) in[4][i] = -kInf;
    expect_close(run(g, true, in), run(g, false, in), "fused against node by node");
  }
}

TEST(Attention, FindsACausalWhereAndRunsItAsOneStep) {
  AttentionGraph ag;
  build(ag, false, false, true);
  const lt_graph& g = ag.g.view();
  const std::vector<lt::host::AttentionMatch> found = lt::host::find_attention(g);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_GE(found[0].cond, 0);
  EXPECT_STREQ(g.nodes[found[0].cond].op, "le");
  EXPECT_STREQ(g.nodes[found[0].fill].op, "full");
  EXPECT_EQ(found[0].mask, ag.mask);
  EXPECT_TRUE(lt::host::in_attention(g, ag.softmax));
  std::mt19937 rng(9);
  std::vector<std::vector<float>> in = attention_inputs(rng);
  expect_close(run(g, true, in), run(g, false, in), "causal, fused against node by node");
}

TEST(Attention, LeavesAnAttentionWhoseProbabilitiesAreReadAlone) {
  AttentionGraph ag;
  build(ag, false, true);  // the softmax is a graph output too (a backward pass reads it)
  EXPECT_TRUE(lt::host::find_attention(ag.g.view()).empty());
  EXPECT_FALSE(lt::host::in_attention(ag.g.view(), ag.softmax));
}

}  // namespace
