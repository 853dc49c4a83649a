// fuzz_optimizer.cpp — libFuzzer harness of the graph optimiser (issue #27): the input picks a
// program of the differential tester (tests/optimizer/difftest.hpp: random ops of the table,
// every dtype, special values) and its level; the program runs on cpu_eager unoptimised and
// optimised, and any difference in an output (bitwise under exact, beyond the stated ulps under
// fast) aborts with the program.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "difftest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto exact = std::make_unique<lt_difftest::Tester>("exact", LT_DIFFTEST_PLUGIN_DIR);
  static auto fast = std::make_unique<lt_difftest::Tester>("fast", LT_DIFFTEST_PLUGIN_DIR);
  if (!exact->ready() || !fast->ready()) {
    std::fprintf(stderr, "fuzz_optimizer: %s%s\n", exact->error().c_str(), fast->error().c_str());
    std::abort();
  }
  uint64_t seed = 0x6f7074696d697a65ULL;  // FNV-1a over the input
  for (size_t i = 0; i < size; ++i) seed = (seed ^ data[i]) * 0x100000001b3ULL;
  lt_difftest::Tester& t = size && (data[0] & 1) ? *fast : *exact;
  const lt_difftest::Outcome o = t.run(seed);
  if (!o.ok) {
    std::fprintf(stderr, "fuzz_optimizer: mismatch (seed %llu)\n%s\n",
                 static_cast<unsigned long long>(seed), o.report.c_str());
    std::abort();
  }
  return 0;
}
