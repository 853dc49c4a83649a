// BuffersTest.cpp — lower::pack_live_ranges: ranges live at the same step never share bytes,
// ranges that do not overlap in time reuse them, offsets are 64-byte aligned.
#include <gtest/gtest.h>

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

TEST(PackLiveRanges, Empty) {
  auto p = pack_live_ranges({});
  EXPECT_EQ(p.bytes, 0u);
  EXPECT_TRUE(p.offsets.empty());
}

}  // namespace
