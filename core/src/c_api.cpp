// c_api.cpp — every lt_* entry point of lt.h. Each one validates its arguments and runs its
// body through lt::guard(), the single place where C++ exceptions become lt_error values.
#include <climits>
#include <cstring>

#include "autograd/autograd.h"  // autograd hook (train engineer)
#include "error.h"
#include "ops.h"
#include "device_client.h"
#include "executor.h"
#include "runtime.h"

using namespace lt;

namespace {

#define LT_STR2(x) #x
#define LT_STR(x) LT_STR2(x)

template <class T>
T* need(T* p, const char* fn, const char* what) {
  if (!p) fail(LT_STATUS_INVALID_ARGUMENT, "{}: {} is NULL", fn, what);
  return p;
}
// A tensor handle must also be live (not used after its last lt_tensor_free).
lt_tensor* need(lt_tensor* p, const char* fn, const char* what) {
  return live_tensor(p, fn, what);
}

// A C caller may pass any int as lt_dtype; reading it through memcpy keeps out-of-range
// values defined behaviour in C++ (they are then rejected by valid_dtype).
int dtype_raw(const lt_dtype& d) {
  int raw = 0;
  static_assert(sizeof(lt_dtype) == sizeof(int));
  std::memcpy(&raw, &d, sizeof raw);
  return raw;
}
bool valid_dtype(const lt_dtype& d) {
  int raw = dtype_raw(d);
  return raw >= LT_DTYPE_F32 && raw <= LT_DTYPE_F16;
}

Dims checked_shape(const char* fn, const int64_t* shape, size_t rank) {
  if (rank && !shape) fail(LT_STATUS_INVALID_ARGUMENT, "{}: shape is NULL with rank {}", fn, rank);
  if (rank > 64) fail(LT_STATUS_INVALID_ARGUMENT, "{}: rank {} is too large", fn, rank);
  Dims d(shape, rank);
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) {
    if (shape[i] < 0)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: negative dimension in shape {}", fn, dims_str(d));
    if (__builtin_mul_overflow(n, shape[i], &n) || n > (INT64_C(1) << 48))
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: shape {} is too large", fn, dims_str(d));
  }
  return d;
}

// lt_trace_location: the user's file and line for the next op this thread records.
struct TraceLocation {
  const char* file;
  uint32_t line;
};
[[gnu::tls_model("initial-exec")]] thread_local TraceLocation t_trace{nullptr,
                                                                      0};  // runtime.cpp: why

// The one path from a C op call to the registry (lt_apply and every typed wrapper).
lt_error* apply_id(lt_device* device, uint16_t op, lt_tensor* const* inputs, size_t n,
                   const lt_attr* attrs, size_t num_attrs, lt_tensor** out) {
  const TraceLocation here = t_trace;  // consumed by this op, even one that fails
  t_trace.file = nullptr;
  return guard([&] {
    const char* name = op_name(op);
    if (!out) fail(LT_STATUS_INVALID_ARGUMENT, "{}: out is NULL", name);
    if (n && !inputs) fail(LT_STATUS_INVALID_ARGUMENT, "{}: inputs is NULL", name);
    if (num_attrs && !attrs) fail(LT_STATUS_INVALID_ARGUMENT, "{}: attrs is NULL", name);
    NodeRef small[4];
    std::vector<NodeRef> big;
    NodeRef* refs = small;
    if (n > 4) {
      big.resize(n);
      refs = big.data();
    }
    Device* dev = nullptr;
    for (size_t i = 0; i < n; ++i) {
      if (!is_live(inputs[i])) live_tensor(inputs[i], name, fmt::format("input {}", i).c_str());
      if (dev && inputs[i]->device != dev)
        fail(LT_STATUS_INVALID_ARGUMENT, "{}: inputs are on different devices ({} and {})", name,
             dev->name, inputs[i]->device->name);
      dev = inputs[i]->device;
      refs[i] = NodeRef::share(inputs[i]->node);
    }
    if (!dev) dev = device;
    if (!dev) fail(LT_STATUS_INVALID_ARGUMENT, "{}: device is NULL and there are no inputs", name);
    OpCall call{dev, op, refs, n, attrs, num_attrs};
    NodeRef r = apply_op(call);
    // A node made now (not an operand returned as is) keeps the location.
    if (here.file && !r->trace_file && r->refs.load(std::memory_order_relaxed) == 1) {
      r->trace_file = here.file;
      r->trace_line = here.line;
    }
    dev->runtime->metrics.ops_traced.fetch_add(1, std::memory_order_relaxed);
    *out = tensor_new(dev, std::move(r));
    autograd::on_apply(name, inputs, n, attrs, num_attrs, *out);  // autograd hook (train)
  });
}

