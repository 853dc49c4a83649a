// graph.cpp — OwnedGraph, composite expansion (softmax, log_softmax) and the structural
// hash used by compiling backends for their own compile caches.
#include <cstring>
#include <deque>
#include <string>

#include "lazytensor/fusion.hpp"

namespace lt::fusion {

struct OwnedGraph::Impl {
  struct Node {
    std::string op;
    lt_dtype dtype;
    std::vector<int64_t> shape;
    std::vector<int32_t> operands;
    std::vector<std::string> attr_names, attr_strings;
    std::vector<std::vector<int64_t>> attr_ints;
    std::vector<lt_attr> attrs;
  };
  std::deque<Node> nodes;  // deque: element addresses stay stable while appending
  std::vector<lt_graph_node> views;
  std::vector<int32_t> inputs, outputs;
  uint64_t hash = 0;
  lt_graph graph{};
};

OwnedGraph::OwnedGraph() : impl_(std::make_unique<Impl>()) {}
OwnedGraph::~OwnedGraph() = default;
OwnedGraph::OwnedGraph(OwnedGraph&&) noexcept = default;
OwnedGraph& OwnedGraph::operator=(OwnedGraph&&) noexcept = default;

int32_t OwnedGraph::add(std::string_view op, lt_dtype dtype, std::vector<int64_t> shape,
                        std::vector<int32_t> operands, const lt_attr* attrs, size_t num_attrs) {
  Impl::Node& n = impl_->nodes.emplace_back();
  n.op = std::string(op);
  n.dtype = dtype;
  n.shape = std::move(shape);
  n.operands = std::move(operands);
  n.attr_names.reserve(num_attrs);
  n.attr_strings.reserve(num_attrs);
  n.attr_ints.reserve(num_attrs);
  for (size_t i = 0; i < num_attrs; ++i) {
    lt_attr a = attrs[i];
    n.attr_names.emplace_back(a.name ? a.name : "");
    n.attr_strings.emplace_back(a.s ? a.s : "");
    n.attr_ints.emplace_back(a.ints ? std::vector<int64_t>(a.ints, a.ints + a.ints_len)
                                    : std::vector<int64_t>{});
    a.name = n.attr_names.back().c_str();
    a.s = a.kind == LT_ATTR_STRING ? n.attr_strings.back().c_str() : nullptr;
    a.ints = n.attr_ints.back().data();
    a.ints_len = n.attr_ints.back().size();
    n.attrs.push_back(a);
  }
  return static_cast<int32_t>(impl_->nodes.size() - 1);
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

const lt_graph& OwnedGraph::view() {
  Impl& m = *impl_;
  m.views.resize(m.nodes.size());
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    const Impl::Node& n = m.nodes[i];
    m.views[i] =
        lt_graph_node{n.op.c_str(),      n.dtype,           n.shape.size(), n.shape.data(),
                      n.operands.size(), n.operands.data(), n.attrs.size(), n.attrs.data()};
  }
  m.graph.struct_size = LT_GRAPH_STRUCT_SIZE;
  m.graph.num_nodes = m.views.size();
  m.graph.nodes = m.views.data();
  m.graph.num_inputs = m.inputs.size();
  m.graph.inputs = m.inputs.data();
  m.graph.num_outputs = m.outputs.size();
  m.graph.outputs = m.outputs.data();
  m.graph.hash = m.hash;
  return m.graph;
}

bool expand_composites(const lt_graph& g, OwnedGraph* out) {
  bool any = false;
  for (size_t i = 0; i < g.num_nodes && !any; ++i) {
    std::string_view op = g.nodes[i].op ? g.nodes[i].op : "";
    any = (op == "softmax" || op == "log_softmax") && g.nodes[i].num_operands == 1;
  }
  if (!any) return false;
  OwnedGraph og;
  std::vector<int32_t> map(g.num_nodes);
  for (size_t i = 0; i < g.num_nodes; ++i) {
    const lt_graph_node& n = g.nodes[i];
    std::vector<int32_t> ops(n.num_operands);
    for (size_t k = 0; k < n.num_operands; ++k) ops[k] = map[n.operands[k]];
    std::vector<int64_t> shape(n.shape, n.shape + n.rank);
    std::string_view op = n.op;
    const lt_attr* axis = find_attr(n, "axis");
    if ((op == "softmax" || op == "log_softmax") && n.num_operands == 1 && axis &&
        axis->kind == LT_ATTR_INT && axis->i >= 0 && static_cast<size_t>(axis->i) < n.rank) {
      int64_t ax = axis->i;
      std::vector<int64_t> red = shape;
      red[ax] = 1;
      lt_attr rattrs[2] = {{"axes", LT_ATTR_INTS, 0, 0.0, &ax, 1, nullptr},
                           {"keepdims", LT_ATTR_INT, 1, 0.0, nullptr, 0, nullptr}};
      int32_t x = ops[0];
      int32_t m = og.add("max", n.dtype, red, {x}, rattrs, 2);
      int32_t s = og.add("sub", n.dtype, shape, {x, m});
      int32_t e = og.add("exp", n.dtype, shape, {s});
      int32_t z = og.add("sum", n.dtype, red, {e}, rattrs, 2);
      if (op == "softmax") {
        map[i] = og.add("div", n.dtype, shape, {e, z});
      } else {
        int32_t lz = og.add("log", n.dtype, red, {z});
        map[i] = og.add("sub", n.dtype, shape, {s, lz});
      }
      continue;
    }
    map[i] = og.add(op, n.dtype, std::move(shape), std::move(ops), n.attrs, n.num_attrs);
  }
  std::vector<int32_t> ins(g.num_inputs), outs(g.num_outputs);
  for (size_t k = 0; k < g.num_inputs; ++k) ins[k] = map[g.inputs[k]];
  for (size_t k = 0; k < g.num_outputs; ++k) outs[k] = map[g.outputs[k]];
  og.set_inputs(std::move(ins));
  og.set_outputs(std::move(outs));
  og.set_hash(g.hash);
  *out = std::move(og);
  return true;
}

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
  return h.h;
}

}  // namespace lt::fusion
