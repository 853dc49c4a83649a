// proto.cpp — parses ONNX files with the ONNX project's own generated protobuf classes
// (Debian's libonnx-dev: onnx::ModelProto, onnx::TensorProto over libprotobuf) and converts
// them into the importer's structs of proto.hpp; no wire format is read by hand here.
#include "proto.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>

#include <climits>

namespace lt::onnx::detail {
namespace {

namespace pb = ::onnx;

// The total-bytes limit is set explicitly to kMaxProtoBytes, so the cap is ours, not a default
// of the protobuf version installed.
constexpr size_t kMaxMessageBytes = kMaxProtoBytes;
static_assert(kMaxProtoBytes <= INT_MAX);

template <class Msg>
void parse(Msg& msg, const uint8_t* data, size_t size, const char* what) {
  if (size > kMaxMessageBytes) {
    throw ParseError(std::string(what) + " of " + std::to_string(size) +
                     " bytes exceeds protobuf's 2 GiB message limit (keep large weights in "
                     "external-data files)");
  }
  google::protobuf::io::CodedInputStream in(data, static_cast<int>(size));
  in.SetTotalBytesLimit(static_cast<int>(kMaxMessageBytes));
  if (!msg.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) {
    throw ParseError("protobuf could not parse it as a " + std::string(what) +
                     " (truncated, a length field exceeds the bytes left, or not protobuf)");
  }
}

template <class T, class Field>
std::vector<T> to_vector(const Field& f) {
  return std::vector<T>(f.begin(), f.end());
}

TensorP tensor(const pb::TensorProto& p) {
  TensorP t;
  t.name = p.name();
  t.dims = to_vector<int64_t>(p.dims());
  t.data_type = p.data_type();
  t.raw_data = p.raw_data();
  t.float_data = to_vector<float>(p.float_data());
  t.int32_data = to_vector<int32_t>(p.int32_data());
  t.int64_data = to_vector<int64_t>(p.int64_data());
  t.double_data = to_vector<double>(p.double_data());
  t.uint64_data = to_vector<uint64_t>(p.uint64_data());
  t.string_count = static_cast<size_t>(p.string_data_size());
  t.external = p.data_location() == pb::TensorProto::EXTERNAL;
  for (const pb::StringStringEntryProto& e : p.external_data())
    t.external_data.emplace_back(e.key(), e.value());
  t.has_segment = p.has_segment();
  return t;
}

AttributeP attribute(const pb::AttributeProto& p) {
  AttributeP a;
  a.name = p.name();
  a.type = p.type();
  a.f = p.f();
  a.i = p.i();
  a.s = p.s();
  if (p.has_t()) a.t.push_back(tensor(p.t()));
  a.floats = to_vector<float>(p.floats());
  a.ints = to_vector<int64_t>(p.ints());
  a.strings = to_vector<std::string>(p.strings());
  a.has_graph = p.has_g() || p.graphs_size() > 0;
  a.ref_attr_name = p.ref_attr_name();
  return a;
}

NodeP node(const pb::NodeProto& p) {
  NodeP n;
  n.inputs = to_vector<std::string>(p.input());
  n.outputs = to_vector<std::string>(p.output());
  n.name = p.name();
  n.op_type = p.op_type();
  n.domain = p.domain();
  for (const pb::AttributeProto& a : p.attribute()) n.attributes.push_back(attribute(a));
  return n;
}

const char* type_kind(const pb::TypeProto& t) {
  switch (t.value_case()) {
    case pb::TypeProto::kTensorType:
      return "tensor";
    case pb::TypeProto::kSequenceType:
      return "sequence";
    case pb::TypeProto::kMapType:
      return "map";
    case pb::TypeProto::kOpaqueType:
      return "opaque";
    case pb::TypeProto::kSparseTensorType:
      return "sparse_tensor";
    case pb::TypeProto::kOptionalType:
      return "optional";
    default:
      return "";
  }
}

ValueInfoP value_info(const pb::ValueInfoProto& p) {
  ValueInfoP v;
  v.name = p.name();
  if (!p.has_type()) return v;
  v.kind = type_kind(p.type());
  if (!p.type().has_tensor_type()) return v;
  const pb::TypeProto::Tensor& t = p.type().tensor_type();
  v.elem_type = t.elem_type();
  v.has_shape = t.has_shape();
  for (const pb::TensorShapeProto::Dimension& d : t.shape().dim()) {
    DimP dim;
    dim.has_value = d.has_dim_value();
    dim.value = d.dim_value();
    dim.param = d.dim_param();
    v.dims.push_back(std::move(dim));
  }
  return v;
}

GraphP graph(const pb::GraphProto& p) {
  GraphP g;
  g.name = p.name();
  for (const pb::NodeProto& n : p.node()) g.nodes.push_back(node(n));
  for (const pb::TensorProto& t : p.initializer()) g.initializers.push_back(tensor(t));
  g.sparse_initializers = static_cast<size_t>(p.sparse_initializer_size());
  for (const pb::ValueInfoProto& v : p.input()) g.inputs.push_back(value_info(v));
  for (const pb::ValueInfoProto& v : p.output()) g.outputs.push_back(value_info(v));
  for (const pb::ValueInfoProto& v : p.value_info()) g.value_infos.push_back(value_info(v));
  return g;
}

}  // namespace

const char* onnx_type_name(int32_t t) {
  static const char* names[] = {"undefined",  "float",   "uint8",  "int8",   "uint16",
                                "int16",      "int32",   "int64",  "string", "bool",
                                "float16",    "double",  "uint32", "uint64", "complex64",
                                "complex128", "bfloat16"};
  if (t >= 0 && t <= 16) return names[t];
  return "unknown";
}

size_t onnx_type_size(int32_t t) {
  switch (t) {
    case kFloat:
    case kInt32:
    case kUint32:
      return 4;
    case kUint8:
    case kInt8:
    case kBool:
      return 1;
    case kUint16:
    case kInt16:
    case kFloat16:
    case kBfloat16:
      return 2;
    case kInt64:
    case kDouble:
    case kUint64:
    case kComplex64:
      return 8;
    case kComplex128:
      return 16;
    default:
      return 0;
  }
}

ModelP parse_model(const uint8_t* data, size_t size) {
  pb::ModelProto p;
  parse(p, data, size, "ModelProto");
  ModelP m;
  m.ir_version = p.ir_version();
  for (const pb::OperatorSetIdProto& o : p.opset_import())
    m.opsets.emplace_back(o.domain(), o.version());
  m.producer_name = p.producer_name();
  m.producer_version = p.producer_version();
  m.has_graph = p.has_graph();
  if (m.has_graph) m.graph = graph(p.graph());
  m.functions = static_cast<size_t>(p.functions_size());
  m.training_infos = static_cast<size_t>(p.training_info_size());
  return m;
}

TensorP parse_tensor(const uint8_t* data, size_t size) {
  pb::TensorProto p;
  parse(p, data, size, "TensorProto");
  return tensor(p);
}

}  // namespace lt::onnx::detail