lt_error* unary(uint16_t op, lt_tensor* a, lt_tensor** out) {
  return apply_id(nullptr, op, &a, 1, nullptr, 0, out);
}
lt_error* binary(uint16_t op, lt_tensor* a, lt_tensor* b, lt_tensor** out) {
  lt_tensor* in[2] = {a, b};
  return apply_id(nullptr, op, in, 2, nullptr, 0, out);
}

lt_attr attr_int(const char* n, int64_t v) {
  lt_attr a{};
  a.name = n, a.kind = LT_ATTR_INT, a.i = v;
  return a;
}
lt_attr attr_float(const char* n, double v) {
  lt_attr a{};
  a.name = n, a.kind = LT_ATTR_FLOAT, a.f = v;
  return a;
}
lt_attr attr_ints(const char* n, const int64_t* v, size_t len) {
  lt_attr a{};
  a.name = n, a.kind = LT_ATTR_INTS, a.ints = v, a.ints_len = len;
  return a;
}

lt_error* reduce(uint16_t op, lt_tensor* a, const int64_t* axes, size_t num_axes, int keepdims,
                 lt_tensor** out) {
  if (num_axes && !axes)
    return make_error(LT_STATUS_INVALID_ARGUMENT,
                      std::string(op_name(op)) + ": axes is NULL with num_axes > 0");
  lt_attr at[2] = {attr_ints("axes", axes, num_axes), attr_int("keepdims", keepdims != 0)};
  return apply_id(nullptr, op, &a, 1, at, 2, out);
}

lt_error* pool(uint16_t op, lt_tensor* x, const int64_t* kernel, const int64_t* stride,
               const int64_t* padding, lt_tensor** out) {
  lt_attr at[3];
  size_t n = 0;
  if (kernel) at[n++] = attr_ints("kernel", kernel, 2);
  if (stride) at[n++] = attr_ints("stride", stride, 2);
  if (padding) at[n++] = attr_ints("padding", padding, 2);
  return apply_id(nullptr, op, &x, 1, at, n, out);
}

lt_error* random_op(uint16_t op, lt_device* device, const int64_t* shape, size_t rank,
                    uint64_t seed, const char* p1, double v1, const char* p2, double v2,
                    lt_dtype dtype, lt_tensor** out) {
  lt_tensor* seed_t = nullptr;
  lt_error* err = guard([&] {
    need(device, op_name(op), "device");
    checked_shape(op_name(op), shape, rank);
    seed_t = tensor_new(device, make_scalar_leaf(device, LT_DTYPE_I64, seed));
  });
  if (err) return err;
  lt_attr at[4] = {attr_ints("shape", shape, rank), attr_float(p1, v1), attr_float(p2, v2),
                   attr_int("dtype", dtype_raw(dtype))};
  err = apply_id(device, op, &seed_t, 1, at, 4, out);
  tensor_release(seed_t);
  return err;
}

}  // namespace

