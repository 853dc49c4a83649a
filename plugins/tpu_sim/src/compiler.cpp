// compiler.cpp — what tpu_sim accepts (supports_node), and the lowering of a graph region
// to MXU / vector / DMA instructions with the cost model and the HBM capacity check.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "program.h"

namespace lt::tpu {
namespace {

// Dtype classes an op accepts. F = f32, I = i32, B = bool, L = i64. A TPU has no 64-bit
// integer datapath: XLA emulates s64 with pairs of s32 words, which is cheap for data
// movement, compares, casts, sums and add/sub/mul (with carries), not for division. So i64
// (kL) is accepted by the index-bookkeeping ops (kIdx: layout, compare, where, cast, full,
// arange, sum/max/min, argmax's output, neg/abs/add/sub/mul/maximum/minimum) and priced at two
// vector ops per element (four for mul); i64 div falls back.
enum : uint8_t {
  kF = 1,
  kI = 2,
  kB = 4,
  kL = 8,
  kFI = kF | kI,
  kAll = kF | kI | kB,
  kIdx = kAll | kL,
};

struct OpInfo {
  Op op;
  uint8_t dtypes;  // allowed dtypes of the node's data operands / output
};

const std::unordered_map<std::string_view, OpInfo>& op_table() {
  static const std::unordered_map<std::string_view, OpInfo> table = {
      {"input", {Op::Input, kIdx}},
      {"neg", {Op::Neg, kFI | kL}},
      {"abs", {Op::Abs, kFI | kL}},
      {"relu", {Op::Relu, kFI}},
      {"exp", {Op::Exp, kF}},
      {"log", {Op::Log, kF}},
      {"sqrt", {Op::Sqrt, kF}},
      {"rsqrt", {Op::Rsqrt, kF}},
      {"tanh", {Op::Tanh, kF}},
      {"sigmoid", {Op::Sigmoid, kF}},
      {"gelu", {Op::Gelu, kF}},
      {"sin", {Op::Sin, kF}},
      {"cos", {Op::Cos, kF}},
      {"floor", {Op::Floor, kF}},
      {"not", {Op::Not, kB}},
      {"add", {Op::Add, kFI | kL}},
      {"sub", {Op::Sub, kFI | kL}},
      {"mul", {Op::Mul, kFI | kL}},
      {"div", {Op::Div, kFI}},
      {"pow", {Op::Pow, kF}},
      {"maximum", {Op::Maximum, kFI | kL}},
      {"minimum", {Op::Minimum, kFI | kL}},
      {"eq", {Op::Eq, kIdx}},
      {"ne", {Op::Ne, kIdx}},
      {"lt", {Op::Lt, kIdx}},
      {"le", {Op::Le, kIdx}},
      {"gt", {Op::Gt, kIdx}},
      {"ge", {Op::Ge, kIdx}},
      {"and", {Op::And, kB}},
      {"or", {Op::Or, kB}},
      {"where", {Op::Where, kIdx}},
      {"cast", {Op::Cast, kIdx}},
      {"full", {Op::Full, kIdx}},
      {"arange", {Op::Arange, kIdx}},
      {"sum", {Op::Sum, kFI | kL}},
      {"mean", {Op::Mean, kF}},
      {"max", {Op::Max, kFI | kL}},
      {"min", {Op::Min, kFI | kL}},
      {"argmax", {Op::Argmax, kL}},
      {"matmul", {Op::Matmul, kF}},
      {"conv2d", {Op::Conv2d, kF}},
      {"reshape", {Op::Reshape, kIdx}},
      {"permute", {Op::Permute, kIdx}},
      {"broadcast_to", {Op::BroadcastTo, kIdx}},
      {"slice", {Op::Slice, kIdx}},
      {"concat", {Op::Concat, kIdx}},
      {"pad", {Op::Pad, kIdx}},
      {"gather", {Op::Gather, kIdx}},
      {"scatter_add", {Op::ScatterAdd, kFI}},
      {"max_pool2d", {Op::MaxPool2d, kF}},
      {"avg_pool2d", {Op::AvgPool2d, kF}},
      {"softmax", {Op::Softmax, kF}},
      {"log_softmax", {Op::LogSoftmax, kF}},
  };
  return table;
}

uint8_t dtype_class(lt_dtype d) {
  switch (d) {
    case LT_DTYPE_F32:
      return kF;
    case LT_DTYPE_I32:
      return kI;
    case LT_DTYPE_BOOL:
      return kB;
    case LT_DTYPE_I64:
      return kL;
    default:
      return 0;  // f64, bf16/f16 storage: not on this chip (falls back)
  }
}

bool is_compare(Op op) {
  return op >= Op::Eq && op <= Op::Ge;
}
bool is_unary(Op op) {
  return op >= Op::Neg && op <= Op::Not;
}
bool is_binary(Op op) {
  return op >= Op::Add && op <= Op::Or;
}
bool is_elementwise(Op op) {
  return is_unary(op) || is_binary(op) || op == Op::Where || op == Op::Cast;
}
bool is_transcendental(Op op) {
  return (op >= Op::Exp && op <= Op::Cos) || op == Op::Pow;
}

const char* op_name(Op op) {
  for (const auto& [name, info] : op_table()) {
    if (info.op == op) return name.data();
  }
  return "?";
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ',';
    r += std::to_string(s[i]);
  }
  r += ']';
  return r;
}

const lt_attr* find_attr(const lt_graph_node& n, const char* name) {
  for (size_t i = 0; i < n.num_attrs; ++i) {
    if (n.attrs[i].name && std::strcmp(n.attrs[i].name, name) == 0) return &n.attrs[i];
  }
  return nullptr;
}

[[noreturn]] void bad_node(size_t index, const Node& n, const std::string& what) {
  fail(LT_STATUS_INVALID_ARGUMENT, "node " + std::to_string(index) + " (" + op_name(n.op) + " " +
                                       shape_str(n.shape) + "): " + what);
}

int64_t attr_int(size_t idx, const Node& n, const lt_graph_node& g, const char* name) {
  const lt_attr* a = find_attr(g, name);
  if (!a || a->kind != LT_ATTR_INT) bad_node(idx, n, std::string("missing INT attribute ") + name);
  return a->i;
}
double attr_float(size_t idx, const Node& n, const lt_graph_node& g, const char* name) {
  const lt_attr* a = find_attr(g, name);
  if (!a || a->kind != LT_ATTR_FLOAT) {
    bad_node(idx, n, std::string("missing FLOAT attribute ") + name);
  }
  return a->f;
}
std::vector<int64_t> attr_ints(size_t idx, const Node& n, const lt_graph_node& g, const char* name,
                               size_t expect_len) {
  const lt_attr* a = find_attr(g, name);
  if (!a || a->kind != LT_ATTR_INTS || (a->ints_len && !a->ints)) {
    bad_node(idx, n, std::string("missing INTS attribute ") + name);
  }
  if (expect_len != size_t(-1) && a->ints_len != expect_len) {
    bad_node(idx, n,
             std::string("attribute ") + name + " has " + std::to_string(a->ints_len) +
                 " entries, expected " + std::to_string(expect_len));
  }
  return std::vector<int64_t>(a->ints, a->ints + a->ints_len);
}

// NumPy broadcasting of `in` to `out` (right-aligned, dims equal or 1).
bool broadcasts_to(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  if (in.size() > out.size()) return false;
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != 1 && in[i] != out[off + i]) return false;
  }
  return true;
}

