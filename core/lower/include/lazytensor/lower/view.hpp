// view.hpp — the one index-map type: how an operand is read at a multi-index of the shape a
// kernel iterates. A View maps each index of `shape` to an element offset of a dense buffer
// (offset + Σ index·stride, strides in elements: 0 broadcasts, negative reverses) and, where
// pad or concat put it, restricts that to a window per dim, outside which it reads `fill`.
// broadcast_to, permute, slice, pad, concat's operands and (when strides allow) reshape are all
// Views of their operand; coalesce() merges the dims a set of Views walks in lockstep.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "lazytensor/lower/graph.hpp"

namespace lt::lower {

struct View {
  Shape shape;                   // the index space
  std::vector<int64_t> strides;  // elements per index step, per dim
  int64_t offset = 0;            // element offset of index 0
  std::vector<int64_t> lo, hi;   // valid window [lo, hi) per dim; empty: valid everywhere
  double fill = 0;               // what is read outside the window

  // The dense row-major buffer of `shape`.
  static View dense(std::span<const int64_t> shape);
  bool masked() const { return !lo.empty(); }
  bool contiguous() const;                           // dense row-major and unmasked
  int64_t at(std::span<const int64_t> index) const;  // offset of an index (in the window)
  bool valid(std::span<const int64_t> index) const;  // in the window

  // The same buffer read at the index space of a node applied to this view.
  View broadcast_to(std::span<const int64_t> out) const;  // NumPy rules (right-aligned)
  View permute(std::span<const int64_t> perm) const;      // out dim i = this dim perm[i]
  View slice(std::span<const int64_t> starts, std::span<const int64_t> steps,
             std::span<const int64_t> out) const;  // IR form: every touched index valid
  View pad(std::span<const int64_t> before, std::span<const int64_t> after, double value) const;
  // Operand `this` of a concat along `axis`, as seen from the output (extent `out_dim` on
  // axis), where it starts at `at`.
  View concat_part(int64_t axis, int64_t at, int64_t out_dim) const;
  // The view of `shape` reinterpreted row-major (an unmasked view whose dims split or merge
  // without crossing a stride break); nullopt when that needs a copy.
  std::optional<View> reshape(std::span<const int64_t> out) const;
};

// How node `user` of `graph` reads its operand `k`, as a View of the operand's dense buffer over
// the user's own index space: broadcast by elementwise and creation ops (a random op's seed) and
// broadcast_to; a view through slice, permute, pad, reshape and each part of concat; dense by a
// reduction (over its operand's own shape). nullopt where no View says it (gather, contractions,
// an operand of higher rank, a reshape that needs a copy). The code generators' one answer.
std::optional<View> operand_view(const lt_graph& graph, int32_t user, size_t k);

// The iteration space of several unmasked Views over one shape, after dropping size-1 dims
// and merging neighbours that are contiguous for every view: fewer, longer loops. At least one
// dim (a single element gives dims {1} with stride 0).
struct Loop {
  Shape dims;
  std::vector<std::vector<int64_t>> strides;  // per view, per dim
  std::vector<int64_t> offsets;               // per view
};
Loop coalesce(std::span<const View> views);

}  // namespace lt::lower