extern "C" {

LT_API const char* lt_version_string(void) {
  return LT_STR(LT_VERSION_MAJOR) "." LT_STR(LT_VERSION_MINOR) "." LT_STR(LT_VERSION_PATCH);
}
LT_API uint32_t lt_version(void) {
  return (LT_VERSION_MAJOR << 16) | (LT_VERSION_MINOR << 8) | LT_VERSION_PATCH;
}

LT_API void lt_trace_location(const char* file, uint32_t line) {
  t_trace.file = file;
  t_trace.line = line;
}
LT_API int lt_tensor_traced_at(const lt_tensor* tensor, const char** file, uint32_t* line) {
  if (!is_live(tensor) || !tensor->node->trace_file) return 0;
  if (file) *file = tensor->node->trace_file;
  if (line) *line = tensor->node->trace_line;
  return 1;
}

// ---- runtime ----

LT_API lt_error* lt_runtime_create(const lt_runtime_options* options, lt_runtime** out) {
  return guard([&] {
    need(out, "lt_runtime_create", "out");
    *out = runtime_create(options);
  });
}
LT_API void lt_runtime_destroy(lt_runtime* runtime) {
  if (runtime) runtime_release(runtime);
}
LT_API lt_error* lt_runtime_plugin_report(lt_runtime* runtime, int json, char** out) {
  return guard([&] {
    need(runtime, "lt_runtime_plugin_report", "runtime");
    need(out, "lt_runtime_plugin_report", "out");
    std::string s = plugin_report(runtime, json != 0);
    char* c = static_cast<char*>(std::malloc(s.size() + 1));
    if (!c) throw std::bad_alloc();
    std::memcpy(c, s.c_str(), s.size() + 1);
    *out = c;
  });
}

LT_API size_t lt_runtime_device_count(const lt_runtime* runtime) {
  return runtime ? runtime->devices.size() : 0;
}
LT_API lt_device* lt_runtime_device(lt_runtime* runtime, size_t index) {
  if (!runtime || index >= runtime->devices.size()) return nullptr;
  return runtime->devices[index].get();
}
LT_API lt_device* lt_runtime_default_device(lt_runtime* runtime) {
  return runtime ? runtime->default_device : nullptr;
}
LT_API lt_error* lt_runtime_find_device(lt_runtime* runtime, const char* name, lt_device** out) {
  return guard([&] {
    need(runtime, "lt_runtime_find_device", "runtime");
    need(name, "lt_runtime_find_device", "name");
    need(out, "lt_runtime_find_device", "out");
    for (auto& d : runtime->devices)
      if (d->name == name || (d->plugin->name == name && d->index == 0)) {
        *out = d.get();
        return;
      }
    std::string have;
    for (auto& d : runtime->devices) have += (have.empty() ? "" : ", ") + d->name;
    fail(LT_STATUS_NOT_FOUND, "lt_runtime_find_device: no device '{}' (available: {})", name, have);
  });
}
LT_API const char* lt_device_name(const lt_device* device) {
  return device ? device->name.c_str() : "";
}
LT_API const char* lt_device_backend(const lt_device* device) {
  return device ? device->plugin->name.c_str() : "";
}
LT_API lt_runtime* lt_device_runtime(const lt_device* device) {
  return device ? device->runtime : nullptr;
}

// ---- tensors ----

LT_API lt_error* lt_tensor_from_host(lt_device* device, lt_dtype dtype, const int64_t* shape,
                                     size_t rank, const void* data, size_t nbytes,
                                     lt_tensor** out) {
  return guard([&] {
    const char* fn = "lt_tensor_from_host";
    need(device, fn, "device");
    need(out, fn, "out");
    if (!valid_dtype(dtype))
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: invalid dtype {}", fn, dtype_raw(dtype));
    Dims d = checked_shape(fn, shape, rank);
    size_t want = checked_bytes(fn, dtype, d);
    if (nbytes != want)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: nbytes {} != {} for {} {}", fn, nbytes, want,
           lt_dtype_name(dtype), dims_str(d));
    if (want && !data) fail(LT_STATUS_INVALID_ARGUMENT, "{}: data is NULL", fn);
    NodeRef leaf = make_leaf(device, dtype, d);
    BufferPtr buf = device->allocator->allocate(want);
    upload_to(device, buf.get(), data, want);
    leaf->buffer = std::move(buf);
    leaf->materialized.store(true, std::memory_order_release);
    device->runtime->metrics.bytes_to_device.fetch_add(want, std::memory_order_relaxed);
    *out = tensor_new(device, std::move(leaf));
  });
}

