// collect.h — stage 1 of a sync: pending roots to one graph (post-order over the live IR, cut at
// materialised and queued values), its cache key and program hash, and its plain-C view.
// Runs under the device's exec mutex (it marks the live nodes it visits).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph_buf.h"
#include "ir.h"

namespace lt {

// A graph cut from pending roots: topological nodes; materialised nodes and leaves are inputs.
struct Collected {
  std::vector<Node*> nodes;
  std::vector<int32_t> op_begin;  // operands of node i: operand_idx[op_begin[i]..op_begin[i+1])
  std::vector<int32_t> operand_idx;
  std::vector<int32_t> inputs;      // node index of input k
  std::vector<int32_t> outputs;     // node index of root k (unique)
  uint64_t key = 0;                 // structure + shapes + dtypes + attrs + operand indices
  uint64_t program = 0;             // the same without shapes and attributes (dynamic shapes)
  std::vector<uint8_t> input_flag;  // 1 if node i is an input of the graph
  // Rematerialisation tag of node i (ir.h Node::recompute_tag) for the optimiser's CSE, beside
  // the graph (never through the plugin ABI); empty when every tag is 0.
  std::vector<uint32_t> tags;
  bool is_input(size_t i) const { return input_flag[i] != 0; }
};
void collect(const std::vector<Node*>& roots, Collected& c);

// The whole collected graph as an lt_graph (borrowing from c's nodes).
void full_graph(const Collected& c, GraphBuf& gb);

// "12 nodes; outputs sub x6, mean; inputs 'x', 'y'": what a person recognises a graph by.
std::string graph_label(const Collected& c);
// The user's names of c's inputs ("" where unnamed), in input order.
std::vector<std::string> input_names(const Collected& c);

}  // namespace lt
