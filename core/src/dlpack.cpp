// dlpack.cpp — DLPack 0.6 export and import (lt_tensor_to_dlpack, lt_tensor_from_dlpack):
// zero-copy on host-addressable devices, a host copy otherwise; who owns what is written in lt.h.
#include <dlpack/dlpack.h>

#include <cstdlib>
#include <cstring>

#include "error.h"
#include "ops.h"
#include "device_client.h"
#include "executor.h"
#include "runtime.h"

using namespace lt;

namespace {

static_assert(DLPACK_VERSION == 60, "LazyTensor implements DLPack 0.6 (Debian's libdlpack-dev)");

// DLPack >= 0.8 names bool kDLBool = 6; 0.6 has no bool code, so bool is exported as uint8.
constexpr uint8_t kDLBoolCode = 6;

const char* code_name(uint8_t code) {
  switch (code) {
    case kDLInt:
      return "kDLInt";
    case kDLUInt:
      return "kDLUInt";
    case kDLFloat:
      return "kDLFloat";
    case kDLOpaqueHandle:
      return "kDLOpaqueHandle";
    case kDLBfloat:
      return "kDLBfloat";
    case kDLComplex:
      return "kDLComplex";
    case kDLBoolCode:
      return "kDLBool";
    default:
      return "unknown";
  }
}

DLDataType to_dl(lt_dtype d) {
  switch (d) {
    case LT_DTYPE_F32:
      return {kDLFloat, 32, 1};
    case LT_DTYPE_F64:
      return {kDLFloat, 64, 1};
    case LT_DTYPE_F16:
      return {kDLFloat, 16, 1};
    case LT_DTYPE_BF16:
      return {kDLBfloat, 16, 1};
    case LT_DTYPE_I32:
      return {kDLInt, 32, 1};
    case LT_DTYPE_I64:
      return {kDLInt, 64, 1};
    case LT_DTYPE_BOOL:
      return {kDLUInt, 8, 1};
    default:
      fail(LT_STATUS_UNSUPPORTED, "lt_tensor_to_dlpack: dtype {} has no DLPack type",
           static_cast<int>(d));
  }
}

lt_dtype from_dl(const DLDataType& t) {
  lt_dtype d = LT_DTYPE_INVALID;
  if (t.lanes == 1) {
    if (t.code == kDLFloat && t.bits == 32) d = LT_DTYPE_F32;
    if (t.code == kDLFloat && t.bits == 64) d = LT_DTYPE_F64;
    if (t.code == kDLFloat && t.bits == 16) d = LT_DTYPE_F16;
    if (t.code == kDLBfloat && t.bits == 16) d = LT_DTYPE_BF16;
    if (t.code == kDLInt && t.bits == 32) d = LT_DTYPE_I32;
    if (t.code == kDLInt && t.bits == 64) d = LT_DTYPE_I64;
    if ((t.code == kDLUInt || t.code == kDLBoolCode) && t.bits == 8) d = LT_DTYPE_BOOL;
  }
  if (d == LT_DTYPE_INVALID)
    fail(LT_STATUS_UNSUPPORTED,
         "lt_tensor_from_dlpack: unsupported dtype {{code {} ({}), bits {}, lanes {}}}: LazyTensor "
         "takes float16/32/64, bfloat16, int32/64 and bool (as uint8 or kDLBool, 8 bits), one lane",
         static_cast<int>(t.code), code_name(t.code), static_cast<int>(t.bits),
         static_cast<int>(t.lanes));
  return d;
}

// What an export owns. Zero-copy: a node reference (its buffer is the memory) and a runtime
// reference (the plugin that owns the buffer stays loaded until the deleter runs). Copied: the
// host copy only.
struct Export {
  DLManagedTensor managed{};
  std::vector<int64_t> shape, strides;
  NodeRef node;
  Runtime* runtime = nullptr;
  void* copy = nullptr;
  ~Export() {
    node = NodeRef();  // the buffer goes back to its allocator while the runtime still lives
    std::free(copy);
    if (runtime) runtime_release(runtime);
  }
};

void export_deleter(DLManagedTensor* m) {
  delete static_cast<Export*>(m->manager_ctx);
}

void* host_ptr(Device* dev, const Buffer* b) {
  return client::host_ptr(dev, b->handle);
}

// The lender of an in-place import: the producer's deleter runs exactly once, here.
void release_lender(void* lender) noexcept {
  auto* m = static_cast<DLManagedTensor*>(lender);
  if (m->deleter) m->deleter(m);
}

void check_bool_bytes(const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] > 1)
      fail(LT_STATUS_INVALID_ARGUMENT,
           "lt_tensor_from_dlpack: bool (uint8) element {} is {}, not 0 or 1", i,
           static_cast<int>(p[i]));
}

}  // namespace

