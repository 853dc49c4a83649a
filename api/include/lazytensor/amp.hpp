// amp.hpp — automatic mixed precision: an Autocast scope under which matmul and conv2d take
// bf16 (or f16) operands with f32 accumulation while reductions, softmax and the losses stay in
// f32, and a GradScaler (loss scaling for f16) whose overflow check, skipped step and scale
// update all live in the step's lazy graph: no host read, one graph per step.
//
//   lt::amp::Autocast autocast(lt::bf16);        // this thread, until the scope ends
//   lt::Tensor loss = nn::cross_entropy(model(x), y);
//
// with f16, whose range (max 65504, smallest normal 6.1e-5) makes small gradients vanish:
//   lt::amp::GradScaler scaler(device);
//   lt::backward(scaler.scale(loss));
//   scaler.unscale(opt);                        // optional: before clipping the gradients
//   scaler.step(opt);                           // skip if inf/NaN, update the scale
//
// Parameters, gradients and optimizer state stay f32 (master weights); the casts are ordinary
// graph ops, so autograd differentiates through them and the gradients arrive in f32.
// Accuracy bounds: docs/mixed-precision.md.
#ifndef LAZYTENSOR_AMP_HPP
#define LAZYTENSOR_AMP_HPP

#include <string>
#include <utility>
#include <vector>

#include "lazytensor/autograd.hpp"
#include "lazytensor/lazytensor.hpp"
#include "lazytensor/optim.hpp"

namespace lt::amp {

// Parses "f32", "bf16" or "f16" (lt-run's --precision); throws naming the value otherwise.
inline DType parse_precision(const std::string& s) {
  if (s == "f32") return f32;
  if (s == "bf16") return bf16;
  if (s == "f16") return f16;
  throw Error(LT_STATUS_INVALID_ARGUMENT, "precision '" + s + "' is not one of f32, bf16, f16");
}

// Autocast to `dtype` (bf16 or f16; f32 turns autocast off) on this thread for the scope's
// lifetime; scopes nest and restore what was active before.
class Autocast {
 public:
  explicit Autocast(DType dtype) : previous_(detail::autocast_dtype()) {
    if (dtype != f32 && !detail::is_half(dtype)) {
      throw Error(LT_STATUS_INVALID_ARGUMENT, std::string("Autocast: dtype ") + dtype_name(dtype) +
                                                  " is not bf16, f16 or f32 (off)");
    }
    detail::autocast_dtype() = dtype == f32 ? LT_DTYPE_INVALID : dtype;
  }
  ~Autocast() { detail::autocast_dtype() = previous_; }
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  DType previous_;
};

// The dtype autocast uses on this thread now (f32 when off).
inline DType autocast_dtype() {
  DType d = detail::autocast_dtype();
  return d == LT_DTYPE_INVALID ? f32 : d;
}

// Dynamic loss scaling (as torch.cuda.amp.GradScaler): the loss is multiplied by a scale so
// that f16 gradients do not underflow; step() divides the gradients by it, runs the optimizer,
// and keeps the old parameters and optimizer state when any gradient is inf or NaN (the scale
// then shrinks by `backoff`); after `growth_interval` finite steps in a row it grows by
// `growth`. The scale, the finite-step count and the decision are rank-0 tensors of the step's
// graph. A skipped step still advances the optimizer's step counter (Adam's bias correction).
class GradScaler {
 public:
  explicit GradScaler(const Device& device, double init_scale = 65536.0, double growth = 2.0,
                      double backoff = 0.5, int64_t growth_interval = 2000)
      : growth_(growth), backoff_(backoff), interval_(growth_interval) {
    if (!(init_scale > 0) || !(growth > 1) || !(backoff > 0 && backoff < 1) ||
        growth_interval < 1) {
      throw Error(LT_STATUS_INVALID_ARGUMENT,
                  "GradScaler: need init_scale > 0, growth > 1, 0 < backoff < 1 and "
                  "growth_interval >= 1");
    }
    scale_ = Tensor::scalar(device, init_scale, f32).materialize();
    good_ = Tensor::scalar(device, 0, f32).materialize();
    skipped_ = Tensor::scalar(device, 0, f32).materialize();
  }

  // loss * scale, in the loss's dtype.
  Tensor scale(const Tensor& loss) const { return loss * scale_.cast(loss.dtype()); }

  // Divides the gradients of opt's parameters by the scale and records whether all are finite
  // (call it before clipping the gradients; step() calls it when it was not called).
  void unscale(optim::Optimizer& opt) {
    NoGradGuard no_grad;
    const std::vector<Tensor*>& params = opt.parameters();
    Tensor inv = Tensor::scalar(scale_.device(), 1, f32) / scale_;
    Tensor bad;  // x * 0 is 0 for every finite x and NaN for inf and NaN: one sum tells
    for (Tensor* p : params) {
      Tensor g = grad(*p);
      if (!g.defined()) continue;
      Tensor probe = (g * 0.0).sum().cast(f32);
      bad = bad.defined() ? bad + probe : probe;
      set_grad(*p, g * inv.cast(g.dtype()));
    }
    finite_ = bad.defined() ? bad.eq(Tensor::scalar(bad.device(), 0, f32)) : Tensor();
    unscaled_ = true;
  }

  // opt.step() on the unscaled gradients, keeping the previous parameters and optimizer state
  // where a gradient was not finite; then updates the scale. Lazy.
  void step(optim::Optimizer& opt, std::source_location loc = std::source_location::current()) {
    lt::detail::ApiFrame frame(loc);  // the update's ops record the caller's line
    if (!unscaled_) unscale(opt);
    unscaled_ = false;
    if (!finite_.defined()) return;  // no gradients: nothing to do
    NoGradGuard no_grad;
    const Tensor finite = std::exchange(finite_, Tensor());
    const std::vector<Tensor*>& params = opt.parameters();
    std::vector<Tensor> before;
    for (Tensor* p : params) before.push_back(*p);
    std::vector<std::pair<std::string, Tensor>> state_before = opt.named_state();
    opt.step();
    for (size_t i = 0; i < params.size(); ++i) {
      *params[i] = where(finite, *params[i], before[i]);
      set_requires_grad(*params[i]);
    }
    std::vector<std::pair<std::string, Tensor>> state = opt.named_state();
    bool any_state = false;
    for (size_t k = 0; k < state.size(); ++k) {
      if (state[k].first == "step") continue;
      state[k].second = where(finite, state[k].second, state_before[k].second);
      any_state = true;
    }
    if (any_state) opt.load_state(state);
    // The scale: x backoff after an overflow, x growth after growth_interval finite steps.
    Tensor one = Tensor::scalar(scale_.device(), 1, f32);
    Tensor good = where(finite, good_ + 1.0, good_ * 0.0);
    Tensor grow = good.ge(Tensor::scalar(scale_.device(), static_cast<double>(interval_), f32));
    scale_ = where(finite, where(grow, scale_ * growth_, scale_), scale_ * backoff_);
    good_ = where(grow, good * 0.0, good);
    skipped_ = skipped_ + where(finite, one * 0.0, one);
  }

  // The current scale and the number of skipped steps (reading them syncs).
  double scale_value() const { return scale_.item<float>(); }
  int64_t skipped_steps() const { return static_cast<int64_t>(skipped_.item<float>()); }
  const Tensor& scale_tensor() const { return scale_; }

 private:
  double growth_, backoff_;
  int64_t interval_;
  Tensor scale_, good_, skipped_, finite_;
  bool unscaled_ = false;
};

}  // namespace lt::amp

#endif  // LAZYTENSOR_AMP_HPP
