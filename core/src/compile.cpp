// compile.cpp — the compile stage: partition plan to Plan, with the fallback retry (compile.h).
#include "compile.h"

#include <algorithm>
#include <chrono>

#include "custom_ops.h"
#include "device_client.h"
#include "error.h"
#include "graph_dump.h"
#include "profile.h"

namespace lt {
namespace {

using Clock = std::chrono::steady_clock;

Device* fallback_device(Device* dev) {
  Runtime* rt = dev->runtime;
  return rt->fallback && rt->fallback != dev->plugin ? rt->fallback->devices.front() : nullptr;
}

// A host region's node, copied out of the lowered graph (which is gone after compile).
HostNode host_node(const lt_graph& g, int32_t i) {
  const lt_graph_node& node = g.nodes[i];
  HostNode h;
  h.op = find_custom_op(node.op);
  const lower::OpInfo* info = lower::find_op(node.op);
  h.collective = info && info->category == lower::Category::kCollective;
  h.node = i;
  h.name = node.op;
  h.dtype = node.dtype;
  h.shape.assign(node.shape, node.shape + node.rank);
  h.operands.assign(node.operands, node.operands + node.num_operands);
  for (int32_t o : h.operands) {
    const lt_graph_node& on = g.nodes[o];
    h.operand_descs.push_back({on.dtype, lower::Shape(on.shape, on.shape + on.rank)});
  }
  if (node.num_attrs)
    h.attrs = std::make_unique<AttrSet>(AttrSet::copy(node.attrs, node.num_attrs));
  return h;
}

// Compiles one region on its site's device; a failed compile on the target reruns the region
// on the fallback (logged, counted) unless the failure is the program's own (out of memory) or
// the policy forbids it. `failed` (out): the target's error, when it fell back.
client::Compiled compile_region(Device*& dev, Device* fb, const lt_graph& g, std::string& failed,
                                std::span<const int64_t> donors) {
  Runtime* rt = dev->runtime;
  try {
    return client::compile(dev, g, donors);
  } catch (const Error& e) {
    // Out of device memory is a property of the program (its size), not a capability gap:
    // the user must see it. So must a user who asked for no fallback at all.
    if (!fb || dev == fb || e.code() == LT_STATUS_OUT_OF_MEMORY) throw;
    if (rt->config.fallback == "error")
      throw Error(LT_STATUS_FALLBACK_REFUSED,
                  fmt::format("fallback refused: compile on '{}' failed ({}) and the fallback "
                              "policy is 'error'",
                              dev->plugin->name, e.message()));
    rt->metrics.compile_failures.fetch_add(1);
    rt->log->warn("compile on '{}' failed ({}); running the region on '{}'", dev->plugin->name,
                  e.message(), fb->plugin->name);
    failed = e.message();
    dev = fb;
    return client::compile(dev, g, donors);
  }
}

size_t node_bytes(const lt_graph_node& n) {
  return static_cast<size_t>(lower::DescRef(n).numel()) * lt_dtype_size(n.dtype);
}

// Buffer donation (docs/memory.md): which graph inputs each region may hand to which graph
// outputs. An input qualifies for a region that is its only reader (another region, or a
// transfer to one, must never see it overwritten); the output must be a graph output of the
// same byte size, near the input, and fed by every reader of the input where one is (so that
// a schedule in topological order has read the input before it writes the output). The
// plugin then says whether its schedule keeps that true; whether a run donates is decided per
// run (run.cpp: nobody else may hold the input).
struct DonationOffer {
  std::vector<int64_t> local;   // per local output: the local input offered, or -1
  std::vector<int32_t> global;  // per local output: that input's graph input position, or -1
};
class Donations {
 public:
  Donations(const lt_graph& g, const Partition& part, const std::vector<PreparedRegion>& regions)
      : g_(g) {
    input_pos_.assign(g.num_nodes, -1);
    for (size_t k = 0; k < g.num_inputs; ++k) input_pos_[g.inputs[k]] = static_cast<int32_t>(k);
    is_output_.assign(g.num_nodes, 0);
    for (size_t k = 0; k < g.num_outputs; ++k) is_output_[g.outputs[k]] = 1;
    readers_.assign(g.num_nodes, 0);
    for (size_t r = 0; r < part.regions.size(); ++r) {
      if (part.regions[r].site == Site::kHost) {
        for (int32_t m : part.regions[r].members)
          for (size_t k = 0; k < g.nodes[m].num_operands; ++k) ++readers_[g.nodes[m].operands[k]];
        continue;
      }
      for (int32_t gi : regions[r].graph.in_globals) ++readers_[gi];
    }
    // The users of each graph input (CSR), for the "every reader feeds the output" test.
    user_begin_.assign(g.num_nodes + 1, 0);
    for (size_t i = 0; i < g.num_nodes; ++i)
      for (size_t k = 0; k < g.nodes[i].num_operands; ++k)
        if (input_pos_[g.nodes[i].operands[k]] >= 0) ++user_begin_[g.nodes[i].operands[k] + 1];
    for (size_t i = 0; i < g.num_nodes; ++i) user_begin_[i + 1] += user_begin_[i];
    users_.resize(user_begin_[g.num_nodes]);
    std::vector<uint32_t> fill(user_begin_.begin(), user_begin_.end() - 1);
    for (size_t i = 0; i < g.num_nodes; ++i)
      for (size_t k = 0; k < g.nodes[i].num_operands; ++k)
        if (input_pos_[g.nodes[i].operands[k]] >= 0)
          users_[fill[g.nodes[i].operands[k]]++] = static_cast<int32_t>(i);
    mark_.assign(g.num_nodes, 0);
    local_.assign(g.num_nodes, -1);
  }
  DonationOffer offer(const RegionGraph& rg) {
    DonationOffer o;
    o.local.assign(rg.out_globals.size(), -1);
    o.global.assign(rg.out_globals.size(), -1);
    if (rg.buf.g.num_symbols) return o;  // a dynamic region's sizes move: no donation
    // The inputs walk() may offer; once each is taken no walk can find one (a wide graph of
    // many outputs over one input walked back from every output, twice).
    size_t left = 0;
    for (size_t j = 0; j < rg.in_globals.size(); ++j) {
      const int32_t gi = rg.in_globals[j];
      local_[gi] = int32_t(j);
      left += candidate(gi);
    }
    std::vector<char> taken(rg.in_globals.size(), 0);
    auto give = [&](size_t k, int64_t j) {
      taken[j] = 1;
      --left;
      o.local[k] = j;
      o.global[k] = input_pos_[rg.in_globals[j]];
    };
    // First the inputs every reader of which feeds the output nearby, then, for the outputs
    // left, the nearest input (its other readers may still run first: the plugin knows). One
    // walk per output serves both rounds: it keeps the output's inputs of the right size in
    // the order found, of which the second round takes the first not taken by then.
    std::vector<uint32_t>& begin = found_begin_;
    begin.assign(rg.out_globals.size() + 1, 0);
    found_.clear();
    for (size_t k = 0; k < rg.out_globals.size(); ++k) {
      begin[k] = static_cast<uint32_t>(found_.size());
      if (!left) continue;
      const int64_t j = walk(rg.out_globals[k], taken);
      if (j >= 0) give(k, j);
    }
    begin.back() = static_cast<uint32_t>(found_.size());
    for (size_t k = 0; k < rg.out_globals.size() && left; ++k)
      if (o.local[k] < 0)
        for (uint32_t f = begin[k]; f < begin[k + 1]; ++f)
          if (!taken[found_[f]]) {
            give(k, found_[f]);
            break;
          }
    for (int32_t gi : rg.in_globals) local_[gi] = -1;
    return o;
  }

