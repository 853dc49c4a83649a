// loop_kernel.cpp — the loop-level schedule of a fused kernel (see loop_kernel.hpp).
#include "lazytensor/lower/loop_kernel.hpp"

#include <algorithm>
#include <optional>
#include <string_view>

#include "lazytensor/lower/view.hpp"

namespace lt::lower {

bool LoopKernel::in_kernel(int32_t node) const {
  return std::binary_search(nodes.begin(), nodes.end(), node);
}

int LoopKernel::position(int32_t node) const {
  auto it = std::lower_bound(nodes.begin(), nodes.end(), node);
  return it != nodes.end() && *it == node ? static_cast<int>(it - nodes.begin()) : -1;
}

std::vector<int32_t> LoopKernel::reductions_by_phase() const {
  std::vector<int32_t> out;
  for (const std::vector<int32_t>& p : phases) out.insert(out.end(), p.begin(), p.end());
  return out;
}

int LoopKernel::access(int32_t buffer, int32_t user, bool index) const {
  auto it = access_of.find({index ? ~buffer : buffer, user});
  return it == access_of.end() ? -1 : it->second;
}

int LoopKernel::operand_access(int32_t user, size_t k) const {
  for (size_t a = 0; a < accesses.size(); ++a)
    if (accesses[a].user == user && accesses[a].operand == static_cast<int32_t>(k))
      return static_cast<int>(a);
  return -1;
}

bool LoopKernel::dense_along(size_t d) const {
  if (!affine) return false;
  for (const Access& a : accesses)
    if (d < a.strides.size() && a.strides[d] != 0 && a.strides[d] != 1) return false;
  return true;
}

int64_t LoopKernel::rows() const {
  return numel(kept);
}

int64_t LoopKernel::row_length() const {
  return numel(reduced);
}

namespace {

// Ops worth evaluating once rather than twice per element (a load and a store cost less).
bool transcendental(std::string_view op) {
  for (std::string_view t : {"exp", "log", "tanh", "sigmoid", "gelu", "sin", "cos", "pow", "erf"})
    if (op == t) return true;
  return false;
}

// Ops whose operands are read at the op's own index (a stashed value is read back at one index).
bool same_index(std::string_view op) {
  return fusion::is_elementwise_op(op) || fusion::is_reduction_op(op) || op.starts_with("random_");
}

// Whether `pred` holds for `from` or a node it reads inside the kernel, transitively: what the
// output pass evaluates for `from` (a reduction is known per row: its operands are not walked).
template <class Pred>
bool in_cone(const lt_graph& g, const LoopKernel& k, int32_t from, Pred pred) {
  std::vector<char> seen(k.nodes.size(), 0);
  std::vector<int32_t> stack{from};
  while (!stack.empty()) {
    const int32_t v = stack.back();
    stack.pop_back();
    if (pred(v)) return true;
    const lt_graph_node& n = g.nodes[v];
    if (v != from && fusion::is_reduction_op(n.op)) continue;
    for (size_t o = 0; o < n.num_operands; ++o)
      if (int p = k.position(n.operands[o]); p >= 0 && !seen[p]) {
        seen[p] = 1;
        stack.push_back(n.operands[o]);
      }
  }
  return false;
}

// The stashes of the last phase (see LoopKernel::Stash).
void plan_stashes(const lt_graph& g, LoopKernel& k, size_t row_bytes) {
  if (k.phases.empty() || !row_bytes) return;
  std::vector<int32_t> values;  // full-role, non-output sources of the last phase
  for (int32_t r : k.phases.back()) {
    const int32_t c = g.nodes[r].operands[0];
    const int p = k.position(c);
    if (p >= 0 && k.roles[p] == fusion::Role::kFull && !fusion::is_reduction_op(g.nodes[c].op) &&
        std::find(k.outputs.begin(), k.outputs.end(), c) == k.outputs.end() &&
        in_cone(g, k, c, [&](int32_t v) { return transcendental(g.nodes[v].op); }))
      values.push_back(c);
  }
  for (int32_t o : k.full_outputs) {
    const lt_graph_node& n = g.nodes[o];
    if (!std::equal(n.shape, n.shape + n.rank, k.domain.begin(), k.domain.end()) ||
        static_cast<size_t>(k.row_length()) * lt_dtype_size(n.dtype) > row_bytes ||
        in_cone(g, k, o, [&](int32_t v) { return !same_index(g.nodes[v].op); }))
      continue;
    for (int32_t c : values)
      if (g.nodes[c].dtype == n.dtype && in_cone(g, k, o, [c](int32_t v) { return v == c; })) {
        k.stashes.push_back({o, c});
        break;
      }
  }
}

// Adds the read of `buffer` by `user` through `v` (a View over the user's own index space),
// laid over the domain: a value of a reduced role is laid out by it (a dropped reduced dim takes
// no index); one of lower rank is broadcast from the right. -1 when the domain cannot hold it.
int add_view(LoopKernel& k, Access acc, const View& v, fusion::Role r) {
  const bool drop = r == fusion::Role::kReducedDrop;
  if (v.shape.size() > k.domain.size()) return -1;
  acc.offset = v.offset;
  acc.fill = v.fill;
  acc.strides.assign(k.domain.size(), 0);
  for (size_t j = 0, d = drop ? 0 : k.domain.size() - v.shape.size(); d < k.domain.size(); ++d) {
    if (drop && k.is_reduced[d]) continue;
    if (j == v.shape.size()) break;
    if (v.shape[j] != 1) acc.strides[d] = v.strides[j];  // size-1 dims: index 0 everywhere
    if (v.masked() && (v.lo[j] > 0 || v.hi[j] < v.shape[j])) {
      acc.windows.push_back(
          {std::vector<int64_t>(k.domain.size(), 0), v.lo[j], v.hi[j], v.shape[j]});
      if (v.shape[j] != 1) acc.windows.back().coord[d] = 1;
    }
    ++j;
  }
  k.accesses.push_back(std::move(acc));
  return static_cast<int>(k.accesses.size()) - 1;
}

// gather's data (k = 0) and index (k = 1) buffers as Views over its output: the data dims
// around the gathered axis, and the index dims that replace it.
View gather_view(const lt_graph& g, int32_t user, size_t k) {
  const lt_graph_node& n = g.nodes[user];
  const int64_t axis = Attrs(n).i("axis");
  const View x = View::dense(DescRef(g.nodes[n.operands[0]]).dims());
  const View ind = View::dense(DescRef(g.nodes[n.operands[1]]).dims());
  View v = View::dense(DescRef(n).dims());
  for (size_t d = 0; d < n.rank; ++d) {
    const int64_t t = static_cast<int64_t>(d) - axis;
    if (t >= 0 && t < static_cast<int64_t>(ind.shape.size()))
      v.strides[d] = k == 1 ? ind.strides[t] : 0;
    else
      v.strides[d] = k == 0 ? x.strides[t < 0 ? d : d - ind.shape.size() + 1] : 0;
  }
  return v;
}

// Adds how `user` reads its operand k (index: the flat index of node `user` itself; output: its
// own buffer); false when no Access says it or it is not affine.
bool add_access(const lt_graph& g, LoopKernel& k, int32_t user, size_t o, bool index = false,
                bool output = false) {
  const lt_graph_node& u = g.nodes[user];
  const int32_t buffer = output || index ? user : u.operands[o];
  const std::string_view op = u.op;
  const bool per_operand = !output && !index && (op == "concat" || op == "gather");
  if (per_operand ? k.operand_access(user, o) >= 0 : k.access(buffer, user, index) >= 0)
    return true;
  fusion::Role r = k.role(user);
  Access acc;
  acc.buffer = buffer;
  acc.user = user;
  acc.index = index;
  acc.operand = output || index ? -1 : static_cast<int32_t>(o);
  std::optional<View> v;
  if (buffer == user) {
    v = View::dense(DescRef(u).dims());
  } else if (op == "gather") {
    if (o == 0) {  // the index buffer first: the data's offset reads it
      if (k.in_kernel(u.operands[1]) || !add_access(g, k, user, 1)) return false;
      acc.gather = k.operand_access(user, 1);
      const lt_graph_node& x = g.nodes[buffer];
      const int64_t axis = Attrs(u).i("axis");
      acc.gather_extent = x.shape[axis];
      acc.gather_stride = View::dense(DescRef(x).dims()).strides[axis];
    }
    v = gather_view(g, user, o);
  } else {
    v = operand_view(g, user, o);
    if (fusion::is_reduction_op(u.op)) r = fusion::Role::kFull;  // reads its operand's domain
  }
  if (!v) return false;
  const int a = add_view(k, std::move(acc), *v, r);
  if (a < 0) return false;
  if (!per_operand || k.access(buffer, user) < 0) k.access_of[{index ? ~buffer : buffer, user}] = a;
  return !v->masked() && k.accesses[a].gather < 0;
}

// The accesses and the loops (see LoopKernel::loop_dims): kept dims, then reduced dims, each
// part coalesced over every access and every window's coordinate (not with an anchor).
void plan_loops(const lt_graph& g, LoopKernel& k, int32_t anchor) {
  for (int32_t v : k.nodes) {
    const lt_graph_node& n = g.nodes[v];
    for (size_t o = 0; o < n.num_operands && v != anchor; ++o)
      if (!k.in_kernel(n.operands[o])) k.affine = add_access(g, k, v, o) && k.affine;
    if (std::string_view(n.op) == "arange" || std::string_view(n.op).starts_with("random_"))
      add_access(g, k, v, 0, true);
  }
  for (int32_t v : k.outputs) add_access(g, k, v, 0, false, true);
  std::vector<std::vector<int64_t>*> maps;  // every stride vector over the domain
  for (Access& a : k.accesses) {
    maps.push_back(&a.strides);
    for (Access::Window& w : a.windows) maps.push_back(&w.coord);
  }
  if (anchor >= 0) {
    k.loop_dims = k.domain;
    k.outer_loops = k.domain.size();
    return;
  }
  auto part = [&](bool reduced) {
    std::vector<View> views(maps.size());
    for (size_t a = 0; a < maps.size(); ++a)
      for (size_t d = 0; d < k.domain.size(); ++d)
        if (bool(k.is_reduced[d]) == reduced) {
          views[a].shape.push_back(k.domain[d]);
          views[a].strides.push_back((*maps[a])[d]);
        }
    return coalesce(views);
  };
  const bool reduces = !k.reduced.empty();
  const Loop outer = part(false), inner = reduces ? part(true) : Loop{};
  k.loop_dims = outer.dims;
  k.outer_loops = k.loop_dims.size();
  if (reduces) k.loop_dims.insert(k.loop_dims.end(), inner.dims.begin(), inner.dims.end());
  for (size_t a = 0; a < maps.size(); ++a) {
    *maps[a] = outer.strides[a];
    if (reduces) maps[a]->insert(maps[a]->end(), inner.strides[a].begin(), inner.strides[a].end());
  }
}

// LoopKernel::column_reduction, over the finished roles, phases and loops.
bool column_reduction(const lt_graph& graph, const LoopKernel& k) {
  if (k.outer_loops != 1 || k.loop_dims.size() < 2 || k.phases.size() != 1) return false;
  for (int32_t r : k.reductions)
    if (graph.nodes[r].dtype == LT_DTYPE_BOOL || k.role(r) == fusion::Role::kFull ||
        std::find(k.outputs.begin(), k.outputs.end(), r) == k.outputs.end())
      return false;
  for (size_t i = 0; i < k.nodes.size(); ++i)  // nothing reads a reduction, nothing is per row
    if (!fusion::is_reduction_op(graph.nodes[k.nodes[i]].op) &&
        (k.levels[i] != 0 || k.roles[i] != fusion::Role::kFull))
      return false;
  if (!k.dense_along(0)) return false;
  for (const Access& a : k.accesses)  // some source is read along the kept loop
    for (size_t d = 1; d < k.loop_dims.size(); ++d)
      if (a.strides[0] == 1 && a.strides[d] != 0) return true;
  return false;
}

}  // namespace

LoopKernel schedule_loops(const lt_graph& graph, std::span<const int32_t> nodes,
                          std::span<const int32_t> outputs, std::span<const int64_t> domain,
                          std::span<const int64_t> reduce_axes, const LoopOptions& options) {
  LoopKernel k;
  k.nodes.assign(nodes.begin(), nodes.end());
  k.outputs.assign(outputs.begin(), outputs.end());
  k.domain.assign(domain.begin(), domain.end());
  const std::vector<int64_t> axes(reduce_axes.begin(), reduce_axes.end());
  k.is_reduced.assign(domain.size(), 0);
  for (int64_t a : axes) k.is_reduced[static_cast<size_t>(a)] = 1;
  for (size_t d = 0; d < domain.size(); ++d)
    (k.is_reduced[d] ? k.reduced : k.kept).push_back(domain[d]);

  // Roles (by shape), and levels: a node's level is the most reductions on a path to it inside
  // the kernel, so a reduction of level p reads only what pass p - 1 completed.
  int phases = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const lt_graph_node& n = graph.nodes[nodes[i]];
    fusion::Role r = fusion::Role::kFull;
    if (!axes.empty() && !fusion::role_of(n.shape, n.rank, k.domain, axes, &r))
      r = fusion::Role::kFull;
    k.roles.push_back(r);
    int lv = 0;
    for (size_t o = 0; o < n.num_operands; ++o)
      if (int p = k.position(n.operands[o]); p >= 0) lv = std::max(lv, k.levels[p]);
    const bool reduction = fusion::is_reduction_op(n.op);
    k.levels.push_back(lv + reduction);
    phases = std::max(phases, k.levels.back());
    if (reduction) k.reductions.push_back(nodes[i]);
  }
  k.phases.resize(phases);
  k.row_nodes.resize(phases + 1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (fusion::is_reduction_op(graph.nodes[nodes[i]].op))
      k.phases[k.levels[i] - 1].push_back(nodes[i]);
    else if (k.roles[i] != fusion::Role::kFull)
      k.row_nodes[k.levels[i]].push_back(nodes[i]);
  }
  for (int32_t o : outputs) {
    const int p = k.position(o);
    if (p >= 0) (k.roles[p] == fusion::Role::kFull ? k.full_outputs : k.row_outputs).push_back(o);
  }
  plan_stashes(graph, k, options.stash_row_bytes);
  plan_loops(graph, k, options.anchor);
  k.column_reduction = column_reduction(graph, k);
  return k;
}

}  // namespace lt::lower
