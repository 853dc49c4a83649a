// graph_buf.h — a plain-C graph (lt_graph) built node by node: the form in which the collected
// graph and each region's graph cross the plugin ABI. Pointers borrow from the nodes added.
#pragma once

#include <cstdint>
#include <vector>

#include "lazytensor/lower/graph.hpp"
#include "lazytensor/lt_plugin.h"

namespace lt {

struct GraphBuf {
  std::vector<lt_graph_node> nodes;
  std::vector<int32_t> flat_ops;  // operands of all nodes, node by node
  std::vector<int32_t> inputs, outputs;
  lt_graph g{};

  // Appends `n` with operands `ops`; as an "input" node (no attributes) when `as_input`.
  void add(const lt_graph_node& n, bool as_input, const int32_t* ops, size_t num_ops) {
    lt_graph_node gn = n;
    if (as_input) {
      gn.op = "input";
      gn.num_attrs = 0;
      gn.attrs = nullptr;
      inputs.push_back(static_cast<int32_t>(nodes.size()));
    }
    gn.num_operands = num_ops;
    nodes.push_back(gn);
    flat_ops.insert(flat_ops.end(), ops, ops + num_ops);
  }
  // Points every node at its operands and fills `g`; call once, after the last add.
  const lt_graph* finish(uint64_t hash) {
    size_t off = 0;
    for (auto& n : nodes) {
      n.operands = flat_ops.data() + off;
      off += n.num_operands;
    }
    g = lower::graph_over(nodes, inputs, outputs, hash);
    return &g;
  }
};

}  // namespace lt
