// work.cpp — the optimiser's mutable graph: conversion from and to lt_graph, replacement of
// uses, and compaction (topological order, dead nodes dropped) shared by every pass.
#include "work.hpp"

#include <algorithm>
#include <cstring>

namespace lt::lower::opt {

bool OwnedAttr::operator==(const OwnedAttr& o) const {
  if (name != o.name || kind != o.kind) return false;
  switch (kind) {
    case LT_ATTR_INT:
      return i == o.i;
    case LT_ATTR_FLOAT:  // bitwise: 0.0 and -0.0 are different attributes
      return std::memcmp(&f, &o.f, sizeof f) == 0;
    case LT_ATTR_INTS:
      return ints == o.ints;
    case LT_ATTR_STRING:
      return s == o.s;
  }
  return false;
}

const OwnedAttr* WNode::attr(std::string_view name) const {
  for (const OwnedAttr& a : attrs)
    if (a.name == name) return &a;
  return nullptr;
}

int64_t WNode::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool same_shape(const WNode& a, const WNode& b) {
  return a.shape == b.shape;
}

bool full_value(const WNode& n, double* v) {
  if (!n.is(kOpFull)) return false;
  const OwnedAttr* a = n.attr("value");
  *v = !a ? 0.0 : a->kind == LT_ATTR_FLOAT ? a->f : static_cast<double>(a->i);
  return true;
}

WNode make_full(lt_dtype d, const Shape& shape, double v) {
  WNode n;
  n.op = "full";
  n.info = &op_info(kOpFull);
  n.dtype = d;
  n.shape = shape;
  OwnedAttr a;
  a.name = "value";
  a.kind = LT_ATTR_FLOAT;
  a.f = v;
  n.attrs.push_back(std::move(a));
  return n;
}

int32_t Work::add(WNode n) {
  nodes.push_back(std::move(n));
  repl.push_back(static_cast<int32_t>(nodes.size() - 1));
  return static_cast<int32_t>(nodes.size() - 1);
}

int32_t Work::resolve(int32_t v) const {
  while (repl[static_cast<size_t>(v)] != v) v = repl[static_cast<size_t>(v)];
  return v;
}

void Work::replace(int32_t from, int32_t to) {
  to = resolve(to);
  if (resolve(from) != to) repl[static_cast<size_t>(resolve(from))] = to;
}

bool Work::opaque(const WNode& n) const {
  if (n.op == "input") return false;
  if (!n.info) return true;  // a custom op: effects the graph does not show
  if (n.info->category == Category::kCollective) return true;
  return opt && opt->is_opaque && opt->is_opaque(n.op.c_str());
}

size_t Work::compact() {
  for (WNode& n : nodes)
    for (int32_t& o : n.operands) o = resolve(o);
  for (int32_t& o : outputs) o = resolve(o);
  const size_t before = nodes.size();
  // Live nodes: those the outputs reach.
  std::vector<uint8_t> live(nodes.size(), 0);
  std::vector<int32_t> work(outputs.begin(), outputs.end());
  for (int32_t in : inputs) live[static_cast<size_t>(in)] = 1;
  while (!work.empty()) {
    const int32_t v = work.back();
    work.pop_back();
    if (live[static_cast<size_t>(v)]) continue;
    live[static_cast<size_t>(v)] = 1;
    for (int32_t o : nodes[static_cast<size_t>(v)].operands)
      if (!live[static_cast<size_t>(o)]) work.push_back(o);
  }
  // The order: inputs first, then the live nodes in their present order (the traced order the
  // core schedules by, docs/memory.md), a node a rewrite appended placed just before its first
  // reader (operands first). A walk from the roots would move every value next to its last
  // reader's root and undo the schedule that recomputation relies on.
  std::vector<int32_t> order;
  std::vector<uint8_t> state(nodes.size(), 0);  // 0 new, 1 on the stack, 2 placed
  order.reserve(nodes.size());
  for (int32_t in : inputs) state[static_cast<size_t>(in)] = 2, order.push_back(in);
  std::vector<std::pair<int32_t, size_t>> stack;
  for (size_t start = 0; start < nodes.size(); ++start) {
    const int32_t root = static_cast<int32_t>(start);
    if (!live[start] || state[start]) continue;
    stack.push_back({root, 0});
    state[start] = 1;
    while (!stack.empty()) {
      auto& [v, next] = stack.back();
      const WNode& n = nodes[static_cast<size_t>(v)];
      if (next < n.operands.size()) {
        const int32_t o = n.operands[next++];
        if (!state[static_cast<size_t>(o)]) {
          state[static_cast<size_t>(o)] = 1;
          stack.push_back({o, 0});
        }
        continue;
      }
      state[static_cast<size_t>(v)] = 2;
      order.push_back(v);
      stack.pop_back();
    }
  }
  std::vector<int32_t> index(nodes.size(), -1);
  std::vector<WNode> kept;
  kept.reserve(order.size());
  std::vector<std::vector<unsigned char>> consts;
  for (int32_t v : order) {
    index[static_cast<size_t>(v)] = static_cast<int32_t>(kept.size());
    WNode& n = nodes[static_cast<size_t>(v)];
    if (n.constant >= 0) {
      consts.push_back(std::move(constants[static_cast<size_t>(n.constant)]));
      n.constant = static_cast<int32_t>(consts.size() - 1);
    }
    kept.push_back(std::move(n));
  }
  for (WNode& n : kept)
    for (int32_t& o : n.operands) o = index[static_cast<size_t>(o)];
  for (int32_t& in : inputs) in = index[static_cast<size_t>(in)];
  for (int32_t& o : outputs) o = index[static_cast<size_t>(o)];
  nodes = std::move(kept);
  constants = std::move(consts);
  repl.resize(nodes.size());
  for (size_t i = 0; i < repl.size(); ++i) repl[i] = static_cast<int32_t>(i);
  return before - nodes.size();
}

std::vector<std::vector<int32_t>> Work::users() const {
  std::vector<std::vector<int32_t>> u(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    for (int32_t o : nodes[i].operands)
      u[static_cast<size_t>(o)].push_back(static_cast<int32_t>(i));
  return u;
}

Work Work::from_graph(const lt_graph& g, const OptimizeOptions& opt) {
  Work w;
  w.level = opt.level;
  w.opt = &opt;
  w.nodes.reserve(g.num_nodes);
  for (size_t i = 0; i < g.num_nodes; ++i) {
    const lt_graph_node& gn = g.nodes[i];
    WNode n;
    n.op = gn.op;
    if (n.op != "input") n.info = find_op(n.op);
    n.dtype = gn.dtype;
    n.shape.assign(gn.shape, gn.shape + gn.rank);
    n.operands.assign(gn.operands, gn.operands + gn.num_operands);
    for (size_t k = 0; k < gn.num_attrs; ++k) {
      const lt_attr& a = gn.attrs[k];
      OwnedAttr o;
      o.name = a.name ? a.name : "";
      o.kind = a.kind;
      o.i = a.i;
      o.f = a.f;
      if (a.ints) o.ints.assign(a.ints, a.ints + a.ints_len);
      if (a.kind == LT_ATTR_STRING && a.s) o.s = a.s;
      n.attrs.push_back(std::move(o));
    }
    if (i < opt.recompute_tags.size()) n.tag = opt.recompute_tags[i];
    n.origin = static_cast<int32_t>(i);
    w.add(std::move(n));
  }
  for (size_t k = 0; k < g.num_inputs; ++k) {
    w.inputs.push_back(g.inputs[k]);
    w.nodes[static_cast<size_t>(g.inputs[k])].input = static_cast<int32_t>(k);
  }
  w.outputs.assign(g.outputs, g.outputs + g.num_outputs);
  return w;
}

OwnedGraph Work::to_graph() const {
  OwnedGraph g;
  std::vector<lt_attr> view;
  std::vector<int32_t> const_inputs(constants.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const WNode& n = nodes[i];
    view.clear();
    for (const OwnedAttr& a : n.attrs)
      view.push_back({a.name.c_str(), a.kind, a.i, a.f, a.ints.data(), a.ints.size(),
                      a.kind == LT_ATTR_STRING ? a.s.c_str() : nullptr});
    g.add(n.op, n.dtype, n.shape, n.operands, view.data(), view.size());
    if (n.constant >= 0) const_inputs[static_cast<size_t>(n.constant)] = static_cast<int32_t>(i);
  }
  std::vector<int32_t> ins = inputs;
  ins.insert(ins.end(), const_inputs.begin(), const_inputs.end());
  g.set_inputs(std::move(ins));
  g.set_outputs(outputs);
  return g;
}

}  // namespace lt::lower::opt
