// graph.cpp — owned graphs, descriptions, the attribute reader, the shared shape rules and the
// structural hash.
#include <algorithm>
#include <cstring>
#include <deque>

#include "lazytensor/lower/error.hpp"
#include "lazytensor/lower/graph.hpp"

namespace lt::lower {

int64_t Desc::numel() const {
  return lower::numel(shape);
}

int64_t DescRef::numel() const {
  return lower::numel({shape, rank});
}

std::string shape_str(std::span<const int64_t> s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ',';
    r += std::to_string(s[i]);
  }
  return r + "]";
}

std::string desc_str(DescRef d) {
  return std::string(lt_dtype_name(d.dtype)) + " " + shape_str(d.dims());
}

// ---- attributes -------------------------------------------------------------------------

Attrs::Attrs(const lt_attr* attrs, size_t count, const OpInfo* info, std::string where)
    : attrs_(attrs), count_(count), info_(info), where_(std::move(where)) {}

std::string Attrs::where() const {
  if (index_ == SIZE_MAX) return where_;
  return "node " + std::to_string(index_) + " (" + (op_ ? op_ : "?") + ")";
}

Attrs::Attrs(const lt_graph_node& node, std::string where)
    : Attrs(node.attrs, node.num_attrs, node.op ? find_op(node.op) : nullptr,
            where.empty() && node.op ? std::string(node.op) : std::move(where)) {}

const lt_attr* Attrs::find(std::string_view name) const {
  for (size_t i = 0; i < count_; ++i)
    if (attrs_[i].name && name == attrs_[i].name) return &attrs_[i];
  return nullptr;
}

const AttrSpec* Attrs::spec(std::string_view name) const {
  return info_ ? info_->attr(name) : nullptr;
}

const lt_attr* Attrs::need(std::string_view name, lt_attr_kind kind) const {
  const lt_attr* a = find(name);
  if (a) {
    bool ok = a->kind == kind || (kind == LT_ATTR_FLOAT && a->kind == LT_ATTR_INT);
    if (!ok) {
      static const char* const kKinds[] = {"", "INT", "FLOAT", "INTS", "STRING"};
      fail(LT_STATUS_INVALID_ARGUMENT,
           where() + ": attribute '" + std::string(name) + "' must be " + kKinds[kind]);
    }
    if (kind == LT_ATTR_INTS && a->ints_len && !a->ints)
      fail(LT_STATUS_INVALID_ARGUMENT,
           where() + ": attribute '" + std::string(name) + "' has NULL ints");
    return a;
  }
  const AttrSpec* s = spec(name);
  if (!s || s->presence != AttrSpec::Presence::kDefault)
    fail(LT_STATUS_INVALID_ARGUMENT,
         where() + ": attribute '" + std::string(name) + "' is required");
  return nullptr;
}

int64_t Attrs::i(std::string_view name) const {
  const lt_attr* a = need(name, LT_ATTR_INT);
  return a ? a->i : spec(name)->i;
}

double Attrs::f(std::string_view name) const {
  const lt_attr* a = need(name, LT_ATTR_FLOAT);
  if (!a) return spec(name)->f;
  return a->kind == LT_ATTR_INT ? static_cast<double>(a->i) : a->f;
}

lt_dtype Attrs::dtype(std::string_view name) const {
  int64_t v = i(name);
  if (v < LT_DTYPE_F32 || v > LT_DTYPE_F16)
    fail(LT_STATUS_INVALID_ARGUMENT, where() + ": invalid dtype value " + std::to_string(v));
  return static_cast<lt_dtype>(v);
}

std::vector<int64_t> Attrs::ints(std::string_view name) const {
  const lt_attr* a = need(name, LT_ATTR_INTS);
  if (!a) return spec(name)->ints;
  return std::vector<int64_t>(a->ints, a->ints + a->ints_len);
}

