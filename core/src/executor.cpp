// executor.cpp — turns pending roots into one graph, finds or compiles its plan (partitioned
// between the target backend and the cpu_eager fallback), executes it and cuts the graph.
#include "executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "custom_ops.h"
#include "cut.h"
#include "dist.h"
#include "error.h"
#include "lazytensor/lower/decompose.hpp"
#include "lazytensor/lower/error.hpp"
#include "ops.h"

namespace lt {
namespace {

using Clock = std::chrono::steady_clock;
std::atomic<uint64_t> g_epoch{0};

uint64_t input_hash(const Node* n) {
  if (n->is_leaf()) return n->local_hash;
  uint64_t h = hash_combine(hash_mix(kOpInput + 1), static_cast<uint64_t>(n->dtype));
  return hash_combine(
      h, hash_bytes(n->shape.data(), n->shape.size() * sizeof(int64_t), n->shape.size()));
}

// Plain-C graph (lt_graph) over collected nodes; pointers borrow from the nodes.
struct GraphBuf {
  std::vector<lt_graph_node> nodes;
  std::vector<int32_t> flat_ops;  // operands of all nodes, node by node
  std::vector<int32_t> inputs, outputs;
  lt_graph g{};

  void add(const Node* n, bool as_input, const int32_t* ops, size_t num_ops) {
    lt_graph_node gn{};
    gn.op = as_input ? "input" : op_name(n->op);
    gn.dtype = n->dtype;
    gn.rank = n->shape.size();
    gn.shape = n->shape.data();
    gn.num_operands = num_ops;
    if (!as_input && n->attrs) {
      gn.num_attrs = n->attrs->view.size();
      gn.attrs = n->attrs->view.data();
    }
    if (as_input) inputs.push_back(static_cast<int32_t>(nodes.size()));
    nodes.push_back(gn);
    flat_ops.insert(flat_ops.end(), ops, ops + num_ops);
  }
  const lt_graph* finish(uint64_t hash) {
    size_t off = 0;
    for (auto& n : nodes) {
      n.operands = flat_ops.data() + off;
      off += n.num_operands;
    }
    g.struct_size = LT_GRAPH_STRUCT_SIZE;
    g.num_nodes = nodes.size();
    g.nodes = nodes.data();
    g.num_inputs = inputs.size();
    g.inputs = inputs.data();
    g.num_outputs = outputs.size();
    g.outputs = outputs.data();
    g.hash = hash;
    return &g;
  }
};

void full_graph(const Collected& c, GraphBuf& gb) {
  gb.nodes.reserve(c.nodes.size());  // exact sizes: no doubling slack on a 1,000,000-node graph
  gb.flat_ops.reserve(c.operand_idx.size());
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    gb.add(c.nodes[i], c.is_input(i), c.operand_idx.data() + c.op_begin[i],
           static_cast<size_t>(c.op_begin[i + 1] - c.op_begin[i]));
  }
  gb.outputs = c.outputs;
  gb.finish(c.key);
}

bool ask_supports(Device* dev, const lt_graph* g, size_t node) {
  Plugin* p = dev->plugin;
  lt_plugin_supports_args a{};
  a.struct_size = LT_PLUGIN_SUPPORTS_ARGS_STRUCT_SIZE;
  a.context = p->ctx;
  a.device = dev->index;
  a.graph = g;
  a.node = node;
  p->call("supports", [&] { return p->api->supports(&a); });
  return a.supported != 0;
}

std::string node_desc(const Node* n) {
  return fmt::format("{} {}", lt_dtype_name(n->dtype), dims_str(n->shape));
}

void dump_graph(Runtime* rt, const lt_graph* g, const std::string& backend, uint64_t key,
                size_t region) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(rt->config.dump_dir, ec);
  std::string path =
      fmt::format("{}/lt_graph_{:016x}_r{}_{}.txt", rt->config.dump_dir, key, region, backend);
  std::ofstream out(path);
  if (!out) {
    rt->log->warn("dump: cannot write {}", path);
    return;
  }
  out << fmt::format("# graph {:016x} region {} backend {}: {} nodes, {} inputs, {} outputs\n", key,
                     region, backend, g->num_nodes, g->num_inputs, g->num_outputs);
  for (size_t i = 0; i < g->num_nodes; ++i) {
    const lt_graph_node& n = g->nodes[i];
    std::string ops;
    for (size_t k = 0; k < n.num_operands; ++k)
      ops += fmt::format("{}%{}", k ? ", " : "", n.operands[k]);
    std::string attrs;
    for (size_t k = 0; k < n.num_attrs; ++k) {
      const lt_attr& a = n.attrs[k];
      attrs += fmt::format(" {}=", a.name);
      if (a.kind == LT_ATTR_INT)
        attrs += std::to_string(a.i);
      else if (a.kind == LT_ATTR_FLOAT)
        attrs += fmt::format("{}", a.f);
      else if (a.kind == LT_ATTR_INTS)
        attrs += dims_str(a.ints, a.ints_len);
      else
        attrs += a.s ? a.s : "";
    }
    out << fmt::format("%{} = {}({}) : {} {}{}\n", i, n.op, ops, lt_dtype_name(n.dtype),
                       dims_str(n.shape, n.rank), attrs);
  }
  out << "outputs:";
  for (size_t k = 0; k < g->num_outputs; ++k) out << " %" << g->outputs[k];
  out << "\n";
}

// The executable's own statistics: into the "plugin.<backend>.<stat>" metrics (the last
// compiled program) and, when `keep` is given, kept for the region in the metrics report.
void record_plugin_stats(Runtime* rt, Plugin* p, lt_plugin_executable* exe,
                         std::vector<std::pair<std::string, double>>* keep = nullptr) {
  if (!LT_PLUGIN_HAS(p, stats)) return;
  struct Ctx {
    Runtime* rt;
    Plugin* p;
    std::vector<std::pair<std::string, double>>* keep;
  } ctx{rt, p, keep};
  lt_plugin_stats_args a{};
  a.struct_size = LT_PLUGIN_STATS_ARGS_STRUCT_SIZE;
  a.context = p->ctx;
  a.executable = exe;
  a.user = &ctx;
  a.emit = [](void* user, const char* name, double v) {
    if (!name) return;
    auto* c = static_cast<Ctx*>(user);
    try {
      c->rt->metrics.set_named(fmt::format("plugin.{}.{}", c->p->name, name), v);
      if (c->keep) c->keep->emplace_back(name, v);
    } catch (...) {
    }
  };
  try {
    p->call("stats", [&] { return p->api->stats(&a); });
  } catch (const Error& e) {
    rt->log->debug("{}", e.message());  // stats are optional: a failure only loses them
  }
}

// `dynamic` (a dynamic graph): set to whether the plugin's executable runs every symbol value.
lt_plugin_executable* compile_region(Device* dev, const lt_graph* g, bool* dynamic = nullptr) {
  Plugin* p = dev->plugin;
  lt_plugin_compile_args a{};
  a.struct_size = LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE;
  a.context = p->ctx;
  a.device = dev->index;
  a.graph = g;
  p->call("compile", [&] { return p->api->compile(&a); });
  if (!a.executable) fail(LT_STATUS_PLUGIN_ERROR, "{}: compile returned no executable", p->name);
  // A plugin of ABI 1.0/1.1 never wrote the field: its executables are static.
  if (dynamic) *dynamic = p->abi_minor >= 2 && a.dynamic == 1;
  return a.executable;
}

// Builds region r's local graph over the lowered graph `g`: external values become "input"
// nodes first; values used outside the region (or graph outputs) become its outputs.
// `local` is scratch shared by the regions of one graph (cut.h), cleared on the way out.
void region_graph(const lt_graph& g, const std::vector<int32_t>& members,
                  const std::vector<int32_t>& region_of, int32_t r, Region& reg,
                  const std::vector<uint8_t>& used_outside, GraphBuf& gb, LocalIndex& local) {
  auto add = [&](const lt_graph_node& n, bool as_input, const int32_t* ops, size_t count) {
    lt_graph_node gn = n;
    if (as_input) {
      gn.op = "input";
      gn.num_attrs = 0;
      gn.attrs = nullptr;
      gb.inputs.push_back(static_cast<int32_t>(gb.nodes.size()));
    }
    gn.num_operands = count;
    gb.nodes.push_back(gn);
    gb.flat_ops.insert(gb.flat_ops.end(), ops, ops + count);
  };
  for (int32_t gi : members) {
    const lt_graph_node& n = g.nodes[gi];
    for (size_t k = 0; k < n.num_operands; ++k) {
      int32_t o = n.operands[k];
      if (region_of[o] != r && local[o] < 0) {
        local.set(o, static_cast<int32_t>(gb.nodes.size()));
        reg.in_globals.push_back(o);
        add(g.nodes[o], true, nullptr, 0);
      }
    }
  }
  std::vector<int32_t> ops;
  for (int32_t gi : members) {
    const lt_graph_node& n = g.nodes[gi];
    ops.clear();
    for (size_t k = 0; k < n.num_operands; ++k) ops.push_back(local[n.operands[k]]);
    local.set(gi, static_cast<int32_t>(gb.nodes.size()));
    add(n, false, ops.data(), ops.size());
    if (used_outside[gi]) {
      reg.out_globals.push_back(gi);
      reg.out_bytes.push_back(static_cast<size_t>(lower::DescRef(n).numel()) *
                              lt_dtype_size(n.dtype));
      gb.outputs.push_back(local[gi]);
    }
  }
  uint64_t h = g.hash;
  for (int32_t gi : members) h = hash_combine(h, static_cast<uint64_t>(gi));
  gb.finish(h);
  local.clear();
}

bool is_input_node(const lt_graph_node& n) {
  return std::strcmp(n.op, "input") == 0;
}

bool is_collective(const lt_graph_node& n) {
  const lower::OpInfo* op = lower::find_op(n.op);
  return op && op->category == lower::Category::kCollective;
}

