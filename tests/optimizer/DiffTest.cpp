// DiffTest.cpp — the differential tester's seeded short run: random programs optimised (exact,
// fast) against unoptimised on cpu_eager, and the seeds of mismatches found by long runs.
#include <gtest/gtest.h>

#include <cmath>

#include "difftest.hpp"

namespace {

void run_seeds(const char* level, uint64_t first, uint64_t count) {
  lt_difftest::Tester t(level, LT_DIFFTEST_PLUGIN_DIR);
  ASSERT_TRUE(t.ready()) << t.error();
  size_t outputs = 0;
  for (uint64_t s = first; s < first + count; ++s) {
    const lt_difftest::Outcome o = t.run(s);
    outputs += o.outputs;
    ASSERT_TRUE(o.ok) << level << " seed " << s << ":\n" << o.report;
  }
  EXPECT_GE(outputs, count);  // the programs do compute something
}

TEST(OptimizerDiff, ExactIsBitwiseOnSeededPrograms) {
  run_seeds("exact", 1, 400);
}

TEST(OptimizerDiff, FastIsWithinStatedUlpsOnSeededPrograms) {
  run_seeds("fast", 100001, 200);
}

// Seeds whose programs once differed; each stays a test.
TEST(OptimizerDiff, FoundMismatchesStayFixed) {
  // A slice of a concat left the concat dead, so a transpose only a GEMM then read was read in
  // place, and OpenBLAS's transposed kernel gave +0 where the plain one gave -0.
  run_seeds("exact", 819443, 1);
}

TEST(OptimizerDiff, FastKeepsNoSignedZeros) {
  // x - (-0) -> x under fast: for x = -0 the reference's +0 becomes -0, and rsqrt turns that
  // into -inf where the reference has +inf: within fast's stated tolerance, never under exact.
  run_seeds("fast", 2079359, 1);
  EXPECT_TRUE(lt_difftest::close_fast(INFINITY, -INFINITY, 1.0));
  EXPECT_TRUE(lt_difftest::close_fast(0.0, -0.0, 1.0));
  EXPECT_FALSE(lt_difftest::close_fast(INFINITY, 1.0, 1.0));
  EXPECT_FALSE(lt_difftest::close_fast(1.0, 1.001, 1.0));
}

}  // namespace
