// TransformerStepTest.cpp — a transformer language-model training step (token and position
// embeddings by gather, causal self-attention, layer norm, GELU MLP, cross-entropy, SGD) runs
// on every loaded backend with the fallback policy "error": every op either runs natively or
// is decomposed by the core into ops the backend runs, so no node leaves the backend and no
// byte moves between backends. The losses match cpu_eager's and go down.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "lazytensor/autograd.hpp"
#include "lazytensor/lazytensor.hpp"
#include "lazytensor/nn.hpp"
#include "lazytensor/optim.hpp"
#include "test_support.hpp"

namespace {

constexpr int64_t kVocab = 16, kDim = 32, kHeads = 2, kSeq = 8, kBatch = 4;

lt::Runtime& runtime() {
  return lt::test::no_fallback_runtime();
}

// One pre-norm decoder block: x + attn(ln1(x)), then x + mlp(ln2(x)).
struct Block : lt::nn::Module {
  Block(const lt::Device& d, uint64_t seed)
      : ln1(d, kDim),
        ln2(d, kDim),
        q(d, kDim, kDim, seed),
        k(d, kDim, kDim, seed + 1),
        v(d, kDim, kDim, seed + 2),
        o(d, kDim, kDim, seed + 3),
        fc1(d, kDim, 4 * kDim, seed + 4),
        fc2(d, 4 * kDim, kDim, seed + 5) {
    register_module("ln1", ln1);
    register_module("ln2", ln2);
    register_module("q", q);
    register_module("k", k);
    register_module("v", v);
    register_module("o", o);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  // x [B,T,D] -> [B,T,D]
  lt::Tensor attention(const lt::Tensor& x) const {
    const int64_t dh = kDim / kHeads;
    auto heads = [&](const lt::Tensor& t) {  // [B,T,D] -> [B,H,T,Dh]
      return t.reshape({kBatch, kSeq, kHeads, dh}).permute({0, 2, 1, 3});
    };
    lt::Tensor qh = heads(q(x));
    lt::Tensor kt = k(x).reshape({kBatch, kSeq, kHeads, dh}).permute({0, 2, 3, 1});
    lt::Tensor vh = heads(v(x));
    lt::Tensor scores = lt::matmul(qh, kt) * (1.0 / std::sqrt(static_cast<double>(dh)));
    // Causal mask: query i sees keys j <= i.
    const lt::Device& dev = x.device();
    lt::Tensor i = lt::arange(dev, 0, kSeq, 1, LT_DTYPE_I64).reshape({kSeq, 1});
    lt::Tensor j = lt::arange(dev, 0, kSeq, 1, LT_DTYPE_I64).reshape({1, kSeq});
    scores = lt::where(j.le(i), scores, lt::scalar(dev, -1e9));
    lt::Tensor ctx = lt::matmul(scores.softmax(-1), vh);  // [B,H,T,Dh]
    return o(ctx.permute({0, 2, 1, 3}).reshape({kBatch, kSeq, kDim}));
  }

  lt::Tensor operator()(const lt::Tensor& x) const {
    lt::Tensor h = x + attention(ln1(x));
    return h + fc2(fc1(ln2(h)).gelu());
  }

  lt::nn::LayerNorm ln1, ln2;
  lt::nn::Linear q, k, v, o, fc1, fc2;
};

struct TinyGpt : lt::nn::Module {
  explicit TinyGpt(const lt::Device& d)
      : tok(d, kVocab, kDim, 11),
        pos(d, kSeq, kDim, 12),
        block(d, 20),
        ln(d, kDim),
        head(d, kDim, kVocab, 30) {
    register_module("tok", tok);
    register_module("pos", pos);
    register_module("block", block);
    register_module("ln", ln);
    register_module("head", head);
  }
  // tokens [B,T] i64 -> logits [B*T, V]
  lt::Tensor operator()(const lt::Tensor& tokens) const {
    lt::Tensor positions = lt::arange(tokens.device(), 0, kSeq, 1, LT_DTYPE_I64);
    lt::Tensor x = tok(tokens) * 0.1 + pos(positions) * 0.1;  // [B,T,D] + [T,D]
    return head(ln(block(x))).reshape({kBatch * kSeq, kVocab});
  }

  lt::nn::Embedding tok, pos;
  Block block;
  lt::nn::LayerNorm ln;
  lt::nn::Linear head;
};

// A deterministic next-token task: t[i+1] = (3 t[i] + 1) mod V from a per-row start.
struct Batch {
  std::vector<int64_t> tokens, targets;
};
Batch make_batch(int step) {
  Batch b;
  for (int64_t r = 0; r < kBatch; ++r) {
    int64_t t = (r * 5 + step * 7) % kVocab;
    for (int64_t i = 0; i < kSeq; ++i) {
      b.tokens.push_back(t);
      t = (3 * t + 1) % kVocab;
      b.targets.push_back(t);
    }
  }
  return b;
}

struct StepReport {
  std::vector<float> losses;
  double fallback_nodes = 0, bytes_between = 0, decomposed = 0;
  std::string metrics;
};

StepReport train(const lt::Device& dev, int steps) {
  TinyGpt model(dev);
  model.materialize();
  lt::optim::SGD opt(model.parameters(), 0.3);
  runtime().reset_metrics();
  StepReport r;
  for (int s = 0; s < steps; ++s) {
    Batch b = make_batch(s % 2);
    lt::Tensor tokens = lt::Tensor::from(dev, b.tokens, {kBatch, kSeq});
    lt::Tensor targets = lt::Tensor::from(dev, b.targets, {kBatch * kSeq});
    lt::Tensor loss = lt::nn::cross_entropy(model(tokens), targets);
    lt::backward(loss);
    opt.step();
    lt::sync(dev);
    r.losses.push_back(loss.item<float>());
  }
  r.fallback_nodes = runtime().metric("fallback_nodes");
  r.bytes_between = runtime().metric("bytes_between_backends");
  r.decomposed = runtime().metric("decomposed_nodes");
  r.metrics = runtime().metrics_report();
  return r;
}

class TransformerStep : public lt::test::BackendTest {
 protected:
  TransformerStep() : BackendTest(lt::test::with_fallback("error")) {}
};

TEST_P(TransformerStep, RunsWithoutFallbackAndMatchesCpuEager) {
  constexpr int kSteps = 6;
  static const StepReport reference = train(runtime().find_device("cpu_eager"), kSteps);
  StepReport got = train(dev_, kSteps);

  EXPECT_EQ(got.fallback_nodes, 0) << got.metrics;
  EXPECT_EQ(got.bytes_between, 0) << got.metrics;
  // softmax, log_softmax, gelu and the layer norm's rsqrt and mean are composites: a backend
  // either claims them or the core decomposes them; either way the step runs on `dev`.
  ASSERT_EQ(got.losses.size(), reference.losses.size());
  // The batches alternate between two sequences: compare each with its own earlier loss.
  EXPECT_LT(got.losses[kSteps - 2], got.losses[0]) << GetParam();
  EXPECT_LT(got.losses[kSteps - 1], got.losses[1]) << GetParam();
  // tpu_sim multiplies in bf16 on its MXU; the others agree to float rounding.
  const double rtol = GetParam() == "tpu_sim" ? 3e-2 : 2e-3;
  for (int s = 0; s < kSteps; ++s) {
    EXPECT_NEAR(got.losses[s], reference.losses[s], rtol * reference.losses[s])
        << GetParam() << " step " << s;
  }
}
LT_INSTANTIATE_PER_BACKEND(TransformerStep, lt::test::built_backends());

}  // namespace
