// autograd.hpp — header-only C++ over the autograd C API of lt.h: requires_grad, backward,
// grad, detach, zero_grad, set_grad and lt::NoGradGuard. Owned by the train engineer.
#ifndef LAZYTENSOR_AUTOGRAD_HPP
#define LAZYTENSOR_AUTOGRAD_HPP

#include "lazytensor/lazytensor.hpp"

#include <optional>
#include <utility>
#include <vector>

namespace lt {

// Marks a leaf as needing gradients (only f32/f64); returns it for chaining.
inline const Tensor& set_requires_grad(const Tensor& t, bool requires_grad = true) {
  check(lt_tensor_set_requires_grad(t.get(), requires_grad ? 1 : 0));
  return t;
}
inline bool requires_grad(const Tensor& t) {
  return lt_tensor_requires_grad(t.get()) != 0;
}

// Back-propagates into every leaf that requires gradients (accumulating). `seed` is needed
// when loss has more than one element.
inline void backward(const Tensor& loss, const Tensor& seed = Tensor()) {
  check(lt_backward(loss.get(), seed.get()));
}

// The accumulated gradient of a leaf, or a null Tensor when none.
inline Tensor grad(const Tensor& t) {
  lt_tensor* g = nullptr;
  check(lt_tensor_grad(t.get(), &g));
  return Tensor(g);
}
inline void zero_grad(const Tensor& t) {
  check(lt_tensor_zero_grad(t.get()));
}
// Replaces the accumulated gradient of a leaf (e.g. with a clipped one); a null `g` drops it.
// `g` must match the leaf's device, dtype and shape and must not require gradients.
inline void set_grad(const Tensor& t, const Tensor& g) {
  check(lt_tensor_set_grad(t.get(), g.get()));
}

// Functional gradients of sum_k seeds[k] . outputs[k] with respect to each input; nothing
// accumulates and the recorded graph is kept. Unreached inputs get zeros.
inline std::vector<Tensor> grad(const std::vector<Tensor>& outputs,
                                const std::vector<Tensor>& inputs,
                                const std::vector<Tensor>& seeds = {}) {
  if (!seeds.empty() && seeds.size() != outputs.size()) {
    throw Error(LT_STATUS_INVALID_ARGUMENT, "grad: " + std::to_string(seeds.size()) +
                                                " seeds for " + std::to_string(outputs.size()) +
                                                " outputs");
  }
  std::vector<lt_tensor*> outs, ins, sds;
  for (const auto& o : outputs) outs.push_back(o.get());
  for (const auto& i : inputs) ins.push_back(i.get());
  for (const auto& s : seeds) sds.push_back(s.get());
  std::vector<lt_tensor*> raw(inputs.size(), nullptr);
  check(lt_grad(outs.data(), sds.empty() ? nullptr : sds.data(), outs.size(), ins.data(),
                ins.size(), raw.data()));
  std::vector<Tensor> result;
  result.reserve(raw.size());
  for (lt_tensor* g : raw) result.emplace_back(g);
  return result;
}

// Same values, no history, does not require gradients.
inline Tensor detach(const Tensor& t) {
  lt_tensor* out = nullptr;
  check(lt_tensor_detach(t.get(), &out));
  return Tensor(out);
}

// While alive, ops on this thread record no history (nestable).
class NoGradGuard {
 public:
  NoGradGuard() { lt_no_grad_begin(); }
  ~NoGradGuard() { lt_no_grad_end(); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
};

// Rematerialisation (activation checkpointing, docs/memory.md): ops traced on this thread while
// a scope is alive form one recompute region; the backward pass recomputes the region's values
// from its inputs where the gradient needs them instead of keeping the forward's, trading
// compute for activation memory. Same results; nestable (inner scopes join the outer one).
class RecomputeScope {
 public:
  RecomputeScope() { lt_recompute_begin(); }
  ~RecomputeScope() { lt_recompute_end(); }
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;
};

// f(args...) traced as one recompute region.
template <class F, class... Args>
decltype(auto) recompute(F&& f, Args&&... args) {
  RecomputeScope scope;
  return std::forward<F>(f)(std::forward<Args>(args)...);
}

}  // namespace lt

#endif  // LAZYTENSOR_AUTOGRAD_HPP
