// graph.hpp — lt_graph regions as the lowering library sees them: value descriptions, the one
// attribute reader, the one graph validator (structure + every built-in op's IR rule of
// docs/ops.md), owned graphs for rewriting, the shape rules shared with the core's builders,
// and a structural hash for plugin-side caches. All walks are iterative and linear: regions
// may be 1,000,000 nodes deep.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lazytensor/lower/ops.hpp"
#include "lazytensor/lt_plugin.h"

namespace lt::lower {

using Shape = std::vector<int64_t>;

// The number of elements of a shape (1 for rank 0).
inline int64_t numel(std::span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}
// The shape of a node, owned.
inline Shape shape_of(const lt_graph_node& n) {
  return Shape(n.shape, n.shape + n.rank);
}

// An lt_graph over arrays the caller keeps alive and unmoved (no dynamic dimensions).
inline lt_graph graph_over(std::span<const lt_graph_node> nodes, std::span<const int32_t> inputs,
                           std::span<const int32_t> outputs, uint64_t hash) {
  lt_graph g{};
  g.struct_size = LT_GRAPH_STRUCT_SIZE;
  g.num_nodes = nodes.size();
  g.nodes = nodes.data();
  g.num_inputs = inputs.size();
  g.inputs = inputs.data();
  g.num_outputs = outputs.size();
  g.outputs = outputs.data();
  g.hash = hash;
  return g;
}

// A value's dtype and shape, owned.
struct Desc {
  lt_dtype dtype = LT_DTYPE_INVALID;
  Shape shape;
  int64_t numel() const;
};

// The same, borrowed (a node of an lt_graph, an operand of the core's IR).
struct DescRef {
  lt_dtype dtype = LT_DTYPE_INVALID;
  size_t rank = 0;
  const int64_t* shape = nullptr;
  DescRef() = default;
  DescRef(lt_dtype d, size_t r, const int64_t* s) : dtype(d), rank(r), shape(s) {}
  DescRef(const Desc& d) : dtype(d.dtype), rank(d.shape.size()), shape(d.shape.data()) {}
  DescRef(const lt_graph_node& n) : dtype(n.dtype), rank(n.rank), shape(n.shape) {}
  std::span<const int64_t> dims() const { return {shape, rank}; }
  int64_t numel() const;
};

std::string shape_str(std::span<const int64_t> s);  // "[2,3]"
std::string desc_str(DescRef d);                    // "f32 [2,3]"

// The attributes of one node, read with the op's table defaults. `where` prefixes every
// error ("node 3 (add)" or just "add"). Throws Error(INVALID_ARGUMENT) for a missing required
// attribute, a wrong kind, an INTS of the wrong length or an invalid dtype value.
class Attrs {
 public:
  Attrs(const lt_attr* attrs, size_t count, const OpInfo* info, std::string where);
  explicit Attrs(const lt_graph_node& node, std::string where = {});
  // Node `index` named `op` (borrowed): "node 3 (add)", built only when an error needs it.
  Attrs(const lt_attr* attrs, size_t count, const OpInfo* info, size_t index, const char* op)
      : attrs_(attrs), count_(count), info_(info), index_(index), op_(op) {}

  const lt_attr* find(std::string_view name) const;
  bool has(std::string_view name) const { return find(name) != nullptr; }
  int64_t i(std::string_view name) const;
  double f(std::string_view name) const;  // FLOAT, or an INT read as a number
  lt_dtype dtype(std::string_view name) const;
  std::vector<int64_t> ints(std::string_view name) const;
  std::vector<int64_t> ints(std::string_view name, size_t len) const;  // exactly len entries
  std::span<const lt_attr> all() const { return {attrs_, count_}; }
  std::string where() const;