LT_API lt_error* lt_scalar(lt_device* device, lt_dtype dtype, double value, lt_tensor** out) {
  return guard([&] {
    need(device, "lt_scalar", "device");
    need(out, "lt_scalar", "out");
    if (!valid_dtype(dtype))
      fail(LT_STATUS_INVALID_ARGUMENT, "lt_scalar: invalid dtype {}", dtype_raw(dtype));
    *out = tensor_new(device, make_scalar_leaf(device, dtype, encode_scalar(dtype, value)));
  });
}

static void materialize_tensor(lt_tensor* t) {
  Node* n = t->node;
  if (n->is_leaf() || n->materialized.load(std::memory_order_acquire)) return;
  std::vector<NodeRef> roots{NodeRef::share(n)};
  materialize(t->device, roots);
}

LT_API lt_error* lt_tensor_to_host(lt_tensor* tensor, void* data, size_t nbytes) {
  return guard([&] {
    need(tensor, "lt_tensor_to_host", "tensor");
    Node* n = tensor->node;
    size_t want = n->nbytes();
    if (nbytes != want)
      fail(LT_STATUS_INVALID_ARGUMENT, "lt_tensor_to_host: nbytes {} != {} for {} {}", nbytes, want,
           lt_dtype_name(n->dtype), dims_str(n->shape));
    if (want && !data) fail(LT_STATUS_INVALID_ARGUMENT, "lt_tensor_to_host: data is NULL");
    if (n->has_scalar) {
      std::memcpy(data, &n->scalar_bits, want);
      return;
    }
    materialize_tensor(tensor);
    if (!n->buffer) fail(LT_STATUS_INTERNAL, "lt_tensor_to_host: tensor has no buffer");
    download_from(tensor->device, n->buffer.get(), data, want);
    tensor->device->runtime->metrics.bytes_from_device.fetch_add(want, std::memory_order_relaxed);
  });
}

LT_API lt_error* lt_tensor_materialize(lt_tensor* tensor) {
  return guard([&] { materialize_tensor(need(tensor, "lt_tensor_materialize", "tensor")); });
}

// Freed handles (is_live false) read as NULL here: see lt.h.
LT_API lt_tensor* lt_tensor_retain(lt_tensor* tensor) {
  if (!is_live(tensor)) return nullptr;
  tensor->refs.fetch_add(1, std::memory_order_relaxed);
  return tensor;
}
LT_API void lt_tensor_free(lt_tensor* tensor) {
  if (is_live(tensor)) tensor_release(tensor);  // a second free of a handle is ignored
}
LT_API lt_dtype lt_tensor_dtype(const lt_tensor* t) {
  return is_live(t) ? t->node->dtype : LT_DTYPE_INVALID;
}
LT_API size_t lt_tensor_rank(const lt_tensor* t) {
  return is_live(t) ? t->node->shape.size() : 0;
}
LT_API const int64_t* lt_tensor_shape(const lt_tensor* t) {
  return is_live(t) ? t->node->shape.data() : nullptr;
}
LT_API int64_t lt_tensor_numel(const lt_tensor* t) {
  return is_live(t) ? t->node->shape.numel() : 0;
}
LT_API lt_device* lt_tensor_device(const lt_tensor* t) {
  return is_live(t) ? t->device : nullptr;
}
LT_API int lt_tensor_is_materialized(const lt_tensor* t) {
  if (!is_live(t)) return 0;
  Node* n = t->node;
  if (n->has_scalar || n->materialized.load(std::memory_order_acquire)) return 1;
  if (!t->device->queue) return 0;
  TicketPtr ticket;  // async_execution: a queued tensor counts once its graph has run
  {
    std::lock_guard lk(n->device->exec_mu);
    ticket = n->ticket;
  }
  if (!ticket) return 0;
  ticket->wait();
  return ticket->failed() ? 0 : 1;
}

