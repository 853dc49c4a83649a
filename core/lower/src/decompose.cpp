// decompose.cpp — the decompose pass: a Builder whose emit() asks the backend about every node
// it appends and rewrites, recursively, what the backend lacks.
#include "lazytensor/lower/decompose.hpp"

namespace lt::lower {
namespace {

constexpr int kMaxDepth = 8;  // composites nest a few levels (silu -> sigmoid -> exp)

bool is_storage(lt_dtype d) {
  return d == LT_DTYPE_BF16 || d == LT_DTYPE_F16;
}

// An owned copy of a node about to be popped from the graph being built.
struct Saved {
  std::string op;
  lt_dtype dtype;
  Shape shape;
  std::vector<int32_t> operands;
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> ints;
  std::vector<lt_attr> attrs;

  explicit Saved(const lt_graph_node& n)
      : op(n.op),
        dtype(n.dtype),
        shape(n.shape, n.shape + n.rank),
        operands(n.operands, n.operands + n.num_operands) {
    names.reserve(n.num_attrs);
    ints.reserve(n.num_attrs);
    for (size_t i = 0; i < n.num_attrs; ++i) {
      lt_attr a = n.attrs[i];
      names.emplace_back(a.name);
      ints.emplace_back(a.ints, a.ints + (a.kind == LT_ATTR_INTS ? a.ints_len : 0));
      a.name = names.back().c_str();
      a.ints = ints.back().data();
      a.s = nullptr;
      attrs.push_back(a);
    }
  }
  Desc desc() const { return Desc{dtype, shape}; }
};

class Pass : public Builder {
 public:
  Pass(OwnedGraph& g, const Supported& supported, const Supported& fallback,
       DecomposeReport& report)
      : Builder(g), supported_(supported), fallback_(fallback), report_(report) {}

  // Node v was just appended: keep it if the backend runs it, else rewrite it if possible.
  Value settle(Value v) {
    if (ask(v)) return v;
    const OpInfo* op = find_op(g_.node(v).op);
    if (!op || depth_ >= kMaxDepth) return v;
    if (op->id != kOpCast && has_storage(v)) return widen(v, *op);
    if (op->composite) return rewrite(v, *op, false);
    if (op->category == Category::kElementwise && needs_broadcast(v)) return rewrite(v, *op, true);
    return v;
  }

  bool changed() const { return changed_; }

 protected:
  Value emit(OpId op, const Desc& out, const std::vector<Value>& operands,
             const std::vector<Attr>& attrs) override {
    return settle(Builder::emit(op, out, operands, attrs));
  }

 private:
  bool ask(Value v) {
    bool ok = supported_(g_.view(), static_cast<size_t>(v));
    report_.supported.resize(g_.size(), -1);
    report_.origin.resize(g_.size(), -1);
    report_.supported[v] = ok ? 1 : 0;
    report_.origin[v] = origin_;
    if (ok) ++natively_;
    return ok;
  }

  bool needs_broadcast(Value v) const {
    const lt_graph_node& n = g_.node(v);
    for (size_t k = 0; k < n.num_operands; ++k) {
      const lt_graph_node& o = g_.node(n.operands[k]);
      if (o.rank != n.rank || !std::equal(o.shape, o.shape + o.rank, n.shape)) return true;
    }
    return false;
  }

  bool has_storage(Value v) const {
    const lt_graph_node& n = g_.node(v);
    if (is_storage(n.dtype)) return true;
    for (size_t k = 0; k < n.num_operands; ++k)
      if (is_storage(g_.node(n.operands[k]).dtype)) return true;
    return false;
  }

  // Replaces node v (the last one), which computes on bf16/f16, by the same op in f32 on its
  // operands cast to f32, and its result cast back (round to nearest even on store): the
  // arithmetic of the storage types, for a backend without it. A composite is widened before
  // it is decomposed, so its intermediate values stay f32 (softmax of bf16 logits rounds once).
  Value widen(Value v, const OpInfo& op) {
    bool may_undo = !fallback_ || fallback_(g_.view(), static_cast<size_t>(v));
    Saved node(g_.node(v));
    g_.pop();
    size_t mark = g_.size(), natively = natively_;
    if (depth_++ == 0) origin_ = op.id;
    std::vector<Value> ops;
    for (Value o : node.operands)
      ops.push_back(is_storage(g_.node(o).dtype) ? cast(o, LT_DTYPE_F32) : o);
    const lt_dtype wide = is_storage(node.dtype) ? LT_DTYPE_F32 : node.dtype;
    std::vector<lt_attr> attrs = node.attrs;  // (the original's stay for restore())
    for (lt_attr& a : attrs)                  // full, arange, random_*: the dtype they create
      if (std::string_view(a.name) == "dtype" && a.kind == LT_ATTR_INT && a.i == node.dtype)
        a.i = wide;
    Value r = settle(g_.add(node.op, wide, node.shape, ops, attrs.data(), attrs.size()));
    if (wide != node.dtype) r = cast(r, node.dtype);
    if (--depth_ == 0) origin_ = -1;
    if (natively_ == natively && may_undo) {  // the backend runs none of it: keep the original
      return restore(node, mark);
    }
    changed_ = true;
    report_.widened.emplace_back(node.op);
    return r;
  }

