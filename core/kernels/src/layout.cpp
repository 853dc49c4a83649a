// layout.cpp — data movement: reshape, permute, broadcast_to, slice (lower::View index maps),
// concat, pad, gather, scatter_add. Copies are per element size, not per dtype.
#include <algorithm>

#include "kernels.h"
#include "lazytensor/lower/element.hpp"
#include "lazytensor/lower/view.hpp"

namespace lt::host {
namespace {

size_t esize(const TensorArg& t) {
  return lt_dtype_size(t.dtype);
}

// ---- reshape ----

void reshape_kernel(const KernelCall& c) {
  const size_t bytes = static_cast<size_t>(c.out.numel) * esize(c.out);
  if (bytes) std::memcpy(c.out.data, c.in[0].data, bytes);
}

void prepare_reshape(PrepareCall& c) {
  c.fn = reshape_kernel;
}

// ---- strided views: permute, broadcast_to, slice ----
// params: [0] element offset into the source, [1..rank] source strides per output dim.

void view_kernel(const KernelCall& c) {
  const size_t es = esize(c.out);
  const char* src = c.in[0].data + c.params[0] * static_cast<int64_t>(es);
  strided_copy(c.out.data, c.out.shape, c.out.rank, src, c.params + 1, es);
}

// Operand 0 read through view v: params [0] offset, [1..rank] strides.
void push_view(PrepareCall& c, const lower::View& v) {
  c.params->push_back(v.offset);
  c.params->insert(c.params->end(), v.strides.begin(), v.strides.end());
  c.fn = view_kernel;
}
lower::View operand_view(const PrepareCall& c) {
  return lower::View::dense({c.in[0].shape, static_cast<size_t>(c.in[0].rank)});
}
std::span<const int64_t> out_shape(const PrepareCall& c) {
  return {c.out.shape, static_cast<size_t>(c.out.rank)};
}

void prepare_permute(PrepareCall& c) {
  push_view(c, operand_view(c).permute(c.attrs.ints("perm")));
}
void prepare_broadcast_to(PrepareCall& c) {
  push_view(c, operand_view(c).broadcast_to(out_shape(c)));
}
void prepare_slice(PrepareCall& c) {
  push_view(c, operand_view(c).slice(c.attrs.ints("starts"), c.attrs.ints("steps"), out_shape(c)));
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
  c.params->push_back(c.attrs.i("axis"));
  c.fn = concat_kernel;
}

// ---- pad ----
// params: [0] value (double bits), [1..rank] before

// `count` elements of `es` bytes, each the bytes of `v` (typed stores, not a call per element).
void fill_elements(char* dst, int64_t count, const char* v, size_t es) {
  auto fill = [&](auto tag) {
    using U = decltype(tag);
    U u;
    std::memcpy(&u, v, sizeof u);
    std::fill_n(reinterpret_cast<U*>(dst), count, u);
  };
  if (es == 1)
    fill(uint8_t{});
  else if (es == 2)
    fill(uint16_t{});
  else if (es == 4)
    fill(uint32_t{});
  else
    fill(uint64_t{});
}

// One output row (innermost dim) at a time: rows outside the operand are filled, rows through
// it get the fill before and after one copy of the operand's row, so every output byte is
// written once (the GPT step's slice gradients: 3 pads of [32, 128, 768] per layer).
void pad_kernel(const KernelCall& c) {
  const size_t es = esize(c.out);
  alignas(8) char v[8];
  lower::store_element(c.out.dtype, read_double(c.params), v);
  if (c.out.numel == 0) return;
  const TensorArg& a = c.in[0];
  const int r = c.out.rank;
  const int64_t orow = r ? c.out.shape[r - 1] : 1, arow = r ? a.shape[r - 1] : 1;
  const int64_t* before = c.params + 1;
  const int64_t lead = r ? before[r - 1] : 0;
  char* out = c.out.data;
  parallel_for(c.out.numel / orow, orow, [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      char* dst = out + q * orow * static_cast<int64_t>(es);
      // The operand's row under output row q, or -1 when q lies in the padding.
      int64_t src = a.numel > 0 ? 0 : -1, rem = q, scale = 1;
      for (int i = r - 2; i >= 0 && src >= 0; --i) {
        const int64_t at = rem % c.out.shape[i] - before[i];
        rem /= c.out.shape[i];
        if (at < 0 || at >= a.shape[i])
          src = -1;
        else
          src += at * scale;
        scale *= a.shape[i];
      }
      if (src < 0) {
        fill_elements(dst, orow, v, es);
        continue;
      }
      fill_elements(dst, lead, v, es);
      std::memcpy(dst + lead * static_cast<int64_t>(es),
                  a.data + src * arow * static_cast<int64_t>(es), static_cast<size_t>(arow) * es);
      fill_elements(dst + (lead + arow) * static_cast<int64_t>(es), orow - lead - arow, v, es);
    }
  });
}

void prepare_pad(PrepareCall& c) {
  if (!is_numeric(c.out.dtype) && c.out.dtype != LT_DTYPE_BOOL) return;
  push_double(*c.params, c.attrs.f("value"));
  std::vector<int64_t> before = c.attrs.ints("before");
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

void prepare_gather(PrepareCall& c) {
  c.params->push_back(c.attrs.i("axis"));
  c.fn = gather_kernel;
}

void prepare_scatter_add(PrepareCall& c) {
  if (!is_numeric(c.out.dtype) && c.out.dtype != LT_DTYPE_BOOL) return;
  c.params->push_back(c.attrs.i("axis"));
  c.fn = LT_HOST_PICK_ALL(c.out.dtype, scatter_add_kernel);
}

}  // namespace

void add_layout_ops(PrepareFn* t) {
  t[kOpReshape] = prepare_reshape;
  t[kOpPermute] = prepare_permute;
  t[kOpBroadcastTo] = prepare_broadcast_to;
  t[kOpSlice] = prepare_slice;
  t[kOpConcat] = prepare_concat;
  t[kOpPad] = prepare_pad;
  t[kOpGather] = prepare_gather;
  t[kOpScatterAdd] = prepare_scatter_add;
}

}  // namespace lt::host
