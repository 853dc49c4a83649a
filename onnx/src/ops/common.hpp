// ops/common.hpp — helpers shared by the ONNX op families (ops/*.cpp) and their add_*_ops().
#ifndef LAZYTENSOR_ONNX_OPS_COMMON_HPP
#define LAZYTENSOR_ONNX_OPS_COMMON_HPP

#include "../importer.hpp"

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace lt::onnx::detail {

using Vals = std::vector<Value>;

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

bool is_float(DType d);
bool is_int(DType d);
// Saturates at 2^62 (a fuzzed shape must not overflow).
int64_t numel_of(const std::vector<int64_t>& s);
int64_t norm_axis(Ctx& c, int64_t a, int64_t r);
std::vector<int64_t> shape_of(Ctx& c, Value& v);
int32_t ot_of_dtype(DType d);
Vals one(Ctx& c, Tensor t, int32_t ot);
bool all_host(const Vals& in);
// Row-major strides.
std::vector<int64_t> strides_of(const std::vector<int64_t>& s);
std::vector<int64_t> bcast_shape(Ctx& c, std::vector<int64_t> a, std::vector<int64_t> b);
// Host broadcast read: element `i` of out shape `os` from value with shape `s`.
double bread(const HostVals& h, const std::vector<int64_t>& os, int64_t i);
template <class F>
Value host_binary(Ctx& c, Value& a, Value& b, int32_t ot, F f) {
  auto os = bcast_shape(c, a.h->shape, b.h->shape);
  int64_t n = numel_of(os);
  if (n > (int64_t(1) << 20)) c.error("a shape computation of " + std::to_string(n) + " elements");
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = f(bread(*a.h, os, i), bread(*b.h, os, i));
  return c.from_host(os, out, ot, true);
}

// A fuzzed or malformed model must not index past a shape: rank checks before shape reads.
void need_rank(Ctx& c, const Tensor& t, size_t lo, size_t hi, const char* what);
// Index and weight tables built on the host (from shapes only) stay small.
void check_table(Ctx& c, int64_t n);
Tensor cast_to(const Tensor& t, DType d);
Tensor full_like(Ctx& c, const std::vector<int64_t>& shape, double v, DType d);
Tensor sc(Ctx& c, const Tensor& like, double v);
Tensor round_even(Ctx& c, Tensor x);
Tensor flip(const Tensor& x, int64_t axis);
Tensor slice1(const Tensor& x, int64_t axis, int64_t start, int64_t stop, int64_t step = 1);
// Moves `axis` to the end.
std::vector<int64_t> perm_to_last(int64_t axis, int64_t r);
std::vector<int64_t> inverse_perm(const std::vector<int64_t>& p);
// Indices along an axis with negatives wrapped: where(i < 0, i + dim, i).
Tensor wrap_index(Ctx& c, Tensor idx, int64_t dim);
// Flat row-major element index into `shape` from per-element indices along `axis`.
Tensor flat_index(Ctx& c, const std::vector<int64_t>& data_shape, Tensor idx, int64_t axis);
Tensor reduce_op(Ctx& c, const std::string& op, Tensor x, std::vector<int64_t> axes, bool keep);
struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins then ends
};

Window window(Ctx& c, const std::vector<int64_t>& in_spatial, std::vector<int64_t> kernel,
              bool ceil_mode);
// Convolution: 2-D through conv2d; 1-D as 2-D with H = 1; 3-D as a sum of 2-D convolutions
// over the depth taps.
Tensor conv_nd(Ctx& c, Tensor x, Tensor w, Tensor b, const Window& win, int64_t group);
// The shape `s` with a 1 inserted at each of `axes` (Unsqueeze on host values and on tensors).
std::vector<int64_t> unsqueeze_shape(Ctx& c, const std::vector<int64_t>& s,
                                     std::vector<int64_t> axes);
Tensor unsqueeze_t(const Tensor& x, std::vector<int64_t> axes, Ctx& c);
std::vector<int64_t> reshape_target(Ctx& c, const std::vector<int64_t>& in,
                                    std::vector<int64_t> shape, bool allowzero);
// Host gather (np.take) for shape values.
Value host_gather(Ctx& c, Value& d, Value& idx, int64_t axis);
// ONNX Slice bounds to Python-style starts/stops for the core's slice.
Tensor onnx_slice(Ctx& c, const Tensor& x, std::vector<int64_t> starts, std::vector<int64_t> ends,
                  std::vector<int64_t> axes, std::vector<int64_t> steps);

// Each op family registers its translations into the one op table.
void add_elementwise_ops(std::map<std::string, OpEntry>& t);
void add_shape_ops(std::map<std::string, OpEntry>& t);
void add_gather_scatter_ops(std::map<std::string, OpEntry>& t);
void add_layout_ops(std::map<std::string, OpEntry>& t);
void add_reduce_ops(std::map<std::string, OpEntry>& t);
void add_linalg_ops(std::map<std::string, OpEntry>& t);
void add_conv_pool_ops(std::map<std::string, OpEntry>& t);
void add_norm_ops(std::map<std::string, OpEntry>& t);
void add_rnn_ops(std::map<std::string, OpEntry>& t);
void add_sampling_ops(std::map<std::string, OpEntry>& t);
void add_quant_ops(std::map<std::string, OpEntry>& t);
void add_signal_ops(std::map<std::string, OpEntry>& t);

}  // namespace lt::onnx::detail

#endif  // LAZYTENSOR_ONNX_OPS_COMMON_HPP
