// PerValueTest.cpp — kit::PerValue, the one dynamic-size mechanism of the kit's backends, on a
// dynamic graph: a compile per size, or one build with an instance per size and a static compile
// for a size the instance declines; what it keeps, counts and reports.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "lazytensor/lower/graph.hpp"
#include "lazytensor/plugin_kit.hpp"

namespace {

using lt::lower::OwnedGraph;

// neg over [s] with s a symbol (4 in the graph itself).
OwnedGraph dynamic_neg() {
  OwnedGraph g;
  int32_t x = g.add("input", LT_DTYPE_F32, {4}, {});
  int32_t y = g.add("neg", LT_DTYPE_F32, {4}, {x});
  g.set_inputs({x});
  g.set_outputs({y});
  g.set_dynamic({4}, {{x, -1, 0, 0, 1, 0}, {y, -1, 0, 0, 1, 0}});
  return g;
}

// Records the size it runs at (the graph's dim 0 when it was made) into `ran`.
struct SizeExe final : lt::kit::Executable {
  SizeExe(int64_t n, std::vector<int64_t>* ran, const char* kind) : n(n), ran(ran), kind(kind) {}
  void run(std::span<lt::kit::Buffer* const>, std::span<lt::kit::Buffer* const>) override {
    ran->push_back(n);
  }
  void stats(const lt::kit::Stats& emit) const override { emit(kind, double(n)); }
  int64_t n;
  std::vector<int64_t>* ran;
  const char* kind;
};

std::map<std::string, double> stats_of(const lt::kit::Executable& e) {
  std::map<std::string, double> s;
  auto put = [](void* user, const char* k, double v) {
    (*static_cast<std::map<std::string, double>*>(user))[k] = v;
  };
  e.stats(lt::kit::Stats(put, &s));
  return s;
}

TEST(PerValue, CompilesEachSizeOnceAndKeepsTheLastFew) {
  OwnedGraph g = dynamic_neg();
  std::vector<int64_t> ran, compiled;
  lt::kit::PerValue pv(
      g.view(),
      [&](const lt_graph& at) {
        compiled.push_back(at.nodes[0].shape[0]);
        return std::make_unique<SizeExe>(at.nodes[0].shape[0], &ran, "size");
      },
      2);
  EXPECT_TRUE(pv.dynamic());
  for (int64_t s : {3, 5, 3, 7, 3, 5}) {
    const int64_t v = s;
    pv.run_at({&v, 1}, {}, {});
  }
  EXPECT_EQ(ran, (std::vector<int64_t>{3, 5, 3, 7, 3, 5}));
  EXPECT_EQ(compiled, (std::vector<int64_t>{3, 5, 7, 5}));  // 5 fell out behind 7 and 3
  pv.run({}, {});                                           // the graph's own size
  EXPECT_EQ(ran.back(), 4);
  auto st = stats_of(pv);
  EXPECT_EQ(st["dynamic_sizes"], 5);
  EXPECT_EQ(st["dynamic_static_sizes"], 0);
}

TEST(PerValue, OneBuildServesTheSizesItsInstanceTakesAndCompilesTheOthersStatic) {
  OwnedGraph g = dynamic_neg();
  std::vector<int64_t> ran;
  auto build = std::make_shared<SizeExe>(4, &ran, "build_size");
  int own_compiles = 0;
  lt::kit::PerValue pv(
      g.view(), build,
      [&](const lt_graph& at) -> std::unique_ptr<lt::kit::Executable> {
        const int64_t n = at.nodes[0].shape[0];
        if (n == 1) return nullptr;  // a size that changes the code
        return std::make_unique<SizeExe>(n, &ran, "instance");
      },
      [&](const lt_graph& at) {
        ++own_compiles;
        return std::make_unique<SizeExe>(-at.nodes[0].shape[0], &ran, "own");
      });
  for (int64_t s : {8, 1, 8, 2}) {
    const int64_t v = s;
    pv.run_at({&v, 1}, {}, {});
  }
  EXPECT_EQ(ran, (std::vector<int64_t>{8, -1, 8, 2}));
  EXPECT_EQ(own_compiles, 1);
  auto st = stats_of(pv);
  EXPECT_EQ(st["build_size"], 4);  // the build's own stats
  EXPECT_EQ(st["dynamic_sizes"], 3);
  EXPECT_EQ(st["dynamic_static_sizes"], 1);
}

TEST(PerValue, WithoutAStaticCompileADeclinedSizeIsAnError) {
  OwnedGraph g = dynamic_neg();
  std::vector<int64_t> ran;
  lt::kit::PerValue pv(
      g.view(), std::make_shared<SizeExe>(4, &ran, "build_size"),
      [](const lt_graph&) { return std::unique_ptr<lt::kit::Executable>(); }, nullptr);
  const int64_t v = 6;
  EXPECT_ANY_THROW(pv.run_at({&v, 1}, {}, {}));
  EXPECT_TRUE(ran.empty());
}

}  // namespace
