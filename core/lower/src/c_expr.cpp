// c_expr.cpp — C-family expression rendering of the elementwise primitives (see c_expr.hpp).
#include "lazytensor/lower/c_expr.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <unordered_map>

#include "lazytensor/lower/element.hpp"
#include "lazytensor/lower/error.hpp"
#include "lazytensor/lower/ops.hpp"
#include "lazytensor/lower/reduce_formula.hpp"

namespace lt::lower::c_expr {
namespace {

constexpr std::string_view kUnary[] = {"neg",  "abs", "exp", "log",   "sqrt",
                                       "tanh", "sin", "cos", "floor", "not"};
constexpr std::string_view kBinary[] = {"add",     "sub",     "mul", "div", "pow",
                                        "maximum", "minimum", "eq",  "ne",  "lt",
                                        "le",      "gt",      "ge",  "and", "or"};

std::string unsigned_type(lt_dtype d, const Dialect& c) {
  return d == LT_DTYPE_I64 ? c.u64 : c.u32;
}

std::string number(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// The int literal v (integral, in range) of dtype d.
std::string int_literal(double v, lt_dtype d, const Dialect& c) {
  std::string t = type(d, c);
  if (d == LT_DTYPE_I64 && v <= -9223372036854775808.0)
    return "((" + t + ")(-9223372036854775807L - 1))";
  char buf[32];
  std::snprintf(buf, sizeof buf, d == LT_DTYPE_I64 ? "%lldL" : "%lld", static_cast<long long>(v));
  return "((" + t + ")" + buf + ")";
}

}  // namespace

std::string type(lt_dtype d, const Dialect& c) {
  switch (d) {
    case LT_DTYPE_F32:
      return c.f32;
    case LT_DTYPE_F64:
      return c.f64;
    case LT_DTYPE_I32:
      return c.i32;
    case LT_DTYPE_I64:
      return c.i64;
    case LT_DTYPE_BOOL:
      return c.boolean;
    case LT_DTYPE_BF16:
    case LT_DTYPE_F16:
      return c.u16;
    default:
      fail(LT_STATUS_UNSUPPORTED, std::string("no C type for dtype ") + lt_dtype_name(d));
  }
}

std::string storage_functions(const Dialect& c, const std::string& q) {
  const std::string u16 = c.u16, u32 = c.u32, f = c.f32;
  std::string bits, flt;  // x's bits as u32, and the float of u32 bits
  std::string s;
  if (*c.bits_of_f32) {
    bits = std::string(c.bits_of_f32) + "(x)";
    flt = std::string(c.f32_of_bits) + "(u)";
  } else {
    s += "typedef union { " + f + " f; " + u32 + " u; } lt_f32_bits;\n";
    bits = "((lt_f32_bits){.f = (x)}).u";
    flt = "((lt_f32_bits){.u = (u)}).f";
  }
  s += q + " " + f + " lt_bits_f32(" + u32 + " u) { return " + flt + "; }\n";
  s += q + " " + u32 + " lt_f32_bits_of(" + f + " x) { return " + bits + "; }\n";
  s += q + " " + f + " lt_bf16_to_f32(" + u16 + " b) { return lt_bits_f32((" + u32 +
       ")b << 16); }\n";
  s += q + " " + u16 + " lt_f32_to_bf16(" + f + " x) {\n  " + u32 +
       " u = lt_f32_bits_of(x);\n"
       "  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) return (" +
       u16 + ")((u | 0x00400000u) >> 16);\n  u += 0x7FFFu + ((u >> 16) & 1u);\n  return (" + u16 +
       ")(u >> 16);\n}\n";
  s += q + " " + f + " lt_f16_to_f32(" + u16 + " h) {\n  " + u32 + " sign = ((" + u32 +
       ")h & 0x8000u) << 16, e = ((" + u32 + ")h >> 10) & 0x1Fu, m = (" + u32 +
       ")h & 0x3FFu;\n"
       "  if (e == 0) { " +
       f + " v = (" + f +
       ")m * 5.9604644775390625e-8f; return sign ? -v : v; }\n"
       "  if (e == 31) return lt_bits_f32(sign | 0x7F800000u | (m << 13));\n"
       "  return lt_bits_f32(sign | ((e + 112u) << 23) | (m << 13));\n}\n";
  s +=
      q + " " + u16 + " lt_f32_to_f16(" + f + " x) {\n  " + u32 +
      " u = lt_f32_bits_of(x), sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;\n"
      "  if (a >= 0x7F800000u) return (" +
      u16 +
      ")(sign | (a > 0x7F800000u ? 0x7E00u : 0x7C00u));\n"
      "  if (a >= 0x477FF000u) return (" +
      u16 +
      ")(sign | 0x7C00u);\n"
      "  if (a < 0x38800000u) {  /* f16 subnormal or zero: the nearest multiple of 2^-24 */\n    " +
      f + " t = lt_bits_f32(a) * 16777216.0f;\n    " + u32 + " r = (" + u32 + ")t;\n    " + f +
      " d = t - (" + f +
      ")r;\n"
      "    if (d > 0.5f || (d == 0.5f && (r & 1u))) r += 1u;\n    return (" +
      u16 +
      ")(sign | r);\n  }\n"
      "  return (" +
      u16 + ")(sign | ((a + 0xC8000FFFu + ((a >> 13) & 1u)) >> 13));\n}\n";
  return s;
}

std::string literal(double v, lt_dtype d, const Dialect& c) {
  const std::string t = type(d, c);
  if (d == LT_DTYPE_BF16 || d == LT_DTYPE_F16) {  // the bits of v rounded to the storage type
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%04X", lower::half_bits(static_cast<float>(v), d));
    return "((" + t + ")" + buf + ")";
  }
  if (d == LT_DTYPE_BOOL) return "((" + t + ")" + (v != 0 ? "1" : "0") + ")";
  if (is_int(d)) {
    const double lim = d == LT_DTYPE_I32 ? 2147483648.0 : 9223372036854775808.0;
    double x = std::isnan(v) ? 0 : std::clamp(std::trunc(v), -lim, lim - 1);
    if (d == LT_DTYPE_I64 && x >= lim - 1) return "((" + t + ")9223372036854775807L)";
    return int_literal(x, d, c);
  }
  if (std::isnan(v)) return "((" + t + ")NAN)";
  if (std::isinf(v)) return v > 0 ? "((" + t + ")INFINITY)" : "(-(" + t + ")INFINITY)";
  std::string s = "(";  // appended, not prepended: GCC 12 misreports "(" + string (PR 105329)
  s += d == LT_DTYPE_F32 ? number("%.9g", static_cast<float>(v)) + "f" : number("%.17g", v);
  return s + ")";
}

std::string cast(const std::string& x, lt_dtype from, lt_dtype to, const Dialect& c) {
  const std::string t = type(to, c);
  if (from == to) return x;
  if (from == LT_DTYPE_BF16 || from == LT_DTYPE_F16)  // through f32, which holds both exactly
    return cast(std::string(from == LT_DTYPE_BF16 ? "lt_bf16_to_f32(" : "lt_f16_to_f32(") + x + ")",
                LT_DTYPE_F32, to, c);
  if (to == LT_DTYPE_BF16 || to == LT_DTYPE_F16)
    return std::string(to == LT_DTYPE_BF16 ? "lt_f32_to_bf16(" : "lt_f32_to_f16(") +
           cast(x, from, LT_DTYPE_F32, c) + ")";
  if (to == LT_DTYPE_BOOL) return "((" + t + ")((" + x + ") != 0))";
  if (!is_float(from) || !is_int(to)) return "((" + t + ")(" + x + "))";
  if (*c.saturating_cast) {
    char fn[64];
    std::snprintf(fn, sizeof fn, c.saturating_cast, t.c_str());
    return std::string(fn) + "(" + x + ")";
  }
  // In range: truncation; the bounds are powers of two, exact in every float type.
  const double lim = to == LT_DTYPE_I32 ? 2147483648.0 : 9223372036854775808.0;
  return "((" + x + ") != (" + x + ") ? " + literal(0, to, c) + " : (" + x +
         ") >= " + literal(lim, from, c) + " ? " + literal(lim, to, c) + " : (" + x +
         ") <= " + literal(-lim, from, c) + " ? " + literal(-lim, to, c) + " : (" + t + ")(" + x +
         "))";
}

bool is_unary(std::string_view op) {
  return std::find(std::begin(kUnary), std::end(kUnary), op) != std::end(kUnary);
}
bool is_binary(std::string_view op) {
  return std::find(std::begin(kBinary), std::end(kBinary), op) != std::end(kBinary);
}

std::string unary(std::string_view op, const std::string& a, lt_dtype d, const Dialect& c) {
  const std::string t = type(d, c), u = unsigned_type(d, c);
  if (op == "neg") return is_int(d) ? "((" + t + ")(-(" + u + ")(" + a + ")))" : "(-" + a + ")";
  if (op == "abs")
    return is_int(d) ? "((" + a + ") < 0 ? (" + t + ")(-(" + u + ")(" + a + ")) : (" + a + "))"
                     : "fabs(" + a + ")";
  if (op == "not") return "((" + t + ")!(" + a + "))";
  if (op == "tanh" && is_float(d)) {
    // Beyond 13 ln 2 (f32) or 27.5 ln 2 (f64) tanh rounds to +-1 exactly, as libm gives it;
    // OpenCL's tanh (PoCL) returned 0.99999994 for 10, 20 and inf (issue #29). NaN keeps tanh.
    const std::string cut = d == LT_DTYPE_F64 ? "19.062" : "9.011f";
    return "(fabs(" + a + ") > " + cut + " ? copysign((" + t + ")1, " + a + ") : tanh(" + a + "))";
  }
  if (is_unary(op)) return std::string(op) + "(" + a + ")";
  fail(LT_STATUS_UNSUPPORTED, "no C expression for unary op " + std::string(op));
}

std::string binary(std::string_view op, const std::string& a, const std::string& b, lt_dtype d,
                   const Dialect& c) {
  const std::string t = type(d, c), u = unsigned_type(d, c);
  const bool i = is_int(d);
  static constexpr std::pair<std::string_view, const char*> kInfix[] = {
      {"add", "+"}, {"sub", "-"}, {"mul", "*"}, {"eq", "=="},  {"ne", "!="}, {"lt", "<"},
      {"le", "<="}, {"gt", ">"},  {"ge", ">="}, {"and", "&&"}, {"or", "||"}};
  for (const auto& [name, sym] : kInfix) {
    if (op != name) continue;
    if (name == "add" || name == "sub" || name == "mul")  // ints wrap: unsigned arithmetic
      return i ? "((" + t + ")((" + u + ")" + a + " " + sym + " (" + u + ")" + b + "))"
               : "(" + a + " " + sym + " " + b + ")";
    return "((" + std::string(c.boolean) + ")(" + a + " " + sym + " " + b + "))";
  }
  if (op == "div")
    return !i ? "(" + a + " / " + b + ")"
              : "(" + b + " == 0 ? (" + t + ")0 : (" + b + " == -1 ? (" + t + ")(-(" + u + ")" + a +
                    ") : " + a + " / " + b + "))";
  if (op == "pow") return "pow(" + a + ", " + b + ")";
  if (op == "maximum" || op == "minimum") {  // floats: a NaN a is picked, a NaN b wins the else
    std::string take = a + (op == "maximum" ? " > " : " < ") + b;
    if (is_float(d)) take = "(" + take + " || " + a + " != " + a + ")";
    return "(" + take + " ? " + a + " : " + b + ")";
  }
  fail(LT_STATUS_UNSUPPORTED, "no C expression for binary op " + std::string(op));
}

bool lane_wise(std::string_view op, lt_dtype d) {
  if (d != LT_DTYPE_F32 && d != LT_DTYPE_F64) return false;  // bf16/f16 are bits, one by one
  return op.empty() || (is_unary(op) && op != "not") || op == "add" || op == "sub" || op == "mul" ||
         op == "div" || op == "pow" || op == "maximum" || op == "minimum";
}

namespace {
const ReduceFormula& reduce_formula_of(std::string_view op) {
  const ReduceFormula* f = reduce_formula(op);
  if (!f) fail(LT_STATUS_UNSUPPORTED, "no C accumulator for reduction " + std::string(op));
  return *f;
}
}  // namespace

std::string reduce_init(std::string_view op, lt_dtype d, const Dialect& c) {
  return literal(reduce_formula_of(op).identity, d, c);
}

std::string reduce_step(std::string_view op, const std::string& acc, const std::string& x,
                        lt_dtype d, const Dialect& c) {
  return binary(reduce_formula_of(op).combine, acc, x, d, c);
}

std::string rename_params(const std::string& text, char prefix,
                          const std::vector<int32_t>& params) {
  std::unordered_map<int64_t, size_t> pos;
  for (size_t k = 0; k < params.size(); ++k) pos.emplace(params[k], k);
  auto ident = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
  auto digit = [](char ch) { return ch >= '0' && ch <= '9'; };
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t j = i + 1;
    if (text[i] == prefix && (i == 0 || !ident(text[i - 1]))) {
      while (j < text.size() && digit(text[j])) ++j;
      if (j > i + 1 && j - i < 12 && (j == text.size() || !ident(text[j]))) {
        auto it = pos.find(std::stoll(text.substr(i + 1, j - i - 1)));
        if (it != pos.end()) {
          out += "lt_arg" + std::to_string(it->second);
          i = j;
          continue;
        }
      }
      j = i + 1;
    }
    out += text[i];
    i = j;
  }
  return out;
}

std::string offset(const View& v, const Index& idx) {
  std::string s = v.offset ? std::to_string(v.offset) + "L" : "";
  for (size_t d = 0; d < idx.size(); ++d) {
    if (idx[d] == "0" || v.strides[d] == 0) continue;
    s += (s.empty() ? "(" : " + (") + idx[d] + ")";
    if (v.strides[d] != 1) s += "*" + std::to_string(v.strides[d]) + "L";
  }
  return s.empty() ? "0" : s;
}

std::string in_window(const View& v, const Index& idx) {
  std::string s;
  for (size_t d = 0; d < v.lo.size(); ++d) {
    if (v.lo[d] > 0)
      s += (s.empty() ? "(" : " && (") + idx[d] + ") >= " + std::to_string(v.lo[d]) + "L";
    if (v.hi[d] < v.shape[d])
      s += (s.empty() ? "(" : " && (") + idx[d] + ") < " + std::to_string(v.hi[d]) + "L";
  }
  return s;
}

Index unflatten(std::ostream& out, const std::string& indent, const std::string& var,
                const std::vector<int64_t>& shape, const std::string& prefix, const Dialect& c) {
  const View dense = View::dense(shape);
  Index idx(shape.size(), "0");
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    idx[d] = prefix + std::to_string(d);
    std::string e = var;
    if (d > 0) e = "(" + e + " % " + std::to_string(dense.strides[d] * shape[d]) + "L)";
    if (dense.strides[d] != 1) e = "(" + e + " / " + std::to_string(dense.strides[d]) + "L)";
    out << indent << "const " << c.i64 << " " << idx[d] << " = " << e << ";\n";
  }
  return idx;
}

}  // namespace lt::lower::c_expr