LT_API lt_error* lt_tensor_to_dlpack(lt_tensor* tensor, DLManagedTensor** out) {
  return guard([&] {
    const char* fn = "lt_tensor_to_dlpack";
    live_tensor(tensor, fn, "tensor");
    if (!out) fail(LT_STATUS_INVALID_ARGUMENT, "{}: out is NULL", fn);
    Node* n = tensor->node;
    Device* dev = tensor->device;
    auto e = std::make_unique<Export>();
    DLTensor& t = e->managed.dl_tensor;
    t.dtype = to_dl(n->dtype);
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int>(n->shape.size());
    e->shape.assign(n->shape.begin(), n->shape.end());
    e->strides.resize(e->shape.size());
    int64_t step = 1;
    for (size_t i = e->shape.size(); i-- > 0;) {
      e->strides[i] = step;
      step *= e->shape[i];
    }
    t.shape = e->shape.data();
    t.strides = e->strides.data();
    t.byte_offset = 0;
    const size_t nbytes = n->nbytes();
    if (!n->has_scalar && !n->is_leaf() && !n->materialized.load(std::memory_order_acquire)) {
      std::vector<NodeRef> roots{NodeRef::share(n)};
      materialize(dev, roots);
    }
    void* p = nullptr;
    if (!n->has_scalar && nbytes) {
      if (!n->buffer) fail(LT_STATUS_INTERNAL, "{}: tensor has no buffer", fn);
      p = host_ptr(dev, n->buffer.get());
    }
    Metrics& m = dev->runtime->metrics;
    if (p) {
      e->node = NodeRef::share(n);
      runtime_retain(dev->runtime);
      e->runtime = dev->runtime;
      m.add_named("dlpack.exports_zero_copy", 1);
    } else {
      e->copy = std::aligned_alloc(64, (nbytes + 63) / 64 * 64 + (nbytes ? 0 : 64));
      if (!e->copy) fail(LT_STATUS_OUT_OF_MEMORY, "{}: cannot allocate {} bytes", fn, nbytes);
      if (n->has_scalar)
        std::memcpy(e->copy, &n->scalar_bits, nbytes);
      else if (nbytes)
        download_from(dev, n->buffer.get(), e->copy, nbytes);
      p = e->copy;
      m.bytes_from_device.fetch_add(nbytes, std::memory_order_relaxed);
      m.add_named("dlpack.exports_copied", 1);
    }
    t.data = p;
    e->managed.manager_ctx = e.get();
    e->managed.deleter = export_deleter;
    *out = &e.release()->managed;
  });
}