// True if the decompose pass could help a node the backend declined: a built-in composite, or
// an elementwise op whose operands broadcast, or arithmetic on bf16/f16 (computed in f32).
bool rewritable(const lt_graph& g, size_t i) {
  const lt_graph_node& n = g.nodes[i];
  const lower::OpInfo* op = lower::find_op(n.op);
  if (!op) return false;
  if (op->composite) return true;
  auto storage = [](lt_dtype d) { return d == LT_DTYPE_BF16 || d == LT_DTYPE_F16; };
  if (op->id != kOpCast) {
    if (storage(n.dtype)) return true;
    for (size_t k = 0; k < n.num_operands; ++k)
      if (storage(g.nodes[n.operands[k]].dtype)) return true;
  }
  if (op->category != lower::Category::kElementwise) return false;
  for (size_t k = 0; k < n.num_operands; ++k) {
    const lt_graph_node& o = g.nodes[n.operands[k]];
    if (o.rank != n.rank || !std::equal(o.shape, o.shape + o.rank, n.shape)) return true;
  }
  return false;
}

void add_count(std::vector<std::pair<std::string, uint64_t>>& counts, std::string key) {
  for (auto& [k, v] : counts)
    if (k == key) return void(++v);
  counts.emplace_back(std::move(key), 1);
}

// "12 nodes; outputs sub x6, mean; inputs 'x', 'y'": what a person recognises a graph by.
std::string graph_label(const Collected& c) {
  std::vector<std::pair<std::string, int>> roots;
  for (int32_t o : c.outputs) {
    std::string op = c.is_input(o) ? "input" : op_name(c.nodes[o]->op);
    auto it =
        std::find_if(roots.begin(), roots.end(), [&](const auto& r) { return r.first == op; });
    if (it == roots.end())
      roots.emplace_back(op, 1);
    else
      ++it->second;
  }
  std::string out = fmt::format("{} nodes; outputs", c.nodes.size());
  for (size_t k = 0; k < roots.size() && k < 4; ++k)
    out += fmt::format("{} {}{}", k ? "," : "", roots[k].first,
                       roots[k].second > 1 ? fmt::format(" x{}", roots[k].second) : "");
  if (roots.size() > 4) out += ", ...";
  std::string names;
  for (int32_t k : c.inputs)
    if (c.nodes[k]->name)
      names += fmt::format("{}'{}'", names.empty() ? "" : ", ", *c.nodes[k]->name);
  if (!names.empty()) out += "; inputs " + names;
  return out;
}

// "cpu_jit: 398 nodes" or, for a region of few op kinds, "fallback cpu_eager: gelu x2".
std::string region_label(const lt_graph& g, const std::vector<int32_t>& members,
                         const std::string& where) {
  std::vector<std::pair<std::string, int>> ops;
  for (int32_t v : members) {
    std::string op = g.nodes[v].op;
    auto it = std::find_if(ops.begin(), ops.end(), [&](const auto& r) { return r.first == op; });
    if (it == ops.end())
      ops.emplace_back(op, 1);
    else
      ++it->second;
  }
  if (ops.size() > 3) return fmt::format("{}: {} nodes", where, members.size());
  std::string out = where + ":";
  for (size_t k = 0; k < ops.size(); ++k)
    out += fmt::format("{} {}{}", k ? "," : "", ops[k].first,
                       ops[k].second > 1 ? fmt::format(" x{}", ops[k].second) : "");
  return out;
}

// What compile_plan needs of a collected graph besides the graph itself: a copy, so that a
// background compile never touches the live IR.
struct PlanSource {
  size_t num_nodes = 0, num_inputs = 0;
  std::vector<int32_t> outputs;
  std::vector<uint8_t> input_flag;
  uint64_t key = 0;
  std::string label, why;  // graph_label(c); why it was compiled (the dump's title)
  std::vector<std::string> input_names;
  PlanSource(const Collected& c, std::string reason)
      : num_nodes(c.nodes.size()),
        num_inputs(c.inputs.size()),
        outputs(c.outputs),
        input_flag(c.input_flag),
        key(c.key),
        label(graph_label(c)),
        why(std::move(reason)) {
    for (int32_t k : c.inputs)
      input_names.push_back(c.nodes[k]->name ? *c.nodes[k]->name : std::string());
  }
  // A graph the core built from c (padded to buckets): its own nodes, c's identity.
  PlanSource(const lt_graph& g, const Collected& c, std::string reason)
      : num_nodes(g.num_nodes),
        num_inputs(g.num_inputs),
        outputs(g.outputs, g.outputs + g.num_outputs),
        input_flag(g.num_nodes, 0),
        key(c.key),
        label(graph_label(c)),
        why(std::move(reason)) {
    for (size_t k = 0; k < g.num_inputs; ++k) input_flag[g.inputs[k]] = 1;
    for (int32_t k : c.inputs)
      input_names.push_back(c.nodes[k]->name ? *c.nodes[k]->name : std::string());
    input_names.resize(g.num_inputs, "(size)");
  }
  bool is_input(size_t i) const { return input_flag[i] != 0; }
};

