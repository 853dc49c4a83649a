// model.cpp — the loader of LazyTensor::onnx: reads files safely, checks the model (opsets,
// types, graph well-formedness), uploads initializers once, traces runs through the op table
// of ops.cpp, and implements the C API of lt_onnx.h (no exception crosses it).
#include "importer.hpp"
#include "lazytensor/lower/element.hpp"
#include "lazytensor/lt_onnx.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>

namespace lt::onnx::detail {

void fail(lt_status_code code, const std::string& msg) {
  throw ImportError(code, msg);
}

DType carrier_dtype(int32_t t) {
  switch (t) {
    case kFloat:
      return LT_DTYPE_F32;
    case kDouble:
      return LT_DTYPE_F64;
    case kInt32:
    case kInt8:
    case kUint8:
    case kInt16:
    case kUint16:
    case kUint32:
      return LT_DTYPE_I32;
    case kInt64:
    case kUint64:
      return LT_DTYPE_I64;
    case kBool:
      return LT_DTYPE_BOOL;
    case kFloat16:
      return LT_DTYPE_F16;
    case kBfloat16:
      return LT_DTYPE_BF16;
    default:
      return LT_DTYPE_INVALID;
  }
}

namespace {

std::string dir_of(const std::string& path) {
  size_t s = path.rfind('/');
  return s == std::string::npos ? "." : path.substr(0, s);
}

// One element of carrier dtype dt at p from an integer value, exact where dt holds it (an i64
// beyond 2^53 keeps its low bits); other dtypes take the value through lower::store_element.
void store_int(DType dt, uint8_t* p, int64_t v) {
  switch (dt) {
    case LT_DTYPE_I32: {
      int32_t x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case LT_DTYPE_I64:
      std::memcpy(p, &v, 8);
      break;
    case LT_DTYPE_BOOL:
      *p = v != 0;
      break;
    default:
      lower::store_element(dt, static_cast<double>(v), p);
  }
}

}  // namespace

int64_t RawTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

RawTensor decode_tensor(const TensorP& t, const std::string& base_dir, const std::string& what) {
  RawTensor r;
  r.ot = t.data_type;
  DType dt = carrier_dtype(t.data_type);
  if (t.data_type == kString)
    fail(LT_STATUS_UNSUPPORTED, "out of scope: " + what + " is a string tensor");
  if (dt == LT_DTYPE_INVALID) {
    fail(LT_STATUS_DTYPE_MISMATCH,
         what + ": element type " + onnx_type_name(t.data_type) + " is not supported");
  }
  if (t.has_segment) fail(LT_STATUS_UNSUPPORTED, what + ": segmented tensors are not supported");
  uint64_t n = 1;
  for (int64_t d : t.dims) {
    if (d < 0) fail(LT_STATUS_SHAPE_MISMATCH, what + ": negative dim " + std::to_string(d));
    if (d > 0 && n > (uint64_t(1) << 40) / static_cast<uint64_t>(d)) {
      fail(LT_STATUS_SHAPE_MISMATCH, what + ": more than 2^40 elements");
    }
    n *= static_cast<uint64_t>(d);
  }
  r.shape = t.dims;
  size_t esize = onnx_type_size(t.data_type);
  std::string external;
  const std::string* raw = &t.raw_data;
  if (t.external) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (auto& [k, v] : t.external_data) {
      try {
        if (k == "location")
          location = v;
        else if (k == "offset")
          offset = std::stoll(v);
        else if (k == "length")
          length = std::stoll(v);
      } catch (const std::exception&) {
        fail(LT_STATUS_IO_ERROR, what + ": external_data " + k + " '" + v + "' is not a number");
      }
    }
    if (location.empty() || location[0] == '/' || location.find("..") != std::string::npos) {
      fail(LT_STATUS_IO_ERROR, what + ": external data location '" + location +
                                   "' must be a relative path inside the model's directory");
    }
    if (offset < 0) fail(LT_STATUS_IO_ERROR, what + ": negative external data offset");
    if (length >= 0 && static_cast<uint64_t>(length) != n * esize) {
      fail(LT_STATUS_IO_ERROR, what + ": external data length " + std::to_string(length) +
                                   " != " + std::to_string(n * esize) + " bytes of its shape");
    }
    std::vector<uint8_t> bytes =
        read_file_range(base_dir + "/" + location, static_cast<uint64_t>(offset),
                        static_cast<int64_t>(n * esize), uint64_t(1) << 34);  // 16 GiB
    external.assign(bytes.begin(), bytes.end());
    raw = &external;
  }
  const size_t cs = lt_dtype_size(dt);
  auto count_check = [&](size_t have) {
    if (have != n) {
      fail(LT_STATUS_SHAPE_MISMATCH, what + ": " + std::to_string(have) + " values for shape " +
                                         lt::detail::shape_string(t.dims) + " (" +
                                         std::to_string(n) + " elements)");
    }
  };
  // The values present are counted against the shape before the shape's bytes are allocated.
  if (!raw->empty() || t.external) {
    if (raw->size() != n * esize) {
      fail(LT_STATUS_SHAPE_MISMATCH, what + ": raw_data has " + std::to_string(raw->size()) +
                                         " bytes, shape " + lt::detail::shape_string(t.dims) +
                                         " of " + onnx_type_name(t.data_type) + " needs " +
                                         std::to_string(n * esize));
    }
  } else {
    switch (t.data_type) {
      case kFloat:
        count_check(t.float_data.size());
        break;
      case kDouble:
        count_check(t.double_data.size());
        break;
      case kInt64:
        count_check(t.int64_data.size());
        break;
      case kUint64:
      case kUint32:
        count_check(t.uint64_data.size());
        break;
      default:
        count_check(t.int32_data.size());
    }
  }
  r.bytes.resize(n * cs);
  auto put = [&](size_t i, double v, int64_t iv, bool is_int) {
    uint8_t* p = r.bytes.data() + i * cs;
    if (is_int)
      store_int(dt, p, iv);
    else
      lower::store_element(dt, v, p);
  };
  if (!raw->empty() || t.external) {
    if (raw->size() != n * esize) {
      fail(LT_STATUS_SHAPE_MISMATCH, what + ": raw_data has " + std::to_string(raw->size()) +
                                         " bytes, shape " + lt::detail::shape_string(t.dims) +
                                         " of " + onnx_type_name(t.data_type) + " needs " +
                                         std::to_string(n * esize));
    }
    const uint8_t* s = reinterpret_cast<const uint8_t*>(raw->data());
    if (esize == cs && t.data_type != kBool) {
      // uint64 is reinterpreted as i64: values >= 2^63 wrap.
      if (!raw->empty()) std::memcpy(r.bytes.data(), s, raw->size());
    } else {
      for (size_t i = 0; i < n; ++i) {
        const uint8_t* e = s + i * esize;
        int64_t iv = 0;
        switch (t.data_type) {
          case kUint8:
            iv = e[0];
            break;
          case kInt8:
            iv = static_cast<int8_t>(e[0]);
            break;
          case kBool:
            iv = e[0] != 0;
            break;
          case kUint16: {
            uint16_t x;
            std::memcpy(&x, e, 2);
            iv = x;
            break;
          }
          case kInt16: {
            int16_t x;
            std::memcpy(&x, e, 2);
            iv = x;
            break;
          }
          case kUint32: {
            uint32_t x;
            std::memcpy(&x, e, 4);
            iv = static_cast<int32_t>(x);
            break;
          }
          default:
            break;
        }
        put(i, 0, iv, true);
      }
    }
    return r;
  }
  switch (t.data_type) {
    case kFloat:
      count_check(t.float_data.size());
      for (size_t i = 0; i < n; ++i) put(i, t.float_data[i], 0, false);
      break;
    case kDouble:
      count_check(t.double_data.size());
      for (size_t i = 0; i < n; ++i) put(i, t.double_data[i], 0, false);
      break;
    case kInt64:
      count_check(t.int64_data.size());
      for (size_t i = 0; i < n; ++i) put(i, 0, t.int64_data[i], true);
      break;
    case kUint64:
    case kUint32:
      count_check(t.uint64_data.size());
      for (size_t i = 0; i < n; ++i) put(i, 0, static_cast<int64_t>(t.uint64_data[i]), true);
      break;
    case kFloat16:
    case kBfloat16:
      count_check(t.int32_data.size());
      for (size_t i = 0; i < n; ++i) {
        uint16_t b = static_cast<uint16_t>(t.int32_data[i]);
        std::memcpy(r.bytes.data() + i * 2, &b, 2);
      }
      break;
    default:
      count_check(t.int32_data.size());
      for (size_t i = 0; i < n; ++i) put(i, 0, t.int32_data[i], true);
  }
  return r;
}

std::vector<double> raw_to_doubles(const RawTensor& r) {
  DType dt = carrier_dtype(r.ot);
  size_t n = static_cast<size_t>(r.numel());
  std::vector<double> out(n);
  const uint8_t* p = r.bytes.data();
  for (size_t i = 0; i < n; ++i) {
    switch (dt) {
      case LT_DTYPE_F32: {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        out[i] = f;
        break;
      }
      case LT_DTYPE_F64:
        std::memcpy(&out[i], p + 8 * i, 8);
        break;
      case LT_DTYPE_I32: {
        int32_t x;
        std::memcpy(&x, p + 4 * i, 4);
        out[i] = x;
        break;
      }
      case LT_DTYPE_I64: {
        int64_t x;
        std::memcpy(&x, p + 8 * i, 8);
        out[i] = static_cast<double>(x);
        break;
      }
      case LT_DTYPE_BOOL:
        out[i] = p[i] ? 1 : 0;
        break;
      case LT_DTYPE_F16:
      case LT_DTYPE_BF16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = dt == LT_DTYPE_F16 ? lt::detail::f16_to_float(h) : lt::detail::bf16_to_float(h);
        break;
      }
      default:
        break;
    }
  }
  return out;
}

