// optim.hpp — header-only optimizers (SGD with momentum, Adam, AdamW) over nn::Module parameter
// slots, their resumable state (named_state / load_state), global gradient-norm clipping and a
// warmup + cosine learning-rate schedule. Owned by the train engineer.
//
// An update is traced lazily like everything else: step() replaces each parameter with a
// new tensor (p - lr * update) that is a fresh leaf requiring gradients, so forward +
// backward + update of a training step form ONE graph at the next lt::sync. Values that
// change between steps (learning rate, weight decay, Adam's bias corrections, the clipping
// threshold) are lt_scalar graph parameters, and the optimizer state is created materialised,
// so every step - the first included - has the same graph and hits the compile cache.
#ifndef LAZYTENSOR_OPTIM_HPP
#define LAZYTENSOR_OPTIM_HPP

#include "lazytensor/autograd.hpp"
#include "lazytensor/lazytensor.hpp"

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

namespace lt::optim {

class Optimizer {
 public:
  Optimizer(std::vector<Tensor*> params, double lr) : params_(std::move(params)) {
    if (params_.empty()) throw Error(LT_STATUS_INVALID_ARGUMENT, "optimizer: no parameters");
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!params_[i] || !params_[i]->defined()) {
        throw Error(LT_STATUS_INVALID_ARGUMENT,
                    "optimizer: parameter " + std::to_string(i) + " is null");
      }
    }
    device_ = params_.front()->device();
    set_lr(lr);
  }
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  virtual ~Optimizer() = default;

  // The algorithm's name ("SGD", "Adam", "AdamW"); checkpoints record it, so a subclass with
  // its own state should return its own name.
  virtual const char* name() const { return "Optimizer"; }

  // A new value of the same graph parameter: no recompilation. 0 is allowed (the end of a
  // schedule); negative or non-finite values are not.
  void set_lr(double lr) {
    if (!(lr >= 0.0) || !std::isfinite(lr)) {
      throw Error(
          LT_STATUS_INVALID_ARGUMENT,
          "optimizer: learning rate must be non-negative and finite, got " + std::to_string(lr));
    }
    lr_value_ = lr;
    lr_ = Tensor::scalar(device_, lr, params_.front()->dtype());
  }
  double lr() const { return lr_value_; }

  // Applies one update from the accumulated gradients (parameters without one are kept).
  // The update's ops record the caller's line (lazytensor.hpp: detail::ApiFrame).
  void step(std::source_location loc = std::source_location::current()) {
    lt::detail::ApiFrame frame(loc);
    NoGradGuard no_grad;
    ++steps_;
    begin_step();
    for (size_t i = 0; i < params_.size(); ++i) {
      Tensor& p = *params_[i];
      Tensor g = grad(p);
      if (!g.defined()) continue;
      if (g.shape() != p.shape()) {
        throw Error(LT_STATUS_SHAPE_MISMATCH,
                    "optimizer: gradient of parameter " + std::to_string(i) + " has shape " +
                        detail::shape_string(g.shape_span()) + " but the parameter has " +
                        detail::shape_string(p.shape_span()));
      }
      Tensor next = update(i, p, g);
      p = std::move(next);
      set_requires_grad(p);
    }
  }
  void zero_grad() {
    for (Tensor* p : params_) lt::zero_grad(*p);
  }
  int64_t steps() const { return steps_; }
  const std::vector<Tensor*>& parameters() const { return params_; }

  // The state a resumed run needs, by name: "step" (a rank-0 i64 tensor holding steps()) and
  // the algorithm's per-parameter slots, "<slot>.<i>" with i the parameter's index in the
  // constructor's list ("momentum.<i>" for SGD with momentum, "m.<i>" and "v.<i>" for Adam and
  // AdamW). The tensors are handles on the live state, not copies.
  std::vector<std::pair<std::string, Tensor>> named_state() {
    std::vector<std::pair<std::string, Tensor>> out;
    out.emplace_back("step", Tensor::scalar(device_, static_cast<double>(steps_), i64));
    for (auto& [name, slot] : state_slots()) out.emplace_back(name, *slot);
    return out;
  }

  // Replaces the whole state with `state`: exactly the names of named_state(), each with the
  // same dtype and shape, on this optimizer's device. Everything is checked before anything
  // changes, so on error the optimizer is exactly as it was.
  void load_state(const std::vector<std::pair<std::string, Tensor>>& state) {
    auto fail = [](lt_status_code code, const std::string& what) {
      throw Error(code, "optimizer: load_state: " + what);
    };
    std::vector<std::pair<std::string, Tensor*>> slots = state_slots();
    std::vector<const Tensor*> found(slots.size(), nullptr);
    const Tensor* step = nullptr;
    for (const auto& [name, t] : state) {
      if (!t.defined()) fail(LT_STATUS_INVALID_ARGUMENT, "'" + name + "' is null");
      if (name == "step") {
        if (step) fail(LT_STATUS_INVALID_ARGUMENT, "'step' given twice");
        if (t.dtype() != i64 || t.rank() != 0) {
          fail(LT_STATUS_SHAPE_MISMATCH, std::string("'step' must be a rank-0 i64 tensor, got ") +
                                             dtype_name(t.dtype()) + " " +
                                             detail::shape_string(t.shape_span()));
        }
        step = &t;
        continue;
      }
      size_t k = 0;
      while (k < slots.size() && slots[k].first != name) ++k;
      if (k == slots.size()) {
        fail(LT_STATUS_INVALID_ARGUMENT,
             "unexpected state '" + name + "' for " + std::string(this->name()));
      }
      if (found[k]) fail(LT_STATUS_INVALID_ARGUMENT, "'" + name + "' given twice");
      const Tensor& want = *slots[k].second;
      if (t.dtype() != want.dtype()) {
        fail(LT_STATUS_DTYPE_MISMATCH, "'" + name + "' has dtype " + dtype_name(t.dtype()) +
                                           ", expected " + dtype_name(want.dtype()));
      }
      if (t.shape() != want.shape()) {
        fail(LT_STATUS_SHAPE_MISMATCH, "'" + name + "' has shape " +
                                           detail::shape_string(t.shape_span()) + ", expected " +
                                           detail::shape_string(want.shape_span()));
      }
      if (!(t.device() == device_)) {
        fail(LT_STATUS_INVALID_ARGUMENT,
             "'" + name + "' is on " + t.device().name() + ", expected " + device_.name());
      }
      found[k] = &t;
    }
    if (!step) fail(LT_STATUS_NOT_FOUND, "'step' is missing");
    for (size_t k = 0; k < slots.size(); ++k) {
      if (!found[k]) fail(LT_STATUS_NOT_FOUND, "'" + slots[k].first + "' is missing");
    }
    int64_t steps = step->item<int64_t>();
    if (steps < 0) fail(LT_STATUS_INVALID_ARGUMENT, "'step' is " + std::to_string(steps));
    // Nothing below can fail.
    for (size_t k = 0; k < slots.size(); ++k) *slots[k].second = *found[k];
    steps_ = steps;
  }

 protected:
  virtual void begin_step() {}
  // The new value of parameter i (traced in a no-grad scope).
  virtual Tensor update(size_t i, const Tensor& p, const Tensor& g) = 0;
  // The per-parameter state as named slots (see named_state()); empty when stateless.
  virtual std::vector<std::pair<std::string, Tensor*>> state_slots() { return {}; }
  // Zero-initialised, materialised state shaped like each parameter.
  std::vector<Tensor> make_state() {
    std::vector<Tensor> s;
    for (Tensor* p : params_) s.push_back(zeros(device_, p->shape(), p->dtype()).materialize());
    return s;
  }
  static void add_slots(std::vector<std::pair<std::string, Tensor*>>& out, const std::string& slot,
                        std::vector<Tensor>& state) {
    for (size_t i = 0; i < state.size(); ++i)
      out.emplace_back(slot + "." + std::to_string(i), &state[i]);
  }
  std::vector<Tensor*> params_;
  Device device_;
  Tensor lr_;
  double lr_value_ = 0;
  int64_t steps_ = 0;
};