// Dynamic shapes: compile_plan at one point of a program's symbols. A dry run stops once the
// region graphs are built and keeps them; the real run derives each region's expressions from
// the dry runs with one symbol moved at a time (lower::derive_exprs), checks them against a dry
// run at other values, and asks each backend for an executable valid at every value.
struct DynCompile {
  bool dry = false;
  std::vector<lower::OwnedGraph> regions;  // dry: each region's graph
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> globals;  // dry: in/out
  size_t lowered_nodes = 0;                                                    // dry
  std::vector<int64_t> base, moved;           // real: the values, and symbol k's value in varied[k]
  std::vector<DynCompile>* varied = nullptr;  // real: per symbol
  DynCompile* check = nullptr;                // real: a dry run at check_values
  std::vector<int64_t> check_values;
  bool dynamic = true;  // real, out: every region's executable runs every value
  std::string why;      // real, out: why not
};
// Thrown when a program's regions are not the same graph at every value: it is compiled static.
struct NotDynamic : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::shared_ptr<Plan> compile_plan(Device* dev, const lt_graph& full_g, const PlanSource& c,
                                   DynCompile* dyn = nullptr) {
  Runtime* rt = dev->runtime;
  auto t0 = Clock::now();
  Device* fb_dev =
      rt->fallback && rt->fallback != dev->plugin ? rt->fallback->devices.front() : nullptr;
  auto plan = std::make_shared<Plan>();
  plan->num_nodes = c.num_nodes;
  plan->num_inputs = c.num_inputs;
  plan->outputs = c.outputs;

  // 1. Capability, then decomposition of what the backend lacks: composites become primitives
  //    and implicit broadcasts explicit, before anything is sent to the fallback.
  std::vector<int8_t> answer(c.num_nodes, -1);
  std::vector<int32_t> origin;  // lowered node -> OpId of the composite it came from, or -1
  bool rewrite = false;
  for (size_t i = 0; i < c.num_nodes; ++i) {
    if (c.is_input(i)) continue;
    answer[i] = ask_supports(dev, &full_g, i) ? 1 : 0;
    rewrite = rewrite || (!answer[i] && rewritable(full_g, i));
  }
  const lt_graph* G = &full_g;
  lower::OwnedGraph lowered;
  if (rewrite) {
    lower::DecomposeReport report;
    auto supported = [&](const lt_graph& g, size_t i) { return ask_supports(dev, &g, i); };
    lower::Supported fallback;
    if (fb_dev) fallback = [&](const lt_graph& g, size_t i) { return ask_supports(fb_dev, &g, i); };
    if (lower::decompose(full_g, supported, &lowered, &report, fallback)) {
      G = &lowered.view();
      answer = std::move(report.supported);
      origin = std::move(report.origin);
      plan->decomposed_nodes = report.decomposed.size();
      for (const std::string& op : report.decomposed)
        add_count(plan->op_counts, "decomposed." + op);
      for (const std::string& op : report.widened) {
        add_count(plan->op_counts, "widened." + op);
        add_count(plan->op_counts, "widened_nodes");
      }
    }
  }
  const lt_graph& g = *G;
  const size_t n = g.num_nodes;
  plan->graph_nodes = n;
  plan->graph_inputs.assign(g.inputs, g.inputs + g.num_inputs);
  plan->graph_outputs.assign(g.outputs, g.outputs + g.num_outputs);

  // 2. Each remaining node goes to the target, the fallback, or (a custom op) the core.
  std::vector<Device*> where(n, nullptr);
  std::vector<uint8_t> on_host(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const lt_graph_node& node = g.nodes[i];
    if (is_input_node(node)) continue;
    if (answer[i] < 0) answer[i] = ask_supports(dev, &g, i) ? 1 : 0;
    if (answer[i]) {
      where[i] = dev;
      continue;
    }
    const char* op = node.op;
    std::string desc = lower::desc_str(lower::DescRef(node));
    if (i < origin.size() && origin[i] >= 0)
      desc += fmt::format(", from the decomposition of '{}'",
                          lower::op_info(static_cast<OpId>(origin[i])).name);
    if (is_collective(node)) {  // declined by the backend: the core runs it over MPI
      on_host[i] = 1;
      ++plan->collectives;
      continue;
    }
    const CustomOp* custom = find_custom_op(op);
    if (custom && !(fb_dev && ask_supports(fb_dev, &g, i))) {
      if (rt->policy == FallbackPolicy::kError)
        fail(LT_STATUS_FALLBACK_REFUSED,
             "fallback refused: custom op '{}' ({}) is not supported by backend '{}' and the "
             "fallback policy is 'error'",
             op, desc, dev->plugin->name);
      on_host[i] = 1;
      add_count(plan->op_counts, std::string("fallback.") + op);
      ++plan->fallback_nodes;
      continue;
    }
    if (!fb_dev)
      fail(LT_STATUS_UNSUPPORTED, "op '{}' ({}) is not supported by backend '{}'{}", op, desc,
           dev->plugin->name, rt->fallback ? "" : " and no fallback backend (cpu_eager) is loaded");
    if (rt->policy == FallbackPolicy::kError)
      fail(LT_STATUS_FALLBACK_REFUSED,
           "fallback refused: op '{}' ({}) is not supported by backend '{}' and the fallback "
           "policy is 'error'",
           op, desc, dev->plugin->name);
    if (!ask_supports(fb_dev, &g, i))
      fail(LT_STATUS_UNSUPPORTED,
           "op '{}' ({}) is supported neither by '{}' nor by the fallback '{}'", op, desc,
           dev->plugin->name, fb_dev->plugin->name);
    if (rt->policy == FallbackPolicy::kWarn) {
      std::lock_guard lk(rt->warn_mu);
      if (std::find(rt->warned_ops.begin(), rt->warned_ops.end(), op) == rt->warned_ops.end()) {
        rt->warned_ops.push_back(op);
        rt->log->warn("op '{}' ({}) is not supported by backend '{}'; running it on '{}'", op, desc,
                      dev->plugin->name, fb_dev->plugin->name);
      }
    }
    where[i] = fb_dev;
    add_count(plan->op_counts, std::string("fallback.") + op);
    ++plan->fallback_nodes;
  }

  // 3. Regions in topological order; a node joins the last region of its device when none of
  //    its operands lives in a later region of another device (keeps regions acyclic).
  std::vector<int32_t> region_of(n, -1);
  std::vector<Device*> region_dev;
  std::vector<int32_t> region_host;  // host_nodes index, -1 for plugin regions
  std::vector<std::vector<int32_t>> members;
  RegionCutter cutter(rt->config.max_region_nodes);
  for (size_t i = 0; i < n; ++i) {
    const lt_graph_node& node = g.nodes[i];
    if (is_input_node(node)) continue;
    if (on_host[i]) {  // custom op or collective on host: a region of its own
      region_of[i] = static_cast<int32_t>(region_dev.size());
      region_dev.push_back(nullptr);
      region_host.push_back(static_cast<int32_t>(plan->host_nodes.size()));
      members.push_back({static_cast<int32_t>(i)});
      HostNode& h = plan->host_nodes.emplace_back();
      h.op = find_custom_op(node.op);
      h.collective = is_collective(node);
      h.node = static_cast<int32_t>(i);
      h.name = node.op;
      h.dtype = node.dtype;
      h.shape.assign(node.shape, node.shape + node.rank);
      h.operands.assign(node.operands, node.operands + node.num_operands);
      for (int32_t o : h.operands) {
        const lt_graph_node& on = g.nodes[o];
        h.operand_descs.push_back({on.dtype, lower::Shape(on.shape, on.shape + on.rank)});
      }
      if (node.num_attrs) {
        h.attrs = std::make_unique<AttrSet>();
        for (size_t k = 0; k < node.num_attrs; ++k) {
          const lt_attr& a = node.attrs[k];
          StoredAttr& st = h.attrs->items.emplace_back();
          st.name = a.name, st.kind = a.kind, st.i = a.i, st.f = a.f;
          if (a.kind == LT_ATTR_INTS) st.ints.assign(a.ints, a.ints + a.ints_len);
          if (a.kind == LT_ATTR_STRING && a.s) st.s = a.s;
        }
        h.attrs->finish();
      }
      continue;
    }
    int32_t need = 0;
    for (size_t k = 0; k < node.num_operands; ++k) {
      int32_t o = node.operands[k];
      int32_t ro = region_of[o];
      if (ro < 0) continue;  // an input
      need = std::max(need, region_dev[ro] == where[i] ? ro : ro + 1);
    }
    int32_t pick = -1;
    for (int32_t r = static_cast<int32_t>(region_dev.size()) - 1; r >= need; --r)
      if (region_dev[r] == where[i] && region_host[r] < 0) {
        pick = r;
        break;
      }
    if (pick >= 0 && !cutter.admits(members[pick].size())) pick = -1;  // full: cut
    if (pick < 0) {
      pick = static_cast<int32_t>(region_dev.size());
      region_dev.push_back(where[i]);
      region_host.push_back(-1);
      members.emplace_back();
    }
    region_of[i] = pick;
    members[pick].push_back(static_cast<int32_t>(i));
  }
  std::vector<uint8_t> used_outside(n, 0);
  for (size_t k = 0; k < g.num_outputs; ++k) used_outside[g.outputs[k]] = 1;
  for (size_t i = 0; i < n; ++i) {
    const lt_graph_node& node = g.nodes[i];
    for (size_t k = 0; k < node.num_operands; ++k) {
      int32_t o = node.operands[k];
      if (region_of[o] >= 0 && region_of[o] != region_of[i]) used_outside[o] = 1;
    }
  }

  // 4. Compile each region; a failed compile on the target reruns the region on the fallback.
  const bool dump = !rt->config.dump_dir.empty() && !(dyn && dyn->dry);
  DotDump dot;
  LocalIndex local(n);
  if (dyn && dyn->dry) dyn->lowered_nodes = n;
  if (dyn && !dyn->dry) {
    if (dyn->check->lowered_nodes != n || dyn->check->regions.size() != members.size())
      throw NotDynamic("its partition into regions changes with its sizes");
    for (const DynCompile& d : *dyn->varied)
      if (d.lowered_nodes != n || d.regions.size() != members.size())
        throw NotDynamic("its partition into regions changes with its sizes");
  }
  for (size_t r = 0; r < members.size(); ++r) {
    Region reg;
    reg.dev = region_dev[r];
    if (!reg.dev && dyn) throw NotDynamic("a custom op or a collective runs on the host");
    if (!reg.dev) {
      reg.host_node = region_host[r];
      plan->regions.push_back(std::move(reg));
      plan->region_labels.push_back(region_label(g, members[r], "core (custom op CPU kernel)"));
      plan->region_stats.emplace_back();
      if (dump)
        dot.regions.push_back({DotRegion::kCore,
                               "core",
                               "custom op: its CPU kernel run by the core",
                               members[r],
                               {}});
      continue;
    }
    GraphBuf gb;
    region_graph(g, members[r], region_of, static_cast<int32_t>(r), reg, used_outside, gb, local);
    if (dyn && dyn->dry) {
      dyn->regions.push_back(lower::copy_graph(gb.g));
      dyn->globals.emplace_back(reg.in_globals, reg.out_globals);
      continue;
    }
    std::vector<lt_dim_expr> exprs;  // a dynamic region's expressions (gb.g points at them)
    bool region_dynamic = false;
    if (dyn) {
      std::vector<const lt_graph*> moved;
      for (DynCompile& d : *dyn->varied) {
        if (d.globals[r] != std::pair(reg.in_globals, reg.out_globals))
          throw NotDynamic("its regions' inputs and outputs change with its sizes");
        moved.push_back(&d.regions[r].view());
      }
      std::string why;
      if (!lower::derive_exprs(gb.g, dyn->base, moved, dyn->moved, &exprs, &why))
        throw NotDynamic(fmt::format("region {} ({}): {}", r, reg.dev->plugin->name, why));
      gb.g.num_symbols = dyn->base.size();
      gb.g.symbol_values = dyn->base.data();
      gb.g.num_dim_exprs = exprs.size();
      gb.g.dim_exprs = exprs.data();
      std::vector<int64_t> at;
      if (!lower::match(gb.g, dyn->check->regions[r].view(), &at) || at != dyn->check_values)
        throw NotDynamic(
            fmt::format("region {} ({}) is not affine in its sizes", r, reg.dev->plugin->name));
      for (int32_t o : std::span(gb.g.outputs, gb.g.num_outputs)) {
        reg.out_forms.push_back(lower::shape_forms(gb.g, static_cast<size_t>(o)));
        reg.out_dtypes.push_back(gb.g.nodes[o].dtype);
      }
    }
    std::string failed;  // why the target's compile failed, if it did
    try {
      reg.exe = compile_region(reg.dev, &gb.g, &region_dynamic);
    } catch (const Error& e) {
      // Out of device memory is a property of the program (its size), not a capability gap:
      // the user must see it. So must a user who asked for no fallback at all.
      if (!fb_dev || reg.dev == fb_dev || e.code() == LT_STATUS_OUT_OF_MEMORY) throw;
      if (rt->config.fallback == "error")
        throw Error(LT_STATUS_FALLBACK_REFUSED,
                    fmt::format("fallback refused: compile on '{}' failed ({}) and the fallback "
                                "policy is 'error'",
                                reg.dev->plugin->name, e.message()));
      rt->metrics.compile_failures.fetch_add(1);
      rt->log->warn("compile on '{}' failed ({}); running the region on '{}'",
                    reg.dev->plugin->name, e.message(), fb_dev->plugin->name);
      failed = e.message();
      reg.dev = fb_dev;
      reg.exe = compile_region(reg.dev, &gb.g, &region_dynamic);
      for (int32_t gi : members[r]) {
        add_count(plan->op_counts, std::string("fallback.") + g.nodes[gi].op);
        ++plan->fallback_nodes;
      }
    }
    if (dyn && !region_dynamic && dyn->dynamic) {
      dyn->dynamic = false;
      dyn->why = fmt::format("backend '{}' compiles static shapes only", reg.dev->plugin->name);
    }
    plan->regions.push_back(std::move(reg));
    Region& placed = plan->regions.back();
    record_plugin_stats(rt, placed.dev->plugin, placed.exe, &plan->region_stats.emplace_back());
    const bool on_fallback = placed.dev == fb_dev;
    const std::string& backend = placed.dev->plugin->name;
    plan->region_labels.push_back(
        region_label(g, members[r], on_fallback ? "fallback " + backend : backend));
    if (dump) {
      dump_graph(rt, &gb.g, backend, c.key, r);
      DotRegion dr{
          on_fallback ? DotRegion::kFallback : DotRegion::kBackend, backend, "", members[r], {}};
      if (!failed.empty())
        dr.note = fmt::format("compile on {} failed: {}", dev->plugin->name, failed);
      else if (on_fallback)
        dr.note = fmt::format("fallback: not supported by {}", dev->plugin->name);
      if (uses_shared_fusion_planner(backend))
        dr.groups = planner_groups(gb.g, placed.in_globals, members[r]);
      dot.regions.push_back(std::move(dr));
    }
  }
  record_cuts(rt, c.key, n, members.size(), cutter.cuts());
  plan->key = c.key;
  plan->device = dev->name;
  plan->label = c.label;
  plan->region_ns = std::make_unique<std::atomic<uint64_t>[]>(plan->regions.size());
  if (dump) {
    dot.graph = &g;
    dot.key = c.key;
    dot.traced_nodes = c.num_nodes;
    dot.device = dev->name;
    dot.reason = c.why;
    dot.input_names = c.input_names;
    dot.origin = origin;
    dump_dot(rt, dot);
  }
  const auto compile_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  plan->compile_ns.store(compile_ns);
  if (dyn && dyn->dry) return plan;
  rt->metrics.compiles.fetch_add(1);
  rt->metrics.compile_ns.fetch_add(compile_ns);
  return plan;
}