std::vector<int64_t> Attrs::ints(std::string_view name, size_t len) const {
  std::vector<int64_t> v = ints(name);
  if (v.size() != len)
    fail(LT_STATUS_INVALID_ARGUMENT, where() + ": attribute '" + std::string(name) + "' has " +
                                         std::to_string(v.size()) + " entries, expected " +
                                         std::to_string(len));
  return v;
}

// ---- shape rules ------------------------------------------------------------------------

Shape broadcast_shapes(std::string_view what, std::span<const int64_t> a,
                       std::span<const int64_t> b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da == db || db == 1)
      out[i] = da;
    else if (da == 1)
      out[i] = db;
    else
      fail(LT_STATUS_SHAPE_MISMATCH, std::string(what) + ": shapes " + shape_str(a) + " and " +
                                         shape_str(b) + " do not broadcast");
  }
  return out;
}

bool broadcasts_to(std::span<const int64_t> in, std::span<const int64_t> out) {
  if (in.size() > out.size()) return false;
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] != 1 && in[i] != out[off + i]) return false;
  return true;
}

Shape reduce_shape(std::span<const int64_t> in, std::span<const int64_t> axes, bool keepdims) {
  Shape out;
  size_t k = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    bool red = k < axes.size() && axes[k] == static_cast<int64_t>(i);
    if (red) ++k;
    if (!red)
      out.push_back(in[i]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

Shape gather_shape(std::span<const int64_t> a, std::span<const int64_t> indices, int64_t axis) {
  Shape out(a.begin(), a.begin() + axis);
  out.insert(out.end(), indices.begin(), indices.end());
  out.insert(out.end(), a.begin() + axis + 1, a.end());
  return out;
}

int64_t window_out(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation) {
  int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  return span < 0 ? -1 : span / stride + 1;
}

// ---- owned graphs -----------------------------------------------------------------------

struct OwnedGraph::Impl {
  // Attribute storage, only for nodes that have attributes: a backend's copy of a
  // 2,000,000-node chain holds no empty vectors (88 bytes a node).
  struct AttrStore {
    std::vector<OwnedAttr> items;
    std::vector<lt_attr> attrs;  // views of items
  };
  struct Node {
    std::string op;
    lt_dtype dtype;
    Shape shape;
    std::vector<int32_t> operands;
    std::unique_ptr<AttrStore> attrs;
  };
  std::deque<Node> nodes;  // deque: element addresses stay stable while appending
  std::vector<lt_graph_node> views;
  std::vector<int32_t> inputs, outputs;
  uint64_t hash = 0;
  std::vector<int64_t> symbol_values;
  std::vector<lt_dim_expr> exprs;
  lt_graph graph{};
};

OwnedGraph::OwnedGraph() : impl_(std::make_unique<Impl>()) {}
OwnedGraph::~OwnedGraph() = default;
OwnedGraph::OwnedGraph(OwnedGraph&&) noexcept = default;
OwnedGraph& OwnedGraph::operator=(OwnedGraph&&) noexcept = default;

int32_t OwnedGraph::add(std::string_view op, lt_dtype dtype, Shape shape,
                        std::vector<int32_t> operands, const lt_attr* attrs, size_t num_attrs) {
  Impl::Node& n = impl_->nodes.emplace_back();
  n.op = std::string(op);
  n.dtype = dtype;
  n.shape = std::move(shape);
  n.operands = std::move(operands);
  if (num_attrs) {
    n.attrs = std::make_unique<Impl::AttrStore>();
    Impl::AttrStore& s = *n.attrs;
    s.items.reserve(num_attrs);
    s.attrs.reserve(num_attrs);
    for (size_t i = 0; i < num_attrs; ++i) {
      s.items.push_back(OwnedAttr::copy(attrs[i]));
      s.attrs.push_back(s.items.back().view());
    }
  }
  impl_->views.push_back(lt_graph_node{
      n.op.c_str(), n.dtype, n.shape.size(), n.shape.data(), n.operands.size(), n.operands.data(),
      n.attrs ? n.attrs->attrs.size() : 0, n.attrs ? n.attrs->attrs.data() : nullptr});
  return static_cast<int32_t>(impl_->nodes.size() - 1);
}

int32_t OwnedGraph::add_borrowed(const char* op, lt_dtype dtype, std::span<const int64_t> shape,
                                 std::vector<int32_t> operands, std::span<const lt_attr> attrs) {
  Impl::Node& n = impl_->nodes.emplace_back();  // op, shape, attrs left empty: borrowed
  n.dtype = dtype;
  n.operands = std::move(operands);
  impl_->views.push_back(lt_graph_node{op, dtype, shape.size(), shape.data(), n.operands.size(),
                                       n.operands.data(), attrs.size(), attrs.data()});
  return static_cast<int32_t>(impl_->nodes.size() - 1);
}

int32_t OwnedGraph::copy(const lt_graph_node& node, std::vector<int32_t> operands) {
  return add(node.op, node.dtype, Shape(node.shape, node.shape + node.rank), std::move(operands),
             node.attrs, node.num_attrs);
}

void OwnedGraph::pop() {
  impl_->nodes.pop_back();
  impl_->views.pop_back();
}

size_t OwnedGraph::size() const {
  return impl_->nodes.size();
}

const lt_graph_node& OwnedGraph::node(size_t i) const {
  return impl_->views[i];
}

void OwnedGraph::set_inputs(std::vector<int32_t> inputs) {
  impl_->inputs = std::move(inputs);
}
void OwnedGraph::set_outputs(std::vector<int32_t> outputs) {
  impl_->outputs = std::move(outputs);
}
void OwnedGraph::set_hash(uint64_t hash) {
  impl_->hash = hash;
}
void OwnedGraph::set_dynamic(std::vector<int64_t> values, std::vector<lt_dim_expr> exprs) {
  impl_->symbol_values = std::move(values);
  impl_->exprs = std::move(exprs);
}

const lt_graph& OwnedGraph::view() {
  Impl& m = *impl_;
  m.graph = graph_over(m.views, m.inputs, m.outputs, m.hash);
  m.graph.num_symbols = m.symbol_values.size();
  m.graph.symbol_values = m.symbol_values.data();
  m.graph.num_dim_exprs = m.symbol_values.empty() ? 0 : m.exprs.size();
  m.graph.dim_exprs = m.exprs.data();
  return m.graph;
}

OwnedGraph copy_graph(const lt_graph& g) {
  OwnedGraph og;
  for (size_t i = 0; i < g.num_nodes; ++i) {
    const lt_graph_node& n = g.nodes[i];
    og.copy(n, std::vector<int32_t>(n.operands, n.operands + n.num_operands));
  }
  og.set_inputs(std::vector<int32_t>(g.inputs, g.inputs + g.num_inputs));
  og.set_outputs(std::vector<int32_t>(g.outputs, g.outputs + g.num_outputs));
  og.set_hash(g.hash);
  if (g.struct_size >= LT_GRAPH_STRUCT_SIZE && g.num_symbols)
    og.set_dynamic(std::vector<int64_t>(g.symbol_values, g.symbol_values + g.num_symbols),
                   std::vector<lt_dim_expr>(g.dim_exprs, g.dim_exprs + g.num_dim_exprs));
  return og;
}

std::vector<size_t> value_bytes(const lt_graph& g) {
  std::vector<size_t> bytes(g.num_nodes);
  for (size_t i = 0; i < g.num_nodes; ++i)
    bytes[i] = static_cast<size_t>(DescRef(g.nodes[i]).numel()) * lt_dtype_size(g.nodes[i].dtype);
  return bytes;
}

const lt_attr* find_attr(const lt_graph_node& node, std::string_view name) {
  for (size_t i = 0; i < node.num_attrs; ++i)
    if (node.attrs[i].name && name == node.attrs[i].name) return &node.attrs[i];
  return nullptr;
}

OwnedAttr OwnedAttr::copy(const lt_attr& a) {
  OwnedAttr o;
  o.name = a.name ? a.name : "";
  o.kind = a.kind;
  o.i = a.i;
  o.f = a.f;
  if (a.kind == LT_ATTR_INTS && a.ints) o.ints.assign(a.ints, a.ints + a.ints_len);
  if (a.kind == LT_ATTR_STRING && a.s) o.s = a.s;
  return o;
}

lt_attr OwnedAttr::view() const {
  lt_attr v{};
  v.name = name.c_str();
  v.kind = kind;
  v.i = i;
  v.f = f;
  v.ints = ints.data();
  v.ints_len = ints.size();
  v.s = kind == LT_ATTR_STRING ? s.c_str() : nullptr;
  return v;
}

bool OwnedAttr::operator==(const OwnedAttr& o) const {
  const lt_attr a = view(), b = o.view();
  return same_attr(a, b);
}

bool same_attr(const lt_attr& a, const lt_attr& b) {
  const std::string_view an = a.name ? a.name : "", bn = b.name ? b.name : "";
  if (an != bn || a.kind != b.kind) return false;
  switch (a.kind) {
    case LT_ATTR_INT:
      return a.i == b.i;
    case LT_ATTR_FLOAT:  // bitwise: 0.0 and -0.0 are different attributes
      return std::memcmp(&a.f, &b.f, sizeof a.f) == 0;
    case LT_ATTR_INTS:
      return a.ints_len == b.ints_len &&
             (!a.ints_len || std::memcmp(a.ints, b.ints, a.ints_len * sizeof(int64_t)) == 0);
    case LT_ATTR_STRING:
      return std::string_view(a.s ? a.s : "") == std::string_view(b.s ? b.s : "");
    default:
      return false;
  }
}

// ---- structural hash --------------------------------------------------------------------

namespace {
struct Hasher {
  uint64_t h = 0xcbf29ce484222325ull;
  void bytes(const void* p, size_t n) {
    const unsigned char* c = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 0x100000001b3ull;
  }
  template <class T>
  void pod(const T& v) {
    bytes(&v, sizeof v);
  }
  void str(const char* s) {
    size_t n = s ? std::strlen(s) : 0;
    pod(n);
    bytes(s, n);
  }
};
}  // namespace

uint64_t structural_hash(const lt_graph& g) {
  Hasher h;
  h.pod(g.num_nodes);
  for (size_t i = 0; i < g.num_nodes; ++i) {
    const lt_graph_node& n = g.nodes[i];
    h.str(n.op);
    h.pod(n.dtype);
    h.pod(n.rank);
    h.bytes(n.shape, n.rank * sizeof(int64_t));
    h.pod(n.num_operands);
    h.bytes(n.operands, n.num_operands * sizeof(int32_t));
    h.pod(n.num_attrs);
    for (size_t a = 0; a < n.num_attrs; ++a) {
      const lt_attr& at = n.attrs[a];
      h.str(at.name);
      h.pod(at.kind);
      if (at.kind == LT_ATTR_INT) h.pod(at.i);
      if (at.kind == LT_ATTR_FLOAT) h.pod(at.f);
      if (at.kind == LT_ATTR_INTS) {
        h.pod(at.ints_len);
        h.bytes(at.ints, at.ints_len * sizeof(int64_t));
      }
      if (at.kind == LT_ATTR_STRING) h.str(at.s);
    }
  }
  h.pod(g.num_inputs);
  h.bytes(g.inputs, g.num_inputs * sizeof(int32_t));
  h.pod(g.num_outputs);
  h.bytes(g.outputs, g.num_outputs * sizeof(int32_t));
  if (LT_GRAPH_HAS_DYNAMIC(&g)) {  // a dynamic graph is not its static instance
    h.pod(g.num_symbols);
    h.bytes(g.dim_exprs, g.num_dim_exprs * sizeof(lt_dim_expr));
  }
  return h.h;
}

}  // namespace lt::lower
