// models/gpt.hpp — a GPT-style decoder-only transformer language model over lt::nn:
// learned token and position embeddings, pre-LayerNorm blocks of causal multi-head
// self-attention and a GELU MLP, residual dropout, a final LayerNorm and a linear head
// (Radford et al. 2019, in the layout of nanoGPT). Weights start as GPT-2 does: normal with
// std 0.02, residual projections scaled by 1/sqrt(2 * layers), zero biases.
//
// Generation uses a key/value cache: each new token attends to the cached keys and values of
// the ones before it, so a step costs one token's work. Every cache length is a new shape: the
// step's program becomes dynamic in it at its second length where the backend runs it at every
// length (docs/dynamic-shapes.md); elsewhere it compiles once per length.
#ifndef LAZYTENSOR_MODELS_GPT_HPP
#define LAZYTENSOR_MODELS_GPT_HPP

#include "lazytensor/autograd.hpp"
#include "lazytensor/lazytensor.hpp"
#include "lazytensor/nn.hpp"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lt::models {

struct GptConfig {
  int64_t vocab = 0;
  int64_t context = 128;
  int64_t layers = 4;
  int64_t dim = 256;
  int64_t heads = 4;
  double dropout = 0.1;
  uint64_t seed = 1337;
  // Rematerialisation (docs/memory.md): each block's training forward is a recompute region,
  // recomputed in the backward pass instead of kept (same losses, less activation memory).
  bool recompute_blocks = false;
};

// Keys and values of one block for the tokens seen so far: [B, H, T, Dh] each.
struct KVCache {
  std::vector<Tensor> k, v;
  int64_t length = 0;
  void clear() {
    k.clear();
    v.clear();
    length = 0;
  }
};

namespace detail {
// Re-initialises a parameter slot (keeps it registered: the module holds the slot's address).
inline void init_normal(Tensor& slot, double stddev, uint64_t seed) {
  slot = random_normal(slot.device(), slot.shape(), seed, 0.0, stddev, slot.dtype());
  set_requires_grad(slot);
}
// A Linear weight ([out, in]) drawn as [in, out] and transposed: the values format-1 models
// (weights stored [in, out]) had, so training curves stay as they were.
inline void init_normal_linear(Tensor& slot, double stddev, uint64_t seed) {
  slot =
      random_normal(slot.device(), {slot.dim(1), slot.dim(0)}, seed, 0.0, stddev, slot.dtype()).t();
  set_requires_grad(slot);
}
inline void init_zeros(Tensor& slot) {
  slot = zeros(slot.device(), slot.shape(), slot.dtype());
  set_requires_grad(slot);
}
}  // namespace detail

class CausalSelfAttention : public nn::Module {
 public:
  CausalSelfAttention(const Device& d, const GptConfig& c, uint64_t seed)
      : dim_(c.dim),
        heads_(c.heads),
        qkv(d, c.dim, 3 * c.dim, seed),
        proj(d, c.dim, c.dim, seed + 1),
        drop(c.dropout, seed + 2) {
    if (c.heads <= 0 || c.dim % c.heads) {
      throw Error(LT_STATUS_INVALID_ARGUMENT, "gpt: width " + std::to_string(c.dim) +
                                                  " is not divisible by " +
                                                  std::to_string(c.heads) + " heads");
    }
    register_module("qkv", qkv);
    register_module("proj", proj);
    register_module("drop", drop);
    detail::init_normal_linear(qkv.weight, 0.02, seed);
    detail::init_zeros(qkv.bias);
    detail::init_normal_linear(proj.weight, 0.02 / std::sqrt(2.0 * static_cast<double>(c.layers)),
                               seed + 1);
    detail::init_zeros(proj.bias);
  }