  // The rewrite of `node` (everything after `mark`) runs nothing natively: it goes, and the
  // original node comes back as one node for the fallback, which is cheaper.
  Value restore(const Saved& node, size_t mark) {
    while (g_.size() > mark) g_.pop();
    Value r = g_.add(node.op, node.dtype, node.shape, node.operands, node.attrs.data(),
                     node.attrs.size());
    report_.supported.resize(g_.size());
    report_.origin.resize(g_.size());
    report_.supported[r] = 0;
    report_.origin[r] = origin_;
    return r;
  }

  // Replaces node v (the last one) by its decomposition or its explicitly broadcast form;
  // undoes that when the backend runs none of the new nodes.
  Value rewrite(Value v, const OpInfo& op, bool broadcast) {
    bool may_undo = !fallback_ || fallback_(g_.view(), static_cast<size_t>(v));
    Saved node(g_.node(v));
    g_.pop();
    size_t mark = g_.size(), natively = natively_;
    if (depth_++ == 0) origin_ = op.id;
    Value r;
    if (broadcast) {
      std::vector<Value> ops;
      for (Value o : node.operands) ops.push_back(broadcast_to(o, node.shape));
      r = g_.add(node.op, node.dtype, node.shape, ops, node.attrs.data(), node.attrs.size());
      ask(r);
    } else {
      Attrs attrs(node.attrs.data(), node.attrs.size(), &op, node.op);
      r = decompose(*this, op.id, node.operands, attrs, node.desc());
    }
    if (--depth_ == 0) origin_ = -1;
    if (natively_ == natively && may_undo) {  // nothing runs natively: one fallback node is cheaper
      return restore(node, mark);
    }
    changed_ = true;
    if (broadcast)
      ++report_.broadcasts;
    else
      report_.decomposed.emplace_back(node.op);
    return r;
  }

  const Supported& supported_;
  const Supported& fallback_;
  DecomposeReport& report_;
  int depth_ = 0;
  int32_t origin_ = -1;  // the op being rewritten at depth 0
  size_t natively_ = 0;  // nodes the backend said it runs
  bool changed_ = false;
};

}  // namespace

bool decompose(const lt_graph& g, const Supported& supported, OwnedGraph* out,
               DecomposeReport* report, const Supported& fallback) {
  DecomposeReport local;
  DecomposeReport& rep = report ? *report : local;
  rep = DecomposeReport{};
  OwnedGraph og;
  Pass pass(og, supported, fallback, rep);
  std::vector<int32_t> map(g.num_nodes);
  std::vector<int32_t> ops;
  for (size_t i = 0; i < g.num_nodes; ++i) {
    const lt_graph_node& n = g.nodes[i];
    ops.assign(n.operands, n.operands + n.num_operands);
    for (int32_t& o : ops) o = map[o];
    Value v = og.copy(n, ops);
    rep.supported.resize(og.size(), -1);
    rep.origin.resize(og.size(), -1);
    rep.supported[v] = -1;
    rep.origin[v] = -1;
    map[i] = std::string_view(n.op) == "input" ? v : pass.settle(v);
    // Nodes made for node i all come after those of earlier nodes (a rewrite pops only its own).
    rep.source.resize(og.size(), static_cast<int32_t>(i));
  }
  if (!pass.changed()) return false;
  std::vector<int32_t> ins(g.num_inputs), outs(g.num_outputs);
  for (size_t k = 0; k < g.num_inputs; ++k) ins[k] = map[g.inputs[k]];
  for (size_t k = 0; k < g.num_outputs; ++k) outs[k] = map[g.outputs[k]];
  og.set_inputs(std::move(ins));
  og.set_outputs(std::move(outs));
  og.set_hash(g.hash);
  rep.supported.resize(og.size(), -1);
  rep.origin.resize(og.size(), -1);
  rep.source.resize(og.size(), -1);
  *out = std::move(og);
  return true;
}

bool decompose_declined(const lt_graph& g, const Supported& supported, OwnedGraph* out) {
  auto declined = [&](const lt_graph& r) {
    for (size_t i = 0; i < r.num_nodes; ++i)
      if (std::string_view(r.nodes[i].op) != "input" && !supported(r, i)) return i;
    return r.num_nodes;
  };
  size_t bad = declined(g);
  if (bad == g.num_nodes) return false;
  const bool rewritten = decompose(g, supported, out);
  const lt_graph& r = rewritten ? out->view() : g;
  if (rewritten) bad = declined(r);
  if (bad < r.num_nodes)
    fail(LT_STATUS_UNSUPPORTED, "node " + std::to_string(bad) + " (" + r.nodes[bad].op + ", " +
                                    desc_str(r.nodes[bad]) + ") is not supported");
  return rewritten;
}

}  // namespace lt::lower
