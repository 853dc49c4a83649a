// executor.h — graph collection, partitioning, the compiled-plan type kept in the compile
// cache, and execution. Everything here runs under the target device's exec mutex.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lazytensor/lower/dynamic.hpp"
#include "lazytensor/lower/graph.hpp"
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
  uint64_t program = 0;             // the same without shapes and attributes (dynamic shapes)
  std::vector<uint8_t> input_flag;  // 1 if node i is an input of the graph
  bool is_input(size_t i) const { return input_flag[i] != 0; }
};
void collect(const std::vector<Node*>& roots, Collected& c);

// One compiled region: runs on `dev` (the graph's device or the fallback's device).
struct Region {
  Device* dev = nullptr;  // nullptr: a custom op's CPU kernel run by the core (host_node)
  lt_plugin_executable* exe = nullptr;
  std::vector<int32_t> in_globals;   // lowered-graph node bound to local input k
  std::vector<int32_t> out_globals;  // lowered-graph node of local output k
  std::vector<size_t> out_bytes;     // bytes of local output k
  int32_t host_node = -1;            // index into Plan::host_nodes (dev == nullptr)
  // A dynamic plan's region: the shape of local output k as forms of the symbols, so that a
  // run at other values allocates outputs of the right size.
  std::vector<std::vector<lower::DimForm>> out_forms;
  std::vector<lt_dtype> out_dtypes;
};

// A custom-op node no backend claims, or a collective (dist.cpp): what the core needs to run
// it on host memory.
struct HostNode {
  const struct CustomOp* op = nullptr;  // nullptr for a collective
  bool collective = false;
  int32_t node = -1;  // its lowered-graph index
  std::string name;
  lt_dtype dtype = LT_DTYPE_INVALID;
  std::vector<int64_t> shape;
  std::vector<int32_t> operands;  // lowered-graph nodes
  std::vector<lower::Desc> operand_descs;
  std::unique_ptr<AttrSet> attrs;  // owned copy (the lowered graph is gone after compile)
};

// The compiled form of a collected graph. Regions index the *lowered* graph: the collected
// graph after decomposition (lower::decompose), whose inputs and outputs are the collected
// graph's, in the same order.
struct Plan {
  size_t num_nodes = 0, num_inputs = 0;  // of the collected graph (cache check)
  std::vector<int32_t> outputs;          // collected node index of root k (cache check)
  size_t graph_nodes = 0;                // nodes of the lowered graph
  std::vector<int32_t> graph_inputs;     // lowered node of input k
  std::vector<int32_t> graph_outputs;    // lowered node of output k
  std::vector<Region> regions;
  std::vector<HostNode> host_nodes;
  // Per-op counters added on every execution: "fallback.<op>" (nodes run by the fallback or
  // the core) and "decomposed.<op>" (nodes of a composite the backend lacks, decomposed).
  std::vector<std::pair<std::string, uint64_t>> op_counts;
  uint64_t fallback_nodes = 0, decomposed_nodes = 0;
  // Config background_compile: compiled on a background thread, or the fallback's stand-in run
  // meanwhile (counted as background_compile.compiled_steps / .eager_steps).
  bool background = false, eager_stand_in = false;

  // For the metrics report: who this graph is and where its time goes. Counters are atomics
  // (the report reads them while the device runs the plan); metrics_reset zeroes them.
  uint64_t key = 0;                        // the collected graph's structural hash
  std::string device;                      // "cpu_jit:0"
  std::string label;                       // "412 nodes; outputs sub x6, mean; inputs 'x', 'y'"
  std::vector<std::string> region_labels;  // "cpu_jit: 398 nodes" / "fallback cpu_eager: gelu"
  // What each region's plugin reports about its executable at compile time (its optional stats
  // call): cpu_jit's kernel count, tpu_sim's simulated time per run by unit, ...
  std::vector<std::vector<std::pair<std::string, double>>> region_stats;
  mutable std::atomic<uint64_t> compile_ns{0}, runs{0}, run_ns{0};
  std::unique_ptr<std::atomic<uint64_t>[]> region_ns;  // one per region: execute-call time

  uint64_t collectives = 0;  // host_nodes that are collectives, run by the core over MPI

  // Dynamic shapes (docs/dynamic-shapes.md). A dynamic plan runs its program at every value of
  // its symbols: `dyn_graph` is the collected graph with its expressions, which a new graph must
  // match (lower::match). Its instances are what the compile cache holds for each concrete
  // graph: `dyn_base` and the symbol values, and no regions of their own.
  std::shared_ptr<lower::OwnedGraph> dyn_graph;
  std::shared_ptr<Plan> dyn_base;
  std::vector<int64_t> symbols;
  // A dynamic plan for a backend that needs static shapes: no regions of its own, but a plan
  // per bucket (its sizes rounded up), compiled from lower::mask_padding on first use (under
  // the device's exec mutex).
  bool bucketed = false;
  std::map<std::vector<int64_t>, std::shared_ptr<Plan>> buckets;
  ~Plan();
};

// LT_DUMP_DIR's Graphviz view of one compiled graph (graph_dump.cpp), over the lowered graph.
struct DotGroup {
  int kind = 0;                // lt::fusion::GroupKind
  std::vector<int32_t> nodes;  // lowered-graph nodes
};
struct DotRegion {
  enum Role { kBackend, kFallback, kCore } role = kBackend;
  std::string backend;           // plugin name, or "core" for a custom op's CPU kernel
  std::string note;              // e.g. why it runs on the fallback
  std::vector<int32_t> members;  // lowered-graph nodes
  std::vector<DotGroup> groups;  // the shared fusion planner's groups of two or more nodes
};
struct DotDump {
  const lt_graph* graph = nullptr;  // the lowered graph
  uint64_t key = 0;
  size_t traced_nodes = 0;  // of the collected graph, before decomposition
  std::string device, reason;
  std::vector<std::string> input_names;  // of graph input k ("" when unnamed)
  std::vector<int32_t> origin;           // lowered node -> composite OpId it came from, or -1
  std::vector<DotRegion> regions;
};
// Backends known to compile from lt::fusion::plan (cpu_jit, gpu_opencl): their groups are drawn.
bool uses_shared_fusion_planner(const std::string& backend);
std::vector<DotGroup> planner_groups(const lt_graph& region, const std::vector<int32_t>& in_globals,
                                     const std::vector<int32_t>& members);
// Writes <dump_dir>/lt_graph_<key>.dot; a write failure is logged, never thrown.
void dump_dot(Runtime* rt, const DotDump& d);

// True if `dev`'s plugin says it supports a canonical f32 example of `op`.
bool example_supported(Runtime* rt, Device* dev, uint16_t op);
// True if `op` is a composite whose decomposition of that example `dev` runs entirely.
bool example_decomposes(Runtime* rt, Device* dev, uint16_t op);

}  // namespace lt
