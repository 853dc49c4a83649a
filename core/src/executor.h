// executor.h — graph collection, partitioning, the compiled-plan type kept in the compile
// cache, and execution. Everything here runs under the target device's exec mutex.
#pragma once

#include <vector>

#include "runtime.h"

namespace lt {

// A graph cut from pending roots: topological nodes; materialised nodes and leaves are inputs.
struct Collected {
  std::vector<Node*> nodes;
  std::vector<int32_t> op_begin;  // operands of node i: operand_idx[op_begin[i]..op_begin[i+1])
  std::vector<int32_t> operand_idx;
  std::vector<int32_t> inputs;      // node index of input k
  std::vector<int32_t> outputs;     // node index of root k (unique)
  uint64_t key = 0;                 // structure + shapes + dtypes + attrs + operand indices
  std::vector<uint8_t> input_flag;  // 1 if node i is an input of the graph
  bool is_input(size_t i) const { return input_flag[i] != 0; }
};
void collect(const std::vector<Node*>& roots, Collected& c);

// One compiled region: runs on `dev` (the graph's device or the fallback's device).
struct Region {
  Device* dev = nullptr;  // nullptr: a custom op's CPU kernel run by the core (host_node)
  lt_plugin_executable* exe = nullptr;
  std::vector<int32_t> in_globals;   // collected node index bound to local input k
  std::vector<int32_t> out_globals;  // collected node index of local output k
  int32_t host_node = -1;            // custom-op node run on host (dev == nullptr)
};

struct Plan {
  size_t num_nodes = 0, num_inputs = 0;
  std::vector<int32_t> outputs;
  std::vector<Region> regions;
  std::vector<uint16_t> fallback_ops;  // one entry per node run by the fallback
  ~Plan();
};

// True if `dev`'s plugin says it supports a canonical f32 example of `op`.
bool example_supported(Runtime* rt, Device* dev, uint16_t op);

}  // namespace lt
