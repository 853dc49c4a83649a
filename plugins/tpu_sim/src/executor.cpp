// executor.cpp — runs a compiled Program on the host: MXU instructions through mxu_matmul
// (bf16 inputs, f32 accumulation), vector and layout instructions in f32 / i32 / bool.
// DMA instructions only cost simulated time: host memory stands in for HBM and VMEM.
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

#include "program.h"

namespace lt::tpu {
namespace {

using Shape = std::vector<int64_t>;

Shape contiguous(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// Strides of `in` read as if broadcast to `out` (right-aligned; size-1 dims stride 0).
Shape broadcast_strides(const Shape& in, const Shape& out) {
  Shape st(out.size(), 0);
  Shape c = contiguous(in);
  size_t off = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) st[off + d] = in[d] == 1 ? 0 : c[d];
  return st;
}

// Visits every element of `shape` one row (last dim) at a time, iteratively. For operand k,
// base[k] is the element offset of the row start and inner[k] the stride along the row.
template <size_t K, typename F>
void walk(const Shape& shape, const std::array<Shape, K>& strides, std::array<int64_t, K> base,
          F&& f) {
  const size_t r = shape.size();
  for (int64_t d : shape) {
    if (d == 0) return;
  }
  std::array<int64_t, K> inner{};
  if (r == 0) {
    f(base, inner, int64_t(1));
    return;
  }
  for (size_t k = 0; k < K; ++k) inner[k] = strides[k][r - 1];
  const int64_t len = shape[r - 1];
  std::vector<int64_t> idx(r, 0);
  while (true) {
    f(base, inner, len);
    int64_t d = int64_t(r) - 2;
    for (; d >= 0; --d) {
      for (size_t k = 0; k < K; ++k) base[k] += strides[k][size_t(d)];
      if (++idx[size_t(d)] < shape[size_t(d)]) break;
      for (size_t k = 0; k < K; ++k) base[k] -= strides[k][size_t(d)] * shape[size_t(d)];
      idx[size_t(d)] = 0;
    }
    if (d < 0) return;
  }
}

// Conversions with docs/ops.md cast semantics (uint8_t is bool): float->int truncates and
// saturates, NaN -> 0; int->int is modular; int->float rounds to nearest once.
template <typename D, typename S>
D convert(S v) {
  if constexpr (std::is_same_v<D, uint8_t>) {
    return v != S(0) ? 1 : 0;
  } else if constexpr (std::is_same_v<S, uint8_t>) {
    return v != 0 ? D(1) : D(0);
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
    if (std::isnan(v)) return 0;
    const double hi = -double(std::numeric_limits<D>::min());  // 2^31 or 2^63, exact
    if (double(v) >= hi) return std::numeric_limits<D>::max();
    if (double(v) <= -hi) return std::numeric_limits<D>::min();
    return D(v);
  } else {
    return D(v);
  }
}

template <typename F>
void with_type(lt_dtype d, F&& f) {
  switch (d) {
    case LT_DTYPE_F32:
      return f(float{});
    case LT_DTYPE_I32:
      return f(int32_t{});
    case LT_DTYPE_I64:
      return f(int64_t{});
    default:
      return f(uint8_t{});
  }
}

int32_t wrap(int64_t v) {
  return int32_t(uint32_t(uint64_t(v)));
}

template <typename T>
T fmax_nan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return a > b ? a : b;
}
template <typename T>
T fmin_nan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return a < b ? a : b;
}

class Runner {
 public:
  Runner(const Program& p, const void* const* inputs, void* const* outputs)
      : p_(p),
        inputs_(inputs),
        outputs_(outputs),
        ptr_(p.nodes.size(), nullptr),
        owned_(p.nodes.size()) {}