std::shared_ptr<Plan> compile_plan(Device* dev, const Collected& c, std::string why) {
  GraphBuf full;
  full_graph(c, full);
  return compile_plan(dev, full.g, PlanSource(c, std::move(why)));
}

// What differs between two graphs of one program: the inputs whose shape or dtype changed,
// named ("input 3 'x' dim 0: 32 -> 24"), else the first inner node whose shape changed.
std::string program_diff(const Device::Signature& old, const Device::Signature& sig) {
  std::vector<std::string> parts;
  size_t changed = 0;
  for (size_t k = 0; k < sig.inputs.size(); ++k) {
    const lt::Dims &a = old.shapes[old.inputs[k]], &b = sig.shapes[sig.inputs[k]];
    std::string what;
    if (a.size() != b.size()) {
      what = fmt::format("rank {} -> {} ({} -> {})", a.size(), b.size(), dims_str(a), dims_str(b));
    } else {
      for (size_t d = 0; d < a.size(); ++d)
        if (a[d] != b[d])
          what += fmt::format("{}dim {}: {} -> {}", what.empty() ? "" : ", ", d, a[d], b[d]);
    }
    if (old.input_dtypes[k] != sig.input_dtypes[k])
      what += fmt::format("{}dtype {} -> {}", what.empty() ? "" : ", ",
                          lt_dtype_name(old.input_dtypes[k]), lt_dtype_name(sig.input_dtypes[k]));
    if (what.empty()) continue;
    if (++changed > 3) continue;
    const std::string& name = sig.input_names[k];
    parts.push_back(fmt::format("input {}{} {}", k, name.empty() ? "" : " '" + name + "'", what));
  }
  if (changed > 3) parts.push_back(fmt::format("and {} more inputs", changed - 3));
  if (!parts.empty()) {
    std::string out = parts[0];
    for (size_t i = 1; i < parts.size(); ++i) out += "; " + parts[i];
    return out;
  }
  for (size_t i = 0; i < sig.shapes.size(); ++i)
    if (old.shapes[i] != sig.shapes[i])
      return fmt::format("node {} ({}) shape {} -> {}", i, op_name(sig.ops[i]),
                         dims_str(old.shapes[i]), dims_str(sig.shapes[i]));
  return "same program, input shapes and dtypes: attributes changed";
}

// Why c missed the compile cache: compared with the last compiled graph of the same program
// (an eval graph in between does not matter), else with the compiled graph sharing the longest
// prefix of ops.
std::string miss_reason(Device* dev, const Collected& c) {
  Device::Signature sig;
  uint64_t h = 0x6c745f70726f67ULL;
  sig.ops.reserve(c.nodes.size());
  sig.shapes.end.reserve(c.nodes.size());
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    const uint16_t op = c.is_input(i) ? kOpInput : c.nodes[i]->op;
    sig.ops.push_back(op);
    sig.shapes.push_back(c.nodes[i]->shape);
    h = hash_combine(h, op);
    if (!c.is_input(i))
      for (int32_t k = c.op_begin[i]; k < c.op_begin[i + 1]; ++k)
        h = hash_combine(h, static_cast<uint64_t>(c.operand_idx[static_cast<size_t>(k)]));
  }
  for (int32_t o : c.outputs) h = hash_combine(h, 0x0u + static_cast<uint64_t>(o) + (1ull << 40));
  sig.program = h;
  for (int32_t k : c.inputs) {
    sig.inputs.push_back(k);
    sig.input_dtypes.push_back(c.nodes[k]->dtype);
    sig.input_names.push_back(c.nodes[k]->name ? *c.nodes[k]->name : std::string());
  }
  std::string why;
  auto same = std::find_if(dev->recent.begin(), dev->recent.end(), [&](const Device::Signature& s) {
    return s.program == sig.program && s.ops == sig.ops &&
           s.inputs == sig.inputs;  // (a hash collision is no match)
  });
  if (same != dev->recent.end()) {
    why = program_diff(*same, sig);
    dev->recent.erase(same);
  } else if (dev->recent.empty()) {
    why = fmt::format("{}: first graph compiled on this device", dev->name);
  } else {
    size_t best = 0;
    const Device::Signature* closest = nullptr;
    for (const Device::Signature& s : dev->recent) {
      size_t i = 0;
      while (i < s.ops.size() && i < sig.ops.size() && s.ops[i] == sig.ops[i]) ++i;
      if (!closest || i > best) best = i, closest = &s;
    }
    why = fmt::format("new program ({} nodes, {} inputs)", sig.ops.size(), sig.inputs.size());
    if (best < closest->ops.size() && best < sig.ops.size())
      why += fmt::format("; the closest compiled graph ({} nodes) differs from node {}: {} -> {}",
                         closest->ops.size(), best, op_name(closest->ops[best]),
                         op_name(sig.ops[best]));
    else
      why += fmt::format("; the closest compiled graph has the same first {} ops of {}", best,
                         closest->ops.size());
  }
  dev->recent.push_front(std::move(sig));
  if (dev->recent.size() > 32) dev->recent.pop_back();
  return why;
}

// The host address of a buffer of a host-addressable device, else nullptr.
void* host_ptr(const Buffer* b) {
  Device* d = b->device;
  if (!d->host_addressable || !b->nbytes || !LT_PLUGIN_HAS(d->plugin, buffer_host_ptr))
    return nullptr;
  lt_plugin_buffer_args a{};
  a.struct_size = LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE;
  a.context = d->plugin->ctx, a.device = d->index, a.buffer = b->handle;
  d->plugin->call("buffer_host_ptr", [&] { return d->plugin->api->buffer_host_ptr(&a); });
  return a.host_ptr;
}

BufferPtr transfer(Runtime* rt, const Buffer* src, Device* to) {
  BufferPtr dst = to->allocator->allocate(src->nbytes);
  Device* from = src->device;
  size_t nb = src->nbytes;
  if (nb) {
    void* sp = nullptr;
    void* dp = nullptr;
    if (from->host_addressable && to->host_addressable) {
      lt_plugin_buffer_args a{};
      a.struct_size = LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE;
      a.context = from->plugin->ctx, a.device = from->index, a.buffer = src->handle;
      from->plugin->call("buffer_host_ptr", [&] { return from->plugin->api->buffer_host_ptr(&a); });
      sp = a.host_ptr;
      lt_plugin_buffer_args b{};
      b.struct_size = LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE;
      b.context = to->plugin->ctx, b.device = to->index, b.buffer = dst->handle;
      to->plugin->call("buffer_host_ptr", [&] { return to->plugin->api->buffer_host_ptr(&b); });
      dp = b.host_ptr;
    }
    if (sp && dp) {
      std::memcpy(dp, sp, nb);
    } else {
      std::vector<unsigned char> tmp(nb);
      download_from(from, src, tmp.data(), nb);
      upload_to(to, dst.get(), tmp.data(), nb);
    }
  }
  rt->metrics.bytes_between_backends.fetch_add(nb, std::memory_order_relaxed);
  return dst;
}

// A run of a plan compiled for bucket sizes (lower::mask_padding): the padded copies of c's
// inputs with dynamic dims, the sizes as inputs, and the roots' padded and valid shapes.
struct Padding {
  std::vector<BufferPtr> inputs;  // per graph input: its buffer, or null for the node's own
  std::vector<lower::Shape> root_padded, root_valid;
};

// Copies the box both shapes share from `src` (shape `from`) to `dst` (shape `to`, zeroed
// first), row-major, elements of `esize` bytes.
void copy_box(const char* src, const lower::Shape& from, char* dst, const lower::Shape& to,
              size_t esize) {
  size_t dst_bytes = esize;
  for (int64_t d : to) dst_bytes *= static_cast<size_t>(d);
  if (dst_bytes == 0) return;  // an empty value (and dst may be null)
  std::memset(dst, 0, dst_bytes);
  const size_t rank = from.size();
  if (rank == 0) return std::memcpy(dst, src, esize), void();
  std::vector<int64_t> box(rank), idx(rank, 0);
  for (size_t d = 0; d < rank; ++d) box[d] = std::min(from[d], to[d]);
  if (std::find(box.begin(), box.end(), 0) != box.end()) return;
  const size_t row = static_cast<size_t>(box[rank - 1]) * esize;
  for (;;) {
    int64_t so = 0, doff = 0;
    for (size_t d = 0; d + 1 < rank; ++d) so = so * from[d] + idx[d], doff = doff * to[d] + idx[d];
    std::memcpy(dst + static_cast<size_t>(doff * to[rank - 1]) * esize,
                src + static_cast<size_t>(so * from[rank - 1]) * esize, row);
    size_t d = rank - 1;
    while (d-- > 0 && ++idx[d] == box[d]) idx[d] = 0;
    if (d == SIZE_MAX) return;
  }
}

// `b` (shape `from`, on `dev`) as a new buffer of shape `to`: the shared box copied, the rest 0.
BufferPtr reshape_box(Device* dev, const Buffer* b, const lower::Shape& from,
                      const lower::Shape& to, size_t esize) {
  size_t bytes = esize;
  for (int64_t d : to) bytes *= static_cast<size_t>(d);
  BufferPtr out = dev->allocator->allocate(bytes);
  if (bytes == 0) return out;
  std::vector<char> in(b->nbytes), tmp(bytes);
  if (!in.empty()) download_from(b->device, b, in.data(), in.size());
  copy_box(in.data(), from, tmp.data(), to, esize);
  upload_to(dev, out.get(), tmp.data(), bytes);
  return out;
}

