// lower_graphs.hpp — what the suites over hand-built lt_graphs (tests/lower, tests/fusion) share:
// attribute helpers, softmax over the last axis as the core decomposes it, and a row sum read
// through a strided slice.
#pragma once

#include <cstdint>

#include "lazytensor/lower/graph.hpp"

namespace lt::test {

inline lt_attr ints_attr(const char* name, const int64_t* v, size_t n) {
  return lt_attr{name, LT_ATTR_INTS, 0, 0.0, v, n, nullptr};
}
inline lt_attr axes_attr(const int64_t* axes, size_t n) {
  return ints_attr("axes", axes, n);
}
inline lt_attr keepdims_attr(int64_t k) {
  return lt_attr{"keepdims", LT_ATTR_INT, k, 0.0, nullptr, 0, nullptr};
}

// The nodes of one decomposed softmax: input, row max, x - max, exp, row sum, exp / sum.
struct DecomposedSoftmax {
  int32_t x, m, s, e, z, d;
};
// Appends softmax over axis 1 of an f32 [rows, width] input to `g` (inputs and outputs are the
// caller's to set). `broadcasts`: the row max and sum are broadcast_to the row explicitly before
// the subtraction and division, as the decomposition emits them; else read at [rows, 1].
inline DecomposedSoftmax add_decomposed_softmax(lower::OwnedGraph& g, int64_t rows, int64_t width,
                                                bool broadcasts = false) {
  const int64_t ax = 1;
  const lt_attr at[2] = {axes_attr(&ax, 1), keepdims_attr(1)};  // copied by add()
  auto row = [&](int32_t v) {
    return broadcasts ? g.add("broadcast_to", LT_DTYPE_F32, {rows, width}, {v}) : v;
  };
  DecomposedSoftmax n{};
  n.x = g.add("input", LT_DTYPE_F32, {rows, width}, {});
  n.m = g.add("max", LT_DTYPE_F32, {rows, 1}, {n.x}, at, 2);
  n.s = g.add("sub", LT_DTYPE_F32, {rows, width}, {n.x, row(n.m)});
  n.e = g.add("exp", LT_DTYPE_F32, {rows, width}, {n.s});
  n.z = g.add("sum", LT_DTYPE_F32, {rows, 1}, {n.e}, at, 2);
  n.d = g.add("div", LT_DTYPE_F32, {rows, width}, {n.e, row(n.z)});
  return n;
}

// The nodes of a row sum read through a slice that steps by 2 along the row.
struct StridedRowSum {
  int32_t x, sl, s;
};
// Appends sum over axis 1 of x[:, 1:2 * half:2] ([rows, half]) for an f32 [rows, width] input x
// (width >= 2 * half) to `g` (inputs and outputs are the caller's to set).
inline StridedRowSum add_strided_row_sum(lower::OwnedGraph& g, int64_t rows, int64_t width,
                                         int64_t half) {
  const int64_t starts[2] = {0, 1}, stops[2] = {rows, 2 * half}, steps[2] = {1, 2}, ax = 1;
  const lt_attr sa[3] = {ints_attr("starts", starts, 2), ints_attr("stops", stops, 2),
                         ints_attr("steps", steps, 2)};  // copied by add()
  const lt_attr ra[2] = {axes_attr(&ax, 1), keepdims_attr(0)};
  StridedRowSum n{};
  n.x = g.add("input", LT_DTYPE_F32, {rows, width}, {});
  n.sl = g.add("slice", LT_DTYPE_F32, {rows, half}, {n.x}, sa, 3);
  n.s = g.add("sum", LT_DTYPE_F32, {rows}, {n.sl}, ra, 2);
  return n;
}

}  // namespace lt::test