 private:
  // A graph input an output may be offered (taken or not): not itself an output, one reader.
  bool candidate(int32_t gi) const {
    return input_pos_[gi] >= 0 && !is_output_[gi] && readers_[gi] == 1;
  }
  // Walks back from `out` (at most kReach nodes, nearest first: bounded work per output, so a
  // 100,000-wide graph stays linear) and appends the region's candidate inputs of out's byte
  // size it reached to found_, nearest first, up to the first of them not taken every reader of
  // which was reached on that walk (m_new = b1 * m + ... takes m, whose one reader feeds m_new,
  // and not p), which it returns; or -1.
  int64_t walk(int32_t out, const std::vector<char>& taken) {
    static constexpr size_t kReach = 256;
    const lt_graph& g = g_;
    if (!is_output_[out]) return -1;
    const size_t bytes = node_bytes(g.nodes[out]);
    if (bytes == 0) return -1;
    ++epoch_;
    std::vector<int32_t>& reached = reached_;  // reused from walk to walk
    reached.assign(1, out);
    mark_[out] = epoch_;
    for (size_t q = 0; q < reached.size() && reached.size() < kReach; ++q) {
      const lt_graph_node& n = g.nodes[reached[q]];
      for (size_t k = 0; k < n.num_operands && reached.size() < kReach; ++k)
        if (mark_[n.operands[k]] != epoch_) {
          mark_[n.operands[k]] = epoch_;
          reached.push_back(n.operands[k]);
        }
    }
    for (int32_t in : reached) {
      const int32_t j = local_[in];
      // An input that is itself a graph output (the optimiser resolved an output to it, e.g.
      // neg(neg(x)) -> x) is read after the run: never donated.
      if (j < 0 || !candidate(in) || node_bytes(g.nodes[in]) != bytes) continue;
      found_.push_back(j);
      if (taken[j]) continue;
      bool fed = true;
      for (uint32_t u = user_begin_[in]; u < user_begin_[in + 1] && fed; ++u)
        fed = mark_[users_[u]] == epoch_;
      if (fed) return j;  // the output is given it: the rest of its list is never read
    }
    return -1;
  }

