// kernels_layout.cpp — data movement: reshape, permute, broadcast_to, slice, concat, pad,
// gather, scatter_add. Copies are per element size, not per dtype.
#include <algorithm>

#include "kernels.h"

namespace lt::eager {
namespace {

size_t esize(const TensorArg& t) {
  return lt_dtype_size(t.dtype);
}

void expect_same_dtype(const PrepareCall& c, const ValueDesc& a) {
  if (c.out.dtype != a.dtype) {
    fail(LT_STATUS_DTYPE_MISMATCH, std::string(c.op) + ": output dtype " +
                                       lt_dtype_name(c.out.dtype) + " != operand dtype " +
                                       lt_dtype_name(a.dtype));
  }
}

std::string ints_str(const std::vector<int64_t>& v) {
  return shape_str(v.data(), static_cast<int>(v.size()));
}

// ---- reshape ----

void reshape_kernel(const KernelCall& c) {
  const size_t bytes = static_cast<size_t>(c.out.numel) * esize(c.out);
  if (bytes) std::memcpy(c.out.data, c.in[0].data, bytes);
}

void prepare_reshape(PrepareCall& c) {
  expect_operands(c, 1, 1);
  expect_same_dtype(c, c.in[0]);
  if (c.in[0].numel != c.out.numel) {
    fail(LT_STATUS_SHAPE_MISMATCH,
         "reshape: cannot reshape " + shape_str(c.in[0]) + " to " + shape_str(c.out));
  }
  c.fn = reshape_kernel;
}

// ---- strided views: permute, broadcast_to, slice ----
// params: [0] element offset into the source, [1..rank] source strides per output dim.

void view_kernel(const KernelCall& c) {
  const size_t es = esize(c.out);
  const char* src = c.in[0].data + c.params[0] * static_cast<int64_t>(es);
  strided_copy(c.out.data, c.out.shape, c.out.rank, src, c.params + 1, es);
}

void prepare_permute(PrepareCall& c) {
  expect_operands(c, 1, 1);
  const ValueDesc& a = c.in[0];
  expect_same_dtype(c, a);
  std::vector<int64_t> perm = attr_ints(c, "perm", static_cast<size_t>(a.rank));
  std::vector<uint8_t> seen(a.rank, 0);
  for (int64_t p : perm) {
    if (p < 0 || p >= a.rank || seen[p]) {
      fail(LT_STATUS_INVALID_ARGUMENT, "permute: perm " + ints_str(perm) +
                                           " is not a permutation of 0.." +
                                           std::to_string(a.rank - 1));
    }
    seen[p] = 1;
  }
  if (c.out.rank != a.rank) fail(LT_STATUS_SHAPE_MISMATCH, "permute: output rank differs");
  int64_t st[kMaxRank];
  dense_strides(a.shape, a.rank, st);
  c.params->push_back(0);
  for (int i = 0; i < a.rank; ++i) {
    if (c.out.shape[i] != a.shape[perm[i]]) {
      fail(LT_STATUS_SHAPE_MISMATCH, "permute: output shape " + shape_str(c.out) +
                                         " does not match " + shape_str(a) + " permuted by " +
                                         ints_str(perm));
    }
    c.params->push_back(st[perm[i]]);
  }
  c.fn = view_kernel;
}

void prepare_broadcast_to(PrepareCall& c) {
  expect_operands(c, 1, 1);
  const ValueDesc& a = c.in[0];
  expect_same_dtype(c, a);
  if (a.rank > c.out.rank) {
    fail(LT_STATUS_SHAPE_MISMATCH,
         "broadcast_to: " + shape_str(a) + " does not broadcast to " + shape_str(c.out));
  }
  int64_t st[kMaxRank];
  dense_strides(a.shape, a.rank, st);
  c.params->push_back(0);
  for (int i = 0; i < c.out.rank; ++i) {
    const int ai = i - (c.out.rank - a.rank);
    if (ai < 0) {
      c.params->push_back(0);
      continue;
    }
    if (a.shape[ai] == c.out.shape[i]) {
      c.params->push_back(st[ai]);
    } else if (a.shape[ai] == 1) {
      c.params->push_back(0);
    } else {
      fail(LT_STATUS_SHAPE_MISMATCH,
           "broadcast_to: " + shape_str(a) + " does not broadcast to " + shape_str(c.out));
    }
  }
  c.fn = view_kernel;
}

void prepare_slice(PrepareCall& c) {
  expect_operands(c, 1, 1);
  const ValueDesc& a = c.in[0];
  expect_same_dtype(c, a);
  std::vector<int64_t> starts = attr_ints(c, "starts", static_cast<size_t>(a.rank));
  std::vector<int64_t> steps = attr_ints(c, "steps", static_cast<size_t>(a.rank));
  if (c.out.rank != a.rank) fail(LT_STATUS_SHAPE_MISMATCH, "slice: output rank differs");
  int64_t st[kMaxRank];
  dense_strides(a.shape, a.rank, st);
  int64_t offset = 0;
  std::vector<int64_t> strides;
  for (int i = 0; i < a.rank; ++i) {
    const int64_t n = c.out.shape[i], s = steps[i], b = starts[i];
    bool ok = s != 0 && s > INT64_MIN / 2 && s < INT64_MAX / 2;
    if (ok && n > 0) {
      // first and last touched index must lie in [0, dim)
      ok = b >= 0 && b < a.shape[i] && (n - 1) <= (s > 0 ? (a.shape[i] - 1 - b) / s : b / -s);
    }
    if (!ok) {
      fail(LT_STATUS_SHAPE_MISMATCH, "slice: starts " + ints_str(starts) + " steps " +
                                         ints_str(steps) + " with output " + shape_str(c.out) +
                                         " read outside " + shape_str(a));
    }
    if (n > 0) offset += b * st[i];
    strides.push_back(s * st[i]);
  }
  c.params->push_back(c.out.numel ? offset : 0);
  c.params->insert(c.params->end(), strides.begin(), strides.end());
  c.fn = view_kernel;
}

// ---- concat ----
// params: [0] axis

void concat_kernel(const KernelCall& c) {
  const int64_t axis = c.params[0];
  const size_t es = esize(c.out);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= c.out.shape[i];
  for (int64_t i = axis + 1; i < c.out.rank; ++i) inner *= c.out.shape[i];
  const int64_t out_row = c.out.shape[axis] * inner * static_cast<int64_t>(es);
  int64_t col = 0;
  for (size_t k = 0; k < c.num_in; ++k) {
    const int64_t row = c.in[k].shape[axis] * inner * static_cast<int64_t>(es);
    const char* src = c.in[k].data;
    char* dst = c.out.data + col;
    if (row > 0) {
      parallel_for(outer, row / static_cast<int64_t>(es), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          std::memcpy(dst + o * out_row, src + o * row, static_cast<size_t>(row));
        }
      });
    }
    col += row;
  }
}

