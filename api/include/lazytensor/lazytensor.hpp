// lazytensor.hpp — the header-only C++20 API over lt.h: lt::Error, lt::Runtime, lt::Device,
// lt::Tensor with operators, every op of docs/ops.md, sync, metrics and NumPy-style printing.
//
// Ownership: lt::Runtime owns one application reference to an lt_runtime (move-only);
// lt::Device is a borrowed handle valid while any handle of its runtime lives; lt::Tensor
// owns one lt_tensor reference (copy = retain, destruction = free). Every failing C call is
// turned into an lt::Error by lt::check, the single place errors cross into C++.
#ifndef LAZYTENSOR_LAZYTENSOR_HPP
#define LAZYTENSOR_LAZYTENSOR_HPP

#include "lazytensor/lt.h"

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <ostream>
#include <source_location>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace lt {

// ---- dtypes -------------------------------------------------------------------------------

using DType = lt_dtype;
inline constexpr DType f32 = LT_DTYPE_F32;
inline constexpr DType f64 = LT_DTYPE_F64;
inline constexpr DType i32 = LT_DTYPE_I32;
inline constexpr DType i64 = LT_DTYPE_I64;
inline constexpr DType bool_ = LT_DTYPE_BOOL;
inline constexpr DType bf16 = LT_DTYPE_BF16;
inline constexpr DType f16 = LT_DTYPE_F16;

inline const char* dtype_name(DType d) {
  return lt_dtype_name(d);
}
inline size_t dtype_size(DType d) {
  return lt_dtype_size(d);
}

// The dtype that stores host type T. Only the first-class host types are supported, so the
// templates below stay a handful of instantiations.
template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return LT_DTYPE_F32;
  else if constexpr (std::is_same_v<T, double>)
    return LT_DTYPE_F64;
  else if constexpr (std::is_same_v<T, int32_t>)
    return LT_DTYPE_I32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return LT_DTYPE_I64;
  else if constexpr (std::is_same_v<T, bool>)
    return LT_DTYPE_BOOL;
  else
    static_assert(sizeof(T) == 0, "lt: host type must be float, double, int32_t, int64_t or bool");
}
static_assert(sizeof(bool) == 1, "lt: bool tensors are read and written as 1-byte bools");

// ---- errors -------------------------------------------------------------------------------

// An error reported by the core: its status code and message ("add: shapes [2,3] and [4]
// do not broadcast"). Also thrown by this header for misuse it detects itself (null tensor,
// host type that does not match the dtype).
class Error : public std::runtime_error {
 public:
  Error(lt_status_code code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  lt_status_code code() const noexcept { return code_; }

 private:
  lt_status_code code_;
};

// Converts a C error into lt::Error and destroys it; NULL (success) does nothing.
inline void check(lt_error* error) {
  if (error == nullptr) return;
  lt_status_code code = lt_error_code(error);
  const char* msg = lt_error_message(error);
  std::string message = msg ? msg : "unknown error";
  lt_error_destroy(error);
  throw Error(code, message);
}

namespace detail {
// Takes ownership of a string returned by the core.
inline std::string take_string(char* s) {
  std::string result = s ? s : "";
  lt_string_free(s);
  return result;
}
inline std::string shape_string(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}
// The automatic mixed-precision dtype of this thread: bf16 or f16 inside an lt::amp::Autocast
// scope (lazytensor/amp.hpp), LT_DTYPE_INVALID outside. Matmul and conv2d cast their f32
// operands to it; reductions, softmax and the losses cast its values back to f32.
inline DType& autocast_dtype() {
  static thread_local DType d = LT_DTYPE_INVALID;
  return d;
}
inline bool is_half(DType d) {
  return d == LT_DTYPE_BF16 || d == LT_DTYPE_F16;
}

// Source locations through the API's own layers (issue #28). An op written inside one of
// LazyTensor's headers (a module's forward, a loss, an optimiser's step, a model) would record
// that header's line; instead it records the line of the user's program that called into the
// API. Each such entry point takes a defaulted std::source_location and opens an ApiFrame; the
// outermost frame whose caller is not one of these headers holds the user's line, and every
// op recorded inside it from a header (and every op without a location of its own) gets it.
// Ops the user's own code records inside a frame (a module of theirs in nn::Sequential) keep
// their own lines. Outside a frame this costs one thread-local load per op.
struct UserLine {
  const char* file = nullptr;
  uint32_t line = 0;
};
inline UserLine& api_frame() {
  static thread_local UserLine frame;
  return frame;
}
inline bool in_api_header(const char* file) {
  return std::strstr(file, "/include/lazytensor/") != nullptr;
}
class ApiFrame {
 public:
  explicit ApiFrame(const std::source_location& caller)
      : outer_(!api_frame().file && !in_api_header(caller.file_name())) {
    if (outer_) api_frame() = {caller.file_name(), caller.line()};
  }
  ~ApiFrame() {
    if (!outer_) return;
    api_frame() = {};
    lt_trace_location(nullptr, 0);  // a location stamped but unused stays inside the frame
  }
  ApiFrame(const ApiFrame&) = delete;
  ApiFrame& operator=(const ApiFrame&) = delete;

 private:
  bool outer_;
};
// Stamps the next op with `loc`, or with the frame's user line when `loc` is in a header.
inline void trace_at(const std::source_location& loc) {
  const UserLine& f = api_frame();
  if (f.file && in_api_header(loc.file_name()))
    lt_trace_location(f.file, f.line);
  else
    lt_trace_location(loc.file_name(), loc.line());
}
// For ops without a location parameter (reductions, layout, ...): the frame's user line.
inline void trace_frame() {
  const UserLine& f = api_frame();
  if (f.file) lt_trace_location(f.file, f.line);
}
}  // namespace detail

// ---- IntList: shapes, axes, attribute lists -----------------------------------------------

// A list of int64 passed by value: accepts {2, 3}, std::vector<int64_t> or a span. It owns
// its elements (inline up to 8), so unlike a view it is safe to keep in a variable.
class IntList {
 public:
  IntList() = default;
  IntList(std::initializer_list<int64_t> v) { assign(v.begin(), v.size()); }
  IntList(const std::vector<int64_t>& v) { assign(v.data(), v.size()); }
  IntList(std::span<const int64_t> v) { assign(v.data(), v.size()); }
  IntList(const IntList& o) { assign(o.data(), o.size()); }
  IntList& operator=(const IntList& o) {
    if (this != &o) assign(o.data(), o.size());
    return *this;
  }

