// plan.h — what the compile stage makes and the plan cache keeps: a Plan is one of three kinds
// (a std::variant): compiled regions, an instance of a dynamic plan at given sizes, or a
// dynamic program padded to bucket sizes. The run stage executes a Run, which the plan cache
// resolves from a Plan before anything runs (so running never compiles).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "lazytensor/lower/dynamic.hpp"
#include "lazytensor/lower/graph.hpp"
#include "runtime.h"

namespace lt {

struct CustomOp;

// One compiled region: runs on `dev` (the graph's device or the fallback's device).
struct Region {
  Device* dev = nullptr;  // nullptr: run by the core (host_node)
  lt_plugin_executable* exe = nullptr;
  std::vector<int32_t> in_globals;   // lowered-graph node bound to local input k
  std::vector<int32_t> out_globals;  // lowered-graph node of local output k
  std::vector<size_t> out_bytes;     // bytes of local output k
  int32_t host_node = -1;            // index into CompiledPlan::host_nodes (dev == nullptr)
  // A dynamic plan's region: the shape of local output k as forms of the symbols, so that a
  // run at other values allocates outputs of the right size.
  std::vector<std::vector<lower::DimForm>> out_forms;
  std::vector<lt_dtype> out_dtypes;
  // Buffer donation (docs/memory.md): per local output, the graph input position whose buffer
  // the plugin accepted to write it into, or -1. A run donates only an input nobody else holds.
  std::vector<int32_t> donor;
};

// A custom-op node no backend claims, or a collective (dist.cpp): what the core needs to run
// it on host memory.
struct HostNode {
  const CustomOp* op = nullptr;  // nullptr for a collective
  bool collective = false;
  int32_t node = -1;  // its lowered-graph index
  std::string name;
  lt_dtype dtype = LT_DTYPE_INVALID;
  std::vector<int64_t> shape;
  std::vector<int32_t> operands;  // lowered-graph nodes
  std::vector<lower::Desc> operand_descs;
  std::unique_ptr<AttrSet> attrs;  // owned copy (the lowered graph is gone after compile)
};

// Regions compiled from a partition plan. They index the *lowered* graph: the collected graph
// after decomposition, whose inputs and outputs are the collected graph's, in the same order.
struct CompiledPlan {
  size_t graph_nodes = 0;              // nodes of the lowered graph
  std::vector<int32_t> graph_inputs;   // lowered node of input k
  std::vector<int32_t> graph_outputs;  // lowered node of output k
  std::vector<Region> regions;
  std::vector<HostNode> host_nodes;
  // Constants the optimiser folded (optimize.cpp): lowered input node and its buffer on the
  // graph's device, uploaded once at compile time and bound by every run.
  std::vector<std::pair<int32_t, BufferPtr>> constants;
  // Per-op counters added on every execution: "fallback.<op>" (nodes run by the fallback or
  // the core) and "decomposed.<op>" (nodes of a composite the backend lacks, decomposed).
  std::vector<std::pair<std::string, uint64_t>> op_counts;
  uint64_t fallback_nodes = 0, decomposed_nodes = 0;
  uint64_t collectives = 0;  // host_nodes that are collectives, run by the core over MPI
  // For the metrics report: "cpu_jit: 398 nodes" / "fallback cpu_eager: gelu", what each
  // region's plugin reports about its executable, and each region's execute-call time.
  std::vector<std::string> region_labels;
  std::vector<std::vector<std::pair<std::string, double>>> region_stats;
  std::unique_ptr<std::atomic<uint64_t>[]> region_ns;
  // Set when every region runs every value of the symbols (docs/dynamic-shapes.md): the
  // collected graph with its expressions, which a new graph must match (lower::match).
  std::shared_ptr<lower::OwnedGraph> dyn_graph;

  CompiledPlan() = default;
  CompiledPlan(CompiledPlan&&) = default;
  ~CompiledPlan();  // destroys the executables
};

struct Plan;

// The concrete graph the cache holds for one key of a dynamic program: the dynamic plan (a
// CompiledPlan with dyn_graph, or a BucketedPlan) and the values of its symbols.
struct DynamicInstance {
  std::shared_ptr<Plan> base;
  std::vector<int64_t> symbols;
};

// A dynamic program for a backend that needs static shapes: a plan per bucket (its sizes
// rounded up), compiled from lower::mask_padding by the plan cache on first use.
struct BucketedPlan {
  std::shared_ptr<lower::OwnedGraph> dyn_graph;
  std::map<std::vector<int64_t>, std::shared_ptr<Plan>> buckets;  // device exec mutex
};

struct Plan {
  // The collected graph it was made for (the cache checks them against a hit).
  size_t num_nodes = 0, num_inputs = 0;
  std::vector<int32_t> outputs;  // collected node index of root k
  // For the metrics report: who this graph is and where its time goes. Counters are atomics
  // (the report reads them while the device runs the plan); metrics_reset zeroes them.
  uint64_t key = 0;    // the collected graph's structural hash
  std::string device;  // "cpu_jit:0"
  std::string label;   // "412 nodes; outputs sub x6, mean; inputs 'x', 'y'"
  mutable std::atomic<uint64_t> compile_ns{0}, runs{0}, run_ns{0};
  // Config background_compile: compiled on a background thread, or the fallback's stand-in run
  // meanwhile (counted as background_compile.compiled_steps / .eager_steps).
  enum class Made : uint8_t { kInline, kBackground, kStandIn } made = Made::kInline;

  std::variant<CompiledPlan, DynamicInstance, BucketedPlan> kind;

  CompiledPlan* compiled() { return std::get_if<CompiledPlan>(&kind); }
  const CompiledPlan* compiled() const { return std::get_if<CompiledPlan>(&kind); }
};

// How one collected graph runs, resolved by the plan cache under the device's exec mutex (so
// that a queued run, async_execution, never touches the cache or a dynamic graph): a compiled
// plan, at its sizes, or padded to its bucket with the padded shapes of its inputs and roots.
struct Run {
  std::shared_ptr<Plan> plan;    // holds a CompiledPlan
  std::vector<int64_t> symbols;  // a dynamic plan's sizes
  bool padded = false;           // a bucket plan: the sizes are inputs, shapes below
  std::vector<lower::Shape> in_padded, root_padded;
  // Set when the run is queued (async_execution): the job then holds one reference to each
  // input, which the donation check (run.cpp) does not count as another holder.
  bool queued = false;
};

}  // namespace lt