void prepare_concat(PrepareCall& c) {
  expect_operands(c, 1, SIZE_MAX);
  const int64_t axis = attr_int(c, "axis");
  if (axis < 0 || axis >= c.out.rank) {
    fail(LT_STATUS_INVALID_ARGUMENT, "concat: axis " + std::to_string(axis) +
                                         " out of range for rank " + std::to_string(c.out.rank));
  }
  int64_t total = 0;
  for (size_t k = 0; k < c.num_in; ++k) {
    const ValueDesc& a = c.in[k];
    expect_same_dtype(c, a);
    bool ok = a.rank == c.out.rank;
    for (int i = 0; ok && i < a.rank; ++i) {
      if (i != axis && a.shape[i] != c.out.shape[i]) ok = false;
    }
    if (!ok) {
      fail(LT_STATUS_SHAPE_MISMATCH, "concat: operand " + std::to_string(k) + " shape " +
                                         shape_str(a) + " does not fit output " + shape_str(c.out) +
                                         " on axis " + std::to_string(axis));
    }
    total += a.shape[axis];
  }
  if (total != c.out.shape[axis]) {
    fail(LT_STATUS_SHAPE_MISMATCH, "concat: operand sizes on axis " + std::to_string(axis) +
                                       " sum to " + std::to_string(total) + ", output has " +
                                       std::to_string(c.out.shape[axis]));
  }
  c.params->push_back(axis);
  c.fn = concat_kernel;
}

// ---- pad ----
// params: [0] value (double bits), [1..rank] before