  const int64_t* data() const { return n_ <= kInline ? inline_ : heap_.data(); }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t operator[](size_t i) const { return data()[i]; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + n_; }
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  operator std::span<const int64_t>() const { return {data(), n_}; }

 private:
  static constexpr size_t kInline = 8;
  void assign(const int64_t* p, size_t n) {
    n_ = n;
    if (n <= kInline) {
      if (n) std::memcpy(inline_, p, n * sizeof(int64_t));
      heap_.clear();
    } else {
      heap_.assign(p, p + n);
    }
  }
  int64_t inline_[kInline] = {};
  std::vector<int64_t> heap_;
  size_t n_ = 0;
};

// ---- op attributes (for lt::apply) --------------------------------------------------------

// One named attribute of a generic op. Named factories instead of overloaded constructors
// keep {0, 1} and 1 from being ambiguous between int, float, list and string.
class Attr {
 public:
  static Attr Int(std::string name, int64_t v) {
    Attr a(std::move(name), LT_ATTR_INT);
    a.i_ = v;
    return a;
  }
  static Attr Float(std::string name, double v) {
    Attr a(std::move(name), LT_ATTR_FLOAT);
    a.f_ = v;
    return a;
  }
  static Attr Ints(std::string name, IntList v) {
    Attr a(std::move(name), LT_ATTR_INTS);
    a.ints_ = v.vec();
    return a;
  }
  static Attr String(std::string name, std::string v) {
    Attr a(std::move(name), LT_ATTR_STRING);
    a.s_ = std::move(v);
    return a;
  }
  // The C view; borrows this Attr's storage.
  lt_attr c_attr() const {
    lt_attr a{};
    a.name = name_.c_str();
    a.kind = kind_;
    a.i = i_;
    a.f = f_;
    a.ints = ints_.data();
    a.ints_len = ints_.size();
    a.s = s_.c_str();
    return a;
  }

 private:
  Attr(std::string name, lt_attr_kind kind) : name_(std::move(name)), kind_(kind) {}
  std::string name_;
  lt_attr_kind kind_;
  int64_t i_ = 0;
  double f_ = 0;
  std::vector<int64_t> ints_;
  std::string s_;
};

// ---- runtime and devices ------------------------------------------------------------------

class Runtime;

// A borrowed device handle; cheap to copy. Null when default-constructed.
class Device {
 public:
  Device() = default;
  explicit Device(lt_device* d) : d_(d) {}
  lt_device* get() const { return d_; }
  bool defined() const { return d_ != nullptr; }
  // "cpu_eager:0"
  std::string name() const { return d_ ? lt_device_name(d_) : "<null device>"; }
  // "cpu_eager"
  std::string backend() const { return d_ ? lt_device_backend(d_) : "<null device>"; }
  lt_runtime* runtime() const { return d_ ? lt_device_runtime(d_) : nullptr; }
  friend bool operator==(const Device& a, const Device& b) { return a.d_ == b.d_; }

 private:
  lt_device* d_ = nullptr;
};

inline std::ostream& operator<<(std::ostream& os, const Device& d) {
  return os << d.name();
}

// Mirrors lt_runtime_options; an empty string means "not set" (environment, config, default).
struct RuntimeOptions {
  std::string config_path;
  std::string device;
  std::string plugin_path;
  std::string fallback;
  std::string log_level;
  std::string dump_dir;
  std::string dynamic_shapes;  // "auto" (default), "marked" or "off"
  std::string optimize;        // graph optimiser: "exact" (default), "fast" or "none"
};

// Owns the application's reference to a runtime. Tensors keep the runtime's internals
// alive after it is destroyed, but devices are only valid while some handle lives.
class Runtime {
 public:
  Runtime() = default;
  explicit Runtime(lt_runtime* r) : r_(r) {}
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  Runtime(Runtime&& o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
  Runtime& operator=(Runtime&& o) noexcept {
    if (this != &o) {
      reset();
      r_ = std::exchange(o.r_, nullptr);
    }
    return *this;
  }
  ~Runtime() { reset(); }

  static Runtime create(const RuntimeOptions& options = {}) {
    auto opt = [](const std::string& s) { return s.empty() ? nullptr : s.c_str(); };
    lt_runtime_options o{};
    o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
    o.config_path = opt(options.config_path);
    o.device = opt(options.device);
    o.plugin_path = opt(options.plugin_path);
    o.fallback = opt(options.fallback);
    o.log_level = opt(options.log_level);
    o.dump_dir = opt(options.dump_dir);
    o.dynamic_shapes = opt(options.dynamic_shapes);
    o.optimize = opt(options.optimize);
    lt_runtime* r = nullptr;
    check(lt_runtime_create(&o, &r));
    return Runtime(r);
  }

  lt_runtime* get() const { return r_; }
  bool defined() const { return r_ != nullptr; }
  lt_runtime* release() { return std::exchange(r_, nullptr); }
  void reset() {
    if (r_) lt_runtime_destroy(r_);
    r_ = nullptr;
  }

  size_t device_count() const { return r_ ? lt_runtime_device_count(r_) : 0; }
  Device device(size_t index) const {
    lt_device* d = r_ ? lt_runtime_device(r_, index) : nullptr;
    if (!d) {
      throw Error(LT_STATUS_NOT_FOUND, "Runtime::device: index " + std::to_string(index) +
                                           " out of range (" + std::to_string(device_count()) +
                                           " devices)");
    }
    return Device(d);
  }
  std::vector<Device> devices() const {
    std::vector<Device> out;
    for (size_t i = 0; i < device_count(); ++i) out.emplace_back(lt_runtime_device(r_, i));
    return out;
  }
  Device default_device() const {
    require();
    return Device(lt_runtime_default_device(r_));
  }
  // "cpu_eager" or "cpu_eager:0"; throws NOT_FOUND when absent.
  Device find_device(const std::string& name) const {
    require();
    lt_device* d = nullptr;
    check(lt_runtime_find_device(r_, name.c_str(), &d));
    return Device(d);
  }
  std::string plugin_report(bool json = false) const {
    require();
    char* s = nullptr;
    check(lt_runtime_plugin_report(r_, json ? 1 : 0, &s));
    return detail::take_string(s);
  }
  std::string metrics_report(bool json = false) const {
    require();
    char* s = nullptr;
    check(lt_metrics_report(r_, json ? 1 : 0, &s));
    return detail::take_string(s);
  }
  double metric(const std::string& name) const {
    require();
    double v = 0;
    check(lt_metric_get(r_, name.c_str(), &v));
    return v;
  }
  void reset_metrics() const {
    if (r_) lt_metrics_reset(r_);
  }

 private:
  void require() const {
    if (!r_) throw Error(LT_STATUS_INVALID_ARGUMENT, "Runtime: null runtime");
  }
  lt_runtime* r_ = nullptr;
};

// Materialises every live pending tensor of `device` as one graph (a training step's end).
inline void sync(const Device& device) {
  check(lt_sync(device.get()));
}

// ---- tensors ------------------------------------------------------------------------------

class Tensor;
inline std::ostream& operator<<(std::ostream& os, const Tensor& t);

// A lazy tensor handle with value semantics: copies share the same value (reference
// counted by the core). A default-constructed or moved-from Tensor is null.
class Tensor {
 public:
  Tensor() = default;
  // Adopts one reference of `t` (does not retain it).
  explicit Tensor(lt_tensor* t) : t_(t) {}
  Tensor(const Tensor& o) : t_(o.t_ ? lt_tensor_retain(o.t_) : nullptr) {}
  Tensor(Tensor&& o) noexcept : t_(std::exchange(o.t_, nullptr)) {}
  Tensor& operator=(const Tensor& o) {
    if (this != &o) {
      lt_tensor* n = o.t_ ? lt_tensor_retain(o.t_) : nullptr;
      lt_tensor_free(t_);
      t_ = n;
    }
    return *this;
  }
  Tensor& operator=(Tensor&& o) noexcept {
    if (this != &o) {
      lt_tensor_free(t_);
      t_ = std::exchange(o.t_, nullptr);
    }
    return *this;
  }
  ~Tensor() { lt_tensor_free(t_); }

