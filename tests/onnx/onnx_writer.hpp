// onnx_writer.hpp — a small writer of the ONNX protobuf wire format for the tests and the fuzz
// seeds: models are built field by field here (field numbers from onnx.proto), so the tests
// do not depend on the protobuf classes that parse them (and can write malformed bytes too).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace lt::onnx_test {

inline void varint(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  s += static_cast<char>(v);
}
inline void tag(std::string& s, int field, int wt) {
  varint(s, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wt));
}
inline void vint(std::string& s, int field, int64_t v) {
  tag(s, field, 0);
  varint(s, static_cast<uint64_t>(v));
}
inline void bytes(std::string& s, int field, const std::string& b) {
  tag(s, field, 2);
  varint(s, b.size());
  s += b;
}
inline void f32(std::string& s, int field, float f) {
  tag(s, field, 5);
  char b[4];
  std::memcpy(b, &f, 4);
  s.append(b, 4);
}

// TensorProto with float raw data (type 1) or int64 raw data (type 7).
inline std::string tensor_f32(const std::string& name, const std::vector<int64_t>& dims,
                              const std::vector<float>& v) {
  std::string t;
  for (int64_t d : dims) vint(t, 1, d);
  vint(t, 2, 1);
  bytes(t, 8, name);
  bytes(t, 9, std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  return t;
}
inline std::string tensor_i64(const std::string& name, const std::vector<int64_t>& dims,
                              const std::vector<int64_t>& v) {
  std::string t;
  for (int64_t d : dims) vint(t, 1, d);
  vint(t, 2, 7);
  bytes(t, 8, name);
  bytes(t, 9, std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8));
  return t;
}
// An initializer whose data lives in `location` (relative to the model) at offset/length.
inline std::string tensor_external(const std::string& name, const std::vector<int64_t>& dims,
                                   const std::string& location, int64_t offset, int64_t length) {
  std::string t;
  for (int64_t d : dims) vint(t, 1, d);
  vint(t, 2, 1);
  bytes(t, 8, name);
  auto entry = [&](const std::string& k, const std::string& v) {
    std::string e;
    bytes(e, 1, k);
    bytes(e, 2, v);
    bytes(t, 13, e);
  };
  entry("location", location);
  entry("offset", std::to_string(offset));
  entry("length", std::to_string(length));
  vint(t, 14, 1);
  return t;
}

// Dims: a number >= 0, or a symbolic name.
struct Dim {
  Dim(int64_t v) : value(v) {}
  Dim(const char* p) : param(p) {}
  int64_t value = -1;
  std::string param;
};
inline std::string value_info(const std::string& name, int elem_type,
                              const std::vector<Dim>& dims) {
  std::string shape;
  for (const Dim& d : dims) {
    std::string dim;
    if (d.param.empty())
      vint(dim, 1, d.value);
    else
      bytes(dim, 2, d.param);
    bytes(shape, 1, dim);
  }
  std::string tt;
  vint(tt, 1, elem_type);
  bytes(tt, 2, shape);
  std::string type;
  bytes(type, 1, tt);
  std::string v;
  bytes(v, 1, name);
  bytes(v, 2, type);
  return v;
}
inline std::string sequence_info(const std::string& name) {
  std::string seq, type, v;
  bytes(type, 4, seq);
  bytes(v, 1, name);
  bytes(v, 2, type);
  return v;
}

struct Attr {
  std::string encoded;
  static Attr Int(const std::string& name, int64_t i) {
    Attr a;
    bytes(a.encoded, 1, name);
    vint(a.encoded, 3, i);
    vint(a.encoded, 20, 2);
    return a;
  }
  static Attr Float(const std::string& name, float f) {
    Attr a;
    bytes(a.encoded, 1, name);
    f32(a.encoded, 2, f);
    vint(a.encoded, 20, 1);
    return a;
  }
  static Attr Ints(const std::string& name, const std::vector<int64_t>& v) {
    Attr a;
    bytes(a.encoded, 1, name);
    for (int64_t i : v) vint(a.encoded, 8, i);
    vint(a.encoded, 20, 7);
    return a;
  }
};

inline std::string node(const std::string& op, const std::vector<std::string>& in,
                        const std::vector<std::string>& out, const std::string& name = "",
                        const std::vector<Attr>& attrs = {}) {
  std::string n;
  for (auto& i : in) bytes(n, 1, i);
  for (auto& o : out) bytes(n, 2, o);
  if (!name.empty()) bytes(n, 3, name);
  bytes(n, 4, op);
  for (auto& a : attrs) bytes(n, 5, a.encoded);
  return n;
}

struct Graph {
  std::vector<std::string> nodes, initializers, inputs, outputs;
  int64_t opset = 13;
  std::string encode() const {
    std::string g;
    for (auto& n : nodes) bytes(g, 1, n);
    bytes(g, 2, "test_graph");
    for (auto& t : initializers) bytes(g, 5, t);
    for (auto& i : inputs) bytes(g, 11, i);
    for (auto& o : outputs) bytes(g, 12, o);
    std::string m;
    vint(m, 1, 8);
    bytes(m, 2, "lazytensor-tests");
    bytes(m, 7, g);
    std::string op;
    bytes(op, 1, "");
    vint(op, 2, opset);
    bytes(m, 8, op);
    return m;
  }
};

inline void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

// A 2-layer MLP y = relu(x W1 + b1) W2 + b2 with a symbolic batch axis "N".
inline Graph mlp(int64_t in, int64_t hidden, int64_t out, const std::vector<float>& w1,
                 const std::vector<float>& b1, const std::vector<float>& w2,
                 const std::vector<float>& b2) {
  Graph g;
  g.nodes = {node("MatMul", {"x", "W1"}, {"h0"}, "fc1"), node("Add", {"h0", "B1"}, {"h1"}, "bias1"),
             node("Relu", {"h1"}, {"h2"}, "relu"), node("Gemm", {"h2", "W2", "B2"}, {"y"}, "fc2")};
  g.initializers = {tensor_f32("W1", {in, hidden}, w1), tensor_f32("B1", {hidden}, b1),
                    tensor_f32("W2", {hidden, out}, w2), tensor_f32("B2", {out}, b2)};
  g.inputs = {value_info("x", 1, {"N", in})};
  g.outputs = {value_info("y", 1, {"N", out})};
  return g;
}

}  // namespace lt::onnx_test