// ---- Ctx ----------------------------------------------------------------------------------

namespace {
Tensor upload(const Device& dev, const HostVals& h, int32_t ot) {
  DType dt = carrier_dtype(ot);
  size_t n = h.v.size(), cs = lt_dtype_size(dt);
  std::vector<uint8_t> bytes(n * cs);
  for (size_t i = 0; i < n; ++i) lower::store_element(dt, h.v[i], bytes.data() + i * cs);
  lt_tensor* out = nullptr;
  check(lt_tensor_from_host(dev.get(), dt, h.shape.data(), h.shape.size(), bytes.data(),
                            bytes.size(), &out));
  return Tensor(out);
}
}  // namespace

Tensor Ctx::T(Value& v) {
  if (!v.present) error("a required input is missing");
  if (!v.t.defined()) v.t = upload(dev, *v.h, v.ot);
  return v.t;
}

std::vector<double> Ctx::doubles(Value& v) {
  if (!v.present) error("a required input is missing");
  if (v.h) return v.h->v;
  // A shape input computed on the device: its value decides a shape, so it is read here.
  RawTensor r;
  r.ot = v.ot;
  r.shape = v.t.shape();
  r.bytes = v.t.to_bytes();
  auto vals = raw_to_doubles(r);
  auto h = std::make_shared<HostVals>();
  h->shape = r.shape;
  h->v = vals;
  v.h = h;
  return vals;
}