  // x [B, T, D] at positions pos0..pos0+T-1 -> [B, T, D]. With a cache, keys and values of
  // earlier positions come from it and this call's are appended (slot `layer`).
  Tensor operator()(const Tensor& x, KVCache* cache = nullptr, size_t layer = 0) {
    const int64_t b = x.dim(0), t = x.dim(1), dh = dim_ / heads_;
    Tensor h = qkv(x);                // [B, T, 3D]
    auto split = [&](int64_t part) {  // -> [B, H, T, Dh]
      return h.slice(-1, part * dim_, (part + 1) * dim_)
          .reshape({b, t, heads_, dh})
          .permute({0, 2, 1, 3});
    };
    Tensor q = split(0), k = split(1), v = split(2);
    int64_t past = 0;
    if (cache) {
      if (cache->k.size() <= layer) {
        cache->k.resize(layer + 1);
        cache->v.resize(layer + 1);
      }
      if (cache->k[layer].defined()) {
        past = cache->k[layer].dim(2);
        k = concat({cache->k[layer], k}, 2);
        v = concat({cache->v[layer], v}, 2);
      }
      cache->k[layer] = k;
      cache->v[layer] = v;
    }
    const int64_t tk = past + t;
    Tensor scores = matmul(q, k.permute({0, 1, 3, 2})) * (1.0 / std::sqrt(double(dh)));
    if (t > 1) {  // query i (absolute past + i) sees keys j <= past + i
      const Device& dev = x.device();
      Tensor i = arange(dev, double(past), double(tk), 1, i64).reshape({t, 1});
      Tensor j = arange(dev, 0, double(tk), 1, i64).reshape({1, tk});
      scores = where(j.le(i), scores, Tensor::scalar(dev, -1e9, scores.dtype()));
    }
    Tensor y = matmul(scores.softmax(-1), v);  // [B, H, T, Dh]
    return drop(proj(y.permute({0, 2, 1, 3}).reshape({b, t, dim_})));
  }

 private:
  int64_t dim_, heads_;

 public:
  nn::Linear qkv, proj;
  nn::Dropout drop;
};

class GptBlock : public nn::Module {
 public:
  GptBlock(const Device& d, const GptConfig& c, uint64_t seed)
      : ln1(d, c.dim),
        attn(d, c, seed),
        ln2(d, c.dim),
        fc1(d, c.dim, 4 * c.dim, seed + 10),
        fc2(d, 4 * c.dim, c.dim, seed + 11),
        drop(c.dropout, seed + 12) {
    register_module("ln1", ln1);
    register_module("attn", attn);
    register_module("ln2", ln2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("drop", drop);
    detail::init_normal_linear(fc1.weight, 0.02, seed + 10);
    detail::init_zeros(fc1.bias);
    detail::init_normal_linear(fc2.weight, 0.02 / std::sqrt(2.0 * static_cast<double>(c.layers)),
                               seed + 11);
    detail::init_zeros(fc2.bias);
  }
  Tensor operator()(const Tensor& x, KVCache* cache = nullptr, size_t layer = 0) {
    Tensor h = x + attn(ln1(x), cache, layer);
    return h + drop(fc2(fc1(ln2(h)).gelu()));
  }

  nn::LayerNorm ln1;
  CausalSelfAttention attn;
  nn::LayerNorm ln2;
  nn::Linear fc1, fc2;
  nn::Dropout drop;
};

class Gpt : public nn::Module {
  GptConfig config_;

 public:
  Gpt(const Device& d, const GptConfig& c)
      : config_(c),
        tok(d, c.vocab, c.dim, c.seed),
        pos(d, c.context, c.dim, c.seed + 1),
        drop(c.dropout, c.seed + 2),
        ln_f(d, c.dim),
        head(d, c.dim, c.vocab, c.seed + 3) {
    if (c.vocab <= 0 || c.context <= 0 || c.layers <= 0 || c.dim <= 0) {
      throw Error(LT_STATUS_INVALID_ARGUMENT,
                  "gpt: vocab, context, layers and width must be positive");
    }
    register_module("tok", tok);
    register_module("pos", pos);
    register_module("drop", drop);
    for (int64_t l = 0; l < c.layers; ++l) {
      blocks_.push_back(
          std::make_unique<GptBlock>(d, c, c.seed + 100 * static_cast<uint64_t>(l + 1)));
      register_module("blocks." + std::to_string(l), *blocks_.back());
    }
    register_module("ln_f", ln_f);
    register_module("head", head);
    detail::init_normal(tok.weight, 0.02, c.seed);
    detail::init_normal(pos.weight, 0.02, c.seed + 1);
    detail::init_normal_linear(head.weight, 0.02, c.seed + 3);
    detail::init_zeros(head.bias);
  }

