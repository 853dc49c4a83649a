// optimize.cpp — the optimise stage (optimize.h): lower::optimize with the shared host kernels
// as the constant evaluator, per-pass metrics, LT_DUMP_DIR's graph after each pass, and the
// folded constants uploaded once and kept with the plan.
#include "optimize.h"

#include <chrono>
#include <string>

#include "device_client.h"
#include "graph_dump.h"
#include "lazytensor/host/steps.hpp"
#include "lazytensor/lower/optimize.hpp"
#include "profile.h"

namespace lt {
namespace {

// The names of the metrics every compile adds to, made once (keys built per compile were a
// tenth of the stage's own cost); read-only, so runtimes on other threads share them.
struct Keys {
  std::string graphs = "optimize.graphs", nodes_in = "optimize.nodes_in",
              nodes_out = "optimize.nodes_out", ms = "optimize.ms",
              kept = "optimize.kept_gemm_layout";
};

void record(Runtime* rt, const lower::Optimized& o, size_t nodes_in, uint64_t ns) {
  static const Keys keys;
  std::lock_guard lk(rt->metrics.mu);
  auto& m = rt->metrics.named;
  m[keys.graphs] += 1;
  m[keys.nodes_in] += static_cast<double>(nodes_in);
  m[keys.nodes_out] += static_cast<double>(o.changed ? o.graph.size() : nodes_in);
  m[keys.ms] += static_cast<double>(ns) / 1e6;
  if (o.kept_gemm_layout) m[keys.kept] += 1;
  if (o.kept_gemm_layout) return;  // compiled as traced: no rewrite happened
  auto add = [&](const std::string& pass, const char* what, size_t v) {
    if (v) m["optimize." + pass + "." + what] += static_cast<double>(v);
  };
  for (const lower::PassStats& s : o.stats) {
    add(s.pass, "removed", s.removed);
    add(s.pass, "rewritten", s.rewritten);
    add(s.pass, "folded", s.folded);
  }
}

}  // namespace

std::shared_ptr<Plan> compile_optimized(Device* dev, const lt_graph& g, const PlanSource& src,
                                        std::span<const uint32_t> tags, const Collected* live) {
  Runtime* rt = dev->runtime;
  lower::OptLevel level = lower::OptLevel::kExact;
  lower::parse_opt_level(rt->config.optimize, &level);  // validated by load_config
  if (level == lower::OptLevel::kNone || LT_GRAPH_HAS_DYNAMIC(&g))
    return compile_plan(dev, g, src, live);
  const auto t0 = std::chrono::steady_clock::now();
  lower::Optimized o;
  {
    Span span(rt, "compile", "optimize");
    lower::OptimizeOptions opt;
    opt.level = level;
    opt.recompute_tags = tags;
    opt.eval = host::evaluate;
    // No is_opaque: a custom op never has a built-in's name (register_op refuses a duplicate),
    // and the optimiser treats every op outside the op table as opaque already.
    if (!rt->config.dump_dir.empty()) {
      write_graph_text(rt, g, src.key, "opt0_traced", "as traced");
      opt.after_pass = [rt, &src](std::string_view pass, const lt_graph& after) {
        write_graph_text(rt, after, src.key, "opt" + std::string(pass),
                         "after " + std::string(pass));
      };
    }
    o = lower::optimize(g, opt);
    if (span.on())
      span.args(fmt::format("\"nodes_in\": {}, \"nodes_out\": {}", g.num_nodes,
                            o.changed ? o.graph.size() : g.num_nodes));
  }
  const auto opt_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  record(rt, o, g.num_nodes, opt_ns);
  if (!o.changed) {  // nothing to rewrite: the collected graph as it is
    std::shared_ptr<Plan> plan = compile_plan(dev, g, src, live);
    plan->compile_ns.fetch_add(opt_ns);
    rt->metrics.compile_ns.fetch_add(opt_ns);
    return plan;
  }
  std::shared_ptr<Plan> plan = compile_plan(dev, o.graph.view(), src, live, o.origin);
  plan->compile_ns.fetch_add(opt_ns);  // optimising is part of compiling the graph
  rt->metrics.compile_ns.fetch_add(opt_ns);
  CompiledPlan* cp = plan->compiled();
  for (size_t j = 0; j < o.constants.size(); ++j) {
    const std::vector<unsigned char>& data = o.constants[j];
    BufferPtr b = dev->allocator->allocate(data.size());
    if (!data.empty()) upload_to(dev, b.get(), data.data(), data.size());
    cp->constants.emplace_back(cp->graph_inputs[g.num_inputs + j], std::move(b));
  }
  return plan;
}

}  // namespace lt
