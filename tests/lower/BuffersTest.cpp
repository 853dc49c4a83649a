// BuffersTest.cpp — lower::pack_live_ranges: ranges live at the same step never share bytes,
// ranges that do not overlap in time reuse them, offsets are 64-byte aligned.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "lazytensor/lower/buffers.hpp"

namespace {

using lt::lower::LiveRange;
using lt::lower::pack_live_ranges;

// Every pair live at a common step occupies disjoint bytes; everything fits in the arena.
void expect_valid(const std::vector<LiveRange>& r, const lt::lower::ArenaPlan& p) {
  ASSERT_EQ(p.offsets.size(), r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(p.offsets[i] % 64, 0u) << i;
    EXPECT_LE(p.offsets[i] + r[i].bytes, p.bytes) << i;
    for (size_t j = i + 1; j < r.size(); ++j) {
      bool in_time = r[i].first <= r[j].last && r[j].first <= r[i].last;
      bool in_bytes =
          p.offsets[i] < p.offsets[j] + r[j].bytes && p.offsets[j] < p.offsets[i] + r[i].bytes;
      EXPECT_FALSE(in_time && in_bytes && r[i].bytes && r[j].bytes) << i << " and " << j;
    }
  }
}

TEST(PackLiveRanges, AChainReusesTwoSlots) {
  // t0 = f(in) at step 0, t1 = f(t0) at step 1, ...: at most two temporaries are live.
  std::vector<LiveRange> r;
  for (int64_t s = 0; s < 100; ++s) r.push_back({1000, s, s + 1});
  auto p = pack_live_ranges(r);
  expect_valid(r, p);
  EXPECT_EQ(p.bytes, 2u * 1024u);
}

TEST(PackLiveRanges, AStepsOutputNeverAliasesItsInput) {
  // A read last at step 3 and B written at step 3 are live together.
  std::vector<LiveRange> r = {{64, 0, 3}, {64, 3, 5}};
  auto p = pack_live_ranges(r);
  expect_valid(r, p);
  EXPECT_NE(p.offsets[0], p.offsets[1]);
  // Written after A's last read: B takes A's bytes.
  r[1].first = 4;
  p = pack_live_ranges(r);
  EXPECT_EQ(p.offsets[0], p.offsets[1]);
  EXPECT_EQ(p.bytes, 64u);
}

TEST(PackLiveRanges, GapsBetweenLiveBlocksAreFilled) {
  // A small range fits into the hole a dead one left below a live one.
  std::vector<LiveRange> r = {{128, 0, 1}, {64, 0, 9}, {100, 2, 3}};
  auto p = pack_live_ranges(r);
  expect_valid(r, p);
  EXPECT_EQ(p.offsets[2], p.offsets[0]);
  EXPECT_EQ(p.bytes, 192u);
}

TEST(PackLiveRanges, RandomRangesNeverOverlap) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<LiveRange> r;
    size_t sum = 0;
    for (int i = 0; i < 60; ++i) {
      int64_t f = rng() % 40, l = f + rng() % 10;
      r.push_back({rng() % 5000, f, l});
      sum += (r.back().bytes + 63) / 64 * 64;
    }
    auto p = pack_live_ranges(r);
    expect_valid(r, p);
    EXPECT_LE(p.bytes, sum);
  }
}

// First fit in order of first use, written as plainly as possible: the ended blocks swept out
// and every live block looked at for every range. pack_live_ranges keeps the live blocks in
// runs that know their largest gap; the offsets must be the same (the arena's layout is part
// of what a compile produces).
lt::lower::ArenaPlan first_fit_reference(const std::vector<LiveRange>& r) {
  std::vector<size_t> order(r.size());
  for (size_t i = 0; i < r.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return r[a].first < r[b].first; });
  struct Block {
    size_t offset, bytes;
    int64_t last;
  };
  std::vector<Block> live;
  lt::lower::ArenaPlan plan;
  plan.offsets.assign(r.size(), 0);
  for (size_t i : order) {
    std::vector<Block> kept;
    for (const Block& b : live)
      if (b.last >= r[i].first) kept.push_back(b);
    live = kept;
    const size_t bytes = (r[i].bytes + 63) / 64 * 64;
    size_t at = 0, pos = 0;
    for (; pos < live.size(); ++pos) {
      if (live[pos].offset >= at + bytes) break;
      at = std::max(at, live[pos].offset + live[pos].bytes);
    }
    live.insert(live.begin() + static_cast<std::ptrdiff_t>(pos), Block{at, bytes, r[i].last});
    plan.offsets[i] = at;
    plan.bytes = std::max(plan.bytes, at + bytes);
  }
  return plan;
}

TEST(PackLiveRanges, SameOffsetsAsPlainFirstFit) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<LiveRange> r;
    // Up to 1,200 ranges: enough live at once to fill many of the packer's runs of blocks.
    const int n = 1 + static_cast<int>(rng() % (trial < 100 ? 300 : 1200));
    const int64_t steps = trial < 100 ? 200 : 400;
    for (int i = 0; i < n; ++i) {
      const int64_t f = static_cast<int64_t>(rng() % static_cast<uint64_t>(steps));
      // Short temporaries, long-lived activations and empty values (which share offsets).
      const int64_t l = f + static_cast<int64_t>(rng() % 4 == 0 ? rng() % 300 : rng() % 4);
      r.push_back({rng() % 8 == 0 ? 0 : rng() % 9000, f, l});
    }
    const auto want = first_fit_reference(r);
    const auto got = pack_live_ranges(r);
    ASSERT_EQ(got.bytes, want.bytes) << "trial " << trial;
    ASSERT_EQ(got.offsets, want.offsets) << "trial " << trial;
    if (n <= 300) expect_valid(r, got);  // quadratic
  }
}

TEST(PackLiveRanges, Empty) {
  auto p = pack_live_ranges({});
  EXPECT_EQ(p.bytes, 0u);
  EXPECT_TRUE(p.offsets.empty());
}

}  // namespace
