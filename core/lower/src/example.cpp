// example.cpp — one small canonical node per op (capability listings, tests).
#include "lazytensor/lower/builder.hpp"

namespace lt::lower {
namespace {

using A = Builder::Attr;

// Appends op's node: operands `in`, output `out`, IR attributes `attrs`.
int32_t node(OwnedGraph& g, OpId op, std::vector<int32_t> in, Desc out, std::vector<A> attrs = {}) {
  std::vector<lt_attr> v;
  for (const A& a : attrs)
    v.push_back({a.name, a.kind, a.i, a.f, a.ints.data(), a.ints.size(), nullptr});
  return g.add(op_info(op).name, out.dtype, out.shape, std::move(in), v.data(), v.size());
}

}  // namespace

OwnedGraph example_graph(OpId op) {
  OwnedGraph g;
  const OpInfo& info = op_info(op);
  if (op == kOpInput) return g;
  const lt_dtype dt = info.dtypes == DTypes::kBool ? LT_DTYPE_BOOL : LT_DTYPE_F32;
  std::vector<int32_t> ins;
  auto input = [&](lt_dtype d, Shape s) {
    ins.push_back(g.add("input", d, std::move(s), {}));
    return ins.back();
  };
  const Shape sq{4, 4};
  int32_t out = -1;
  switch (info.rule) {
    case Rule::unary:
      out = node(g, op, {input(dt, sq)}, {dt, sq});
      break;
    case Rule::binary:
    case Rule::compare: {
      int32_t a = input(dt, sq), b = input(dt, sq);
      out = node(g, op, {a, b}, {info.rule == Rule::compare ? LT_DTYPE_BOOL : dt, sq});
      break;
    }
    case Rule::where: {
      int32_t c = input(LT_DTYPE_BOOL, sq), a = input(dt, sq), b = input(dt, sq);
      out = node(g, op, {c, a, b}, {dt, sq});
      break;
    }
    case Rule::cast:
      out = node(g, op, {input(dt, sq)}, {LT_DTYPE_I32, sq});
      break;
    case Rule::full:
      out = node(g, op, {}, {dt, sq}, {{"value", LT_ATTR_FLOAT, 0, 1.0}});
      break;
    case Rule::arange:
      out = node(g, op, {}, {dt, {8}},
                 {{"start", LT_ATTR_FLOAT, 0, 0.0}, {"step", LT_ATTR_FLOAT, 0, 1.0}});
      break;
    case Rule::random_unit:
    case Rule::random: {
      std::vector<A> attrs;
      for (const AttrSpec& s : info.attrs)
        if (s.name != "shape" && s.name != "dtype")
          attrs.push_back({s.name.c_str(), s.kind, s.i, s.f});
      out = node(g, op, {input(LT_DTYPE_I64, {})}, {dt, sq}, attrs);
      break;
    }
    case Rule::reduce:
      out = node(g, op, {input(dt, sq)}, {dt, {4}},
                 {{"axes", LT_ATTR_INTS, 0, 0, {1}}, {"keepdims", LT_ATTR_INT, 0}});
      break;
    case Rule::argmax:
      out = node(g, op, {input(dt, sq)}, {LT_DTYPE_I64, {4}},
                 {{"axis", LT_ATTR_INT, 1}, {"keepdims", LT_ATTR_INT, 0}});
      break;
    case Rule::matmul: {
      int32_t a = input(dt, sq), b = input(dt, sq);
      out = node(g, op, {a, b}, {dt, sq});
      break;
    }
    case Rule::reshape:
      out = node(g, op, {input(dt, sq)}, {dt, {16}});
      break;
    case Rule::permute:
      out = node(g, op, {input(dt, {4, 3})}, {dt, {3, 4}}, {{"perm", LT_ATTR_INTS, 0, 0, {1, 0}}});
      break;
    case Rule::broadcast_to:
      out = node(g, op, {input(dt, {1, 4})}, {dt, sq});
      break;
    case Rule::slice:
      out = node(g, op, {input(dt, sq)}, {dt, {2, 2}},
                 {{"starts", LT_ATTR_INTS, 0, 0, {1, 0}}, {"steps", LT_ATTR_INTS, 0, 0, {1, 2}}});
      break;
    case Rule::concat: {
      int32_t a = input(dt, sq), b = input(dt, sq);
      out = node(g, op, {a, b}, {dt, {8, 4}}, {{"axis", LT_ATTR_INT, 0}});
      break;
    }
    case Rule::pad:
      out = node(g, op, {input(dt, sq)}, {dt, {6, 6}},
                 {{"before", LT_ATTR_INTS, 0, 0, {1, 1}},
                  {"after", LT_ATTR_INTS, 0, 0, {1, 1}},
                  {"value", LT_ATTR_FLOAT, 0, 0.0}});
      break;
    case Rule::gather: {
      int32_t a = input(dt, sq), i = input(LT_DTYPE_I64, {2});
      out = node(g, op, {a, i}, {dt, {2, 4}}, {{"axis", LT_ATTR_INT, 0}});
      break;
    }
    case Rule::scatter_add: {
      int32_t a = input(dt, sq), i = input(LT_DTYPE_I64, {2}), u = input(dt, {2, 4});
      out = node(g, op, {a, i, u}, {dt, sq}, {{"axis", LT_ATTR_INT, 0}});
      break;
    }
    case Rule::conv2d: {
      int32_t x = input(dt, {1, 2, 6, 6}), w = input(dt, {3, 2, 3, 3}), b = input(dt, {3});
      out = node(g, op, {x, w, b}, {dt, {1, 3, 4, 4}},
                 {{"stride", LT_ATTR_INTS, 0, 0, {1, 1}},
                  {"padding", LT_ATTR_INTS, 0, 0, {0, 0}},
                  {"dilation", LT_ATTR_INTS, 0, 0, {1, 1}},
                  {"groups", LT_ATTR_INT, 1}});
      break;
    }
    case Rule::conv2d_grad:
      if (op == kOpConv2dBackwardData) {
        int32_t dy = input(dt, {1, 3, 4, 4}), w = input(dt, {3, 2, 3, 3});
        out = node(g, op, {dy, w}, {dt, {1, 2, 6, 6}},
                   {{"input_size", LT_ATTR_INTS, 0, 0, {6, 6}},
                    {"stride", LT_ATTR_INTS, 0, 0, {1, 1}},
                    {"padding", LT_ATTR_INTS, 0, 0, {0, 0}},
                    {"dilation", LT_ATTR_INTS, 0, 0, {1, 1}},
                    {"groups", LT_ATTR_INT, 1}});
      } else {
        int32_t x = input(dt, {1, 2, 6, 6}), dy = input(dt, {1, 3, 4, 4});
        out = node(g, op, {x, dy}, {dt, {3, 2, 3, 3}},
                   {{"kernel_size", LT_ATTR_INTS, 0, 0, {3, 3}},
                    {"stride", LT_ATTR_INTS, 0, 0, {1, 1}},
                    {"padding", LT_ATTR_INTS, 0, 0, {0, 0}},
                    {"dilation", LT_ATTR_INTS, 0, 0, {1, 1}},
                    {"groups", LT_ATTR_INT, 1}});
      }
      break;
    case Rule::pool:
      out = node(g, op, {input(dt, {1, 2, 6, 6})}, {dt, {1, 2, 3, 3}},
                 {{"kernel", LT_ATTR_INTS, 0, 0, {2, 2}},
                  {"stride", LT_ATTR_INTS, 0, 0, {2, 2}},
                  {"padding", LT_ATTR_INTS, 0, 0, {0, 0}}});
      break;
    case Rule::softmax:
      out = node(g, op, {input(dt, sq)}, {dt, sq}, {{"axis", LT_ATTR_INT, 1}});
      break;
    case Rule::collective:
      out = node(g, op, {input(dt, sq)}, {dt, sq},
                 {{op == kOpAllReduce ? "reduce" : "root", LT_ATTR_INT, 0}});
      break;
    case Rule::all_gather:
      out = node(g, op, {input(dt, sq)}, {dt, {8, 4}});
      break;
    case Rule::input:
      break;
  }
  g.set_inputs(ins);
  g.set_outputs({out});
  return g;
}

}  // namespace lt::lower