// Decodes attributes and checks every shape relation the executor relies on, so that a
// malformed region is an INVALID_ARGUMENT error, never an out-of-bounds access.
void decode_and_check(size_t idx, Node& n, const lt_graph_node& g, const std::vector<Node>& nodes) {
  auto opnd = [&](size_t k) -> const Node& { return nodes[size_t(n.operands[k])]; };
  auto need_operands = [&](size_t lo, size_t hi) {
    if (n.operands.size() < lo || n.operands.size() > hi) {
      bad_node(idx, n, "has " + std::to_string(n.operands.size()) + " operands");
    }
  };
  const size_t rank = n.shape.size();
  if (is_unary(n.op) || n.op == Op::Cast) {
    need_operands(1, 1);
    if (opnd(0).shape != n.shape) bad_node(idx, n, "operand shape " + shape_str(opnd(0).shape));
    if (n.op != Op::Cast && opnd(0).dtype != n.dtype) bad_node(idx, n, "operand dtype differs");
    return;
  }
  if (is_binary(n.op) || n.op == Op::Where) {
    need_operands(n.op == Op::Where ? 3 : 2, n.op == Op::Where ? 3 : 2);
    for (size_t k = 0; k < n.operands.size(); ++k) {
      if (!broadcasts_to(opnd(k).shape, n.shape)) {
        bad_node(idx, n, "operand shape " + shape_str(opnd(k).shape) + " does not broadcast");
      }
    }
    size_t a = n.op == Op::Where ? 1 : 0;
    if (opnd(a).dtype != opnd(a + 1).dtype) bad_node(idx, n, "operand dtypes differ");
    if (n.op == Op::Where && opnd(0).dtype != LT_DTYPE_BOOL) bad_node(idx, n, "cond is not bool");
    bool bool_out = is_compare(n.op);
    if (bool_out ? n.dtype != LT_DTYPE_BOOL : n.dtype != opnd(a).dtype) {
      bad_node(idx, n, "output dtype does not match the op");
    }
    return;
  }
  switch (n.op) {
    case Op::Input:
      need_operands(0, 0);
      return;
    case Op::Full:
      need_operands(0, 0);
      n.f0 = attr_float(idx, n, g, "value");
      return;
    case Op::Arange:
      need_operands(0, 0);
      if (rank != 1) bad_node(idx, n, "output is not 1-D");
      n.f0 = attr_float(idx, n, g, "start");
      n.f1 = attr_float(idx, n, g, "step");
      return;
    case Op::Sum:
    case Op::Mean:
    case Op::Max:
    case Op::Min: {
      need_operands(1, 1);
      const auto& in = opnd(0).shape;
      n.ints0 = attr_ints(idx, n, g, "axes", size_t(-1));
      n.i = attr_int(idx, n, g, "keepdims");
      std::vector<int64_t> expect;
      for (size_t d = 0; d < in.size(); ++d) {
        bool reduced = std::find(n.ints0.begin(), n.ints0.end(), int64_t(d)) != n.ints0.end();
        if (!reduced) {
          expect.push_back(in[d]);
        } else {
          if ((n.op == Op::Max || n.op == Op::Min) && in[d] == 0) {
            bad_node(idx, n, "reduces an empty axis");
          }
          if (n.i) expect.push_back(1);
        }
      }
      for (size_t k = 0; k < n.ints0.size(); ++k) {
        if (n.ints0[k] < 0 || size_t(n.ints0[k]) >= in.size() ||
            (k && n.ints0[k] <= n.ints0[k - 1])) {
          bad_node(idx, n, "axes are not sorted, unique and in range");
        }
      }
      if (expect != n.shape) bad_node(idx, n, "output shape does not match the reduction");
      if (opnd(0).dtype != n.dtype) bad_node(idx, n, "operand dtype differs");
      return;
    }
    case Op::Argmax: {
      need_operands(1, 1);
      const auto& in = opnd(0).shape;
      const int64_t axis = attr_int(idx, n, g, "axis");
      n.i = attr_int(idx, n, g, "keepdims");
      if (axis < 0 || size_t(axis) >= in.size()) bad_node(idx, n, "axis out of range");
      if (in[size_t(axis)] == 0) bad_node(idx, n, "reduces an empty axis");
      n.ints0 = {axis};
      std::vector<int64_t> expect;
      for (size_t d = 0; d < in.size(); ++d) {
        if (d != size_t(axis)) {
          expect.push_back(in[d]);
        } else if (n.i) {
          expect.push_back(1);
        }
      }
      if (expect != n.shape) bad_node(idx, n, "output shape does not match the reduction");
      if (n.dtype != LT_DTYPE_I64 || opnd(0).dtype == LT_DTYPE_BOOL) {
        bad_node(idx, n, "argmax takes f32/i32/i64 and returns i64");
      }
      return;
    }
    case Op::Matmul: {
      need_operands(2, 2);
      const auto &a = opnd(0).shape, &b = opnd(1).shape;
      bool ok = a.size() == b.size() && (a.size() == 2 || a.size() == 3) && rank == a.size();
      if (ok) {
        size_t r = a.size();
        ok = a[r - 1] == b[r - 2] && n.shape[r - 2] == a[r - 2] && n.shape[r - 1] == b[r - 1] &&
             (r == 2 || (a[0] == b[0] && n.shape[0] == a[0]));
      }
      if (!ok) bad_node(idx, n, "operand shapes " + shape_str(a) + " and " + shape_str(b));
      return;
    }
    case Op::Conv2d: {
      need_operands(2, 3);
      n.ints0 = attr_ints(idx, n, g, "stride", 2);
      n.ints1 = attr_ints(idx, n, g, "padding", 2);
      n.ints2 = attr_ints(idx, n, g, "dilation", 2);
      n.i = attr_int(idx, n, g, "groups");
      const auto &x = opnd(0).shape, &w = opnd(1).shape;
      bool ok = x.size() == 4 && w.size() == 4 && rank == 4 && n.i >= 1 && w[0] % n.i == 0 &&
                x[1] == w[1] * n.i && n.shape[0] == x[0] && n.shape[1] == w[0];
      for (int d = 0; ok && d < 2; ++d) {
        ok = n.ints0[d] >= 1 && n.ints1[d] >= 0 && n.ints2[d] >= 1 &&
             n.shape[2 + d] ==
                 (x[2 + d] + 2 * n.ints1[d] - n.ints2[d] * (w[2 + d] - 1) - 1) / n.ints0[d] + 1 &&
             n.shape[2 + d] >= 0;
      }
      if (ok && n.operands.size() == 3) ok = opnd(2).shape == std::vector<int64_t>{w[0]};
      if (!ok) bad_node(idx, n, "operand shapes " + shape_str(x) + " and " + shape_str(w));
      return;
    }
    case Op::MaxPool2d:
    case Op::AvgPool2d: {
      need_operands(1, 1);
      n.ints0 = attr_ints(idx, n, g, "kernel", 2);
      n.ints1 = attr_ints(idx, n, g, "stride", 2);
      n.ints2 = attr_ints(idx, n, g, "padding", 2);
      const auto& x = opnd(0).shape;
      bool ok = x.size() == 4 && rank == 4 && n.shape[0] == x[0] && n.shape[1] == x[1];
      for (int d = 0; ok && d < 2; ++d) {
        ok = n.ints0[d] >= 1 && n.ints1[d] >= 1 && n.ints2[d] >= 0 &&
             n.shape[2 + d] == (x[2 + d] + 2 * n.ints2[d] - n.ints0[d]) / n.ints1[d] + 1;
      }
      if (!ok) bad_node(idx, n, "input shape " + shape_str(x));
      return;
    }
    case Op::Softmax:
    case Op::LogSoftmax:
      need_operands(1, 1);
      n.i = attr_int(idx, n, g, "axis");
      if (opnd(0).shape != n.shape || n.i < 0 || size_t(n.i) >= rank) bad_node(idx, n, "bad axis");
      return;
    case Op::Reshape:
      need_operands(1, 1);
      if (opnd(0).numel != n.numel) bad_node(idx, n, "element count differs from the operand");
      return;
    case Op::Permute: {
      need_operands(1, 1);
      n.ints0 = attr_ints(idx, n, g, "perm", opnd(0).shape.size());
      std::vector<uint8_t> seen(rank, 0);
      bool ok = rank == opnd(0).shape.size();
      for (size_t d = 0; ok && d < rank; ++d) {
        int64_t p = n.ints0[d];
        ok = p >= 0 && size_t(p) < rank && !seen[size_t(p)] &&
             n.shape[d] == opnd(0).shape[size_t(p)];
        if (ok) seen[size_t(p)] = 1;
      }
      if (!ok) bad_node(idx, n, "perm does not fit the operand");
      return;
    }
    case Op::BroadcastTo:
      need_operands(1, 1);
      if (!broadcasts_to(opnd(0).shape, n.shape)) bad_node(idx, n, "operand does not broadcast");
      return;
    case Op::Slice: {
      need_operands(1, 1);
      const auto& in = opnd(0).shape;
      n.ints0 = attr_ints(idx, n, g, "starts", in.size());
      n.ints1 = attr_ints(idx, n, g, "steps", in.size());
      bool ok = rank == in.size();
      for (size_t d = 0; ok && d < rank; ++d) {
        int64_t s = n.ints0[d], st = n.ints1[d], len = n.shape[d];
        ok = st != 0 && (len == 0 || (s >= 0 && s < in[d] && s + (len - 1) * st >= 0 &&
                                      s + (len - 1) * st < in[d]));
      }
      if (!ok) bad_node(idx, n, "slice reads outside " + shape_str(in));
      return;
    }
    case Op::Concat: {
      need_operands(1, size_t(-1));
      n.i = attr_int(idx, n, g, "axis");
      bool ok = n.i >= 0 && size_t(n.i) < rank;
      int64_t total = 0;
      for (size_t k = 0; ok && k < n.operands.size(); ++k) {
        const auto& s = opnd(k).shape;
        ok = s.size() == rank && opnd(k).dtype == n.dtype;
        for (size_t d = 0; ok && d < rank; ++d) ok = d == size_t(n.i) || s[d] == n.shape[d];
        if (ok) total += s[size_t(n.i)];
      }
      if (!ok || total != n.shape[size_t(n.i)]) bad_node(idx, n, "operands do not concatenate");
      return;
    }
    case Op::Pad: {
      need_operands(1, 1);
      const auto& in = opnd(0).shape;
      n.ints0 = attr_ints(idx, n, g, "before", in.size());
      n.ints1 = attr_ints(idx, n, g, "after", in.size());
      n.f0 = attr_float(idx, n, g, "value");
      bool ok = rank == in.size();
      for (size_t d = 0; ok && d < rank; ++d) {
        ok = n.ints0[d] >= 0 && n.ints1[d] >= 0 && n.shape[d] == in[d] + n.ints0[d] + n.ints1[d];
      }
      if (!ok) bad_node(idx, n, "padding does not fit " + shape_str(in));
      return;
    }
    case Op::Gather: {
      need_operands(2, 2);
      n.i = attr_int(idx, n, g, "axis");
      const auto &a = opnd(0).shape, &ix = opnd(1).shape;
      std::vector<int64_t> expect;
      bool ok = n.i >= 0 && size_t(n.i) < a.size() &&
                (opnd(1).dtype == LT_DTYPE_I32 || opnd(1).dtype == LT_DTYPE_I64) &&
                a[size_t(n.i)] > 0 && opnd(0).dtype == n.dtype;
      if (ok) {
        expect.assign(a.begin(), a.begin() + n.i);
        expect.insert(expect.end(), ix.begin(), ix.end());
        expect.insert(expect.end(), a.begin() + n.i + 1, a.end());
      }
      if (!ok || expect != n.shape) bad_node(idx, n, "operand shapes do not fit gather");
      return;
    }
    case Op::ScatterAdd: {
      need_operands(3, 3);
      n.i = attr_int(idx, n, g, "axis");
      const auto &a = opnd(0).shape, &ix = opnd(1).shape;
      std::vector<int64_t> expect;
      bool ok = n.i >= 0 && size_t(n.i) < a.size() && a == n.shape &&
                (opnd(1).dtype == LT_DTYPE_I32 || opnd(1).dtype == LT_DTYPE_I64) &&
                opnd(0).dtype == n.dtype && opnd(2).dtype == n.dtype;
      if (ok) {
        expect.assign(a.begin(), a.begin() + n.i);
        expect.insert(expect.end(), ix.begin(), ix.end());
        expect.insert(expect.end(), a.begin() + n.i + 1, a.end());
      }
      if (!ok || expect != opnd(2).shape) bad_node(idx, n, "operand shapes do not fit scatter_add");
      return;
    }
    default:
      bad_node(idx, n, "not handled by the compiler");
  }
}

