// buffers.cpp — first-fit packing of live ranges into one arena.
#include "lazytensor/lower/buffers.hpp"

#include <algorithm>
#include <numeric>

namespace lt::lower {

ArenaPlan pack_live_ranges(const std::vector<LiveRange>& ranges) {
  ArenaPlan plan;
  plan.offsets.assign(ranges.size(), 0);
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return ranges[a].first < ranges[b].first; });
  struct Block {
    size_t offset, bytes;
    int64_t last;
  };
  std::vector<Block> live;  // sorted by offset
  for (size_t r : order) {
    const LiveRange& x = ranges[r];
    std::erase_if(live, [&](const Block& b) { return b.last < x.first; });
    size_t bytes = (x.bytes + 63) / 64 * 64, at = 0;
    auto pos = live.begin();
    for (; pos != live.end(); ++pos) {
      if (pos->offset >= at + bytes) break;  // the gap before this block fits
      at = std::max(at, pos->offset + pos->bytes);
    }
    live.insert(pos, Block{at, bytes, x.last});
    plan.offsets[r] = at;
    plan.bytes = std::max(plan.bytes, at + bytes);
  }
  return plan;
}

}  // namespace lt::lower