  void run() {
    const size_t count = p_.nodes.size();
    for (size_t k = 0; k < p_.inputs.size(); ++k) {
      ptr_[size_t(p_.inputs[k])] = const_cast<void*>(inputs_[k]);
    }
    for (size_t k = p_.outputs.size(); k-- > 0;) {
      size_t v = size_t(p_.outputs[k]);
      if (p_.nodes[v].op != Op::Input) ptr_[v] = outputs_[k];
    }
    for (size_t i = 0; i < count; ++i) {
      const Node& n = p_.nodes[i];
      if (n.op == Op::Input) continue;
      if (!ptr_[i]) {
        owned_[i].reset(new std::byte[std::max<uint64_t>(n.nbytes, 1)]);
        ptr_[i] = owned_[i].get();
      }
      compute(n, ptr_[i]);
      for (int32_t o : n.operands) {
        if (p_.last_use[size_t(o)] == int32_t(i)) owned_[size_t(o)].reset();
      }
    }
    for (size_t k = 0; k < p_.outputs.size(); ++k) {
      size_t v = size_t(p_.outputs[k]);
      if (outputs_[k] != ptr_[v] && p_.nodes[v].nbytes) {
        std::memcpy(outputs_[k], ptr_[v], p_.nodes[v].nbytes);
      }
    }
  }

 private:
  const Node& opnd(const Node& n, size_t k) const { return p_.nodes[size_t(n.operands[k])]; }
  template <typename T>
  const T* in(const Node& n, size_t k) const {
    return static_cast<const T*>(ptr_[size_t(n.operands[k])]);
  }

  void compute(const Node& n, void* out) {
    switch (n.op) {
      case Op::Neg:
      case Op::Abs:
      case Op::Relu:
      case Op::Exp:
      case Op::Log:
      case Op::Sqrt:
      case Op::Rsqrt:
      case Op::Tanh:
      case Op::Sigmoid:
      case Op::Gelu:
      case Op::Sin:
      case Op::Cos:
      case Op::Floor:
      case Op::Not:
        return unary(n, out);
      case Op::Add:
      case Op::Sub:
      case Op::Mul:
      case Op::Div:
      case Op::Pow:
      case Op::Maximum:
      case Op::Minimum:
      case Op::Eq:
      case Op::Ne:
      case Op::Lt:
      case Op::Le:
      case Op::Gt:
      case Op::Ge:
      case Op::And:
      case Op::Or:
        return binary(n, out);
      case Op::Where:
        return where(n, out);
      case Op::Cast:
        return cast(n, out);
      case Op::Full:
        return with_type(n.dtype, [&](auto t) {
          using T = decltype(t);
          T v = convert<T>(n.f0);
          T* o = static_cast<T*>(out);
          for (int64_t i = 0; i < n.numel; ++i) o[i] = v;
        });
      case Op::Arange:
        return with_type(n.dtype, [&](auto t) {
          using T = decltype(t);
          T* o = static_cast<T*>(out);
          for (int64_t i = 0; i < n.numel; ++i) o[i] = convert<T>(n.f0 + double(i) * n.f1);
        });
      case Op::Sum:
      case Op::Mean:
      case Op::Max:
      case Op::Min:
        return reduce(n, out);
      case Op::Argmax:
        return argmax(n, static_cast<int64_t*>(out));
      case Op::Matmul: {
        const Node& a = opnd(n, 0);
        size_t r = n.shape.size();
        int64_t b = r == 3 ? n.shape[0] : 1, m = a.shape[r - 2], k = a.shape[r - 1],
                nn = n.shape[r - 1];
        for (int64_t i = 0; i < b; ++i) {
          mxu_matmul(in<float>(n, 0) + i * m * k, in<float>(n, 1) + i * k * nn,
                     static_cast<float*>(out) + i * m * nn, m, k, nn);
        }
        return;
      }
      case Op::Conv2d:
        return conv2d(n, static_cast<float*>(out));
      case Op::Reshape:
        if (n.nbytes) std::memcpy(out, ptr_[size_t(n.operands[0])], n.nbytes);
        return;
      case Op::Permute:
      case Op::BroadcastTo:
      case Op::Slice:
      case Op::Concat:
      case Op::Pad:
        switch (lt_dtype_size(n.dtype)) {
          case 8:
            return layout<uint64_t>(n, out);
          case 4:
            return layout<uint32_t>(n, out);
          default:
            return layout<uint8_t>(n, out);
        }
      case Op::Gather:
        return gather(n, out);
      case Op::ScatterAdd:
        return n.dtype == LT_DTYPE_F32 ? scatter_add<float>(n, out) : scatter_add<int32_t>(n, out);
      case Op::MaxPool2d:
      case Op::AvgPool2d:
        return pool(n, static_cast<float*>(out));
      case Op::Softmax:
      case Op::LogSoftmax:
        return softmax(n, static_cast<float*>(out));
      case Op::Input:
        return;
    }
  }

