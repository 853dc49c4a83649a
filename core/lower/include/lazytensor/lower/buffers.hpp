// buffers.hpp — buffer assignment: packs temporaries with known live ranges into one arena so
// that buffers whose ranges do not overlap share bytes (a training step's intermediates take
// the size of its widest point, not of its sum).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lt::lower {

// A temporary written at step `first` and last read at step `last` (first <= last).
struct LiveRange {
  size_t bytes = 0;
  int64_t first = 0, last = 0;
};

struct ArenaPlan {
  std::vector<size_t> offsets;  // per range, 64-byte aligned
  size_t bytes = 0;             // the arena's size
};

// Offsets such that two ranges overlapping in time never overlap in bytes; a range ending at
// step s and one starting at s overlap (a step's outputs never alias its inputs). Greedy
// first fit in order of first use. The live ranges are kept in runs of at most 64 that bound
// their largest gap, so a search steps over whole runs instead of over every live range.
ArenaPlan pack_live_ranges(const std::vector<LiveRange>& ranges);

}  // namespace lt::lower
