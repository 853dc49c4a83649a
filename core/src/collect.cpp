// collect.cpp — pending roots to one graph and its keys, and the graph's plain-C view.
#include "collect.h"

#include <algorithm>

#include <fmt/format.h>

#include "ops.h"

namespace lt {
namespace {

std::atomic<uint64_t> g_epoch{0};

uint64_t input_hash(const Node* n) {
  if (n->is_leaf()) return n->hash;
  uint64_t h = hash_combine(hash_mix(kOpInput + 1), static_cast<uint64_t>(n->dtype));
  return hash_combine(
      h, hash_bytes(n->shape.data(), n->shape.size() * sizeof(int64_t), n->shape.size()));
}

lt_graph_node node_view(const Node* n, bool as_input) {
  lt_graph_node gn{};
  gn.op = as_input ? "input" : op_name(n->op);
  gn.dtype = n->dtype;
  gn.rank = n->shape.size();
  gn.shape = n->shape.data();
  if (!as_input && n->attrs) {
    gn.num_attrs = n->attrs->view.size();
    gn.attrs = n->attrs->view.data();
  }
  return gn;
}

}  // namespace

// The key folds each node's own hash (computed once, when the node was recorded) with the
// positions of its operands in this graph, which tell sharing apart (x + x from x + y); the
// program hash is the same walk without shapes and attributes.
void collect(const std::vector<Node*>& roots, Collected& c) {
  uint64_t epoch = g_epoch.fetch_add(1, std::memory_order_relaxed) + 1;
  // 1. The nodes reachable from the roots, cut at materialised and queued values (post-order).
  struct Frame {
    Node* n;
    uint32_t next;
  };
  std::vector<Frame> stack;
  for (Node* root : roots) {
    if (root->visit_mark == epoch) continue;  // also reached from an earlier root
    root->visit_mark = epoch;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      Frame& f = stack.back();
      Node* n = f.n;
      bool input = n->is_leaf() || n->materialized.load(std::memory_order_relaxed) || n->ticket;
      if (!input && f.next < n->num_operands) {
        Node* o = n->operand(f.next++);
        if (o->visit_mark != epoch) {
          o->visit_mark = epoch;
          stack.push_back({o, 0});
        }
        continue;
      }
      c.nodes.push_back(n);
      c.input_flag.push_back(input ? 1 : 0);
      stack.pop_back();
    }
  }
  // 2. The schedule (docs/memory.md): the graph's inputs first, in the walk's order (which the
  // graph's structure fixes, so that a parameter updated last step is the same input this
  // step), then its ops in the program's own order (Node::seq: operands before users), not the
  // walk's. A walk from the roots places values long before their last readers (every
  // activation and weight gradient of a training step waited for the last root), and would put
  // a recompute region's recomputation right next to the forward it replaces.
  {
    std::vector<Node*> ops;
    std::vector<Node*> nodes;
    nodes.reserve(c.nodes.size());
    for (size_t i = 0; i < c.nodes.size(); ++i)
      (c.input_flag[i] ? nodes : ops).push_back(c.nodes[i]);
    const size_t num_inputs = nodes.size();
    auto older = [](const Node* a, const Node* b) { return a->seq < b->seq; };
    if (!std::is_sorted(ops.begin(), ops.end(), older)) std::sort(ops.begin(), ops.end(), older);
    nodes.insert(nodes.end(), ops.begin(), ops.end());
    c.nodes = std::move(nodes);
    std::fill(c.input_flag.begin(), c.input_flag.begin() + static_cast<ptrdiff_t>(num_inputs), 1);
    std::fill(c.input_flag.begin() + static_cast<ptrdiff_t>(num_inputs), c.input_flag.end(), 0);
  }
  // 3. Indices, operands and keys in that order.
  for (size_t i = 0; i < c.nodes.size(); ++i) c.nodes[i]->visit_index = static_cast<int32_t>(i);
  c.op_begin.push_back(0);
  uint64_t h = hash_mix(0x4c54475241504855ULL);
  uint64_t prog = hash_mix(0x50524f4752414dULL);  // the program: h without the numbers
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    Node* n = c.nodes[i];
    const bool input = c.input_flag[i] != 0;
    if (n->recompute_tag && !input) {
      c.tags.resize(c.nodes.size(), 0);
      c.tags[i] = n->recompute_tag;
    }
    prog = hash_combine(prog, (static_cast<uint64_t>(input ? kOpInput : n->op) << 32) ^
                                  (static_cast<uint64_t>(n->dtype) << 8) ^ n->shape.size());
    if (input) {
      c.inputs.push_back(static_cast<int32_t>(i));
      h = hash_combine(h, input_hash(n));
    } else {
      h = hash_combine(h, n->hash);
      for (uint32_t k = 0; k < n->num_operands; ++k) {
        int32_t oi = n->operand(k)->visit_index;
        c.operand_idx.push_back(oi);
        h = hash_combine(h, static_cast<uint64_t>(oi));
        prog = hash_combine(prog, static_cast<uint64_t>(oi));
      }
    }
    c.op_begin.push_back(static_cast<int32_t>(c.operand_idx.size()));
  }
  for (Node* root : roots) c.outputs.push_back(root->visit_index);
  // Duplicate roots are dropped (outputs never alias); order stays deterministic. Linear: a
  // 100,000-wide lt_sync has as many roots.
  std::vector<uint8_t> seen(c.nodes.size(), 0);
  std::vector<int32_t> uniq;
  for (int32_t o : c.outputs)
    if (!seen[static_cast<size_t>(o)]) seen[static_cast<size_t>(o)] = 1, uniq.push_back(o);
  c.outputs = std::move(uniq);
  for (int32_t o : c.outputs) {
    h = hash_combine(h, 0x0u + static_cast<uint64_t>(o) + (1ull << 40));
    prog = hash_combine(prog, 0x0u + static_cast<uint64_t>(o) + (1ull << 40));
  }
  if (!c.tags.empty()) c.tags.resize(c.nodes.size(), 0);
  c.key = h;
  c.program = prog;
}

