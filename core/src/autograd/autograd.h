// autograd.h — internal interface of the autograd unit (core/src/autograd, owned by the
// train engineer): the two hooks the core's tensor code calls, and what tape.cpp,
// backward.cpp and rules.cpp share. Not installed; nothing outside core/src includes it.
#pragma once

#include "ir.h"
#include "lazytensor/lt.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace lt::autograd {

// ---- hooks called by the core (never throw) ----------------------------------------------

// After lt_apply recorded `op` successfully: records the op's history when an input
// requires gradients and no no-grad scope is open on this thread.
void on_apply(const char* op, lt_tensor* const* inputs, size_t num_inputs, const lt_attr* attrs,
              size_t num_attrs, lt_tensor* out) noexcept;
// When the last reference of a tensor handle is released (before its memory is reused):
// drops its autograd entry. Re-entrant frees it triggers are flattened, never recursive.
void on_tensor_freed(lt_tensor* tensor) noexcept;

// ---- shared internals --------------------------------------------------------------------

// Errors are lt::Error (core/src/error.h), converted at each C entry point by lt::guard.
[[noreturn]] void raise(lt_status_code code, std::string message);
// Throws when a C call failed, prefixing its message with `context` (unless NULL).
void check(lt_error* e, const char* context);

// One owned tensor handle (move-only); frees on destruction.
class Ref {
 public:
  Ref() = default;
  explicit Ref(lt_tensor* t) : t_(t) {}
  static Ref retain(lt_tensor* t) { return Ref(t ? lt_tensor_retain(t) : nullptr); }
  Ref(Ref&& o) noexcept : t_(std::exchange(o.t_, nullptr)) {}
  Ref& operator=(Ref&& o) noexcept {
    if (this != &o) {
      lt_tensor_free(t_);
      t_ = std::exchange(o.t_, nullptr);
    }
    return *this;
  }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  ~Ref() { lt_tensor_free(t_); }
  lt_tensor* get() const { return t_; }
  lt_tensor* release() { return std::exchange(t_, nullptr); }
  explicit operator bool() const { return t_ != nullptr; }

 private:
  lt_tensor* t_ = nullptr;
};

using Shape = std::vector<int64_t>;
Shape shape_of(const lt_tensor* t);
std::string shape_str(const Shape& s);

// How an op's output was computed: enough to apply its gradient rule later.
struct GradFn {
  std::string op;
  AttrSet attrs;                 // copied out of the caller's borrowed lt_attr
  std::vector<Ref> inputs;       // retained for as long as the history lives
  std::vector<bool> needs_grad;  // per input: it requires gradients
  lt_tensor* output = nullptr;   // the entry's key; borrowed, valid while the entry lives
  uint32_t region = 0;  // the recompute region it was recorded in (lt_recompute_begin), or 0
  int64_t attr_int(const char* name, int64_t fallback) const;
  double attr_float(const char* name, double fallback) const;
  const std::vector<int64_t>* attr_ints(const char* name) const;  // nullptr when absent
};

// A gradient rule: given the output gradient g (the output's shape and dtype), sets
// grads[i] for each input i with needs_grad[i] (leaving others empty). Results may have
// a broadcast shape or another float dtype: the caller reduces and casts them.
using Rule = void (*)(const GradFn& fn, lt_tensor* g, std::vector<Ref>& grads);
// nullptr when the op has no rule.
Rule find_rule(const std::string& op);
// Ops whose outputs never carry gradients (comparisons, argmax, random, creation, ...).
bool is_non_differentiable(const char* op);

// Sums g over the dims that broadcasting stretched so that it has `target` shape.
Ref reduce_to_shape(Ref g, const Shape& target);

// Thread-local no-grad depth.
bool grad_enabled();
// The recompute region ops recorded on this thread join (0: none), and a scope that closes
// it for the duration of a backward pass (which records into no region).
uint32_t recompute_region();
struct NoRecomputeRegion {
  NoRecomputeRegion();
  ~NoRecomputeRegion();
  NoRecomputeRegion(const NoRecomputeRegion&) = delete;
  NoRecomputeRegion& operator=(const NoRecomputeRegion&) = delete;
  uint32_t saved_region;
  int saved_depth;
};
struct NoGradScope {
  NoGradScope() { lt_no_grad_begin(); }
  ~NoGradScope() { lt_no_grad_end(); }
  NoGradScope(const NoGradScope&) = delete;
  NoGradScope& operator=(const NoGradScope&) = delete;
};

// Records history again on this thread while alive, inside a no-grad scope too (a gradient
// rule that differentiates a composite op's decomposition, decomposed.cpp).
class GradScope {
 public:
  GradScope();
  ~GradScope();
  GradScope(const GradScope&) = delete;
  GradScope& operator=(const GradScope&) = delete;

 private:
  int saved_;
};

// The gradient rule of composite ops whose lt_ops.def row says DECOMP: the op's decomposition
// (lazytensor/lower/decompose.hpp) is replayed on detached copies of its inputs with history
// recorded, and differentiated with lt_grad.
void decomposed_rule(const GradFn& fn, lt_tensor* g, std::vector<Ref>& grads);

// What the tape knows about one tensor, copied out under its lock.
struct Snapshot {
  bool requires_grad = false;
  bool graph_freed = false;  // an earlier lt_backward consumed this tensor's history
  std::shared_ptr<GradFn> fn;
};
Snapshot snapshot(lt_tensor* t);
// Adds g into t's accumulated gradient (t must be a leaf that requires gradients).
void accumulate_grad(lt_tensor* t, Ref g);
// Drops t's history (after lt_backward walked it); marks it consumed.
void release_history(lt_tensor* t);

}  // namespace lt::autograd