// `symbols`: the values a dynamic plan runs at (empty for a static plan); `pad`: a bucket run.
void run_plan(Device* dev, const Plan& plan, Collected& c, std::span<const int64_t> symbols = {},
              Padding* pad = nullptr) {
  Runtime* rt = dev->runtime;
  auto t0 = Clock::now();
  const size_t n = plan.graph_nodes;
  std::vector<const Buffer*> home(n, nullptr);
  std::vector<BufferPtr> produced(n);
  struct Moved {
    int32_t g;
    Device* dev;
    BufferPtr buf;
  };
  std::vector<Moved> moved;
  size_t collective_bytes = 0;

  for (size_t k = 0; k < c.inputs.size(); ++k) {
    Node* in = c.nodes[c.inputs[k]];
    if (!in->buffer && in->has_scalar) {
      BufferPtr b = dev->allocator->allocate(lt_dtype_size(in->dtype));
      upload_to(dev, b.get(), &in->scalar_bits, lt_dtype_size(in->dtype));
      in->buffer = std::move(b);
      in->materialized.store(true, std::memory_order_release);
    }
    if (!in->buffer)
      fail(LT_STATUS_INTERNAL, "graph input {} ({}) has no buffer", k, node_desc(in));
    home[plan.graph_inputs[k]] = pad && pad->inputs[k] ? pad->inputs[k].get() : in->buffer.get();
  }
  if (pad)  // the sizes, after c's inputs
    for (size_t k = c.inputs.size(); k < plan.graph_inputs.size(); ++k)
      home[plan.graph_inputs[k]] = pad->inputs[k].get();
  auto buffer_on = [&](int32_t g, Device* d) -> lt_plugin_buffer* {
    const Buffer* b = home[g];
    if (b->device == d) return b->handle;
    for (auto& m : moved)
      if (m.g == g && m.dev == d) return m.buf->handle;
    moved.push_back({g, d, transfer(rt, b, d)});
    return moved.back().buf->handle;
  };

  // Collectives: every rank checks that the others are about to run the same graph.
  if (plan.collectives) dist_check_graph(plan, c);
  std::vector<lt_plugin_buffer*> ins, outs;
  for (size_t ri = 0; ri < plan.regions.size(); ++ri) {
    const Region& r = plan.regions[ri];
    auto region_t0 = Clock::now();
    auto region_done = [&] {
      plan.region_ns[ri].fetch_add(
          static_cast<uint64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - region_t0)
                  .count()),
          std::memory_order_relaxed);
    };
    if (!r.dev && plan.host_nodes[r.host_node].collective) {
      // Operand to host memory, the collective over MPI, the result onto the graph's device;
      // both copies count as host<->device bytes when the device's memory is not the host's.
      // Host-addressable buffers (cpu_eager, cpu_jit, tpu_sim) are used in place: MPI reads the
      // operand's memory and writes the result's, no copies.
      const HostNode& h = plan.host_nodes[r.host_node];
      const Buffer* b = home[h.operands[0]];
      const size_t in_bytes = b->nbytes, out_bytes = dist_output_bytes(h, in_bytes);
      produced[h.node] = dev->allocator->allocate(out_bytes);
      home[h.node] = produced[h.node].get();
      const void* in = host_ptr(b);
      void* out = host_ptr(produced[h.node].get());
      thread_local std::vector<unsigned char> in_copy, out_copy;  // reused: no fresh pages
      if (!in) {
        in_copy.resize(in_bytes);
        download_from(b->device, b, in_copy.data(), in_bytes);
        rt->metrics.bytes_from_device.fetch_add(in_bytes, std::memory_order_relaxed);
        in = in_copy.data();
      }
      const bool upload = out == nullptr;
      if (upload) {
        out_copy.resize(out_bytes);
        out = out_copy.data();
      }
      dist_run(h, in, in_bytes, out);
      if (upload) {
        upload_to(dev, produced[h.node].get(), out, out_bytes);
        rt->metrics.bytes_to_device.fetch_add(out_bytes, std::memory_order_relaxed);
      }
      collective_bytes += in_bytes;
      region_done();
      continue;
    }
    if (!r.dev) {
      // Custom op: operands copied to host, the CPU kernel, the result onto the graph's device.
      const HostNode& h = plan.host_nodes[r.host_node];
      std::vector<std::vector<unsigned char>> host(h.operands.size());
      std::vector<lt_custom_op_tensor> args(h.operands.size());
      for (size_t k = 0; k < h.operands.size(); ++k) {
        const Buffer* b = home[h.operands[k]];
        host[k].resize(b->nbytes);
        download_from(b->device, b, host[k].data(), host[k].size());
      }
      for (size_t k = 0; k < h.operands.size(); ++k) {
        const lower::Desc& d = h.operand_descs[k];
        args[k] = {d.dtype, d.shape.size(), d.shape.data(), host[k].data()};
      }
      lt_graph_node gn{h.name.c_str(),
                       h.dtype,
                       h.shape.size(),
                       h.shape.data(),
                       0,
                       nullptr,
                       h.attrs ? h.attrs->view.size() : 0,
                       h.attrs ? h.attrs->view.data() : nullptr};
      int64_t numel = 1;
      for (int64_t d : h.shape) numel *= d;
      std::vector<unsigned char> out(static_cast<size_t>(numel) * lt_dtype_size(h.dtype));
      run_custom_kernel(*h.op, gn, args, out.data());
      produced[h.node] = dev->allocator->allocate(out.size());
      upload_to(dev, produced[h.node].get(), out.data(), out.size());
      home[h.node] = produced[h.node].get();
      region_done();
      continue;
    }
    ins.clear();
    outs.clear();
    for (int32_t g : r.in_globals) ins.push_back(buffer_on(g, r.dev));
    for (size_t k = 0; k < r.out_globals.size(); ++k) {
      int32_t g = r.out_globals[k];
      produced[g] = r.dev->allocator->allocate(
          symbols.empty() ? r.out_bytes[k]
                          : lower::bytes_at(r.out_forms[k], r.out_dtypes[k], symbols));
      home[g] = produced[g].get();
      outs.push_back(produced[g]->handle);
    }
    Plugin* p = r.dev->plugin;
    lt_plugin_execute_args a{};
    a.struct_size = LT_PLUGIN_EXECUTE_ARGS_STRUCT_SIZE;
    a.context = p->ctx;
    a.executable = r.exe;
    a.num_inputs = ins.size();
    a.inputs = ins.data();
    a.num_outputs = outs.size();
    a.outputs = outs.data();
    a.num_symbols = symbols.size();
    a.symbol_values = symbols.empty() ? nullptr : symbols.data();
    region_t0 = Clock::now();  // the execute call only: transfers above are not the region's
    p->call("execute", [&] { return p->api->execute(&a); });
    region_done();
  }
  // Roots take their buffers (on the graph's device); then the graph is cut.
  std::vector<BufferPtr> root_bufs;
  for (int32_t g : plan.graph_outputs) {
    if (produced[g] && produced[g]->device == dev)
      root_bufs.push_back(std::move(produced[g]));
    else
      root_bufs.push_back(transfer(rt, home[g], dev));
  }
  for (size_t k = 0; k < c.outputs.size(); ++k) {
    Node* root = c.nodes[c.outputs[k]];
    if (pad && pad->root_padded[k] != pad->root_valid[k])
      root_bufs[k] = reshape_box(dev, root_bufs[k].get(), pad->root_padded[k], pad->root_valid[k],
                                 lt_dtype_size(root->dtype));
    root->buffer = std::move(root_bufs[k]);
    root->materialized.store(true, std::memory_order_release);
  }
  for (int32_t g : c.outputs) node_drop_operands(c.nodes[g]);
  if (!plan.op_counts.empty()) {
    rt->metrics.fallback_nodes.fetch_add(plan.fallback_nodes, std::memory_order_relaxed);
    rt->metrics.decomposed_nodes.fetch_add(plan.decomposed_nodes, std::memory_order_relaxed);
    std::lock_guard lk(rt->metrics.mu);
    for (const auto& [key, count] : plan.op_counts) rt->metrics.named[key] += count;
  }
  if (plan.background || plan.eager_stand_in) {
    std::lock_guard lk(rt->metrics.mu);
    rt->metrics.named[plan.background ? "background_compile.compiled_steps"
                                      : "background_compile.eager_steps"] += 1;
  }
  if (plan.collectives) {
    std::lock_guard lk(rt->metrics.mu);
    rt->metrics.named["collective.calls"] += static_cast<double>(plan.collectives);
    rt->metrics.named["collective.bytes"] += static_cast<double>(collective_bytes);
  }
  rt->metrics.graphs_executed.fetch_add(1, std::memory_order_relaxed);
  const auto ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  rt->metrics.execute_ns.fetch_add(ns, std::memory_order_relaxed);
  plan.runs.fetch_add(1, std::memory_order_relaxed);
  plan.run_ns.fetch_add(ns, std::memory_order_relaxed);
}

}  // namespace

Plan::~Plan() {
  for (auto& r : regions)
    if (r.exe) {
      Plugin* p = r.dev->plugin;
      p->call_noexcept("executable_destroy", [&] { p->api->executable_destroy(p->ctx, r.exe); });
    }
}

