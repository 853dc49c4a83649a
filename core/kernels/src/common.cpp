// common.cpp — host::prepare (the op table of the host kernels) and what every kernel shares:
// the TBB threshold policy, cast-semantics stores, and loops over lower::View index maps (the
// broadcasting elementwise driver, strided copies).
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "kernels.h"
#include "lazytensor/lower/view.hpp"

namespace lt::host {

KernelFn prepare(const lt_graph& g, size_t i, std::vector<int64_t>* params) {
  static const auto table = [] {
    std::array<PrepareFn, kNumBuiltinOps> t{};
    add_elementwise_ops(t.data());
    add_creation_ops(t.data());
    add_reduce_ops(t.data());
    add_layout_ops(t.data());
    add_linalg_ops(t.data());
    return t;
  }();
  const lt_graph_node& n = g.nodes[i];
  const lower::OpInfo* op = lower::find_op(n.op);
  if (!op || !table[op->id] || n.rank > static_cast<size_t>(kMaxRank)) return nullptr;
  auto desc = [](const lt_graph_node& v) {
    return ValueDesc{v.dtype, static_cast<int>(v.rank), v.shape, lower::DescRef(v).numel()};
  };
  std::vector<ValueDesc> in;
  for (size_t k = 0; k < n.num_operands; ++k) {
    const lt_graph_node& o = g.nodes[n.operands[k]];
    if (o.rank > static_cast<size_t>(kMaxRank)) return nullptr;
    in.push_back(desc(o));
  }
  lower::Attrs attrs(n);
  PrepareCall c{op->id, desc(n), in.data(), in.size(), attrs, params};
  size_t mark = params->size();
  table[op->id](c);
  if (!c.fn) params->resize(mark);
  return c.fn;
}

void parallel_for(int64_t n, int64_t work_per_item, void (*body)(void*, int64_t, int64_t),
                  void* ctx) {
  if (n <= 0) return;
  int64_t w = std::max<int64_t>(work_per_item, 1);
  if (n * w < kParallelThreshold || n == 1) {
    body(ctx, 0, n);
    return;
  }
  int64_t grain = std::max<int64_t>(1, kGrain / w);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, static_cast<size_t>(grain)),
                    [&](const tbb::blocked_range<int64_t>& r) { body(ctx, r.begin(), r.end()); });
}

namespace {

// Walks flat positions [b, e) of a dense output over loop `l` (view 0 is the output) in inner
// runs; visit(offsets, pos, n) gets each view's element offset at pos.
template <class Visit>
void walk(const lower::Loop& l, int64_t b, int64_t e, Visit&& visit) {
  const int rank = static_cast<int>(l.dims.size());
  const size_t nv = l.strides.size();
  int64_t idx[kMaxRank];
  int64_t rem = b;
  for (int i = rank - 1; i >= 0; --i) {
    idx[i] = rem % l.dims[i];
    rem /= l.dims[i];
  }
  int64_t off[4] = {0, 0, 0, 0};
  for (size_t k = 0; k < nv; ++k) {
    off[k] = l.offsets[k];
    for (int i = 0; i < rank; ++i) off[k] += idx[i] * l.strides[k][i];
  }
  int64_t pos = b;
  const int last = rank - 1;
  while (pos < e) {
    int64_t n = std::min(l.dims[last] - idx[last], e - pos);
    visit(off, pos, n);
    pos += n;
    for (size_t k = 0; k < nv; ++k) off[k] += n * l.strides[k][last];
    idx[last] += n;
    for (int i = last; i > 0 && idx[i] == l.dims[i]; --i) {
      for (size_t k = 0; k < nv; ++k) off[k] += l.strides[k][i - 1] - l.dims[i] * l.strides[k][i];
      idx[i] = 0;
      ++idx[i - 1];
    }
  }
}

}  // namespace

void elementwise(const KernelCall& c, size_t num_in, SpanFn span) {
  const int64_t n = c.out.numel;
  if (n == 0) return;
  const size_t out_es = lt_dtype_size(c.out.dtype);
  const char* in_ptr[3] = {nullptr, nullptr, nullptr};
  size_t in_es[3] = {0, 0, 0};
  bool dense = true;
  for (size_t k = 0; k < num_in; ++k) {
    in_ptr[k] = c.in[k].data;
    in_es[k] = lt_dtype_size(c.in[k].dtype);
    if (c.in[k].numel != n && c.in[k].numel != 1) dense = false;
  }
  if (dense) {  // every operand is either full-size or a single broadcast element
    int64_t st[3];
    for (size_t k = 0; k < num_in; ++k) st[k] = c.in[k].numel == n ? 1 : 0;
    parallel_for(n, 1, [&](int64_t b, int64_t e) {
      const char* p[3];
      for (size_t k = 0; k < num_in; ++k) p[k] = in_ptr[k] + b * st[k] * in_es[k];
      span(c.out.data + b * out_es, p, st, e - b, c.params);
    });
    return;
  }
  std::span<const int64_t> out_shape(c.out.shape, c.out.rank);
  std::vector<lower::View> views{lower::View::dense(out_shape)};
  for (size_t k = 0; k < num_in; ++k)
    views.push_back(lower::View::dense({c.in[k].shape, static_cast<size_t>(c.in[k].rank)})
                        .broadcast_to(out_shape));
  const lower::Loop l = lower::coalesce(views);
  parallel_for(n, 1, [&](int64_t b, int64_t e) {
    walk(l, b, e, [&](const int64_t* off, int64_t pos, int64_t len) {
      const char* p[3];
      int64_t st[3];
      for (size_t k = 0; k < num_in; ++k) {
        p[k] = in_ptr[k] + off[k + 1] * static_cast<int64_t>(in_es[k]);
        st[k] = l.strides[k + 1].back();
      }
      span(c.out.data + pos * out_es, p, st, len, c.params);
    });
  });
}

void strided_copy(char* out, const int64_t* out_shape, int rank, const char* src,
                  const int64_t* src_strides, size_t es) {
  std::span<const int64_t> shape(out_shape, static_cast<size_t>(rank));
  lower::View in;
  in.shape.assign(shape.begin(), shape.end());
  in.strides.assign(src_strides, src_strides + rank);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n == 0) return;
  const lower::Loop l = lower::coalesce(std::vector<lower::View>{lower::View::dense(shape), in});
  const int64_t ies = static_cast<int64_t>(es);
  parallel_for(n, 1, [&](int64_t b, int64_t e) {
    walk(l, b, e, [&](const int64_t* off, int64_t pos, int64_t len) {
      const char* p = src + off[1] * ies;
      char* o = out + pos * ies;
      int64_t st = l.strides[1].back();
      if (st == 1) {
        std::memcpy(o, p, static_cast<size_t>(len * ies));
        return;
      }
      const int64_t bst = st * ies;
      switch (es) {
        case 1:
          for (int64_t i = 0; i < len; ++i) o[i] = p[i * bst];
          break;
        case 4:
          for (int64_t i = 0; i < len; ++i) std::memcpy(o + 4 * i, p + i * bst, 4);
          break;
        case 8:
          for (int64_t i = 0; i < len; ++i) std::memcpy(o + 8 * i, p + i * bst, 8);
          break;
        default:
          for (int64_t i = 0; i < len; ++i) std::memcpy(o + ies * i, p + i * bst, es);
      }
    });
  });
}

}  // namespace lt::host
