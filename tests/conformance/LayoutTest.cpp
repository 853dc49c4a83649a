// LayoutTest.cpp — conformance of matmul and the layout ops (reshape, permute, broadcast_to,
// slice with negative steps and clamping, concat, pad, gather, scatter_add) against plain loops.
#include "conformance.h"

#include <limits>

namespace ltc {
namespace {

using lt::DType;
using lt::Tensor;

class Layout : public ConformanceTest {};
LT_CONFORMANCE_SUITE(Layout);

// NumPy matmul: 1-D operands are promoted ([K] -> [1,K] / [K,1]) and squeezed afterwards.
Host ref_matmul(Host a, Host b) {
  bool a1 = a.shape.size() == 1, b1 = b.shape.size() == 1;
  if (a1) a.shape.insert(a.shape.begin(), 1);
  if (b1) b.shape.push_back(1);
  int64_t M = a.shape[a.shape.size() - 2], K = a.shape.back(), N = b.shape.back();
  Shape ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  Shape batch = broadcast_shapes(ba, bb);
  Shape out = batch;
  out.push_back(M);
  out.push_back(N);
  Host r{a.dtype, out, {}};
  for (const Shape& idx : all_indices(out)) {
    Shape bi(idx.begin(), idx.end() - 2);
    int64_t i = idx[idx.size() - 2], j = idx.back();
    int64_t oa = broadcast_flat(bi, ba) * M * K, ob = broadcast_flat(bi, bb) * K * N;
    double s = 0;
    for (int64_t k = 0; k < K; ++k) s += a.v[size_t(oa + i * K + k)] * b.v[size_t(ob + k * N + j)];
    r.v.push_back(round_to(a.dtype, s));
  }
  if (a1) r.shape.erase(r.shape.end() - 2);
  if (b1) r.shape.pop_back();
  return r;
}

TEST_P(Layout, MatmulTwoDBatchedBroadcastAndVectors) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3}, {3, 4}},       {{1, 1}, {1, 1}},
      {{5, 7}, {7, 1}},       {{3}, {3, 2}},
      {{2, 3}, {3}},          {{4}, {4}},
      {{2, 3, 4}, {4, 5}},    {{3, 4}, {2, 4, 2}},
      {{2, 2, 3}, {2, 3, 2}}, {{2, 1, 3, 4}, {3, 4, 2}},
      {{2, 0}, {0, 3}},       {{0, 3}, {3, 2}},
      {{17, 33}, {33, 9}},
  };
  for (DType dt : float_dtypes()) {
    for (const auto& [sa, sb] : cases) {
      Host a = make(dt, sa, Fill::kAny, 30), b = make(dt, sb, Fill::kAny, 31);
      expect_close_scaled(
          lt::matmul(upload(dev(), a), upload(dev(), b)), ref_matmul(a, b),
          ref_matmul(abs_of(a), abs_of(b)), tol(OpClass::kMatmul, dt),
          std::string("matmul ") + lt::dtype_name(dt) + " " + str(sa) + " x " + str(sb));
    }
    // Non-contiguous: transposed views on both sides.
    Host a = make(dt, {3, 5}, Fill::kAny, 32), b = make(dt, {5, 4}, Fill::kAny, 33);
    expect_close_scaled(lt::matmul(upload_permuted(dev(), a), upload_reversed(dev(), b)),
                        ref_matmul(a, b), ref_matmul(abs_of(a), abs_of(b)),
                        tol(OpClass::kMatmul, dt),
                        std::string("matmul non-contiguous ") + lt::dtype_name(dt));
  }
}

