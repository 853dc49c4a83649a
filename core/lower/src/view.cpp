// view.cpp — index maps: composing views through layout ops, and coalescing loops.
#include "lazytensor/lower/view.hpp"

#include "lazytensor/lower/error.hpp"
#include "lazytensor/lower/fusion.hpp"

namespace lt::lower {

View View::dense(std::span<const int64_t> shape) {
  View v;
  v.shape.assign(shape.begin(), shape.end());
  v.strides.resize(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    v.strides[i] = s;
    s *= shape[i];
  }
  return v;
}

bool View::contiguous() const {
  if (masked() || offset != 0) return false;
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != s) return false;
    s *= shape[i];
  }
  return true;
}

int64_t View::at(std::span<const int64_t> index) const {
  int64_t o = offset;
  for (size_t i = 0; i < index.size(); ++i) o += index[i] * strides[i];
  return o;
}

bool View::valid(std::span<const int64_t> index) const {
  if (!masked()) return true;
  for (size_t i = 0; i < index.size(); ++i)
    if (index[i] < lo[i] || index[i] >= hi[i]) return false;
  return true;
}

View View::broadcast_to(std::span<const int64_t> out) const {
  View v;
  v.shape.assign(out.begin(), out.end());
  v.strides.assign(out.size(), 0);
  v.offset = offset;
  v.fill = fill;
  size_t lead = out.size() - shape.size();
  if (masked()) {
    v.lo.assign(out.size(), 0);
    v.hi.assign(out.begin(), out.end());
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    bool stretched = shape[i] == 1 && out[lead + i] != 1;
    v.strides[lead + i] = stretched ? 0 : strides[i];
    if (masked() && !stretched) v.lo[lead + i] = lo[i], v.hi[lead + i] = hi[i];
    // a stretched dim of extent 1 is valid everywhere or nowhere: keep it as [0, out)
    if (masked() && stretched && !(lo[i] <= 0 && hi[i] > 0)) v.lo[lead + i] = v.hi[lead + i] = 0;
  }
  return v;
}

View View::permute(std::span<const int64_t> perm) const {
  View v = *this;
  for (size_t i = 0; i < perm.size(); ++i) {
    v.shape[i] = shape[perm[i]];
    v.strides[i] = strides[perm[i]];
    if (masked()) v.lo[i] = lo[perm[i]], v.hi[i] = hi[perm[i]];
  }
  return v;
}

View View::slice(std::span<const int64_t> starts, std::span<const int64_t> steps,
                 std::span<const int64_t> out) const {
  View v = *this;
  for (size_t i = 0; i < out.size(); ++i) {
    v.shape[i] = out[i];
    if (out[i] > 0) v.offset += starts[i] * strides[i];
    v.strides[i] = strides[i] * steps[i];
    if (masked()) {
      // index j of the slice reads index starts + j·steps: the window maps back through it
      int64_t a = lo[i] - starts[i], b = hi[i] - starts[i], s = steps[i];
      int64_t first, last;  // inclusive range of j whose source index is in [lo, hi)
      if (s > 0) {
        first = a > 0 ? (a + s - 1) / s : 0;
        last = b > 0 ? (b - 1) / s : -1;
      } else {
        first = b <= 0 ? (-b) / (-s) + 1 : 0;  // j·s < b  <=>  j > -b/-s
        last = a <= 0 ? (-a) / (-s) : -1;      // j·s >= a  <=>  j <= -a/-s
      }
      v.lo[i] = std::max<int64_t>(0, first);
      v.hi[i] = std::min<int64_t>(out[i], last + 1);
      if (v.hi[i] < v.lo[i]) v.hi[i] = v.lo[i];
    }
  }
  return v;
}

View View::pad(std::span<const int64_t> before, std::span<const int64_t> after,
               double value) const {
  View v = *this;
  if (masked() && value != fill)
    fail(LT_STATUS_UNSUPPORTED, "view: pad of a padded view with another value");
  if (!masked()) {
    v.lo.assign(shape.size(), 0);
    v.hi.assign(shape.begin(), shape.end());
  }
  v.fill = value;
  for (size_t i = 0; i < shape.size(); ++i) {
    v.shape[i] = shape[i] + before[i] + after[i];
    v.offset -= before[i] * strides[i];
    v.lo[i] += before[i];
    v.hi[i] += before[i];
  }
  return v;
}