LT_API lt_error* lt_tensor_from_dlpack(lt_device* device, DLManagedTensor* managed,
                                       lt_tensor** out) {
  return guard([&] {
    const char* fn = "lt_tensor_from_dlpack";
    if (!device) fail(LT_STATUS_INVALID_ARGUMENT, "{}: device is NULL", fn);
    if (!managed) fail(LT_STATUS_INVALID_ARGUMENT, "{}: managed tensor is NULL", fn);
    if (!out) fail(LT_STATUS_INVALID_ARGUMENT, "{}: out is NULL", fn);
    const DLTensor& t = managed->dl_tensor;
    const int dt = static_cast<int>(t.device.device_type);
    if (dt != kDLCPU && dt != kDLCUDAHost && dt != kDLROCMHost)
      fail(LT_STATUS_UNSUPPORTED,
           "{}: device type {} is not host memory: only kDLCPU (1), kDLCUDAHost (3) and "
           "kDLROCMHost (11) tensors can be imported",
           fn, dt);
    const lt_dtype dtype = from_dl(t.dtype);
    if (t.ndim < 0 || t.ndim > 64)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: ndim {} is out of range [0, 64]", fn, t.ndim);
    const size_t rank = static_cast<size_t>(t.ndim);
    if (rank && !t.shape)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: shape is NULL with ndim {}", fn, rank);
    Dims shape(t.shape, rank);
    for (size_t i = 0; i < rank; ++i)
      if (shape[i] < 0)
        fail(LT_STATUS_INVALID_ARGUMENT, "{}: negative dimension in shape {}", fn, dims_str(shape));
    const size_t nbytes = checked_bytes(fn, dtype, shape);
    const size_t esize = lt_dtype_size(dtype);
    const int64_t numel = shape.numel();
    if (numel && !t.data) fail(LT_STATUS_INVALID_ARGUMENT, "{}: data is NULL", fn);
    const auto* base = static_cast<const unsigned char*>(t.data) + t.byte_offset;
    // Compact row-major? (a dim of extent 1 may have any stride; NULL strides mean compact)
    bool compact = true;
    if (t.strides && numel) {
      int64_t want = 1;
      for (size_t i = rank; i-- > 0;) {
        if (shape[i] != 1 && t.strides[i] != want) compact = false;
        want *= shape[i];
      }
    }
    Metrics& m = device->runtime->metrics;
    NodeRef leaf = make_leaf(device, dtype, shape);
    if (compact && numel && dtype == LT_DTYPE_BOOL) check_bool_bytes(base, nbytes);
    if (compact && numel && device->host_addressable &&
        LT_PLUGIN_HAS(device->plugin, buffer_wrap_host)) {
      lt_plugin_buffer* wrapped =
          client::wrap_host(device, const_cast<unsigned char*>(base), nbytes);
      if (wrapped) {
        auto* b = new Buffer;
        b->device = device, b->handle = wrapped, b->nbytes = nbytes, b->capacity = nbytes;
        b->lender_release = release_lender;
        b->lender = managed;
        leaf->buffer = BufferPtr(b);
        leaf->materialized.store(true, std::memory_order_release);
        NodeRef keep = leaf;  // if the handle cannot be made, the lender is not released
        try {
          *out = tensor_new(device, std::move(leaf));
        } catch (...) {
          b->lender_release = +[](void*) noexcept {};  // a failed import takes nothing
          throw;
        }
        m.add_named("dlpack.imports_zero_copy", 1);
        return;
      }
    }
    // A copy: gathered into dense row-major order when strided, then uploaded.
    std::vector<unsigned char> dense;
    const unsigned char* src = base;
    if (!compact) {
      dense.resize(nbytes);
      std::vector<int64_t> idx(rank, 0);
      for (int64_t k = 0; k < numel; ++k) {
        int64_t off = 0;
        for (size_t i = 0; i < rank; ++i) off += idx[i] * t.strides[i];
        std::memcpy(dense.data() + static_cast<size_t>(k) * esize,
                    base + off * static_cast<int64_t>(esize), esize);
        for (size_t i = rank; i-- > 0;) {
          if (++idx[i] < shape[i]) break;
          idx[i] = 0;
        }
      }
      if (dtype == LT_DTYPE_BOOL) check_bool_bytes(dense.data(), nbytes);
      src = dense.data();
    }
    BufferPtr buf = device->allocator->allocate(nbytes);
    upload_to(device, buf.get(), src, nbytes);
    leaf->buffer = std::move(buf);
    leaf->materialized.store(true, std::memory_order_release);
    m.bytes_to_device.fetch_add(nbytes, std::memory_order_relaxed);
    m.add_named("dlpack.imports_copied", 1);
    *out = tensor_new(device, std::move(leaf));
    // The data is ours now: the producer's memory is released before returning.
    if (managed->deleter) managed->deleter(managed);
  });
}
