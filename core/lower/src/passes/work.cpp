// work.cpp — the optimiser's working graph: conversion from lt_graph (borrowing names, shapes
// and attributes), replacement of uses with use counts kept up to date (a node dies with its
// last use), and the one compaction into an lt_graph at the end, in the traced order.
#include "work.hpp"

#include <algorithm>
#include <cstring>

#include "lazytensor/lower/error.hpp"

namespace lt::lower::opt {

const lt_attr* WNode::attr(std::string_view name) const {
  for (const lt_attr& a : attrs)
    if (a.name && name == a.name) return &a;
  return nullptr;
}

int64_t WNode::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool same_shape(std::span<const int64_t> a, std::span<const int64_t> b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

bool same_op_and_attrs(const WNode& a, const WNode& b) {
  if (a.info != b.info || a.dtype != b.dtype || a.attrs.size() != b.attrs.size() ||
      !same_shape(a.shape, b.shape) || (!a.info && std::strcmp(a.op, b.op) != 0))
    return false;
  for (size_t k = 0; k < a.attrs.size(); ++k)
    if (!same_attr(a.attrs[k], b.attrs[k])) return false;
  return true;
}

bool full_value(const WNode& n, double* v) {
  if (!n.is(kOpFull)) return false;
  const lt_attr* a = n.attr("value");
  *v = !a ? 0.0 : a->kind == LT_ATTR_FLOAT ? a->f : static_cast<double>(a->i);
  return true;
}

WNode make_full(Work& w, lt_dtype d, std::span<const int64_t> shape, double v) {
  WNode n;
  n.info = &op_info(kOpFull);
  n.op = "full";
  n.dtype = d;
  n.shape = shape;
  lt_attr a{};
  a.name = "value";  // a literal: the view needs no storage of its own
  a.kind = LT_ATTR_FLOAT;
  a.f = v;
  n.attrs = w.attr_views.emplace_back(1, a);
  n.own_attrs = true;
  return n;
}

int32_t Work::add(WNode n) {
  // Passes make only leaves here (a full, a folded constant): a made node with operands would
  // leave their use counts short, and release would then free nodes it still reads.
  if (!n.operands.empty())
    fail(LT_STATUS_INTERNAL, std::string("optimize: a pass made a ") + n.op +
                                 " node with operands through Work::add (a bug: please report)");
  n.dead = true;  // until something reads it (replace, set_operand)
  n.opaque = !n.is_input() && op_opaque(n.op, n.info);
  nodes.push_back(n);
  repl.push_back(static_cast<int32_t>(nodes.size() - 1));
  uses.push_back(0);
  return static_cast<int32_t>(nodes.size() - 1);
}

void Work::release(int32_t v) {
  std::vector<int32_t>& stack = release_stack_;
  stack.assign(1, v);
  while (!stack.empty()) {
    const size_t x = static_cast<size_t>(stack.back());
    stack.pop_back();
    if (--uses[x] > 0 || nodes[x].input >= 0 || nodes[x].dead) continue;  // inputs stay
    nodes[x].dead = true;
    --live;
    for (int32_t o : nodes[x].operands) stack.push_back(resolve(o));
  }
}

namespace {
// A made node (no operands) comes alive with its first use.
void revive(Work& w, int32_t v) {
  WNode& n = w.nodes[static_cast<size_t>(v)];
  if (!n.dead) return;
  n.dead = false;
  ++w.live;
}
}  // namespace

void Work::replace(int32_t from, int32_t to) {
  from = resolve(from);
  to = resolve(to);
  if (from == to) return;
  repl[static_cast<size_t>(from)] = to;
  uses[static_cast<size_t>(to)] += uses[static_cast<size_t>(from)];
  if (uses[static_cast<size_t>(to)] > 0) revive(*this, to);
  uses[static_cast<size_t>(from)] = 1;  // released below: `from` dies, its operands lose a use
  release(from);
}

void Work::set_operand(int32_t v, size_t k, int32_t to) {
  const int32_t old = operand(v, k);
  to = resolve(to);
  if (old == to) return;
  nodes[static_cast<size_t>(v)].operands[k] = to;
  ++uses[static_cast<size_t>(to)];
  revive(*this, to);
  release(old);
}

void Work::set_attrs(int32_t v, std::vector<OwnedAttr> attrs) {
  const std::vector<OwnedAttr>& kept = attr_store.emplace_back(std::move(attrs));
  std::vector<lt_attr>& view = attr_views.emplace_back();
  for (const OwnedAttr& a : kept) view.push_back(a.view());
  nodes[static_cast<size_t>(v)].attrs = view;
  nodes[static_cast<size_t>(v)].own_attrs = true;
}

bool Work::op_opaque(const char* op, const OpInfo* info) {
  if (!info) return true;  // a custom op: effects the graph does not show
  if (info->category == Category::kCollective) return true;
  if (!opt || !opt->is_opaque) return false;
  const size_t id = static_cast<size_t>(info->id);
  if (id >= opaque_op_.size()) opaque_op_.resize(id + 1, -1);
  if (opaque_op_[id] < 0) opaque_op_[id] = opt->is_opaque(op) ? 1 : 0;
  return opaque_op_[id] == 1;
}

void Work::load(const lt_graph& g, const OptimizeOptions& options) {
  // The core names every node of one op with the same interned string, so the op table is
  // searched once per name pointer (a hash of the name per node was a tenth of the optimiser).
  // Whether the op is opaque is cached with it.
  constexpr size_t kCache = 64;
  const char* names[kCache] = {};
  const OpInfo* infos[kCache] = {};
  bool opaques[kCache] = {};
  Work& w = *this;
  w.opt = &options;
  w.opaque_op_.clear();  // the caller's is_opaque may differ from the last graph's
  auto lookup = [&](WNode& n) {
    const size_t h = (reinterpret_cast<uintptr_t>(n.op) >> 3) % kCache;
    if (names[h] != n.op) {
      names[h] = n.op;
      const bool input = std::strcmp(n.op, "input") == 0;
      infos[h] = input ? nullptr : find_op(n.op);
      opaques[h] = !input && w.op_opaque(n.op, infos[h]);
    }
    n.info = infos[h];
    n.opaque = opaques[h];
  };
  const OptimizeOptions& opt = options;
  w.constants.clear();
  w.attr_views.clear();
  w.attr_store.clear();
  w.unread_at_start = 0;
  w.nodes.clear();
  w.inputs.clear();
  w.loaded = g.num_nodes;
  w.fold_made_from = 0;
  w.level = opt.level;
  size_t total = 0;
  for (size_t i = 0; i < g.num_nodes; ++i) total += g.nodes[i].num_operands;
  w.operand_store.resize(total);
  // Room for the nodes rewrites make (a reallocation copies every node).
  const size_t room = g.num_nodes + g.num_nodes / 8 + 16;
  w.nodes.reserve(room);
  w.repl.reserve(room);
  w.uses.reserve(room);
  w.nodes.resize(g.num_nodes);
  w.repl.resize(g.num_nodes);
  w.uses.assign(g.num_nodes, 0);
  bool matmul = false, permute = false;
  w.gemm_facts.assign(g.num_nodes, GemmLayouts::Facts{});
  size_t at = 0;
  for (size_t i = 0; i < g.num_nodes; ++i) {
    const lt_graph_node& gn = g.nodes[i];
    WNode& n = w.nodes[i];
    n.op = gn.op;
    lookup(n);
    n.dtype = gn.dtype;
    n.shape = {gn.shape, gn.rank};
    n.operands = {w.operand_store.data() + at, gn.num_operands};
    std::copy(gn.operands, gn.operands + gn.num_operands, n.operands.begin());
    at += gn.num_operands;
    for (int32_t o : n.operands) ++w.uses[static_cast<size_t>(o)];
    matmul = matmul || n.is(kOpMatmul);
    permute = permute || n.is(kOpPermute);
    const bool gemm = n.is(kOpMatmul) && is_host_gemm_dtype(n.dtype);
    w.gemm_facts[i].kind = gemm               ? GemmLayouts::kGemm
                           : n.is(kOpPermute) ? GemmLayouts::kPermute
                                              : GemmLayouts::kOther;
    for (int32_t o : n.operands)
      GemmLayouts::read(w.gemm_facts[static_cast<size_t>(o)], static_cast<int32_t>(i), gemm);
    n.attrs = {gn.attrs, gn.num_attrs};
    if (i < opt.recompute_tags.size()) n.tag = opt.recompute_tags[i];
    n.origin = static_cast<int32_t>(i);
    w.repl[i] = static_cast<int32_t>(i);
  }
  w.inputs.reserve(g.num_inputs);
  for (size_t k = 0; k < g.num_inputs; ++k) {
    w.inputs.push_back(g.inputs[k]);
    w.nodes[static_cast<size_t>(g.inputs[k])].input = static_cast<int32_t>(k);
  }
  w.outputs.assign(g.outputs, g.outputs + g.num_outputs);
  for (int32_t o : w.outputs) ++w.uses[static_cast<size_t>(o)];
  w.matmul_and_permute = matmul && permute;
  for (int32_t o : w.outputs) GemmLayouts::output(w.gemm_facts[static_cast<size_t>(o)]);
  // The caller's order may hold nodes no output reads: they are dead from the start (users
  // come after their operands, so one backward sweep finds them all).
  w.live = g.num_nodes;
  for (size_t i = g.num_nodes; i-- > 0;) {
    WNode& n = w.nodes[i];
    if (w.uses[i] > 0 || n.is_input()) continue;
    n.dead = true;
    --w.live;
    ++w.unread_at_start;
    for (int32_t o : n.operands) --w.uses[static_cast<size_t>(o)];
  }
}

void Work::trim() {
  // Past this many nodes the arrays are freed after the graph: a thread that once optimised a
  // 1,000,000-node graph must not keep ~100 MB for the small ones that follow.
  constexpr size_t kKeep = size_t{1} << 16;
  if (nodes.capacity() <= kKeep && operand_store.capacity() <= 4 * kKeep) return;
  Work fresh;
  std::swap(*this, fresh);
}

OptGraph Work::to_graph(std::vector<int32_t>* origin,
                        std::vector<std::vector<unsigned char>>* take_constants) {
  // The order: inputs first, then the live nodes in their present order (the traced order the
  // core schedules by, docs/memory.md), a node a rewrite made placed just before its first
  // reader (operands first). A walk from the roots would move every value next to its last
  // reader's root and undo the schedule that recomputation relies on. Operands are written
  // back resolved (uses are counted on what they resolve to: nothing else changes).
  {
    OptGraph g;
    if (in_index_order(g, origin, take_constants)) {
      if (take_constants) move_attrs(g);
      return g;
    }
  }
  std::vector<int32_t>& order = ints1;
  std::vector<int32_t>& index = ints2;  // node -> its position in `order`, once placed
  order.clear();
  index.assign(nodes.size(), -1);
  order.reserve(live + constants.size());
  size_t total_operands = 0;
  auto place = [&](int32_t v) {
    index[static_cast<size_t>(v)] = static_cast<int32_t>(order.size());
    order.push_back(v);
    total_operands += nodes[static_cast<size_t>(v)].operands.size();
  };
  for (int32_t in : inputs) place(in);
  std::vector<std::pair<int32_t, size_t>>& stack = walk_;
  stack.clear();
  auto visit = [&](int32_t root) {
    if (index[static_cast<size_t>(root)] >= 0) return;
    // Most nodes' operands are placed already (they come before it): no walk.
    bool ready = true;
    for (int32_t& o : nodes[static_cast<size_t>(root)].operands) {
      o = resolve(o);
      ready = ready && index[static_cast<size_t>(o)] >= 0;
    }
    if (ready) return place(root);
    stack.push_back({root, 0});
    index[static_cast<size_t>(root)] = -2;  // on the stack
    while (!stack.empty()) {
      auto& [v, next] = stack.back();
      WNode& n = nodes[static_cast<size_t>(v)];
      if (next < n.operands.size()) {
        const int32_t o = n.operands[next] = resolve(n.operands[next]);
        ++next;
        if (index[static_cast<size_t>(o)] == -1) {
          index[static_cast<size_t>(o)] = -2;
          for (int32_t& oo : nodes[static_cast<size_t>(o)].operands) oo = resolve(oo);
          stack.push_back({o, 0});
        }
        continue;
      }
      const int32_t done = v;
      stack.pop_back();
      place(done);
    }
  };
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!nodes[i].dead && repl[i] == static_cast<int32_t>(i)) visit(static_cast<int32_t>(i));
  for (int32_t o : outputs) visit(resolve(o));  // an output read by nothing else
  OptGraph g;
  g.nodes.resize(order.size());
  g.operands.resize(total_operands);
  std::vector<int32_t>& const_inputs = ints3;
  const_inputs.clear();
  if (origin) origin->resize(order.size());
  size_t at = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const WNode& n = nodes[static_cast<size_t>(order[k])];
    int32_t* ops = g.operands.data() + at;
    for (size_t j = 0; j < n.operands.size(); ++j)
      ops[j] = index[static_cast<size_t>(n.operands[j])];
    at += n.operands.size();
    g.nodes[k] =
        lt_graph_node{n.op, n.dtype,        n.shape.size(), n.shape.data(), n.operands.size(),
                      ops,  n.attrs.size(), n.attrs.data()};
    if (n.constant >= 0) {
      const_inputs.push_back(static_cast<int32_t>(k));
      if (take_constants)
        take_constants->push_back(std::move(constants[static_cast<size_t>(n.constant)]));
    }
    if (origin) (*origin)[k] = n.origin;
  }
  g.inputs.reserve(inputs.size() + const_inputs.size());
  for (int32_t in : inputs) g.inputs.push_back(index[static_cast<size_t>(in)]);
  g.inputs.insert(g.inputs.end(), const_inputs.begin(), const_inputs.end());
  g.outputs.reserve(outputs.size());
  for (int32_t o : outputs) g.outputs.push_back(index[static_cast<size_t>(resolve(o))]);
  if (take_constants) move_attrs(g);
  return g;
}