  void unary(const Node& n, void* out) {
    const int64_t cnt = n.numel;
    if (n.dtype == LT_DTYPE_BOOL) {
      const uint8_t* a = in<uint8_t>(n, 0);
      uint8_t* o = static_cast<uint8_t*>(out);
      for (int64_t i = 0; i < cnt; ++i) o[i] = a[i] ? 0 : 1;
      return;
    }
    if (n.dtype == LT_DTYPE_I32) {
      const int32_t* a = in<int32_t>(n, 0);
      int32_t* o = static_cast<int32_t*>(out);
      for (int64_t i = 0; i < cnt; ++i) {
        int32_t x = a[i];
        switch (n.op) {
          case Op::Neg:
            o[i] = wrap(-int64_t(x));
            break;
          case Op::Abs:
            o[i] = x < 0 ? wrap(-int64_t(x)) : x;
            break;
          default:
            o[i] = x > 0 ? x : 0;
            break;  // relu
        }
      }
      return;
    }
    if (n.dtype == LT_DTYPE_I64) {  // neg / abs, wrapping (INT64_MIN stays INT64_MIN)
      const int64_t* a = in<int64_t>(n, 0);
      int64_t* o = static_cast<int64_t*>(out);
      for (int64_t i = 0; i < cnt; ++i) {
        const uint64_t neg = 0 - uint64_t(a[i]);
        o[i] = n.op == Op::Abs && a[i] >= 0 ? a[i] : int64_t(neg);
      }
      return;
    }
    const float* a = in<float>(n, 0);
    float* o = static_cast<float*>(out);
    auto map = [&](auto f) {
      for (int64_t i = 0; i < cnt; ++i) o[i] = f(a[i]);
    };
    switch (n.op) {
      case Op::Neg:
        return map([](float x) { return -x; });
      case Op::Abs:
        return map([](float x) { return std::fabs(x); });
      case Op::Relu:
        return map([](float x) { return std::isnan(x) ? x : (x > 0.f ? x : 0.f); });
      case Op::Exp:
        return map([](float x) { return std::exp(x); });
      case Op::Log:
        return map([](float x) { return std::log(x); });
      case Op::Sqrt:
        return map([](float x) { return std::sqrt(x); });
      case Op::Rsqrt:
        return map([](float x) { return 1.f / std::sqrt(x); });
      case Op::Tanh:
        return map([](float x) { return std::tanh(x); });
      case Op::Sigmoid:
        return map([](float x) { return 1.f / (1.f + std::exp(-x)); });
      case Op::Gelu:
        return map([](float x) {
          const float c = 0.7978845608028654f;  // sqrt(2/pi)
          return 0.5f * x * (1.f + std::tanh(c * (x + 0.044715f * x * x * x)));
        });
      case Op::Sin:
        return map([](float x) { return std::sin(x); });
      case Op::Cos:
        return map([](float x) { return std::cos(x); });
      default:
        return map([](float x) { return std::floor(x); });
    }
  }

