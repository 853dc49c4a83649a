// compile.h — the compile stage: a partition plan to a Plan (each region compiled by its
// backend through the device client, a failed target compile retried on the fallback), with
// the report the dumps and the metrics labels read. Runs under the device's exec mutex, or on a
// background thread from a copy of the graph (never the live IR).
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "collect.h"
#include "partition.h"
#include "plan.h"

namespace lt {

// Who a compiled graph is, copied from the collected graph (a background compile never touches
// the live IR).
struct PlanSource {
  size_t num_nodes = 0, num_inputs = 0;
  std::vector<int32_t> outputs;
  uint64_t key = 0;
  std::string label, why;  // graph_label(c); why it was compiled (the dump's title)
  std::vector<std::string> input_names;
  std::vector<std::string> traced_at;  // per node: "train.cpp:57"; filled for graph dumps only
  PlanSource(const Collected& c, std::string reason);
  // A graph the core built from c (padded to buckets): its own shape, c's identity.
  PlanSource(const lt_graph& g, const Collected& c, std::string reason);
};

// The placement the partition stage asks for `dev`: its plugin's answers, the fallback's
// (cpu_eager, when it is another plugin), custom ops, the runtime's policy and region limit.
// `live`: the collected graph `g` was built from, on the calling thread, so that a fallback
// warning can name the line that traced the node (null: a copy, a background compile).
// `origin` (optional): g's node -> the collected node it computes, -1 if none (an optimised
// graph; optimize.h).
Placement placement(Device* dev, const Collected* live = nullptr,
                    std::span<const int32_t> origin = {});

// A region graph ready to compile; `exprs` are a dynamic region's expressions (buf.g points at
// them once set).
struct PreparedRegion {
  RegionGraph graph;
  std::vector<lt_dim_expr> exprs;
};

// Partitions and compiles `g` for `dev` (`live`, `origin`: as for placement()).
std::shared_ptr<Plan> compile_plan(Device* dev, const lt_graph& g, const PlanSource& src,
                                   const Collected* live = nullptr,
                                   std::span<const int32_t> origin = {});

// Compiles a partition whose regions' graphs are prepared (dynamic regions carry their
// expressions). `started`: when the compile began (partitioning counts as compile time).
// `all_dynamic` (optional, out): every region's executable runs every value of
// the symbols; else `why_static` says which backend compiles static shapes only.
std::shared_ptr<Plan> compile_partition(
    Device* dev, Partition& part, std::vector<PreparedRegion>& regions, const PlanSource& src,
    bool* all_dynamic = nullptr, std::string* why_static = nullptr,
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now());

// Every region's graph of `part` (host regions get an empty one).
std::vector<PreparedRegion> prepare_regions(Partition& part);

}  // namespace lt
