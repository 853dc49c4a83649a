// OptimizeBenchmark.cpp — the graph optimiser's own cost (issue #27: compile time may grow by
// at most 10%): lower::optimize on the training steps lt-run traces, read back from the
// LT_DUMP_DIR listings in graphs/ (regenerate: LT_DYNAMIC_SHAPES=off LT_DUMP_DIR=d
// LT_OPTIMIZE=exact lt-run --device cpu_eager --model M --seed 3 --epochs 1, gpt with --steps 2
// --layers 2 --width 128 --context 64 --batch 16; the largest d/*_opt0_traced.txt).
// Counters: nodes (traced), nodes_out, nodes_per_s (traced nodes optimised per CPU second).
// Constants are folded by the shared host kernels, as the core's optimise stage does.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <set>
#include <string>
#include <vector>

#include "lazytensor/host/steps.hpp"
#include "lazytensor/lower/optimize.hpp"

namespace {

using lt::lower::OwnedGraph;

lt_dtype dtype_of(const std::string& name) {
  for (int d = 0; d < 16; ++d) {
    const char* n = lt_dtype_name(static_cast<lt_dtype>(d));
    if (n && name == n) return static_cast<lt_dtype>(d);
  }
  throw std::runtime_error("unknown dtype " + name);
}

std::vector<int64_t> dims_of(const std::string& s) {  // "[2,3]"
  std::vector<int64_t> out;
  const char* p = s.c_str() + 1;
  while (*p && *p != ']') {
    char* end = nullptr;
    out.push_back(std::strtoll(p, &end, 10));
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}

// One "%3 = add(%1, %2) : f32 [32,10] name=value ..." listing (graph_dump.cpp) back into a
// graph; attribute kinds come from the op table (an INT and a whole FLOAT print alike). The
// graph's inputs are its "input" nodes in node order.
OwnedGraph parse(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  OwnedGraph g;
  std::vector<int32_t> inputs, outputs;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    if (line.rfind("outputs:", 0) == 0) {
      std::string tok;
      ls >> tok;
      while (ls >> tok) outputs.push_back(std::stoi(tok.substr(1)));
      continue;
    }
    const size_t eq = line.find(" = "), open = line.find('('), close = line.find(')');
    const std::string op = line.substr(eq + 3, open - eq - 3);
    std::vector<int32_t> operands;
    std::istringstream os(line.substr(open + 1, close - open - 1));
    std::string tok;
    while (os >> tok) operands.push_back(std::stoi(tok.substr(1)));
    std::istringstream rest(line.substr(close + 1));
    std::string colon, dt, dims;
    rest >> colon >> dt >> dims;
    const lt::lower::OpInfo* info = lt::lower::find_op(op);
    std::vector<std::string> names, strs;
    std::vector<std::vector<int64_t>> ints;
    std::vector<lt_attr> attrs;
    names.reserve(16), strs.reserve(16), ints.reserve(16);
    while (rest >> tok) {
      const size_t e = tok.find('=');
      names.push_back(tok.substr(0, e));
      strs.push_back(tok.substr(e + 1));
      const lt::lower::AttrSpec* spec = info ? info->attr(names.back()) : nullptr;
      lt_attr a{};
      a.name = names.back().c_str();
      a.kind = spec ? spec->kind : LT_ATTR_STRING;
      if (a.kind == LT_ATTR_INT) a.i = std::stoll(strs.back());
      if (a.kind == LT_ATTR_FLOAT) a.f = std::strtod(strs.back().c_str(), nullptr);
      if (a.kind == LT_ATTR_INTS) {
        ints.push_back(dims_of(strs.back()));
        a.ints = ints.back().data();
        a.ints_len = ints.back().size();
      }
      if (a.kind == LT_ATTR_STRING) a.s = strs.back().c_str();
      attrs.push_back(a);
    }
    const int32_t id = g.add(op, dtype_of(dt), dims_of(dims), operands, attrs.data(), attrs.size());
    if (op == "input") inputs.push_back(id);
  }
  g.set_inputs(inputs);
  g.set_outputs(outputs);
  return g;
}

void BM_Optimize(benchmark::State& state, std::string model, lt::lower::OptLevel level, bool fold) {
  OwnedGraph g = parse(std::string(LT_OPT_BENCH_GRAPHS) + "/" + model + ".txt");
  // The core names every node of one op with one interned string, and the optimiser (and the
  // GEMM layout guard) look names up once per pointer: so does the graph measured here.
  static std::set<std::string> names;
  std::vector<lt_graph_node> nodes(g.view().nodes, g.view().nodes + g.view().num_nodes);
  for (lt_graph_node& n : nodes) n.op = names.insert(n.op).first->c_str();
  lt_graph view = g.view();
  view.nodes = nodes.data();
  lt::lower::OptimizeOptions opt;
  opt.level = level;
  if (fold) opt.eval = lt::host::evaluate;
  size_t out_nodes = 0;
  for (auto _ : state) {
    lt::lower::Optimized o = lt::lower::optimize(view, opt);
    out_nodes = o.changed ? o.graph.size() : view.num_nodes;
    benchmark::DoNotOptimize(o);
  }
  state.counters["nodes"] = static_cast<double>(view.num_nodes);
  state.counters["nodes_out"] = static_cast<double>(out_nodes);
  state.counters["nodes_per_s"] = benchmark::Counter(
      static_cast<double>(view.num_nodes) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

void register_all() {
  using L = lt::lower::OptLevel;
  for (const char* m : {"mlp", "cnn", "resnet", "gpt"}) {
    benchmark::RegisterBenchmark((std::string("optimize/exact/") + m).c_str(), BM_Optimize, m,
                                 L::kExact, true)
        ->Unit(benchmark::kMicrosecond);
    // Without the host-kernel evaluation: the passes' own bookkeeping.
    benchmark::RegisterBenchmark((std::string("optimize/exact_nofold/") + m).c_str(), BM_Optimize,
                                 m, L::kExact, false)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("optimize/fast/") + m).c_str(), BM_Optimize, m,
                                 L::kFast, true)
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
