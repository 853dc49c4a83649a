// nn.hpp — header-only neural-network building blocks over lt::Tensor and autograd: Module
// with named parameters, Linear, Conv2d, MaxPool2d, LayerNorm, Embedding, LSTMCell,
// Dropout, ReLU/GELU, losses and seeded initialisation. Owned by the train engineer.
//
// Parameters are leaves that require gradients. Optimizers replace them with new tensors
// each step (lazy values are immutable), through the Tensor* slots parameters() returns, so
// a Module must not move after construction (copy and move are deleted).
#ifndef LAZYTENSOR_NN_HPP
#define LAZYTENSOR_NN_HPP

#include "lazytensor/autograd.hpp"
#include "lazytensor/lazytensor.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace lt::nn {

// ---- initialisation (seeded: the same values on every backend) -----------------------------

// Uniform in [-bound, bound] with bound = gain * sqrt(3 / fan_in); gain sqrt(2) suits ReLU.
inline Tensor kaiming_uniform(const Device& device, IntList shape, int64_t fan_in, uint64_t seed,
                              double gain = std::sqrt(2.0)) {
  double bound = gain * std::sqrt(3.0 / static_cast<double>(fan_in));
  return random_uniform(device, shape, seed, -bound, bound);
}
// Uniform in [-b, b] with b = gain * sqrt(6 / (fan_in + fan_out)).
inline Tensor xavier_uniform(const Device& device, IntList shape, int64_t fan_in, int64_t fan_out,
                             uint64_t seed, double gain = 1.0) {
  double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return random_uniform(device, shape, seed, -bound, bound);
}

// ---- Module -----------------------------------------------------------------------------

class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  // Parameters of this module and its children, named "child.weight"; the pointers are the
  // module's own slots (an optimizer assigns new values through them).
  std::vector<std::pair<std::string, Tensor*>> named_parameters() {
    std::vector<std::pair<std::string, Tensor*>> out;
    for (auto& [name, t] : params_) out.emplace_back(name, t);
    for (auto& [name, child] : children_) {
      for (auto& [sub, t] : child->named_parameters()) out.emplace_back(name + "." + sub, t);
    }
    return out;
  }
  std::vector<Tensor*> parameters() {
    std::vector<Tensor*> out;
    for (auto& [name, t] : named_parameters()) out.push_back(t);
    return out;
  }
  int64_t num_parameters() {
    int64_t n = 0;
    for (Tensor* t : parameters()) n += t->numel();
    return n;
  }
  void train(bool on = true) {
    training_ = on;
    for (auto& [name, child] : children_) child->train(on);
  }
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad() {
    for (Tensor* t : parameters()) lt::zero_grad(*t);
  }
  // Computes every pending parameter (e.g. random initialisation) in one graph, so that
  // the first training step compiles the same graph as every later one.
  void materialize() {
    auto ps = parameters();
    if (!ps.empty()) sync(ps.front()->device());
  }

  // The parameters under the names PyTorch's state_dict() gives the same module tree (where
  // they differ: LayerNorm and GroupNorm's gamma and beta are "weight" and "bias" there);
  // lt::load_state_dict reads a PyTorch-saved safetensors file by these names.
  std::vector<std::pair<std::string, Tensor*>> torch_named_parameters() {
    std::vector<std::pair<std::string, Tensor*>> out;
    for (auto& [name, t] : params_) {
      auto alias = torch_names_.find(t);
      out.emplace_back(alias == torch_names_.end() ? name : alias->second, t);
    }
    for (auto& [name, child] : children_) {
      for (auto& [sub, t] : child->torch_named_parameters()) out.emplace_back(name + "." + sub, t);
    }
    return out;
  }

  // The parameters whose layout changed in checkpoint format 2 (nn::Linear's weight: [in, out]
  // before, [out, in] like PyTorch since): lt::load_checkpoint transposes them, and their
  // optimizer state, when it reads a format-1 file.
  std::vector<const Tensor*> transposed_since_format2() {
    std::vector<const Tensor*> out(transposed_.begin(), transposed_.end());
    for (auto& [name, child] : children_) {
      for (const Tensor* t : child->transposed_since_format2()) out.push_back(t);
    }
    return out;
  }

 protected:
  // Registers a parameter slot (a member of the derived class) and marks it trainable.
  void register_parameter(std::string name, Tensor& slot) {
    set_requires_grad(slot);
    params_.emplace_back(std::move(name), &slot);
  }
  void register_module(std::string name, Module& child) {
    children_.emplace_back(std::move(name), &child);
  }
  // The parameter's name in PyTorch's state_dict, when it differs from ours.
  void set_torch_name(Tensor& slot, std::string torch_name) {
    torch_names_[&slot] = std::move(torch_name);
  }
  void mark_transposed_since_format2(Tensor& slot) { transposed_.push_back(&slot); }

 private:
  std::vector<std::pair<std::string, Tensor*>> params_;
  std::vector<std::pair<std::string, Module*>> children_;
  std::map<const Tensor*, std::string> torch_names_;
  std::vector<const Tensor*> transposed_;
  bool training_ = true;
};

