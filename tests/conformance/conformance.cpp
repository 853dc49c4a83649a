// conformance.cpp — the conformance suite's runtime, device list, tolerance table, host
// reference tensors and comparison helpers (see conformance.h).
#include "conformance.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <sstream>

#include "test_support.hpp"

namespace ltc {

// ---- tolerances ---------------------------------------------------------------------------

Tol tolerance(OpClass cls, lt::DType dtype, const std::string& backend) {
  if (!is_float(dtype) && dtype != lt::bf16 && dtype != lt::f16) return {0, 0};
  const bool f64 = dtype == lt::f64;
  Tol t;
  switch (cls) {
    case OpClass::kExact:
      t = f64 ? Tol{1e-12, 1e-12} : Tol{1e-6, 1e-6};
      break;
    case OpClass::kDiv:
      t = f64 ? Tol{1e-12, 1e-12} : Tol{2e-6, 1e-6};
      break;
    case OpClass::kTranscendent:
      t = f64 ? Tol{1e-11, 1e-12} : Tol{2e-5, 2e-6};
      break;
    case OpClass::kReduce:
      t = f64 ? Tol{1e-10, 1e-10} : Tol{2e-5, 2e-5};
      break;
    case OpClass::kMatmul:
      t = f64 ? Tol{1e-10, 1e-10} : Tol{2e-5, 2e-5};
      break;
    case OpClass::kSoftmax:
      t = f64 ? Tol{1e-10, 1e-12} : Tol{2e-5, 2e-6};
      break;
  }
  // Backend-specific f32 overrides: (backend, class) -> tolerance.
  static const std::map<std::pair<std::string, OpClass>, Tol> kBackend = {
      {{"tpu_sim", OpClass::kMatmul}, {1e-2, 1e-3}},           // bf16 systolic array
      {{"gpu_opencl", OpClass::kTranscendent}, {1e-4, 1e-5}},  // native_* / fast-math builtins
      {{"gpu_opencl", OpClass::kSoftmax}, {1e-4, 1e-5}},
      {{"cpu_jit", OpClass::kTranscendent}, {1e-4, 1e-5}},  // vectorised polynomial libm
      {{"cpu_jit", OpClass::kSoftmax}, {1e-4, 1e-5}},
  };
  if (!f64) {
    auto it = kBackend.find({backend, cls});
    if (it != kBackend.end()) t = it->second;
  }
  return t;
}

// ---- runtime and devices ------------------------------------------------------------------

std::vector<std::string> conformance_devices() {
  std::vector<std::string> names;
  if (const char* env = std::getenv("LT_CONFORMANCE_DEVICES"); env && *env) {
    std::stringstream ss(env);
    for (std::string item; std::getline(ss, item, ',');) {
      if (!item.empty()) names.push_back(item);
    }
    return names;
  }
  for (const lt::Device& d : lt::test::runtime().devices()) names.push_back(d.name());
  return names;
}

// ---- shapes -------------------------------------------------------------------------------

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

std::string str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

double Host::at(const Shape& idx) const {
  auto st = strides_of(shape);
  int64_t flat = 0;
  for (size_t d = 0; d < idx.size(); ++d) flat += idx[d] * st[d];
  return v[static_cast<size_t>(flat)];
}

std::vector<Shape> all_indices(const Shape& shape) {
  std::vector<Shape> out;
  int64_t n = numel_of(shape);
  out.reserve(static_cast<size_t>(n));
  Shape idx(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    out.push_back(idx);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) {
      ADD_FAILURE() << "reference: shapes " << str(a) << " and " << str(b) << " do not broadcast";
      return {};
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t broadcast_flat(const Shape& out_idx, const Shape& in_shape) {
  auto st = strides_of(in_shape);
  size_t off = out_idx.size() - in_shape.size();
  int64_t flat = 0;
  for (size_t d = 0; d < in_shape.size(); ++d) {
    if (in_shape[d] != 1) flat += out_idx[d + off] * st[d];
  }
  return flat;
}

// ---- values -------------------------------------------------------------------------------

double round_to(lt::DType dtype, double x) {
  switch (dtype) {
    case LT_DTYPE_F32:
      return static_cast<double>(static_cast<float>(x));
    case LT_DTYPE_I32:
      return static_cast<double>(static_cast<int32_t>(static_cast<int64_t>(x)));
    case LT_DTYPE_I64:
      return static_cast<double>(static_cast<int64_t>(x));
    case LT_DTYPE_BOOL:
      return x != 0 ? 1.0 : 0.0;
    default:
      return x;
  }
}

Host make(lt::DType dtype, const Shape& shape, Fill fill, uint32_t salt) {
  Host h;
  h.dtype = dtype;
  h.shape = shape;
  std::mt19937 rng(0x5eed + salt * 7919u + static_cast<uint32_t>(dtype) * 31u +
                   static_cast<uint32_t>(numel_of(shape)));
  int64_t n = numel_of(shape);
  h.v.resize(static_cast<size_t>(n));
  for (double& x : h.v) {
    if (dtype == lt::bool_) {
      x = static_cast<double>(rng() & 1u);
    } else if (is_float(dtype)) {
      std::uniform_real_distribution<double> u(fill == Fill::kPositive ? 0.1 : -3.0, 3.0);
      x = u(rng);
      if (fill == Fill::kNonZero && std::abs(x) < 0.1) x = 0.5;
      x = round_to(dtype, x);
    } else {
      std::uniform_int_distribution<int> u(fill == Fill::kPositive ? 1 : -9, 9);
      x = u(rng);
      if (fill == Fill::kNonZero && x == 0) x = 3;
    }
  }
  return h;
}

Host from_values(lt::DType dtype, const Shape& shape, std::vector<double> values) {
  Host h{dtype, shape, std::move(values)};
  if (h.numel() != numel_of(shape)) ADD_FAILURE() << "from_values: wrong value count";
  for (double& x : h.v) x = round_to(dtype, x);
  return h;
}

lt::Tensor upload(const lt::Device& dev, const Host& h) {
  size_t n = h.v.size();
  std::vector<uint8_t> bytes(n * lt::dtype_size(h.dtype));
  for (size_t i = 0; i < n; ++i) {
    uint8_t* p = bytes.data() + i * lt::dtype_size(h.dtype);
    switch (h.dtype) {
      case LT_DTYPE_F32: {
        float x = static_cast<float>(h.v[i]);
        std::memcpy(p, &x, 4);
        break;
      }
      case LT_DTYPE_F64:
        std::memcpy(p, &h.v[i], 8);
        break;
      case LT_DTYPE_I32: {
        int32_t x = static_cast<int32_t>(h.v[i]);
        std::memcpy(p, &x, 4);
        break;
      }
      case LT_DTYPE_I64: {
        int64_t x = static_cast<int64_t>(h.v[i]);
        std::memcpy(p, &x, 8);
        break;
      }
      case LT_DTYPE_BOOL:
        *p = h.v[i] != 0 ? 1 : 0;
        break;
      default:
        ADD_FAILURE() << "upload: unsupported dtype " << lt::dtype_name(h.dtype);
    }
  }
  lt_tensor* out = nullptr;
  lt::check(lt_tensor_from_host(dev.get(), h.dtype, h.shape.data(), h.shape.size(),
                                bytes.empty() ? nullptr : bytes.data(), bytes.size(), &out));
  return lt::Tensor(out);
}

Host download(const lt::Tensor& t) {
  Host h;
  h.dtype = t.dtype();
  h.shape = t.shape();
  std::vector<uint8_t> bytes = t.to_bytes();
  size_t es = lt::dtype_size(h.dtype);
  size_t n = es ? bytes.size() / es : 0;
  h.v.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = bytes.data() + i * es;
    switch (h.dtype) {
      case LT_DTYPE_F32: {
        float x;
        std::memcpy(&x, p, 4);
        h.v[i] = x;
        break;
      }
      case LT_DTYPE_F64:
        std::memcpy(&h.v[i], p, 8);
        break;
      case LT_DTYPE_I32: {
        int32_t x;
        std::memcpy(&x, p, 4);
        h.v[i] = x;
        break;
      }
      case LT_DTYPE_I64: {
        int64_t x;
        std::memcpy(&x, p, 8);
        h.v[i] = static_cast<double>(x);
        break;
      }
      case LT_DTYPE_BOOL:
        h.v[i] = *p ? 1.0 : 0.0;
        break;
      default:
        ADD_FAILURE() << "download: unsupported dtype " << lt::dtype_name(h.dtype);
    }
  }
  return h;
}

Host ref_unary(const Host& a, lt::DType out_dtype, const std::function<double(double)>& f) {
  Host r{out_dtype, a.shape, {}};
  r.v.reserve(a.v.size());
  for (double x : a.v) r.v.push_back(round_to(out_dtype, f(x)));
  return r;
}

Host ref_binary(const Host& a, const Host& b, lt::DType out_dtype,
                const std::function<double(double, double)>& f) {
  Host r{out_dtype, broadcast_shapes(a.shape, b.shape), {}};
  for (const Shape& idx : all_indices(r.shape)) {
    double x = a.v[static_cast<size_t>(broadcast_flat(idx, a.shape))];
    double y = b.v[static_cast<size_t>(broadcast_flat(idx, b.shape))];
    r.v.push_back(round_to(out_dtype, f(x, y)));
  }
  return r;
}

void expect_close(const lt::Tensor& got, const Host& want, Tol tol, const std::string& what) {
  expect_close_scaled(got, want, want, tol, what);
}

Host abs_of(const Host& h) {
  Host r = h;
  for (double& x : r.v) x = std::abs(x);
  return r;
}

void expect_close_scaled(const lt::Tensor& got, const Host& want, const Host& magnitude, Tol tol,
                         const std::string& what) {
  SCOPED_TRACE(what);
  Host g;
  try {
    g = download(got);
  } catch (const lt::Error& e) {
    ADD_FAILURE() << what << ": reading the result failed: " << e.what();
    return;
  }
  ASSERT_EQ(lt::dtype_name(g.dtype), std::string(lt::dtype_name(want.dtype))) << what;
  ASSERT_EQ(str(g.shape), str(want.shape)) << what;
  ASSERT_EQ(g.v.size(), want.v.size());
  ASSERT_EQ(magnitude.v.size(), want.v.size());
  int reported = 0;
  for (size_t i = 0; i < g.v.size(); ++i) {
    double x = g.v[i], y = want.v[i];
    bool ok;
    if (std::isnan(y))
      ok = std::isnan(x);
    else if (std::isinf(y))
      ok = x == y;
    else
      ok = std::abs(x - y) <= tol.atol + tol.rtol * std::max(std::abs(y), std::abs(magnitude.v[i]));
    if (!ok && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " (shape " << str(want.shape) << ") got " << x
                    << " want " << y << " (rtol " << tol.rtol << ", atol " << tol.atol << ")";
    }
  }
}

lt::Tensor upload_permuted(const lt::Device& dev, const Host& h) {
  size_t r = h.shape.size();
  if (r < 2) return upload_reversed(dev, h);
  Host t{h.dtype, Shape(h.shape.rbegin(), h.shape.rend()), std::vector<double>(h.v.size())};
  auto st = strides_of(t.shape);
  size_t k = 0;
  for (const Shape& idx : all_indices(h.shape)) {
    int64_t flat = 0;
    for (size_t d = 0; d < r; ++d) flat += idx[r - 1 - d] * st[d];
    t.v[static_cast<size_t>(flat)] = h.v[k++];
  }
  Shape perm(r);
  for (size_t d = 0; d < r; ++d) perm[d] = static_cast<int64_t>(r - 1 - d);
  return upload(dev, t).permute(perm);
}

lt::Tensor upload_reversed(const lt::Device& dev, const Host& h) {
  size_t r = h.shape.size();
  if (r == 0) return upload(dev, h);
  // Each axis gets one junk element at index 0 and holds h reversed after it; slicing
  // [-1:0:-1] on every axis yields exactly h through a negative-step view.
  Shape big(h.shape);
  for (int64_t& d : big) d += 1;
  Host t{h.dtype, big, std::vector<double>(static_cast<size_t>(numel_of(big)), 77.0)};
  auto st = strides_of(big);
  size_t k = 0;
  for (const Shape& idx : all_indices(h.shape)) {
    int64_t flat = 0;
    for (size_t d = 0; d < r; ++d) flat += (h.shape[d] - idx[d]) * st[d];
    t.v[static_cast<size_t>(flat)] = h.v[k++];
  }
  return upload(dev, t).slice(Shape(r, -1), Shape(r, 0), Shape(r, -1));
}

void expect_error(const std::function<void()>& fn, lt_status_code code,
                  const std::vector<std::string>& needles, std::source_location where) {
  ::testing::ScopedTrace trace(where.file_name(), int(where.line()), "expected error");
  try {
    fn();
  } catch (const lt::Error& e) {
    if (code != LT_STATUS_OK) {
      EXPECT_EQ(static_cast<int>(e.code()), static_cast<int>(code)) << "message: " << e.what();
    }
    for (const std::string& n : needles) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "error message '" << e.what() << "' does not mention '" << n << "'";
    }
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected lt::Error, got another exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "expected an lt::Error (code " << code << "), but the call succeeded";
}

const std::vector<lt::DType>& float_dtypes() {
  static const std::vector<lt::DType> v = {lt::f32, lt::f64};
  return v;
}
const std::vector<lt::DType>& int_dtypes() {
  static const std::vector<lt::DType> v = {lt::i32, lt::i64};
  return v;
}
const std::vector<lt::DType>& numeric_dtypes() {
  static const std::vector<lt::DType> v = {lt::f32, lt::f64, lt::i32, lt::i64};
  return v;
}

}  // namespace ltc
