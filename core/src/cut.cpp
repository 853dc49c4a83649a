// cut.cpp — the metrics and the log line of a graph cut into regions of bounded size (cut.h).
#include "cut.h"

#include "runtime.h"

namespace lt {

void record_cuts(Runtime* rt, uint64_t key, size_t nodes, size_t regions, size_t cuts) {
  if (!cuts) return;
  {
    std::lock_guard lk(rt->metrics.mu);
    rt->metrics.named["graphs_cut"] += 1;
    rt->metrics.named["regions_cut"] += static_cast<double>(cuts);
  }
  rt->log->info(
      "graph {:016x}: {} nodes cut into {} regions of at most {} nodes (max_region_nodes)", key,
      nodes, regions, rt->config.max_region_nodes);
}

}  // namespace lt