std::vector<int64_t> Ctx::ints(Value& v) {
  std::vector<double> d = doubles(v);
  std::vector<int64_t> out(d.size());
  for (size_t i = 0; i < d.size(); ++i) out[i] = lower::saturate_to_int<int64_t>(d[i]);
  return out;
}

Value Ctx::from_tensor(Tensor t, int32_t ot) {
  Value v;
  v.present = true;
  v.ot = ot;
  v.t = std::move(t);
  return v;
}

Value Ctx::from_host(std::vector<int64_t> shape, std::vector<double> vals, int32_t ot,
                     bool shape_class) {
  Value v;
  v.present = true;
  v.ot = ot;
  auto h = std::make_shared<HostVals>();
  h->shape = std::move(shape);
  h->v = std::move(vals);
  v.h = h;
  v.shape_class = shape_class;
  return v;
}

const AttributeP* Ctx::attr(const std::string& name) const {
  for (const AttributeP& a : node->attributes) {
    if (a.name == name) return &a;
  }
  return nullptr;
}
int64_t Ctx::attr_i(const std::string& name, int64_t def) const {
  const AttributeP* a = attr(name);
  return a ? a->i : def;
}
float Ctx::attr_f(const std::string& name, float def) const {
  const AttributeP* a = attr(name);
  return a ? a->f : def;
}
std::string Ctx::attr_s(const std::string& name, const std::string& def) const {
  const AttributeP* a = attr(name);
  return a ? a->s : def;
}
std::vector<int64_t> Ctx::attr_ints(const std::string& name) const {
  const AttributeP* a = attr(name);
  return a ? a->ints : std::vector<int64_t>{};
}
void Ctx::error(const std::string& msg) const {
  fail(LT_STATUS_INVALID_ARGUMENT, msg);
}

}  // namespace lt::onnx::detail
