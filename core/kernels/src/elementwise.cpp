// elementwise.cpp — unary, binary, where and cast. One span instantiation per (op, dtype);
// broadcasting lives once in elementwise() (common.cpp); contiguous f32 transcendentals run
// SLEEF's vector math (vec.h).
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "convert.h"
#include "kernels.h"
#include "lazytensor/lower/bf16.hpp"
#include "vec.h"

namespace lt::host {
namespace {

template <class T>
inline T wrap_neg(T a) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(std::make_unsigned_t<T>(0) - static_cast<std::make_unsigned_t<T>>(a));
  } else {
    return -a;
  }
}

// ---- unary ops ----

struct Neg {
  template <class T>
  static T f(T a) {
    return wrap_neg(a);
  }
};
struct Abs {
  template <class T>
  static T f(T a) {
    if constexpr (std::is_integral_v<T>)
      return a < 0 ? wrap_neg(a) : a;
    else
      return std::fabs(a);
  }
};
struct Relu {
  template <class T>
  static T f(T a) {
    return a < T(0) ? T(0) : a;
  }  // NaN < 0 is false: NaN stays
};
struct Exp {
  template <class T>
  static T f(T a) {
    return std::exp(a);
  }
};
struct Log {
  template <class T>
  static T f(T a) {
    return std::log(a);
  }
};
struct Sqrt {
  template <class T>
  static T f(T a) {
    return std::sqrt(a);
  }
};
struct Rsqrt {
  template <class T>
  static T f(T a) {
    return T(1) / std::sqrt(a);
  }
};
struct Sin {
  template <class T>
  static T f(T a) {
    return std::sin(a);
  }
};
struct Cos {
  template <class T>
  static T f(T a) {
    return std::cos(a);
  }
};
struct Tanh {
  template <class T>
  static T f(T a) {
    return std::tanh(a);
  }
};
struct Floor {
  template <class T>
  static T f(T a) {
    return std::floor(a);
  }
};
struct Sigmoid {
  template <class T>
  static T f(T a) {
    return T(1) / (T(1) + std::exp(-a));
  }
};
struct Gelu {
  template <class T>
  static T f(T a) {
    const T k = T(0.7978845608028654);  // sqrt(2/pi)
    return T(0.5) * a * (T(1) + std::tanh(k * (a + T(0.044715) * a * a * a)));
  }
};
struct Not {
  template <class T>
  static T f(T a) {
    return a == 0 ? 1 : 0;
  }
};

// The vector loop of an f32 op, or null (scalar loop).
template <class Op>
vec::UnaryF32 vector_loop() {
  const vec::Table& t = vec::table();
  if constexpr (std::is_same_v<Op, Exp>) return t.exp;
  if constexpr (std::is_same_v<Op, Log>) return t.log;
  if constexpr (std::is_same_v<Op, Tanh>) return t.tanh;
  if constexpr (std::is_same_v<Op, Sigmoid>) return t.sigmoid;
  if constexpr (std::is_same_v<Op, Gelu>) return t.gelu;
  if constexpr (std::is_same_v<Op, Sin>) return t.sin;
  if constexpr (std::is_same_v<Op, Cos>) return t.cos;
  return nullptr;
}

