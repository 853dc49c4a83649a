// fusion.cpp — the greedy fusion planner behind lt::fusion::plan (see fusion.hpp).
#include "lazytensor/lower/fusion.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unordered_set>

namespace lt::fusion {

namespace {

using lower::shape_of;

constexpr std::string_view kElementwiseOps[] = {
    "neg",  "abs",     "exp",     "log",   "sqrt", "rsqrt",  "tanh",        "sigmoid", "relu",
    "gelu", "sin",     "cos",     "floor", "not",  "add",    "sub",         "mul",     "div",
    "pow",  "maximum", "minimum", "eq",    "ne",   "lt",     "le",          "gt",      "ge",
    "and",  "or",      "where",   "cast",  "full", "arange", "broadcast_to"};
constexpr std::string_view kReductionOps[] = {"sum", "mean", "max", "min"};

bool same_shape(const lt_graph_node& n, const std::vector<int64_t>& s) {
  return n.rank == s.size() && std::equal(s.begin(), s.end(), n.shape);
}

std::vector<int64_t> reduction_axes(const lt_graph_node& n) {
  const lt_attr* a = find_attr(n, "axes");
  if (!a || a->kind != LT_ATTR_INTS) return {};
  std::vector<int64_t> axes(a->ints, a->ints + a->ints_len);
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

bool trailing(const std::vector<int64_t>& axes, size_t rank) {
  if (axes.empty()) return false;
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != static_cast<int64_t>(rank - axes.size() + i)) return false;
  return true;
}

// Working state of one group while planning; merged groups point at their survivor.
struct Work {
  GroupKind kind = GroupKind::kElementwise;
  std::vector<int32_t> nodes;
  std::vector<int64_t> domain;
  std::vector<int64_t> axes;
  int32_t anchor = -1;
  int32_t parent = -1;  // union-find: -1 = alive root
};

class Planner {
 public:
  Planner(const lt_graph& g, const Options& o) : g_(g), opt_(o) {}

  Plan run() {
    validate();
    build_users();
    group_of_.assign(g_.num_nodes, -1);
    for (size_t i = 0; i < g_.num_nodes; ++i) place(static_cast<int32_t>(i));
    return finish();
  }

 private:
  void validate() {
    if (g_.num_nodes > 0 && !g_.nodes) throw std::invalid_argument("fusion: graph has no nodes");
    for (size_t i = 0; i < g_.num_nodes; ++i) {
      const lt_graph_node& n = g_.nodes[i];
      if (!n.op) throw std::invalid_argument("fusion: node " + std::to_string(i) + " has no op");
      if (n.rank > 0 && !n.shape)
        throw std::invalid_argument("fusion: node " + std::to_string(i) + " has no shape");
      for (size_t k = 0; k < n.num_operands; ++k) {
        int32_t o = n.operands[k];
        if (o < 0 || static_cast<size_t>(o) >= i)
          throw std::invalid_argument("fusion: node " + std::to_string(i) + " (" + n.op +
                                      ") has operand " + std::to_string(o) +
                                      " that does not precede it");
      }
    }
    for (size_t k = 0; k < g_.num_outputs; ++k)
      if (g_.outputs[k] < 0 || static_cast<size_t>(g_.outputs[k]) >= g_.num_nodes)
        throw std::invalid_argument("fusion: output " + std::to_string(k) + " is out of range");
  }

  void build_users() {
    user_begin_.assign(g_.num_nodes + 1, 0);
    for (size_t i = 0; i < g_.num_nodes; ++i)
      for (size_t k = 0; k < g_.nodes[i].num_operands; ++k)
        ++user_begin_[g_.nodes[i].operands[k] + 1];
    for (size_t i = 0; i < g_.num_nodes; ++i) user_begin_[i + 1] += user_begin_[i];
    users_.resize(user_begin_[g_.num_nodes]);
    std::vector<int32_t> fill(user_begin_.begin(), user_begin_.end() - 1);
    for (size_t i = 0; i < g_.num_nodes; ++i)
      for (size_t k = 0; k < g_.nodes[i].num_operands; ++k)
        users_[fill[g_.nodes[i].operands[k]]++] = static_cast<int32_t>(i);
  }