  template <typename T, typename R, typename F>
  void binary_map(const Node& n, void* out, F f) {
    const Node &na = opnd(n, 0), &nb = opnd(n, 1);
    const T* a = in<T>(n, 0);
    const T* b = in<T>(n, 1);
    R* o = static_cast<R*>(out);
    walk<3>(
        n.shape,
        {broadcast_strides(na.shape, n.shape), broadcast_strides(nb.shape, n.shape),
         contiguous(n.shape)},
        {0, 0, 0},
        [&](const std::array<int64_t, 3>& base, const std::array<int64_t, 3>& inner, int64_t len) {
          const T* pa = a + base[0];
          const T* pb = b + base[1];
          R* po = o + base[2];
          const int64_t sa = inner[0], sb = inner[1];
          if (sa == 1 && sb == 1) {
            for (int64_t i = 0; i < len; ++i) po[i] = f(pa[i], pb[i]);
          } else {
            for (int64_t i = 0; i < len; ++i) po[i] = f(pa[i * sa], pb[i * sb]);
          }
        });
  }

  template <typename T>
  bool compare(const Node& n, void* out) {
    switch (n.op) {
      case Op::Eq:
        binary_map<T, uint8_t>(n, out, [](T x, T y) -> uint8_t { return x == y; });
        return true;
      case Op::Ne:
        binary_map<T, uint8_t>(n, out, [](T x, T y) -> uint8_t { return x != y; });
        return true;
      case Op::Lt:
        binary_map<T, uint8_t>(n, out, [](T x, T y) -> uint8_t { return x < y; });
        return true;
      case Op::Le:
        binary_map<T, uint8_t>(n, out, [](T x, T y) -> uint8_t { return x <= y; });
        return true;
      case Op::Gt:
        binary_map<T, uint8_t>(n, out, [](T x, T y) -> uint8_t { return x > y; });
        return true;
      case Op::Ge:
        binary_map<T, uint8_t>(n, out, [](T x, T y) -> uint8_t { return x >= y; });
        return true;
      default:
        return false;
    }
  }

  void binary(const Node& n, void* out) {
    const lt_dtype dt = opnd(n, 0).dtype;
    if (dt == LT_DTYPE_F32) {
      if (compare<float>(n, out)) return;
      switch (n.op) {
        case Op::Add:
          return binary_map<float, float>(n, out, [](float x, float y) { return x + y; });
        case Op::Sub:
          return binary_map<float, float>(n, out, [](float x, float y) { return x - y; });
        case Op::Mul:
          return binary_map<float, float>(n, out, [](float x, float y) { return x * y; });
        case Op::Div:
          return binary_map<float, float>(n, out, [](float x, float y) { return x / y; });
        case Op::Pow:
          return binary_map<float, float>(n, out, [](float x, float y) { return std::pow(x, y); });
        case Op::Maximum:
          return binary_map<float, float>(n, out, fmax_nan<float>);
        default:
          return binary_map<float, float>(n, out, fmin_nan<float>);
      }
    }
    if (dt == LT_DTYPE_I32) {
      if (compare<int32_t>(n, out)) return;
      using I = int32_t;
      switch (n.op) {
        case Op::Add:
          return binary_map<I, I>(n, out, [](I x, I y) { return wrap(int64_t(x) + y); });
        case Op::Sub:
          return binary_map<I, I>(n, out, [](I x, I y) { return wrap(int64_t(x) - y); });
        case Op::Mul:
          return binary_map<I, I>(n, out, [](I x, I y) { return wrap(int64_t(x) * y); });
        case Op::Div:
          return binary_map<I, I>(n, out, [](I x, I y) -> I {
            if (y == 0) return 0;
            if (y == -1) return wrap(-int64_t(x));  // INT_MIN / -1 = INT_MIN
            return x / y;
          });
        case Op::Maximum:
          return binary_map<I, I>(n, out, fmax_nan<I>);
        default:
          return binary_map<I, I>(n, out, fmin_nan<I>);
      }
    }
    if (dt == LT_DTYPE_I64) {  // s64 emulation: compares and wrapping add/sub/mul/max/min
      if (compare<int64_t>(n, out)) return;
      using L = int64_t;
      using U = uint64_t;
      switch (n.op) {
        case Op::Add:
          return binary_map<L, L>(n, out, [](L x, L y) { return L(U(x) + U(y)); });
        case Op::Sub:
          return binary_map<L, L>(n, out, [](L x, L y) { return L(U(x) - U(y)); });
        case Op::Mul:
          return binary_map<L, L>(n, out, [](L x, L y) { return L(U(x) * U(y)); });
        case Op::Maximum:
          return binary_map<L, L>(n, out, fmax_nan<L>);
        default:
          return binary_map<L, L>(n, out, fmin_nan<L>);
      }
    }
    if (compare<uint8_t>(n, out)) return;
    if (n.op == Op::And) {
      binary_map<uint8_t, uint8_t>(n, out, [](uint8_t x, uint8_t y) -> uint8_t { return x && y; });
    } else {
      binary_map<uint8_t, uint8_t>(n, out, [](uint8_t x, uint8_t y) -> uint8_t { return x || y; });
    }
  }

