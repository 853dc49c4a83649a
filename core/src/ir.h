// ir.h — the lazy IR: Node (op, compact attrs, ref-counted operands, dtype, shape, its own
// hash) and the small value types it is built from. Nodes are immutable after creation except
// for the materialisation state, which only the owning device's executor changes under that
// device's mutex (docs/threads.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "lazytensor/lower/graph.hpp"
#include "lazytensor/lt.h"
#include "lazytensor/lt_plugin.h"

namespace lt {

// The C handles are the implementation objects (defined in runtime.h).
using Device = ::lt_device;
using Runtime = ::lt_runtime;
using Tensor = ::lt_tensor;
struct Ticket;  // async.h: the completion of a queued graph

// Shapes: up to kInline dims stored inline (no heap allocation on the trace path).
class Dims {
 public:
  static constexpr size_t kInline = 6;
  Dims() = default;
  Dims(const int64_t* d, size_t n) { assign(d, n); }
  Dims(std::initializer_list<int64_t> l) { assign(l.begin(), l.size()); }
  Dims(const Dims& o) { assign(o.data(), o.size()); }
  Dims& operator=(const Dims& o) {
    if (this != &o) assign(o.data(), o.size());
    return *this;
  }
  ~Dims() { delete[] heap_; }
  void assign(const int64_t* d, size_t n) {
    resize(n);
    if (n) std::memcpy(data(), d, n * sizeof(int64_t));
  }
  void resize(size_t n) {
    if (n > kInline && n > cap_) {
      int64_t* h = new int64_t[n]();
      std::memcpy(h, data(), size_ * sizeof(int64_t));
      delete[] heap_;
      heap_ = h;
      cap_ = n;
    }
    for (size_t i = size_; i < n; ++i) data()[i] = 0;
    size_ = n;
  }
  void push_back(int64_t v) {
    resize(size_ + 1);
    data()[size_ - 1] = v;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t* data() { return heap_ ? heap_ : inline_; }
  const int64_t* data() const { return heap_ ? heap_ : inline_; }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t operator[](size_t i) const { return data()[i]; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  int64_t numel() const {
    int64_t n = 1;
    for (size_t i = 0; i < size_; ++i) n *= data()[i];
    return n;
  }
  bool operator==(const Dims& o) const {
    return size_ == o.size_ && std::memcmp(data(), o.data(), size_ * sizeof(int64_t)) == 0;
  }
  bool operator!=(const Dims& o) const { return !(*this == o); }

 private:
  size_t size_ = 0;
  size_t cap_ = 0;
  int64_t* heap_ = nullptr;
  int64_t inline_[kInline] = {};
};

std::string dims_str(const int64_t* d, size_t n);  // "[2,3]"
inline std::string dims_str(const Dims& d) {
  return dims_str(d.data(), d.size());
}

// 64-bit hash mixing (splitmix64 finaliser); used for node and graph keys.
inline uint64_t hash_mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
inline uint64_t hash_combine(uint64_t h, uint64_t v) {
  return hash_mix(h ^ (v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2)));
}
uint64_t hash_bytes(const void* p, size_t n, uint64_t seed = 0);

// Immutable attribute set of a node; `hash` covers every name, kind and value.
struct AttrSet {
  std::vector<lower::OwnedAttr> items;  // owned copies of the user's lt_attrs
  uint64_t hash = 0;
  std::vector<lt_attr> view;  // lt_attr form pointing into items (for lt_graph)

  const lower::OwnedAttr* find(const char* name) const;
  void finish();  // computes hash and view; call once after filling items
  // An owned, finished copy of borrowed attributes (a NULL name or string reads as "").
  static AttrSet copy(const lt_attr* attrs, size_t num_attrs);
};

// A device buffer owned by exactly one holder (a Node or an executor temporary); returned
// to its device's caching allocator when released.
struct Buffer {
  Device* device = nullptr;
  lt_plugin_buffer* handle = nullptr;
  size_t nbytes = 0;    // bytes the value occupies
  size_t capacity = 0;  // size class actually allocated
  // Memory lent by another library (a DLPack import wrapped in place): on release the plugin's
  // handle is freed and lender_release(lender) runs, instead of a return to the allocator.
  void (*lender_release)(void* lender) noexcept = nullptr;
  void* lender = nullptr;
};
struct BufferDeleter {
  void operator()(Buffer* b) const noexcept;
};
using BufferPtr = std::unique_ptr<Buffer, BufferDeleter>;

// The graph node. Owned by intrusive reference counts (tensors and user nodes hold refs).
struct Node {
  std::atomic<uint32_t> refs{1};
  uint16_t op = 0;  // op registry id (ops.h); kOpInput for leaves
  lt_dtype dtype = LT_DTYPE_INVALID;
  Dims shape;
  // The node's own hash (op, attrs, dtype, shape), computed once when it is recorded. A graph's
  // key (collect.cpp) combines these with each operand's position in the graph, never rehashing
  // a node; a Merkle hash over operands would tell neither x + x from x + y nor a parameter
  // from its history (docs/architecture.md, "Graph keys").
  uint64_t hash = 0;
  std::unique_ptr<AttrSet> attrs;  // null when the op has no attributes
  Device* device = nullptr;