// p -= lr * v, v = momentum * v + g (plain SGD when momentum is 0).
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor*> params, double lr, double momentum = 0.0)
      : Optimizer(std::move(params), lr), momentum_(momentum) {
    if (momentum < 0.0 || momentum >= 1.0) {
      throw Error(LT_STATUS_INVALID_ARGUMENT,
                  "SGD: momentum must be in [0, 1), got " + std::to_string(momentum));
    }
    if (momentum_ > 0.0) velocity_ = make_state();
  }
  const char* name() const override { return "SGD"; }

 protected:
  Tensor update(size_t i, const Tensor& p, const Tensor& g) override {
    if (momentum_ == 0.0) return p - lr_ * g;
    velocity_[i] = velocity_[i] * momentum_ + g;
    return p - lr_ * velocity_[i];
  }
  std::vector<std::pair<std::string, Tensor*>> state_slots() override {
    std::vector<std::pair<std::string, Tensor*>> out;
    add_slots(out, "momentum", velocity_);
    return out;
  }

 private:
  double momentum_;
  std::vector<Tensor> velocity_;
};

// Adam (Kingma & Ba) with bias correction folded into two scalar parameters per step.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor*> params, double lr, double beta1 = 0.9, double beta2 = 0.999,
       double eps = 1e-8)
      : Optimizer(std::move(params), lr), b1_(beta1), b2_(beta2), eps_(eps) {
    if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1 && eps > 0)) {
      throw Error(LT_STATUS_INVALID_ARGUMENT, "Adam: need 0 <= beta1, beta2 < 1 and eps > 0");
    }
    m_ = make_state();
    v_ = make_state();
  }
  const char* name() const override { return "Adam"; }

 protected:
  void begin_step() override {
    DType dt = params_.front()->dtype();
    double t = static_cast<double>(steps_);
    step_size_ = Tensor::scalar(device_, lr_value_ / (1.0 - std::pow(b1_, t)), dt);
    v_scale_ = Tensor::scalar(device_, 1.0 / (1.0 - std::pow(b2_, t)), dt);
  }
  Tensor update(size_t i, const Tensor& p, const Tensor& g) override {
    return p - adam_delta(i, g);
  }
  // Advances the moments of parameter i and returns lr * m_hat / (sqrt(v_hat) + eps).
  Tensor adam_delta(size_t i, const Tensor& g) {
    m_[i] = m_[i] * b1_ + g * (1.0 - b1_);
    v_[i] = v_[i] * b2_ + g * g * (1.0 - b2_);
    return step_size_ * m_[i] / ((v_[i] * v_scale_).sqrt() + eps_);
  }
  std::vector<std::pair<std::string, Tensor*>> state_slots() override {
    std::vector<std::pair<std::string, Tensor*>> out;
    add_slots(out, "m", m_);
    add_slots(out, "v", v_);
    return out;
  }

  double b1_, b2_, eps_;
  std::vector<Tensor> m_, v_;
  Tensor step_size_, v_scale_;
};