  lt_tensor* get() const { return t_; }
  // Gives up ownership of the handle; the caller frees it with lt_tensor_free.
  lt_tensor* release() { return std::exchange(t_, nullptr); }
  bool defined() const { return t_ != nullptr; }
  // True when both handles refer to the same value (identity, not elementwise equality).
  bool is_same(const Tensor& o) const { return t_ == o.t_; }

  // ---- metadata
  DType dtype() const { return lt_tensor_dtype(req("dtype")); }
  size_t rank() const { return lt_tensor_rank(req("rank")); }
  std::span<const int64_t> shape_span() const {
    lt_tensor* t = req("shape");
    return {lt_tensor_shape(t), lt_tensor_rank(t)};
  }
  std::vector<int64_t> shape() const {
    auto s = shape_span();
    return {s.begin(), s.end()};
  }
  // Size of dim `i`; negative counts from the end.
  int64_t dim(int64_t i) const {
    auto s = shape_span();
    int64_t r = static_cast<int64_t>(s.size());
    if (i < -r || i >= r) {
      throw Error(
          LT_STATUS_INVALID_ARGUMENT,
          "dim: axis " + std::to_string(i) + " out of range for shape " + detail::shape_string(s));
    }
    return s[static_cast<size_t>(i < 0 ? i + r : i)];
  }
  int64_t numel() const { return lt_tensor_numel(req("numel")); }
  Device device() const { return Device(lt_tensor_device(req("device"))); }
  bool is_materialized() const { return lt_tensor_is_materialized(req("is_materialized")) != 0; }
  // A name for people (recompile reasons name inputs by it); never part of the graph's hash.
  Tensor& set_name(const std::string& name) {
    check(lt_tensor_set_name(req("set_name"), name.c_str()));
    return *this;
  }
  std::string name() const { return lt_tensor_name(req("name")); }
  // Dynamic shapes: dim `dim` may become dynamic (true) or never does (false).
  Tensor& mark_dynamic(size_t dim, bool dynamic = true) {
    check(lt_tensor_mark_dynamic(req("mark_dynamic"), dim, dynamic ? 1 : 0));
    return *this;
  }
  const Tensor& materialize() const {
    check(lt_tensor_materialize(req("materialize")));
    return *this;
  }

  // ---- autograd, libtorch spelling (lazytensor/autograd.hpp has the free functions)
  // Back-propagates from this value into every leaf that requires gradients, accumulating;
  // `seed` is needed when it has more than one element. Same as lt::backward(*this, seed).
  void backward() const { check(lt_backward(req("backward"), nullptr)); }
  void backward(const Tensor& seed) const { check(lt_backward(req("backward"), seed.get())); }
  // The gradient accumulated in this leaf, or a null Tensor when none (lt::grad(t)).
  Tensor grad() const {
    lt_tensor* g = nullptr;
    check(lt_tensor_grad(req("grad"), &g));
    return Tensor(g);
  }

  // ---- host data
  template <class T>
  static Tensor from(const Device& device, std::span<const T> data, IntList shape) {
    constexpr DType dt = dtype_of<T>();
    lt_tensor* out = nullptr;
    check(lt_tensor_from_host(device.get(), dt, shape.data(), shape.size(), data.data(),
                              data.size() * sizeof(T), &out));
    return Tensor(out);
  }
  template <class T>
  static Tensor from(const Device& device, std::span<const T> data) {
    return from<T>(device, data, {static_cast<int64_t>(data.size())});
  }
  template <class T>
  static Tensor from(const Device& device, const std::vector<T>& data, IntList shape) {
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<uint8_t> bytes(data.begin(), data.end());  // vector<bool> is bit-packed
      lt_tensor* out = nullptr;
      check(lt_tensor_from_host(device.get(), LT_DTYPE_BOOL, shape.data(), shape.size(),
                                bytes.data(), bytes.size(), &out));
      return Tensor(out);
    } else {
      return from<T>(device, std::span<const T>(data.data(), data.size()), shape);
    }
  }
  template <class T>
  static Tensor from(const Device& device, const std::vector<T>& data) {
    return from<T>(device, data, {static_cast<int64_t>(data.size())});
  }
  // A rank-0 tensor; a graph parameter, so a new value does not recompile.
  static Tensor scalar(const Device& device, double value, DType dtype = LT_DTYPE_F32) {
    lt_tensor* out = nullptr;
    check(lt_scalar(device.get(), dtype, value, &out));
    return Tensor(out);
  }