void full_graph(const Collected& c, GraphBuf& gb) {
  gb.nodes.reserve(c.nodes.size());  // exact sizes: no doubling slack on a 1,000,000-node graph
  gb.flat_ops.reserve(c.operand_idx.size());
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    gb.add(node_view(c.nodes[i], c.is_input(i)), c.is_input(i),
           c.operand_idx.data() + c.op_begin[i],
           static_cast<size_t>(c.op_begin[i + 1] - c.op_begin[i]));
  }
  gb.outputs = c.outputs;
  gb.finish(c.key);
}

std::string graph_label(const Collected& c) {
  std::vector<std::pair<std::string, int>> roots;
  for (int32_t o : c.outputs) {
    std::string op = c.is_input(o) ? "input" : op_name(c.nodes[o]->op);
    auto it =
        std::find_if(roots.begin(), roots.end(), [&](const auto& r) { return r.first == op; });
    if (it == roots.end())
      roots.emplace_back(op, 1);
    else
      ++it->second;
  }
  std::string out = fmt::format("{} nodes; outputs", c.nodes.size());
  for (size_t k = 0; k < roots.size() && k < 4; ++k)
    out += fmt::format("{} {}{}", k ? "," : "", roots[k].first,
                       roots[k].second > 1 ? fmt::format(" x{}", roots[k].second) : "");
  if (roots.size() > 4) out += ", ...";
  std::string names;
  for (int32_t k : c.inputs)
    if (c.nodes[k]->name)
      names += fmt::format("{}'{}'", names.empty() ? "" : ", ", *c.nodes[k]->name);
  if (!names.empty()) out += "; inputs " + names;
  return out;
}

std::vector<std::string> input_names(const Collected& c) {
  std::vector<std::string> out;
  out.reserve(c.inputs.size());
  for (int32_t k : c.inputs) out.push_back(c.nodes[k]->name ? *c.nodes[k]->name : std::string());
  return out;
}

}  // namespace lt