template <class T, class Op>
void unary_span(char* out, const char* const* in, const int64_t* st, int64_t n, const int64_t*) {
  T* o = reinterpret_cast<T*>(out);
  const T* a = reinterpret_cast<const T*>(in[0]);
  const int64_t s = st[0];
  if constexpr (std::is_same_v<T, float>) {
    if (s == 1) {
      if (vec::UnaryF32 f = vector_loop<Op>()) {
        f(o, a, n);
        return;
      }
    }
  }
  if (s == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = Op::f(a[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = Op::f(a[i * s]);
  }
}

// ---- binary ops ----

template <class T>
using U = std::make_unsigned_t<T>;

struct Add {
  template <class T>
  static T f(T a, T b) {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(U<T>(a) + U<T>(b));
    else
      return a + b;
  }
};
struct Sub {
  template <class T>
  static T f(T a, T b) {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(U<T>(a) - U<T>(b));
    else
      return a - b;
  }
};
struct Mul {
  template <class T>
  static T f(T a, T b) {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(U<T>(a) * U<T>(b));
    else
      return a * b;
  }
};
struct Div {
  template <class T>
  static T f(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return 0;
      if (b == -1) return wrap_neg(a);  // INT_MIN / -1 = INT_MIN, without the trap
      return a / b;
    } else {
      return a / b;
    }
  }
};
struct Pow {
  template <class T>
  static T f(T a, T b) {
    return std::pow(a, b);
  }
};
struct Maximum {
  template <class T>
  static T f(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a || b != b) return std::numeric_limits<T>::quiet_NaN();
    }
    return a < b ? b : a;
  }
};
struct Minimum {
  template <class T>
  static T f(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a || b != b) return std::numeric_limits<T>::quiet_NaN();
    }
    return b < a ? b : a;
  }
};
struct Eq {
  template <class T>
  static uint8_t f(T a, T b) {
    return a == b;
  }
};
struct Ne {
  template <class T>
  static uint8_t f(T a, T b) {
    return a != b;
  }
};
struct Lt {
  template <class T>
  static uint8_t f(T a, T b) {
    return a < b;
  }
};
struct Le {
  template <class T>
  static uint8_t f(T a, T b) {
    return a <= b;
  }
};
struct Gt {
  template <class T>
  static uint8_t f(T a, T b) {
    return a > b;
  }
};
struct Ge {
  template <class T>
  static uint8_t f(T a, T b) {
    return a >= b;
  }
};
struct And {
  template <class T>
  static uint8_t f(T a, T b) {
    return (a != 0) & (b != 0);
  }
};
struct Or {
  template <class T>
  static uint8_t f(T a, T b) {
    return (a != 0) | (b != 0);
  }
};

template <class T, class Op>
void binary_span(char* out, const char* const* in, const int64_t* st, int64_t n, const int64_t*) {
  using R = decltype(Op::f(T(), T()));
  R* o = reinterpret_cast<R*>(out);
  const T* a = reinterpret_cast<const T*>(in[0]);
  const T* b = reinterpret_cast<const T*>(in[1]);
  const int64_t sa = st[0], sb = st[1];
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = Op::f(a[i], b[i]);
  } else if (sa == 1 && sb == 0) {
    const T y = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = Op::f(a[i], y);
  } else if (sa == 0 && sb == 1) {
    const T x = a[0];
    for (int64_t i = 0; i < n; ++i) o[i] = Op::f(x, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = Op::f(a[i * sa], b[i * sb]);
  }
}

// Span tables: index by dtype; nullptr = dtype not accepted by the op.
struct SpanSet {
  SpanFn f32 = nullptr, f64 = nullptr, i32 = nullptr, i64 = nullptr, b = nullptr;
  bool any() const { return f32 || i32 || b; }
  SpanFn get(lt_dtype d) const {
    switch (d) {
      case LT_DTYPE_F32:
        return f32;
      case LT_DTYPE_F64:
        return f64;
      case LT_DTYPE_I32:
        return i32;
      case LT_DTYPE_I64:
        return i64;
      case LT_DTYPE_BOOL:
        return b;
      default:
        return nullptr;
    }
  }
};

enum Cat { kFloat = 1, kInt = 2, kBool = 4 };

template <class Op>
SpanSet unary_spans(int cats) {
  SpanSet s;
  if (cats & kFloat) {
    s.f32 = &unary_span<float, Op>;
    s.f64 = &unary_span<double, Op>;
  }
  if constexpr (!std::is_same_v<Op, Exp> && !std::is_same_v<Op, Log> && !std::is_same_v<Op, Sqrt> &&
                !std::is_same_v<Op, Rsqrt> && !std::is_same_v<Op, Sin> &&
                !std::is_same_v<Op, Cos> && !std::is_same_v<Op, Tanh> &&
                !std::is_same_v<Op, Floor> && !std::is_same_v<Op, Sigmoid> &&
                !std::is_same_v<Op, Gelu>) {
    if (cats & kInt) {
      s.i32 = &unary_span<int32_t, Op>;
      s.i64 = &unary_span<int64_t, Op>;
    }
    if (cats & kBool) s.b = &unary_span<uint8_t, Op>;
  }
  return s;
}

