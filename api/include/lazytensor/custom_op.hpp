// custom_op.hpp — C++ front end of lt_register_custom_op (SDK engineer): register an op with
// lambdas for shape inference, the CPU kernel and optionally the gradient, then call it with
// lt::apply(name, inputs, attrs). Lambdas report errors by throwing lt::Error (its code is
// kept) or any std::exception; the trampolines below turn that into the C callbacks' results.
#pragma once

#include "lazytensor/lazytensor.hpp"

#include <cstdio>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace lt {

// The attributes a custom op was called with (borrowed for the callback).
class CustomAttrs {
 public:
  CustomAttrs(const lt_attr* a, size_t n) : a_(a), n_(n) {}
  const lt_attr* find(const char* name) const {
    for (size_t i = 0; i < n_; ++i)
      if (a_[i].name && std::strcmp(a_[i].name, name) == 0) return &a_[i];
    return nullptr;
  }
  int64_t get_int(const char* name, int64_t dflt) const {
    const lt_attr* a = find(name);
    return a && a->kind == LT_ATTR_INT ? a->i : dflt;
  }
  double get_float(const char* name, double dflt) const {
    const lt_attr* a = find(name);
    if (!a) return dflt;
    return a->kind == LT_ATTR_FLOAT ? a->f
           : a->kind == LT_ATTR_INT ? static_cast<double>(a->i)
                                    : dflt;
  }
  std::vector<int64_t> get_ints(const char* name) const {
    const lt_attr* a = find(name);
    return a && a->kind == LT_ATTR_INTS ? std::vector<int64_t>(a->ints, a->ints + a->ints_len)
                                        : std::vector<int64_t>{};
  }
  const lt_attr* data() const { return a_; }
  size_t size() const { return n_; }

 private:
  const lt_attr* a_;
  size_t n_;
};

// dtype + shape, what inference sees of each operand and returns for the output.
struct TensorSpec {
  DType dtype = f32;
  std::vector<int64_t> shape;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// One operand (read-only) or the output (writable) of a CPU kernel, on host memory.
template <class Ptr>
struct HostView {
  DType dtype;
  std::span<const int64_t> shape;
  Ptr data;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  template <class T>
  auto as() const {
    using Q = std::conditional_t<std::is_const_v<std::remove_pointer_t<Ptr>>, const T*, T*>;
    return std::span(static_cast<Q>(data), static_cast<size_t>(numel()));
  }
};
using HostInput = HostView<const void*>;
using HostOutput = HostView<void*>;

struct CustomOpDef {
  std::string name;
  size_t min_inputs = 1, max_inputs = 1;
  std::vector<std::string> attr_names;
  std::function<TensorSpec(const std::vector<TensorSpec>& inputs, const CustomAttrs& attrs)> infer;
  std::function<void(const std::vector<HostInput>& inputs, const HostOutput& out,
                     const CustomAttrs& attrs)>
      cpu_kernel;
  // Optional: gradients of the inputs (a null Tensor where an input gets none), built with
  // lt ops so the backward pass stays lazy.
  std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs, const Tensor& output,
                                    const Tensor& grad_output, const CustomAttrs& attrs)>
      grad;
};

namespace detail {

inline lt_status_code report(char* buf, size_t size) {
  try {
    throw;
  } catch (const Error& e) {
    std::snprintf(buf, size, "%s", e.what());
    return e.code() == LT_STATUS_OK ? LT_STATUS_INTERNAL : e.code();
  } catch (const std::exception& e) {
    std::snprintf(buf, size, "%s", e.what());
  } catch (...) {
    std::snprintf(buf, size, "unknown exception");
  }
  return LT_STATUS_INVALID_ARGUMENT;
}

inline lt_status_code custom_infer(lt_custom_op_args* a) {
  try {
    auto* def = static_cast<const CustomOpDef*>(a->user);
    std::vector<TensorSpec> ins(a->num_inputs);
    for (size_t i = 0; i < a->num_inputs; ++i)
      ins[i] = {a->inputs[i].dtype,
                std::vector<int64_t>(a->inputs[i].shape, a->inputs[i].shape + a->inputs[i].rank)};
    TensorSpec out = def->infer(ins, CustomAttrs(a->attrs, a->num_attrs));
    if (out.shape.size() > LT_CUSTOM_OP_MAX_RANK)
      throw Error(LT_STATUS_INVALID_ARGUMENT, "output rank too large");
    a->out_dtype = out.dtype;
    a->out_rank = out.shape.size();
    std::copy(out.shape.begin(), out.shape.end(), a->out_shape);
    return LT_STATUS_OK;
  } catch (...) {
    return report(a->error, a->error_size);
  }
}

inline lt_status_code custom_kernel(lt_custom_op_args* a) {
  try {
    auto* def = static_cast<const CustomOpDef*>(a->user);
    std::vector<HostInput> ins;
    for (size_t i = 0; i < a->num_inputs; ++i)
      ins.push_back({a->inputs[i].dtype,
                     std::span<const int64_t>(a->inputs[i].shape, a->inputs[i].rank),
                     a->inputs[i].data});
    HostOutput out{a->out_dtype, std::span<const int64_t>(a->out_shape, a->out_rank), a->out_data};
    def->cpu_kernel(ins, out, CustomAttrs(a->attrs, a->num_attrs));
    return LT_STATUS_OK;
  } catch (...) {
    return report(a->error, a->error_size);
  }
}

inline lt_error* custom_grad(void* user, lt_tensor* const* inputs, size_t n, lt_tensor* output,
                             lt_tensor* grad_output, const lt_attr* attrs, size_t num_attrs,
                             lt_tensor** grads) {
  try {
    auto* def = static_cast<const CustomOpDef*>(user);
    std::vector<Tensor> ins;
    for (size_t i = 0; i < n; ++i) ins.emplace_back(lt_tensor_retain(inputs[i]));
    Tensor out(lt_tensor_retain(output)), g(lt_tensor_retain(grad_output));
    std::vector<Tensor> r = def->grad(ins, out, g, CustomAttrs(attrs, num_attrs));
    for (size_t i = 0; i < n; ++i) grads[i] = i < r.size() ? r[i].release() : nullptr;
    return nullptr;
  } catch (...) {
    char buf[512];
    lt_status_code code = report(buf, sizeof buf);
    return lt_error_create(code, buf);
  }
}

}  // namespace detail

// Registers `def` for the life of the process (it is copied and never freed).
inline void register_custom_op(CustomOpDef def) {
  if (!def.infer || !def.cpu_kernel)
    throw Error(LT_STATUS_INVALID_ARGUMENT, def.name + ": infer and cpu_kernel are required");
  auto* kept = new CustomOpDef(std::move(def));
  std::vector<const char*> names;
  for (const auto& n : kept->attr_names) names.push_back(n.c_str());
  lt_custom_op_def c{};
  c.struct_size = LT_CUSTOM_OP_DEF_STRUCT_SIZE;
  c.name = kept->name.c_str();
  c.min_inputs = kept->min_inputs;
  c.max_inputs = kept->max_inputs;
  c.attr_names = names.data();
  c.num_attr_names = names.size();
  c.infer = detail::custom_infer;
  c.cpu_kernel = detail::custom_kernel;
  c.grad = kept->grad ? detail::custom_grad : nullptr;
  c.user = kept;
  lt_error* e = lt_register_custom_op(&c);
  if (e) delete kept;
  check(e);
}

}  // namespace lt
