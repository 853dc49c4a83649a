// partition.h — the partition stage: a pure function from a graph and a placement (who runs
// what, asked through callbacks) to a partition plan: the graph after decomposing what the
// target lacks, each node's site (target backend, fallback, or the core's host), and regions in
// topological order. It loads no plugin and touches no runtime state, so it is unit-tested
// with plain callbacks (tests/stages).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cut.h"
#include "fallback_policy.h"
#include "graph_buf.h"
#include "lazytensor/lower/graph.hpp"

namespace lt {

// "Does this backend run node i of g?"
using SupportsFn = std::function<bool(const lt_graph& g, size_t node)>;

struct Placement {
  std::string target;      // the target backend's name (messages)
  SupportsFn supports;     // the target's answer (required)
  std::string fallback;    // the fallback backend's name; "" when none is loaded
  SupportsFn fallback_of;  // its answer; null when there is no fallback distinct from the target
  std::function<bool(const char* op)> is_custom;  // a run-time custom op (null: none)
  FallbackPolicy policy = FallbackPolicy::kWarn;
  size_t max_region_nodes = 0;  // 0: no limit
  // Policy "warn": called for each node sent to the fallback (the caller warns once per op);
  // `node` indexes the graph given to partition(), or is -1 for a node of its decomposition.
  std::function<void(const char* op, const std::string& desc, int32_t node)> warn;
};

enum class Site : uint8_t {
  kInput,     // a graph input: no region
  kTarget,    // compiled by the target backend
  kFallback,  // compiled by the fallback backend (cpu_eager)
  kHost,      // run by the core on host memory: a collective, or a custom op's CPU kernel
};

struct PartRegion {
  Site site = Site::kTarget;
  std::vector<int32_t> members;  // nodes of the partitioned graph, in topological order
};

// A partition plan. Regions index graph(): the input graph, or its decomposition, whose inputs
// and outputs are the input graph's in the same order.
struct Partition {
  const lt_graph* input = nullptr;
  bool decomposed = false;
  lower::OwnedGraph lowered;    // the decomposition, when decomposed
  std::vector<int32_t> origin;  // node -> OpId of the composite it came from, or -1
  std::vector<int32_t> source;  // when decomposed: node -> the input graph's node it came from
  std::vector<Site> site;       // per node
  std::vector<PartRegion> regions;
  std::vector<int32_t> region_of;     // per node; -1 for inputs
  std::vector<uint8_t> used_outside;  // per node: its value leaves its region or is an output
  // Per-op counts "fallback.<op>", "decomposed.<op>", "widened.<op>", "widened_nodes".
  std::vector<std::pair<std::string, uint64_t>> op_counts;
  uint64_t fallback_nodes = 0, decomposed_nodes = 0, collectives = 0;
  size_t cuts = 0;  // regions closed for holding max_region_nodes nodes

  const lt_graph& graph() { return decomposed ? lowered.view() : *input; }
  // "lowered node i (f32 [2,3]), from the decomposition of 'gelu'": for messages.
  std::string describe(size_t node);
};

// Partitions `g` (which must outlive the result). Throws lt::Error when a node can run nowhere
// (UNSUPPORTED) or only on the fallback under policy "error" (FALLBACK_REFUSED).
Partition partition(const lt_graph& g, const Placement& placement);

void add_count(std::vector<std::pair<std::string, uint64_t>>& counts, std::string key);

// Region r's own graph: values from outside become "input" nodes first, values used outside
// (or graph outputs) become its outputs. `local` is scratch shared by one graph's regions.
struct RegionGraph {
  GraphBuf buf;
  std::vector<int32_t> in_globals;   // partitioned-graph node bound to local input k
  std::vector<int32_t> out_globals;  // partitioned-graph node of local output k
  std::vector<size_t> out_bytes;     // bytes of local output k
};
void region_graph(Partition& part, size_t r, RegionGraph& out, LocalIndex& local);

// "cpu_jit: 398 nodes" or, for a region of few op kinds, "fallback cpu_eager: gelu x2".
std::string region_label(const lt_graph& g, const std::vector<int32_t>& members,
                         const std::string& where);

}  // namespace lt