  // Elementwise for grouping: the elementwise ops, plus index-map slices when enabled.
  bool map_node(int32_t v) const { return opt_.index_maps && is_index_map(g_, g_.nodes[v]); }
  bool ew(int32_t v) const { return classify(g_.nodes[v]) == OpClass::kElementwise || map_node(v); }
  // An index-map slice reads its operand at other indices: the operand's group must never
  // be merged with the slice's.
  bool maps_ok(const std::vector<int32_t>& members, int32_t extra = -1) {
    if (!saw_map_) return true;
    auto check = [&](int32_t v) {
      if (!map_node(v)) return true;
      int32_t og = group(g_.nodes[v].operands[0]);
      return og < 0 || std::find(members.begin(), members.end(), og) == members.end();
    };
    if (extra >= 0 && !check(extra)) return false;
    for (int32_t m : members)
      for (int32_t v : work_[m].nodes)
        if (!check(v)) return false;
    return true;
  }

  int32_t find(int32_t gi) {
    while (work_[gi].parent >= 0) gi = work_[gi].parent;
    return gi;
  }
  int32_t group(int32_t node) { return group_of_[node] < 0 ? -1 : find(group_of_[node]); }

  int32_t new_group(GroupKind kind, int32_t node, std::vector<int64_t> domain,
                    std::vector<int64_t> axes = {}) {
    Work w;
    w.kind = kind;
    w.nodes = {node};
    w.domain = std::move(domain);
    w.axes = std::move(axes);
    w.anchor = (kind == GroupKind::kElementwise) ? -1 : node;
    work_.push_back(std::move(w));
    group_of_[node] = static_cast<int32_t>(work_.size() - 1);
    return group_of_[node];
  }

  bool is_reduction_group(const Work& w) const {
    return w.kind == GroupKind::kRowReduction || w.kind == GroupKind::kReduction;
  }

  // Can elementwise node n (shape) live in group w, given its operands already in the
  // merged set `members` (root ids)? Reduction groups check broadcast consistency.
  bool node_fits(const lt_graph_node& n, const Work& w, const std::vector<int32_t>& members) {
    if (w.kind == GroupKind::kElementwise || w.kind == GroupKind::kOpaque)
      return same_shape(n, w.domain);
    Role r;
    if (!role_of(n.shape, n.rank, w.domain, w.axes, &r)) return false;
    for (size_t k = 0; k < n.num_operands; ++k) {
      int32_t o = n.operands[k];
      int32_t og = group(o);
      if (og < 0 || std::find(members.begin(), members.end(), og) == members.end()) continue;
      const lt_graph_node& on = g_.nodes[o];
      Role ro;
      if (!role_of(on.shape, on.rank, w.domain, w.axes, &ro)) return false;
      if (r == Role::kFull) {
        if (ro == Role::kReducedDrop && !same_shape(on, w.domain)) return false;
      } else if (on.rank != n.rank || !std::equal(on.shape, on.shape + on.rank, n.shape)) {
        return false;
      }
    }
    return true;
  }

  // An elementwise group `e` can merge into primary `p` if all its nodes fit p's domain.
  bool group_fits(const Work& e, const Work& p) {
    if (e.kind != GroupKind::kElementwise) {
      if (!is_reduction_group(e) || !is_reduction_group(p)) return false;
      return e.domain == p.domain && e.axes == p.axes;
    }
    if (p.kind == GroupKind::kElementwise || p.kind == GroupKind::kOpaque)
      return e.domain == p.domain;
    Role r;
    return role_of(e.domain.data(), e.domain.size(), p.domain, p.axes, &r);
  }

