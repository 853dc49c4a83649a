// difftest_main.cpp — the differential tester's long run (docs/optimizer.md): lt_difftest
// [exact|fast] [graphs] [first seed]; prints progress every 10,000 graphs and every mismatch
// (its program and outputs), and exits 1 if there was one.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "difftest.hpp"

int main(int argc, char** argv) {
  const char* level = argc > 1 ? argv[1] : "exact";
  const unsigned long long graphs = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1000000;
  const unsigned long long first = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1;
  if (std::strcmp(level, "exact") != 0 && std::strcmp(level, "fast") != 0) {
    std::fprintf(stderr, "usage: lt_difftest [exact|fast] [graphs] [first seed]\n");
    return 2;
  }
  lt_difftest::Tester t(level, LT_DIFFTEST_PLUGIN_DIR);
  if (!t.ready()) {
    std::fprintf(stderr, "lt_difftest: %s\n", t.error().c_str());
    return 2;
  }
  if (std::getenv("LT_DIFFTEST_SHOW")) {  // print each program (debugging the generator)
    t.set_verbose(true);
    for (unsigned long long i = 0; i < graphs; ++i)
      std::printf("seed %llu:\n%s\n", first + i, t.run(first + i).report.c_str());
    return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  unsigned long long mismatches = 0, ops = 0, outputs = 0;
  for (unsigned long long i = 0; i < graphs; ++i) {
    const lt_difftest::Outcome o = t.run(first + i);
    ops += o.ops;
    outputs += o.outputs;
    if (!o.ok) {
      ++mismatches;
      std::printf("MISMATCH seed %llu\n%s\n", first + i, o.report.c_str());
      std::fflush(stdout);
    }
    if ((i + 1) % 10000 == 0 || i + 1 == graphs) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf(
          "%s: %llu graphs (seeds %llu..%llu), %llu values, %llu outputs compared, "
          "%llu mismatches, %.0f s\n",
          level, i + 1, first, first + i, ops, outputs, mismatches, s);
      std::fflush(stdout);
    }
  }
  std::printf(
      "optimiser: %.0f graphs, %.0f nodes in, %.0f out; simplify %.0f rewritten, fold %.0f "
      "folded, cse %.0f removed, dce %.0f removed\n",
      t.metric("optimize.graphs"), t.metric("optimize.nodes_in"), t.metric("optimize.nodes_out"),
      t.metric("optimize.simplify.rewritten"), t.metric("optimize.fold.folded"),
      t.metric("optimize.cse.removed"), t.metric("optimize.dce.removed"));
  return mismatches ? 1 : 0;
}