LT_API lt_error* lt_tensor_set_name(lt_tensor* tensor, const char* name) {
  return guard([&] {
    need(tensor, "lt_tensor_set_name", "tensor");
    Node* n = tensor->node;
    std::lock_guard lk(n->device->exec_mu);  // collection reads names under it
    if (name && *name)
      n->name = std::make_unique<std::string>(name);
    else
      n->name.reset();
  });
}
LT_API lt_error* lt_tensor_mark_dynamic(lt_tensor* tensor, size_t dim, int dynamic) {
  return guard([&] {
    need(tensor, "lt_tensor_mark_dynamic", "tensor");
    Node* n = tensor->node;
    if (dim >= n->shape.size() || dim >= 32)
      fail(LT_STATUS_INVALID_ARGUMENT, "lt_tensor_mark_dynamic: dim {} of a tensor of shape {}{}",
           dim, dims_str(n->shape), dim >= 32 ? " (marks cover dims 0..31)" : "");
    if (dynamic != 0 && dynamic != 1)
      fail(LT_STATUS_INVALID_ARGUMENT, "lt_tensor_mark_dynamic: dynamic is {}, not 0 or 1",
           dynamic);
    std::lock_guard lk(n->device->exec_mu);  // collection reads marks under it
    const uint32_t bit = 1u << dim;
    n->dynamic_dims = dynamic ? n->dynamic_dims | bit : n->dynamic_dims & ~bit;
    n->static_dims = dynamic ? n->static_dims & ~bit : n->static_dims | bit;
  });
}
LT_API const char* lt_tensor_name(const lt_tensor* tensor) {
  if (!is_live(tensor) || !tensor->node->name) return "";
  return tensor->node->name->c_str();
}

LT_API lt_error* lt_tensor_to_device(lt_tensor* tensor, lt_device* device, lt_tensor** out) {
  return guard([&] {
    need(tensor, "lt_tensor_to_device", "tensor");
    need(device, "lt_tensor_to_device", "device");
    need(out, "lt_tensor_to_device", "out");
    if (tensor->device == device) {
      *out = lt_tensor_retain(tensor);
      return;
    }
    Node* n = tensor->node;
    std::vector<unsigned char> host(n->nbytes());
    lt_error* e = lt_tensor_to_host(tensor, host.data(), host.size());
    if (e) {
      Error err(lt_error_code(e), lt_error_message(e));
      lt_error_destroy(e);
      throw err;
    }
    e = lt_tensor_from_host(device, n->dtype, n->shape.data(), n->shape.size(), host.data(),
                            host.size(), out);
    if (e) {
      Error err(lt_error_code(e), lt_error_message(e));
      lt_error_destroy(e);
      throw err;
    }
  });
}

LT_API lt_error* lt_sync(lt_device* device) {
  return guard([&] { sync_device(need(device, "lt_sync", "device")); });
}

// ---- ops ----

LT_API lt_error* lt_apply(lt_device* device, const char* op, lt_tensor* const* inputs,
                          size_t num_inputs, const lt_attr* attrs, size_t num_attrs,
                          lt_tensor** out) {
  uint16_t id = 0;
  if (!op) return make_error(LT_STATUS_INVALID_ARGUMENT, "lt_apply: op is NULL");
  if (!find_op(op, &id) || id == kOpInput)
    return make_error(LT_STATUS_UNKNOWN_OP, std::string("lt_apply: unknown op '") + op + "'");
  return apply_id(device, id, inputs, num_inputs, attrs, num_attrs, out);
}