  // True if merging `members` (+ the new node whose outside operand groups are `feeds`)
  // would create a cycle, or an opaque member would be fed by another member.
  bool creates_cycle(const std::vector<int32_t>& members, const std::vector<int32_t>& feeds,
                     int32_t current) {
    std::unordered_set<int32_t> in(members.begin(), members.end());
    std::unordered_set<int32_t> bad(feeds.begin(), feeds.end());
    std::unordered_set<int32_t> seen;
    std::vector<int32_t> stack;
    size_t budget = 4096;
    auto push_succ = [&](int32_t gi, bool from_member) -> bool {
      for (int32_t v : work_[gi].nodes) {
        for (int32_t u = user_begin_[v]; u < user_begin_[v + 1]; ++u) {
          int32_t user = users_[u];
          if (user >= current) continue;  // not placed yet
          int32_t ug = group(user);
          if (ug < 0 || ug == gi) continue;
          if (in.count(ug)) {
            if (!from_member) return true;                          // left the set and came back
            if (work_[ug].kind == GroupKind::kOpaque) return true;  // would be a prologue
            continue;
          }
          if (bad.count(ug)) return true;
          if (seen.insert(ug).second) stack.push_back(ug);
          if (--budget == 0) return true;  // too far to prove safe: refuse
        }
      }
      return false;
    };
    for (int32_t m : members)
      if (push_succ(m, true)) return true;
    while (!stack.empty()) {
      int32_t gi = stack.back();
      stack.pop_back();
      if (push_succ(gi, false)) return true;
    }
    return false;
  }

  int32_t merge(const std::vector<int32_t>& members, int32_t primary) {
    Work& p = work_[primary];
    for (int32_t m : members) {
      if (m == primary) continue;
      Work& w = work_[m];
      p.nodes.insert(p.nodes.end(), w.nodes.begin(), w.nodes.end());
      w.nodes.clear();
      w.parent = primary;
    }
    return primary;
  }

  void add_node(int32_t gi, int32_t node) {
    work_[gi].nodes.push_back(node);
    group_of_[node] = gi;
  }

  size_t merged_size(const std::vector<int32_t>& members) const {
    size_t s = 1;
    for (int32_t m : members) s += work_[m].nodes.size();
    return s;
  }

  void place(int32_t i) {
    const lt_graph_node& n = g_.nodes[i];
    OpClass c = classify(n);
    if (c == OpClass::kInput) return;
    if (map_node(i)) {
      // Starts its own elementwise group over its output shape; consumers pull it in.
      saw_map_ = true;
      new_group(GroupKind::kElementwise, i, shape_of(n));
      return;
    }
    std::vector<int32_t> cands;  // distinct operand groups (roots)
    for (size_t k = 0; k < n.num_operands; ++k) {
      int32_t og = group(n.operands[k]);
      if (og >= 0 && std::find(cands.begin(), cands.end(), og) == cands.end()) cands.push_back(og);
    }
    if (c == OpClass::kOpaque) {
      new_group(GroupKind::kOpaque, i, shape_of(n));
      return;
    }
    if (c == OpClass::kReduction) {
      std::vector<int64_t> axes = reduction_axes(n);
      const lt_graph_node& in = g_.nodes[n.operands[0]];
      std::vector<int64_t> dom = shape_of(in);
      GroupKind kind =
          trailing(axes, dom.size()) ? GroupKind::kRowReduction : GroupKind::kReduction;
      int32_t og = cands.empty() ? -1 : cands[0];
      if (og >= 0 && work_[og].nodes.size() + 1 <= opt_.max_group_nodes) {
        Work& w = work_[og];
        if (w.kind == GroupKind::kElementwise && w.domain == dom) {
          w.kind = kind;
          w.axes = axes;
          w.anchor = i;
          add_node(og, i);
          return;
        }
        if (is_reduction_group(w) && w.domain == dom && w.axes == axes) {
          Role r;
          if (role_of(in.shape, in.rank, w.domain, w.axes, &r) && r == Role::kFull) {
            add_node(og, i);
            return;
          }
        }
      }
      new_group(kind, i, std::move(dom), std::move(axes));
      return;
    }
    // Elementwise: pick a primary (a reduction/opaque group it fits, else the first
    // elementwise group it fits), then pull in other operand groups that fit too.
    int32_t primary = -1;
    for (int32_t cg : cands) {
      const Work& w = work_[cg];
      if (w.kind == GroupKind::kElementwise) continue;
      if (w.kind == GroupKind::kOpaque && !opt_.epilogues) continue;
      if (node_fits(n, w, {cg})) {
        primary = cg;
        break;
      }
    }
    if (primary < 0) {
      for (int32_t cg : cands)
        if (work_[cg].kind == GroupKind::kElementwise && node_fits(n, work_[cg], {cg})) {
          primary = cg;
          break;
        }
    }
    if (primary < 0) {
      new_group(GroupKind::kElementwise, i, shape_of(n));
      return;
    }
    std::vector<int32_t> members = {primary};
    auto outside_feeds = [&]() {
      std::vector<int32_t> f;
      for (int32_t cg : cands)
        if (std::find(members.begin(), members.end(), cg) == members.end()) f.push_back(cg);
      return f;
    };
    if (merged_size(members) > opt_.max_group_nodes || !maps_ok(members, i) ||
        creates_cycle(members, outside_feeds(), i)) {
      new_group(GroupKind::kElementwise, i, shape_of(n));
      return;
    }
    for (int32_t cg : cands) {
      if (cg == primary) continue;
      if (!group_fits(work_[cg], work_[primary])) continue;
      if (work_[cg].kind != GroupKind::kElementwise && work_[primary].kind == GroupKind::kOpaque)
        continue;
      members.push_back(cg);
      bool ok = merged_size(members) <= opt_.max_group_nodes &&
                node_fits(n, work_[primary], members) && maps_ok(members, i);
      if (ok && is_reduction_group(work_[primary])) {
        // Edges between the merged groups become in-group uses: re-check broadcasts.
        for (int32_t v : work_[cg].nodes)
          if (ew(v) && !node_fits(g_.nodes[v], work_[primary], members)) {
            ok = false;
            break;
          }
        for (int32_t v : work_[primary].nodes)
          if (ok && ew(v) && !node_fits(g_.nodes[v], work_[primary], members)) ok = false;
      }
      if (!ok || creates_cycle(members, outside_feeds(), i)) members.pop_back();
    }
    add_node(merge(members, primary), i);
  }