  // Materialises and copies out; T must match dtype() exactly.
  template <class T>
  std::vector<T> to_vector() const {
    check_host_type(dtype_of<T>(), "to_vector");
    size_t n = static_cast<size_t>(numel());
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<uint8_t> bytes(n);
      check(lt_tensor_to_host(t_, bytes.data(), n));
      return std::vector<bool>(bytes.begin(), bytes.end());
    } else {
      std::vector<T> out(n);
      check(lt_tensor_to_host(t_, out.data(), n * sizeof(T)));
      return out;
    }
  }
  // The single element of a one-element tensor.
  template <class T>
  T item() const {
    check_host_type(dtype_of<T>(), "item");
    if (numel() != 1) {
      throw Error(LT_STATUS_SHAPE_MISMATCH, "item: tensor of shape " +
                                                detail::shape_string(shape_span()) +
                                                " does not have exactly one element");
    }
    T v{};
    check(lt_tensor_to_host(t_, &v, sizeof(T)));
    return v;
  }
  // Raw bytes (any dtype, including bf16/f16 storage types).
  std::vector<uint8_t> to_bytes() const {
    size_t n = static_cast<size_t>(numel()) * dtype_size(dtype());
    std::vector<uint8_t> out(n);
    check(lt_tensor_to_host(t_, out.data(), n));
    return out;
  }
  Tensor to(const Device& device) const {
    lt_tensor* out = nullptr;
    check(lt_tensor_to_device(req("to"), device.get(), &out));
    return Tensor(out);
  }
  // DLPack export (lt_tensor_to_dlpack): zero-copy on host-addressable devices. The caller owns
  // the result and calls its deleter once (include <dlpack/dlpack.h> to use it).
  DLManagedTensor* to_dlpack() const {
    DLManagedTensor* out = nullptr;
    check(lt_tensor_to_dlpack(req("to_dlpack"), &out));
    return out;
  }

  // ---- ops as methods (free functions below do the same)
  // One method per UNARY / BINARY row of lazytensor/lt_ops.def: neg() ... logical_not(),
  // add(b) ... or_(b), matmul(b).
// Each takes the caller's std::source_location: the node records where the user traced it.
#define LT_CPP_UNARY(m, fn, name)                                              \
  Tensor m(std::source_location loc = std::source_location::current()) const { \
    return unary(fn, name, loc);                                               \
  }
#define LT_CPP_BINARY(m, fn, name)                                                              \
  Tensor m(const Tensor& b, std::source_location loc = std::source_location::current()) const { \
    return binary(fn, b, name, loc);                                                            \
  }
#define LT_CPP_CALL(m, fn, name)
#define LT_CPP_NONE(m, fn, name)
#define LT_OP(Camel, name, capi, cfn, cppfn, ...) LT_CPP_##capi(cppfn, cfn, name)
#include "lazytensor/lt_ops.def"
#undef LT_OP
  // Scalar right operands become lt_scalar of this tensor's dtype.
  Tensor add(double s, std::source_location loc = std::source_location::current()) const {
    return add(like(s), loc);
  }
  Tensor sub(double s, std::source_location loc = std::source_location::current()) const {
    return sub(like(s), loc);
  }
  Tensor mul(double s, std::source_location loc = std::source_location::current()) const {
    return mul(like(s), loc);
  }
  Tensor div(double s, std::source_location loc = std::source_location::current()) const {
    return div(like(s), loc);
  }
  Tensor pow(double s, std::source_location loc = std::source_location::current()) const {
    return pow(like(s), loc);
  }
  Tensor maximum(double s, std::source_location loc = std::source_location::current()) const {
    return maximum(like(s), loc);
  }
  Tensor minimum(double s, std::source_location loc = std::source_location::current()) const {
    return minimum(like(s), loc);
  }

  Tensor cast(DType dtype) const {
    lt_tensor* out = nullptr;
    check(lt_cast(req("cast"), dtype, &out));
    return Tensor(out);
  }
  Tensor to(DType dtype) const {
    return cast(dtype);
  }

  // Reductions: empty axes = all axes.
  Tensor sum(IntList axes = {}, bool keepdims = false) const {
    return reduce(lt_sum, axes, keepdims, "sum");
  }
  Tensor mean(IntList axes = {}, bool keepdims = false) const {
    return reduce(lt_mean, axes, keepdims, "mean");
  }
  Tensor max(IntList axes = {}, bool keepdims = false) const {
    return reduce(lt_max, axes, keepdims, "max");
  }
  Tensor min(IntList axes = {}, bool keepdims = false) const {
    return reduce(lt_min, axes, keepdims, "min");
  }
  Tensor argmax(int64_t axis, bool keepdims = false) const {
    lt_tensor* out = nullptr;
    check(lt_argmax(req("argmax"), axis, keepdims ? 1 : 0, &out));
    return Tensor(out);
  }