void pad_kernel(const KernelCall& c) {
  const size_t es = esize(c.out);
  alignas(8) char v[8];
  store_double_as(c.out.dtype, read_double(c.params), v);
  const int64_t n = c.out.numel;
  char* out = c.out.data;
  parallel_for(n, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) std::memcpy(out + i * static_cast<int64_t>(es), v, es);
  });
  const TensorArg& a = c.in[0];
  if (a.numel == 0) return;
  // Copy the operand into the interior, one innermost row at a time.
  int64_t ost[kMaxRank];
  dense_strides(c.out.shape, c.out.rank, ost);
  const int r = a.rank;
  const int64_t row = r ? a.shape[r - 1] : 1;
  const int64_t rows = a.numel / row;
  const int64_t* before = c.params + 1;
  parallel_for(rows, row, [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      int64_t rem = q, off = r ? before[r - 1] : 0;
      for (int i = r - 2; i >= 0; --i) {
        off += (rem % a.shape[i] + before[i]) * ost[i];
        rem /= a.shape[i];
      }
      std::memcpy(out + off * static_cast<int64_t>(es), a.data + q * row * static_cast<int64_t>(es),
                  static_cast<size_t>(row) * es);
    }
  });
}

void prepare_pad(PrepareCall& c) {
  expect_operands(c, 1, 1);
  const ValueDesc& a = c.in[0];
  expect_same_dtype(c, a);
  expect_dtype_in(c, a.dtype, true, true, true, "operand");
  std::vector<int64_t> before = attr_ints(c, "before", static_cast<size_t>(a.rank));
  std::vector<int64_t> after = attr_ints(c, "after", static_cast<size_t>(a.rank));
  bool ok = c.out.rank == a.rank;
  for (int i = 0; ok && i < a.rank; ++i) {
    ok = before[i] >= 0 && after[i] >= 0 && before[i] < (int64_t{1} << 48) &&
         after[i] < (int64_t{1} << 48) && c.out.shape[i] == a.shape[i] + before[i] + after[i];
  }
  if (!ok) {
    fail(LT_STATUS_SHAPE_MISMATCH, "pad: " + shape_str(a) + " padded by " + ints_str(before) +
                                       " / " + ints_str(after) + " does not give " +
                                       shape_str(c.out));
  }
  push_double(*c.params, attr_float(c, "value"));
  c.params->insert(c.params->end(), before.begin(), before.end());
  c.fn = pad_kernel;
}

// ---- gather / scatter_add ----
// Shared shape: a = [outer, dim, inner], indices = [J], out/updates = [outer, J, inner].
// params: [0] axis

struct TakeShape {
  int64_t outer = 1, dim = 1, inner = 1, count = 1;
};

TakeShape take_shape(const TensorArg& a, const TensorArg& idx, int64_t axis) {
  TakeShape t;
  for (int64_t i = 0; i < axis; ++i) t.outer *= a.shape[i];
  t.dim = a.shape[axis];
  for (int64_t i = axis + 1; i < a.rank; ++i) t.inner *= a.shape[i];
  t.count = idx.numel;
  return t;
}

int64_t index_at(const TensorArg& idx, int64_t j) {
  if (idx.dtype == LT_DTYPE_I32) return reinterpret_cast<const int32_t*>(idx.data)[j];
  return reinterpret_cast<const int64_t*>(idx.data)[j];
}

void gather_kernel(const KernelCall& c) {
  const TensorArg &a = c.in[0], &idx = c.in[1];
  const TakeShape t = take_shape(a, idx, c.params[0]);
  if (c.out.numel == 0) return;
  const size_t blk = static_cast<size_t>(t.inner) * esize(a);
  parallel_for(t.outer * t.count, t.inner, [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      const int64_t o = q / t.count, j = q % t.count;
      const int64_t d = std::clamp<int64_t>(index_at(idx, j), 0, t.dim - 1);
      std::memcpy(c.out.data + q * blk, a.data + (o * t.dim + d) * blk, blk);
    }
  });
}

template <class T>
void scatter_add_kernel(const KernelCall& c) {
  const TensorArg &a = c.in[0], &idx = c.in[1], &upd = c.in[2];
  const TakeShape t = take_shape(a, idx, c.params[0]);
  const size_t bytes = static_cast<size_t>(a.numel) * sizeof(T);
  if (bytes) std::memcpy(c.out.data, a.data, bytes);
  T* out = reinterpret_cast<T*>(c.out.data);
  const T* u = reinterpret_cast<const T*>(upd.data);
  // Parallel over `outer` only: repeated indices within one outer slice must accumulate
  // in a fixed order without races.
  parallel_for(t.outer, t.count * t.inner, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      for (int64_t j = 0; j < t.count; ++j) {
        const int64_t d = index_at(idx, j);
        if (d < 0 || d >= t.dim) continue;
        T* dst = out + (o * t.dim + d) * t.inner;
        const T* src = u + (o * t.count + j) * t.inner;
        for (int64_t i = 0; i < t.inner; ++i) {
          if constexpr (std::is_same_v<T, uint8_t>) {
            dst[i] = (dst[i] | src[i]) != 0;
          } else if constexpr (std::is_integral_v<T>) {
            using U = std::make_unsigned_t<T>;
            dst[i] = static_cast<T>(static_cast<U>(dst[i]) + static_cast<U>(src[i]));
          } else {
            dst[i] += src[i];
          }
        }
      }
    }
  });
}