// The mechanical functions of lt.h: one per UNARY / BINARY row of lt_ops.def.
#define LT_CAPI_UNARY(fn, id)                        \
  LT_API lt_error* fn(lt_tensor* a, lt_tensor** o) { \
    return unary(id, a, o);                          \
  }
#define LT_CAPI_BINARY(fn, id)                                     \
  LT_API lt_error* fn(lt_tensor* a, lt_tensor* b, lt_tensor** o) { \
    return binary(id, a, b, o);                                    \
  }
#define LT_CAPI_CALL(fn, id)
#define LT_CAPI_NONE(fn, id)
#define LT_OP(Camel, name, capi, cfn, ...) LT_CAPI_##capi(cfn, kOp##Camel)
#include "lazytensor/lt_ops.def"
#undef LT_OP
#undef LT_CAPI_UNARY
#undef LT_CAPI_BINARY
#undef LT_CAPI_CALL
#undef LT_CAPI_NONE

LT_API lt_error* lt_where(lt_tensor* cond, lt_tensor* a, lt_tensor* b, lt_tensor** out) {
  lt_tensor* in[3] = {cond, a, b};
  return apply_id(nullptr, kOpWhere, in, 3, nullptr, 0, out);
}
LT_API lt_error* lt_cast(lt_tensor* a, lt_dtype dtype, lt_tensor** out) {
  lt_attr at = attr_int("dtype", dtype_raw(dtype));
  return apply_id(nullptr, kOpCast, &a, 1, &at, 1, out);
}

LT_API lt_error* lt_full(lt_device* device, const int64_t* shape, size_t rank, double value,
                         lt_dtype dtype, lt_tensor** out) {
  if (rank && !shape) return make_error(LT_STATUS_INVALID_ARGUMENT, "full: shape is NULL");
  lt_attr at[3] = {attr_ints("shape", shape, rank), attr_float("value", value),
                   attr_int("dtype", dtype_raw(dtype))};
  return apply_id(device, kOpFull, nullptr, 0, at, 3, out);
}
LT_API lt_error* lt_arange(lt_device* device, double start, double stop, double step,
                           lt_dtype dtype, lt_tensor** out) {
  lt_attr at[4] = {attr_float("start", start), attr_float("stop", stop), attr_float("step", step),
                   attr_int("dtype", dtype_raw(dtype))};
  return apply_id(device, kOpArange, nullptr, 0, at, 4, out);
}
LT_API lt_error* lt_random_uniform(lt_device* device, const int64_t* shape, size_t rank,
                                   uint64_t seed, double low, double high, lt_dtype dtype,
                                   lt_tensor** out) {
  return random_op(kOpRandomUniform, device, shape, rank, seed, "low", low, "high", high, dtype,
                   out);
}
LT_API lt_error* lt_random_normal(lt_device* device, const int64_t* shape, size_t rank,
                                  uint64_t seed, double mean, double stddev, lt_dtype dtype,
                                  lt_tensor** out) {
  return random_op(kOpRandomNormal, device, shape, rank, seed, "mean", mean, "std", stddev, dtype,
                   out);
}

LT_API lt_error* lt_sum(lt_tensor* a, const int64_t* axes, size_t n, int keep, lt_tensor** out) {
  return reduce(kOpSum, a, axes, n, keep, out);
}
LT_API lt_error* lt_mean(lt_tensor* a, const int64_t* axes, size_t n, int keep, lt_tensor** out) {
  return reduce(kOpMean, a, axes, n, keep, out);
}
LT_API lt_error* lt_max(lt_tensor* a, const int64_t* axes, size_t n, int keep, lt_tensor** out) {
  return reduce(kOpMax, a, axes, n, keep, out);
}
LT_API lt_error* lt_min(lt_tensor* a, const int64_t* axes, size_t n, int keep, lt_tensor** out) {
  return reduce(kOpMin, a, axes, n, keep, out);
}
LT_API lt_error* lt_argmax(lt_tensor* a, int64_t axis, int keepdims, lt_tensor** out) {
  lt_attr at[2] = {attr_int("axis", axis), attr_int("keepdims", keepdims != 0)};
  return apply_id(nullptr, kOpArgmax, &a, 1, at, 2, out);
}