void collect(const std::vector<Node*>& roots, Collected& c) {
  uint64_t epoch = g_epoch.fetch_add(1, std::memory_order_relaxed) + 1;
  struct Frame {
    Node* n;
    uint32_t next;
  };
  std::vector<Frame> stack;
  c.op_begin.push_back(0);
  uint64_t h = hash_mix(0x4c54475241504855ULL);
  uint64_t prog = hash_mix(0x50524f4752414dULL);  // the program: h without the numbers
  for (Node* root : roots) {
    if (root->visit_mark == epoch) {
      c.outputs.push_back(root->visit_index);  // also reached from an earlier root
      continue;
    }
    root->visit_mark = epoch;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      Frame& f = stack.back();
      Node* n = f.n;
      bool input = n->is_leaf() || n->materialized.load(std::memory_order_relaxed) || n->ticket;
      if (!input && f.next < n->num_operands) {
        Node* o = n->operand(f.next++);
        if (o->visit_mark != epoch) {
          o->visit_mark = epoch;
          stack.push_back({o, 0});
        }
        continue;
      }
      int32_t idx = static_cast<int32_t>(c.nodes.size());
      n->visit_index = idx;
      c.nodes.push_back(n);
      c.input_flag.push_back(input ? 1 : 0);
      prog = hash_combine(prog, (static_cast<uint64_t>(input ? kOpInput : n->op) << 32) ^
                                    (static_cast<uint64_t>(n->dtype) << 8) ^ n->shape.size());
      if (input) {
        c.inputs.push_back(idx);
        h = hash_combine(h, input_hash(n));
      } else {
        h = hash_combine(h, n->local_hash);
        for (uint32_t k = 0; k < n->num_operands; ++k) {
          int32_t oi = n->operand(k)->visit_index;
          c.operand_idx.push_back(oi);
          h = hash_combine(h, static_cast<uint64_t>(oi));
          prog = hash_combine(prog, static_cast<uint64_t>(oi));
        }
      }
      c.op_begin.push_back(static_cast<int32_t>(c.operand_idx.size()));
      stack.pop_back();
    }
    c.outputs.push_back(root->visit_index);
  }
  // Duplicate roots are dropped (outputs never alias); order stays deterministic. Linear: a
  // 100,000-wide lt_sync has as many roots.
  std::vector<uint8_t> seen(c.nodes.size(), 0);
  std::vector<int32_t> uniq;
  for (int32_t o : c.outputs)
    if (!seen[static_cast<size_t>(o)]) seen[static_cast<size_t>(o)] = 1, uniq.push_back(o);
  c.outputs = std::move(uniq);
  for (int32_t o : c.outputs) {
    h = hash_combine(h, 0x0u + static_cast<uint64_t>(o) + (1ull << 40));
    prog = hash_combine(prog, 0x0u + static_cast<uint64_t>(o) + (1ull << 40));
  }
  c.key = h;
  c.program = prog;
}

std::shared_ptr<Plan> cache_lookup(Runtime* rt, const Runtime::CacheKey& key, const Collected& c) {
  std::lock_guard ck(rt->cache_mu);
  auto it = rt->cache.find(key);
  if (it == rt->cache.end()) return nullptr;
  const Plan& p = *it->second->second;
  if (p.num_nodes != c.nodes.size() || p.num_inputs != c.inputs.size() || p.outputs != c.outputs)
    return nullptr;
  rt->lru.splice(rt->lru.begin(), rt->lru, it->second);
  return it->second->second;
}

void cache_insert(Runtime* rt, const Runtime::CacheKey& key, std::shared_ptr<Plan> plan) {
  std::vector<std::shared_ptr<Plan>> evicted;  // destroyed outside the cache lock
  std::lock_guard ck(rt->cache_mu);
  auto it = rt->cache.find(key);
  if (it != rt->cache.end()) {
    evicted.push_back(it->second->second);
    rt->lru.erase(it->second);
    rt->cache.erase(it);
  }
  rt->lru.emplace_front(key, std::move(plan));
  rt->cache[key] = rt->lru.begin();
  while (rt->lru.size() > rt->config.cache_capacity) {
    evicted.push_back(rt->lru.back().second);
    rt->cache.erase(rt->lru.back().first);
    rt->lru.pop_back();
  }
}

// Counts a miss and records why (the recompile reason), which it returns.
std::string count_miss(Device* dev, const Collected& c) {
  Runtime* rt = dev->runtime;
  rt->metrics.cache_misses.fetch_add(1, std::memory_order_relaxed);
  std::string why = miss_reason(dev, c);
  rt->log->debug("compile cache miss on {}: {}", dev->name, why);
  std::lock_guard ml(rt->metrics.mu);
  rt->metrics.recompile_reasons.push_back(why);
  while (rt->metrics.recompile_reasons.size() > 16) rt->metrics.recompile_reasons.pop_front();
  return why;
}

// Under bg_mu: every finished background compile leaves `compiling`, its plan into the compile
// cache (failed ones are counted and dropped), so the map never holds more than the pool's
// running and waiting compiles.
void sweep_background_compiles(Runtime* rt) {
  for (auto it = rt->compiling.begin(); it != rt->compiling.end();) {
    if (it->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      ++it;
      continue;
    }
    try {
      cache_insert(rt, it->first, it->second.get());
    } catch (const std::exception& e) {
      rt->log->warn("background compile failed ({}); its graph will compile again if it runs",
                    e.what());
      rt->metrics.add_named("background_compile.failed", 1);
    }
    it = rt->compiling.erase(it);
  }
}

// Config background_compile: the first miss of a graph queues its compile for `dev` on the
// runtime's CompilePool (a fixed number of threads, a bounded queue; compile_pool.h), from a
// copy of the graph, and every execution until it is ready runs on the fallback (cpu_eager, its
// plan cached under the fallback's device); the first execution after that caches and returns
// the compiled plan. A compile that failed is rethrown under the fallback policy "error", else
// logged and replaced by the fallback's plan for good. When the queue is full the graph runs on
// the fallback without a compile (background_compile.queue_full) and its next miss tries again.
// Finished compiles never pile up: each new miss first moves every finished one into the
// compile cache (bounded by cache_capacity) or, failed, drops it (issue #29).
std::shared_ptr<Plan> background_compile(Device* dev, const Runtime::CacheKey& key,
                                         const Collected& c) {
  Runtime* rt = dev->runtime;
  std::shared_future<std::shared_ptr<Plan>> job;
  {
    std::lock_guard lk(rt->bg_mu);
    auto it = rt->compiling.find(key);
    if (it == rt->compiling.end()) {
      sweep_background_compiles(rt);
      std::string why = count_miss(dev, c);
      GraphBuf full;
      full_graph(c, full);
      auto graph = std::make_shared<lower::OwnedGraph>(lower::copy_graph(full.g));
      auto task = std::make_shared<std::packaged_task<std::shared_ptr<Plan>()>>(
          [dev, graph, src = PlanSource(c, why + " (background)")] {
            auto p = compile_plan(dev, graph->view(), src);
            p->background = true;
            return p;
          });
      if (!rt->compile_pool) {
        const size_t n = CompilePool::default_threads();
        rt->compile_pool = std::make_unique<CompilePool>(n, CompilePool::default_capacity(n));
      }
      if (rt->compile_pool->try_submit([task] { (*task)(); })) {
        job = task->get_future().share();
        rt->compiling.emplace(key, job);
        rt->metrics.add_named("background_compile.started", 1);
      } else {
        rt->metrics.add_named("background_compile.queue_full", 1);
      }
    } else {
      job = it->second;
    }
  }
  Device* fb = rt->fallback->devices.front();
  if (job.valid() && job.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    {
      std::lock_guard lk(rt->bg_mu);
      rt->compiling.erase(key);
    }
    std::shared_ptr<Plan> plan;
    try {
      plan = job.get();
    } catch (const Error& e) {
      if (rt->policy == FallbackPolicy::kError) throw;
      rt->log->warn("background compile on '{}' failed ({}); the graph keeps running on '{}'",
                    dev->plugin->name, e.message(), fb->plugin->name);
      std::lock_guard ml(rt->metrics.mu);
      rt->metrics.named["background_compile.failed"] += 1;
    }
    if (!plan) {
      plan = compile_plan(fb, c, "the background compile on " + dev->name + " failed");
      plan->eager_stand_in = true;
    }
    cache_insert(rt, key, plan);
    return plan;
  }
  Runtime::CacheKey eager_key{fb, fb->plugin->options_hash, c.key};
  std::shared_ptr<Plan> eager = cache_lookup(rt, eager_key, c);
  if (!eager) {
    eager = compile_plan(fb, c, "stand-in while " + dev->name + " compiles in the background");
    eager->eager_stand_in = true;
    cache_insert(rt, eager_key, eager);
  }
  return eager;
}

