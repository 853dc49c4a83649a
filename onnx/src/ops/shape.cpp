// ops/shape.cpp — ONNX constant and shape ops: Constant, Shape, Range, Reshape, Concat, Slice, ...
#include "common.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

namespace lt::onnx::detail {

void add_shape_ops(std::map<std::string, OpEntry>& t) {
  // Constants and shapes (evaluated on the host).
  t["Constant"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        for (const AttributeP& a : c.node->attributes) {
          if (a.name == "value") {
            if (a.t.empty()) c.error("value has no tensor");
            RawTensor r = decode_tensor(a.t[0], c.base_dir, "Constant value");
            Value v;
            v.present = true;
            v.ot = r.ot;
            lt_tensor* o = nullptr;
            check(lt_tensor_from_host(c.dev.get(), carrier_dtype(r.ot), r.shape.data(),
                                      r.shape.size(), r.bytes.data(), r.bytes.size(), &o));
            v.t = Tensor(o);
            if (r.numel() <= 4096 && is_int(carrier_dtype(r.ot))) {
              auto h = std::make_shared<HostVals>();
              h->shape = r.shape;
              h->v = raw_to_doubles(r);
              v.h = h;
              v.shape_class = true;
            }
            return {v};
          }
          if (a.name == "value_float") return {c.from_host({}, {a.f}, kFloat, false)};
          if (a.name == "value_floats")
            return {c.from_host({int64_t(a.floats.size())},
                                std::vector<double>(a.floats.begin(), a.floats.end()), kFloat,
                                false)};
          if (a.name == "value_int") return {c.from_host({}, {double(a.i)}, kInt64, true)};
          if (a.name == "value_ints")
            return {c.from_host({int64_t(a.ints.size())},
                                std::vector<double>(a.ints.begin(), a.ints.end()), kInt64, true)};
          if (a.name == "sparse_value") c.error("sparse constants are not supported");
          if (a.name == "value_string" || a.name == "value_strings") {
            fail(LT_STATUS_UNSUPPORTED, "out of scope: string constant");
          }
        }
        c.error("Constant has no value attribute");
      },
      1};
  t["Shape"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                  (void)n;
                  auto s = shape_of(c, in.at(0));
                  int64_t r = static_cast<int64_t>(s.size());
                  int64_t st = c.attr_i("start", 0), en = c.attr_i("end", r);
                  if (st < 0) st += r;
                  if (en < 0) en += r;
                  st = std::clamp<int64_t>(st, 0, r);
                  en = std::clamp<int64_t>(en, 0, r);
                  std::vector<double> v;
                  for (int64_t i = st; i < en; ++i) v.push_back(double(s[i]));
                  return {c.from_host({int64_t(v.size())}, v, kInt64, true)};
                },
                1};
  t["Size"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                 (void)n;
                 return {c.from_host({}, {double(numel_of(shape_of(c, in.at(0))))}, kInt64, true)};
               },
               1};
  t["ConstantOfShape"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        auto shape = c.ints(in.at(0));
        double v = 0;
        int32_t ot = kFloat;
        if (const AttributeP* a = c.attr("value"); a && !a->t.empty()) {
          RawTensor r = decode_tensor(a->t[0], c.base_dir, "ConstantOfShape value");
          ot = r.ot;
          auto d = raw_to_doubles(r);
          if (d.size() != 1) c.error("value must have one element");
          v = d[0];
        }
        for (int64_t d : shape) {
          if (d < 0) c.error("negative dim " + std::to_string(d) + " in the shape");
        }
        if (numel_of(shape) <= 4096 && is_int(carrier_dtype(ot))) {
          return {c.from_host(shape, std::vector<double>(numel_of(shape), v), ot, true)};
        }
        return one(c, lt::full(c.dev, shape, v, carrier_dtype(ot)), ot);
      },
      9};
  t["Range"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                  (void)n;
                  double st = c.doubles(in.at(0)).at(0), lim = c.doubles(in.at(1)).at(0),
                         d = c.doubles(in.at(2)).at(0);
                  if (d == 0) c.error("delta is 0");
                  double cnt_f = std::ceil((lim - st) / d);
                  if (!(cnt_f < 9e15)) c.error("Range of more than 9e15 elements");
                  int64_t cnt = std::max<int64_t>(0, static_cast<int64_t>(cnt_f));
                  int32_t ot = in[0].ot;
                  if (all_host({in[0], in[1], in[2]}) && cnt <= 4096) {
                    std::vector<double> v(cnt);
                    for (int64_t i = 0; i < cnt; ++i) v[i] = st + i * d;
                    return {c.from_host({cnt}, v, ot, true)};
                  }
                  DType dt = carrier_dtype(ot);
                  Tensor ar = lt::arange(c.dev, 0, double(cnt), 1, dt);
                  return one(c, ar * c.T(in[2]) + c.T(in[0]), ot);
                },
                11};
  t["EyeLike"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        auto s = shape_of(c, in.at(0));
        if (s.size() != 2) c.error("input must have rank 2");
        int32_t ot = static_cast<int32_t>(c.attr_i("dtype", in[0].ot));
        int64_t k = c.attr_i("k", 0);
        Tensor i = lt::arange(c.dev, 0, double(s[0]), 1, LT_DTYPE_I64).reshape({s[0], 1});
        Tensor j = lt::arange(c.dev, 0, double(s[1]), 1, LT_DTYPE_I64).reshape({1, s[1]});
        return one(c, ((j - i) == c.scalar(double(k), LT_DTYPE_I64)).cast(carrier_dtype(ot)), ot);
      },
      9};

  // Layout.
  t["Reshape"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                    (void)n;
                    std::vector<int64_t> shape =
                        c.opset >= 5 ? c.ints(in.at(1)) : c.attr_ints("shape");
                    auto s = shape_of(c, in.at(0));
                    auto target = reshape_target(c, s, shape, c.attr_i("allowzero", 0) != 0);
                    if (all_host({in[0]})) return {c.from_host(target, in[0].h->v, in[0].ot, true)};
                    return one(c, c.T(in[0]).reshape(target), in[0].ot);
                  },
                  1};
  t["Flatten"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                    (void)n;
                    auto s = shape_of(c, in.at(0));
                    int64_t r = static_cast<int64_t>(s.size());
                    int64_t axis = c.attr_i("axis", 1);
                    if (axis < 0) axis += r;
                    if (axis < 0 || axis > r) c.error("axis out of range");
                    int64_t a = 1, b = 1;
                    for (int64_t i = 0; i < r; ++i) (i < axis ? a : b) *= s[i];
                    return one(c, c.T(in[0]).reshape({a, b}), in[0].ot);
                  },
                  1};
  t["Transpose"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                      (void)n;
                      Tensor x = c.T(in.at(0));
                      auto perm = c.attr_ints("perm");
                      int64_t r = static_cast<int64_t>(x.rank());
                      if (perm.empty())
                        for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
                      return one(c, x.permute(perm), in[0].ot);
                    },
                    1};
  t["Unsqueeze"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                      (void)n;
                      auto axes = c.opset >= 13 ? c.ints(in.at(1)) : c.attr_ints("axes");
                      if (all_host({in.at(0)})) {
                        auto out = unsqueeze_shape(c, in[0].h->shape, axes);
                        return {c.from_host(out, in[0].h->v, in[0].ot, true)};
                      }
                      return one(c, unsqueeze_t(c.T(in[0]), axes, c), in[0].ot);
                    },
                    1};
  t["Squeeze"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        std::vector<int64_t> axes =
            c.opset >= 13
                ? (in.size() > 1 && in[1].present ? c.ints(in[1]) : std::vector<int64_t>{})
                : c.attr_ints("axes");
        auto s = shape_of(c, in.at(0));
        int64_t r = static_cast<int64_t>(s.size());
        for (auto& a : axes) a = norm_axis(c, a, r);
        std::vector<int64_t> out;
        for (int64_t i = 0; i < r; ++i) {
          bool drop =
              axes.empty() ? s[i] == 1 : std::find(axes.begin(), axes.end(), i) != axes.end();
          if (drop && s[i] != 1)
            c.error("cannot squeeze axis " + std::to_string(i) + " of size " +
                    std::to_string(s[i]));
          if (!drop) out.push_back(s[i]);
        }
        if (all_host({in[0]})) return {c.from_host(out, in[0].h->v, in[0].ot, true)};
        return one(c, c.T(in[0]).reshape(out), in[0].ot);
      },
      1};
  t["Concat"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                   (void)n;
                   int64_t axis = c.attr_i("axis", 0);
                   if (all_host(in)) {
                     // Host concat of shape vectors (any rank).
                     std::vector<Value*> vs;
                     for (Value& v : in)
                       if (v.present) vs.push_back(&v);
                     auto s = vs[0]->h->shape;
                     int64_t r = static_cast<int64_t>(s.size());
                     axis = norm_axis(c, axis, r);
                     int64_t outer = 1, total = 0;
                     for (int64_t i = 0; i < axis; ++i) outer *= s[i];
                     for (Value* v : vs) total += v->h->shape[axis];
                     std::vector<double> out;
                     for (int64_t o = 0; o < outer; ++o) {
                       for (Value* v : vs) {
                         int64_t chunk = numel_of(v->h->shape) / std::max<int64_t>(outer, 1);
                         for (int64_t q = 0; q < chunk; ++q) out.push_back(v->h->v[o * chunk + q]);
                       }
                     }
                     s[axis] = total;
                     return {c.from_host(s, out, vs[0]->ot, true)};
                   }
                   std::vector<Tensor> ts;
                   int32_t ot = 0;
                   for (Value& v : in) {
                     if (!v.present) continue;
                     ts.push_back(c.T(v));
                     ot = v.ot;
                   }
                   int64_t r = static_cast<int64_t>(ts[0].rank());
                   return one(c, lt::concat(ts, norm_axis(c, axis, r)), ot);
                 },
                 1};
  t["Split"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                  int64_t axis = c.attr_i("axis", 0);
                  Tensor x = c.T(in.at(0));
                  int64_t r = static_cast<int64_t>(x.rank());
                  axis = norm_axis(c, axis, r);
                  int64_t d = x.shape()[axis];
                  std::vector<int64_t> split =
                      c.opset >= 13 ? (in.size() > 1 && in[1].present ? c.ints(in[1])
                                                                      : std::vector<int64_t>{})
                                    : c.attr_ints("split");
                  int64_t k = static_cast<int64_t>(n.outputs.size());
                  if (split.empty()) {
                    int64_t ns = c.attr_i("num_outputs", k);
                    int64_t each = (d + ns - 1) / ns;
                    for (int64_t i = 0; i < ns; ++i) split.push_back(std::min(each, d - each * i));
                  }
                  Vals out;
                  int64_t pos = 0;
                  for (int64_t len : split) {
                    out.push_back(c.from_tensor(slice1(x, axis, pos, pos + len), in[0].ot));
                    pos += len;
                  }
                  if (pos != d)
                    c.error("split sizes do not add up to the axis length " + std::to_string(d));
                  return out;
                },
                1};
  t["Slice"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                  (void)n;
                  std::vector<int64_t> starts, ends, axes, steps;
                  if (c.opset >= 10) {
                    starts = c.ints(in.at(1));
                    ends = c.ints(in.at(2));
                    if (in.size() > 3 && in[3].present) axes = c.ints(in[3]);
                    if (in.size() > 4 && in[4].present) steps = c.ints(in[4]);
                  } else {
                    starts = c.attr_ints("starts");
                    ends = c.attr_ints("ends");
                    axes = c.attr_ints("axes");
                  }
                  if (all_host({in[0]})) {
                    // Host slice of a shape value via a temporary on the device would defeat
                    // folding: do it here (1-D shape vectors only).
                    if (in[0].h->shape.size() == 1 && (steps.empty() || steps[0] == 1) &&
                        starts.size() == 1) {
                      int64_t d = in[0].h->shape[0];
                      int64_t b = starts[0], e = ends[0];
                      if (b < 0) b += d;
                      if (e < 0) e += d;
                      b = std::clamp<int64_t>(b, 0, d);
                      e = std::clamp<int64_t>(e, 0, d);
                      std::vector<double> v;
                      for (int64_t i = b; i < e; ++i) v.push_back(in[0].h->v[i]);
                      return {c.from_host({int64_t(v.size())}, v, in[0].ot, true)};
                    }
                  }
                  return one(c, onnx_slice(c, c.T(in[0]), starts, ends, axes, steps), in[0].ot);
                },
                1};
}

}  // namespace lt::onnx::detail
