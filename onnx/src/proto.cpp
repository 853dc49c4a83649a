// proto.cpp — the protobuf wire-format reader of proto.hpp: varints, fixed32/64, length-
// delimited fields and packed repeated scalars, each checked against the bytes left.
#include "proto.hpp"

#include <cstring>
#include <string_view>

namespace lt::onnx::detail {
namespace {

constexpr int kMaxDepth = 32;

class Reader {
 public:
  Reader(const uint8_t* p, size_t n, int depth) : p_(p), end_(p + n), depth_(depth) {
    if (depth > kMaxDepth) throw ParseError("protobuf messages nested deeper than 32 levels");
  }
  bool done() const { return p_ >= end_; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) throw ParseError("truncated varint");
      uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    throw ParseError("varint longer than 10 bytes");
  }
  // Reads a tag; returns the field number, wire type in `wt`.
  uint32_t tag(int& wt) {
    uint64_t t = varint();
    wt = static_cast<int>(t & 7);
    uint64_t field = t >> 3;
    if (field == 0 || field > 0x1fffffff) throw ParseError("invalid field number");
    return static_cast<uint32_t>(field);
  }
  std::string_view bytes() {
    uint64_t n = varint();
    if (n > static_cast<uint64_t>(end_ - p_)) {
      throw ParseError("length field " + std::to_string(n) + " exceeds the " +
                       std::to_string(end_ - p_) + " bytes left");
    }
    std::string_view s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  uint32_t fixed32() {
    if (end_ - p_ < 4) throw ParseError("truncated fixed32");
    uint32_t v;
    std::memcpy(&v, p_, 4);
    p_ += 4;
    return v;
  }
  uint64_t fixed64() {
    if (end_ - p_ < 8) throw ParseError("truncated fixed64");
    uint64_t v;
    std::memcpy(&v, p_, 8);
    p_ += 8;
    return v;
  }
  void skip(int wt) {
    switch (wt) {
      case 0:
        varint();
        break;
      case 1:
        fixed64();
        break;
      case 2:
        bytes();
        break;
      case 5:
        fixed32();
        break;
      default:
        throw ParseError("unsupported wire type " + std::to_string(wt));
    }
  }
  Reader sub() {
    std::string_view s = bytes();
    return Reader(reinterpret_cast<const uint8_t*>(s.data()), s.size(), depth_ + 1);
  }
  int depth() const { return depth_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  int depth_;
};

void expect(int wt, int want, const char* field) {
  if (wt != want) throw ParseError(std::string("field ") + field + " has the wrong wire type");
}

// Repeated integer field: packed (wire type 2) or one varint.
template <class T>
void read_ints(Reader& r, int wt, std::vector<T>& out, const char* field) {
  if (wt == 0) {
    out.push_back(static_cast<T>(r.varint()));
    return;
  }
  expect(wt, 2, field);
  Reader s = r.sub();
  while (!s.done()) out.push_back(static_cast<T>(s.varint()));
}
template <class T, class Bits>
T from_bits(Bits b) {
  T v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}
void read_floats(Reader& r, int wt, std::vector<float>& out, const char* field) {
  if (wt == 5) {
    out.push_back(from_bits<float>(r.fixed32()));
    return;
  }
  expect(wt, 2, field);
  std::string_view s = r.bytes();
  if (s.size() % 4) throw ParseError(std::string("packed ") + field + " not a multiple of 4");
  size_t n = s.size() / 4, base = out.size();
  if (n == 0) return;  // memcpy of nothing may still not take a null pointer
  out.resize(base + n);
  std::memcpy(out.data() + base, s.data(), s.size());
}
void read_doubles(Reader& r, int wt, std::vector<double>& out, const char* field) {
  if (wt == 1) {
    out.push_back(from_bits<double>(r.fixed64()));
    return;
  }
  expect(wt, 2, field);
  std::string_view s = r.bytes();
  if (s.size() % 8) throw ParseError(std::string("packed ") + field + " not a multiple of 8");
  size_t n = s.size() / 8, base = out.size();
  if (n == 0) return;
  out.resize(base + n);
  std::memcpy(out.data() + base, s.data(), s.size());
}
std::string str(Reader& r, int wt, const char* field) {
  expect(wt, 2, field);
  return std::string(r.bytes());
}

TensorP tensor(Reader r) {
  TensorP t;
  while (!r.done()) {
    int wt;
    switch (r.tag(wt)) {
      case 1:
        read_ints(r, wt, t.dims, "TensorProto.dims");
        break;
      case 2:
        expect(wt, 0, "TensorProto.data_type");
        t.data_type = static_cast<int32_t>(r.varint());
        break;
      case 3:
        t.has_segment = true;
        r.skip(wt);
        break;
      case 4:
        read_floats(r, wt, t.float_data, "TensorProto.float_data");
        break;
      case 5:
        read_ints(r, wt, t.int32_data, "TensorProto.int32_data");
        break;
      case 6:
        r.skip(wt);
        ++t.string_count;
        break;
      case 7:
        read_ints(r, wt, t.int64_data, "TensorProto.int64_data");
        break;
      case 8:
        t.name = str(r, wt, "TensorProto.name");
        break;
      case 9:
        t.raw_data = str(r, wt, "TensorProto.raw_data");
        break;
      case 10:
        read_doubles(r, wt, t.double_data, "TensorProto.double_data");
        break;
      case 11:
        read_ints(r, wt, t.uint64_data, "TensorProto.uint64_data");
        break;
      case 13: {
        expect(wt, 2, "TensorProto.external_data");
        Reader e = r.sub();
        std::pair<std::string, std::string> kv;
        while (!e.done()) {
          int w2;
          uint32_t f = e.tag(w2);
          if (f == 1)
            kv.first = str(e, w2, "StringStringEntryProto.key");
          else if (f == 2)
            kv.second = str(e, w2, "StringStringEntryProto.value");
          else
            e.skip(w2);
        }
        t.external_data.push_back(std::move(kv));
        break;
      }
      case 14:
        expect(wt, 0, "TensorProto.data_location");
        t.external = r.varint() == 1;
        break;
      default:
        r.skip(wt);
    }
  }
  return t;
}

AttributeP attribute(Reader r) {
  AttributeP a;
  while (!r.done()) {
    int wt;
    switch (r.tag(wt)) {
      case 1:
        a.name = str(r, wt, "AttributeProto.name");
        break;
      case 2:
        expect(wt, 5, "AttributeProto.f");
        a.f = from_bits<float>(r.fixed32());
        break;
      case 3:
        expect(wt, 0, "AttributeProto.i");
        a.i = static_cast<int64_t>(r.varint());
        break;
      case 4:
        a.s = str(r, wt, "AttributeProto.s");
        break;
      case 5:
        expect(wt, 2, "AttributeProto.t");
        a.t.clear();
        a.t.push_back(tensor(r.sub()));
        break;
      case 6:
      case 11:
        a.has_graph = true;
        r.skip(wt);
        break;
      case 7:
        read_floats(r, wt, a.floats, "AttributeProto.floats");
        break;
      case 8:
        read_ints(r, wt, a.ints, "AttributeProto.ints");
        break;
      case 9:
        a.strings.push_back(str(r, wt, "AttributeProto.strings"));
        break;
      case 20:
        expect(wt, 0, "AttributeProto.type");
        a.type = static_cast<int32_t>(r.varint());
        break;
      case 21:
        a.ref_attr_name = str(r, wt, "AttributeProto.ref_attr_name");
        break;
      default:
        r.skip(wt);
    }
  }
  return a;
}

NodeP node(Reader r) {
  NodeP n;
  while (!r.done()) {
    int wt;
    switch (r.tag(wt)) {
      case 1:
        n.inputs.push_back(str(r, wt, "NodeProto.input"));
        break;
      case 2:
        n.outputs.push_back(str(r, wt, "NodeProto.output"));
        break;
      case 3:
        n.name = str(r, wt, "NodeProto.name");
        break;
      case 4:
        n.op_type = str(r, wt, "NodeProto.op_type");
        break;
      case 5:
        expect(wt, 2, "NodeProto.attribute");
        n.attributes.push_back(attribute(r.sub()));
        break;
      case 7:
        n.domain = str(r, wt, "NodeProto.domain");
        break;
      default:
        r.skip(wt);
    }
  }
  return n;
}

void shape(Reader r, ValueInfoP& v) {
  v.has_shape = true;
  while (!r.done()) {
    int wt;
    if (r.tag(wt) != 1) {
      r.skip(wt);
      continue;
    }
    expect(wt, 2, "TensorShapeProto.dim");
    Reader d = r.sub();
    DimP dim;
    while (!d.done()) {
      int w2;
      uint32_t f = d.tag(w2);
      if (f == 1) {
        expect(w2, 0, "Dimension.dim_value");
        dim.has_value = true;
        dim.value = static_cast<int64_t>(d.varint());
      } else if (f == 2) {
        dim.param = str(d, w2, "Dimension.dim_param");
      } else {
        d.skip(w2);
      }
    }
    v.dims.push_back(std::move(dim));
  }
}

void type(Reader r, ValueInfoP& v) {
  while (!r.done()) {
    int wt;
    uint32_t f = r.tag(wt);
    if (f == 1) {
      expect(wt, 2, "TypeProto.tensor_type");
      v.kind = "tensor";
      Reader t = r.sub();
      while (!t.done()) {
        int w2;
        uint32_t g = t.tag(w2);
        if (g == 1) {
          expect(w2, 0, "TypeProto.Tensor.elem_type");
          v.elem_type = static_cast<int32_t>(t.varint());
        } else if (g == 2) {
          expect(w2, 2, "TypeProto.Tensor.shape");
          shape(t.sub(), v);
        } else {
          t.skip(w2);
        }
      }
    } else if (f == 4 || f == 5 || f == 7 || f == 8 || f == 9) {
      v.kind = f == 4   ? "sequence"
               : f == 5 ? "map"
               : f == 7 ? "opaque"
               : f == 8 ? "sparse_tensor"
                        : "optional";
      r.skip(wt);
    } else {
      r.skip(wt);
    }
  }
}

ValueInfoP value_info(Reader r) {
  ValueInfoP v;
  while (!r.done()) {
    int wt;
    uint32_t f = r.tag(wt);
    if (f == 1) {
      v.name = str(r, wt, "ValueInfoProto.name");
    } else if (f == 2) {
      expect(wt, 2, "ValueInfoProto.type");
      type(r.sub(), v);
    } else {
      r.skip(wt);
    }
  }
  return v;
}

GraphP graph(Reader r) {
  GraphP g;
  while (!r.done()) {
    int wt;
    switch (r.tag(wt)) {
      case 1:
        expect(wt, 2, "GraphProto.node");
        g.nodes.push_back(node(r.sub()));
        break;
      case 2:
        g.name = str(r, wt, "GraphProto.name");
        break;
      case 5:
        expect(wt, 2, "GraphProto.initializer");
        g.initializers.push_back(tensor(r.sub()));
        break;
      case 11:
        expect(wt, 2, "GraphProto.input");
        g.inputs.push_back(value_info(r.sub()));
        break;
      case 12:
        expect(wt, 2, "GraphProto.output");
        g.outputs.push_back(value_info(r.sub()));
        break;
      case 13:
        expect(wt, 2, "GraphProto.value_info");
        g.value_infos.push_back(value_info(r.sub()));
        break;
      case 15:
        ++g.sparse_initializers;
        r.skip(wt);
        break;
      default:
        r.skip(wt);
    }
  }
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
  Reader r(data, size, 0);
  ModelP m;
  while (!r.done()) {
    int wt;
    switch (r.tag(wt)) {
      case 1:
        expect(wt, 0, "ModelProto.ir_version");
        m.ir_version = static_cast<int64_t>(r.varint());
        break;
      case 2:
        m.producer_name = str(r, wt, "ModelProto.producer_name");
        break;
      case 3:
        m.producer_version = str(r, wt, "ModelProto.producer_version");
        break;
      case 7:
        expect(wt, 2, "ModelProto.graph");
        m.graph = graph(r.sub());
        m.has_graph = true;
        break;
      case 8: {
        expect(wt, 2, "ModelProto.opset_import");
        Reader o = r.sub();
        std::pair<std::string, int64_t> op{"", 0};
        while (!o.done()) {
          int w2;
          uint32_t f = o.tag(w2);
          if (f == 1) {
            op.first = str(o, w2, "OperatorSetIdProto.domain");
          } else if (f == 2) {
            expect(w2, 0, "OperatorSetIdProto.version");
            op.second = static_cast<int64_t>(o.varint());
          } else {
            o.skip(w2);
          }
        }
        m.opsets.push_back(op);
        break;
      }
      case 20:
        ++m.training_infos;
        r.skip(wt);
        break;
      case 25:
        ++m.functions;
        r.skip(wt);
        break;
      default:
        r.skip(wt);
    }
  }
  return m;
}

TensorP parse_tensor(const uint8_t* data, size_t size) {
  return tensor(Reader(data, size, 0));
}

}  // namespace lt::onnx::detail