// Checks gather's output shape rule against `g` (gather out or scatter updates).
void expect_take_shape(const PrepareCall& c, const ValueDesc& a, const ValueDesc& idx, int64_t axis,
                       const ValueDesc& g, const char* what) {
  bool ok = g.rank == a.rank - 1 + idx.rank;
  for (int i = 0; ok && i < g.rank; ++i) {
    int64_t want;
    if (i < axis)
      want = a.shape[i];
    else if (i < axis + idx.rank)
      want = idx.shape[i - axis];
    else
      want = a.shape[i - idx.rank + 1];
    ok = g.shape[i] == want;
  }
  if (!ok) {
    fail(LT_STATUS_SHAPE_MISMATCH, std::string(c.op) + ": " + what + " shape " + shape_str(g) +
                                       " != a " + shape_str(a) + " taken by indices " +
                                       shape_str(idx) + " on axis " + std::to_string(axis));
  }
}

int64_t prepare_take(PrepareCall& c) {
  const ValueDesc &a = c.in[0], &idx = c.in[1];
  expect_same_dtype(c, a);
  expect_dtype_in(c, a.dtype, true, true, true, "operand");
  if (!is_int(idx.dtype)) {
    fail(LT_STATUS_DTYPE_MISMATCH,
         std::string(c.op) + ": indices dtype " + lt_dtype_name(idx.dtype) + " is not i32/i64");
  }
  const int64_t axis = attr_int(c, "axis");
  if (axis < 0 || axis >= a.rank) {
    fail(LT_STATUS_INVALID_ARGUMENT, std::string(c.op) + ": axis " + std::to_string(axis) +
                                         " out of range for rank " + std::to_string(a.rank));
  }
  if (a.rank - 1 + idx.rank > kMaxRank) {
    fail(LT_STATUS_UNSUPPORTED, std::string(c.op) + ": result rank too large");
  }
  return axis;
}

void prepare_gather(PrepareCall& c) {
  expect_operands(c, 2, 2);
  const int64_t axis = prepare_take(c);
  expect_take_shape(c, c.in[0], c.in[1], axis, c.out, "output");
  if (c.out.numel > 0 && c.in[0].shape[axis] == 0) {
    fail(LT_STATUS_SHAPE_MISMATCH,
         "gather: cannot take from an empty axis of " + shape_str(c.in[0]));
  }
  c.params->push_back(axis);
  c.fn = gather_kernel;
}

void prepare_scatter_add(PrepareCall& c) {
  expect_operands(c, 3, 3);
  const int64_t axis = prepare_take(c);
  if (c.in[2].dtype != c.in[0].dtype) {
    fail(LT_STATUS_DTYPE_MISMATCH, std::string("scatter_add: updates dtype ") +
                                       lt_dtype_name(c.in[2].dtype) +
                                       " != " + lt_dtype_name(c.in[0].dtype));
  }
  if (!same_shape(c.out, c.in[0])) {
    fail(LT_STATUS_SHAPE_MISMATCH, "scatter_add: output shape " + shape_str(c.out) +
                                       " != operand shape " + shape_str(c.in[0]));
  }
  expect_take_shape(c, c.in[0], c.in[1], axis, c.in[2], "updates");
  c.params->push_back(axis);
  c.fn = LT_EAGER_PICK_ALL(c.out.dtype, scatter_add_kernel);
}

}  // namespace

void append_layout_ops(std::vector<OpDef>& ops) {
  ops.push_back({"reshape", prepare_reshape});
  ops.push_back({"permute", prepare_permute});
  ops.push_back({"broadcast_to", prepare_broadcast_to});
  ops.push_back({"slice", prepare_slice});
  ops.push_back({"concat", prepare_concat});
  ops.push_back({"pad", prepare_pad});
  ops.push_back({"gather", prepare_gather});
  ops.push_back({"scatter_add", prepare_scatter_add});
}

}  // namespace lt::eager