namespace {

// ---- dynamic shapes (docs/dynamic-shapes.md) ----------------------------------------------

constexpr size_t kMaxSeenNodes = 100000;

void add_metric(Runtime* rt, const char* name) {
  std::lock_guard ml(rt->metrics.mu);
  rt->metrics.named[name] += 1;
}

// Why a dynamic attempt failed. A failure that says nothing about the program's shapes (out of
// memory, I/O, a plugin or internal error: issue #29, a corrupt cache entry) is never taken
// silently for "stays static": warned and counted (dynamic.compile_errors).
std::string dynamic_failure(Runtime* rt, const Error& e) {
  switch (e.code()) {
    case LT_STATUS_OUT_OF_MEMORY:
    case LT_STATUS_IO_ERROR:
    case LT_STATUS_PLUGIN_ERROR:
    case LT_STATUS_INTERNAL:
      rt->log->warn("dynamic-shape compile failed: {}", e.message());
      add_metric(rt, "dynamic.compile_errors");
      break;
    default:
      break;
  }
  return e.message();
}

// The bucket of each size: the first configured bucket at least as large, else the next power
// of two.
std::vector<int64_t> bucket_of(const Config& cfg, const std::vector<int64_t>& values) {
  std::vector<int64_t> out;
  for (int64_t v : values) {
    auto it = std::lower_bound(cfg.dynamic_buckets.begin(), cfg.dynamic_buckets.end(), v);
    int64_t b = 1;
    while (b < v) b <<= 1;
    out.push_back(it != cfg.dynamic_buckets.end() ? *it : b);
  }
  return out;
}

// How a collected graph runs, decided under the device's exec mutex (so that a queued run,
// async_execution, never touches the compile cache or a dynamic graph): a plan, at its sizes,
// or padded to its bucket with the padded shapes of its inputs and roots.
struct Run {
  std::shared_ptr<Plan> plan;
  std::vector<int64_t> symbols;  // a dynamic plan's sizes
  bool padded = false;           // a bucket plan: the sizes are inputs, shapes below
  std::vector<lower::Shape> in_padded, root_padded;
};

// The plan of c's bucket (compiled on first use) for bucketed dynamic plan `entry`.
Run prepare_bucketed(Device* dev, Plan& entry, const Collected& c,
                     const std::vector<int64_t>& values) {
  Runtime* rt = dev->runtime;
  const std::vector<int64_t> bucket = bucket_of(rt->config, values);
  const lt_graph& dg = entry.dyn_graph->view();
  std::shared_ptr<Plan>& plan = entry.buckets[bucket];
  if (!plan) {
    lower::OwnedGraph at = lower::instantiate(dg, bucket), padded;
    std::string why;
    if (!lower::mask_padding(at.view(), &padded, &why))
      fail(LT_STATUS_INTERNAL, "padding to bucket {} failed: {}",
           dims_str(bucket.data(), bucket.size()), why);
    rt->metrics.cache_misses.fetch_add(1, std::memory_order_relaxed);
    plan = compile_plan(
        dev, padded.view(),
        PlanSource(padded.view(), c,
                   "sizes padded to bucket " + dims_str(bucket.data(), bucket.size())));
    add_metric(rt, "dynamic.bucket_compiles");
  }
  Run run{plan, values, true, {}, {}};
  auto padded_shape = [&](int32_t node) {
    lower::Shape out;
    for (const lower::DimForm& f : lower::shape_forms(dg, static_cast<size_t>(node)))
      out.push_back(f.at(bucket));
    return out;
  };
  for (int32_t k : c.inputs) run.in_padded.push_back(padded_shape(k));
  for (int32_t o : c.outputs) run.root_padded.push_back(padded_shape(o));
  return run;
}

Run prepare_run(Device* dev, const std::shared_ptr<Plan>& plan, const Collected& c) {
  if (plan->dyn_base && plan->dyn_base->bucketed)
    return prepare_bucketed(dev, *plan->dyn_base, c, plan->symbols);
  if (plan->dyn_base) return Run{plan->dyn_base, plan->symbols, false, {}, {}};
  return Run{plan, {}, false, {}, {}};
}

// Runs c as `run` says: for a bucket, inputs copied into padded buffers, the sizes as inputs,
// roots cut back to their own shapes.
void execute_run(Device* dev, const Run& run, Collected& c) {
  if (!run.padded) return run_plan(dev, *run.plan, c, run.symbols);
  Padding pad;
  pad.inputs.resize(run.plan->graph_inputs.size());
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    Node* in = c.nodes[c.inputs[k]];
    lower::Shape have(in->shape.begin(), in->shape.end());
    if (run.in_padded[k] != have && in->buffer)
      pad.inputs[k] =
          reshape_box(dev, in->buffer.get(), have, run.in_padded[k], lt_dtype_size(in->dtype));
  }
  for (size_t k = c.inputs.size(); k < pad.inputs.size(); ++k) {
    const float size = static_cast<float>(run.symbols[k - c.inputs.size()]);
    pad.inputs[k] = dev->allocator->allocate(sizeof(float));
    upload_to(dev, pad.inputs[k].get(), &size, sizeof(float));
  }
  pad.root_padded = run.root_padded;
  for (int32_t o : c.outputs)
    pad.root_valid.emplace_back(c.nodes[o]->shape.begin(), c.nodes[o]->shape.end());
  add_metric(dev->runtime, "dynamic.padded_runs");
  run_plan(dev, *run.plan, c, {}, &pad);
}

// The cached graph `c` is at symbol values `values` of dynamic plan `base`.
std::shared_ptr<Plan> dynamic_instance(const std::shared_ptr<Plan>& base, const Collected& c,
                                       std::vector<int64_t> values) {
  auto p = std::make_shared<Plan>();
  p->num_nodes = c.nodes.size();
  p->num_inputs = c.inputs.size();
  p->outputs = c.outputs;
  p->key = c.key;
  p->device = base->device;
  p->dyn_base = base;
  p->label = base->label + " (dynamic, at " + dims_str(values.data(), values.size()) + ")";
  p->symbols = std::move(values);
  return p;
}

// A dynamic plan of c's program that c matches, as an instance at c's values; else null.
std::shared_ptr<Plan> dynamic_lookup(Device* dev, const Collected& c, const lt_graph& full) {
  Runtime* rt = dev->runtime;
  std::vector<std::shared_ptr<Plan>> candidates;
  {
    std::lock_guard ck(rt->cache_mu);
    for (auto& [key, plan] : rt->dynamic_plans)
      if (key.device == dev && key.options_hash == dev->plugin->options_hash &&
          key.graph_key == c.program)
        candidates.push_back(plan);
  }
  std::vector<int64_t> values;
  for (auto& cand : candidates)
    if (lower::match(cand->dyn_graph->view(), full, &values))
      return dynamic_instance(cand, c, values);
  return nullptr;
}

// Compiles c's program for every value of the symbols `generalize` found (c is at `values`):
// the plan at base values (each at least 2, so no dim is 1 by accident), after dry runs with
// each symbol moved by one and all at other values. Null (and why) when the program is not the
// same graph at every value or a backend compiles static shapes only.
std::shared_ptr<Plan> compile_dynamic(Device* dev, const Collected& c,
                                      std::shared_ptr<lower::OwnedGraph> dyn,
                                      const std::vector<int64_t>& values, const std::string& why,
                                      std::string* not_why) {
  const lt_graph& dg = dyn->view();
  std::vector<int64_t> base = values;
  for (int64_t& v : base) v = std::max<int64_t>(v, 2);
  try {
    auto at = [&](const std::vector<int64_t>& vals) {
      lower::OwnedGraph g = lower::instantiate(dg, vals);
      lower::validate(g.view());  // every op's shape rule holds at these values too
      return g;
    };
    std::vector<DynCompile> varied(base.size());
    std::vector<int64_t> moved;
    for (size_t k = 0; k < base.size(); ++k) {
      std::vector<int64_t> vals = base;
      moved.push_back(vals[k] += 1);
      lower::OwnedGraph g = at(vals);
      varied[k].dry = true;
      compile_plan(dev, g.view(), PlanSource(c, why), &varied[k]);
    }
    DynCompile check;
    check.dry = true;
    for (int64_t v : base) check.check_values.push_back(2 * v + 5);
    lower::OwnedGraph g3 = at(check.check_values);
    compile_plan(dev, g3.view(), PlanSource(c, why), &check);
    DynCompile real;
    real.base = base;
    real.moved = moved;
    real.varied = &varied;
    real.check = &check;
    real.check_values = check.check_values;
    lower::OwnedGraph gb = at(base);
    std::shared_ptr<Plan> plan = compile_plan(dev, gb.view(), PlanSource(c, why), &real);
    if (!real.dynamic) {
      *not_why = real.why;
      return base == values ? plan : nullptr;  // still the right static plan for c
    }
    plan->dyn_graph = std::move(dyn);
    return plan;
  } catch (const NotDynamic& e) {
    *not_why = e.what();
  } catch (const Error& e) {
    *not_why = dynamic_failure(dev->runtime, e);
  } catch (const lower::Error& e) {  // an instance that breaks an op's shape rule
    *not_why = e.what();
  }
  return nullptr;
}

// After a miss: c's program was compiled before at other sizes. Generalises the two graphs and
// compiles a dynamic plan; null when the program stays static (remembered, with why).
std::shared_ptr<Plan> try_dynamic(Device* dev, const Collected& c, const lt_graph& full,
                                  const std::string& why, bool* static_plan) {
  Runtime* rt = dev->runtime;
  *static_plan = false;
  auto& seen = dev->seen_graphs;
  auto it = std::find_if(seen.begin(), seen.end(), [&](auto& e) { return e.first == c.program; });
  if (it == seen.end()) return nullptr;
  std::shared_ptr<lower::OwnedGraph> old = it->second;
  seen.erase(it);
  std::vector<int64_t> values;
  std::vector<lt_dim_expr> exprs;
  std::string not_why;
  std::shared_ptr<Plan> plan;
  std::shared_ptr<lower::OwnedGraph> dyn;
  // Marks (lt_tensor_mark_dynamic): a changed input dim marked static, or under "marked" one
  // not marked dynamic, keeps the program static.
  const lt_graph& seen_g = old->view();
  for (size_t k = 0; k < c.inputs.size() && not_why.empty(); ++k) {
    const Node* in = c.nodes[c.inputs[k]];
    const lt_graph_node& was = seen_g.nodes[c.inputs[k]];
    for (size_t d = 0; d < in->shape.size() && d < was.rank && not_why.empty(); ++d) {
      if (in->shape[d] == was.shape[d]) continue;
      const uint32_t bit = d < 32 ? 1u << d : 0u;
      if (in->static_dims & bit)
        not_why = fmt::format("input {} dim {} is marked static", k, d);
      else if (rt->config.dynamic_shapes == "marked" && !(in->dynamic_dims & bit))
        not_why =
            fmt::format("input {} dim {} is not marked dynamic (dynamic_shapes = marked)", k, d);
    }
  }
  if (not_why.empty() && lower::generalize(seen_g, full, &values, &exprs, &not_why)) {
    dyn = std::make_shared<lower::OwnedGraph>(lower::copy_graph(full));
    dyn->set_dynamic(values, std::move(exprs));
    plan = compile_dynamic(dev, c, dyn, values, why, &not_why);
  }
  auto enter = [&](const std::shared_ptr<Plan>& entry) {
    Runtime::CacheKey key{dev, dev->plugin->options_hash, c.program};
    std::lock_guard ck(rt->cache_mu);
    rt->dynamic_plans.emplace_front(key, entry);
    if (rt->dynamic_plans.size() > 64) rt->dynamic_plans.pop_back();
  };
  if (plan && plan->dyn_graph) {
    enter(plan);
    rt->log->info("{}: graph '{}' is now dynamic in {} size(s)", dev->name, plan->label,
                  plan->dyn_graph->view().num_symbols);
    add_metric(rt, "dynamic.compiles");
    return dynamic_instance(plan, c, values);
  }
  // Static shapes only: pad to buckets if masks make the padded run exact.
  std::string pad_why;
  if (dyn) {
    lower::OwnedGraph padded;
    try {
      lower::OwnedGraph at = lower::instantiate(dyn->view(), bucket_of(rt->config, values));
      lower::validate(at.view());  // every op's shape rule holds at the bucket sizes
      if (lower::mask_padding(at.view(), &padded, &pad_why)) {
        auto entry = std::make_shared<Plan>();
        entry->dyn_graph = dyn;
        entry->bucketed = true;
        entry->device = dev->name;
        entry->key = c.key;
        entry->label = graph_label(c) + " (padded to buckets)";
        enter(entry);
        rt->log->info("{}: graph '{}' runs padded to buckets ({})", dev->name, entry->label,
                      not_why);
        add_metric(rt, "dynamic.bucketed_programs");
        *static_plan = plan != nullptr;
        return plan ? plan : dynamic_instance(entry, c, values);
      }
    } catch (const Error& e) {
      pad_why = dynamic_failure(rt, e);
    } catch (const lower::Error& e) {
      pad_why = e.what();
    }
    not_why += "; padding: " + pad_why;
  }
  rt->log->info("{}: graph '{}' stays static: {}", dev->name, graph_label(c), not_why);
  dev->static_programs.emplace_front(c.program, not_why);
  if (dev->static_programs.size() > 64) dev->static_programs.pop_back();
  add_metric(rt, "dynamic.static_programs");
  *static_plan = plan != nullptr;
  return plan;
}

