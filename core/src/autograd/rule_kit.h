// rule_kit.h — what the gradient rules (rules.cpp, rules_nn.cpp) are written with: owned
// handles from the public C ops, each call checked (an lt::Error otherwise), and small shape
// helpers. Internal to core/src/autograd.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "autograd/autograd.h"
#include "error.h"

namespace lt::autograd::rule_kit {

// ---- small helpers: each returns an owned handle or throws lt::Error ----------------------

using T = lt_tensor*;

// `out` is read only after the call has run (argument evaluation order is unspecified).
// Core errors already name the op, so no prefix is added.
inline Ref wrap(lt_error* e, T* out, const char*) {
  check(e, nullptr);
  return Ref(*out);
}
inline int64_t norm_axis(int64_t a, size_t rank) {
  return a < 0 ? a + static_cast<int64_t>(rank) : a;
}
inline lt_device* dev(T t) {
  return lt_tensor_device(t);
}
inline Shape with_dim(Shape s, size_t axis, int64_t v) {
  s[axis] = v;
  return s;
}

#define LT_UNARY(name, cfn)             \
  inline Ref name(T a) {                \
    T o = nullptr;                      \
    return wrap(cfn(a, &o), &o, #name); \
  }
#define LT_BINARY(name, cfn)               \
  inline Ref name(T a, T b) {              \
    T o = nullptr;                         \
    return wrap(cfn(a, b, &o), &o, #name); \
  }
LT_UNARY(neg, lt_neg)
LT_UNARY(exp_, lt_exp)
LT_UNARY(log_, lt_log)
LT_UNARY(sin_, lt_sin)
LT_UNARY(cos_, lt_cos)
LT_UNARY(tanh_, lt_tanh)
LT_BINARY(add, lt_add)
LT_BINARY(sub, lt_sub)
LT_BINARY(mul, lt_mul)
LT_BINARY(div_, lt_div)
LT_BINARY(pow_, lt_pow)
LT_BINARY(eq, lt_eq)
LT_BINARY(gt, lt_gt)
LT_BINARY(lt_, lt_lt)
LT_BINARY(ge, lt_ge)
LT_BINARY(and_, lt_and)
LT_BINARY(maximum, lt_maximum)
LT_BINARY(minimum, lt_minimum)
LT_BINARY(matmul, lt_matmul)
#undef LT_UNARY
#undef LT_BINARY

// A rank-0 constant of `like`'s dtype (a `full` node: a compile-time constant).
inline Ref cst(T like, double v, lt_dtype dtype = LT_DTYPE_INVALID) {
  static const int64_t kNoDims[1] = {0};
  T o = nullptr;
  lt_dtype d = dtype == LT_DTYPE_INVALID ? lt_tensor_dtype(like) : dtype;
  return wrap(lt_full(dev(like), kNoDims, 0, v, d, &o), &o, "full");
}
inline Ref zeros(T like_device, const Shape& s, lt_dtype d) {
  static const int64_t kNoDims[1] = {0};
  T o = nullptr;
  return wrap(lt_full(dev(like_device), s.empty() ? kNoDims : s.data(), s.size(), 0.0, d, &o), &o,
              "full");
}
inline Ref where(T c, T a, T b) {
  T o = nullptr;
  return wrap(lt_where(c, a, b, &o), &o, "where");
}
inline Ref cast(T a, lt_dtype d) {
  T o = nullptr;
  return wrap(lt_cast(a, d, &o), &o, "cast");
}
inline Ref sum(T a, const std::vector<int64_t>& axes, bool keepdims) {
  T o = nullptr;
  return wrap(lt_sum(a, axes.data(), axes.size(), keepdims ? 1 : 0, &o), &o, "sum");
}
inline Ref reshape(T a, const Shape& s) {
  static const int64_t kNoDims[1] = {0};
  T o = nullptr;
  return wrap(lt_reshape(a, s.empty() ? kNoDims : s.data(), s.size(), &o), &o, "reshape");
}
inline Ref permute(T a, const std::vector<int64_t>& perm) {
  T o = nullptr;
  return wrap(lt_permute(a, perm.data(), perm.size(), &o), &o, "permute");
}
inline Ref broadcast_to(T a, const Shape& s) {
  T o = nullptr;
  return wrap(lt_broadcast_to(a, s.data(), s.size(), &o), &o, "broadcast_to");
}
inline Ref slice(T a, const std::vector<int64_t>& starts, const std::vector<int64_t>& stops,
                 const std::vector<int64_t>& steps) {
  T o = nullptr;
  return wrap(lt_slice(a, starts.data(), stops.data(), steps.data(), starts.size(), &o), &o,
              "slice");
}
inline Ref pad(T a, const std::vector<int64_t>& before, const std::vector<int64_t>& after,
               double v) {
  T o = nullptr;
  return wrap(lt_pad(a, before.data(), after.data(), before.size(), v, &o), &o, "pad");
}
inline Ref gather(T a, T idx, int64_t axis) {
  T o = nullptr;
  return wrap(lt_gather(a, idx, axis, &o), &o, "gather");
}
inline Ref scatter_add(T a, T idx, T upd, int64_t axis) {
  T o = nullptr;
  return wrap(lt_scatter_add(a, idx, upd, axis, &o), &o, "scatter_add");
}
inline Ref arange(T like_device, double start, double stop, double step) {
  T o = nullptr;
  return wrap(lt_arange(dev(like_device), start, stop, step, LT_DTYPE_I64, &o), &o, "arange");
}
inline Ref conv2d(T x, T w, const int64_t* stride, const int64_t* padding, const int64_t* dilation,
                  int64_t groups) {
  T o = nullptr;
  return wrap(lt_conv2d(x, w, nullptr, stride, padding, dilation, groups, &o), &o, "conv2d");
}

// Reduction axes as the op saw them: normalised, all axes when empty.
inline std::vector<int64_t> reduce_axes(const GradFn& fn, size_t rank) {
  std::vector<int64_t> axes;
  if (const auto* a = fn.attr_ints("axes")) {
    for (int64_t x : *a) axes.push_back(norm_axis(x, rank));
  }
  if (axes.empty()) {
    axes.resize(rank);
    std::iota(axes.begin(), axes.end(), 0);
  }
  return axes;
}
// `t` (shaped like the reduction's output) reshaped to keepdims form.
inline Ref keep_dims(const GradFn& fn, T t, const Shape& in_shape,
                     const std::vector<int64_t>& axes) {
  if (fn.attr_int("keepdims", 0)) return Ref::retain(t);
  Shape s = in_shape;
  for (int64_t a : axes) s[static_cast<size_t>(a)] = 1;
  return reshape(t, s);
}
inline std::vector<int64_t> attr_pair(const GradFn& fn, const char* name, int64_t fallback) {
  const auto* v = fn.attr_ints(name);
  if (v && v->size() == 2) return *v;
  return {fallback, fallback};
}
inline std::vector<int64_t> swap_last2(size_t rank) {
  std::vector<int64_t> p(rank);
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[rank - 1], p[rank - 2]);
  return p;
}

inline T in(const GradFn& fn, size_t i) {
  return fn.inputs[i].get();
}

}  // namespace lt::autograd::rule_kit

namespace lt::autograd::nn_rules {
// Gradient rules of the nn ops and collectives (rules_nn.cpp).
using T = lt_tensor*;
void r_conv2d(const GradFn& fn, T g, std::vector<Ref>& r);
void r_max_pool2d(const GradFn& fn, T g, std::vector<Ref>& r);
void r_avg_pool2d(const GradFn& fn, T g, std::vector<Ref>& r);
void r_softmax(const GradFn& fn, T g, std::vector<Ref>& r);
void r_log_softmax(const GradFn& fn, T g, std::vector<Ref>& r);
void r_all_reduce(const GradFn& fn, T g, std::vector<Ref>& r);
void r_all_gather(const GradFn& fn, T g, std::vector<Ref>& r);
}  // namespace lt::autograd::nn_rules