  void where(const Node& n, void* out) {
    with_type(n.dtype, [&](auto t) {
      using T = decltype(t);
      const uint8_t* c = in<uint8_t>(n, 0);
      const T* a = in<T>(n, 1);
      const T* b = in<T>(n, 2);
      T* o = static_cast<T*>(out);
      walk<4>(
          n.shape,
          {broadcast_strides(opnd(n, 0).shape, n.shape),
           broadcast_strides(opnd(n, 1).shape, n.shape),
           broadcast_strides(opnd(n, 2).shape, n.shape), contiguous(n.shape)},
          {0, 0, 0, 0},
          [&](const std::array<int64_t, 4>& base, const std::array<int64_t, 4>& s, int64_t len) {
            for (int64_t i = 0; i < len; ++i) {
              o[base[3] + i] =
                  c[base[0] + i * s[0]] ? a[base[1] + i * s[1]] : b[base[2] + i * s[2]];
            }
          });
    });
  }

  void cast(const Node& n, void* out) {
    with_type(opnd(n, 0).dtype, [&](auto s) {
      using S = decltype(s);
      with_type(n.dtype, [&](auto d) {
        using D = decltype(d);
        const S* a = in<S>(n, 0);
        D* o = static_cast<D*>(out);
        for (int64_t i = 0; i < n.numel; ++i) o[i] = convert<D>(a[i]);
      });
    });
  }

  void reduce(const Node& n, void* out) {
    const Node& a = opnd(n, 0);
    Shape kept = a.shape;  // the output shape with keepdims
    for (int64_t ax : n.ints0) kept[size_t(ax)] = 1;
    Shape ostr = contiguous(kept);
    for (int64_t ax : n.ints0) ostr[size_t(ax)] = 0;
    int64_t reduced = 1;
    for (int64_t ax : n.ints0) reduced *= a.shape[size_t(ax)];
    with_type(n.dtype, [&](auto t) {
      using T = decltype(t);
      if constexpr (!std::is_same_v<T, uint8_t>) {
        const T* src = in<T>(n, 0);
        T* o = static_cast<T*>(out);
        auto visit = [&](auto f) {
          walk<2>(a.shape, {contiguous(a.shape), ostr}, {0, 0},
                  [&](const std::array<int64_t, 2>& base, const std::array<int64_t, 2>& s,
                      int64_t len) {
                    for (int64_t i = 0; i < len; ++i) f(src[base[0] + i], base[1] + i * s[1]);
                  });
        };
        if (n.op == Op::Sum || n.op == Op::Mean) {
          if constexpr (std::is_same_v<T, float>) {
            std::vector<double> acc(size_t(n.numel), 0.0);
            visit([&](float v, int64_t j) { acc[size_t(j)] += v; });
            double div = n.op == Op::Mean ? double(reduced) : 1.0;
            for (int64_t j = 0; j < n.numel; ++j) o[j] = float(acc[size_t(j)] / div);
          } else {
            using U = std::make_unsigned_t<T>;  // integer sums wrap
            std::vector<U> acc(size_t(n.numel), U(0));
            visit([&](T v, int64_t j) { acc[size_t(j)] += U(v); });
            for (int64_t j = 0; j < n.numel; ++j) o[j] = T(acc[size_t(j)]);
          }
          return;
        }
        const bool is_max = n.op == Op::Max;
        T init = is_max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
        if constexpr (std::is_same_v<T, float>) {
          init = is_max ? -std::numeric_limits<float>::infinity()
                        : std::numeric_limits<float>::infinity();
        }
        for (int64_t j = 0; j < n.numel; ++j) o[j] = init;
        if (is_max) {
          visit([&](T v, int64_t j) { o[j] = fmax_nan(o[j], v); });
        } else {
          visit([&](T v, int64_t j) { o[j] = fmin_nan(o[j], v); });
        }
      }
    });
  }

