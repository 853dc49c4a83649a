// npy.cpp — lt_onnx_read_tensor: a TensorProto .pb file or a NumPy .npy file (version 1-3,
// little-endian, C order) read onto a device, with every length checked against the file.
#include "importer.hpp"
#include "lazytensor/lt_onnx.h"

#include <cstring>

namespace lt::onnx::detail {

namespace {
Tensor read_npy(const Device& dev, const std::string& path, const std::vector<uint8_t>& b,
                int* ot_out) {
  auto bad = [&](const std::string& why) {
    fail(LT_STATUS_IO_ERROR, path + ": not a valid .npy file: " + why);
  };
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0) bad("no magic");
  uint8_t major = b[6];
  size_t hlen, off;
  if (major == 1) {
    hlen = b[8] | (size_t(b[9]) << 8);
    off = 10;
  } else {
    if (b.size() < 12) bad("truncated header");
    hlen = b[8] | (size_t(b[9]) << 8) | (size_t(b[10]) << 16) | (size_t(b[11]) << 24);
    off = 12;
  }
  if (hlen > b.size() - off) bad("header length exceeds the file");
  std::string h(reinterpret_cast<const char*>(b.data() + off), hlen);
  auto field = [&](const std::string& key) {
    size_t p = h.find("'" + key + "'");
    if (p == std::string::npos) bad("no '" + key + "'");
    p = h.find(':', p);
    if (p == std::string::npos) bad("malformed header");
    return p + 1;
  };
  size_t p = field("descr");
  size_t q1 = h.find('\'', p), q2 = q1 == std::string::npos ? q1 : h.find('\'', q1 + 1);
  if (q2 == std::string::npos) bad("malformed descr");
  std::string descr = h.substr(q1 + 1, q2 - q1 - 1);
  p = field("fortran_order");
  if (h.compare(h.find_first_not_of(' ', p), 4, "True") == 0) bad("Fortran order is not supported");
  p = field("shape");
  size_t lp = h.find('(', p), rp = h.find(')', p);
  if (lp == std::string::npos || rp == std::string::npos) bad("malformed shape");
  std::vector<int64_t> shape;
  std::string dims = h.substr(lp + 1, rp - lp - 1);
  size_t i = 0;
  while (i < dims.size()) {
    while (i < dims.size() && (dims[i] == ' ' || dims[i] == ',')) ++i;
    if (i >= dims.size()) break;
    size_t j = i;
    while (j < dims.size() && std::isdigit(static_cast<unsigned char>(dims[j]))) ++j;
    if (j == i || j - i > 12) bad("malformed shape");
    shape.push_back(std::stoll(dims.substr(i, j - i)));
    i = j;
  }
  static const std::pair<const char*, int32_t> types[] = {
      {"<f4", kFloat}, {"<f8", kDouble}, {"<i4", kInt32},  {"<i8", kInt64},
      {"|b1", kBool},  {"|u1", kUint8},  {"|i1", kInt8},   {"<f2", kFloat16},
      {"<i2", kInt16}, {"<u2", kUint16}, {"<u4", kUint32}, {"<u8", kUint64}};
  int32_t ot = 0;
  for (auto& [d, t] : types) {
    if (descr == d) ot = t;
  }
  if (!ot) bad("dtype '" + descr + "' is not supported");
  TensorP t;
  t.data_type = ot;
  t.dims = shape;
  size_t data_off = off + hlen;
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d > 0 && n > (uint64_t(1) << 40) / uint64_t(d)) bad("too many elements");
    n *= uint64_t(d);
  }
  if (n * onnx_type_size(ot) != b.size() - data_off) {
    bad("data has " + std::to_string(b.size() - data_off) + " bytes, shape needs " +
        std::to_string(n * onnx_type_size(ot)));
  }
  t.raw_data.assign(reinterpret_cast<const char*>(b.data() + data_off), b.size() - data_off);
  RawTensor r = decode_tensor(t, ".", path);
  if (ot_out) *ot_out = ot;
  lt_tensor* out = nullptr;
  check(lt_tensor_from_host(dev.get(), carrier_dtype(ot), r.shape.data(), r.shape.size(),
                            r.bytes.data(), r.bytes.size(), &out));
  return Tensor(out);
}
}  // namespace

}  // namespace lt::onnx::detail

using namespace lt::onnx::detail;

extern "C" LT_API lt_error* lt_onnx_read_tensor(lt_device* device, const char* path,
                                                lt_tensor** out, int* onnx_type) {
  if (!device || !path || !out)
    return lt_error_create(LT_STATUS_INVALID_ARGUMENT, "lt_onnx_read_tensor: null argument");
  try {
    std::string p = path;
    bool npy = p.size() >= 4 && p.substr(p.size() - 4) == ".npy";
    std::vector<uint8_t> b = npy ? read_whole_file(p) : read_whole_file(p, kMaxProtoBytes);
    lt::Device dev(device);
    if (npy) {
      *out = read_npy(dev, p, b, onnx_type).release();
      return nullptr;
    }
    TensorP t;
    try {
      t = parse_tensor(b.data(), b.size());
    } catch (const ParseError& e) {
      fail(LT_STATUS_IO_ERROR, p + ": not a valid TensorProto: " + e.what());
    }
    if (t.data_type == 0)
      fail(LT_STATUS_UNSUPPORTED,
           "out of scope: " + p + ": not a tensor (a sequence, optional or map?)");
    size_t slash = p.rfind('/');
    RawTensor r = decode_tensor(t, slash == std::string::npos ? "." : p.substr(0, slash), p);
    if (onnx_type) *onnx_type = r.ot;
    lt_tensor* o = nullptr;
    lt::check(lt_tensor_from_host(device, carrier_dtype(r.ot), r.shape.data(), r.shape.size(),
                                  r.bytes.data(), r.bytes.size(), &o));
    *out = o;
    return nullptr;
  } catch (const ImportError& e) {
    return lt_error_create(e.code, e.what());
  } catch (const lt::Error& e) {
    return lt_error_create(e.code(), e.what());
  } catch (const std::exception& e) {
    return lt_error_create(LT_STATUS_INTERNAL, e.what());
  }
}