LT_API lt_error* lt_reshape(lt_tensor* a, const int64_t* shape, size_t rank, lt_tensor** out) {
  if (rank && !shape) return make_error(LT_STATUS_INVALID_ARGUMENT, "reshape: shape is NULL");
  lt_attr at = attr_ints("shape", shape, rank);
  return apply_id(nullptr, kOpReshape, &a, 1, &at, 1, out);
}
LT_API lt_error* lt_permute(lt_tensor* a, const int64_t* perm, size_t rank, lt_tensor** out) {
  if (rank && !perm) return make_error(LT_STATUS_INVALID_ARGUMENT, "permute: perm is NULL");
  lt_attr at = attr_ints("perm", perm, rank);
  return apply_id(nullptr, kOpPermute, &a, 1, &at, 1, out);
}
LT_API lt_error* lt_broadcast_to(lt_tensor* a, const int64_t* shape, size_t rank, lt_tensor** out) {
  if (rank && !shape) return make_error(LT_STATUS_INVALID_ARGUMENT, "broadcast_to: shape is NULL");
  lt_attr at = attr_ints("shape", shape, rank);
  return apply_id(nullptr, kOpBroadcastTo, &a, 1, &at, 1, out);
}
LT_API lt_error* lt_slice(lt_tensor* a, const int64_t* starts, const int64_t* stops,
                          const int64_t* steps, size_t rank, lt_tensor** out) {
  if (rank && (!starts || !stops || !steps))
    return make_error(LT_STATUS_INVALID_ARGUMENT, "slice: starts, stops or steps is NULL");
  lt_attr at[3] = {attr_ints("starts", starts, rank), attr_ints("stops", stops, rank),
                   attr_ints("steps", steps, rank)};
  return apply_id(nullptr, kOpSlice, &a, 1, at, 3, out);
}
LT_API lt_error* lt_concat(lt_tensor* const* inputs, size_t num_inputs, int64_t axis,
                           lt_tensor** out) {
  lt_attr at = attr_int("axis", axis);
  return apply_id(nullptr, kOpConcat, inputs, num_inputs, &at, 1, out);
}
LT_API lt_error* lt_pad(lt_tensor* a, const int64_t* before, const int64_t* after, size_t rank,
                        double value, lt_tensor** out) {
  if (rank && (!before || !after))
    return make_error(LT_STATUS_INVALID_ARGUMENT, "pad: before or after is NULL");
  lt_attr at[3] = {attr_ints("before", before, rank), attr_ints("after", after, rank),
                   attr_float("value", value)};
  return apply_id(nullptr, kOpPad, &a, 1, at, 3, out);
}
LT_API lt_error* lt_gather(lt_tensor* a, lt_tensor* indices, int64_t axis, lt_tensor** out) {
  lt_tensor* in[2] = {a, indices};
  lt_attr at = attr_int("axis", axis);
  return apply_id(nullptr, kOpGather, in, 2, &at, 1, out);
}
LT_API lt_error* lt_scatter_add(lt_tensor* a, lt_tensor* indices, lt_tensor* updates, int64_t axis,
                                lt_tensor** out) {
  lt_tensor* in[3] = {a, indices, updates};
  lt_attr at = attr_int("axis", axis);
  return apply_id(nullptr, kOpScatterAdd, in, 3, &at, 1, out);
}

