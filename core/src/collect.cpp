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
  struct Frame {
    Node* n;
    uint32_t next;
  };
  std::vector<Frame> stack;
  c.op_begin.push_back(0);
  uint64_t h = hash_mix(0x4c54475241504855ULL);
  uint64_t prog = hash_mix(0x50524f4752414dULL);  // the program: h without the numbers
  for (Node* root : roots) {
    if (root->visit_mark == epoch) {
      c.outputs.push_back(root->visit_index);  // also reached from an earlier root
      continue;
    }
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
      int32_t idx = static_cast<int32_t>(c.nodes.size());
      n->visit_index = idx;
      c.nodes.push_back(n);
      c.input_flag.push_back(input ? 1 : 0);
      if (n->recompute_tag && !input) {
        c.tags.resize(c.nodes.size(), 0);
        c.tags.back() = n->recompute_tag;
      }
      prog = hash_combine(prog, (static_cast<uint64_t>(input ? kOpInput : n->op) << 32) ^
                                    (static_cast<uint64_t>(n->dtype) << 8) ^ n->shape.size());
      if (input) {
        c.inputs.push_back(idx);
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
      stack.pop_back();
    }
    c.outputs.push_back(root->visit_index);
  }
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