  Tensor reshape(IntList shape) const {
    lt_tensor* out = nullptr;
    check(lt_reshape(req("reshape"), shape.data(), shape.size(), &out));
    return Tensor(out);
  }
  Tensor permute(IntList perm) const {
    lt_tensor* out = nullptr;
    check(lt_permute(req("permute"), perm.data(), perm.size(), &out));
    return Tensor(out);
  }
  // Swaps the last two dims (rank >= 2).
  Tensor t() const {
    size_t r = rank();
    if (r < 2) return *this;
    std::vector<int64_t> perm(r);
    for (size_t i = 0; i < r; ++i) perm[i] = static_cast<int64_t>(i);
    std::swap(perm[r - 1], perm[r - 2]);
    return permute(perm);
  }
  Tensor broadcast_to(IntList shape) const {
    lt_tensor* out = nullptr;
    check(lt_broadcast_to(req("broadcast_to"), shape.data(), shape.size(), &out));
    return Tensor(out);
  }
  // Python slicing per axis: rank entries each.
  Tensor slice(IntList starts, IntList stops, IntList steps) const {
    if (starts.size() != stops.size() || starts.size() != steps.size()) {
      throw Error(LT_STATUS_INVALID_ARGUMENT,
                  "slice: starts, stops and steps have " + std::to_string(starts.size()) + ", " +
                      std::to_string(stops.size()) + " and " + std::to_string(steps.size()) +
                      " entries; they must be equal");
    }
    lt_tensor* out = nullptr;
    check(lt_slice(req("slice"), starts.data(), stops.data(), steps.data(), starts.size(), &out));
    return Tensor(out);
  }
  // t.slice(axis, start, stop[, step]) on one axis. A template only so that braced lists
  // never bind to it: t.slice({0}, {4}, {1}) must mean the per-axis lists above.
  template <std::integral A, std::integral B, std::integral C, std::integral D = int64_t>
  Tensor slice(A axis, B start, C stop, D step = 1) const {
    return slice_axis(axis, start, stop, step);
  }
  // a[..., start:stop:step, ...] on one axis; other axes are kept whole.
  Tensor slice_axis(int64_t axis, int64_t start, int64_t stop, int64_t step = 1) const {
    size_t r = rank();
    int64_t ax = axis < 0 ? axis + static_cast<int64_t>(r) : axis;
    if (ax < 0 || ax >= static_cast<int64_t>(r)) {
      throw Error(LT_STATUS_INVALID_ARGUMENT, "slice_axis: axis " + std::to_string(axis) +
                                                  " out of range for shape " +
                                                  detail::shape_string(shape_span()));
    }
    std::vector<int64_t> starts(r, 0), stops(r, std::numeric_limits<int64_t>::max()), steps(r, 1);
    starts[ax] = start;
    stops[ax] = stop;
    steps[ax] = step;
    return slice(starts, stops, steps);
  }
  Tensor pad(IntList before, IntList after, double value = 0.0) const {
    if (before.size() != after.size()) {
      throw Error(LT_STATUS_INVALID_ARGUMENT, "pad: before has " + std::to_string(before.size()) +
                                                  " entries but after has " +
                                                  std::to_string(after.size()));
    }
    lt_tensor* out = nullptr;
    check(lt_pad(req("pad"), before.data(), after.data(), before.size(), value, &out));
    return Tensor(out);
  }
  Tensor gather(const Tensor& indices, int64_t axis) const {
    lt_tensor* out = nullptr;
    check(lt_gather(req("gather"), indices.req("gather"), axis, &out));
    return Tensor(out);
  }
  Tensor scatter_add(const Tensor& indices, const Tensor& updates, int64_t axis) const {
    lt_tensor* out = nullptr;
    check(lt_scatter_add(req("scatter_add"), indices.req("scatter_add"), updates.req("scatter_add"),
                         axis, &out));
    return Tensor(out);
  }
  Tensor softmax(int64_t axis) const {
    if (detail::autocast_dtype() != LT_DTYPE_INVALID && detail::is_half(dtype()))
      return cast(f32).softmax(axis);
    lt_tensor* out = nullptr;
    check(lt_softmax(req("softmax"), axis, &out));
    return Tensor(out);
  }
  Tensor log_softmax(int64_t axis) const {
    if (detail::autocast_dtype() != LT_DTYPE_INVALID && detail::is_half(dtype()))
      return cast(f32).log_softmax(axis);
    lt_tensor* out = nullptr;
    check(lt_log_softmax(req("log_softmax"), axis, &out));
    return Tensor(out);
  }
  // Inside an autocast scope, an f32 operand of matmul / conv2d in the scope's dtype.
  Tensor to_autocast() const {
    DType low = detail::autocast_dtype();
    return low != LT_DTYPE_INVALID && defined() && dtype() == f32 ? cast(low) : *this;
  }
  // Collectives over the lt_dist_init process group (lazytensor/distributed.hpp): lazy ops like
  // any other, run when the graph runs. Every rank must call the same ones in the same order.
  Tensor all_reduce(lt_reduce_op op = LT_REDUCE_SUM) const {
    lt_tensor* out = nullptr;
    check(lt_all_reduce(req("all_reduce"), op, &out));
    return Tensor(out);
  }
  Tensor broadcast(int64_t root = 0) const {
    lt_tensor* out = nullptr;
    check(lt_broadcast(req("broadcast"), root, &out));
    return Tensor(out);
  }
  Tensor all_gather() const {
    lt_tensor* out = nullptr;
    check(lt_all_gather(req("all_gather"), &out));
    return Tensor(out);
  }

  // Throws when null; used by every op so a null tensor gives a clear error, not a crash.
  // Inside an API frame it also stamps the next op with the user's line (detail::trace_frame).
  lt_tensor* req(const char* what) const {
    if (!t_) throw Error(LT_STATUS_INVALID_ARGUMENT, std::string(what) + ": tensor is null");
    detail::trace_frame();
    return t_;
  }

 private:
  using UnaryFn = lt_error* (*)(lt_tensor*, lt_tensor**);
  using BinaryFn = lt_error* (*)(lt_tensor*, lt_tensor*, lt_tensor**);
  using ReduceFn = lt_error* (*)(lt_tensor*, const int64_t*, size_t, int, lt_tensor**);

  // lt_trace_location right before the op's C call: the core stamps the node it records.
  Tensor unary(UnaryFn fn, const char* name, const std::source_location& loc) const {
    lt_tensor* out = nullptr;
    lt_tensor* a = req(name);
    detail::trace_at(loc);
    check(fn(a, &out));
    return Tensor(out);
  }
  Tensor binary(BinaryFn fn, const Tensor& b, const char* name,
                const std::source_location& loc) const {
    if (fn == &lt_matmul && detail::autocast_dtype() != LT_DTYPE_INVALID) {
      Tensor x = to_autocast(), y = b.to_autocast();
      lt_tensor* out = nullptr;
      detail::trace_at(loc);
      check(fn(x.req(name), y.req(name), &out));
      return Tensor(out);
    }
    lt_tensor* out = nullptr;
    lt_tensor *x = req(name), *y = b.req(name);
    detail::trace_at(loc);
    check(fn(x, y, &out));
    return Tensor(out);
  }
  Tensor reduce(ReduceFn fn, const IntList& axes, bool keepdims, const char* name) const {
    if (detail::autocast_dtype() != LT_DTYPE_INVALID && detail::is_half(dtype()))
      return cast(f32).reduce(fn, axes, keepdims, name);  // reductions accumulate in f32
    lt_tensor* out = nullptr;
    check(fn(req(name), axes.data(), axes.size(), keepdims ? 1 : 0, &out));
    return Tensor(out);
  }
  Tensor like(double s) const {
    return scalar(device(), s, dtype());
  }
  void check_host_type(DType want, const char* what) const {
    DType have = dtype();
    if (have != want) {
      throw Error(LT_STATUS_DTYPE_MISMATCH, std::string(what) + ": tensor dtype " +
                                                dtype_name(have) + " does not match host type " +
                                                dtype_name(want));
    }
  }