// y = x W^T + b with W [out, in] and b [out], as torch.nn.Linear (so PyTorch's weights load by
// name). The transpose costs nothing on the host backends: the step program folds a transpose
// read only by GEMMs into the GEMM as a transposed operand (docs/architecture.md). Checkpoints
// of format 1 stored W as [in, out]; lt::load_checkpoint converts them once.
class Linear : public Module {
 public:
  Linear(const Device& device, int64_t in, int64_t out, uint64_t seed, bool bias = true)
      : in_(in), out_(out) {
    if (in <= 0 || out <= 0) {
      throw Error(LT_STATUS_INVALID_ARGUMENT, "Linear: sizes must be positive, got " +
                                                  std::to_string(in) + " -> " +
                                                  std::to_string(out));
    }
    // Drawn as [in, out] and transposed: the same initial values as format-1 models had.
    weight = kaiming_uniform(device, {in, out}, in, seed).t();
    register_parameter("weight", weight);
    mark_transposed_since_format2(weight);
    if (bias) {
      double b = 1.0 / std::sqrt(static_cast<double>(in));
      this->bias = random_uniform(device, {out}, seed ^ 0x5bd1e995ULL, -b, b);
      register_parameter("bias", this->bias);
    }
  }
  Tensor forward(const Tensor& x,
                 std::source_location loc = std::source_location::current()) const {
    lt::detail::ApiFrame frame(loc);
    if (x.rank() == 0 || x.dim(-1) != in_) {
      throw Error(LT_STATUS_SHAPE_MISMATCH, "Linear(" + std::to_string(in_) + " -> " +
                                                std::to_string(out_) + "): input of shape " +
                                                detail::shape_string(x.shape_span()) +
                                                " does not end in " + std::to_string(in_));
    }
    Tensor y = matmul(x, weight.t());
    return bias.defined() ? y + bias : y;
  }
  Tensor operator()(const Tensor& x,
                    std::source_location loc = std::source_location::current()) const {
    return forward(x, loc);
  }
  Tensor weight, bias;

 private:
  int64_t in_, out_;
};

// NCHW convolution; weight [out, in/groups, k, k], bias [out].
class Conv2d : public Module {
 public:
  Conv2d(const Device& device, int64_t in, int64_t out, int64_t kernel, uint64_t seed,
         int64_t stride = 1, int64_t padding = 0, int64_t groups = 1, bool bias = true)
      : stride_(stride), padding_(padding), groups_(groups) {
    if (groups <= 0 || in % groups || out % groups) {
      throw Error(LT_STATUS_INVALID_ARGUMENT,
                  "Conv2d: channels " + std::to_string(in) + " -> " + std::to_string(out) +
                      " are not divisible by groups " + std::to_string(groups));
    }
    int64_t fan_in = in / groups * kernel * kernel;
    weight = kaiming_uniform(device, {out, in / groups, kernel, kernel}, fan_in, seed);
    register_parameter("weight", weight);
    if (bias) {
      double b = 1.0 / std::sqrt(static_cast<double>(fan_in));
      this->bias = random_uniform(device, {out}, seed ^ 0x5bd1e995ULL, -b, b);
      register_parameter("bias", this->bias);
    }
  }
  Tensor forward(const Tensor& x,
                 std::source_location loc = std::source_location::current()) const {
    lt::detail::ApiFrame frame(loc);
    return conv2d(x, weight, bias, {stride_, stride_}, {padding_, padding_}, {1, 1}, groups_);
  }
  Tensor operator()(const Tensor& x,
                    std::source_location loc = std::source_location::current()) const {
    return forward(x, loc);
  }
  Tensor weight, bias;