  const GptConfig& config() const { return config_; }

  // Dropout masks as a function of (seed, step): resumed runs repeat uninterrupted ones.
  void set_step(uint64_t step) {
    drop.set_calls(step);
    for (auto& b : blocks_) {
      b->drop.set_calls(step);
      b->attn.drop.set_calls(step);
    }
  }

  // Data-parallel training: this process's batch is rows first_row.. of the global batch;
  // every dropout draws those rows of the global batch's masks.
  void set_shard(int64_t first_row) {
    drop.set_shard(first_row);
    for (auto& b : blocks_) {
      b->drop.set_shard(first_row);
      b->attn.drop.set_shard(first_row);
    }
  }

  // tokens [B, T] (i64) at positions pos0.. -> logits [B, T, vocab]. With a cache, the
  // tokens continue the ones cached (pos0 = cache->length) and are appended to it.
  Tensor operator()(const Tensor& tokens, KVCache* cache = nullptr) {
    if (tokens.rank() != 2) {
      throw Error(LT_STATUS_SHAPE_MISMATCH, "gpt: tokens must be [batch, time], got " +
                                                lt::detail::shape_string(tokens.shape_span()));
    }
    const int64_t t = tokens.dim(1), pos0 = cache ? cache->length : 0;
    if (pos0 + t > config_.context) {
      throw Error(LT_STATUS_SHAPE_MISMATCH, "gpt: " + std::to_string(pos0 + t) +
                                                " positions exceed the context of " +
                                                std::to_string(config_.context));
    }
    // Positions as data, not arange's attributes: each decoding step (pos0 grows) is then the
    // same program at another cache length, which runs dynamic (docs/dynamic-shapes.md).
    std::vector<int64_t> at(static_cast<size_t>(t));
    for (int64_t i = 0; i < t; ++i) at[static_cast<size_t>(i)] = pos0 + i;
    Tensor positions = Tensor::from(tokens.device(), at, {t});
    Tensor x = drop(tok(tokens) + pos(positions));
    for (size_t l = 0; l < blocks_.size(); ++l) {
      if (config_.recompute_blocks && !cache) {
        RecomputeScope scope;
        x = (*blocks_[l])(x, cache, l);
      } else {
        x = (*blocks_[l])(x, cache, l);
      }
    }
    if (cache) cache->length += t;
    return head(ln_f(x));
  }

  // Mean cross-entropy (nats per token) of next-token targets [B * T].
  Tensor loss(const Tensor& tokens, const Tensor& targets) {
    Tensor logits = (*this)(tokens);
    return nn::cross_entropy(logits.reshape({tokens.dim(0) * tokens.dim(1), config_.vocab}),
                             targets);
  }

  // Multiply-adds x2 of one training step (forward + backward = 3x forward) on `tokens`
  // tokens of context `t`: the figure GFLOP/s rates are computed from.
  double train_flops(int64_t batch, int64_t t) const {
    const double d = double(config_.dim), l = double(config_.layers), v = double(config_.vocab);
    const double n = double(batch * t);
    const double per_token = l * (2 * 3 * d * d + 2 * d * d + 2 * 8 * d * d) + 2 * d * v;
    const double attn = l * 2 * 2 * double(t) * d;  // QK^T and PV, full (masked) square
    return 3.0 * n * (per_token + attn);
  }

  nn::Embedding tok, pos;
  nn::Dropout drop;
  nn::LayerNorm ln_f;
  nn::Linear head;

 private:
  std::vector<std::unique_ptr<GptBlock>> blocks_;
};

}  // namespace lt::models

#endif  // LAZYTENSOR_MODELS_GPT_HPP
