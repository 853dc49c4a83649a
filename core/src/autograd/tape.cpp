// tape.cpp — the autograd side table (requires_grad, accumulated gradient and history per
// tensor handle), the core's two hooks, and the C entry points that only touch the table.
// A tensor handle is its value's identity: lt_tensor_retain returns the same pointer.
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "autograd/autograd.h"
#include "error.h"
#include "runtime.h"  // lt::live_tensor: handles used after lt_tensor_free

namespace lt::autograd {
namespace {

struct Entry {
  bool requires_grad = false;
  bool graph_freed = false;
  Ref grad;
  std::shared_ptr<GradFn> fn;
};

// The lock is never held while calling into the core (lt_tensor_free re-enters the hooks).
std::mutex g_mu;
std::unordered_map<const lt_tensor*, Entry> g_table;
// Entries in the table; lets the hooks return at once when autograd is unused.
std::atomic<size_t> g_size{0};

thread_local int t_no_grad_depth = 0;
// Recompute regions (lt_recompute_begin): the open region of this thread and its depth; ids
// come from one counter, never 0 (0 is "not recomputed" in Node::recompute_tag).
thread_local uint32_t t_region = 0;
thread_local int t_region_depth = 0;
std::atomic<uint32_t> g_next_region{1};

// Entries being destroyed on this thread. Destroying one frees its inputs, whose own
// entries are queued here instead of being destroyed recursively (histories can be
// 1,000,000 ops long).
thread_local std::vector<Entry>* t_dying = nullptr;

void destroy_flat(Entry&& first) {
  if (t_dying) {
    t_dying->push_back(std::move(first));
    return;
  }
  std::vector<Entry> dying;
  t_dying = &dying;
  dying.push_back(std::move(first));
  while (!dying.empty()) {
    Entry e = std::move(dying.back());
    dying.pop_back();
    // e's destructor runs here and may push more entries onto `dying`.
  }
  t_dying = nullptr;
}

// Floating dtypes carry gradients; bf16/f16 ones are computed in f32 and rounded on store
// like their forward ops, and a cast's gradient is cast back to its input's dtype.
bool is_float(lt_dtype d) {
  return d == LT_DTYPE_F32 || d == LT_DTYPE_F64 || d == LT_DTYPE_BF16 || d == LT_DTYPE_F16;
}

}  // namespace

void raise(lt_status_code code, std::string message) {
  throw lt::Error(code, std::move(message));
}

void check(lt_error* e, const char* context) {
  if (!e) return;
  std::string msg = context ? std::string(context) + ": " + lt_error_message(e)
                            : std::string(lt_error_message(e));
  lt_status_code code = lt_error_code(e);
  lt_error_destroy(e);
  raise(code, std::move(msg));
}

Shape shape_of(const lt_tensor* t) {
  const int64_t* s = lt_tensor_shape(t);
  return Shape(s, s + lt_tensor_rank(t));
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

int64_t GradFn::attr_int(const char* name, int64_t fallback) const {
  for (const auto& a : attrs.items)
    if (a.name == name) return a.kind == LT_ATTR_FLOAT ? static_cast<int64_t>(a.f) : a.i;
  return fallback;
}
double GradFn::attr_float(const char* name, double fallback) const {
  for (const auto& a : attrs.items)
    if (a.name == name) return a.kind == LT_ATTR_INT ? static_cast<double>(a.i) : a.f;
  return fallback;
}
const std::vector<int64_t>* GradFn::attr_ints(const char* name) const {
  for (const auto& a : attrs.items)
    if (a.name == name && a.kind == LT_ATTR_INTS) return &a.ints;
  return nullptr;
}

bool grad_enabled() {
  return t_no_grad_depth == 0;
}

uint32_t recompute_region() {
  return t_region;
}
NoRecomputeRegion::NoRecomputeRegion() : saved_region(t_region), saved_depth(t_region_depth) {
  t_region = 0;
  t_region_depth = 0;
}
NoRecomputeRegion::~NoRecomputeRegion() {
  t_region = saved_region;
  t_region_depth = saved_depth;
}

GradScope::GradScope() : saved_(t_no_grad_depth) {
  t_no_grad_depth = 0;
}
GradScope::~GradScope() {
  t_no_grad_depth = saved_;
}

void on_apply(const char* op, lt_tensor* const* inputs, size_t num_inputs, const lt_attr* attrs,
              size_t num_attrs, lt_tensor* out) noexcept {
  if (g_size.load(std::memory_order_relaxed) == 0 || t_no_grad_depth > 0) return;
  if (!op || !out || !is_float(lt_tensor_dtype(out)) || is_non_differentiable(op)) return;
  std::vector<bool> needs(num_inputs, false);
  bool any = false;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (size_t i = 0; i < num_inputs; ++i) {
      auto it = g_table.find(inputs[i]);
      if (it != g_table.end() && it->second.requires_grad) needs[i] = any = true;
    }
  }
  if (!any) return;
  try {
    auto fn = std::make_shared<GradFn>();
    fn->op = op;
    fn->needs_grad = std::move(needs);
    fn->output = out;
    fn->region = t_region;
    fn->attrs = AttrSet::copy(attrs, num_attrs);
    fn->inputs.reserve(num_inputs);
    for (size_t i = 0; i < num_inputs; ++i) fn->inputs.push_back(Ref::retain(inputs[i]));
    Entry old;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      auto [it, inserted] = g_table.try_emplace(out);
      if (inserted) g_size.fetch_add(1, std::memory_order_relaxed);
      old = std::move(it->second);
      it->second = Entry{};
      it->second.requires_grad = true;
      it->second.fn = std::move(fn);
    }
    destroy_flat(std::move(old));
  } catch (...) {
    // Out of memory while recording: the output simply carries no history.
  }
}

