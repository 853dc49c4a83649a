// pad.cpp — a dynamic graph padded to bucket sizes for backends that need static shapes
// (lazytensor/lower/dynamic.hpp, mask_padding): the graph at the bucket values, with the
// padded part of every dimension that an op reduces or contracts over masked to the op's
// identity, and means divided by the valid count. The run's sizes are extra scalar inputs, so
// one compile serves every size of a bucket. Linear in the graph.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include "lazytensor/lower/dynamic.hpp"

namespace lt::lower {
namespace {

struct Padder {
  const lt_graph& g;
  DynamicView dv;
  OwnedGraph& out;
  std::vector<int32_t> map;                 // old node -> new node
  std::vector<std::vector<DimForm>> forms;  // per old node: its dims
  std::vector<int32_t> sym_input;           // per symbol: the new f32 scalar input node
  std::string why;

  lt_attr ints_attr(const char* name, const std::vector<int64_t>& v) {
    lt_attr a{};
    a.name = name;
    a.kind = LT_ATTR_INTS;
    a.ints = v.data();
    a.ints_len = v.size();
    return a;
  }
  int32_t scalar(double value, lt_dtype dtype) {
    std::vector<int64_t> none;
    lt_attr a[3] = {ints_attr("shape", none), {}, {}};
    a[1].name = "value", a[1].kind = LT_ATTR_FLOAT, a[1].f = value;
    a[2].name = "dtype", a[2].kind = LT_ATTR_INT, a[2].i = dtype;
    return out.add("full", dtype, {}, {}, a, 3);
  }
  int32_t binary(const char* op, lt_dtype dtype, Shape shape, int32_t x, int32_t y) {
    return out.add(op, dtype, std::move(shape), {x, y});
  }
  // The valid extent of a dim as an f32 scalar node: scale * s + offset.
  int32_t extent(const DimForm& f) {
    int32_t s = sym_input[static_cast<size_t>(f.symbol)];
    int32_t v = binary("mul", LT_DTYPE_F32, {}, s, scalar(double(f.scale), LT_DTYPE_F32));
    return binary("add", LT_DTYPE_F32, {}, v, scalar(double(f.offset), LT_DTYPE_F32));
  }
  // A bool node of shape [1, .., shape[d], .., 1]: `cmp` (lt, eq) of the index along dim d and
  // the valid extent of form f.
  int32_t index_mask(const Shape& shape, size_t d, const DimForm& f, const char* cmp) {
    lt_attr a[4] = {};
    a[0].name = "start", a[0].kind = LT_ATTR_FLOAT, a[0].f = 0;
    a[1].name = "stop", a[1].kind = LT_ATTR_FLOAT, a[1].f = double(shape[d]);
    a[2].name = "step", a[2].kind = LT_ATTR_FLOAT, a[2].f = 1;
    a[3].name = "dtype", a[3].kind = LT_ATTR_INT, a[3].i = LT_DTYPE_F32;
    int32_t ar = out.add("arange", LT_DTYPE_F32, {shape[d]}, {}, a, 4);
    int32_t c = binary(cmp, LT_DTYPE_BOOL, {shape[d]}, ar, extent(f));
    std::vector<int64_t> rs(shape.size(), 1);
    rs[d] = shape[d];
    lt_attr ra = ints_attr("shape", rs);
    return out.add("reshape", LT_DTYPE_BOOL, rs, {c}, &ra, 1);
  }
  // `x` (new node of old node `old`) with every element outside the valid part of its dims
  // `dims` replaced by `fill`.
  int32_t mask(int32_t old, const std::vector<size_t>& dims, double fill) {
    const lt_graph_node& n = g.nodes[old];
    const Shape shape(n.shape, n.shape + n.rank);
    int32_t m = -1;
    for (size_t d : dims) {
      const DimForm& f = forms[old][d];
      if (f.symbol < 0) continue;
      int32_t r = index_mask(shape, d, f, "lt");
      if (m < 0) {
        m = r;
        continue;
      }
      Shape both(shape.size(), 1);
      for (size_t k = 0; k < shape.size(); ++k)
        both[k] = std::max(out.node(m).shape[k], out.node(r).shape[k]);
      m = binary("and", LT_DTYPE_BOOL, both, m, r);
    }
    if (m < 0) return map[old];
    std::vector<int64_t> full_shape(shape);
    lt_attr ba = ints_attr("shape", full_shape);
    int32_t mb = out.add("broadcast_to", LT_DTYPE_BOOL, shape, {m}, &ba, 1);
    int32_t id = scalar(fill, n.dtype);
    return out.add("where", n.dtype, shape, {mb, map[old], id});
  }
  bool dynamic_dim(int32_t node, size_t d) const { return forms[node][d].symbol >= 0; }
  bool any_dynamic(int32_t node) const {
    return std::any_of(forms[node].begin(), forms[node].end(),
                       [](const DimForm& f) { return f.symbol >= 0; });
  }
  bool refuse(size_t i, const std::string& what) {
    why = "node " + std::to_string(i) + " (" + g.nodes[i].op + ") " + what;
    return false;
  }