template <class Op>
SpanSet binary_spans(int cats) {
  SpanSet s;
  if constexpr (!std::is_same_v<Op, And> && !std::is_same_v<Op, Or>) {
    if (cats & kFloat) {
      s.f32 = &binary_span<float, Op>;
      s.f64 = &binary_span<double, Op>;
    }
  }
  if constexpr (!std::is_same_v<Op, Pow> && !std::is_same_v<Op, And> && !std::is_same_v<Op, Or>) {
    if (cats & kInt) {
      s.i32 = &binary_span<int32_t, Op>;
      s.i64 = &binary_span<int64_t, Op>;
    }
  }
  if constexpr (std::is_same_v<decltype(Op::f(0, 0)), uint8_t>) {
    if (cats & kBool) s.b = &binary_span<uint8_t, Op>;
  }
  return s;
}

// Span sets of the unary and binary ops the host computes; bool_out for comparisons.
struct SpanOp {
  SpanSet set;
  bool bool_out = false;
};

const std::array<SpanOp, kNumBuiltinOps>& span_ops() {
  static const auto ops = [] {
    std::array<SpanOp, kNumBuiltinOps> t{};
    t[kOpNeg] = {unary_spans<Neg>(kFloat | kInt)};
    t[kOpAbs] = {unary_spans<Abs>(kFloat | kInt)};
    t[kOpRelu] = {unary_spans<Relu>(kFloat | kInt)};
    t[kOpExp] = {unary_spans<Exp>(kFloat)};
    t[kOpLog] = {unary_spans<Log>(kFloat)};
    t[kOpSqrt] = {unary_spans<Sqrt>(kFloat)};
    t[kOpRsqrt] = {unary_spans<Rsqrt>(kFloat)};
    t[kOpSin] = {unary_spans<Sin>(kFloat)};
    t[kOpCos] = {unary_spans<Cos>(kFloat)};
    t[kOpTanh] = {unary_spans<Tanh>(kFloat)};
    t[kOpFloor] = {unary_spans<Floor>(kFloat)};
    t[kOpSigmoid] = {unary_spans<Sigmoid>(kFloat)};
    t[kOpGelu] = {unary_spans<Gelu>(kFloat)};
    t[kOpNot] = {unary_spans<Not>(kBool)};
    t[kOpAdd] = {binary_spans<Add>(kFloat | kInt)};
    t[kOpSub] = {binary_spans<Sub>(kFloat | kInt)};
    t[kOpMul] = {binary_spans<Mul>(kFloat | kInt)};
    t[kOpDiv] = {binary_spans<Div>(kFloat | kInt)};
    t[kOpPow] = {binary_spans<Pow>(kFloat)};
    t[kOpMaximum] = {binary_spans<Maximum>(kFloat | kInt)};
    t[kOpMinimum] = {binary_spans<Minimum>(kFloat | kInt)};
    t[kOpEq] = {binary_spans<Eq>(kFloat | kInt | kBool), true};
    t[kOpNe] = {binary_spans<Ne>(kFloat | kInt | kBool), true};
    t[kOpLt] = {binary_spans<Lt>(kFloat | kInt | kBool), true};
    t[kOpLe] = {binary_spans<Le>(kFloat | kInt | kBool), true};
    t[kOpGt] = {binary_spans<Gt>(kFloat | kInt | kBool), true};
    t[kOpGe] = {binary_spans<Ge>(kFloat | kInt | kBool), true};
    t[kOpAnd] = {binary_spans<And>(kBool), true};
    t[kOpOr] = {binary_spans<Or>(kBool), true};
    return t;
  }();
  return ops;
}