  Plan finish() {
    // Collect alive groups and their node -> group mapping.
    std::vector<int32_t> final_id(work_.size(), -1);
    Plan plan;
    plan.group_of.assign(g_.num_nodes, -1);
    std::vector<Group> groups;
    for (size_t gi = 0; gi < work_.size(); ++gi) {
      if (work_[gi].parent >= 0) continue;
      final_id[gi] = static_cast<int32_t>(groups.size());
      Group gr;
      gr.kind = work_[gi].kind;
      gr.nodes = std::move(work_[gi].nodes);
      std::sort(gr.nodes.begin(), gr.nodes.end());
      gr.domain = std::move(work_[gi].domain);
      gr.reduce_axes = std::move(work_[gi].axes);
      gr.anchor = work_[gi].anchor;
      groups.push_back(std::move(gr));
    }
    for (size_t i = 0; i < g_.num_nodes; ++i)
      if (group_of_[i] >= 0) plan.group_of[i] = final_id[find(group_of_[i])];
    std::vector<char> is_output(g_.num_nodes, 0);
    for (size_t k = 0; k < g_.num_outputs; ++k) is_output[g_.outputs[k]] = 1;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      Group& gr = groups[gi];
      for (int32_t v : gr.nodes) {
        const lt_graph_node& n = g_.nodes[v];
        for (size_t k = 0; k < n.num_operands; ++k)
          if (plan.group_of[n.operands[k]] != static_cast<int32_t>(gi))
            gr.inputs.push_back(n.operands[k]);
        bool out = is_output[v];
        for (int32_t u = user_begin_[v]; u < user_begin_[v + 1] && !out; ++u)
          out = plan.group_of[users_[u]] != static_cast<int32_t>(gi);
        if (out) gr.outputs.push_back(v);
      }
      std::sort(gr.inputs.begin(), gr.inputs.end());
      gr.inputs.erase(std::unique(gr.inputs.begin(), gr.inputs.end()), gr.inputs.end());
      if (gr.kind != GroupKind::kElementwise) {
        // anchor = first reduction (or the opaque node)
        for (int32_t v : gr.nodes)
          if (!ew(v)) {
            gr.anchor = v;
            break;
          }
      }
    }
    // Kahn order over group edges.
    size_t ng = groups.size();
    std::vector<std::vector<int32_t>> succ(ng);
    std::vector<int32_t> indeg(ng, 0);
    for (size_t gi = 0; gi < ng; ++gi) {
      std::vector<int32_t> preds;
      for (int32_t in : groups[gi].inputs)
        if (plan.group_of[in] >= 0) preds.push_back(plan.group_of[in]);
      std::sort(preds.begin(), preds.end());
      preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
      for (int32_t p : preds) {
        succ[p].push_back(static_cast<int32_t>(gi));
        ++indeg[gi];
      }
    }
    // Ready groups are taken in order of their first node, keeping output deterministic.
    std::vector<int32_t> order;
    std::vector<int32_t> ready;
    auto first = [&](int32_t gi) { return groups[gi].nodes.front(); };
    auto cmp = [&](int32_t a, int32_t b) { return first(a) > first(b); };
    for (size_t gi = 0; gi < ng; ++gi)
      if (indeg[gi] == 0) ready.push_back(static_cast<int32_t>(gi));
    std::make_heap(ready.begin(), ready.end(), cmp);
    while (!ready.empty()) {
      std::pop_heap(ready.begin(), ready.end(), cmp);
      int32_t gi = ready.back();
      ready.pop_back();
      order.push_back(gi);
      for (int32_t s : succ[gi])
        if (--indeg[s] == 0) {
          ready.push_back(s);
          std::push_heap(ready.begin(), ready.end(), cmp);
        }
    }
    if (order.size() != ng) throw std::logic_error("fusion: internal error: cyclic group graph");
    std::vector<int32_t> remap(ng);
    plan.groups.reserve(ng);
    for (size_t k = 0; k < ng; ++k) {
      remap[order[k]] = static_cast<int32_t>(k);
      plan.groups.push_back(std::move(groups[order[k]]));
    }
    for (auto& gid : plan.group_of)
      if (gid >= 0) gid = remap[gid];
    return plan;
  }