void on_tensor_freed(lt_tensor* tensor) noexcept {
  if (g_size.load(std::memory_order_relaxed) == 0) return;
  Entry e;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_table.find(tensor);
    if (it == g_table.end()) return;
    e = std::move(it->second);
    g_table.erase(it);
    g_size.fetch_sub(1, std::memory_order_relaxed);
  }
  destroy_flat(std::move(e));
}

Snapshot snapshot(lt_tensor* t) {
  std::lock_guard<std::mutex> lock(g_mu);
  Snapshot s;
  auto it = g_table.find(t);
  if (it == g_table.end()) return s;
  s.requires_grad = it->second.requires_grad;
  s.graph_freed = it->second.graph_freed;
  s.fn = it->second.fn;
  return s;
}

void accumulate_grad(lt_tensor* t, Ref g) {
  Ref old;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_table.find(t);
    if (it == g_table.end()) return;
    old = std::move(it->second.grad);
  }
  if (old) {
    lt_tensor* sum = nullptr;
    check(lt_add(old.get(), g.get(), &sum), "backward: accumulating a gradient");
    g = Ref(sum);
  }
  Ref displaced;  // declared first: destroyed after the lock is released
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_table.find(t);
  if (it == g_table.end()) {
    displaced = std::move(g);
  } else {
    displaced = std::move(it->second.grad);
    it->second.grad = std::move(g);
  }
}

void release_history(lt_tensor* t) {
  Entry dead;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_table.find(t);
    if (it == g_table.end() || !it->second.fn) return;
    dead.fn = std::move(it->second.fn);
    it->second.graph_freed = true;
  }
  destroy_flat(std::move(dead));
}

}  // namespace lt::autograd

using namespace lt::autograd;

extern "C" {

LT_API lt_error* lt_tensor_set_requires_grad(lt_tensor* tensor, int requires_grad) {
  return lt::guard([&] {
    lt::live_tensor(tensor, "set_requires_grad", "tensor");
    lt_dtype d = lt_tensor_dtype(tensor);
    if (requires_grad && !is_float(d)) {
      raise(LT_STATUS_DTYPE_MISMATCH,
            std::string("set_requires_grad: dtype ") + lt_dtype_name(d) +
                " cannot require gradients (only f32, f64, bf16 and f16 can)");
    }
    Entry dead;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      auto it = g_table.find(tensor);
      if (it != g_table.end() && it->second.fn && !requires_grad) {
        raise(LT_STATUS_INVALID_ARGUMENT,
              "set_requires_grad: the tensor is the output of '" + it->second.fn->op +
                  "', not a leaf; use lt_tensor_detach to cut it from its history");
      }
      if (requires_grad) {
        auto [pos, inserted] = g_table.try_emplace(tensor);
        if (inserted) g_size.fetch_add(1, std::memory_order_relaxed);
        pos->second.requires_grad = true;
      } else if (it != g_table.end()) {
        dead = std::move(it->second);
        g_table.erase(it);
        g_size.fetch_sub(1, std::memory_order_relaxed);
      }
    }
    destroy_flat(std::move(dead));
  });
}

LT_API int lt_tensor_requires_grad(const lt_tensor* tensor) {
  if (!tensor || g_size.load(std::memory_order_relaxed) == 0) return 0;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_table.find(tensor);
  return it != g_table.end() && it->second.requires_grad ? 1 : 0;
}