 private:
  const lt_attr* need(std::string_view name, lt_attr_kind kind) const;
  const AttrSpec* spec(std::string_view name) const;
  const lt_attr* attrs_;
  size_t count_;
  const OpInfo* info_;
  std::string where_;
  size_t index_ = SIZE_MAX;
  const char* op_ = nullptr;
};

// ---- shape rules shared by the validator, the IR builder and the core's user-level builders

// NumPy broadcasting of a and b; throws Error(SHAPE_MISMATCH) "<what>: shapes [..] and [..] do
// not broadcast".
Shape broadcast_shapes(std::string_view what, std::span<const int64_t> a,
                       std::span<const int64_t> b);
bool broadcasts_to(std::span<const int64_t> in, std::span<const int64_t> out);
// `in` reduced over sorted, unique, in-range `axes`.
Shape reduce_shape(std::span<const int64_t> in, std::span<const int64_t> axes, bool keepdims);
// np.take's output shape: a[:axis] + indices + a[axis+1:].
Shape gather_shape(std::span<const int64_t> a, std::span<const int64_t> indices, int64_t axis);
// Output extent of a convolution / pooling window along one dim; -1 if the window does not fit.
int64_t window_out(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation);

// Checks one node of a built-in op against its IR rule (docs/ops.md "IR form"): operand count
// and dtypes, attributes, and that `out` is what the op computes. Throws Error naming `where`.
void check_node(const OpInfo& op, std::span<const DescRef> in, const Attrs& attrs, DescRef out);

// Checks a whole region: struct_size, non-NULL arrays, each node's description (valid dtype,
// non-negative dims, at most 64 dims, at most 2^60 bytes), operands referring to earlier nodes,
// every "input" node bound to exactly one entry of inputs, outputs in range, and every node of
// a built-in op against its rule (nodes of other ops: structure only). Throws Error (code and
// "node 3 (add): ..." message) on the first problem; a backend may then trust the graph.
void validate(const lt_graph& g);
// The same for node `i` and the operands it reads (a supports() query on a graph whose other
// nodes are not examined).
void validate_node(const lt_graph& g, size_t i);

// An lt_graph that owns its storage (node shapes, operand lists, attributes, op names), built
// node by node. Not copyable (the view points into it); movable. view() is O(1).
class OwnedGraph {
 public:
  OwnedGraph();
  ~OwnedGraph();
  OwnedGraph(OwnedGraph&&) noexcept;
  OwnedGraph& operator=(OwnedGraph&&) noexcept;
  OwnedGraph(const OwnedGraph&) = delete;
  OwnedGraph& operator=(const OwnedGraph&) = delete;

  // Appends a node and returns its index. Attribute names/strings/ints are copied.
  int32_t add(std::string_view op, lt_dtype dtype, Shape shape, std::vector<int32_t> operands,
              const lt_attr* attrs = nullptr, size_t num_attrs = 0);
  // Appends a node whose op name, shape and attributes are borrowed, not copied: they must
  // outlive this graph (the optimiser's output borrows them from its input graph; a copy of
  // every attribute of a 1,000-node graph was half the optimiser's time).
  int32_t add_borrowed(const char* op, lt_dtype dtype, std::span<const int64_t> shape,
                       std::vector<int32_t> operands, std::span<const lt_attr> attrs);
  // Appends a copy of `node` with its operands renumbered to `operands`.
  int32_t copy(const lt_graph_node& node, std::vector<int32_t> operands);
  void pop();  // removes the last node
  size_t size() const;
  const lt_graph_node& node(size_t i) const;
  void set_inputs(std::vector<int32_t> inputs);
  void set_outputs(std::vector<int32_t> outputs);
  void set_hash(uint64_t hash);
  // Makes the graph dynamic (plugin ABI 1.2): its numbers are given at `values`; `exprs` say
  // which are affine in which symbol (lazytensor/lower/dynamic.hpp). Empty values: static.
  void set_dynamic(std::vector<int64_t> values, std::vector<lt_dim_expr> exprs);
  // The borrowed view; valid until the next add()/copy()/pop()/set_*() or destruction.
  const lt_graph& view();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A copy of `g` as an OwnedGraph (its dynamic dimensions included).
OwnedGraph copy_graph(const lt_graph& g);

// A small canonical region of one node of built-in op `op` fed by "input" nodes (f32 data, or
// bool for bool ops), whose output is the node: what capability listings ask a backend about
// and what the unit tests decompose. Empty for "input".
OwnedGraph example_graph(OpId op);

// The bytes of every node's value (numel × dtype size), by node.
std::vector<size_t> value_bytes(const lt_graph& g);

// Attribute lookup by name; nullptr if absent.
const lt_attr* find_attr(const lt_graph_node& node, std::string_view name);

// One attribute that owns its storage: the one owned form of an lt_attr, kept on the core's IR
// nodes (core/src/ir.h AttrSet) and written by the optimiser's rewrites (issue #24 item 4).
struct OwnedAttr {
  std::string name;
  lt_attr_kind kind = LT_ATTR_INT;
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> ints;
  std::string s;

  // A copy of `a` (a NULL name or string reads as "").
  static OwnedAttr copy(const lt_attr& a);
  // The lt_attr form, pointing into this attribute (valid while it lives unchanged).
  lt_attr view() const;
  // Same name, kind and value; floats compared bitwise (0.0 and -0.0 differ).
  bool operator==(const OwnedAttr& o) const;
};

// Two borrowed attributes with the same name, kind and value (floats bitwise; ints and
// strings by content).
bool same_attr(const lt_attr& a, const lt_attr& b);

// Structural hash of a region (ops, dtypes, shapes, operands, attributes, inputs, outputs);
// independent of lt_graph::hash, so a plugin can cache across graphs.
uint64_t structural_hash(const lt_graph& graph);

}  // namespace lt::lower