void Work::move_attrs(OptGraph& g) {
  // The attributes rewrites made go with the graph (a list's elements keep their addresses).
  g.attr_store = std::move(attr_store);
  g.attr_views = std::move(attr_views);
}

bool Work::in_index_order(OptGraph& g, std::vector<int32_t>* origin,
                          std::vector<std::vector<unsigned char>>* take_constants) {
  // What a use resolves to comes before it, or is a node a rewrite made (it has no operands): a
  // rewrite only redirects a use to an operand's operand, CSE to an earlier equal node, and
  // a made node is placed just before its first reader. So: inputs, then the live nodes by
  // index, in one pass. Checked as it goes; false sends to_graph the long way.
  std::vector<int32_t>& index = ints2;
  std::vector<int32_t>& const_inputs = ints3;
  std::vector<int32_t>& const_data = ints1;  // their Work::constants, moved once it succeeded
  index.assign(nodes.size(), -1);
  const_inputs.clear();
  const_data.clear();
  g.nodes.reserve(live);
  g.operands.resize(operand_store.size());
  if (origin) {
    origin->clear();
    origin->reserve(live);
  }
  size_t at = 0;
  auto push = [&](size_t v, const int32_t* ops) {
    const WNode& n = nodes[v];
    index[v] = static_cast<int32_t>(g.nodes.size());
    g.nodes.push_back(lt_graph_node{n.op, n.dtype, n.shape.size(), n.shape.data(),
                                    n.operands.size(), ops, n.attrs.size(), n.attrs.data()});
    if (origin) origin->push_back(n.origin);
    if (n.constant >= 0) {
      const_inputs.push_back(index[v]);
      const_data.push_back(n.constant);
    }
  };
  auto emit = [&](size_t v) {
    WNode& n = nodes[v];
    int32_t* ops = g.operands.data() + at;
    for (size_t j = 0; j < n.operands.size(); ++j) {
      const int32_t o = n.operands[j] = resolve(n.operands[j]);
      if (index[static_cast<size_t>(o)] < 0 && static_cast<size_t>(o) >= loaded &&
          nodes[static_cast<size_t>(o)].operands.empty())
        push(static_cast<size_t>(o), nullptr);  // a made node, before its first reader
      ops[j] = index[static_cast<size_t>(o)];
      if (ops[j] < 0) return false;
    }
    at += n.operands.size();
    push(v, ops);
    return true;
  };
  for (int32_t in : inputs) emit(static_cast<size_t>(in));
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!nodes[i].dead && repl[i] == static_cast<int32_t>(i) && index[i] < 0 && !emit(i)) {
      g = OptGraph{};
      return false;
    }
  if (take_constants)
    for (int32_t c : const_data) take_constants->push_back(std::move(constants[size_t(c)]));
  g.operands.resize(at);  // no reallocation: the views stay
  g.inputs.reserve(inputs.size() + const_inputs.size());
  for (int32_t in : inputs) g.inputs.push_back(index[static_cast<size_t>(in)]);
  g.inputs.insert(g.inputs.end(), const_inputs.begin(), const_inputs.end());
  g.outputs.reserve(outputs.size());
  for (int32_t o : outputs) g.outputs.push_back(index[static_cast<size_t>(resolve(o))]);
  return true;
}

}  // namespace lt::lower::opt