// AdamW (Loshchilov & Hutter): Adam with decoupled weight decay,
//   p = p * (1 - lr * weight_decay) - lr * m_hat / (sqrt(v_hat) + eps),
// as torch.optim.AdamW. (1 - lr * weight_decay) is a graph scalar, so changing the learning
// rate or the weight decay between steps does not recompile. By default only parameters of
// rank >= 2 (weight matrices, embeddings, conv kernels) decay; biases and normalisation gains
// do not. `decay_mask` (one entry per parameter) overrides that choice.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor*> params, double lr, double weight_decay = 0.01, double beta1 = 0.9,
        double beta2 = 0.999, double eps = 1e-8, std::vector<bool> decay_mask = {})
      : Adam(std::move(params), lr, beta1, beta2, eps), decay_(std::move(decay_mask)) {
    if (decay_.empty()) {
      for (Tensor* p : params_) decay_.push_back(p->rank() >= 2);
    } else if (decay_.size() != params_.size()) {
      throw Error(LT_STATUS_INVALID_ARGUMENT, "AdamW: decay_mask has " +
                                                  std::to_string(decay_.size()) + " entries for " +
                                                  std::to_string(params_.size()) + " parameters");
    }
    set_weight_decay(weight_decay);
  }
  const char* name() const override { return "AdamW"; }

  void set_weight_decay(double weight_decay) {
    if (!(weight_decay >= 0.0) || !std::isfinite(weight_decay)) {
      throw Error(LT_STATUS_INVALID_ARGUMENT,
                  "AdamW: weight decay must be non-negative and finite, got " +
                      std::to_string(weight_decay));
    }
    wd_ = weight_decay;
  }
  double weight_decay() const { return wd_; }
  // Whether parameter i decays.
  bool decays(size_t i) const { return decay_.at(i); }

 protected:
  void begin_step() override {
    Adam::begin_step();
    keep_ = Tensor::scalar(device_, 1.0 - lr_value_ * wd_, params_.front()->dtype());
  }
  Tensor update(size_t i, const Tensor& p, const Tensor& g) override {
    Tensor delta = adam_delta(i, g);
    return decay_[i] ? p * keep_ - delta : p - delta;
  }

 private:
  std::vector<bool> decay_;
  double wd_ = 0;
  Tensor keep_;
};

