// importer.hpp — internals of LazyTensor::onnx shared by the loader (model.cpp) and the op
// translations (ops.cpp): values during a trace, the per-op translation table, tensor decoding.
#ifndef LAZYTENSOR_ONNX_IMPORTER_HPP
#define LAZYTENSOR_ONNX_IMPORTER_HPP

#include "lazytensor/lazytensor.hpp"
#include "proto.hpp"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace lt::onnx::detail {

// An error of the importer: a status code and a message; turned into lt_error at the C API.
struct ImportError : std::runtime_error {
  ImportError(lt_status_code c, const std::string& m) : std::runtime_error(m), code(c) {}
  lt_status_code code;
};
[[noreturn]] void fail(lt_status_code code, const std::string& msg);

// The LazyTensor dtype that carries an ONNX element type; LT_DTYPE_INVALID if none.
DType carrier_dtype(int32_t onnx_type);

// Values known on the host at load: shapes and what is computed from them and from constants.
struct HostVals {
  std::vector<int64_t> shape;
  std::vector<double> v;
};

// One tensor during a trace: a lazy tensor, a host copy (for shape computations), or both.
struct Value {
  bool present = false;
  int32_t ot = 0;  // ONNX element type
  Tensor t;
  std::shared_ptr<const HostVals> h;
  bool shape_class = false;  // computed at load from shapes and constants: fold on the host
};

// A decoded TensorProto: bytes in the carrier dtype's layout.
struct RawTensor {
  int32_t ot = 0;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  int64_t numel() const;
};
// `base_dir` resolves external data; `what` names the tensor in errors.
RawTensor decode_tensor(const TensorP& t, const std::string& base_dir, const std::string& what);
std::vector<double> raw_to_doubles(const RawTensor& r);

// The bytes [offset, offset + length) of a regular file (length -1: to its end), through
// lt::file::RegularFile: opened non-blocking, refused unless it is a regular file, the range
// checked against the file's size and `max_bytes` before anything is allocated. Errors name the
// file (NOT_FOUND when it cannot be opened, IO_ERROR otherwise).
std::vector<uint8_t> read_file_range(const std::string& path, uint64_t offset, int64_t length,
                                     uint64_t max_bytes);
// The whole file, at most `max_bytes` (default 16 GiB).
inline std::vector<uint8_t> read_whole_file(const std::string& path,
                                            uint64_t max_bytes = uint64_t(1) << 34) {
  return read_file_range(path, 0, -1, max_bytes);
}

class Ctx;
using OpFn = std::function<std::vector<Value>(Ctx&, const NodeP&, std::vector<Value>&)>;
struct OpEntry {
  OpFn fn;
  int64_t since = 1;  // oldest ai.onnx opset implemented
};
// Every supported ai.onnx op type.
const std::map<std::string, OpEntry>& op_table();
// Why an op is refused as out of scope ("" when in scope).
std::string out_of_scope_reason(const std::string& domain, const std::string& op_type);

// The trace state of one run.
class Ctx {
 public:
  Device dev;
  int64_t opset = 0;
  std::string base_dir;
  const NodeP* node = nullptr;

  // The lazy tensor of `v` (uploads a host value on first use).
  Tensor T(Value& v);
  // Host values of `v` (a shape input): the host copy, else the device value read back.
  std::vector<int64_t> ints(Value& v);
  std::vector<double> doubles(Value& v);
  Value from_tensor(Tensor t, int32_t ot);
  Value from_host(std::vector<int64_t> shape, std::vector<double> v, int32_t ot, bool shape_class);
  Tensor scalar(double v, DType d) { return Tensor::scalar(dev, v, d); }
  // Attribute access on the current node.
  const AttributeP* attr(const std::string& name) const;
  int64_t attr_i(const std::string& name, int64_t def) const;
  float attr_f(const std::string& name, float def) const;
  std::string attr_s(const std::string& name, const std::string& def) const;
  std::vector<int64_t> attr_ints(const std::string& name) const;
  bool has_attr(const std::string& name) const { return attr(name) != nullptr; }
  [[noreturn]] void error(const std::string& msg) const;
};

}  // namespace lt::onnx::detail

#endif  // LAZYTENSOR_ONNX_IMPORTER_HPP