  lt_tensor* t_ = nullptr;
};

// ---- free functions -----------------------------------------------------------------------

// One free function per UNARY / BINARY row of lt_ops.def (neg(a), add(a, b), ...).
#undef LT_CPP_UNARY
#undef LT_CPP_BINARY
// The caller's location, as the methods take it (lt::exp(x) records the user's line).
#define LT_CPP_UNARY(m, fn, name)                                                                \
  inline Tensor m(const Tensor& a, std::source_location loc = std::source_location::current()) { \
    return a.m(loc);                                                                             \
  }
#define LT_CPP_BINARY(m, fn, name)                                              \
  inline Tensor m(const Tensor& a, const Tensor& b,                             \
                  std::source_location loc = std::source_location::current()) { \
    return a.m(b, loc);                                                         \
  }
#define LT_OP(Camel, name, capi, cfn, cppfn, ...) LT_CPP_##capi(cppfn, cfn, name)
#include "lazytensor/lt_ops.def"
#undef LT_OP
#undef LT_CPP_UNARY
#undef LT_CPP_BINARY
#undef LT_CPP_CALL
#undef LT_CPP_NONE

inline Tensor pow(const Tensor& a, double b) {
  return a.pow(b);
}
// DLPack import (lt_tensor_from_dlpack): on success the tensor owns `managed` (in place where
// the device is host-addressable and the memory compact and 64-byte aligned, else copied and
// released at once); on error (an lt::Error) the caller still owns it.
inline Tensor from_dlpack(DLManagedTensor* managed, const Device& device) {
  lt_tensor* out = nullptr;
  check(lt_tensor_from_dlpack(device.get(), managed, &out));
  return Tensor(out);
}
inline Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  lt_tensor* out = nullptr;
  check(lt_where(cond.req("where"), a.req("where"), b.req("where"), &out));
  return Tensor(out);
}
inline Tensor cast(const Tensor& a, DType dtype) {
  return a.cast(dtype);
}

inline Tensor sum(const Tensor& a, IntList axes = {}, bool keepdims = false) {
  return a.sum(axes, keepdims);
}
inline Tensor mean(const Tensor& a, IntList axes = {}, bool keepdims = false) {
  return a.mean(axes, keepdims);
}
inline Tensor max(const Tensor& a, IntList axes = {}, bool keepdims = false) {
  return a.max(axes, keepdims);
}
inline Tensor min(const Tensor& a, IntList axes = {}, bool keepdims = false) {
  return a.min(axes, keepdims);
}
inline Tensor argmax(const Tensor& a, int64_t axis, bool keepdims = false) {
  return a.argmax(axis, keepdims);
}
inline Tensor reshape(const Tensor& a, IntList shape) {
  return a.reshape(shape);
}
inline Tensor permute(const Tensor& a, IntList perm) {
  return a.permute(perm);
}
inline Tensor broadcast_to(const Tensor& a, IntList shape) {
  return a.broadcast_to(shape);
}
inline Tensor slice(const Tensor& a, IntList starts, IntList stops, IntList steps) {
  return a.slice(starts, stops, steps);
}
inline Tensor pad(const Tensor& a, IntList before, IntList after, double value = 0.0) {
  return a.pad(before, after, value);
}
inline Tensor gather(const Tensor& a, const Tensor& indices, int64_t axis) {
  return a.gather(indices, axis);
}
inline Tensor scatter_add(const Tensor& a, const Tensor& indices, const Tensor& updates,
                          int64_t axis) {
  return a.scatter_add(indices, updates, axis);
}
inline Tensor softmax(const Tensor& a, int64_t axis) {
  return a.softmax(axis);
}
inline Tensor log_softmax(const Tensor& a, int64_t axis) {
  return a.log_softmax(axis);
}
inline Tensor all_reduce(const Tensor& a, lt_reduce_op op = LT_REDUCE_SUM) {
  return a.all_reduce(op);
}
inline Tensor broadcast(const Tensor& a, int64_t root = 0) {
  return a.broadcast(root);
}
inline Tensor all_gather(const Tensor& a) {
  return a.all_gather();
}

inline Tensor concat(const std::vector<Tensor>& inputs, int64_t axis) {
  std::vector<lt_tensor*> raw;
  raw.reserve(inputs.size());
  for (const Tensor& t : inputs) raw.push_back(t.req("concat"));
  lt_tensor* out = nullptr;
  check(lt_concat(raw.data(), raw.size(), axis, &out));
  return Tensor(out);
}

// x [N,C,H,W], weight [O,C/groups,KH,KW], bias [O] or a null Tensor.
inline Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                     IntList stride = {1, 1}, IntList padding = {0, 0}, IntList dilation = {1, 1},
                     int64_t groups = 1) {
  for (auto [name, list] : {std::pair<const char*, const IntList*>{"stride", &stride},
                            {"padding", &padding},
                            {"dilation", &dilation}}) {
    if (list->size() != 2) {
      throw Error(LT_STATUS_INVALID_ARGUMENT, std::string("conv2d: ") + name + " has " +
                                                  std::to_string(list->size()) +
                                                  " entries, expected 2 (H, W)");
    }
  }
  Tensor xa = x.to_autocast(), wa = weight.to_autocast(), ba = bias.to_autocast();
  lt_tensor* out = nullptr;
  check(lt_conv2d(xa.req("conv2d"), wa.req("conv2d"), ba.get(), stride.data(), padding.data(),
                  dilation.data(), groups, &out));
  return Tensor(out);
}