  // Operands (owned refs). Inline for <= 3; dropped once materialised.
  uint32_t num_operands = 0;
  Node* inline_ops[3] = {nullptr, nullptr, nullptr};
  Node** heap_ops = nullptr;
  Node** operands() { return heap_ops ? heap_ops : inline_ops; }
  Node* operand(size_t i) const { return heap_ops ? heap_ops[i] : inline_ops[i]; }

  // The user's name for this value (lt_tensor_set_name), shown in recompile reasons; never
  // hashed. Written and read under the device's exec mutex.
  std::unique_ptr<std::string> name;
  // lt_tensor_mark_dynamic: dims marked dynamic / static (bit d = dim d); never hashed.
  uint32_t dynamic_dims = 0, static_dims = 0;

  // Scalar data leaf (lt_scalar, random seeds): raw bytes in `dtype`, never hashed.
  bool has_scalar = false;
  // Where the user's program recorded this node (lt_trace_location before the op, or the C++
  // API's std::source_location): file (static storage, e.g. __FILE__) and line, or NULL and 0
  // when not given. Never hashed; messages print "traced at <file>:<line>" (trace_location()).
  uint32_t trace_line = 0;
  const char* trace_file = nullptr;
  uint64_t scalar_bits = 0;
  // Rematerialisation (docs/optimizer.md): nonzero on nodes that recompute a forward value in
  // the backward pass instead of keeping it. The optimiser's CSE merges two nodes only when
  // their tags are equal, so a recomputation is never merged back into the forward. Never hashed
  // into a node's own hash; collect hands the tags to the optimiser beside the graph.
  uint32_t recompute_tag = 0;
  // Creation order (one process-wide counter; operands are always older than their users):
  // collect runs a graph's nodes in this order, the program's own (docs/memory.md, "Schedule").
  uint64_t seq = 0;

  // Materialisation state: written only under the device mutex; `materialized` is
  // published last (release) so any thread can test it.
  BufferPtr buffer;
  std::atomic<bool> materialized{false};
  // Config async_execution: set (under the device mutex, never cleared) when this node is a
  // root of a graph queued for execution; the buffer arrives when that ticket is done. A node
  // with a ticket is an input of every later graph, never collected again.
  std::shared_ptr<Ticket> ticket;
  uint64_t visit_mark = 0;  // graph collection epoch (device mutex)
  int32_t visit_index = -1;

  bool is_leaf() const {
    return op == 0;
  }  // op "input" (kOpInput == 0): host data, scalar, placeholder
  size_t nbytes() const { return static_cast<size_t>(shape.numel()) * lt_dtype_size(dtype); }
};

// "train.cpp:57" (the file's last path component) for a node with a recorded location, else
// "" — for recompile reasons, fallback warnings and graph dumps ("traced at train.cpp:57").
std::string trace_location(const Node* n);

// Process-wide count of live nodes (metric "nodes_alive"; leak tests read it).
extern std::atomic<int64_t> g_nodes_alive;

// The recompute tag every node recorded on this thread gets (Node::recompute_tag): nonzero
// only while the autograd recomputes a recompute region's values (autograd/backward.cpp).
extern thread_local uint32_t t_recompute_tag;

// Releases one reference; frees the node and, iteratively, every operand chain that loses its
// last reference (a 1,000,000-node chain must not recurse).
void node_release(Node* n) noexcept;
inline Node* node_retain(Node* n) noexcept {
  n->refs.fetch_add(1, std::memory_order_relaxed);
  return n;
}
// Drops a materialised node's operands (iteratively).
void node_drop_operands(Node* n) noexcept;

// Owning intrusive pointer.
class NodeRef {
 public:
  NodeRef() = default;
  static NodeRef adopt(Node* n) {
    NodeRef r;
    r.p_ = n;
    return r;
  }
  static NodeRef share(Node* n) { return adopt(n ? node_retain(n) : nullptr); }
  NodeRef(const NodeRef& o) : p_(o.p_ ? node_retain(o.p_) : nullptr) {}
  NodeRef(NodeRef&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  NodeRef& operator=(NodeRef o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~NodeRef() {
    if (p_) node_release(p_);
  }
  Node* get() const { return p_; }
  Node* operator->() const { return p_; }
  Node* release() {
    Node* p = p_;
    p_ = nullptr;
    return p;
  }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  Node* p_ = nullptr;
};

}  // namespace lt