  const lt_graph& g_;
  std::vector<int32_t> input_pos_;
  std::vector<char> is_output_;
  std::vector<uint32_t> readers_;
  std::vector<uint32_t> user_begin_;
  std::vector<int32_t> users_;
  std::vector<uint32_t> mark_;
  std::vector<int32_t> local_;    // graph node -> local input of the region being offered, or -1
  std::vector<int32_t> reached_;  // walk()'s nodes
  std::vector<int32_t> found_;    // per output of the region being offered: its inputs
  std::vector<uint32_t> found_begin_;  // where each output's inputs start in found_
  uint32_t epoch_ = 0;
};

}  // namespace

CompiledPlan::~CompiledPlan() {
  for (auto& r : regions)
    if (r.exe) client::destroy(r.dev, r.exe);
}

PlanSource::PlanSource(const Collected& c, std::string reason)
    : num_nodes(c.nodes.size()),
      num_inputs(c.inputs.size()),
      outputs(c.outputs),
      key(c.key),
      label(graph_label(c)),
      why(std::move(reason)),
      input_names(lt::input_names(c)) {}

PlanSource::PlanSource(const lt_graph& g, const Collected& c, std::string reason)
    : num_nodes(g.num_nodes),
      num_inputs(g.num_inputs),
      outputs(g.outputs, g.outputs + g.num_outputs),
      key(c.key),
      label(graph_label(c)),
      why(std::move(reason)),
      input_names(lt::input_names(c)) {
  input_names.resize(g.num_inputs, "(size)");
}

Placement placement(Device* dev, const Collected* live, std::span<const int32_t> origin) {
  Runtime* rt = dev->runtime;
  Placement pl;
  pl.target = dev->plugin->name;
  pl.supports = [dev](const lt_graph& g, size_t i) { return client::supports(dev, g, i); };
  if (rt->fallback) pl.fallback = rt->fallback->name;
  if (Device* fb = fallback_device(dev))
    pl.fallback_of = [fb](const lt_graph& g, size_t i) { return client::supports(fb, g, i); };
  pl.is_custom = [](const char* op) { return find_custom_op(op) != nullptr; };
  pl.policy = rt->policy;
  pl.max_region_nodes = rt->config.max_region_nodes;
  pl.warn = [rt, dev, live, origin](const char* op, const std::string& desc, int32_t node) {
    std::lock_guard lk(rt->warn_mu);
    if (std::find(rt->warned_ops.begin(), rt->warned_ops.end(), op) != rt->warned_ops.end()) return;
    rt->warned_ops.push_back(op);
    std::string at;
    if (!origin.empty())
      node = node >= 0 && static_cast<size_t>(node) < origin.size()
                 ? origin[static_cast<size_t>(node)]
                 : -1;
    if (live && node >= 0 && static_cast<size_t>(node) < live->nodes.size())
      if (std::string loc = trace_location(live->nodes[static_cast<size_t>(node)]); !loc.empty())
        at = ", traced at " + loc;
    rt->log->warn("op '{}' ({}{}) is not supported by backend '{}'; running it on '{}'", op, desc,
                  at, dev->plugin->name, rt->fallback->name);
  };
  return pl;
}

std::vector<PreparedRegion> prepare_regions(Partition& part) {
  std::vector<PreparedRegion> out(part.regions.size());
  LocalIndex local(part.graph().num_nodes);
  for (size_t r = 0; r < part.regions.size(); ++r)
    if (part.regions[r].site != Site::kHost) region_graph(part, r, out[r].graph, local);
  return out;
}

std::shared_ptr<Plan> compile_plan(Device* dev, const lt_graph& g, const PlanSource& src,
                                   const Collected* live, std::span<const int32_t> origin) {
  const auto t0 = Clock::now();
  Partition part = partition(g, placement(dev, live, origin));
  std::vector<PreparedRegion> regions = prepare_regions(part);
  if (live && !dev->runtime->config.dump_dir.empty() && live->nodes.size() == g.num_nodes) {
    PlanSource with_lines = src;  // the dump's node labels name the lines that traced them
    with_lines.traced_at.reserve(g.num_nodes);
    for (const Node* n : live->nodes) with_lines.traced_at.push_back(trace_location(n));
    return compile_partition(dev, part, regions, with_lines, nullptr, nullptr, t0);
  }
  return compile_partition(dev, part, regions, src, nullptr, nullptr, t0);
}

std::shared_ptr<Plan> compile_partition(Device* dev, Partition& part,
                                        std::vector<PreparedRegion>& regions, const PlanSource& src,
                                        bool* all_dynamic, std::string* why_static,
                                        std::chrono::steady_clock::time_point t0) {
  Runtime* rt = dev->runtime;
  Device* fb_dev = fallback_device(dev);
  const lt_graph& g = part.graph();
  auto plan = std::make_shared<Plan>();
  plan->num_nodes = src.num_nodes;
  plan->num_inputs = src.num_inputs;
  plan->outputs = src.outputs;
  CompiledPlan& cp = plan->kind.emplace<CompiledPlan>();
  cp.graph_nodes = g.num_nodes;
  cp.graph_inputs.assign(g.inputs, g.inputs + g.num_inputs);
  cp.graph_outputs.assign(g.outputs, g.outputs + g.num_outputs);
  cp.op_counts = part.op_counts;
  cp.fallback_nodes = part.fallback_nodes;
  cp.decomposed_nodes = part.decomposed_nodes;
  cp.collectives = part.collectives;
  if (all_dynamic) *all_dynamic = true;

  const bool dump = !rt->config.dump_dir.empty();
  DotDump dot;
  Donations donations(g, part, regions);
  for (size_t r = 0; r < part.regions.size(); ++r) {
    const PartRegion& pr = part.regions[r];
    Region reg;
    if (pr.site == Site::kHost) {
      reg.host_node = static_cast<int32_t>(cp.host_nodes.size());
      cp.host_nodes.push_back(host_node(g, pr.members.front()));
      cp.regions.push_back(std::move(reg));
      cp.region_labels.push_back(region_label(g, pr.members, "core (custom op CPU kernel)"));
      cp.region_stats.emplace_back();
      if (dump)
        dot.regions.push_back({DotRegion::kCore,
                               "core",
                               "custom op: its CPU kernel run by the core",
                               pr.members,
                               {}});
      continue;
    }
    PreparedRegion& prep = regions[r];
    GraphBuf& gb = prep.graph.buf;
    reg.dev = pr.site == Site::kTarget ? dev : fb_dev;
    reg.in_globals = prep.graph.in_globals;
    reg.out_globals = prep.graph.out_globals;
    reg.out_bytes = prep.graph.out_bytes;
    if (gb.g.num_symbols) {  // a dynamic region: its output forms
      for (int32_t o : std::span(gb.g.outputs, gb.g.num_outputs)) {
        reg.out_forms.push_back(lower::shape_forms(gb.g, static_cast<size_t>(o)));
        reg.out_dtypes.push_back(gb.g.nodes[o].dtype);
      }
    }
    std::string failed;  // why the target's compile failed, if it did
    Span span(rt, "compile", "compile region");
    if (span.on())
      span.args(fmt::format("\"region\": {}, \"backend\": \"{}\", \"nodes\": {}", r,
                            reg.dev->plugin->name, pr.members.size()));
    DonationOffer offer = donations.offer(prep.graph);
    const bool offered =
        std::any_of(offer.local.begin(), offer.local.end(), [](int64_t j) { return j >= 0; });
    const client::Compiled exe = compile_region(reg.dev, fb_dev, gb.g, failed,
                                                offered ? offer.local : std::vector<int64_t>{});
    reg.exe = exe.exe;
    reg.donor.assign(reg.out_globals.size(), -1);
    for (size_t k = 0; k < exe.donation_accepted.size(); ++k)
      if (exe.donation_accepted[k]) reg.donor[k] = offer.global[k];
    if (!failed.empty())
      for (int32_t gi : pr.members) {
        add_count(cp.op_counts, std::string("fallback.") + g.nodes[gi].op);
        ++cp.fallback_nodes;
      }
    if (all_dynamic && !exe.dynamic && *all_dynamic) {
      *all_dynamic = false;
      if (why_static)
        *why_static =
            fmt::format("backend '{}' compiles static shapes only", reg.dev->plugin->name);
    }
    cp.regions.push_back(std::move(reg));
    Region& placed = cp.regions.back();
    const std::string& backend = placed.dev->plugin->name;
    auto& stats = cp.region_stats.emplace_back(client::stats(placed.dev->plugin, placed.exe));
    for (const auto& [name, v] : stats)  // "plugin.<backend>.<stat>": the last compiled program
      rt->metrics.set_named(fmt::format("plugin.{}.{}", backend, name), v);
    const bool on_fallback = placed.dev == fb_dev;
    cp.region_labels.push_back(
        region_label(g, pr.members, on_fallback ? "fallback " + backend : backend));
    if (dump) {
      dump_region_text(rt, gb.g, backend, src.key, r);
      DotRegion dr{
          on_fallback ? DotRegion::kFallback : DotRegion::kBackend, backend, "", pr.members, {}};
      if (!failed.empty())
        dr.note = fmt::format("compile on {} failed: {}", dev->plugin->name, failed);
      else if (on_fallback)
        dr.note = fmt::format("fallback: not supported by {}", dev->plugin->name);
      dr.steps = planner_steps(backend, gb.g, placed.in_globals, pr.members);
      dot.regions.push_back(std::move(dr));
    }
  }
  record_cuts(rt, src.key, g.num_nodes, part.regions.size(), part.cuts);
  plan->key = src.key;
  plan->device = dev->name;
  plan->label = src.label;
  cp.region_ns = std::make_unique<std::atomic<uint64_t>[]>(cp.regions.size());
  if (dump) {
    dot.graph = &g;
    dot.key = src.key;
    dot.traced_nodes = src.num_nodes;
    dot.device = dev->name;
    dot.reason = src.why;
    dot.input_names = src.input_names;
    dot.origin = part.origin;
    if (!src.traced_at.empty()) {  // per node of the partition's input graph
      dot.traced_at.resize(g.num_nodes);
      for (size_t i = 0; i < g.num_nodes; ++i) {
        const int32_t from = !part.decomposed         ? static_cast<int32_t>(i)
                             : i < part.source.size() ? part.source[i]
                                                      : -1;
        if (from >= 0 && static_cast<size_t>(from) < src.traced_at.size())
          dot.traced_at[i] = src.traced_at[static_cast<size_t>(from)];
      }
    }
    dump_dot(rt, dot);
  }
  const auto compile_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  plan->compile_ns.store(compile_ns);
  rt->metrics.compiles.fetch_add(1);
  rt->metrics.compile_ns.fetch_add(compile_ns);
  return plan;
}

}  // namespace lt