namespace detail {
using PoolFn = lt_error* (*)(lt_tensor*, const int64_t*, const int64_t*, const int64_t*,
                             lt_tensor**);
inline Tensor pool(PoolFn fn, const char* name, const Tensor& x, const IntList& kernel,
                   IntList stride, const IntList& padding) {
  if (stride.empty()) stride = kernel;  // PyTorch's default: stride = kernel
  for (const IntList* l : {&kernel, static_cast<const IntList*>(&stride), &padding}) {
    if (l->size() != 2) {
      throw Error(LT_STATUS_INVALID_ARGUMENT,
                  std::string(name) + ": kernel, stride and padding need 2 entries (H, W)");
    }
  }
  lt_tensor* out = nullptr;
  check(fn(x.req(name), kernel.data(), stride.data(), padding.data(), &out));
  return Tensor(out);
}
}  // namespace detail

// An empty stride means stride = kernel.
inline Tensor max_pool2d(const Tensor& x, IntList kernel, IntList stride = {},
                         IntList padding = {0, 0}) {
  return detail::pool(lt_max_pool2d, "max_pool2d", x, kernel, stride, padding);
}
inline Tensor avg_pool2d(const Tensor& x, IntList kernel, IntList stride = {},
                         IntList padding = {0, 0}) {
  return detail::pool(lt_avg_pool2d, "avg_pool2d", x, kernel, stride, padding);
}

// ---- creation -----------------------------------------------------------------------------

inline Tensor full(const Device& device, IntList shape, double value, DType dtype = LT_DTYPE_F32) {
  lt_tensor* out = nullptr;
  check(lt_full(device.get(), shape.data(), shape.size(), value, dtype, &out));
  return Tensor(out);
}
inline Tensor zeros(const Device& device, IntList shape, DType dtype = LT_DTYPE_F32) {
  return full(device, shape, 0.0, dtype);
}
inline Tensor ones(const Device& device, IntList shape, DType dtype = LT_DTYPE_F32) {
  return full(device, shape, 1.0, dtype);
}
inline Tensor scalar(const Device& device, double value, DType dtype = LT_DTYPE_F32) {
  return Tensor::scalar(device, value, dtype);
}
inline Tensor arange(const Device& device, double start, double stop, double step = 1.0,
                     DType dtype = LT_DTYPE_F32) {
  lt_tensor* out = nullptr;
  check(lt_arange(device.get(), start, stop, step, dtype, &out));
  return Tensor(out);
}
// `steps` values evenly spaced from `start` to `end`, both included (torch.linspace): the
// first half counts up from start and the second half down from end, so both ends are exact.
inline Tensor linspace(const Device& device, double start, double end, int64_t steps,
                       DType dtype = LT_DTYPE_F32) {
  if (steps < 0) {
    throw Error(LT_STATUS_INVALID_ARGUMENT,
                "linspace: steps must be non-negative, got " + std::to_string(steps));
  }
  const bool is_float = dtype == LT_DTYPE_F32 || dtype == LT_DTYPE_F64;
  const DType work = is_float ? dtype : LT_DTYPE_F64;
  if (steps <= 1) return full(device, {steps}, start, dtype);
  const double step = (end - start) / static_cast<double>(steps - 1);
  Tensor i = arange(device, 0, static_cast<double>(steps), 1.0, work);
  Tensor up = i.mul(step).add(start);
  Tensor down = i.sub(static_cast<double>(steps - 1)).mul(step).add(end);
  Tensor v = where(i.lt(Tensor::scalar(device, static_cast<double>(steps / 2), work)), up, down);
  return work == dtype ? v : v.cast(dtype);
}
inline Tensor random_uniform(const Device& device, IntList shape, uint64_t seed, double low = 0.0,
                             double high = 1.0, DType dtype = LT_DTYPE_F32) {
  lt_tensor* out = nullptr;
  check(lt_random_uniform(device.get(), shape.data(), shape.size(), seed, low, high, dtype, &out));
  return Tensor(out);
}
inline Tensor random_normal(const Device& device, IntList shape, uint64_t seed, double mean = 0.0,
                            double stddev = 1.0, DType dtype = LT_DTYPE_F32) {
  lt_tensor* out = nullptr;
  check(
      lt_random_normal(device.get(), shape.data(), shape.size(), seed, mean, stddev, dtype, &out));
  return Tensor(out);
}

// Records any op by name (docs/ops.md or a registered custom op). `device` is needed only
// when there are no inputs.
inline Tensor apply(const Device& device, const std::string& op, const std::vector<Tensor>& inputs,
                    const std::vector<Attr>& attrs = {}) {
  std::vector<lt_tensor*> raw;
  raw.reserve(inputs.size());
  for (const Tensor& t : inputs) raw.push_back(t.req(op.c_str()));
  std::vector<lt_attr> cattrs;
  cattrs.reserve(attrs.size());
  for (const Attr& a : attrs) cattrs.push_back(a.c_attr());
  lt_tensor* out = nullptr;
  check(lt_apply(device.get(), op.c_str(), raw.data(), raw.size(), cattrs.data(), cattrs.size(),
                 &out));
  return Tensor(out);
}
inline Tensor apply(const std::string& op, const std::vector<Tensor>& inputs,
                    const std::vector<Attr>& attrs = {}) {
  return apply(Device(), op, inputs, attrs);
}

// ---- operators ----------------------------------------------------------------------------
// A scalar operand becomes lt_scalar of the tensor operand's dtype (a graph parameter), so
// `x * 0.5` on an i32 tensor multiplies by 0; cast first when that is not wanted.
// Comparison operators return bool tensors; use Tensor::is_same for handle identity.

namespace detail {
// A tensor operand with the source location of the expression that uses it (operators).
struct Traced {
  Traced(const Tensor& t, std::source_location loc = std::source_location::current())
      : t(t), loc(loc) {}
  const Tensor& t;
  std::source_location loc;
};
}  // namespace detail

inline Tensor operator-(detail::Traced a) {
  return a.t.neg(a.loc);
}
inline Tensor operator!(const Tensor& a) {
  return a.logical_not();
}

