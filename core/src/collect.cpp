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

// What the walk notes of a node while it has the node in hand, so that the key is computed
// from these without touching the nodes again: its word of the program hash, its hash (an
// input's from input_hash) and, for an op, where its operands end in Collected::operand_idx.
struct Noted {
  uint64_t word;
  uint64_t hash;
  uint64_t seq;          // an op's Node::seq (program order)
  int32_t operands_end;  // an op's: its operands end here in the walk's operand list
};

// Per-thread scratch of collect (it runs under a device's exec mutex; a thread collects one
// graph at a time): reused from sync to sync, so a cache hit allocates only what it returns.
struct CollectScratch {
  std::vector<std::pair<Node*, uint32_t>> stack;
  std::vector<Node*> ops;
  std::vector<Noted> in_noted, op_noted;
  std::vector<std::pair<int32_t, uint32_t>> tags;   // (op rank, recompute tag)
  std::vector<std::pair<uint64_t, int32_t>> order;  // (seq, walk rank) of the ops, sorted
  std::vector<int32_t> place;                       // walk rank -> place among the ops
  std::vector<int32_t> operands;                    // operand_idx in the walk's order
  std::vector<uint8_t> seen;
};

// The calling thread's scratch, reached through one call per collect: a thread_local of the
// shared library named in collect itself cost a __tls_get_addr call at every use (~115 calls a
// sync, ~1 k instructions).
[[gnu::noinline]] CollectScratch& scratch() {
  thread_local CollectScratch t;
  return t;
}

uint64_t program_word(const Node* n, bool input) {
  return (static_cast<uint64_t>(input ? kOpInput : n->op) << 32) ^
         (static_cast<uint64_t>(n->dtype) << 8) ^ n->shape.size();
}

}  // namespace

