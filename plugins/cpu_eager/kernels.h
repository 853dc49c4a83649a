// kernels.h — the internal contract between the cpu_eager executable and its op kernels:
// how a node is validated and prepared at compile time and how its kernel is called.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "lazytensor/lt_plugin.h"
#include "lt_plugin_support.hpp"

namespace lt::eager {

// Highest tensor rank this backend accepts; fixed-size index arrays in kernels use it.
constexpr int kMaxRank = 16;

// Below this many elements a kernel stays on the calling thread (one thread budget).
constexpr int64_t kParallelThreshold = 32768;
constexpr int64_t kGrain = 16384;

// Thrown inside the plugin only; converted to lt_plugin_error at the ABI boundary, where
// "cpu_eager: " is put before its message.
using Error = plugin_support::StatusError;
[[noreturn]] void fail(lt_status_code code, std::string message);

// A value's static description (dtype and shape), as known at compile time.
struct ValueDesc {
  lt_dtype dtype = LT_DTYPE_INVALID;
  int rank = 0;
  const int64_t* shape = nullptr;  // borrowed from the graph or the executable
  int64_t numel = 1;
};

// A value at execution time: a description plus dense row-major data.
struct TensorArg {
  char* data = nullptr;
  lt_dtype dtype = LT_DTYPE_INVALID;
  int rank = 0;
  const int64_t* shape = nullptr;
  int64_t numel = 1;
};

// Everything a kernel sees. Params are the words its prepare function appended.
struct KernelCall {
  TensorArg out;
  const TensorArg* in = nullptr;
  size_t num_in = 0;
  const int64_t* params = nullptr;
  size_t num_params = 0;
};
using KernelFn = void (*)(const KernelCall&);

// Compile-time view of one node, handed to the op's prepare function. The prepare function
// validates everything a kernel relies on for memory safety (shapes, dtypes, attributes),
// appends the kernel's parameters to `params` and sets `fn`; it throws Error otherwise.
struct PrepareCall {
  std::string_view op;
  ValueDesc out;
  const ValueDesc* in = nullptr;
  size_t num_in = 0;
  const lt_attr* attrs = nullptr;
  size_t num_attrs = 0;
  std::vector<int64_t>* params = nullptr;
  KernelFn fn = nullptr;
};
using PrepareFn = void (*)(PrepareCall&);

struct OpDef {
  const char* name;
  PrepareFn prepare;
};

// Each kernel translation unit contributes its ops; the registry in executable.cpp joins them.
void append_elementwise_ops(std::vector<OpDef>& ops);
void append_reduce_ops(std::vector<OpDef>& ops);
void append_layout_ops(std::vector<OpDef>& ops);
void append_linalg_ops(std::vector<OpDef>& ops);

// ---- helpers shared by the kernel translation units (kernels_common.cpp) ----

std::string shape_str(const int64_t* shape, int rank);
inline std::string shape_str(const ValueDesc& v) {
  return shape_str(v.shape, v.rank);
}
bool is_float(lt_dtype d);
bool is_int(lt_dtype d);
bool is_numeric(lt_dtype d);
bool same_shape(const ValueDesc& a, const ValueDesc& b);

// Operand-count, dtype and attribute checks that throw Error naming the op.
void expect_operands(const PrepareCall& c, size_t lo, size_t hi);
void expect_dtype_in(const PrepareCall& c, lt_dtype d, bool allow_float, bool allow_int,
                     bool allow_bool, const char* what);
const lt_attr* find_attr(const PrepareCall& c, const char* name);
int64_t attr_int(const PrepareCall& c, const char* name, const int64_t* fallback = nullptr);
double attr_float(const PrepareCall& c, const char* name, const double* fallback = nullptr);
std::vector<int64_t> attr_ints(const PrepareCall& c, const char* name, size_t expected_len,
                               const std::vector<int64_t>* fallback = nullptr);

inline void push_double(std::vector<int64_t>& p, double v) {
  int64_t w;
  std::memcpy(&w, &v, sizeof w);
  p.push_back(w);
}
inline double read_double(const int64_t* p) {
  double v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Runs body(begin, end) over [0, n): inline below kParallelThreshold, else TBB chunks of at
// least `grain` items. `work_per_item` scales the threshold for items that are whole rows.
void parallel_for(int64_t n, int64_t work_per_item, void (*body)(void*, int64_t, int64_t),
                  void* ctx);
template <class F>
void parallel_for(int64_t n, int64_t work_per_item, F&& f) {
  using Fn = std::remove_reference_t<F>;
  parallel_for(
      n, work_per_item, [](void* ctx, int64_t b, int64_t e) { (*static_cast<Fn*>(ctx))(b, e); },
      const_cast<void*>(static_cast<const void*>(&f)));
}

// Converts a double to dtype d with cast semantics (saturating, NaN -> 0 for ints) into dst.
void store_double_as(lt_dtype d, double v, void* dst);

// Generic strided copy: out (dense, out_shape) <- src viewed with element strides (any sign,
// 0 for broadcast) starting at src. Used by broadcast_to, permute, slice.
void strided_copy(char* out, const int64_t* out_shape, int rank, const char* src,
                  const int64_t* src_strides, size_t elem_size);

// Dense row-major element strides of shape.
void dense_strides(const int64_t* shape, int rank, int64_t* strides);

}  // namespace lt::eager

namespace lt::eager {

// Picks K<T> for a dtype from a kernel template (T = float, double, int32_t, int64_t, uint8_t
// for bool); the one place dtypes map to C++ types.
#define LT_EAGER_PICK_ALL(dtype, K)                                            \
  ((dtype) == LT_DTYPE_F32   ? static_cast<::lt::eager::KernelFn>(&K<float>)   \
   : (dtype) == LT_DTYPE_F64 ? static_cast<::lt::eager::KernelFn>(&K<double>)  \
   : (dtype) == LT_DTYPE_I32 ? static_cast<::lt::eager::KernelFn>(&K<int32_t>) \
   : (dtype) == LT_DTYPE_I64 ? static_cast<::lt::eager::KernelFn>(&K<int64_t>) \
                             : static_cast<::lt::eager::KernelFn>(&K<uint8_t>))
#define LT_EAGER_PICK_NUMERIC(dtype, K)                                        \
  ((dtype) == LT_DTYPE_F32   ? static_cast<::lt::eager::KernelFn>(&K<float>)   \
   : (dtype) == LT_DTYPE_F64 ? static_cast<::lt::eager::KernelFn>(&K<double>)  \
   : (dtype) == LT_DTYPE_I32 ? static_cast<::lt::eager::KernelFn>(&K<int32_t>) \
                             : static_cast<::lt::eager::KernelFn>(&K<int64_t>))
#define LT_EAGER_PICK_FLOAT(dtype, K)                                      \
  ((dtype) == LT_DTYPE_F32 ? static_cast<::lt::eager::KernelFn>(&K<float>) \
                           : static_cast<::lt::eager::KernelFn>(&K<double>))

// Elementwise span: out[i] = f(in0[i * strides[0]], in1[i * strides[1]], ...), i in [0, n).
// Strides are in elements (0 = broadcast); out is dense.
using SpanFn = void (*)(char* out, const char* const* in, const int64_t* strides, int64_t n,
                        const int64_t* params);

// Runs span over out, broadcasting every input of c (first `num_in` of them) to out's shape.
void elementwise(const KernelCall& c, size_t num_in, SpanFn span);

}  // namespace lt::eager