LT_API lt_error* lt_conv2d(lt_tensor* x, lt_tensor* weight, lt_tensor* bias, const int64_t* stride,
                           const int64_t* padding, const int64_t* dilation, int64_t groups,
                           lt_tensor** out) {
  lt_tensor* in[3] = {x, weight, bias};
  lt_attr at[4];
  size_t n = 0;
  if (stride) at[n++] = attr_ints("stride", stride, 2);
  if (padding) at[n++] = attr_ints("padding", padding, 2);
  if (dilation) at[n++] = attr_ints("dilation", dilation, 2);
  at[n++] = attr_int("groups", groups);
  return apply_id(nullptr, kOpConv2d, in, bias ? 3 : 2, at, n, out);
}
LT_API lt_error* lt_max_pool2d(lt_tensor* x, const int64_t* kernel, const int64_t* stride,
                               const int64_t* padding, lt_tensor** out) {
  return pool(kOpMaxPool2d, x, kernel, stride, padding, out);
}
LT_API lt_error* lt_avg_pool2d(lt_tensor* x, const int64_t* kernel, const int64_t* stride,
                               const int64_t* padding, lt_tensor** out) {
  return pool(kOpAvgPool2d, x, kernel, stride, padding, out);
}
LT_API lt_error* lt_softmax(lt_tensor* a, int64_t axis, lt_tensor** out) {
  lt_attr at = attr_int("axis", axis);
  return apply_id(nullptr, kOpSoftmax, &a, 1, &at, 1, out);
}
LT_API lt_error* lt_log_softmax(lt_tensor* a, int64_t axis, lt_tensor** out) {
  lt_attr at = attr_int("axis", axis);
  return apply_id(nullptr, kOpLogSoftmax, &a, 1, &at, 1, out);
}

// ---- collectives ----

LT_API lt_error* lt_all_reduce(lt_tensor* a, lt_reduce_op op, lt_tensor** out) {
  lt_attr at = attr_int("reduce", static_cast<int64_t>(op));
  return apply_id(nullptr, kOpAllReduce, &a, 1, &at, 1, out);
}
LT_API lt_error* lt_broadcast(lt_tensor* a, int64_t root, lt_tensor** out) {
  lt_attr at = attr_int("root", root);
  return apply_id(nullptr, kOpBroadcast, &a, 1, &at, 1, out);
}
LT_API lt_error* lt_all_gather(lt_tensor* a, lt_tensor** out) {
  return apply_id(nullptr, kOpAllGather, &a, 1, nullptr, 0, out);
}

// ---- metrics ----

LT_API lt_error* lt_metrics_report(lt_runtime* runtime, int json, char** out) {
  return guard([&] {
    need(runtime, "lt_metrics_report", "runtime");
    need(out, "lt_metrics_report", "out");
    std::string s = metrics_report(runtime, json != 0);
    char* c = static_cast<char*>(std::malloc(s.size() + 1));
    if (!c) throw std::bad_alloc();
    std::memcpy(c, s.c_str(), s.size() + 1);
    *out = c;
  });
}
LT_API lt_error* lt_metric_get(lt_runtime* runtime, const char* name, double* out) {
  return guard([&] {
    need(runtime, "lt_metric_get", "runtime");
    need(name, "lt_metric_get", "name");
    need(out, "lt_metric_get", "out");
    if (!metric_get(runtime, name, out))
      fail(LT_STATUS_NOT_FOUND, "lt_metric_get: no metric named '{}'", name);
  });
}
LT_API void lt_metrics_reset(lt_runtime* runtime) {
  if (runtime) {
    drain_queues(runtime);  // a queued graph's run counts before the reset, never after it
    runtime->metrics.reset();
    reset_graph_timings(runtime);
    for (auto& d : runtime->devices) d->allocator->reset_peak();  // peak := what is live now
  }
}

}  // extern "C"

// Every CALL row of lt_ops.def names a hand-written function of lt.h: this fails to compile
// when one is missing or renamed.
#define LT_CAPI_CALL(fn) (void)&fn;
#define LT_CAPI_UNARY(fn)
#define LT_CAPI_BINARY(fn)
#define LT_CAPI_NONE(fn)
[[maybe_unused]] static void lt_check_call_rows() {
#define LT_OP(Camel, name, capi, cfn, ...) LT_CAPI_##capi(cfn)
#include "lazytensor/lt_ops.def"
#undef LT_OP
}
