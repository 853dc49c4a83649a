// graph_dump.h — LT_DUMP_DIR's views of a compiled graph, written from the compile stage's
// report: each region's graph as text, and the whole graph as Graphviz DOT (graph_dump.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime.h"

namespace lt {

// One step of a compiling backend's kernel plan (lt::lower::plan_kernels): what it runs.
struct DotStep {
  int kind = 0;                // lt::lower::StepKind
  int group_kind = 0;          // lt::fusion::GroupKind
  std::vector<int32_t> nodes;  // lowered-graph nodes
};
struct DotRegion {
  enum Role { kBackend, kFallback, kCore } role = kBackend;
  std::string backend;           // plugin name, or "core" for a custom op's CPU kernel
  std::string note;              // e.g. why it runs on the fallback
  std::vector<int32_t> members;  // lowered-graph nodes
  std::vector<DotStep> steps;    // the shared kernel planner's steps (in-tree compiling backends)
};
// What the compile stage reports about one compiled graph, for the dumps.
struct DotDump {
  const lt_graph* graph = nullptr;  // the lowered graph
  uint64_t key = 0;
  size_t traced_nodes = 0;  // of the collected graph, before decomposition
  std::string device, reason;
  std::vector<std::string> input_names;  // of graph input k ("" when unnamed)
  std::vector<int32_t> origin;           // lowered node -> composite OpId it came from, or -1
  std::vector<std::string> traced_at;    // lowered node -> "train.cpp:57" that traced it, or ""
  std::vector<DotRegion> regions;
};
// The steps a backend that compiles from the shared kernel planner (lt::lower::
// builtin_kernel_target: cpu_jit, gpu_opencl) runs for `region`; empty for any other backend.
std::vector<DotStep> planner_steps(const std::string& backend, const lt_graph& region,
                                   const std::vector<int32_t>& in_globals,
                                   const std::vector<int32_t>& members);
// Writes <dump_dir>/lt_graph_<key>.dot; a write failure is logged, never thrown.
void dump_dot(Runtime* rt, const DotDump& d);
// Writes <dump_dir>/lt_graph_<key>_r<region>_<backend>.txt: one region's graph as the plugin
// received it; a write failure is logged, never thrown.
void dump_region_text(Runtime* rt, const lt_graph& g, const std::string& backend, uint64_t key,
                      size_t region);
// Writes <dump_dir>/lt_graph_<key>_<suffix>.txt, the text listing of `g` headed by `what` (a
// region, or the optimiser's graph after a pass: suffix "opt3_cse"); failures are logged.
void write_graph_text(Runtime* rt, const lt_graph& g, uint64_t key, const std::string& suffix,
                      const std::string& what);

}  // namespace lt