  const lt_graph& g_;
  const Options& opt_;
  std::vector<int32_t> user_begin_, users_;
  std::vector<int32_t> group_of_;  // node -> work index (maybe merged away: use find)
  std::vector<Work> work_;
  bool saw_map_ = false;
};

}  // namespace

bool is_elementwise_op(std::string_view op) {
  return std::find(std::begin(kElementwiseOps), std::end(kElementwiseOps), op) !=
         std::end(kElementwiseOps);
}

bool is_reduction_op(std::string_view op) {
  return std::find(std::begin(kReductionOps), std::end(kReductionOps), op) !=
         std::end(kReductionOps);
}

bool is_index_map(const lt_graph& graph, const lt_graph_node& n) {
  if (!n.op || std::string_view(n.op) != "slice" || n.num_operands != 1) return false;
  const lt_graph_node& a = graph.nodes[n.operands[0]];
  const lt_attr* s = find_attr(n, "starts");
  const lt_attr* t = find_attr(n, "steps");
  return a.rank == n.rank && s && t && s->kind == LT_ATTR_INTS && t->kind == LT_ATTR_INTS &&
         s->ints_len == n.rank && t->ints_len == n.rank;
}

OpClass classify(const lt_graph_node& node) {
  std::string_view op = node.op ? node.op : "";
  if (op == "input") return OpClass::kInput;
  if (is_elementwise_op(op)) return OpClass::kElementwise;
  if (is_reduction_op(op) && node.num_operands == 1) return OpClass::kReduction;
  return OpClass::kOpaque;
}

bool role_of(const int64_t* shape, size_t rank, const std::vector<int64_t>& domain,
             const std::vector<int64_t>& axes, Role* out) {
  if (rank == domain.size() && std::equal(domain.begin(), domain.end(), shape)) {
    *out = Role::kFull;
    return true;
  }
  if (rank == domain.size()) {
    for (size_t d = 0; d < rank; ++d) {
      bool red = std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(d));
      if (shape[d] != (red ? 1 : domain[d])) return false;
    }
    *out = Role::kReducedKeep;
    return true;
  }
  if (rank + axes.size() != domain.size()) return false;
  size_t j = 0;
  for (size_t d = 0; d < domain.size(); ++d) {
    if (std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(d))) continue;
    if (shape[j++] != domain[d]) return false;
  }
  *out = Role::kReducedDrop;
  return true;
}

Plan plan(const lt_graph& graph, const Options& options) {
  return Planner(graph, options).run();
}

}  // namespace lt::fusion