void remember_graph(Device* dev, const Collected& c, const lt_graph& full) {
  if (c.nodes.size() > kMaxSeenNodes) return;
  for (auto& [prog, why] : dev->static_programs)
    if (prog == c.program) return;
  auto& seen = dev->seen_graphs;
  std::erase_if(seen, [&](auto& e) { return e.first == c.program; });
  seen.emplace_front(c.program, std::make_shared<lower::OwnedGraph>(lower::copy_graph(full)));
  if (seen.size() > 8) seen.pop_back();
}

}  // namespace

// Config async_execution: queues the run of `plan` on the device's worker. The roots take the
// ticket now (under exec_mu), so later graphs read them as inputs and run after this one; the
// job holds the inputs and roots, so a tensor released meanwhile is not freed under it.
static TicketPtr enqueue(Device* dev, Run run, Collected&& c) {
  ExecQueue::Job job;
  job.ticket = std::make_shared<Ticket>();
  job.ticket->device = dev;
  job.ticket->label = run.plan->label;
  for (int32_t i : c.inputs) {
    Node* in = c.nodes[i];
    job.keep.push_back(NodeRef::share(in));
    const TicketPtr& t = in->ticket;
    if (t && (!t->done() || t->failed()) &&
        std::find(job.after.begin(), job.after.end(), t) == job.after.end())
      job.after.push_back(t);
  }
  for (int32_t o : c.outputs) {
    job.keep.push_back(NodeRef::share(c.nodes[o]));
    c.nodes[o]->ticket = job.ticket;
  }
  TicketPtr ticket = job.ticket;
  job.run = [dev, run = std::move(run), c = std::move(c)]() mutable { execute_run(dev, run, c); };
  dev->queue->submit(std::move(job));
  return ticket;
}

// Collects the pending `roots` into one graph, finds or compiles its plan and runs it, or with
// async_execution queues it (its ticket also goes to `*fresh`). Returns the tickets of the
// roots' queued graphs.
static std::vector<TicketPtr> launch(Device* dev, std::vector<NodeRef>& roots,
                                     TicketPtr* fresh = nullptr) {
  if (in_callback()) refuse_in_callback("running a graph on '" + dev->name + "'");  // async.h
  Runtime* rt = dev->runtime;
  std::lock_guard lk(dev->exec_mu);
  std::vector<Node*> pending;
  std::vector<TicketPtr> queued;
  for (auto& r : roots)
    if (!r->is_leaf() && !r->materialized.load(std::memory_order_acquire)) {
      if (!r->ticket)
        pending.push_back(r.get());
      else if (queued.empty() || queued.back() != r->ticket)
        queued.push_back(r->ticket);
    }
  if (pending.empty()) return queued;
  Collected c;
  collect(pending, c);

  Runtime::CacheKey key{dev, dev->plugin->options_hash, c.key};
  std::shared_ptr<Plan> plan = cache_lookup(rt, key, c);
  const bool dynamic = rt->config.dynamic_shapes != "off";
  if (plan) {
    rt->metrics.cache_hits.fetch_add(1, std::memory_order_relaxed);
  } else if (rt->config.background_compile && rt->fallback && rt->fallback != dev->plugin) {
    plan = background_compile(dev, key, c);
  } else {
    GraphBuf full;
    if (dynamic) {
      full_graph(c, full);
      plan = dynamic_lookup(dev, c, full.g);
      if (plan) {
        rt->metrics.cache_hits.fetch_add(1, std::memory_order_relaxed);
        add_metric(rt, "dynamic.hits");
        cache_insert(rt, key, plan);
      }
    }
    if (!plan) {
      std::string why = count_miss(dev, c);
      bool static_plan = false;
      if (dynamic) plan = try_dynamic(dev, c, full.g, why, &static_plan);
      if (!plan) plan = compile_plan(dev, c, why);
      if (dynamic && !plan->dyn_base) remember_graph(dev, c, full.g);
      cache_insert(rt, key, plan);
    }
  }
  Run run = prepare_run(dev, plan, c);
  if (dev->queue && !run.plan->collectives) {
    queued.push_back(enqueue(dev, std::move(run), std::move(c)));
    if (fresh) *fresh = queued.back();
    return queued;
  }
  if (dev->queue) {  // collectives call MPI: on the calling thread, after the queue
    dev->queue->drain();
    for (int32_t i : c.inputs)
      if (const TicketPtr& t = c.nodes[i]->ticket) t->rethrow();
  }
  execute_run(dev, run, c);
  return queued;
}

void materialize(Device* dev, std::vector<NodeRef>& roots) {
  for (const TicketPtr& t : launch(dev, roots)) wait_ticket(dev, t);
}

void sync_device(Device* dev) {
  std::vector<NodeRef> roots;
  {
    std::lock_guard lk(dev->reg_mu);
    for (Tensor* t = dev->reg_head; t;) {
      Tensor* next = t->next;
      if (t->node->materialized.load(std::memory_order_acquire)) {
        if (t->prev)
          t->prev->next = t->next;
        else
          dev->reg_head = t->next;
        if (t->next)
          t->next->prev = t->prev;
        else
          dev->reg_tail = t->prev;
        t->prev = t->next = nullptr;
        t->registered.store(false, std::memory_order_release);
      } else {
        roots.push_back(NodeRef::share(t->node));
      }
      t = next;
    }
  }
  if (!dev->queue) return materialize(dev, roots);
  // The step is queued first, so the worker goes on to it without waiting for this thread;
  // then the graphs queued before it are waited for (the host traces the next step while this
  // one runs, never further ahead) and the first failure among them no read reported is thrown:
  // a step's failure surfaces at the latest at the next lt_sync (as PyTorch/XLA's device locks
  // do). With nothing new to queue, lt_sync waits for everything queued.
  TicketPtr fresh;
  launch(dev, roots, &fresh);
  if (fresh) {
    dev->queue->wait_through(fresh->seq - 1);
    dev->queue->raise_unreported(fresh->seq - 1);
  } else {
    dev->queue->drain();
    dev->queue->raise_unreported();
  }
}

void drain_queues(Runtime* rt) noexcept {
  for (auto& d : rt->devices)
    if (d->queue) d->queue->drain();
}

void upload_to(Device* dev, Buffer* buf, const void* data, size_t nbytes) {
  if (!nbytes) return;
  lt_plugin_buffer_args a{};
  a.struct_size = LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE;
  a.context = dev->plugin->ctx;
  a.device = dev->index;
  a.nbytes = nbytes;
  a.src = data;
  a.buffer = buf->handle;
  dev->plugin->call("buffer_upload", [&] { return dev->plugin->api->buffer_upload(&a); });
}

void download_from(Device* dev, const Buffer* buf, void* data, size_t nbytes) {
  if (!nbytes) return;
  lt_plugin_buffer_args a{};
  a.struct_size = LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE;
  a.context = dev->plugin->ctx;
  a.device = dev->index;
  a.nbytes = nbytes;
  a.dst = data;
  a.buffer = buf->handle;
  dev->plugin->call("buffer_download", [&] { return dev->plugin->api->buffer_download(&a); });
}

bool example_supported(Runtime* rt, Device* dev, uint16_t op) {
  (void)rt;
  if (op == kOpInput || op >= kNumBuiltinOps) return false;  // custom ops have no example
  lower::OwnedGraph g = lower::example_graph(static_cast<OpId>(op));
  const lt_graph& v = g.view();
  std::lock_guard lk(dev->exec_mu);
  return ask_supports(dev, &v, static_cast<size_t>(v.outputs[0]));
}

bool example_decomposes(Runtime* rt, Device* dev, uint16_t op) {
  (void)rt;
  if (op == kOpInput || op >= kNumBuiltinOps || !lower::op_info(static_cast<OpId>(op)).composite)
    return false;
  lower::OwnedGraph g = lower::example_graph(static_cast<OpId>(op)), out;
  lower::DecomposeReport report;
  std::lock_guard lk(dev->exec_mu);
  auto supported = [&](const lt_graph& gr, size_t i) { return ask_supports(dev, &gr, i); };
  if (!lower::decompose(g.view(), supported, &out, &report)) return false;
  const lt_graph& v = out.view();
  for (size_t i = 0; i < v.num_nodes; ++i)
    if (std::strcmp(v.nodes[i].op, "input") != 0 && report.supported[i] != 1) return false;
  return true;
}

}  // namespace lt
