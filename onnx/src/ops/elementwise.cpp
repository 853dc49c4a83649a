// ops/elementwise.cpp — ONNX elementwise ops: unary math, activations, arithmetic, logic, Cast.
#include "common.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

namespace lt::onnx::detail {

namespace {

using TFn = std::function<Tensor(Ctx&, Tensor)>;

OpEntry unary(TFn f, bool float_only = true) {
  return {[f, float_only](Ctx& c, const NodeP&, Vals& in) {
            Tensor x = c.T(in.at(0));
            if (float_only && !is_float(x.dtype())) {
              c.error(std::string("input dtype ") + dtype_name(x.dtype()) + " is not a float type");
            }
            return one(c, f(c, x), in[0].ot);
          },
          1};
}

// atan by two half-angle reductions (|t| < tan(pi/8)) and a Taylor series to t^19.
Tensor atan_t(Ctx& c, Tensor x) {
  auto half = [&](const Tensor& t) { return t / (sc(c, t, 1) + (t * t + sc(c, t, 1)).sqrt()); };
  Tensor t = half(half(x));
  Tensor t2 = t * t, term = t, sum = t;
  for (int k = 1; k <= 9; ++k) {
    term = term * t2 * sc(c, t, -1);
    sum = sum + term * sc(c, t, 1.0 / (2 * k + 1));
  }
  return sum * sc(c, x, 4);
}

OpEntry binary_arith(const char* name) {
  std::string op = name;
  return {[op](Ctx& c, const NodeP&, Vals& in) -> Vals {
            Value& a = in.at(0);
            Value& b = in.at(1);
            if (all_host({a, b}) && a.ot == b.ot) {
              auto f = [&](double x, double y) -> double {
                bool integer = is_int(carrier_dtype(a.ot));
                if (op == "add") return x + y;
                if (op == "sub") return x - y;
                if (op == "mul") return x * y;
                if (op == "div") {
                  if (integer) return y == 0 ? 0 : std::trunc(x / y);
                  return x / y;
                }
                return 0;
              };
              return {host_binary(c, a, b, a.ot, f)};
            }
            Tensor x = c.T(a), y = c.T(b);
            if (x.dtype() != y.dtype()) c.error("operand dtypes differ");
            Tensor r = op == "add" ? x + y : op == "sub" ? x - y : op == "mul" ? x * y : x / y;
            return one(c, r, a.ot);
          },
          1};
}

OpEntry compare(int kind) {  // 0 eq 1 lt 2 gt 3 le 4 ge
  return {[kind](Ctx& c, const NodeP&, Vals& in) -> Vals {
            Value& a = in.at(0);
            Value& b = in.at(1);
            if (all_host({a, b})) {
              return {host_binary(c, a, b, kBool, [kind](double x, double y) -> double {
                switch (kind) {
                  case 0:
                    return x == y;
                  case 1:
                    return x < y;
                  case 2:
                    return x > y;
                  case 3:
                    return x <= y;
                  default:
                    return x >= y;
                }
              })};
            }
            Tensor x = c.T(a), y = c.T(b);
            Tensor r = kind == 0   ? x == y
                       : kind == 1 ? x < y
                       : kind == 2 ? x > y
                       : kind == 3 ? x <= y
                                   : x >= y;
            return one(c, r, kBool);
          },
          1};
}

OpEntry variadic(int kind) {  // 0 max 1 min 2 sum 3 mean
  return {[kind](Ctx& c, const NodeP&, Vals& in) -> Vals {
            Tensor acc = c.T(in.at(0));
            for (size_t i = 1; i < in.size(); ++i) {
              Tensor y = c.T(in[i]);
              acc = kind == 0 ? lt::maximum(acc, y) : kind == 1 ? lt::minimum(acc, y) : acc + y;
            }
            if (kind == 3) acc = acc / sc(c, acc, static_cast<double>(in.size()));
            if (in.size() == 1) acc = acc + sc(c, acc, 0);  // a new value, not an alias
            return one(c, acc, in[0].ot);
          },
          1};
}

}  // namespace

void add_elementwise_ops(std::map<std::string, OpEntry>& t) {
  // Elementwise math.
  t["Abs"] = unary([](Ctx&, Tensor x) { return x.abs(); }, false);
  t["Neg"] = unary([](Ctx&, Tensor x) { return x.neg(); }, false);
  t["Exp"] = unary([](Ctx&, Tensor x) { return x.exp(); });
  t["Log"] = unary([](Ctx&, Tensor x) { return x.log(); });
  t["Sqrt"] = unary([](Ctx&, Tensor x) { return x.sqrt(); });
  t["Tanh"] = unary([](Ctx&, Tensor x) { return x.tanh(); });
  t["Sigmoid"] = unary([](Ctx&, Tensor x) { return x.sigmoid(); });
  t["Relu"] = unary([](Ctx&, Tensor x) { return x.relu(); }, false);
  t["Sin"] = unary([](Ctx&, Tensor x) { return x.sin(); });
  t["Cos"] = unary([](Ctx&, Tensor x) { return x.cos(); });
  t["Tan"] = unary([](Ctx&, Tensor x) { return x.sin() / x.cos(); });
  t["Floor"] = unary([](Ctx&, Tensor x) { return x.floor(); });
  t["Ceil"] = unary([](Ctx&, Tensor x) { return -((-x).floor()); });
  t["Round"] = unary([](Ctx& c, Tensor x) { return round_even(c, x); });
  t["Erf"] = unary([](Ctx&, Tensor x) { return x.erf(); });
  t["Softplus"] = unary([](Ctx&, Tensor x) { return x.softplus(); });
  t["Softsign"] = unary([](Ctx& c, Tensor x) { return x / (x.abs() + sc(c, x, 1)); });
  t["Reciprocal"] = unary([](Ctx& c, Tensor x) { return sc(c, x, 1) / x; });
  t["Sinh"] = unary([](Ctx& c, Tensor x) { return (x.exp() - (-x).exp()) * sc(c, x, 0.5); });
  t["Cosh"] = unary([](Ctx& c, Tensor x) { return (x.exp() + (-x).exp()) * sc(c, x, 0.5); });
  t["Asinh"] = unary([](Ctx& c, Tensor x) { return (x + (x * x + sc(c, x, 1)).sqrt()).log(); });
  t["Acosh"] = unary([](Ctx& c, Tensor x) { return (x + (x * x - sc(c, x, 1)).sqrt()).log(); });
  t["Atanh"] = unary([](Ctx& c, Tensor x) {
    return ((sc(c, x, 1) + x) / (sc(c, x, 1) - x)).log() * sc(c, x, 0.5);
  });
  t["Atan"] = unary([](Ctx& c, Tensor x) { return atan_t(c, x); });
  t["Asin"] = unary([](Ctx& c, Tensor x) { return atan_t(c, x / (sc(c, x, 1) - x * x).sqrt()); });
  t["Acos"] = unary([](Ctx& c, Tensor x) {
    return sc(c, x, M_PI / 2) - atan_t(c, x / (sc(c, x, 1) - x * x).sqrt());
  });
  t["Sign"] = unary(
      [](Ctx&, Tensor x) {
        return (x > lt::zeros(x.device(), {}, x.dtype())).cast(x.dtype()) -
               (x < lt::zeros(x.device(), {}, x.dtype())).cast(x.dtype());
      },
      false);
  t["IsNaN"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                  Tensor x = c.T(in.at(0));
                  (void)n;
                  return one(c, x != x, kBool);
                },
                9};
  t["IsInf"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                  Tensor x = c.T(in.at(0));
                  (void)n;
                  bool pos = c.attr_i("detect_positive", 1), neg = c.attr_i("detect_negative", 1);
                  Tensor inf = sc(c, x, std::numeric_limits<double>::infinity());
                  Tensor r = lt::zeros(c.dev, x.shape(), LT_DTYPE_BOOL);
                  if (pos) r = r || (x == inf);
                  if (neg) r = r || (x == -inf);
                  return one(c, r, kBool);
                },
                10};
  t["Not"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                (void)n;
                return one(c, c.T(in.at(0)).logical_not(), kBool);
              },
              1};
  t["Elu"] = unary([](Ctx& c, Tensor x) {
    double a = c.attr_f("alpha", 1.0f);
    return lt::where(x < sc(c, x, 0), (x.exp() - sc(c, x, 1)) * sc(c, x, a), x);
  });
  t["Celu"] = unary([](Ctx& c, Tensor x) {
    double a = c.attr_f("alpha", 1.0f);
    return lt::maximum(x, sc(c, x, 0)) +
           lt::minimum(sc(c, x, 0), ((x / sc(c, x, a)).exp() - sc(c, x, 1)) * sc(c, x, a));
  });
  t["Selu"] = unary([](Ctx& c, Tensor x) {
    double a = c.attr_f("alpha", 1.67326319217681884765625f),
           g = c.attr_f("gamma", 1.05070102214813232421875f);
    return lt::where(x > sc(c, x, 0), x, (x.exp() - sc(c, x, 1)) * sc(c, x, a)) * sc(c, x, g);
  });
  t["LeakyRelu"] = unary([](Ctx& c, Tensor x) {
    return lt::where(x < sc(c, x, 0), x * sc(c, x, c.attr_f("alpha", 0.01f)), x);
  });
  t["ThresholdedRelu"] = unary([](Ctx& c, Tensor x) {
    return lt::where(x > sc(c, x, c.attr_f("alpha", 1.0f)), x, sc(c, x, 0));
  });
  t["HardSigmoid"] = unary([](Ctx& c, Tensor x) {
    return lt::minimum(
        lt::maximum(x * sc(c, x, c.attr_f("alpha", 0.2f)) + sc(c, x, c.attr_f("beta", 0.5f)),
                    sc(c, x, 0)),
        sc(c, x, 1));
  });
  t["HardSwish"] = unary([](Ctx& c, Tensor x) {
    return x * lt::minimum(lt::maximum(x * sc(c, x, 1.0 / 6) + sc(c, x, 0.5), sc(c, x, 0)),
                           sc(c, x, 1));
  });
  t["Shrink"] = unary(
      [](Ctx& c, Tensor x) {
        double l = c.attr_f("lambd", 0.5f), b = c.attr_f("bias", 0.0f);
        Tensor xf = is_float(x.dtype()) ? x : x.cast(LT_DTYPE_F64);
        Tensor r = lt::where(xf < sc(c, xf, -l), xf + sc(c, xf, b),
                             lt::where(xf > sc(c, xf, l), xf - sc(c, xf, b), sc(c, xf, 0)));
        return cast_to(r, x.dtype());
      },
      false);
  t["PRelu"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        Tensor x = c.T(in.at(0)), s = c.T(in.at(1));
        // Before opset 7 a slope of shape [C] applies along the channel axis.
        if (c.opset < 7 && s.rank() == 1 && x.rank() > 2 && s.shape()[0] == x.shape()[1]) {
          std::vector<int64_t> rs(x.rank() - 1, 1);
          rs[0] = s.shape()[0];
          s = s.reshape(rs);
        }
        return one(c, lt::where(x < sc(c, x, 0), x * s, x), in[0].ot);
      },
      1};
  t["Clip"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        Tensor x = c.T(in.at(0));
        if (c.opset < 11) {
          x = lt::maximum(x, sc(c, x, c.attr_f("min", -std::numeric_limits<float>::infinity())));
          x = lt::minimum(x, sc(c, x, c.attr_f("max", std::numeric_limits<float>::infinity())));
        } else {
          if (in.size() > 1 && in[1].present) x = lt::maximum(x, c.T(in[1]));
          if (in.size() > 2 && in[2].present) x = lt::minimum(x, c.T(in[2]));
          x = x + sc(c, x, 0);
        }
        return one(c, x, in[0].ot);
      },
      1};
  t["Add"] = binary_arith("add");
  t["Sub"] = binary_arith("sub");
  t["Mul"] = binary_arith("mul");
  t["Div"] = binary_arith("div");
  t["Pow"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                (void)n;
                Tensor x = c.T(in.at(0)), y = c.T(in.at(1));
                DType dt = x.dtype();
                DType w = is_float(dt) ? dt : LT_DTYPE_F64;
                if (w == LT_DTYPE_F32 && !is_float(y.dtype())) w = LT_DTYPE_F64;
                Tensor r = cast_to(x, w).pow(cast_to(y, w));
                if (is_int(dt)) r = round_even(c, r);
                return one(c, cast_to(r, dt), in[0].ot);
              },
              1};
  t["Mod"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                (void)n;
                Tensor x = c.T(in.at(0)), y = c.T(in.at(1));
                DType dt = x.dtype();
                Tensor xf = cast_to(x, is_float(dt) ? dt : LT_DTYPE_F64),
                       yf = cast_to(y, xf.dtype());
                Tensor q = xf / yf;
                Tensor r;
                if (c.attr_i("fmod", 0)) {
                  Tensor tq = lt::where(q < sc(c, q, 0), -((-q).floor()), q.floor());
                  r = xf - tq * yf;
                } else {
                  r = xf - q.floor() * yf;
                }
                return one(c, cast_to(r, dt), in[0].ot);
              },
              1};
  t["BitShift"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                     (void)n;
                     Tensor x = c.T(in.at(0)), y = c.T(in.at(1));
                     Tensor p = lt::full(c.dev, {}, 2.0, LT_DTYPE_F64).pow(y.cast(LT_DTYPE_F64));
                     Tensor xf = x.cast(LT_DTYPE_F64);
                     Tensor r = c.attr_s("direction", "") == "LEFT" ? xf * p : (xf / p).floor();
                     return one(c, r.cast(x.dtype()), in[0].ot);
                   },
                   11};
  t["Max"] = variadic(0);
  t["Min"] = variadic(1);
  t["Sum"] = variadic(2);
  t["Mean"] = variadic(3);
  t["Equal"] = compare(0);
  t["Less"] = compare(1);
  t["Greater"] = compare(2);
  t["LessOrEqual"] = compare(3);
  t["GreaterOrEqual"] = compare(4);
  t["And"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                (void)n;
                return one(c, c.T(in.at(0)) && c.T(in.at(1)), kBool);
              },
              1};
  t["Or"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
               (void)n;
               return one(c, c.T(in.at(0)) || c.T(in.at(1)), kBool);
             },
             1};
  t["Xor"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                (void)n;
                return one(c, c.T(in.at(0)) != c.T(in.at(1)), kBool);
              },
              1};
  t["Where"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        if (all_host({in.at(0), in.at(1), in.at(2)})) {
          auto os = bcast_shape(c, bcast_shape(c, in[0].h->shape, in[1].h->shape), in[2].h->shape);
          int64_t cnt = numel_of(os);
          if (cnt > (int64_t(1) << 20))
            c.error("a shape computation of " + std::to_string(cnt) + " elements");
          std::vector<double> v(cnt);
          for (int64_t i = 0; i < cnt; ++i)
            v[i] = bread(*in[0].h, os, i) != 0 ? bread(*in[1].h, os, i) : bread(*in[2].h, os, i);
          return {c.from_host(os, v, in[1].ot, true)};
        }
        return one(c, lt::where(c.T(in[0]), c.T(in[1]), c.T(in[2])), in[1].ot);
      },
      1};
  auto cast_fn = [](Ctx& c, Value& v, int32_t to) -> Value {
    if (to == kString || carrier_dtype(to) == LT_DTYPE_INVALID) {
      c.error(std::string("cast to ") + onnx_type_name(to) + " is not supported");
    }
    if (v.h && v.shape_class && is_int(carrier_dtype(to))) {
      std::vector<double> vals = v.h->v;
      for (double& d : vals) d = std::trunc(d);
      return c.from_host(v.h->shape, vals, to, true);
    }
    Tensor x = c.T(v);
    DType d = carrier_dtype(to);
    Tensor r = cast_to(x, d);
    // Narrow integer types wrap like the C conversion.
    if (to == kUint8 || to == kInt8 || to == kUint16 || to == kInt16) {
      double m = (to == kUint8 || to == kInt8) ? 256 : 65536;
      Tensor f = r.cast(LT_DTYPE_F64);
      Tensor w = f - (f / c.scalar(m, LT_DTYPE_F64)).floor() * c.scalar(m, LT_DTYPE_F64);
      if (to == kInt8 || to == kInt16)
        w = lt::where(w >= c.scalar(m / 2, LT_DTYPE_F64), w - c.scalar(m, LT_DTYPE_F64), w);
      r = w.cast(d);
    }
    if (r.is_same(x)) r = x + sc(c, x, 0);
    return c.from_tensor(r, to);
  };
  t["Cast"] = {[cast_fn](Ctx& c, const NodeP&, Vals& in) -> Vals {
                 return {cast_fn(c, in.at(0), static_cast<int32_t>(c.attr_i("to", kFloat)))};
               },
               1};
  t["CastLike"] = {[cast_fn](Ctx& c, const NodeP&, Vals& in) -> Vals {
                     return {cast_fn(c, in.at(0), in.at(1).ot)};
                   },
                   15};
  t["Identity"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                     (void)n;
                     (void)c;
                     return {in.at(0)};
                   },
                   1};
  t["Dropout"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        if (in.size() > 2 && in[2].present && c.ints(in[2]).at(0) != 0) {
          double ratio = in.size() > 1 && in[1].present ? c.doubles(in[1]).at(0) : 0.5;
          if (ratio != 0) c.error("training_mode dropout with ratio > 0 (random) is not supported");
        }
        Vals out = {in.at(0)};
        out.push_back(c.from_tensor(lt::ones(c.dev, shape_of(c, in[0]), LT_DTYPE_BOOL), kBool));
        return out;
      },
      1};
}

}  // namespace lt::onnx::detail