// Operators cannot take a defaulted std::source_location, so their tensor operand converts to
// detail::Traced, whose constructor's default argument is evaluated at the user's expression.
#define LT_DETAIL_BINARY_OPERATOR(OP, METHOD)                               \
  inline Tensor operator OP(detail::Traced a, const Tensor& b) {            \
    return a.t.METHOD(b, a.loc);                                            \
  }                                                                         \
  inline Tensor operator OP(detail::Traced a, double s) {                   \
    return a.t.METHOD(Tensor::scalar(a.t.device(), s, a.t.dtype()), a.loc); \
  }                                                                         \
  inline Tensor operator OP(double s, detail::Traced b) {                   \
    return Tensor::scalar(b.t.device(), s, b.t.dtype()).METHOD(b.t, b.loc); \
  }
LT_DETAIL_BINARY_OPERATOR(+, add)
LT_DETAIL_BINARY_OPERATOR(-, sub)
LT_DETAIL_BINARY_OPERATOR(*, mul)
LT_DETAIL_BINARY_OPERATOR(/, div)
LT_DETAIL_BINARY_OPERATOR(==, eq)
LT_DETAIL_BINARY_OPERATOR(!=, ne)
LT_DETAIL_BINARY_OPERATOR(<, lt)
LT_DETAIL_BINARY_OPERATOR(<=, le)
LT_DETAIL_BINARY_OPERATOR(>, gt)
LT_DETAIL_BINARY_OPERATOR(>=, ge)
LT_DETAIL_BINARY_OPERATOR(&&, and_)
LT_DETAIL_BINARY_OPERATOR(||, or_)
#undef LT_DETAIL_BINARY_OPERATOR

inline Tensor& operator+=(Tensor& a, const Tensor& b) {
  return a = a + b;
}
inline Tensor& operator-=(Tensor& a, const Tensor& b) {
  return a = a - b;
}
inline Tensor& operator*=(Tensor& a, const Tensor& b) {
  return a = a * b;
}
inline Tensor& operator/=(Tensor& a, const Tensor& b) {
  return a = a / b;
}
inline Tensor& operator+=(Tensor& a, double s) {
  return a = a + s;
}
inline Tensor& operator-=(Tensor& a, double s) {
  return a = a - s;
}
inline Tensor& operator*=(Tensor& a, double s) {
  return a = a * s;
}
inline Tensor& operator/=(Tensor& a, double s) {
  return a = a / s;
}

// ---- printing -----------------------------------------------------------------------------

namespace detail {
inline float bf16_to_float(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline float f16_to_float(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    v = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else
    v = std::ldexp(static_cast<float>(mant + 1024), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}
inline std::string format_element(DType dtype, const uint8_t* p) {
  char buf[64];
  switch (dtype) {
    case LT_DTYPE_F32: {
      float v;
      std::memcpy(&v, p, 4);
      std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
      break;
    }
    case LT_DTYPE_F64: {
      double v;
      std::memcpy(&v, p, 8);
      std::snprintf(buf, sizeof buf, "%g", v);
      break;
    }
    case LT_DTYPE_I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      std::snprintf(buf, sizeof buf, "%d", static_cast<int>(v));
      break;
    }
    case LT_DTYPE_I64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
      break;
    }
    case LT_DTYPE_BOOL:
      return *p ? "true" : "false";
    case LT_DTYPE_BF16:
    case LT_DTYPE_F16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      float v = dtype == LT_DTYPE_BF16 ? bf16_to_float(h) : f16_to_float(h);
      std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
      break;
    }
    default:
      return "?";
  }
  return buf;
}
}  // namespace detail

// Tensors with more elements than this print the first and last kPrintEdgeItems of each
// long dim with "..." between (NumPy's threshold and edgeitems).
inline constexpr int64_t kPrintThreshold = 1000;
inline constexpr int64_t kPrintEdgeItems = 3;

// tensor([[1, 2, 3],
//         [4, 5, 6]], dtype=f32, shape=[2,3])
// Materialises the tensor. Iterative over dims (no recursion on rank).
inline std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(null)";
  const DType dtype = t.dtype();
  const std::vector<int64_t> shape = t.shape();
  const size_t rank = shape.size();
  const int64_t numel = t.numel();
  const std::vector<uint8_t> bytes = t.to_bytes();
  const size_t esize = dtype_size(dtype);
  const char* prefix = "tensor(";
  os << prefix;
  if (rank == 0) {
    os << detail::format_element(dtype, bytes.data());
  } else if (numel == 0) {
    os << "[]";
  } else {
    const bool truncate = numel > kPrintThreshold;
    // shown[d]: the indices printed along dim d; -1 marks the "..." gap.
    std::vector<std::vector<int64_t>> shown(rank);
    std::vector<int64_t> strides(rank, 1);
    for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * shape[d];
    for (size_t d = 0; d < rank; ++d) {
      if (truncate && shape[d] > 2 * kPrintEdgeItems) {
        for (int64_t i = 0; i < kPrintEdgeItems; ++i) shown[d].push_back(i);
        shown[d].push_back(-1);
        for (int64_t i = shape[d] - kPrintEdgeItems; i < shape[d]; ++i) shown[d].push_back(i);
      } else {
        for (int64_t i = 0; i < shape[d]; ++i) shown[d].push_back(i);
      }
    }
    const size_t indent = std::strlen(prefix);
    std::vector<size_t> pos(rank, 0);
    size_t level = 0;
    os << "[";
    for (;;) {
      const int64_t idx = shown[level][pos[level]];
      if (idx >= 0 && level + 1 < rank) {
        os << "[";
        pos[++level] = 0;
        continue;
      }
      if (idx < 0) {
        os << "...";
      } else {
        int64_t flat = 0;
        for (size_t d = 0; d < rank; ++d) flat += shown[d][pos[d]] * strides[d];
        os << detail::format_element(dtype, bytes.data() + static_cast<size_t>(flat) * esize);
      }
      bool done = false;
      for (;;) {
        if (++pos[level] < shown[level].size()) {
          os << ",";
          if (level + 1 == rank) {
            os << " ";
          } else {
            for (size_t k = level + 1; k < rank; ++k) os << "\n";
            os << std::string(indent + level + 1, ' ');
          }
          break;
        }
        os << "]";
        if (level == 0) {
          done = true;
          break;
        }
        --level;
      }
      if (done) break;
    }
  }
  return os << ", dtype=" << dtype_name(dtype) << ", shape=" << detail::shape_string(shape) << ")";
}

inline std::string to_string(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

}  // namespace lt

#endif  // LAZYTENSOR_LAZYTENSOR_HPP