// The span to run is chosen at compile time and stored as params[0].
void push_span(PrepareCall& c, SpanFn fn) {
  c.params->push_back(reinterpret_cast<int64_t>(reinterpret_cast<void*>(fn)));
}
SpanFn span_of(const KernelCall& c) {
  return reinterpret_cast<SpanFn>(reinterpret_cast<void*>(c.params[0]));
}
void run_unary(const KernelCall& c) {
  elementwise(c, 1, span_of(c));
}
void run_binary(const KernelCall& c) {
  elementwise(c, 2, span_of(c));
}
void run_ternary(const KernelCall& c) {
  elementwise(c, 3, span_of(c));
}

void prepare_unary(PrepareCall& c) {
  if (SpanFn fn = span_ops()[c.op].set.get(c.in[0].dtype)) {
    push_span(c, fn);
    c.fn = run_unary;
  }
}

void prepare_binary(PrepareCall& c) {
  if (SpanFn fn = span_ops()[c.op].set.get(c.in[0].dtype)) {
    push_span(c, fn);
    c.fn = run_binary;
  }
}

// where copies bytes, so one instantiation per element size covers every dtype. Both
// operands are loaded before the select, so the contiguous and broadcast-scalar cases compile to
// vector blends (relu's gradient, where(x > 0, g, 0), is one; the strided loop's branch was
// 12.5% of cpu_eager's resnet training step).
template <class E>
void where_span(char* out, const char* const* in, const int64_t* st, int64_t n, const int64_t*) {
  E* o = reinterpret_cast<E*>(out);
  const uint8_t* cond = reinterpret_cast<const uint8_t*>(in[0]);
  const E* a = reinterpret_cast<const E*>(in[1]);
  const E* b = reinterpret_cast<const E*>(in[2]);
  if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
    for (int64_t i = 0; i < n; ++i) {
      const E x = a[i], y = b[i];
      o[i] = cond[i] ? x : y;
    }
  } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
    const E y = b[0];
    for (int64_t i = 0; i < n; ++i) {
      const E x = a[i];
      o[i] = cond[i] ? x : y;
    }
  } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
    const E x = a[0];
    for (int64_t i = 0; i < n; ++i) {
      const E y = b[i];
      o[i] = cond[i] ? x : y;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = cond[i * st[0]] ? a[i * st[1]] : b[i * st[2]];
  }
}

void prepare_where(PrepareCall& c) {
  switch (lt_dtype_size(c.out.dtype)) {
    case 1:
      push_span(c, &where_span<uint8_t>);
      break;
    case 2:
      push_span(c, &where_span<uint16_t>);
      break;
    case 4:
      push_span(c, &where_span<uint32_t>);
      break;
    default:
      push_span(c, &where_span<uint64_t>);
      break;
  }
  c.fn = run_ternary;
}

// ---- cast ----

template <class S, class D>
void cast_span(char* out, const char* const* in, const int64_t* st, int64_t n, const int64_t*) {
  D* o = reinterpret_cast<D*>(out);
  const S* a = reinterpret_cast<const S*>(in[0]);
  const int64_t s = st[0];
  for (int64_t i = 0; i < n; ++i) o[i] = convert<D>(a[i * s]);
}

template <class S>
SpanFn cast_from(lt_dtype dst) {
  switch (dst) {
    case LT_DTYPE_F32:
      return &cast_span<S, float>;
    case LT_DTYPE_F64:
      return &cast_span<S, double>;
    case LT_DTYPE_I32:
      return &cast_span<S, int32_t>;
    case LT_DTYPE_I64:
      return &cast_span<S, int64_t>;
    case LT_DTYPE_BOOL:
      return &cast_span<S, uint8_t>;
    default:
      return nullptr;
  }
}

// ---- storage types (bf16, f16): only cast and pure data movement accept them ----
// Conversions go through f32: bf16 rounds to nearest even (NaN stays NaN), f16 uses the
// compiler's _Float16.

struct Bf16 {
  uint16_t bits;
};

