// ops/gather_scatter.cpp — ONNX indexing ops: Gather*, Scatter*, Compress, ReverseSequence, OneHot.
#include "common.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

namespace lt::onnx::detail {

void add_gather_scatter_ops(std::map<std::string, OpEntry>& t) {
  t["Gather"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                   (void)n;
                   int64_t axis = c.attr_i("axis", 0);
                   if (all_host({in.at(0), in.at(1)})) return {host_gather(c, in[0], in[1], axis)};
                   Tensor x = c.T(in[0]);
                   int64_t r = static_cast<int64_t>(x.rank());
                   axis = norm_axis(c, axis, r);
                   Tensor idx = wrap_index(c, c.T(in[1]), x.shape()[axis]);
                   return one(c, x.gather(idx, axis), in[0].ot);
                 },
                 1};
  t["GatherElements"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                           (void)n;
                           Tensor x = c.T(in.at(0));
                           auto s = x.shape();
                           int64_t axis =
                               norm_axis(c, c.attr_i("axis", 0), static_cast<int64_t>(s.size()));
                           Tensor idx = wrap_index(c, c.T(in.at(1)), s[axis]);
                           Tensor flat = flat_index(c, s, idx, axis);
                           return one(c, x.reshape({numel_of(s)}).gather(flat, 0), in[0].ot);
                         },
                         11};
  t["GatherND"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        Tensor x = c.T(in.at(0));
        Tensor idx = c.T(in.at(1));
        if (idx.dtype() != LT_DTYPE_I64) idx = idx.cast(LT_DTYPE_I64);
        auto s = x.shape();
        auto is = idx.shape();
        int64_t b = c.attr_i("batch_dims", 0);
        int64_t q = is.back();
        // Flat index over the batch dims and the q indexed dims.
        std::vector<int64_t> lead(s.begin(), s.begin() + b + q);
        std::vector<int64_t> rest(s.begin() + b + q, s.end());
        auto st = strides_of(lead);
        Tensor flat;
        std::vector<int64_t> out_idx_shape(is.begin(), is.end() - 1);
        for (int64_t k = 0; k < q; ++k) {
          Tensor ik =
              slice1(idx, static_cast<int64_t>(is.size() - 1), k, k + 1).reshape(out_idx_shape);
          ik = wrap_index(c, ik, s[b + k]);
          Tensor term = ik * sc(c, ik, double(st[b + k]));
          flat = flat.defined() ? flat + term : term;
        }
        for (int64_t k = 0; k < b; ++k) {
          std::vector<int64_t> vs(out_idx_shape.size(), 1);
          vs[k] = is[k];
          Tensor ar = lt::arange(c.dev, 0, double(is[k]), 1, LT_DTYPE_I64).reshape(vs);
          flat = flat + ar * sc(c, ar, double(st[k]));
        }
        std::vector<int64_t> xs = {numel_of(lead)};
        for (int64_t v : rest) xs.push_back(v);
        return one(c, x.reshape(xs).gather(flat, 0), in[0].ot);
      },
      11};
  auto scatter_elems = [](Ctx& c, Vals& in, int64_t axis, const std::string& red) -> Vals {
    Tensor x = c.T(in.at(0));
    auto s = x.shape();
    axis = norm_axis(c, axis, static_cast<int64_t>(s.size()));
    Tensor idx = wrap_index(c, c.T(in.at(1)), s[axis]);
    Tensor upd = c.T(in.at(2));
    Tensor flat = flat_index(c, s, idx, axis);
    int64_t m = numel_of(flat.shape()), N = numel_of(s);
    flat = flat.reshape({m});
    upd = upd.reshape({m});
    Tensor xf = x.reshape({N});
    Tensor added = lt::zeros(c.dev, {N}, x.dtype()).scatter_add(flat, upd, 0);
    Tensor r;
    if (red == "add") {
      r = xf + added;
    } else if (red == "none" || red.empty()) {
      Tensor hit =
          lt::zeros(c.dev, {N}, LT_DTYPE_I64)
              .scatter_add(flat, lt::ones(c.dev, {m}, LT_DTYPE_I64), 0) > c.scalar(0, LT_DTYPE_I64);
      r = lt::where(hit, added, xf);
    } else {
      c.error("reduction '" + red + "' is not supported");
    }
    return one(c, r.reshape(s), in[0].ot);
  };
  t["ScatterElements"] = {[scatter_elems](Ctx& c, const NodeP&, Vals& in) -> Vals {
                            return scatter_elems(c, in, c.attr_i("axis", 0),
                                                 c.attr_s("reduction", "none"));
                          },
                          11};
  t["Scatter"] = {[scatter_elems](Ctx& c, const NodeP&, Vals& in) -> Vals {
                    return scatter_elems(c, in, c.attr_i("axis", 0), "none");
                  },
                  9};
  t["ScatterND"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        Tensor x = c.T(in.at(0));
        Tensor idx = c.T(in.at(1));
        if (idx.dtype() != LT_DTYPE_I64) idx = idx.cast(LT_DTYPE_I64);
        Tensor upd = c.T(in.at(2));
        auto s = x.shape();
        auto is = idx.shape();
        int64_t q = is.back();
        std::vector<int64_t> lead(s.begin(), s.begin() + q), rest(s.begin() + q, s.end());
        auto st = strides_of(lead);
        std::vector<int64_t> ish(is.begin(), is.end() - 1);
        Tensor flat;
        for (int64_t k = 0; k < q; ++k) {
          Tensor ik = wrap_index(
              c, slice1(idx, static_cast<int64_t>(is.size() - 1), k, k + 1).reshape(ish), s[k]);
          Tensor term = ik * sc(c, ik, double(st[k]));
          flat = flat.defined() ? flat + term : term;
        }
        int64_t m = numel_of(ish), L = numel_of(lead), R = numel_of(rest);
        flat = flat.reshape({m});
        Tensor u = upd.reshape({m, R});
        Tensor xf = x.reshape({L, R});
        Tensor added = lt::zeros(c.dev, {L, R}, x.dtype()).scatter_add(flat, u, 0);
        std::string red = c.attr_s("reduction", "none");
        Tensor r;
        if (red == "add") {
          r = xf + added;
        } else if (red == "none") {
          Tensor hit = lt::zeros(c.dev, {L}, LT_DTYPE_I64)
                           .scatter_add(flat, lt::ones(c.dev, {m}, LT_DTYPE_I64), 0) >
                       c.scalar(0, LT_DTYPE_I64);
          r = lt::where(hit.reshape({L, 1}), added, xf);
        } else if (red == "mul") {
          // The product of the updates per target row as exp(sum log|u|) with the sign from
          // the count of negative factors and zero where any factor is zero.
          Tensor uf = is_float(u.dtype()) ? u : u.cast(LT_DTYPE_F64);
          Tensor zero = lt::zeros(c.dev, {L, R}, uf.dtype());
          Tensor mag = zero.scatter_add(flat, uf.abs().log(), 0).exp();
          Tensor neg = zero.scatter_add(flat, (uf < sc(c, uf, 0)).cast(uf.dtype()), 0);
          Tensor half = neg * sc(c, neg, 0.5);
          Tensor sign = sc(c, neg, 1) - (half - half.floor()) * sc(c, neg, 4);
          Tensor prod = mag * sign;
          if (is_int(x.dtype())) prod = round_even(c, prod);
          r = xf * cast_to(prod, x.dtype());
        } else {
          c.error("reduction '" + red + "' is not supported");
        }
        return one(c, r.reshape(s), in[0].ot);
      },
      11};
  t["OneHot"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                   (void)n;
                   Tensor idx = c.T(in.at(0));
                   int64_t depth = static_cast<int64_t>(c.doubles(in.at(1)).at(0));
                   Tensor vals = c.T(in.at(2));
                   auto is = idx.shape();
                   int64_t r = static_cast<int64_t>(is.size()) + 1;
                   int64_t axis = norm_axis(c, c.attr_i("axis", -1), r);
                   Tensor id = idx.cast(LT_DTYPE_I64);
                   id = lt::where(id < c.scalar(0, LT_DTYPE_I64),
                                  id + c.scalar(double(depth), LT_DTYPE_I64), id);
                   Tensor u = unsqueeze_t(id, {axis}, c);
                   std::vector<int64_t> rs(r, 1);
                   rs[axis] = depth;
                   Tensor ar = lt::arange(c.dev, 0, double(depth), 1, LT_DTYPE_I64).reshape(rs);
                   Tensor hot = ar == u;
                   Tensor off = slice1(vals, 0, 0, 1).reshape({}),
                          on = slice1(vals, 0, 1, 2).reshape({});
                   return one(c, lt::where(hot, on, off), in[2].ot);
                 },
                 9};
  t["Compress"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                     (void)n;
                     // The output's length is the condition's count of true values: read as a shape
                     // input.
                     Tensor x = c.T(in.at(0));
                     auto cond = c.ints(in.at(1));
                     std::vector<int64_t> idx;
                     int64_t axis = 0;
                     Tensor src = x;
                     if (c.has_attr("axis")) {
                       axis = norm_axis(c, c.attr_i("axis", 0), static_cast<int64_t>(x.rank()));
                     } else {
                       src = x.reshape({x.numel()});
                     }
                     int64_t len = src.shape()[axis];
                     for (size_t i = 0; i < cond.size() && static_cast<int64_t>(i) < len; ++i) {
                       if (cond[i]) idx.push_back(static_cast<int64_t>(i));
                     }
                     if (idx.empty()) {
                       auto s = src.shape();
                       s[axis] = 0;
                       return one(c, lt::zeros(c.dev, s, x.dtype()), in[0].ot);
                     }
                     return one(c, src.gather(Tensor::from<int64_t>(c.dev, idx), axis), in[0].ot);
                   },
                   9};
  t["ReverseSequence"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        Tensor x = c.T(in.at(0));
        Tensor lens = c.T(in.at(1)).cast(LT_DTYPE_I64);
        int64_t ta = c.attr_i("time_axis", 0), ba = c.attr_i("batch_axis", 1);
        auto s = x.shape();
        int64_t r = static_cast<int64_t>(s.size());
        std::vector<int64_t> ts(r, 1), bs(r, 1);
        ts[ta] = s[ta];
        bs[ba] = s[ba];
        Tensor i = lt::arange(c.dev, 0, double(s[ta]), 1, LT_DTYPE_I64).reshape(ts);
        Tensor L = lens.reshape(bs);
        Tensor src = lt::where(i < L, L - i - c.scalar(1, LT_DTYPE_I64), i).broadcast_to(s);
        Tensor flat = flat_index(c, s, src, ta);
        return one(c, x.reshape({numel_of(s)}).gather(flat, 0), in[0].ot);
      },
      10};
}

}  // namespace lt::onnx::detail
