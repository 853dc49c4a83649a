// cut.h — cutting a graph too large for one compile into regions of bounded size (issue #18).
// A backend compiles each region it is given as one program; a 1,000,000-node chain handed
// whole makes a driver (PoCL, LLVM) build one enormous program, in time and memory that grow
// faster than the graph. The core therefore closes a region once it holds `max_region_nodes`
// nodes (config key of that name, env LT_MAX_REGION_NODES) and opens the next one: the values
// that cross a cut stay on the device (a region's outputs are the next one's inputs, no
// transfer), and the cut is counted in the metrics (`graphs_cut`, `regions_cut`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ir.h"

namespace lt {

// compile_plan's step 3 asks, before a node joins a region, whether it may.
class RegionCutter {
 public:
  explicit RegionCutter(size_t max_nodes) : max_(max_nodes ? max_nodes : SIZE_MAX) {}
  // True if a region holding `size` nodes may take one more. False: the region is full, the
  // node opens a new region, and that is counted as one cut.
  bool admits(size_t size) {
    if (size < max_) return true;
    ++cuts_;
    return false;
  }
  size_t cuts() const { return cuts_; }

 private:
  size_t max_;
  size_t cuts_ = 0;
};

// Adds a compiled graph's cuts to the metrics (graphs_cut + 1, regions_cut + cuts) and logs
// them at info level; nothing when cuts is 0.
void record_cuts(Runtime* rt, uint64_t key, size_t nodes, size_t regions, size_t cuts);

// Node index -> region-local index, reused across the regions of one graph: only the entries
// a region touched are reset, so building every region's graph costs the sum of the regions'
// sizes, never regions x graph size.
class LocalIndex {
 public:
  explicit LocalIndex(size_t n) : local_(n, -1) {}
  int32_t& operator[](size_t i) { return local_[i]; }
  void set(size_t i, int32_t v) {
    if (local_[i] < 0) touched_.push_back(static_cast<int32_t>(i));
    local_[i] = v;
  }
  void clear() {
    for (int32_t i : touched_) local_[static_cast<size_t>(i)] = -1;
    touched_.clear();
  }

 private:
  std::vector<int32_t> local_;
  std::vector<int32_t> touched_;
};

}  // namespace lt