inline float to_float(Bf16 v) {
  return lower::bf16_to_float(v.bits);
}
inline float to_float(_Float16 v) {
  return static_cast<float>(v);
}
template <class T>
inline float to_float(T v) {
  return convert<float>(v);
}

template <class D>
inline D from_float(float f) {
  if constexpr (std::is_same_v<D, Bf16>) {
    return Bf16{lower::bf16_bits(f)};
  } else if constexpr (std::is_same_v<D, _Float16>) {
    return static_cast<_Float16>(f);
  } else {
    return convert<D>(f);
  }
}

template <class S, class D>
void storage_cast_span(char* out, const char* const* in, const int64_t* st, int64_t n,
                       const int64_t*) {
  D* o = reinterpret_cast<D*>(out);
  const S* a = reinterpret_cast<const S*>(in[0]);
  for (int64_t i = 0; i < n; ++i) o[i] = from_float<D>(to_float(a[i * st[0]]));
}

template <class S>
SpanFn storage_cast_from(lt_dtype dst) {
  switch (dst) {
    case LT_DTYPE_F32:
      return &storage_cast_span<S, float>;
    case LT_DTYPE_F64:
      return &storage_cast_span<S, double>;
    case LT_DTYPE_I32:
      return &storage_cast_span<S, int32_t>;
    case LT_DTYPE_I64:
      return &storage_cast_span<S, int64_t>;
    case LT_DTYPE_BOOL:
      return &storage_cast_span<S, uint8_t>;
    case LT_DTYPE_BF16:
      return &storage_cast_span<S, Bf16>;
    default:
      return &storage_cast_span<S, _Float16>;
  }
}

bool is_storage(lt_dtype d) {
  return d == LT_DTYPE_BF16 || d == LT_DTYPE_F16;
}

void prepare_cast(PrepareCall& c) {
  if (is_storage(c.in[0].dtype) || is_storage(c.out.dtype)) {
    SpanFn fn = nullptr;
    switch (c.in[0].dtype) {
      case LT_DTYPE_F32:
        fn = storage_cast_from<float>(c.out.dtype);
        break;
      case LT_DTYPE_F64:
        fn = storage_cast_from<double>(c.out.dtype);
        break;
      case LT_DTYPE_I32:
        fn = storage_cast_from<int32_t>(c.out.dtype);
        break;
      case LT_DTYPE_I64:
        fn = storage_cast_from<int64_t>(c.out.dtype);
        break;
      case LT_DTYPE_BOOL:
        fn = storage_cast_from<uint8_t>(c.out.dtype);
        break;
      case LT_DTYPE_BF16:
        fn = storage_cast_from<Bf16>(c.out.dtype);
        break;
      default:
        fn = storage_cast_from<_Float16>(c.out.dtype);
        break;
    }
    push_span(c, fn);
    c.fn = run_unary;
    return;
  }
  SpanFn fn = nullptr;
  switch (c.in[0].dtype) {
    case LT_DTYPE_F32:
      fn = cast_from<float>(c.out.dtype);
      break;
    case LT_DTYPE_F64:
      fn = cast_from<double>(c.out.dtype);
      break;
    case LT_DTYPE_I32:
      fn = cast_from<int32_t>(c.out.dtype);
      break;
    case LT_DTYPE_I64:
      fn = cast_from<int64_t>(c.out.dtype);
      break;
    default:
      fn = cast_from<uint8_t>(c.out.dtype);
      break;
  }
  push_span(c, fn);
  c.fn = run_unary;
}

}  // namespace

void add_elementwise_ops(PrepareFn* t) {
  for (uint16_t op = 0; op < kNumBuiltinOps; ++op) {
    if (!span_ops()[op].set.any()) continue;
    lower::Rule r = lower::op_info(static_cast<OpId>(op)).rule;
    t[op] = r == lower::Rule::unary ? prepare_unary : prepare_binary;
  }
  t[kOpWhere] = prepare_where;
  t[kOpCast] = prepare_cast;
}

}  // namespace lt::host
