// PartitionTest.cpp — the partition stage alone: graphs built in memory, placements answered by
// plain callbacks (no runtime, no plugin), so each placement rule is seen directly.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>

#include "error.h"
#include "partition.h"

namespace {

using lt::Partition;
using lt::Placement;
using lt::Site;
using lt::lower::OwnedGraph;

// x (input) -> exp -> tanh -> add(tanh, x): four nodes, one output.
OwnedGraph chain() {
  OwnedGraph g;
  const int32_t x = g.add("input", LT_DTYPE_F32, {4}, {});
  const int32_t e = g.add("exp", LT_DTYPE_F32, {4}, {x});
  const int32_t t = g.add("tanh", LT_DTYPE_F32, {4}, {e});
  const int32_t a = g.add("add", LT_DTYPE_F32, {4}, {t, x});
  g.set_inputs({x});
  g.set_outputs({a});
  return g;
}

bool op_is(const lt_graph& g, size_t i, const char* op) {
  return std::strcmp(g.nodes[i].op, op) == 0;
}

// A target that runs everything but `declined`, and a fallback that runs everything.
Placement placement(std::set<std::string> declined, bool with_fallback = true) {
  Placement p;
  p.target = "target";
  p.supports = [declined](const lt_graph& g, size_t i) { return !declined.count(g.nodes[i].op); };
  if (with_fallback) {
    p.fallback = "cpu_eager";
    p.fallback_of = [](const lt_graph&, size_t) { return true; };
  }
  return p;
}

uint64_t count(const Partition& part, const std::string& key) {
  for (const auto& [k, v] : part.op_counts)
    if (k == key) return v;
  return 0;
}

TEST(Partition, WholeGraphOnTheTargetIsOneRegion) {
  OwnedGraph g = chain();
  Partition part = lt::partition(g.view(), placement({}));
  EXPECT_FALSE(part.decomposed);
  ASSERT_EQ(part.regions.size(), 1u);
  EXPECT_EQ(part.regions[0].site, Site::kTarget);
  EXPECT_EQ(part.regions[0].members, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(part.site[0], Site::kInput);
  EXPECT_EQ(part.fallback_nodes, 0u);
}

TEST(Partition, SendsUnsupportedOpToFallbackBetweenTargetRegions) {
  OwnedGraph g = chain();
  Partition part = lt::partition(g.view(), placement({"tanh"}));
  ASSERT_EQ(part.regions.size(), 3u);
  EXPECT_EQ(part.regions[0].site, Site::kTarget);
  EXPECT_EQ(part.regions[1].site, Site::kFallback);
  EXPECT_EQ(part.regions[2].site, Site::kTarget);  // add reads tanh: after the fallback region
  EXPECT_EQ(part.regions[1].members, (std::vector<int32_t>{2}));
  EXPECT_EQ(part.fallback_nodes, 1u);
  EXPECT_EQ(count(part, "fallback.tanh"), 1u);
  // exp's and tanh's values cross regions; add's is the graph's output.
  EXPECT_TRUE(part.used_outside[1]);
  EXPECT_TRUE(part.used_outside[2]);
  EXPECT_TRUE(part.used_outside[3]);
}

TEST(Partition, IndependentNodeJoinsTheEarlierRegionOfItsSite) {
  // x -> tanh (fallback) ; x -> exp (target, independent of tanh) ; add(tanh, exp) on target.
  OwnedGraph g;
  const int32_t x = g.add("input", LT_DTYPE_F32, {4}, {});
  const int32_t e = g.add("exp", LT_DTYPE_F32, {4}, {x});
  const int32_t t = g.add("tanh", LT_DTYPE_F32, {4}, {x});
  const int32_t n = g.add("neg", LT_DTYPE_F32, {4}, {x});  // after tanh, independent of it
  const int32_t a = g.add("add", LT_DTYPE_F32, {4}, {t, e});
  g.set_inputs({x});
  g.set_outputs({a, n});
  Partition part = lt::partition(g.view(), placement({"tanh"}));
  ASSERT_EQ(part.regions.size(), 3u);
  EXPECT_EQ(part.regions[0].members, (std::vector<int32_t>{e, n}));
  EXPECT_EQ(part.regions[2].members, (std::vector<int32_t>{a}));
}

TEST(Partition, DecomposesACompositeTheTargetLacksBeforeAnyFallback) {
  OwnedGraph g;
  const int32_t x = g.add("input", LT_DTYPE_F32, {8}, {});
  const int32_t s = g.add("sigmoid", LT_DTYPE_F32, {8}, {x});
  g.set_inputs({x});
  g.set_outputs({s});
  Partition part = lt::partition(g.view(), placement({"sigmoid"}));
  EXPECT_TRUE(part.decomposed);
  EXPECT_EQ(part.fallback_nodes, 0u);
  EXPECT_EQ(count(part, "decomposed.sigmoid"), 1u);
  const lt_graph& lg = part.graph();
  ASSERT_EQ(part.regions.size(), 1u);
  for (int32_t m : part.regions[0].members) {
    EXPECT_FALSE(op_is(lg, static_cast<size_t>(m), "sigmoid"));
    EXPECT_EQ(part.origin[static_cast<size_t>(m)], static_cast<int32_t>(lt::kOpSigmoid));
  }
  EXPECT_EQ(lg.num_inputs, 1u);
  EXPECT_EQ(lg.num_outputs, 1u);
}

TEST(Partition, NoFallbackLoadedIsAnErrorNamingOpAndBackend) {
  OwnedGraph g = chain();
  try {
    (void)lt::partition(g.view(), placement({"tanh"}, false));
    FAIL() << "expected an error";
  } catch (const lt::Error& e) {
    EXPECT_EQ(e.code(), LT_STATUS_UNSUPPORTED);
    EXPECT_NE(e.message().find("'tanh'"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("'target'"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("no fallback backend"), std::string::npos) << e.message();
  }
}

TEST(Partition, PolicyErrorRefusesTheFallback) {
  OwnedGraph g = chain();
  Placement p = placement({"tanh"});
  p.policy = lt::FallbackPolicy::kError;
  try {
    (void)lt::partition(g.view(), p);
    FAIL() << "expected an error";
  } catch (const lt::Error& e) {
    EXPECT_EQ(e.code(), LT_STATUS_FALLBACK_REFUSED);
    EXPECT_NE(e.message().find("f32 [4]"), std::string::npos) << e.message();
  }
}

TEST(Partition, WarnPolicyReportsEachFallbackNode) {
  OwnedGraph g = chain();
  Placement p = placement({"tanh", "exp"});
  std::vector<std::string> warned;
  p.warn = [&](const char* op, const std::string&, int32_t node) {
    warned.emplace_back(op);
    EXPECT_GE(node, 0);  // not decomposed: the node of the graph given
  };
  (void)lt::partition(g.view(), p);
  EXPECT_EQ(warned, (std::vector<std::string>{"exp", "tanh"}));
}

TEST(Partition, CollectiveTheBackendDeclinesRunsOnTheHostAlone) {
  OwnedGraph g;
  const int32_t x = g.add("input", LT_DTYPE_F32, {4}, {});
  const int32_t e = g.add("exp", LT_DTYPE_F32, {4}, {x});
  lt_attr reduce{};
  reduce.name = "reduce";
  reduce.kind = LT_ATTR_INT;
  const int32_t r = g.add("all_reduce", LT_DTYPE_F32, {4}, {e}, &reduce, 1);
  const int32_t t = g.add("tanh", LT_DTYPE_F32, {4}, {r});
  g.set_inputs({x});
  g.set_outputs({t});
  Partition part = lt::partition(g.view(), placement({"all_reduce"}));
  ASSERT_EQ(part.regions.size(), 3u);
  EXPECT_EQ(part.regions[1].site, Site::kHost);
  EXPECT_EQ(part.regions[1].members, (std::vector<int32_t>{r}));
  EXPECT_EQ(part.collectives, 1u);
  EXPECT_EQ(part.fallback_nodes, 0u);  // the core runs it: not a fallback
}

TEST(Partition, RegionsAreCutAtMaxRegionNodes) {
  OwnedGraph g;
  int32_t v = g.add("input", LT_DTYPE_F32, {2}, {});
  g.set_inputs({v});
  for (int i = 0; i < 10; ++i) v = g.add("exp", LT_DTYPE_F32, {2}, {v});
  g.set_outputs({v});
  Placement p = placement({});
  p.max_region_nodes = 4;
  Partition part = lt::partition(g.view(), p);
  ASSERT_EQ(part.regions.size(), 3u);  // 4 + 4 + 2
  EXPECT_EQ(part.cuts, 2u);
  for (const auto& r : part.regions) EXPECT_LE(r.members.size(), 4u);
}

TEST(Partition, RegionGraphTakesOutsideValuesAsInputsFirst) {
  OwnedGraph g = chain();
  Partition part = lt::partition(g.view(), placement({"tanh"}));
  lt::LocalIndex local(part.graph().num_nodes);
  lt::RegionGraph rg;
  lt::region_graph(part, 2, rg, local);  // add(tanh, x)
  const lt_graph& lg = rg.buf.g;
  ASSERT_EQ(lg.num_nodes, 3u);
  EXPECT_TRUE(op_is(lg, 0, "input"));
  EXPECT_TRUE(op_is(lg, 1, "input"));
  EXPECT_TRUE(op_is(lg, 2, "add"));
  EXPECT_EQ(rg.in_globals, (std::vector<int32_t>{2, 0}));  // tanh's value, then x
  EXPECT_EQ(rg.out_globals, (std::vector<int32_t>{3}));
  EXPECT_EQ(rg.out_bytes, (std::vector<size_t>{16}));
  EXPECT_EQ(lg.num_inputs, 2u);
  ASSERT_EQ(lg.num_outputs, 1u);
  EXPECT_EQ(lg.outputs[0], 2);
}

}  // namespace