// Output-stationary tiling: an f32 accumulator block b x b takes half of VMEM, the other
// half double-buffers K-panels. A and B are re-read once per block column / row.
double matmul_hbm_bytes(const MachineConfig& mc, double batch, int64_t m, int64_t k, int64_t n,
                        double esize) {
  double half = double(mc.vmem_bytes()) / 2.0;
  int64_t b = int64_t(std::sqrt(half / 4.0));
  b = std::max<int64_t>(mc.array_rows, b / mc.array_rows * mc.array_rows);
  double mb = std::ceil(double(std::max<int64_t>(m, 1)) / double(b));
  double nb = std::ceil(double(std::max<int64_t>(n, 1)) / double(b));
  return batch * esize *
         (double(m) * double(k) * nb + double(k) * double(n) * mb + double(m) * double(n));
}

int64_t round_up(int64_t x, int64_t t) {
  return (x + t - 1) / t * t;
}

}  // namespace

bool supports_node(const lt_graph& graph, size_t index) {
  if (!graph.nodes || index >= graph.num_nodes) return false;
  const lt_graph_node& g = graph.nodes[index];
  if (!g.op) return false;
  auto it = op_table().find(g.op);
  if (it == op_table().end()) return false;  // random_* (counter-based RNG), custom ops
  const OpInfo& info = it->second;
  uint8_t out_class = dtype_class(g.dtype);
  if (!out_class) return false;
  // Compares, cast, where, gather and argmax take operands of other classes than their
  // output (checked in full at compile); every other op's operands share its output's class.
  const bool mixed = is_compare(info.op) || info.op == Op::Cast || info.op == Op::Where ||
                     info.op == Op::Gather || info.op == Op::ScatterAdd || info.op == Op::Argmax;
  for (size_t k = 0; k < g.num_operands; ++k) {
    int32_t o = g.operands ? g.operands[k] : -1;
    if (o < 0 || size_t(o) >= graph.num_nodes) return false;
    uint8_t cls = dtype_class(graph.nodes[o].dtype);
    if (!cls || (!mixed && !(info.dtypes & cls))) return false;
  }
  if (info.op == Op::Argmax)
    return g.num_operands == 1 && (dtype_class(graph.nodes[g.operands[0]].dtype) & (kFI | kL));
  return (info.dtypes & out_class) != 0;
}