TEST_P(Layout, ReshapeIncludingMinusOneRank0AndViews) {
  for (DType dt : {lt::f32, lt::f64, lt::i32, lt::i64, lt::bool_}) {
    Host a = make(dt, {2, 3, 4}, Fill::kAny, 34);
    for (Shape s : std::vector<Shape>{{24}, {4, 6}, {2, -1}, {-1, 3, 2}, {1, 24, 1}}) {
      Shape want = s;
      for (int64_t& d : want) {
        if (d == -1) d = 24 / -numel_of(s);
      }
      expect_close(upload(dev(), a).reshape(s), Host{dt, want, a.v}, {},
                   std::string("reshape ") + lt::dtype_name(dt) + " to " + str(s));
    }
    // Reshaping a permuted view reads it in its logical row-major order.
    expect_close(upload_permuted(dev(), a).reshape({6, 4}), Host{dt, {6, 4}, a.v}, {},
                 "reshape of a permuted view");
    Host one = make(dt, {1, 1}, Fill::kAny, 35);
    expect_close(upload(dev(), one).reshape({}), Host{dt, {}, one.v}, {}, "reshape to rank 0");
    Host z = make(dt, {0, 4}, Fill::kAny, 36);
    expect_close(upload(dev(), z).reshape({2, 0, 2}), Host{dt, {2, 0, 2}, {}}, {},
                 "reshape of empty");
  }
}

TEST_P(Layout, PermuteEveryPermutationOfRank3) {
  Host a = make(lt::f32, {2, 3, 4}, Fill::kAny, 37);
  Shape perm = {0, 1, 2};
  do {
    Shape out = {a.shape[size_t(perm[0])], a.shape[size_t(perm[1])], a.shape[size_t(perm[2])]};
    Host want{a.dtype, out, {}};
    for (const Shape& idx : all_indices(out)) {
      Shape src(3);
      for (size_t i = 0; i < 3; ++i) src[size_t(perm[i])] = idx[i];
      want.v.push_back(a.at(src));
    }
    expect_close(upload(dev(), a).permute(perm), want, {}, "permute " + str(perm));
    // Permute of a permuted view composes.
    expect_close(upload_permuted(dev(), a).permute(perm), want, {},
                 "permute of a view " + str(perm));
  } while (std::next_permutation(perm.begin(), perm.end()));
  Host i = make(lt::i64, {3, 0}, Fill::kAny, 38);
  expect_close(upload(dev(), i).permute({1, 0}), Host{lt::i64, {0, 3}, {}}, {}, "permute empty");
}

TEST_P(Layout, BroadcastTo) {
  for (auto [from, to] : std::vector<std::pair<Shape, Shape>>{
           {{3, 1}, {2, 3, 4}}, {{}, {2, 2}}, {{4}, {3, 4}}, {{1}, {0}}, {{2, 1}, {2, 1}}}) {
    for (DType dt : {lt::f32, lt::i32, lt::bool_}) {
      Host a = make(dt, from, Fill::kAny, 39);
      Host want{dt, to, {}};
      for (const Shape& idx : all_indices(to))
        want.v.push_back(a.v[size_t(broadcast_flat(idx, from))]);
      expect_close(upload(dev(), a).broadcast_to(to), want, {},
                   "broadcast_to " + str(from) + " -> " + str(to));
    }
  }
}

// Python's slice.indices: clamps start/stop and returns the positions taken along one axis.
std::vector<int64_t> py_slice(int64_t start, int64_t stop, int64_t step, int64_t dim) {
  auto fix = [&](int64_t x) {
    if (x < 0) x += dim;
    if (step > 0) return std::clamp<int64_t>(x, 0, dim);
    return std::clamp<int64_t>(x, -1, dim - 1);
  };
  int64_t s = fix(start), e = fix(stop);
  std::vector<int64_t> out;
  for (int64_t i = s; step > 0 ? i < e : i > e; i += step) out.push_back(i);
  return out;
}

Host ref_slice(const Host& a, const Shape& starts, const Shape& stops, const Shape& steps) {
  size_t r = a.shape.size();
  std::vector<std::vector<int64_t>> pos(r);
  Shape out(r);
  for (size_t d = 0; d < r; ++d) {
    pos[d] = py_slice(starts[d], stops[d], steps[d], a.shape[d]);
    out[d] = int64_t(pos[d].size());
  }
  Host h{a.dtype, out, {}};
  for (const Shape& idx : all_indices(out)) {
    Shape src(r);
    for (size_t d = 0; d < r; ++d) src[d] = pos[d][size_t(idx[d])];
    h.v.push_back(a.at(src));
  }
  return h;
}

