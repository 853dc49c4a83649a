// proto.hpp — the importer's view of an ONNX model (ModelProto, GraphProto, NodeProto,
// AttributeProto, TensorProto, ValueInfoProto reduced to what it reads). proto.cpp fills these
// from the ONNX project's generated protobuf classes (libonnx-dev), whose parser bounds-checks
// every length; a file protobuf refuses is lt::onnx::detail::ParseError with a message.
#ifndef LAZYTENSOR_ONNX_PROTO_HPP
#define LAZYTENSOR_ONNX_PROTO_HPP

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace lt::onnx::detail {

struct ParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// TensorProto.DataType values.
enum OnnxType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUint32 = 12,
  kUint64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBfloat16 = 16,
};
// The largest message protobuf parses (its sizes are int): model and TensorProto files are
// refused past it before they are read; ONNX keeps larger weights in external-data files.
constexpr uint64_t kMaxProtoBytes = 0x7fffffff;

const char* onnx_type_name(int32_t t);
// Bytes per element of a fixed-size type; 0 for string, undefined and unknown types.
size_t onnx_type_size(int32_t t);

struct TensorP {
  std::string name;
  std::vector<int64_t> dims;
  int32_t data_type = 0;
  std::string raw_data;
  std::vector<float> float_data;
  std::vector<int32_t> int32_data;  // also int8/16, uint8/16, bool, f16/bf16 bits
  std::vector<int64_t> int64_data;
  std::vector<double> double_data;
  std::vector<uint64_t> uint64_data;  // also uint32
  size_t string_count = 0;
  bool external = false;                                           // data_location EXTERNAL
  std::vector<std::pair<std::string, std::string>> external_data;  // location, offset, length
  bool has_segment = false;
};

struct AttributeP {
  enum Type : int32_t {
    kUndef = 0,
    kFloatA = 1,
    kIntA = 2,
    kStringA = 3,
    kTensorA = 4,
    kGraphA = 5,
    kFloatsA = 6,
    kIntsA = 7,
    kStringsA = 8,
    kTensorsA = 9,
    kGraphsA = 10,
    kSparseTensorA = 11,
    kSparseTensorsA = 12,
    kTypeProtoA = 13,
    kTypeProtosA = 14,
  };
  std::string name;
  int32_t type = 0;
  float f = 0;
  int64_t i = 0;
  std::string s;
  std::vector<TensorP> t;  // zero or one
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  bool has_graph = false;     // g or graphs: subgraphs (If, Loop, Scan) are refused
  std::string ref_attr_name;  // function attribute references are refused
};

struct NodeP {
  std::vector<std::string> inputs, outputs;
  std::string name, op_type, domain;
  std::vector<AttributeP> attributes;
};

// A dim: a value (>= 0), a symbolic name, or unknown (neither).
struct DimP {
  bool has_value = false;
  int64_t value = 0;
  std::string param;
};

struct ValueInfoP {
  std::string name;
  // "tensor", "sequence", "map", "optional", "sparse_tensor", "opaque" or "" (no type)
  std::string kind;
  int32_t elem_type = 0;
  bool has_shape = false;
  std::vector<DimP> dims;
};

struct GraphP {
  std::string name;
  std::vector<NodeP> nodes;
  std::vector<TensorP> initializers;
  size_t sparse_initializers = 0;
  std::vector<ValueInfoP> inputs, outputs, value_infos;
};

struct ModelP {
  int64_t ir_version = 0;
  std::vector<std::pair<std::string, int64_t>> opsets;  // domain ("" = ai.onnx), version
  std::string producer_name, producer_version;
  bool has_graph = false;
  GraphP graph;
  size_t functions = 0;
  size_t training_infos = 0;
};

ModelP parse_model(const uint8_t* data, size_t size);
TensorP parse_tensor(const uint8_t* data, size_t size);

}  // namespace lt::onnx::detail

#endif  // LAZYTENSOR_ONNX_PROTO_HPP