 private:
  int64_t stride_, padding_, groups_;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0)
      : k_(kernel), s_(stride ? stride : kernel), p_(padding) {}
  Tensor forward(const Tensor& x,
                 std::source_location loc = std::source_location::current()) const {
    lt::detail::ApiFrame frame(loc);
    return max_pool2d(x, {k_, k_}, {s_, s_}, {p_, p_});
  }
  Tensor operator()(const Tensor& x,
                    std::source_location loc = std::source_location::current()) const {
    return forward(x, loc);
  }

 private:
  int64_t k_, s_, p_;
};

// Normalises the last dim: (x - mean) / sqrt(var + eps) * gamma + beta.
class LayerNorm : public Module {
 public:
  LayerNorm(const Device& device, int64_t dim, double eps = 1e-5) : dim_(dim), eps_(eps) {
    gamma = ones(device, {dim});
    beta = zeros(device, {dim});
    register_parameter("gamma", gamma);
    register_parameter("beta", beta);
    set_torch_name(gamma, "weight");
    set_torch_name(beta, "bias");
  }
  Tensor forward(const Tensor& x,
                 std::source_location loc = std::source_location::current()) const {
    lt::detail::ApiFrame frame(loc);
    if (x.rank() == 0 || x.dim(-1) != dim_) {
      throw Error(LT_STATUS_SHAPE_MISMATCH, "LayerNorm(" + std::to_string(dim_) +
                                                "): input of shape " +
                                                detail::shape_string(x.shape_span()));
    }
    Tensor mu = x.mean({-1}, true);
    Tensor d = x - mu;
    Tensor var = (d * d).mean({-1}, true);
    return d * (var + eps_).rsqrt() * gamma + beta;
  }
  Tensor operator()(const Tensor& x,
                    std::source_location loc = std::source_location::current()) const {
    return forward(x, loc);
  }
  Tensor gamma, beta;

 private:
  int64_t dim_;
  double eps_;
};

// Group normalisation (Wu & He 2018) of NCHW input: the channels split into `groups`, each
// sample's group normalised over its channels and pixels, then a per-channel gamma and beta.
// No batch statistics: the same in training and evaluation, at any batch size. groups = 1 is
// layer norm over (C, H, W); groups = C is instance norm.
class GroupNorm : public Module {
 public:
  GroupNorm(const Device& device, int64_t groups, int64_t channels, double eps = 1e-5)
      : groups_(groups), channels_(channels), eps_(eps) {
    if (groups <= 0 || channels <= 0 || channels % groups) {
      throw Error(LT_STATUS_INVALID_ARGUMENT, "GroupNorm: " + std::to_string(channels) +
                                                  " channels do not split into " +
                                                  std::to_string(groups) + " groups");
    }
    gamma = ones(device, {channels});
    beta = zeros(device, {channels});
    register_parameter("gamma", gamma);
    register_parameter("beta", beta);
    set_torch_name(gamma, "weight");
    set_torch_name(beta, "bias");
  }
  Tensor forward(const Tensor& x,
                 std::source_location loc = std::source_location::current()) const {
    lt::detail::ApiFrame frame(loc);
    if (x.rank() != 4 || x.dim(1) != channels_) {
      throw Error(LT_STATUS_SHAPE_MISMATCH, "GroupNorm(" + std::to_string(channels_) +
                                                " channels): expected NCHW input, got " +
                                                detail::shape_string(x.shape_span()));
    }
    const int64_t n = x.dim(0), h = x.dim(2), w = x.dim(3);
    Tensor g = x.reshape({n, groups_, channels_ / groups_ * h * w});
    Tensor d = g - g.mean({-1}, true);
    Tensor y = (d * ((d * d).mean({-1}, true) + eps_).rsqrt()).reshape({n, channels_, h, w});
    return y * gamma.reshape({channels_, 1, 1}) + beta.reshape({channels_, 1, 1});
  }
  Tensor operator()(const Tensor& x,
                    std::source_location loc = std::source_location::current()) const {
    return forward(x, loc);
  }
  Tensor gamma, beta;