// Scales the accumulated gradients of `params` so that their global L2 norm is at most
// max_norm: every gradient is multiplied by min(1, max_norm / (norm + 1e-6)), as
// torch.nn.utils.clip_grad_norm_. It all stays in the lazy graph of the step (no host read;
// max_norm is a graph scalar, so a new value does not recompile). Returns the norm before
// clipping as a lazy rank-0 tensor of the first gradient's dtype, computed at the next sync.
// Parameters without a gradient are skipped; when none has one the norm is 0.
inline Tensor clip_grad_norm(const std::vector<Tensor*>& params, double max_norm) {
  if (params.empty()) throw Error(LT_STATUS_INVALID_ARGUMENT, "clip_grad_norm: no parameters");
  if (!(max_norm > 0.0) || !std::isfinite(max_norm)) {
    throw Error(
        LT_STATUS_INVALID_ARGUMENT,
        "clip_grad_norm: max_norm must be positive and finite, got " + std::to_string(max_norm));
  }
  NoGradGuard no_grad;
  std::vector<std::pair<Tensor*, Tensor>> grads;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i] || !params[i]->defined()) {
      throw Error(LT_STATUS_INVALID_ARGUMENT,
                  "clip_grad_norm: parameter " + std::to_string(i) + " is null");
    }
    Tensor g = grad(*params[i]);
    if (g.defined()) grads.emplace_back(params[i], std::move(g));
  }
  if (grads.empty()) return Tensor::scalar(params.front()->device(), 0.0, params.front()->dtype());
  const DType dt = grads.front().second.dtype();
  Tensor sum_sq;
  for (auto& [p, g] : grads) {
    Tensor gc = g.dtype() == dt ? g : g.cast(dt);
    Tensor s = (gc * gc).sum();
    sum_sq = sum_sq.defined() ? sum_sq + s : s;
  }
  Tensor norm = sum_sq.sqrt();
  Tensor limit = Tensor::scalar(norm.device(), max_norm, dt);
  Tensor scale = (limit / (norm + 1e-6)).minimum(1.0);
  for (auto& [p, g] : grads) set_grad(*p, g * (g.dtype() == dt ? scale : scale.cast(g.dtype())));
  return norm;
}

// Linear warmup to peak_lr, then a half cosine down to min_lr at total_steps, then min_lr:
//   step <  warmup_steps:          peak_lr * (step + 1) / warmup_steps
//   step <  total_steps:           min_lr + (peak_lr - min_lr) * (1 + cos(pi * t)) / 2,
//                                  t = (step - warmup_steps) / (total_steps - warmup_steps)
//   otherwise:                     min_lr
// `step` counts updates already applied (Optimizer::steps() before step()). Pass the result
// to Optimizer::set_lr: the learning rate is a graph scalar, so the schedule never recompiles.
struct WarmupCosine {
  double peak_lr = 0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;
  double min_lr = 0;

  double operator()(int64_t step) const {
    if (!(min_lr >= 0.0 && peak_lr >= min_lr && std::isfinite(peak_lr)) || warmup_steps < 0 ||
        total_steps < warmup_steps) {
      throw Error(LT_STATUS_INVALID_ARGUMENT,
                  "WarmupCosine: need 0 <= min_lr <= peak_lr and 0 <= warmup_steps <= "
                  "total_steps, got peak_lr " +
                      std::to_string(peak_lr) + ", min_lr " + std::to_string(min_lr) +
                      ", warmup_steps " + std::to_string(warmup_steps) + ", total_steps " +
                      std::to_string(total_steps));
    }
    if (step < 0) {
      throw Error(LT_STATUS_INVALID_ARGUMENT,
                  "WarmupCosine: step must be non-negative, got " + std::to_string(step));
    }
    if (step < warmup_steps) {
      return peak_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
    }
    if (step >= total_steps) return min_lr;
    double t =
        static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps);
    return min_lr + (peak_lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * t));
  }
};

}  // namespace lt::optim

#endif  // LAZYTENSOR_OPTIM_HPP
