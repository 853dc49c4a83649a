// buffers.cpp — first-fit packing of live ranges into one arena.
#include "lazytensor/lower/buffers.hpp"

#include <algorithm>
#include <iterator>
#include <numeric>

namespace lt::lower {
namespace {

struct Block {
  size_t offset, bytes;
  int64_t last;
  size_t end() const { return offset + bytes; }
  bool operator==(const Block&) const = default;
};

// The live blocks in offset order, in runs of at most 2 * kRun, each run knowing a bound on the
// largest gap between two of its neighbours: the first-fit search steps over every run whose
// gaps are all too small instead of over every block (a training step keeps its activations at
// the low offsets through the backward pass, and every temporary's search walked past all of
// them). Every block starts at or after the end of every block before it (first fit places a
// block at the end of its predecessor, before a block that starts past its own end), so the
// gap before a block is its offset less its predecessor's end.
class Arena {
 public:
  // First fit: the offset the first gap of `bytes` starts at, and the block goes there.
  size_t place(size_t bytes, int64_t last) {
    size_t prev_end = 0;
    for (size_t r = 0; r < runs_.size(); ++r) {
      Run& run = runs_[r];
      if (run.blocks.empty()) continue;  // the only run, kept while nothing is live
      if (run.blocks.front().offset >= prev_end + bytes) return insert(r, 0, prev_end, bytes, last);
      if (run.max_gap >= bytes) {  // perhaps: look, and learn the run's largest gap exactly
        size_t largest = 0;
        for (size_t k = 1; k < run.blocks.size(); ++k) {
          const size_t gap = run.blocks[k].offset - run.blocks[k - 1].end();
          if (gap >= bytes) return insert(r, k, run.blocks[k - 1].end(), bytes, last);
          largest = std::max(largest, gap);
        }
        run.max_gap = largest;
      }
      prev_end = run.blocks.back().end();
    }
    if (runs_.empty()) runs_.emplace_back();
    return insert(runs_.size() - 1, runs_.back().blocks.size(), prev_end, bytes, last);
  }
  void remove(const Block& gone) {
    // The first run that reaches gone's offset; an empty block may share its offset with its
    // neighbours, so the match is searched from there.
    size_t r = static_cast<size_t>(
        std::partition_point(runs_.begin(), runs_.end(),
                             [&](const Run& x) { return x.blocks.back().offset < gone.offset; }) -
        runs_.begin());
    for (; r < runs_.size(); ++r) {
      std::vector<Block>& b = runs_[r].blocks;
      auto it = std::find(b.begin(), b.end(), gone);
      if (it == b.end()) continue;
      it = b.erase(it);
      if (b.empty()) {
        // The last run stays (with its storage) for the next block: a chain of temporaries
        // empties the arena at nearly every step.
        if (runs_.size() > 1) runs_.erase(runs_.begin() + static_cast<std::ptrdiff_t>(r));
      } else if (it != b.begin() && it != b.end()) {  // two gaps became one
        Run& run = runs_[r];
        run.max_gap = std::max(run.max_gap, it->offset - std::prev(it)->end());
      }
      return;
    }
  }

 private:
  static constexpr size_t kRun = 32;
  struct Run {
    std::vector<Block> blocks;
    // At least the largest gap before a block of this run but its first (never less: a run
    // whose bound is below a request has no gap for it). Splitting a gap or a run keeps it an
    // upper bound; a block placed first in the run or removed between two blocks may make a
    // larger gap, which raises it; a search through the run that finds no gap sets it exactly.
    size_t max_gap = 0;
  };
  size_t insert(size_t r, size_t k, size_t at, size_t bytes, int64_t last) {
    Run& run = runs_[r];
    std::vector<Block>& b = run.blocks;
    b.insert(b.begin() + static_cast<std::ptrdiff_t>(k), Block{at, bytes, last});
    if (k == 0 && b.size() > 1) run.max_gap = std::max(run.max_gap, b[1].offset - b[0].end());
    if (b.size() > 2 * kRun) {
      Run tail;
      tail.blocks.assign(b.begin() + kRun, b.end());
      tail.max_gap = run.max_gap;
      b.resize(kRun);
      runs_.insert(runs_.begin() + static_cast<std::ptrdiff_t>(r) + 1, std::move(tail));
    }
    return at;
  }
  std::vector<Run> runs_;
};

}  // namespace

ArenaPlan pack_live_ranges(const std::vector<LiveRange>& ranges) {
  ArenaPlan plan;
  plan.offsets.assign(ranges.size(), 0);
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return ranges[a].first < ranges[b].first; });
  Arena arena;
  // The live blocks by end, earliest first (a min-heap): the ended ones go before each range.
  std::vector<Block> ends;
  auto later = [](const Block& a, const Block& b) { return a.last > b.last; };
  for (size_t r : order) {
    const LiveRange& x = ranges[r];
    while (!ends.empty() && ends.front().last < x.first) {
      std::pop_heap(ends.begin(), ends.end(), later);
      arena.remove(ends.back());
      ends.pop_back();
    }
    const size_t bytes = (x.bytes + 63) / 64 * 64;
    const size_t at = arena.place(bytes, x.last);
    ends.push_back(Block{at, bytes, x.last});
    std::push_heap(ends.begin(), ends.end(), later);
    plan.offsets[r] = at;
    plan.bytes = std::max(plan.bytes, at + bytes);
  }
  return plan;
}

}  // namespace lt::lower