 private:
  int64_t groups_, channels_;
  double eps_;
};

// Rows of a [num, dim] table picked by integer indices: out shape indices.shape + [dim].
class Embedding : public Module {
 public:
  Embedding(const Device& device, int64_t num, int64_t dim, uint64_t seed) {
    weight = random_normal(device, {num, dim}, seed, 0.0, 1.0);
    register_parameter("weight", weight);
  }
  Tensor forward(const Tensor& indices,
                 std::source_location loc = std::source_location::current()) const {
    lt::detail::ApiFrame frame(loc);
    return weight.gather(indices, 0);
  }
  Tensor operator()(const Tensor& indices,
                    std::source_location loc = std::source_location::current()) const {
    return forward(indices, loc);
  }
  Tensor weight;
};

// One LSTM step: gates = x W_ih + h W_hh + b, in order input, forget, cell, output.
class LSTMCell : public Module {
 public:
  LSTMCell(const Device& device, int64_t in, int64_t hidden, uint64_t seed) : hidden_(hidden) {
    double b = 1.0 / std::sqrt(static_cast<double>(hidden));
    w_ih = random_uniform(device, {in, 4 * hidden}, seed, -b, b);
    w_hh = random_uniform(device, {hidden, 4 * hidden}, seed + 1, -b, b);
    bias = random_uniform(device, {4 * hidden}, seed + 2, -b, b);
    register_parameter("w_ih", w_ih);
    register_parameter("w_hh", w_hh);
    register_parameter("bias", bias);
  }
  // Returns {h', c'}.
  std::pair<Tensor, Tensor> forward(
      const Tensor& x, const Tensor& h, const Tensor& c,
      std::source_location loc = std::source_location::current()) const {
    lt::detail::ApiFrame frame(loc);
    Tensor gates = matmul(x, w_ih) + matmul(h, w_hh) + bias;
    auto part = [&](int64_t k) { return gates.slice(-1, k * hidden_, (k + 1) * hidden_); };
    Tensor i = part(0).sigmoid(), f = part(1).sigmoid(), g = part(2).tanh(), o = part(3).sigmoid();
    Tensor c2 = f * c + i * g;
    return {o * c2.tanh(), c2};
  }
  Tensor w_ih, w_hh, bias;

 private:
  int64_t hidden_;
};