  bool run() {
    // Padding is of inputs: every symbol must be the size of some input's dim.
    std::vector<uint8_t> sized(dv.values.size(), 0);
    for (size_t k = 0; k < g.num_inputs; ++k)
      for (const DimForm& f : shape_forms(g, static_cast<size_t>(g.inputs[k])))
        if (f.symbol >= 0) sized[static_cast<size_t>(f.symbol)] = 1;
    for (size_t k = 0; k < sized.size(); ++k)
      if (!sized[k]) {
        why = "size " + std::to_string(k) + " is no input's dim";
        return false;
      }
    forms.resize(g.num_nodes);
    std::vector<uint8_t> attr_dynamic(g.num_nodes, 0);
    for (const lt_dim_expr& e : dv.exprs)
      if (e.attr >= 0) attr_dynamic[e.node] = 1;
    for (size_t i = 0; i < g.num_nodes; ++i) forms[i] = shape_forms(g, i);
    map.assign(g.num_nodes, -1);
    for (size_t i = 0; i < g.num_nodes; ++i) {
      const lt_graph_node& n = g.nodes[i];
      const OpInfo* info = find_op(n.op);
      std::vector<int32_t> ops(n.operands, n.operands + n.num_operands);
      for (int32_t& o : ops) o = map[o];
      const bool is_input = std::string_view(n.op) == "input";
      if (!is_input && !info) return refuse(i, "is a custom op");
      const Rule rule = is_input ? Rule::input : info->rule;
      // Attributes that follow a size may only restate a shape (reshape, broadcast_to, full);
      // any other (a slice's starts or steps) would move with the padding.
      if (attr_dynamic[i] && rule != Rule::reshape && rule != Rule::broadcast_to &&
          rule != Rule::full)
        return refuse(i, "has an attribute that follows a dynamic size");
      auto copy = [&](std::vector<int32_t> operands) {
        map[i] = out.copy(n, std::move(operands));
        return true;
      };
      auto operand_dynamic = [&](size_t k, size_t d) { return dynamic_dim(n.operands[k], d); };
      switch (rule) {
        case Rule::input:
        case Rule::unary:
        case Rule::binary:
        case Rule::compare:
        case Rule::where:
        case Rule::cast:
        case Rule::full:
        case Rule::broadcast_to:
        case Rule::permute:
          copy(ops);
          continue;
        case Rule::reshape: {
          // The valid part stays a box when one dynamic dim maps to one, with the same product
          // of dims before it, merging at most the static dims after it ([b, t, c] -> [b·t, c]
          // or [1, h, s, d] -> [h, s, d]): both layouts then agree element for element.
          auto dyn = [&](int32_t v, int64_t* before, int64_t* after) {
            int pos = -1;
            *before = *after = 1;
            for (size_t d = 0; d < forms[v].size(); ++d) {
              if (forms[v][d].symbol >= 0) {
                if (pos >= 0) return -2;
                pos = static_cast<int>(d);
              } else {
                (pos < 0 ? *before : *after) *= g.nodes[v].shape[d];
              }
            }
            return pos;
          };
          int64_t b_in, a_in, b_out, a_out;
          const int p_in = dyn(n.operands[0], &b_in, &a_in),
                    p_out = dyn(int32_t(i), &b_out, &a_out);
          if (p_in == -1 && p_out == -1) {
            copy(ops);
            continue;
          }
          bool ok = p_in >= 0 && p_out >= 0 && b_in == b_out && a_out > 0 && a_in % a_out == 0;
          if (ok) {
            const DimForm &fi = forms[n.operands[0]][size_t(p_in)], &fo = forms[i][size_t(p_out)];
            const int64_t k = a_in / a_out;
            ok = fi.symbol == fo.symbol && fo.scale == k * fi.scale && fo.offset == k * fi.offset;
          }
          if (!ok) return refuse(i, "moves a dynamic dim across other dims");
          copy(ops);
          continue;
        }
        case Rule::slice: {
          Attrs a(n);
          std::vector<int64_t> starts = a.ints("starts", n.rank), steps = a.ints("steps", n.rank);
          for (size_t d = 0; d < n.rank; ++d) {
            const DimForm &in = forms[n.operands[0]][d], &o = forms[i][d];
            if (in.symbol < 0 && o.symbol < 0) continue;
            if (starts[d] != 0 || steps[d] != 1 || in.symbol != o.symbol || in.scale != o.scale ||
                in.offset != o.offset)
              return refuse(i, "cuts into a dynamic dim");
          }
          copy(ops);
          continue;
        }
        case Rule::reduce:
        case Rule::argmax: {
          const lt_graph_node& x = g.nodes[n.operands[0]];
          Attrs a(n);
          std::vector<size_t> axes;
          if (rule == Rule::argmax) {
            int64_t ax = a.i("axis");
            axes.push_back(static_cast<size_t>(ax < 0 ? ax + int64_t(x.rank) : ax));
          } else {
            std::vector<int64_t> list = a.ints("axes");
            if (list.empty())
              for (size_t d = 0; d < x.rank; ++d) list.push_back(int64_t(d));
            for (int64_t ax : list) axes.push_back(static_cast<size_t>(ax < 0 ? ax + x.rank : ax));
          }
          std::erase_if(axes, [&](size_t d) { return !operand_dynamic(0, d); });
          if (axes.empty()) {
            copy(ops);
            continue;
          }
          const std::string_view op = n.op;
          const double inf = std::numeric_limits<double>::infinity();
          const bool fl = is_float(x.dtype);
          if (!fl && op != "sum") return refuse(i, "reduces integers over a dynamic dim");
          double fill = op == "max" || op == "argmax"   ? -inf
                        : op == "min" || op == "argmin" ? inf
                                                        : 0.0;
          if (op == "prod") fill = 1.0;
          if (op != "sum" && op != "mean" && op != "max" && op != "min" && op != "argmax" &&
              op != "argmin" && op != "prod")
            return refuse(i, "reduces over a dynamic dim");
          ops[0] = mask(n.operands[0], axes, fill);
          if (op != "mean") {
            copy(ops);
            continue;
          }
          // mean = sum · (padded count / valid count) over the reduced dims.
          if (n.dtype != LT_DTYPE_F32) return refuse(i, "is a mean of a 16/64-bit float");
          int32_t mean = out.copy(n, ops);
          int32_t ratio = scalar(1.0, LT_DTYPE_F32);
          for (size_t d : axes) {
            int32_t r = binary("div", LT_DTYPE_F32, {}, scalar(double(x.shape[d]), LT_DTYPE_F32),
                               extent(forms[n.operands[0]][d]));
            ratio = binary("mul", LT_DTYPE_F32, {}, ratio, r);
          }
          map[i] = binary("mul", n.dtype, Shape(n.shape, n.shape + n.rank), mean, ratio);
          continue;
        }
        case Rule::softmax: {
          const int64_t ax = Attrs(n).i("axis");
          const size_t d = static_cast<size_t>(ax < 0 ? ax + int64_t(n.rank) : ax);
          if (operand_dynamic(0, d))
            ops[0] = mask(n.operands[0], {d}, -std::numeric_limits<double>::infinity());
          copy(ops);
          continue;
        }
        case Rule::matmul: {
          const lt_graph_node &a = g.nodes[n.operands[0]], &b = g.nodes[n.operands[1]];
          const size_t ka = a.rank - 1, kb = b.rank >= 2 ? b.rank - 2 : 0;
          if (operand_dynamic(0, ka) || operand_dynamic(1, kb)) {
            ops[0] = mask(n.operands[0], {ka}, 0.0);
            ops[1] = mask(n.operands[1], {kb}, 0.0);
          }
          copy(ops);
          continue;
        }
        case Rule::gather:  // indices from the valid part only read the valid part
          copy(ops);
          continue;
        case Rule::concat: {
          const int64_t ax = Attrs(n).i("axis");
          const size_t d = static_cast<size_t>(ax < 0 ? ax + int64_t(n.rank) : ax);
          if (!dynamic_dim(static_cast<int32_t>(i), d)) {
            copy(ops);
            continue;
          }
          // Appending one static row to a dynamic operand (a key/value cache growing by a
          // token): the padded concat puts the row after the padding, so it is placed at the
          // valid end with a mask: out = where(index == n, row, concat(first, row)).
          const DimForm& f = forms[n.operands[0]][d];
          if (n.num_operands != 2 || f.symbol < 0 || g.nodes[n.operands[1]].shape[d] != 1 ||
              dynamic_dim(n.operands[1], d))
            return refuse(i, "concatenates along a dynamic dim");
          const Shape shape(n.shape, n.shape + n.rank);
          int32_t cat = out.copy(n, ops);
          int32_t m = index_mask(shape, d, f, "eq");
          std::vector<int64_t> full_shape(shape);
          lt_attr ba = ints_attr("shape", full_shape);
          int32_t mb = out.add("broadcast_to", LT_DTYPE_BOOL, shape, {m}, &ba, 1);
          int32_t row = out.add("broadcast_to", n.dtype, shape, {ops[1]}, &ba, 1);
          map[i] = out.add("where", n.dtype, shape, {mb, row, cat});
          continue;
        }
        case Rule::pad: {
          Attrs a(n);
          std::vector<int64_t> before = a.ints("before", n.rank), after = a.ints("after", n.rank);
          for (size_t d = 0; d < n.rank; ++d)
            if (operand_dynamic(0, d) && (before[d] || after[d]))
              return refuse(i, "pads a dynamic dim");
          copy(ops);
          continue;
        }
        case Rule::conv2d:
        case Rule::conv2d_grad:
        case Rule::pool:  // the batch dim only
          for (size_t k = 0; k < n.num_operands; ++k)
            for (size_t d = k == 0 ? 1 : 0; d < g.nodes[n.operands[k]].rank; ++d)
              if (operand_dynamic(k, d)) return refuse(i, "has a dynamic spatial or channel dim");
          copy(ops);
          continue;
        default:  // random values, scatter_add, collectives, arange over a dynamic size, ...
          if (!any_dynamic(static_cast<int32_t>(i)) &&
              std::none_of(n.operands, n.operands + n.num_operands,
                           [&](int32_t o) { return any_dynamic(o); })) {
            copy(ops);
            continue;
          }
          return refuse(i, "cannot be padded");
      }
    }
    return true;
  }
};

}  // namespace

bool mask_padding(const lt_graph& g, OwnedGraph* out, std::string* why) {
  *out = OwnedGraph();
  Padder p{g, dynamic_of(g), *out, {}, {}, {}, {}};
  // The symbols' run values come first as f32 scalar inputs, then the graph's own nodes.
  std::vector<int32_t> inputs;
  for (size_t k = 0; k < p.dv.values.size(); ++k) {
    p.sym_input.push_back(out->add("input", LT_DTYPE_F32, {}, {}));
    inputs.push_back(p.sym_input.back());
  }
  if (!p.run()) {
    *why = p.why;
    return false;
  }
  std::vector<int32_t> graph_inputs, outputs;
  for (size_t k = 0; k < g.num_inputs; ++k) graph_inputs.push_back(p.map[g.inputs[k]]);
  graph_inputs.insert(graph_inputs.end(), inputs.begin(), inputs.end());
  for (size_t k = 0; k < g.num_outputs; ++k) outputs.push_back(p.map[g.outputs[k]]);
  out->set_inputs(std::move(graph_inputs));
  out->set_outputs(std::move(outputs));
  out->set_hash(g.hash);
  return true;
}

}  // namespace lt::lower
