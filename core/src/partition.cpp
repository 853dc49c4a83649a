// partition.cpp — decompose what the target lacks, place every node, cut regions (partition.h).
#include "partition.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "error.h"
#include "lazytensor/lower/decompose.hpp"
#include "lazytensor/lower/ops.hpp"

namespace lt {
namespace {

bool is_input_node(const lt_graph_node& n) {
  return std::strcmp(n.op, "input") == 0;
}

bool is_collective(const lt_graph_node& n) {
  const lower::OpInfo* op = lower::find_op(n.op);
  return op && op->category == lower::Category::kCollective;
}

bool is_storage(lt_dtype d) {
  return d == LT_DTYPE_BF16 || d == LT_DTYPE_F16;
}

// True if the decompose pass could help a node the backend declined: a built-in composite, or
// an elementwise op whose operands broadcast, or arithmetic on bf16/f16 (computed in f32).
bool rewritable(const lt_graph& g, size_t i) {
  const lt_graph_node& n = g.nodes[i];
  const lower::OpInfo* op = lower::find_op(n.op);
  if (!op) return false;
  if (op->composite) return true;
  if (op->id != kOpCast) {
    if (is_storage(n.dtype)) return true;
    for (size_t k = 0; k < n.num_operands; ++k)
      if (is_storage(g.nodes[n.operands[k]].dtype)) return true;
  }
  if (op->category != lower::Category::kElementwise) return false;
  for (size_t k = 0; k < n.num_operands; ++k) {
    const lt_graph_node& o = g.nodes[n.operands[k]];
    if (o.rank != n.rank || !std::equal(o.shape, o.shape + o.rank, n.shape)) return true;
  }
  return false;
}

// Step 1: the target's answers, and the decomposition of what it lacks (composites become
// primitives, implicit broadcasts explicit, 16-bit arithmetic f32) before anything is sent
// to the fallback. Returns the answers for the partitioned graph (-1: not asked yet).
std::vector<int8_t> decompose_step(const lt_graph& g, const Placement& pl, Partition& part) {
  std::vector<int8_t> answer(g.num_nodes, -1);
  bool rewrite = false;
  for (size_t i = 0; i < g.num_nodes; ++i) {
    if (is_input_node(g.nodes[i])) continue;
    answer[i] = pl.supports(g, i) ? 1 : 0;
    rewrite = rewrite || (!answer[i] && rewritable(g, i));
  }
  if (!rewrite) return answer;
  lower::DecomposeReport report;
  lower::Supported fallback;
  if (pl.fallback_of) fallback = pl.fallback_of;
  if (!lower::decompose(g, pl.supports, &part.lowered, &report, fallback)) return answer;
  part.decomposed = true;
  part.origin = std::move(report.origin);
  part.source = std::move(report.source);
  part.decomposed_nodes = report.decomposed.size();
  for (const std::string& op : report.decomposed) add_count(part.op_counts, "decomposed." + op);
  for (const std::string& op : report.widened) {
    add_count(part.op_counts, "widened." + op);
    add_count(part.op_counts, "widened_nodes");
  }
  return std::move(report.supported);
}

// Step 2: the site of one node the target declined.
Site place_declined(Partition& part, const lt_graph& g, size_t i, const Placement& pl) {
  const char* op = g.nodes[i].op;
  if (is_collective(g.nodes[i])) {  // declined by the backend: the core runs it over MPI
    ++part.collectives;
    return Site::kHost;
  }
  const bool custom = pl.is_custom && pl.is_custom(op);
  if (custom && !(pl.fallback_of && pl.fallback_of(g, i))) {
    if (pl.policy == FallbackPolicy::kError)
      fail(LT_STATUS_FALLBACK_REFUSED,
           "fallback refused: custom op '{}' ({}) is not supported by backend '{}' and the "
           "fallback policy is 'error'",
           op, part.describe(i), pl.target);
    add_count(part.op_counts, std::string("fallback.") + op);
    ++part.fallback_nodes;
    return Site::kHost;
  }
  if (!pl.fallback_of)
    fail(LT_STATUS_UNSUPPORTED, "op '{}' ({}) is not supported by backend '{}'{}", op,
         part.describe(i), pl.target,
         pl.fallback.empty() ? " and no fallback backend (cpu_eager) is loaded" : "");
  if (pl.policy == FallbackPolicy::kError)
    fail(LT_STATUS_FALLBACK_REFUSED,
         "fallback refused: op '{}' ({}) is not supported by backend '{}' and the fallback "
         "policy is 'error'",
         op, part.describe(i), pl.target);
  if (!pl.fallback_of(g, i))
    fail(LT_STATUS_UNSUPPORTED,
         "op '{}' ({}) is supported neither by '{}' nor by the fallback '{}'", op, part.describe(i),
         pl.target, pl.fallback);
  if (pl.policy == FallbackPolicy::kWarn && pl.warn)
    pl.warn(op, part.describe(i), part.decomposed ? -1 : static_cast<int32_t>(i));
  add_count(part.op_counts, std::string("fallback.") + op);
  ++part.fallback_nodes;
  return Site::kFallback;
}

// Step 3: regions in topological order; a node joins the last region of its site when none of
// its operands lives in a later region of another site (keeps regions acyclic). A host node
// is a region of its own.
void cut_regions(Partition& part, const lt_graph& g, size_t max_region_nodes) {
  const size_t n = g.num_nodes;
  part.region_of.assign(n, -1);
  RegionCutter cutter(max_region_nodes);
  for (size_t i = 0; i < n; ++i) {
    const Site s = part.site[i];
    if (s == Site::kInput) continue;
    int32_t pick = -1;
    if (s != Site::kHost) {
      int32_t need = 0;
      const lt_graph_node& node = g.nodes[i];
      for (size_t k = 0; k < node.num_operands; ++k) {
        const int32_t ro = part.region_of[node.operands[k]];
        if (ro >= 0) need = std::max(need, part.regions[ro].site == s ? ro : ro + 1);
      }
      for (int32_t r = static_cast<int32_t>(part.regions.size()) - 1; r >= need; --r)
        if (part.regions[r].site == s) {
          pick = r;
          break;
        }
      if (pick >= 0 && !cutter.admits(part.regions[pick].members.size())) pick = -1;  // full
    }
    if (pick < 0) {
      pick = static_cast<int32_t>(part.regions.size());
      part.regions.push_back({s, {}});
    }
    part.region_of[i] = pick;
    part.regions[pick].members.push_back(static_cast<int32_t>(i));
  }
  part.cuts = cutter.cuts();
  part.used_outside.assign(n, 0);
  for (size_t k = 0; k < g.num_outputs; ++k) part.used_outside[g.outputs[k]] = 1;
  for (size_t i = 0; i < n; ++i) {
    const lt_graph_node& node = g.nodes[i];
    for (size_t k = 0; k < node.num_operands; ++k) {
      const int32_t o = node.operands[k];
      if (part.region_of[o] >= 0 && part.region_of[o] != part.region_of[i])
        part.used_outside[o] = 1;
    }
  }
}

}  // namespace

std::string Partition::describe(size_t node) {
  const lt_graph& g = graph();
  std::string desc = lower::desc_str(lower::DescRef(g.nodes[node]));
  if (node < origin.size() && origin[node] >= 0)
    desc += fmt::format(", from the decomposition of '{}'",
                        lower::op_info(static_cast<OpId>(origin[node])).name);
  return desc;
}

Partition partition(const lt_graph& input, const Placement& pl) {
  Partition part;
  part.input = &input;
  std::vector<int8_t> answer = decompose_step(input, pl, part);
  const lt_graph& g = part.graph();
  part.site.assign(g.num_nodes, Site::kInput);
  for (size_t i = 0; i < g.num_nodes; ++i) {
    if (is_input_node(g.nodes[i])) continue;
    if (answer[i] < 0) answer[i] = pl.supports(g, i) ? 1 : 0;
    part.site[i] = answer[i] ? Site::kTarget : place_declined(part, g, i, pl);
  }
  cut_regions(part, g, pl.max_region_nodes);
  return part;
}

void add_count(std::vector<std::pair<std::string, uint64_t>>& counts, std::string key) {
  for (auto& [k, v] : counts)
    if (k == key) return void(++v);
  counts.emplace_back(std::move(key), 1);
}

void region_graph(Partition& part, size_t r, RegionGraph& out, LocalIndex& local) {
  const lt_graph& g = part.graph();
  const std::vector<int32_t>& members = part.regions[r].members;
  const auto ri = static_cast<int32_t>(r);
  GraphBuf& gb = out.buf;
  for (int32_t gi : members) {
    const lt_graph_node& n = g.nodes[gi];
    for (size_t k = 0; k < n.num_operands; ++k) {
      const int32_t o = n.operands[k];
      if (part.region_of[o] != ri && local[o] < 0) {
        local.set(o, static_cast<int32_t>(gb.nodes.size()));
        out.in_globals.push_back(o);
        gb.add(g.nodes[o], true, nullptr, 0);
      }
    }
  }
  std::vector<int32_t> ops;
  for (int32_t gi : members) {
    const lt_graph_node& n = g.nodes[gi];
    ops.clear();
    for (size_t k = 0; k < n.num_operands; ++k) ops.push_back(local[n.operands[k]]);
    local.set(gi, static_cast<int32_t>(gb.nodes.size()));
    gb.add(n, false, ops.data(), ops.size());
    if (part.used_outside[gi]) {
      out.out_globals.push_back(gi);
      out.out_bytes.push_back(static_cast<size_t>(lower::DescRef(n).numel()) *
                              lt_dtype_size(n.dtype));
      gb.outputs.push_back(local[gi]);
    }
  }
  uint64_t h = g.hash;
  for (int32_t gi : members) h = hash_combine(h, static_cast<uint64_t>(gi));
  gb.finish(h);
  local.clear();
}

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

}  // namespace lt