// Inverted dropout with the counter-based generator: identical masks on every backend. The
// seed advances per call and is a graph parameter, so it never recompiles.
class Dropout : public Module {
 public:
  explicit Dropout(double p, uint64_t seed) : p_(p), seed_(seed) {
    if (p < 0.0 || p >= 1.0) {
      throw Error(LT_STATUS_INVALID_ARGUMENT,
                  "Dropout: p must be in [0, 1), got " + std::to_string(p));
    }
  }
  Tensor forward(const Tensor& x, std::source_location loc = std::source_location::current()) {
    lt::detail::ApiFrame frame(loc);
    if (!is_training() || p_ == 0.0) return x;
    const uint64_t seed = seed_ + calls_++;
    Tensor u;
    if (first_row_ == 0) {
      u = random_uniform(x.device(), x.shape(), seed, 0.0, 1.0, x.dtype());
    } else {
      // This process's rows of the global batch's mask: the same counter-based stream from
      // the shard's first element (random_uniform(0, 1) is random_unit itself).
      const int64_t rows = x.rank() ? x.dim(0) : 1, inner = rows ? x.numel() / rows : 0;
      Tensor s = Tensor::from(x.device(), std::vector<int64_t>{static_cast<int64_t>(seed)}, {});
      u = apply("random_unit", {s},
                {Attr::Ints("shape", x.shape_span()), Attr::Int("offset", first_row_ * inner),
                 Attr::Int("dtype", static_cast<int64_t>(x.dtype()))});
    }
    Tensor keep = (u >= p_).cast(x.dtype());
    return x * keep * (1.0 / (1.0 - p_));
  }
  Tensor operator()(const Tensor& x, std::source_location loc = std::source_location::current()) {
    return forward(x, loc);
  }
  // The mask of call n is a function of (seed, n) alone: a training loop that sets n from its
  // step number draws the same masks when resumed from a checkpoint.
  void set_calls(uint64_t n) { calls_ = n; }
  // Data-parallel training: x holds rows first_row.. of the global batch, and its mask is
  // those rows of the mask one process would draw for the whole batch (docs/distributed.md).
  void set_shard(int64_t first_row) { first_row_ = first_row; }

 private:
  double p_;
  uint64_t seed_, calls_ = 0;
  int64_t first_row_ = 0;
};

class ReLU : public Module {
 public:
  Tensor operator()(const Tensor& x,
                    std::source_location loc = std::source_location::current()) const {
    return x.relu(loc);
  }
};
class GELU : public Module {
 public:
  Tensor operator()(const Tensor& x,
                    std::source_location loc = std::source_location::current()) const {
    return x.gelu(loc);
  }
};

// Modules applied in order, each to the previous one's output (torch::nn::Sequential). It owns
// them; they are named "0", "1", ... as in PyTorch, so parameters read "0.weight".
//   nn::Sequential net;
//   net.emplace<nn::Linear>(dev, 64, 128, 1);
//   net.emplace<nn::ReLU>();
//   net.emplace<nn::Linear>(dev, 128, 10, 2);
//   Tensor logits = net(x);
class Sequential : public Module {
 public:
  Sequential() = default;
  // Constructs an M in place at the end and returns it (it never moves afterwards).
  template <class M, class... Args>
  M& emplace(Args&&... args) {
    return add(std::make_unique<M>(std::forward<Args>(args)...));
  }
  // Appends a module built elsewhere; M must be callable with a Tensor and return one.
  template <class M>
  M& add(std::unique_ptr<M> module) {
    static_assert(std::is_base_of_v<Module, M>, "Sequential: M must derive from nn::Module");
    static_assert(std::is_invocable_r_v<Tensor, M&, const Tensor&>,
                  "Sequential: M must be callable as Tensor(const Tensor&)");
    if (!module) throw Error(LT_STATUS_INVALID_ARGUMENT, "Sequential::add: module is null");
    M* m = module.get();
    register_module(std::to_string(layers_.size()), *m);
    layers_.push_back({std::move(module), [m](const Tensor& x) { return (*m)(x); }});
    return *m;
  }
  Tensor forward(const Tensor& x, std::source_location loc = std::source_location::current()) {
    lt::detail::ApiFrame frame(loc);
    Tensor y = x;
    for (auto& layer : layers_) y = layer.call(y);
    return y;
  }
  Tensor operator()(const Tensor& x, std::source_location loc = std::source_location::current()) {
    return forward(x, loc);
  }
  size_t size() const { return layers_.size(); }
  Module& operator[](size_t i) {
    if (i >= layers_.size()) {
      throw Error(LT_STATUS_INVALID_ARGUMENT, "Sequential: index " + std::to_string(i) +
                                                  " out of range for " +
                                                  std::to_string(layers_.size()) + " modules");
    }
    return *layers_[i].module;
  }

 private:
  struct Layer {
    std::unique_ptr<Module> module;
    std::function<Tensor(const Tensor&)> call;
  };
  std::vector<Layer> layers_;
};

// ---- losses ------------------------------------------------------------------------------