// The key folds each node's own hash (computed once, when the node was recorded) with the
// positions of its operands in this graph, which tell sharing apart (x + x from x + y); the
// program hash is the same walk without shapes and attributes.
//
// The order (docs/memory.md): the graph's inputs first, in the walk's order (which the graph's
// structure fixes, so that a parameter updated last step is the same input this step), then its
// ops in the program's own order (Node::seq: operands before users), not the walk's. A walk from
// the roots places values long before their last readers (every activation and weight gradient
// of a training step waited for the last root), and would put a recompute region's
// recomputation right next to the forward it replaces. The walk notes all the keys need (a
// node's place among the inputs or the ops; the ops' offset, the number of inputs, comes at
// the end), and the nodes are not read again: a cache hit of a 100-node graph paid ~5% of its
// time for a second pass over the nodes and the arrays of the reordering. Mostly the walk meets
// the ops in program order already; else (a training step's backward) its notes are sorted.
void collect(const std::vector<Node*>& roots, Collected& c) {
  uint64_t epoch = g_epoch.fetch_add(1, std::memory_order_relaxed) + 1;
  CollectScratch& sc = scratch();
  sc.stack.clear();
  sc.ops.clear();
  sc.in_noted.clear();
  sc.op_noted.clear();
  sc.tags.clear();
  // 1. The nodes reachable from the roots, cut at materialised and queued values (post-order).
  // An input's visit_index is its place among the inputs, an op's is -1 - its place among the
  // ops (the walk's order), until the number of inputs is known.
  bool in_order = true;
  uint64_t last_seq = 0;
  for (Node* root : roots) {
    if (root->visit_mark == epoch) continue;  // also reached from an earlier root
    root->visit_mark = epoch;
    sc.stack.push_back({root, 0});
    while (!sc.stack.empty()) {
      auto& [n, next] = sc.stack.back();
      bool input = n->is_leaf() || n->materialized.load(std::memory_order_relaxed) || n->ticket;
      if (!input && next < n->num_operands) {
        Node* o = n->operand(next++);
        if (o->visit_mark != epoch) {
          o->visit_mark = epoch;
          sc.stack.push_back({o, 0});
        }
        continue;
      }
      if (input) {
        n->visit_index = static_cast<int32_t>(c.nodes.size());
        c.nodes.push_back(n);
        sc.in_noted.push_back({program_word(n, true), input_hash(n), 0, 0});
      } else {
        in_order = in_order && (sc.ops.empty() || n->seq >= last_seq);
        last_seq = n->seq;
        const auto rank = static_cast<int32_t>(sc.ops.size());
        n->visit_index = -1 - rank;
        sc.ops.push_back(n);
        if (n->recompute_tag) sc.tags.push_back({rank, n->recompute_tag});
        for (uint32_t k = 0; k < n->num_operands; ++k)
          c.operand_idx.push_back(n->operand(k)->visit_index);
        sc.op_noted.push_back(
            {program_word(n, false), n->hash, n->seq, static_cast<int32_t>(c.operand_idx.size())});
      }
      sc.stack.pop_back();
    }
  }
  const size_t num_inputs = c.nodes.size();
  const size_t num_ops = sc.ops.size(), total = num_inputs + num_ops;
  c.input_flag.assign(total, 0);
  std::fill(c.input_flag.begin(), c.input_flag.begin() + static_cast<ptrdiff_t>(num_inputs), 1);
  // 2. The ops in program order: mostly the walk's already; else sorted by seq (from the
  // walk's copy of each seq, not the nodes), and each op's place noted for its readers.
  std::vector<int32_t>& place = sc.place;
  if (!in_order) {
    sc.order.resize(num_ops);
    for (size_t r = 0; r < num_ops; ++r)
      sc.order[r] = {sc.op_noted[r].seq, static_cast<int32_t>(r)};
    std::sort(sc.order.begin(), sc.order.end());
    place.resize(num_ops);
    for (size_t p = 0; p < num_ops; ++p)
      place[static_cast<size_t>(sc.order[p].second)] = static_cast<int32_t>(p);
    std::swap(sc.operands, c.operand_idx);  // re-laid out in program order below
    c.operand_idx.clear();
    c.operand_idx.reserve(sc.operands.size());
  }
  auto final_index = [&](int32_t v) {  // the walk's visit_index -> the node's index in c
    if (v >= 0) return v;
    const int32_t rank = -1 - v;
    return static_cast<int32_t>(num_inputs) + (in_order ? rank : place[static_cast<size_t>(rank)]);
  };
  // 3. Indices, operands and keys in that order, from the walk's notes.
  c.nodes.resize(total);
  c.op_begin.reserve(total + 1);
  c.op_begin.assign(num_inputs + 1, 0);
  c.inputs.resize(num_inputs);
  uint64_t h = hash_mix(0x4c54475241504855ULL);
  uint64_t prog = hash_mix(0x50524f4752414dULL);  // the program: h without the numbers
  for (size_t i = 0; i < num_inputs; ++i) {
    c.inputs[i] = static_cast<int32_t>(i);
    prog = hash_combine(prog, sc.in_noted[i].word);
    h = hash_combine(h, sc.in_noted[i].hash);
  }
  for (size_t p = 0; p < num_ops; ++p) {
    const size_t r = in_order ? p : static_cast<size_t>(sc.order[p].second);
    const Noted& o = sc.op_noted[r];
    c.nodes[num_inputs + p] = sc.ops[r];
    prog = hash_combine(prog, o.word);
    h = hash_combine(h, o.hash);
    if (in_order) {
      for (int32_t at = c.op_begin.back(); at < o.operands_end; ++at) {
        const int32_t oi = c.operand_idx[static_cast<size_t>(at)] =
            final_index(c.operand_idx[static_cast<size_t>(at)]);
        h = hash_combine(h, static_cast<uint64_t>(oi));
        prog = hash_combine(prog, static_cast<uint64_t>(oi));
      }
      c.op_begin.push_back(o.operands_end);
    } else {
      const int32_t from = r ? sc.op_noted[r - 1].operands_end : 0;
      for (int32_t at = from; at < o.operands_end; ++at) {
        const int32_t oi = final_index(sc.operands[static_cast<size_t>(at)]);
        c.operand_idx.push_back(oi);
        h = hash_combine(h, static_cast<uint64_t>(oi));
        prog = hash_combine(prog, static_cast<uint64_t>(oi));
      }
      c.op_begin.push_back(static_cast<int32_t>(c.operand_idx.size()));
    }
  }
  if (!sc.tags.empty()) {
    c.tags.assign(total, 0);
    for (const auto& [rank, tag] : sc.tags)
      c.tags[static_cast<size_t>(final_index(-1 - rank))] = tag;
  }
  c.key = h;
  c.program = prog;
  // Duplicate roots are dropped (outputs never alias); order stays deterministic. Linear: a
  // 100,000-wide lt_sync has as many roots.
  std::vector<uint8_t>& seen = sc.seen;
  seen.assign(total, 0);
  c.outputs.reserve(roots.size());
  for (Node* root : roots) {
    const int32_t o = final_index(root->visit_index);
    if (!seen[static_cast<size_t>(o)]) seen[static_cast<size_t>(o)] = 1, c.outputs.push_back(o);
  }
  for (int32_t o : c.outputs) {
    c.key = hash_combine(c.key, 0x0u + static_cast<uint64_t>(o) + (1ull << 40));
    c.program = hash_combine(c.program, 0x0u + static_cast<uint64_t>(o) + (1ull << 40));
  }
  if (!c.tags.empty()) c.tags.resize(total, 0);
  // A thread keeps its scratch for the next sync, but not a huge graph's (as lower's Work).
  if (sc.ops.capacity() + sc.in_noted.capacity() > (size_t{1} << 16)) sc = CollectScratch{};
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