LT_API lt_error* lt_tensor_grad(lt_tensor* tensor, lt_tensor** out) {
  return lt::guard([&] {
    if (!tensor || !out) raise(LT_STATUS_INVALID_ARGUMENT, "tensor_grad: tensor or out is NULL");
    lt::live_tensor(tensor, "tensor_grad", "tensor");
    lt_tensor* g = nullptr;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      auto it = g_table.find(tensor);
      if (it != g_table.end() && it->second.grad) g = it->second.grad.get();
      if (g) g = lt_tensor_retain(g);  // retain does not call back into autograd
    }
    *out = g;
  });
}

LT_API lt_error* lt_tensor_zero_grad(lt_tensor* tensor) {
  return lt::guard([&] {
    lt::live_tensor(tensor, "tensor_zero_grad", "tensor");
    Ref dead;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      auto it = g_table.find(tensor);
      if (it != g_table.end()) dead = std::move(it->second.grad);
    }
  });
}

LT_API lt_error* lt_tensor_set_grad(lt_tensor* tensor, lt_tensor* grad) {
  return lt::guard([&] {
    lt::live_tensor(tensor, "tensor_set_grad", "tensor");
    Ref g;  // declared before the lock: freed (re-entering the hooks) after it is released
    if (grad) {
      if (lt_tensor_device(grad) != lt_tensor_device(tensor)) {
        raise(LT_STATUS_INVALID_ARGUMENT, std::string("tensor_set_grad: gradient is on ") +
                                              lt_device_name(lt_tensor_device(grad)) +
                                              " but the tensor on " +
                                              lt_device_name(lt_tensor_device(tensor)));
      }
      if (lt_tensor_dtype(grad) != lt_tensor_dtype(tensor)) {
        raise(LT_STATUS_DTYPE_MISMATCH, std::string("tensor_set_grad: gradient dtype ") +
                                            lt_dtype_name(lt_tensor_dtype(grad)) +
                                            " differs from the tensor's " +
                                            lt_dtype_name(lt_tensor_dtype(tensor)));
      }
      if (shape_of(grad) != shape_of(tensor)) {
        raise(LT_STATUS_SHAPE_MISMATCH,
              "tensor_set_grad: gradient shape " + shape_str(shape_of(grad)) +
                  " differs from the tensor's " + shape_str(shape_of(tensor)));
      }
      if (lt_tensor_requires_grad(grad)) {
        raise(LT_STATUS_INVALID_ARGUMENT,
              "tensor_set_grad: the gradient requires gradients itself; compute it in a no-grad "
              "scope or detach it");
      }
      g = Ref::retain(grad);
    }
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_table.find(tensor);
    if (it == g_table.end() || !it->second.requires_grad) {
      raise(LT_STATUS_INVALID_ARGUMENT, "tensor_set_grad: the tensor does not require gradients");
    }
    if (it->second.fn) {
      raise(LT_STATUS_INVALID_ARGUMENT,
            "tensor_set_grad: the tensor is the output of '" + it->second.fn->op + "', not a leaf");
    }
    std::swap(it->second.grad, g);  // the old gradient leaves with g, after the lock
  });
}

LT_API lt_error* lt_tensor_detach(lt_tensor* tensor, lt_tensor** out) {
  return lt::guard([&] {
    if (!tensor || !out) raise(LT_STATUS_INVALID_ARGUMENT, "tensor_detach: tensor or out is NULL");
    lt::live_tensor(tensor, "tensor_detach", "tensor");
    // A new value (an identity reshape) so that its autograd entry is its own.
    NoGradScope no_grad;
    lt_tensor* r = nullptr;
    check(lt_reshape(tensor, lt_tensor_shape(tensor), lt_tensor_rank(tensor), &r), "tensor_detach");
    if (r == tensor) {
      lt_tensor_free(r);
      raise(LT_STATUS_INTERNAL, "tensor_detach: the core returned the same handle");
    }
    *out = r;
  });
}

LT_API void lt_no_grad_begin(void) {
  ++t_no_grad_depth;
}

LT_API void lt_no_grad_end(void) {
  if (t_no_grad_depth > 0) --t_no_grad_depth;
}

LT_API void lt_recompute_begin(void) {
  if (t_region_depth++ > 0) return;  // nested: joins the outer region
  uint32_t id = g_next_region.fetch_add(1, std::memory_order_relaxed);
  if (id == 0) id = g_next_region.fetch_add(1, std::memory_order_relaxed);  // wrapped
  t_region = id;
}

LT_API void lt_recompute_end(void) {
  if (t_region_depth > 0 && --t_region_depth == 0) t_region = 0;
}

}  // extern "C"