TEST_P(Layout, SliceWithNegativeStepsAndClamping) {
  const int64_t kBig = std::numeric_limits<int64_t>::max();
  struct Case {
    Shape starts, stops, steps;
  };
  const std::vector<Case> cases = {
      {{0, 0, 0}, {2, 3, 4}, {1, 1, 1}},
      {{1, 0, 1}, {2, 3, 4}, {1, 2, 2}},
      {{-1, -1, -1}, {-3, -4, -5}, {-1, -1, -1}},
      {{1, 2, 3}, {-kBig, -kBig, -kBig}, {-1, -2, -3}},
      {{0, -2, 10}, {kBig, kBig, -10}, {1, 1, -2}},
      {{-100, 1, 2}, {100, 1, 3}, {1, 1, 1}},
      {{0, 2, 0}, {2, 0, 4}, {1, -1, 3}},
      {{5, 5, 5}, {6, 6, 6}, {1, 1, 1}},
  };
  for (DType dt : {lt::f32, lt::f64, lt::i32, lt::i64, lt::bool_}) {
    Host a = make(dt, {2, 3, 4}, Fill::kAny, 40);
    for (const Case& c : cases) {
      std::string what = std::string("slice ") + lt::dtype_name(dt) + " starts " + str(c.starts) +
                         " stops " + str(c.stops) + " steps " + str(c.steps);
      Host want = ref_slice(a, c.starts, c.stops, c.steps);
      expect_close(upload(dev(), a).slice(c.starts, c.stops, c.steps), want, {}, what);
      expect_close(upload_permuted(dev(), a).slice(c.starts, c.stops, c.steps), want, {},
                   what + " (of a permuted view)");
    }
  }
  // Slice of a slice with negative steps composes.
  Host v = make(lt::f32, {10}, Fill::kAny, 41);
  Host once = ref_slice(v, {8}, {0}, {-2});
  expect_close(upload(dev(), v).slice({8}, {0}, {-2}).slice({-1}, {-kBig}, {-1}),
               ref_slice(once, {-1}, {-kBig}, {-1}), {}, "slice of a slice");
}

TEST_P(Layout, ConcatAlongEveryAxisIncludingEmptyPieces) {
  for (DType dt : {lt::f32, lt::f64, lt::i32, lt::i64, lt::bool_}) {
    for (int64_t axis : {0, 1, 2, -1}) {
      size_t ax = size_t(axis < 0 ? axis + 3 : axis);
      std::vector<Host> parts;
      for (int64_t len : {2, 0, 3}) {
        Shape s = {2, 3, 4};
        s[ax] = len;
        parts.push_back(make(dt, s, Fill::kAny, uint32_t(42 + len)));
      }
      Shape out = {2, 3, 4};
      out[ax] = 5;
      Host want{dt, out, {}};
      for (Shape idx : all_indices(out)) {
        int64_t i = idx[ax];
        size_t p = 0;
        while (i >= parts[p].shape[ax]) i -= parts[p++].shape[ax];
        idx[ax] = i;
        want.v.push_back(parts[p].at(idx));
      }
      std::vector<Tensor> ts = {upload(dev(), parts[0]), upload(dev(), parts[1]),
                                upload_permuted(dev(), parts[2])};
      expect_close(lt::concat(ts, axis), want, {},
                   std::string("concat ") + lt::dtype_name(dt) + " axis " + std::to_string(axis));
    }
  }
  Host single = make(lt::f32, {3}, Fill::kAny, 45);
  expect_close(lt::concat({upload(dev(), single)}, 0), single, {}, "concat of one tensor");
}

TEST_P(Layout, PadWithValue) {
  for (DType dt : {lt::f32, lt::f64, lt::i32, lt::i64}) {
    Host a = make(dt, {2, 3}, Fill::kAny, 46);
    for (auto [before, after, value] : std::vector<std::tuple<Shape, Shape, double>>{
             {{1, 0}, {0, 2}, 0.0}, {{0, 0}, {0, 0}, 5.0}, {{2, 1}, {1, 3}, -7.0}}) {
      Shape out = {2 + before[0] + after[0], 3 + before[1] + after[1]};
      Host want{dt, out, {}};
      for (const Shape& idx : all_indices(out)) {
        int64_t i = idx[0] - before[0], j = idx[1] - before[1];
        bool in = i >= 0 && i < 2 && j >= 0 && j < 3;
        want.v.push_back(in ? a.at({i, j}) : round_to(dt, value));
      }
      expect_close(upload_permuted(dev(), a).pad(before, after, value), want, {},
                   std::string("pad ") + lt::dtype_name(dt) + " before " + str(before) + " after " +
                       str(after));
    }
  }
  Host z = make(lt::f32, {0, 2}, Fill::kAny, 47);
  expect_close(upload(dev(), z).pad({1, 0}, {1, 1}, 2.0),
               from_values(lt::f32, {2, 3}, {2, 2, 2, 2, 2, 2}), {}, "pad of an empty tensor");
}

