// builder.hpp — building canonical IR: the typed primitive calls every graph builder offers
// (Ops<B>: convenience spellings over them) and Builder, which appends them to an OwnedGraph
// with their output descriptions and IR-form attributes. Decompositions (decompose.hpp) are
// written once against this interface and run on any builder: Builder in the lowering pass,
// a builder over lazy tensors in the core's autograd.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lazytensor/lower/graph.hpp"

namespace lt::lower {

// A value of a builder: a node index of the graph being built (or the builder's own handle).
using Value = int32_t;

// Convenience calls over a builder's primitives; B implements (all in IR form: operands of
// binary ops share one dtype, axes are sorted and non-negative, slices have positive steps and
// 0 <= start <= stop <= dim):
//   Desc desc(Value)
//   Value unary(OpId, Value) / binary(OpId, Value, Value) / where(c, a, b) / cast(x, dtype)
//   Value full(shape, value, dtype) / arange(n, start, step, dtype)
//   Value random_unit(seed, shape, stride, offset, dtype)
//   Value reduce(OpId sum|max|min, x, axes, keepdims) / matmul(a, b)
//   Value reshape(x, shape) / permute(x, perm) / broadcast_to(x, shape)
//   Value slice(x, starts, stops, steps) / pad(x, before, after, value) / concat(xs, axis)
//   Value gather(a, indices, axis) / scatter_add(a, indices, updates, axis)
//   Value conv2d(x, w, stride, padding, dilation, groups) (a composite: decomposed in turn
//   where the backend lacks it; the convolution gradient ops decompose into it)
template <class B>
class Ops {
 public:
  Value scalar(double v, lt_dtype d) { return self().full({}, v, d); }
  Value add(Value a, Value b) { return self().binary(kOpAdd, a, b); }
  Value sub(Value a, Value b) { return self().binary(kOpSub, a, b); }
  Value mul(Value a, Value b) { return self().binary(kOpMul, a, b); }
  Value div(Value a, Value b) { return self().binary(kOpDiv, a, b); }
  Value maximum(Value a, Value b) { return self().binary(kOpMaximum, a, b); }
  Value minimum(Value a, Value b) { return self().binary(kOpMinimum, a, b); }
  Value eq(Value a, Value b) { return self().binary(kOpEq, a, b); }
  Value ne(Value a, Value b) { return self().binary(kOpNe, a, b); }
  Value lt(Value a, Value b) { return self().binary(kOpLt, a, b); }
  Value or_(Value a, Value b) { return self().binary(kOpOr, a, b); }
  Value neg(Value x) { return self().unary(kOpNeg, x); }
  Value abs(Value x) { return self().unary(kOpAbs, x); }
  Value exp(Value x) { return self().unary(kOpExp, x); }
  Value log(Value x) { return self().unary(kOpLog, x); }
  Value sqrt(Value x) { return self().unary(kOpSqrt, x); }
  Value tanh(Value x) { return self().unary(kOpTanh, x); }
  Value sin(Value x) { return self().unary(kOpSin, x); }
  Value cos(Value x) { return self().unary(kOpCos, x); }
  Value sigmoid(Value x) { return self().unary(kOpSigmoid, x); }
  Value sum(Value x, std::vector<int64_t> axes, bool keep) {
    return self().reduce(kOpSum, x, std::move(axes), keep);
  }
  Value max(Value x, std::vector<int64_t> axes, bool keep) {
    return self().reduce(kOpMax, x, std::move(axes), keep);
  }
  Value min(Value x, std::vector<int64_t> axes, bool keep) {
    return self().reduce(kOpMin, x, std::move(axes), keep);
  }
  // x times / plus the constant v, in x's dtype (named apart: Value is an integer handle).
  Value mulc(Value x, double v) { return mul(x, scalar(v, self().desc(x).dtype)); }
  Value addc(Value x, double v) { return add(x, scalar(v, self().desc(x).dtype)); }

 private:
  B& self() { return static_cast<B&>(*this); }
};

// Appends canonical nodes to an OwnedGraph. Every call computes its output description and
// writes the op's IR-form attributes; emit() is the one place a node is appended, so a pass can
// intercept each one (the decompose pass does).
class Builder : public Ops<Builder> {
 public:
  explicit Builder(OwnedGraph& g) : g_(g) {}
  virtual ~Builder() = default;

  Desc desc(Value v) const;
  Value unary(OpId op, Value x);
  Value binary(OpId op, Value a, Value b);
  Value where(Value c, Value a, Value b);
  Value cast(Value x, lt_dtype d);
  Value full(const Shape& shape, double v, lt_dtype d);
  Value arange(int64_t n, double start, double step, lt_dtype d);
  Value random_unit(Value seed, const Shape& shape, int64_t stride, int64_t offset, lt_dtype d);
  Value reduce(OpId op, Value x, std::vector<int64_t> axes, bool keepdims);
  Value matmul(Value a, Value b);
  Value reshape(Value x, const Shape& shape);
  Value permute(Value x, const std::vector<int64_t>& perm);
  Value broadcast_to(Value x, const Shape& shape);
  Value slice(Value x, const std::vector<int64_t>& starts, const std::vector<int64_t>& stops,
              const std::vector<int64_t>& steps);
  Value pad(Value x, const std::vector<int64_t>& before, const std::vector<int64_t>& after,
            double v);
  Value concat(const std::vector<Value>& xs, int64_t axis);
  Value gather(Value a, Value indices, int64_t axis);
  Value scatter_add(Value a, Value indices, Value updates, int64_t axis);
  Value conv2d(Value x, Value w, const std::vector<int64_t>& stride,
               const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation,
               int64_t groups);

  // One IR attribute value, owned until emit() copies it into the graph.
  struct Attr {
    const char* name;
    lt_attr_kind kind;
    int64_t i = 0;
    double f = 0;
    std::vector<int64_t> ints = {};
  };

 protected:
  // Appends node `op` with output `out`; returns the value callers should use for it.
  virtual Value emit(OpId op, const Desc& out, const std::vector<Value>& operands,
                     const std::vector<Attr>& attrs);
  OwnedGraph& g_;
};

}  // namespace lt::lower