// Mean negative log-likelihood under logits [N, K] of either integer labels [N] (i32/i64)
// or float targets [N, K] (one-hot or probabilities). Float targets keep the whole loss in
// float ops, which every backend runs without fallback; integer labels are turned into a
// one-hot mask with float compares for the same reason.
inline Tensor cross_entropy(const Tensor& logits_in, const Tensor& target,
                            std::source_location loc = std::source_location::current()) {
  lt::detail::ApiFrame frame(loc);
  // Under autocast (lazytensor/amp.hpp) the loss is computed in f32.
  const Tensor logits =
      detail::is_half(logits_in.dtype()) && detail::autocast_dtype() != LT_DTYPE_INVALID
          ? logits_in.cast(f32)
          : logits_in;
  if (logits.rank() != 2) {
    throw Error(LT_STATUS_SHAPE_MISMATCH, "cross_entropy: expected logits [N, K], got " +
                                              detail::shape_string(logits.shape_span()));
  }
  int64_t n = logits.dim(0), k = logits.dim(1);
  Tensor weights;
  DType td = target.dtype();
  if (td == i32 || td == i64) {
    if (target.rank() != 1 || target.dim(0) != n) {
      throw Error(LT_STATUS_SHAPE_MISMATCH, "cross_entropy: labels must have shape [" +
                                                std::to_string(n) + "], got " +
                                                detail::shape_string(target.shape_span()));
    }
    Tensor classes = arange(logits.device(), 0, static_cast<double>(k), 1, logits.dtype());
    weights = target.cast(logits.dtype()).reshape({n, 1}).eq(classes.reshape({1, k}));
    weights = weights.cast(logits.dtype());
  } else if (td == f32 || td == f64) {
    if (target.shape() != logits.shape()) {
      throw Error(LT_STATUS_SHAPE_MISMATCH,
                  "cross_entropy: float targets must have the logits' shape " +
                      detail::shape_string(logits.shape_span()) + ", got " +
                      detail::shape_string(target.shape_span()));
    }
    weights = td == logits.dtype() ? target : target.cast(logits.dtype());
  } else {
    throw Error(LT_STATUS_DTYPE_MISMATCH,
                std::string("cross_entropy: target must be integer labels or float targets, got ") +
                    dtype_name(td));
  }
  Tensor logp = logits.log_softmax(1);
  return -(weights * logp).sum() * (1.0 / static_cast<double>(n));
}

inline Tensor mse_loss(const Tensor& pred, const Tensor& target,
                       std::source_location loc = std::source_location::current()) {
  lt::detail::ApiFrame frame(loc);
  if (pred.shape() != target.shape()) {
    throw Error(LT_STATUS_SHAPE_MISMATCH,
                "mse_loss: prediction " + detail::shape_string(pred.shape_span()) + " and target " +
                    detail::shape_string(target.shape_span()) + " differ in shape");
  }
  Tensor d = detail::is_half(pred.dtype()) && detail::autocast_dtype() != LT_DTYPE_INVALID
                 ? pred.cast(f32) - target  // losses in f32 under autocast
                 : pred - target;
  return (d * d).mean();
}

// Number of rows whose argmax equals the label (computed lazily; read with item<int64_t>).
inline Tensor correct_count(const Tensor& logits, const Tensor& labels,
                            std::source_location loc = std::source_location::current()) {
  lt::detail::ApiFrame frame(loc);
  return logits.argmax(1).eq(labels.cast(i64)).cast(i64).sum();
}

// A module whose every call is one recompute region (lt::RecomputeScope, docs/memory.md): its
// activations are recomputed in the backward pass instead of kept. Constructed with M's
// arguments; its parameters and children are M's own.
template <class M>
class Checkpointed : public M {
 public:
  using M::M;
  template <class... Args>
  decltype(auto) operator()(Args&&... args) {
    RecomputeScope scope;
    return M::operator()(std::forward<Args>(args)...);
  }
};

}  // namespace lt::nn

#endif  // LAZYTENSOR_NN_HPP