Program compile_program(const lt_graph& graph, const MachineConfig& mc) {
  if (graph.struct_size < LT_GRAPH_STRUCT_SIZE) {
    fail(LT_STATUS_INVALID_ARGUMENT, "graph struct_size is smaller than this plugin's lt_graph");
  }
  if ((graph.num_nodes && !graph.nodes) || (graph.num_inputs && !graph.inputs) ||
      (graph.num_outputs && !graph.outputs)) {
    fail(LT_STATUS_INVALID_ARGUMENT, "graph has a NULL array with a non-zero count");
  }
  Program p;
  p.machine = mc;
  p.nodes.resize(graph.num_nodes);
  for (size_t i = 0; i < graph.num_nodes; ++i) {
    const lt_graph_node& g = graph.nodes[i];
    Node& n = p.nodes[i];
    if (!g.op) fail(LT_STATUS_INVALID_ARGUMENT, "node " + std::to_string(i) + " has no op name");
    if (!supports_node(graph, i)) {
      fail(LT_STATUS_UNSUPPORTED, "node " + std::to_string(i) + " (" + g.op + ", " +
                                      lt_dtype_name(g.dtype) + ") is not supported by tpu_sim");
    }
    n.op = op_table().at(g.op).op;
    n.dtype = g.dtype;
    if (g.rank && !g.shape)
      fail(LT_STATUS_INVALID_ARGUMENT, "node " + std::to_string(i) + " has no shape");
    n.shape.assign(g.shape, g.shape + g.rank);
    double numel = 1;
    for (int64_t d : n.shape) {
      if (d < 0) bad_node(i, n, "negative dimension");
      numel *= double(d);
    }
    if (numel > 9.0e18 / 8) bad_node(i, n, "too many elements");
    n.numel = int64_t(numel);
    n.nbytes = uint64_t(n.numel) * lt_dtype_size(n.dtype);
    for (size_t k = 0; k < g.num_operands; ++k) {
      if (g.operands[k] < 0 || size_t(g.operands[k]) >= i) {
        bad_node(i, n, "operand " + std::to_string(k) + " is not an earlier node");
      }
      n.operands.push_back(g.operands[k]);
    }
    decode_and_check(i, n, g, p.nodes);
  }
  std::vector<uint8_t> is_input(p.nodes.size(), 0);
  for (size_t k = 0; k < graph.num_inputs; ++k) {
    int32_t v = graph.inputs[k];
    if (v < 0 || size_t(v) >= p.nodes.size() || p.nodes[size_t(v)].op != Op::Input) {
      fail(LT_STATUS_INVALID_ARGUMENT, "input " + std::to_string(k) + " is not an input node");
    }
    is_input[size_t(v)] = 1;
    p.inputs.push_back(v);
  }
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    if (p.nodes[i].op == Op::Input && !is_input[i]) {
      fail(LT_STATUS_INVALID_ARGUMENT,
           "input node " + std::to_string(i) + " is not bound to an input");
    }
  }
  p.is_output.assign(p.nodes.size(), 0);
  for (size_t k = 0; k < graph.num_outputs; ++k) {
    int32_t v = graph.outputs[k];
    if (v < 0 || size_t(v) >= p.nodes.size()) {
      fail(LT_STATUS_INVALID_ARGUMENT, "output " + std::to_string(k) + " is not a node");
    }
    p.is_output[size_t(v)] = 1;
    p.outputs.push_back(v);
  }

  // Liveness and fusion: an elementwise intermediate read only by elementwise ops stays in
  // VMEM (XLA-style loop fusion): it costs no HBM traffic and no HBM space.
  const size_t count = p.nodes.size();
  p.last_use.assign(count, -1);
  std::vector<uint8_t> only_elementwise_users(count, 1);
  for (size_t i = 0; i < count; ++i) {
    for (int32_t o : p.nodes[i].operands) {
      p.last_use[size_t(o)] = int32_t(i);
      if (!is_elementwise(p.nodes[i].op)) only_elementwise_users[size_t(o)] = 0;
    }
  }
  std::vector<uint8_t> in_vmem(count, 0);
  for (size_t i = 0; i < count; ++i) {
    in_vmem[i] = is_elementwise(p.nodes[i].op) && !p.is_output[i] && p.last_use[i] >= 0 &&
                 only_elementwise_users[i];
  }

  // HBM capacity: inputs and outputs live throughout; intermediates from definition to last use.
  double in_bytes = 0, out_bytes = 0, live = 0, peak = 0;
  for (int32_t v : p.inputs) in_bytes += double(p.nodes[size_t(v)].nbytes);
  for (size_t i = 0; i < count; ++i) {
    if (p.is_output[i]) out_bytes += double(p.nodes[i].nbytes);
  }
  std::vector<std::vector<int32_t>> dies_at(count);
  for (size_t i = 0; i < count; ++i) {
    if (p.last_use[i] >= 0) dies_at[size_t(p.last_use[i])].push_back(int32_t(i));
  }
  auto counted = [&](size_t i) { return !is_input[i] && !p.is_output[i] && !in_vmem[i]; };
  for (size_t i = 0; i < count; ++i) {
    if (counted(i)) live += double(p.nodes[i].nbytes);
    peak = std::max(peak, live);
    if (counted(i) && p.last_use[i] < 0) live -= double(p.nodes[i].nbytes);
    for (int32_t d : dies_at[i]) {
      if (counted(size_t(d))) live -= double(p.nodes[size_t(d)].nbytes);
    }
  }
  double need = in_bytes + out_bytes + peak;
  p.hbm_needed = uint64_t(need);
  if (need > double(mc.hbm_capacity_bytes())) {
    fail(LT_STATUS_OUT_OF_MEMORY,
         "program needs " + format_bytes(need) + " of HBM (inputs " + format_bytes(in_bytes) +
             ", outputs " + format_bytes(out_bytes) + ", peak intermediates " + format_bytes(peak) +
             "), capacity " + format_bytes(double(mc.hbm_capacity_bytes())));
  }

  // Lowering and pricing, one pipelined stage per computing node.
  const double bw = mc.hbm_bytes_per_s(), vec = mc.vector_ops_per_s(), peak_f = mc.peak_flops();
  const double fill_tile = double(mc.array_rows * mc.array_cols) * 4.0 * 2.0;
  Cost& c = p.cost;
  for (size_t i = 0; i < count; ++i) {
    const Node& n = p.nodes[i];
    if (n.op == Op::Input || n.op == Op::Reshape) continue;  // reshape: a bitcast in HBM
    Stage st{int32_t(i)};
    double read = 0;
    std::vector<int32_t> seen;
    for (int32_t o : n.operands) {
      if (std::find(seen.begin(), seen.end(), o) != seen.end()) continue;
      seen.push_back(o);
      if (!in_vmem[size_t(o)]) read += double(p.nodes[size_t(o)].nbytes);
    }
    double write = in_vmem[i] ? 0.0 : double(n.nbytes);
    Instr compute{Unit::Vpu, int32_t(i)};
    if (n.op == Op::Matmul || n.op == Op::Conv2d) {
      compute.unit = Unit::Mxu;
      if (n.op == Op::Matmul) {
        size_t r = n.shape.size();
        const auto& a = p.nodes[size_t(n.operands[0])].shape;
        compute.b = r == 3 ? n.shape[0] : 1;
        compute.m = a[r - 2];
        compute.k = a[r - 1];
        compute.n = n.shape[r - 1];
        read = matmul_hbm_bytes(mc, double(compute.b), compute.m, compute.k, compute.n, 4.0) -
               double(n.nbytes) * 1.0;
      } else {
        const auto& w = p.nodes[size_t(n.operands[1])].shape;
        compute.b = n.i;  // groups
        compute.m = n.shape[0] * n.shape[2] * n.shape[3];
        compute.k = w[1] * w[2] * w[3];
        compute.n = w[0] / n.i;
      }
      compute.mp = round_up(compute.m, mc.array_rows);
      compute.kp = round_up(compute.k, mc.array_rows);
      compute.np = round_up(compute.n, mc.array_cols);
      compute.ops =
          2.0 * double(compute.b) * double(compute.mp) * double(compute.kp) * double(compute.np);
      compute.ns = compute.ops / peak_f * 1e9;
      c.flops +=
          2.0 * double(compute.b) * double(compute.m) * double(compute.k) * double(compute.n);
      c.padded_flops += compute.ops;
      c.mxu_ns += compute.ns;
    } else {
      double per_elem = 1.0;
      double elems = double(n.numel);
      if (is_transcendental(n.op)) per_elem = 4.0;
      if (n.op == Op::Gelu) per_elem = 8.0;
      if (n.op == Op::Softmax || n.op == Op::LogSoftmax) per_elem = 8.0;
      if (n.op >= Op::Sum && n.op <= Op::Argmax) {
        elems = double(p.nodes[size_t(n.operands[0])].numel);
      }
      if (n.op == Op::Argmax) per_elem = 2.0;  // compare + select of the index
      bool wide = n.dtype == LT_DTYPE_I64;
      for (int32_t o : n.operands) wide = wide || p.nodes[size_t(o)].dtype == LT_DTYPE_I64;
      if (wide) per_elem *= n.op == Op::Mul ? 4.0 : 2.0;  // s64 emulated as two s32 words
      if (n.op == Op::MaxPool2d || n.op == Op::AvgPool2d)
        per_elem = double(n.ints0[0] * n.ints0[1]);
      if (n.op >= Op::Permute && n.op <= Op::ScatterAdd) compute.unit = Unit::Xlu;
      if (n.op == Op::ScatterAdd) {  // copy a, then one read-modify-write per update
        elems = double(n.numel) + double(p.nodes[size_t(n.operands[2])].numel);
      }
      compute.ops = elems * per_elem;
      compute.ns = compute.ops / vec * 1e9;
      c.vector_ns += compute.ns;
    }
    if (read > 0) {
      Instr in{Unit::DmaIn, int32_t(i)};
      in.bytes = read;
      in.ns = read / bw * 1e9;
      p.instrs.push_back(in);
    }
    p.instrs.push_back(compute);
    if (write > 0) {
      Instr out{Unit::DmaOut, int32_t(i)};
      out.bytes = write;
      out.ns = write / bw * 1e9;
      p.instrs.push_back(out);
    }
    st.compute_ns = compute.ns;
    st.dma_ns = (read + write) / bw * 1e9;
    st.fill_ns = std::min(read + write, fill_tile) / bw * 1e9;
    st.ns = std::max(st.compute_ns, st.dma_ns) + st.fill_ns;
    c.hbm_bytes += read + write;
    c.dma_ns += st.dma_ns;
    c.simulated_ns += st.ns;
    p.stages.push_back(st);
  }
  c.simulated_ns += mc.launch_overhead_us * 1e3;
  c.mxu_utilization = c.simulated_ns > 0 ? c.flops / (c.simulated_ns * 1e-9 * peak_f) : 0.0;
  return p;
}

std::string Program::listing() const {
  static const char* unit_names[] = {"DMA_IN", "DMA_OUT", "MXU", "VPU", "XLU"};
  std::string s;
  char line[256];
  for (const Instr& in : instrs) {
    const Node& n = nodes[size_t(in.node)];
    if (in.unit == Unit::Mxu) {
      std::snprintf(line, sizeof line,
                    "%-7s %%%d %s [%lldx%lldx%lldx%lld] padded [%lldx%lldx%lld] %.3f us\n",
                    unit_names[int(in.unit)], in.node, op_name(n.op), (long long)in.b,
                    (long long)in.m, (long long)in.k, (long long)in.n, (long long)in.mp,
                    (long long)in.kp, (long long)in.np, in.ns / 1e3);
    } else {
      std::snprintf(line, sizeof line, "%-7s %%%d %s %s bytes=%.0f ops=%.0f %.3f us\n",
                    unit_names[int(in.unit)], in.node, op_name(n.op), shape_str(n.shape).c_str(),
                    in.bytes, in.ops, in.ns / 1e3);
    }
    s += line;
  }
  return s;
}

}  // namespace lt::tpu
