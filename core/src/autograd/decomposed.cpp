// decomposed.cpp — gradients of composite ops through their decompositions: a builder over
// lazy tensors (the C ops, so history is recorded as for user code) runs the op's
// decomposition from lazytensor/lower/decompose.hpp, and lt_grad differentiates it.
#include <string>

#include "autograd/autograd.h"
#include "error.h"
#include "lazytensor/lower/decompose.hpp"

namespace lt::autograd {
namespace {

using lower::Value;

// Builder over lt_tensor handles: Value k is vals_[k]; every call is the op's C function.
class TensorBuilder : public lower::Ops<TensorBuilder> {
 public:
  explicit TensorBuilder(lt_device* dev) : dev_(dev) {}

  Value keep(Ref t) {
    vals_.push_back(std::move(t));
    return static_cast<Value>(vals_.size() - 1);
  }
  lt_tensor* get(Value v) const { return vals_[static_cast<size_t>(v)].get(); }

  lower::Desc desc(Value v) const {
    lt_tensor* t = get(v);
    return lower::Desc{lt_tensor_dtype(t), shape_of(t)};
  }
  Value unary(OpId op, Value x) { return apply(op, {get(x)}, {}); }
  Value binary(OpId op, Value a, Value b) { return apply(op, {get(a), get(b)}, {}); }
  Value where(Value c, Value a, Value b) { return take(lt_where(get(c), get(a), get(b), &out_)); }
  Value cast(Value x, lt_dtype d) { return take(lt_cast(get(x), d, &out_)); }
  Value full(const lower::Shape& s, double v, lt_dtype d) {
    return take(lt_full(dev_, s.data(), s.size(), v, d, &out_));
  }
  Value arange(int64_t n, double start, double step, lt_dtype d) {
    return take(lt_arange(dev_, start, start + static_cast<double>(n) * step, step, d, &out_));
  }
  Value random_unit(Value seed, const lower::Shape& s, int64_t stride, int64_t offset, lt_dtype d) {
    return apply(kOpRandomUnit, {get(seed)},
                 {ints("shape", s), num("stride", stride), num("offset", offset), num("dtype", d)});
  }
  Value reduce(OpId op, Value x, std::vector<int64_t> axes, bool keep) {
    return apply(op, {get(x)}, {ints("axes", axes), num("keepdims", keep ? 1 : 0)});
  }
  Value matmul(Value a, Value b) { return take(lt_matmul(get(a), get(b), &out_)); }
  Value reshape(Value x, const lower::Shape& s) {
    return take(lt_reshape(get(x), s.data(), s.size(), &out_));
  }
  Value permute(Value x, const std::vector<int64_t>& p) {
    return take(lt_permute(get(x), p.data(), p.size(), &out_));
  }
  Value broadcast_to(Value x, const lower::Shape& s) {
    return take(lt_broadcast_to(get(x), s.data(), s.size(), &out_));
  }
  Value slice(Value x, const std::vector<int64_t>& starts, const std::vector<int64_t>& stops,
              const std::vector<int64_t>& steps) {
    return take(lt_slice(get(x), starts.data(), stops.data(), steps.data(), starts.size(), &out_));
  }
  Value pad(Value x, const std::vector<int64_t>& before, const std::vector<int64_t>& after,
            double v) {
    return take(lt_pad(get(x), before.data(), after.data(), before.size(), v, &out_));
  }
  Value concat(const std::vector<Value>& xs, int64_t axis) {
    std::vector<lt_tensor*> ts;
    for (Value v : xs) ts.push_back(get(v));
    return take(lt_concat(ts.data(), ts.size(), axis, &out_));
  }
  Value gather(Value a, Value idx, int64_t axis) {
    return take(lt_gather(get(a), get(idx), axis, &out_));
  }
  Value scatter_add(Value a, Value idx, Value upd, int64_t axis) {
    return take(lt_scatter_add(get(a), get(idx), get(upd), axis, &out_));
  }
  Value conv2d(Value x, Value w, const std::vector<int64_t>& stride,
               const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation,
               int64_t groups) {
    return take(lt_conv2d(get(x), get(w), nullptr, stride.data(), padding.data(), dilation.data(),
                          groups, &out_));
  }

 private:
  static lt_attr ints(const char* n, const std::vector<int64_t>& v) {
    return lt_attr{n, LT_ATTR_INTS, 0, 0, v.data(), v.size(), nullptr};
  }
  static lt_attr num(const char* n, int64_t v) {
    return lt_attr{n, LT_ATTR_INT, v, 0, nullptr, 0, nullptr};
  }
  Value take(lt_error* e) {
    lt_tensor* t = out_;
    out_ = nullptr;
    check(e, nullptr);
    return keep(Ref(t));
  }
  Value apply(OpId op, std::vector<lt_tensor*> in, std::vector<lt_attr> attrs) {
    std::string name(lower::op_info(op).name);
    return take(
        lt_apply(dev_, name.c_str(), in.data(), in.size(), attrs.data(), attrs.size(), &out_));
  }

  lt_device* dev_;
  std::vector<Ref> vals_;
  lt_tensor* out_ = nullptr;
};

}  // namespace

void decomposed_rule(const GradFn& fn, lt_tensor* g, std::vector<Ref>& grads) {
  const lower::OpInfo* op = lower::find_op(fn.op);
  if (!op || !op->composite) raise(LT_STATUS_INTERNAL, fn.op + " is not a composite op");
  const std::vector<lt_attr>& attrs = fn.attrs.view;
  TensorBuilder b(lt_tensor_device(g));
  std::vector<Value> ins;
  std::vector<lt_tensor*> wrt;  // the detached copies gradients are taken with respect to
  std::vector<size_t> which;
  GradScope record;  // backward runs in a no-grad scope; this replay must record history
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    lt_tensor* d = nullptr;
    check(lt_tensor_detach(fn.inputs[i].get(), &d), nullptr);
    Ref copy(d);
    if (fn.needs_grad[i]) {
      check(lt_tensor_set_requires_grad(d, 1), nullptr);
      wrt.push_back(d);
      which.push_back(i);
    }
    ins.push_back(b.keep(std::move(copy)));
  }
  lower::Attrs a(attrs.data(), attrs.size(), op, fn.op);
  lower::Desc out{lt_tensor_dtype(fn.output), shape_of(fn.output)};
  Value y = lower::decompose(b, op->id, ins, a, out);
  lt_tensor* ys[1] = {b.get(y)};
  lt_tensor* seeds[1] = {g};
  std::vector<lt_tensor*> got(wrt.size(), nullptr);
  check(lt_grad(ys, seeds, 1, wrt.data(), wrt.size(), got.data()), nullptr);
  grads.resize(fn.inputs.size());
  for (size_t k = 0; k < which.size(); ++k) grads[which[k]] = Ref(got[k]);
}

}  // namespace lt::autograd