View View::concat_part(int64_t axis, int64_t at, int64_t out_dim) const {
  View v = *this;
  if (!masked()) {
    v.lo.assign(shape.size(), 0);
    v.hi.assign(shape.begin(), shape.end());
  }
  v.shape[axis] = out_dim;
  v.offset -= at * strides[axis];
  v.lo[axis] += at;
  v.hi[axis] += at;
  return v;
}

std::optional<View> View::reshape(std::span<const int64_t> out) const {
  if (masked()) return std::nullopt;
  // Walk both shapes in groups of equal element count; within a group the source dims must
  // chain (stride[i] == stride[i+1] * shape[i+1]) so the group is one strided run.
  View v;
  v.shape.assign(out.begin(), out.end());
  v.strides.assign(out.size(), 0);
  v.offset = offset;
  size_t i = 0, j = 0;
  while (i < shape.size() || j < out.size()) {
    if (i < shape.size() && shape[i] == 1) {
      ++i;
      continue;
    }
    if (j < out.size() && out[j] == 1) {
      v.strides[j++] = 0;
      continue;
    }
    if (i == shape.size() || j == out.size()) return std::nullopt;
    size_t i0 = i, j0 = j;
    int64_t a = shape[i++], b = out[j++];
    while (a != b) {
      if (a < b) {
        if (i == shape.size()) return std::nullopt;
        a *= shape[i++];
      } else {
        if (j == out.size()) return std::nullopt;
        b *= out[j++];
      }
    }
    for (size_t k = i0; k + 1 < i; ++k)
      if (shape[k + 1] != 1 && strides[k] != strides[k + 1] * shape[k + 1]) return std::nullopt;
    int64_t inner = strides[i - 1];  // stride of the group's last (fastest) dim
    for (size_t k = j; k-- > j0;) {
      v.strides[k] = inner;
      inner *= out[k];
    }
  }
  return v;
}

Loop coalesce(std::span<const View> views) {
  Loop l;
  const size_t n = views.size(), rank = n ? views[0].shape.size() : 0;
  l.strides.resize(n);
  for (size_t k = 0; k < n; ++k) l.offsets.push_back(views[k].offset);
  for (size_t i = 0; i < rank; ++i) {
    int64_t d = views[0].shape[i];
    if (d == 1) continue;
    bool merge = !l.dims.empty();
    for (size_t k = 0; merge && k < n; ++k) merge = l.strides[k].back() == views[k].strides[i] * d;
    if (merge) {
      l.dims.back() *= d;
      for (size_t k = 0; k < n; ++k) l.strides[k].back() = views[k].strides[i];
      continue;
    }
    l.dims.push_back(d);
    for (size_t k = 0; k < n; ++k) l.strides[k].push_back(views[k].strides[i]);
  }
  if (l.dims.empty()) {
    l.dims.push_back(1);
    for (size_t k = 0; k < n; ++k) l.strides[k].push_back(0);
  }
  return l;
}

std::optional<View> operand_view(const lt_graph& graph, int32_t user, size_t k) {
  const lt_graph_node& n = graph.nodes[user];
  const std::string_view op = n.op;
  const DescRef in(graph.nodes[n.operands[k]]), out(n);
  const View src = View::dense(in.dims());
  if (fusion::is_reduction_op(op)) return src;
  const Attrs a(n);
  if (op == "slice")
    return src.slice(a.ints("starts", n.rank), a.ints("steps", n.rank), out.dims());
  if (op == "permute") return src.permute(a.ints("perm", n.rank));
  if (op == "pad") return src.pad(a.ints("before", n.rank), a.ints("after", n.rank), a.f("value"));
  if (op == "reshape") return src.reshape(out.dims());
  if (op == "concat") {
    const int64_t axis = a.i("axis");
    int64_t at = 0;
    for (size_t j = 0; j < k; ++j) at += graph.nodes[n.operands[j]].shape[axis];
    return src.concat_part(axis, at, n.shape[axis]);
  }
  const OpInfo* info = find_op(op);
  const bool broadcasts =
      op == "broadcast_to" ||
      (info && (info->category == Category::kElementwise || info->category == Category::kCreation));
  if (!broadcasts || in.rank > n.rank) return std::nullopt;
  return src.broadcast_to(out.dims());
}

}  // namespace lt::lower