Host ref_gather(const Host& a, const Host& idx, int64_t axis) {
  size_t ax = size_t(axis);
  int64_t dim = a.shape[ax];
  Shape out(a.shape.begin(), a.shape.begin() + axis);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), a.shape.begin() + axis + 1, a.shape.end());
  Host h{a.dtype, out, {}};
  size_t ir = idx.shape.size();
  for (const Shape& o : all_indices(out)) {
    Shape ii(o.begin() + axis, o.begin() + axis + int64_t(ir));
    int64_t k = int64_t(idx.at(ii));
    k = std::clamp<int64_t>(k, 0, dim - 1);
    Shape src(o.begin(), o.begin() + axis);
    src.push_back(k);
    src.insert(src.end(), o.begin() + axis + int64_t(ir), o.end());
    h.v.push_back(a.at(src));
  }
  return h;
}

TEST_P(Layout, GatherClampsOutOfRangeIndices) {
  for (DType it : int_dtypes()) {
    for (DType dt : {lt::f32, lt::f64, lt::i32, lt::i64}) {
      Host a = make(dt, {3, 4, 2}, Fill::kAny, 48);
      for (int64_t axis : {0, 1, 2}) {
        for (Host idx :
             {from_values(it, {5}, {0, 2, -1, 100, 1}), from_values(it, {2, 2}, {1, 1, 0, -5}),
              from_values(it, {}, {1}), from_values(it, {0}, {})}) {
          std::string what = std::string("gather ") + lt::dtype_name(dt) + " axis " +
                             std::to_string(axis) + " indices " + lt::dtype_name(it) +
                             str(idx.shape);
          expect_close(lt::gather(upload(dev(), a), upload(dev(), idx), axis),
                       ref_gather(a, idx, axis), {}, what);
          expect_close(lt::gather(upload_permuted(dev(), a), upload_reversed(dev(), idx), axis),
                       ref_gather(a, idx, axis), {}, what + " (non-contiguous)");
        }
      }
    }
  }
}

TEST_P(Layout, ScatterAddAccumulatesRepeatsAndDropsOutOfRange) {
  for (DType it : int_dtypes()) {
    for (DType dt : {lt::f32, lt::f64, lt::i32, lt::i64}) {
      Host a = make(dt, {4, 3}, Fill::kAny, 49);
      for (int64_t axis : {0, 1}) {
        Host idx = from_values(it, {5}, {1, 1, -1, 7, 0});  // repeated, negative, too large
        Shape us = a.shape;
        us[size_t(axis)] = 5;
        Host upd = make(dt, us, Fill::kAny, 50);
        Host want = a;
        int64_t dim = a.shape[size_t(axis)];
        for (const Shape& u : all_indices(us)) {
          int64_t k = int64_t(idx.v[size_t(u[size_t(axis)])]);
          if (k < 0 || k >= dim) continue;
          Shape dst = u;
          dst[size_t(axis)] = k;
          auto st = strides_of(a.shape);
          want.v[size_t(dst[0] * st[0] + dst[1] * st[1])] += upd.at(u);
        }
        for (double& x : want.v) x = round_to(dt, x);
        expect_close(
            lt::scatter_add(upload(dev(), a), upload(dev(), idx), upload(dev(), upd), axis), want,
            tol(OpClass::kReduce, dt),
            std::string("scatter_add ") + lt::dtype_name(dt) + " axis " + std::to_string(axis) +
                " indices " + lt::dtype_name(it));
      }
    }
  }
}

}  // namespace
}  // namespace ltc
