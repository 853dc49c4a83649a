// kernels.h — internal contract between host::prepare and the op kernels: the compile-time view
// of one node handed to its op's prepare function, and the helpers the kernel files share.
// Nodes come validated (lower::validate): prepare functions choose a kernel and encode its
// parameters; they leave fn null for what the host kernels do not compute, never re-check.
#pragma once

#include <cblas.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "lazytensor/host/kernels.hpp"
#include "lazytensor/lower/graph.hpp"

namespace lt::host {

constexpr int64_t kParallelThreshold = 32768;
constexpr int64_t kGrain = 16384;

// A value's static description.
struct ValueDesc {
  lt_dtype dtype = LT_DTYPE_INVALID;
  int rank = 0;
  const int64_t* shape = nullptr;
  int64_t numel = 1;
};

struct PrepareCall {
  OpId op;
  ValueDesc out;
  const ValueDesc* in = nullptr;
  size_t num_in = 0;
  const lower::Attrs& attrs;
  std::vector<int64_t>* params = nullptr;
  KernelFn fn = nullptr;  // left null: the host kernels do not run this node
};
using PrepareFn = void (*)(PrepareCall&);

// Each kernel file puts its ops' prepare functions into the table (indexed by OpId).
void add_elementwise_ops(PrepareFn* table);
void add_creation_ops(PrepareFn* table);
void add_reduce_ops(PrepareFn* table);
void add_layout_ops(PrepareFn* table);
void add_linalg_ops(PrepareFn* table);

// f32 convolution through oneDNN (conv_onednn.cpp). kForward: a = x, b = w, out = y (plus an
// optional bias); kData: a = dy, b = w, out = dx; kWeights: a = x, b = dy, out = dw. All
// dense NCHW / OIHW. onednn_conv returns false (and writes nothing) when oneDNN has no
// implementation for the geometry; onednn_conv_available creates and caches the primitives
// (prepare time) and says whether it has one.
enum class ConvPass : int64_t { kForward, kData, kWeights };
bool onednn_conv_available(ConvPass pass, const ConvGeom& g, bool bias);
bool onednn_conv(ConvPass pass, const ConvGeom& g, const float* a, const float* b,
                 const float* bias, float* out);

// One contiguous f32 softmax row (`out` may be `in`) with the softmax kernel's semantics: the
// vector row where it applies, the scalar loop for a row holding NaN or +inf or all -inf
// (reduce.cpp). The fused attention kernel runs its score rows through it.
void softmax_contiguous_row(float* out, const float* in, int64_t n);

// Caps OpenBLAS at one thread while alive. The thread count is process-wide: a concurrent
// large BLAS call elsewhere may briefly run single-threaded (slower, never wrong); the
// previous count is restored on exit.
class SerialBlasScope {
 public:
  SerialBlasScope() {
    prev_ = openblas_get_num_threads();
    if (prev_ > 1)
      openblas_set_num_threads(1);
    else
      prev_ = 0;
  }
  ~SerialBlasScope() {
    if (prev_ > 1) openblas_set_num_threads(prev_);
  }
  SerialBlasScope(const SerialBlasScope&) = delete;
  SerialBlasScope& operator=(const SerialBlasScope&) = delete;

 private:
  int prev_ = 0;
};

// Dtypes the kernels compute in (bf16/f16 are storage only: cast and data movement).
inline bool is_float(lt_dtype d) {
  return d == LT_DTYPE_F32 || d == LT_DTYPE_F64;
}
inline bool is_int(lt_dtype d) {
  return d == LT_DTYPE_I32 || d == LT_DTYPE_I64;
}
inline bool is_numeric(lt_dtype d) {
  return is_float(d) || is_int(d);
}
inline bool same_shape(const ValueDesc& a, const ValueDesc& b) {
  return a.rank == b.rank && std::equal(a.shape, a.shape + a.rank, b.shape);
}

// How many operand slots read each node of a graph, and which nodes are graph outputs.
struct Readers {
  explicit Readers(const lt_graph& g) : count(g.num_nodes, 0), output(g.num_nodes, 0) {
    for (size_t i = 0; i < g.num_nodes; ++i)
      for (size_t k = 0; k < g.nodes[i].num_operands; ++k) ++count[g.nodes[i].operands[k]];
    for (size_t k = 0; k < g.num_outputs; ++k) output[g.outputs[k]] = 1;
  }
  // Read once, by one operand slot, and no graph output: its one reader may take it over.
  bool only_one(int32_t v) const { return count[v] == 1 && !output[v]; }

  std::vector<int32_t> count;
  std::vector<char> output;
};

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

// Dense row-major element strides of shape.
inline void dense_strides(const int64_t* shape, int rank, int64_t* strides) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) {
    strides[i] = s;
    s *= shape[i];
  }
}

// Generic strided copy: out (dense, out_shape) <- src viewed with element strides (any sign,
// 0 for broadcast) starting at src. broadcast_to, permute, slice.
void strided_copy(char* out, const int64_t* out_shape, int rank, const char* src,
                  const int64_t* src_strides, size_t elem_size);

// Elementwise span: out[i] = f(in0[i * strides[0]], in1[i * strides[1]], ...), i in [0, n).
// Strides are in elements (0 = broadcast); out is dense.
using SpanFn = void (*)(char* out, const char* const* in, const int64_t* strides, int64_t n,
                        const int64_t* params);
// Runs span over out, broadcasting every input of c (first `num_in` of them) to out's shape.
void elementwise(const KernelCall& c, size_t num_in, SpanFn span);

}  // namespace lt::host

// Picks K<T> for a dtype from a kernel template (T = float, double, int32_t, int64_t, uint8_t
// for bool); the one place dtypes map to C++ types.
#define LT_HOST_PICK_ALL(dtype, K)                                            \
  ((dtype) == LT_DTYPE_F32   ? static_cast<::lt::host::KernelFn>(&K<float>)   \
   : (dtype) == LT_DTYPE_F64 ? static_cast<::lt::host::KernelFn>(&K<double>)  \
   : (dtype) == LT_DTYPE_I32 ? static_cast<::lt::host::KernelFn>(&K<int32_t>) \
   : (dtype) == LT_DTYPE_I64 ? static_cast<::lt::host::KernelFn>(&K<int64_t>) \
                             : static_cast<::lt::host::KernelFn>(&K<uint8_t>))
#define LT_HOST_PICK_NUMERIC(dtype, K)                                        \
  ((dtype) == LT_DTYPE_F32   ? static_cast<::lt::host::KernelFn>(&K<float>)   \
   : (dtype) == LT_DTYPE_F64 ? static_cast<::lt::host::KernelFn>(&K<double>)  \
   : (dtype) == LT_DTYPE_I32 ? static_cast<::lt::host::KernelFn>(&K<int32_t>) \
                             : static_cast<::lt::host::KernelFn>(&K<int64_t>))
#define LT_HOST_PICK_FLOAT(dtype, K)                                      \
  ((dtype) == LT_DTYPE_F32 ? static_cast<::lt::host::KernelFn>(&K<float>) \
                           : static_cast<::lt::host::KernelFn>(&K<double>))