  // Index of the first maximum along the axis; the first NaN counts as the maximum.
  void argmax(const Node& n, int64_t* out) {
    const Node& a = opnd(n, 0);
    const size_t ax = size_t(n.ints0[0]);
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < ax; ++d) outer *= a.shape[d];
    for (size_t d = ax + 1; d < a.shape.size(); ++d) inner *= a.shape[d];
    const int64_t dim = a.shape[ax];
    with_type(a.dtype, [&](auto t) {
      using T = decltype(t);
      const T* src = in<T>(n, 0);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const T* p = src + o * dim * inner + i;
          T best = p[0];
          int64_t arg = 0;
          for (int64_t d = 1; d < dim && best == best; ++d) {
            const T v = p[d * inner];
            if (v != v || v > best) {
              best = v;
              arg = d;
            }
          }
          out[o * inner + i] = arg;
        }
      }
    });
  }

  template <typename T>
  void copy_walk(const Shape& shape, const Shape& src_str, int64_t src0, const Shape& dst_str,
                 int64_t dst0, const T* src, T* dst) {
    walk<2>(shape, {src_str, dst_str}, {src0, dst0},
            [&](const std::array<int64_t, 2>& base, const std::array<int64_t, 2>& s, int64_t len) {
              for (int64_t i = 0; i < len; ++i) dst[base[1] + i * s[1]] = src[base[0] + i * s[0]];
            });
  }

  template <typename T>
  void layout(const Node& n, void* out) {
    T* o = static_cast<T*>(out);
    const Shape ocon = contiguous(n.shape);
    const Node& a = opnd(n, 0);
    const Shape acon = contiguous(a.shape);
    switch (n.op) {
      case Op::Permute: {
        Shape st(n.shape.size());
        for (size_t d = 0; d < st.size(); ++d) st[d] = acon[size_t(n.ints0[d])];
        return copy_walk<T>(n.shape, st, 0, ocon, 0, in<T>(n, 0), o);
      }
      case Op::BroadcastTo:
        return copy_walk<T>(n.shape, broadcast_strides(a.shape, n.shape), 0, ocon, 0, in<T>(n, 0),
                            o);
      case Op::Slice: {
        Shape st(n.shape.size());
        int64_t start = 0;
        for (size_t d = 0; d < st.size(); ++d) {
          st[d] = acon[d] * n.ints1[d];
          start += n.ints0[d] * acon[d];
        }
        return copy_walk<T>(n.shape, st, start, ocon, 0, in<T>(n, 0), o);
      }
      case Op::Concat: {
        int64_t at = 0;
        const size_t ax = size_t(n.i);
        for (size_t k = 0; k < n.operands.size(); ++k) {
          const Node& part = opnd(n, k);
          copy_walk<T>(part.shape, contiguous(part.shape), 0, ocon, at * ocon[ax], in<T>(n, k), o);
          at += part.shape[ax];
        }
        return;
      }
      default: {  // pad
        T fill{};
        with_type(n.dtype, [&](auto t) {
          auto v = convert<decltype(t)>(n.f0);
          if constexpr (sizeof v == sizeof(T)) std::memcpy(&fill, &v, sizeof fill);
        });
        for (int64_t i = 0; i < n.numel; ++i) o[i] = fill;
        int64_t start = 0;
        for (size_t d = 0; d < n.shape.size(); ++d) start += n.ints0[d] * ocon[d];
        return copy_walk<T>(a.shape, acon, 0, ocon, start, in<T>(n, 0), o);
      }
    }
  }

  void gather(const Node& n, void* out) {
    const Node& a = opnd(n, 0);
    const size_t ax = size_t(n.i);
    const size_t es = lt_dtype_size(n.dtype);
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < ax; ++d) outer *= a.shape[d];
    for (size_t d = ax + 1; d < a.shape.size(); ++d) inner *= a.shape[d];
    const int64_t dim = a.shape[ax], nidx = opnd(n, 1).numel;
    const bool idx64 = opnd(n, 1).dtype == LT_DTYPE_I64;
    const int32_t* idx32 = in<int32_t>(n, 1);
    const int64_t* idx64p = in<int64_t>(n, 1);
    const auto* src = in<std::byte>(n, 0);
    auto* dst = static_cast<std::byte*>(out);
    const size_t row = size_t(inner) * es;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < nidx; ++j) {
        const int64_t raw = idx64 ? idx64p[j] : int64_t(idx32[j]);
        int64_t v = std::min<int64_t>(std::max<int64_t>(raw, 0), dim - 1);
        std::memcpy(dst + size_t(o * nidx + j) * row, src + size_t(o * dim + v) * row, row);
      }
    }
  }

  // out = a; out[.., idx[j], ..] += updates[.., j, ..]; out-of-range indices are dropped and
  // repeats accumulate in index order (i32 sums wrap).
  template <typename T>
  void scatter_add(const Node& n, void* out) {
    const Node& a = opnd(n, 0);
    const size_t ax = size_t(n.i);
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < ax; ++d) outer *= a.shape[d];
    for (size_t d = ax + 1; d < a.shape.size(); ++d) inner *= a.shape[d];
    const int64_t dim = a.shape[ax], nidx = opnd(n, 1).numel;
    const bool idx64 = opnd(n, 1).dtype == LT_DTYPE_I64;
    const int32_t* idx32 = in<int32_t>(n, 1);
    const int64_t* idx64p = in<int64_t>(n, 1);
    const T* upd = in<T>(n, 2);
    T* o = static_cast<T*>(out);
    if (n.nbytes) std::memmove(o, in<T>(n, 0), n.nbytes);
    for (int64_t q = 0; q < outer; ++q) {
      for (int64_t j = 0; j < nidx; ++j) {
        const int64_t v = idx64 ? idx64p[j] : int64_t(idx32[j]);
        if (v < 0 || v >= dim) continue;
        T* dst = o + (q * dim + v) * inner;
        const T* src = upd + (q * nidx + j) * inner;
        for (int64_t i = 0; i < inner; ++i) {
          if constexpr (std::is_same_v<T, int32_t>) {
            dst[i] = int32_t(uint32_t(dst[i]) + uint32_t(src[i]));
          } else {
            dst[i] += src[i];
          }
        }
      }
    }
  }

  void conv2d(const Node& n, float* out) {
    const Node &xn = opnd(n, 0), &wn = opnd(n, 1);
    const float* x = in<float>(n, 0);
    const float* w = in<float>(n, 1);
    const int64_t N = xn.shape[0], C = xn.shape[1], H = xn.shape[2], W = xn.shape[3];
    const int64_t O = wn.shape[0], KH = wn.shape[2], KW = wn.shape[3], G = n.i;
    const int64_t OH = n.shape[2], OW = n.shape[3], Cg = C / G, Og = O / G;
    const int64_t sh = n.ints0[0], sw = n.ints0[1], ph = n.ints1[0], pw = n.ints1[1];
    const int64_t dh = n.ints2[0], dw = n.ints2[1];
    const int64_t K = Cg * KH * KW, P = OH * OW;
    // im2col (the vector unit's job on a TPU), then one MXU matmul per image and group.
    std::vector<float> cols(size_t(K * P));
    for (int64_t b = 0; b < N; ++b) {
      for (int64_t g = 0; g < G; ++g) {
        for (int64_t c = 0; c < Cg; ++c) {
          const float* xc = x + ((b * C) + g * Cg + c) * H * W;
          for (int64_t kh = 0; kh < KH; ++kh) {
            for (int64_t kw = 0; kw < KW; ++kw) {
              float* row = cols.data() + ((c * KH + kh) * KW + kw) * P;
              for (int64_t oh = 0; oh < OH; ++oh) {
                const int64_t ih = oh * sh - ph + kh * dh;
                for (int64_t ow = 0; ow < OW; ++ow) {
                  const int64_t iw = ow * sw - pw + kw * dw;
                  row[oh * OW + ow] =
                      (ih >= 0 && ih < H && iw >= 0 && iw < W) ? xc[ih * W + iw] : 0.f;
                }
              }
            }
          }
        }
        mxu_matmul(w + g * Og * K, cols.data(), out + (b * O + g * Og) * P, Og, K, P);
      }
    }
    if (n.operands.size() == 3) {
      const float* bias = in<float>(n, 2);
      for (int64_t b = 0; b < N; ++b) {
        for (int64_t o = 0; o < O; ++o) {
          float* plane = out + (b * O + o) * P;
          for (int64_t i = 0; i < P; ++i) plane[i] += bias[o];
        }
      }
    }
  }

  void pool(const Node& n, float* out) {
    const Node& xn = opnd(n, 0);
    const float* x = in<float>(n, 0);
    const int64_t NC = xn.shape[0] * xn.shape[1], H = xn.shape[2], W = xn.shape[3];
    const int64_t OH = n.shape[2], OW = n.shape[3];
    const int64_t KH = n.ints0[0], KW = n.ints0[1], sh = n.ints1[0], sw = n.ints1[1];
    const int64_t ph = n.ints2[0], pw = n.ints2[1];
    const bool is_max = n.op == Op::MaxPool2d;
    for (int64_t p = 0; p < NC; ++p) {
      const float* xp = x + p * H * W;
      for (int64_t oh = 0; oh < OH; ++oh) {
        for (int64_t ow = 0; ow < OW; ++ow) {
          float acc = is_max ? -std::numeric_limits<float>::infinity() : 0.f;
          for (int64_t kh = 0; kh < KH; ++kh) {
            const int64_t ih = oh * sh - ph + kh;
            if (ih < 0 || ih >= H) continue;
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t iw = ow * sw - pw + kw;
              if (iw < 0 || iw >= W) continue;
              const float v = xp[ih * W + iw];
              acc = is_max ? fmax_nan(acc, v) : acc + v;
            }
          }
          out[(p * OH + oh) * OW + ow] = is_max ? acc : acc / float(KH * KW);
        }
      }
    }
  }

  void softmax(const Node& n, float* out) {
    const float* a = in<float>(n, 0);
    const size_t ax = size_t(n.i);
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < ax; ++d) outer *= n.shape[d];
    for (size_t d = ax + 1; d < n.shape.size(); ++d) inner *= n.shape[d];
    const int64_t len = n.shape[ax];
    const bool log_out = n.op == Op::LogSoftmax;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const float* src = a + o * len * inner + i;
        float* dst = out + o * len * inner + i;
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < len; ++j) m = fmax_nan(m, src[j * inner]);
        float sum = 0.f;
        for (int64_t j = 0; j < len; ++j) sum += std::exp(src[j * inner] - m);
        if (log_out) {
          const float ls = std::log(sum);
          for (int64_t j = 0; j < len; ++j) dst[j * inner] = src[j * inner] - m - ls;
        } else {
          for (int64_t j = 0; j < len; ++j) dst[j * inner] = std::exp(src[j * inner] - m) / sum;
        }
      }
    }
  }

  const Program& p_;
  const void* const* inputs_;
  void* const* outputs_;
  std::vector<void*> ptr_;
  std::vector<std::unique_ptr<std::byte[]>> owned_;
};

}  // namespace

void execute_program(const Program& program, const void* const* inputs, void* const* outputs) {
  Runner(program, inputs, outputs).run();
}

}  // namespace lt::tpu
