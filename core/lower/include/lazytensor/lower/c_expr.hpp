// c_expr.hpp — C-family expressions for the elementwise primitives of docs/ops.md, for any
// backend that generates C-like source (OpenCL C, CUDA, Metal, C): type names, literals,
// casts, unary and binary ops with the IR's semantics (integer add/sub/mul/neg wrap, integer
// x/0 = 0 and INT_MIN/-1 = INT_MIN, maximum/minimum propagate NaN, comparisons give the boolean
// type, float->int casts truncate, saturate and send NaN to 0). A Dialect names the types and
// the conversion function; expressions are fully parenthesised and evaluate each operand text
// as often as they mention it, so pass variables, not side effects.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "lazytensor/lower/view.hpp"
#include "lazytensor/lt_types.h"

namespace lt::lower::c_expr {

struct Dialect {
  const char* f32 = "float";
  const char* f64 = "double";
  const char* i32 = "int";
  const char* i64 = "long";  // 64 bits (LP64 C, OpenCL C, CUDA, Metal); literals get an L suffix
  const char* u32 = "unsigned int";
  const char* u64 = "unsigned long";
  const char* boolean = "unsigned char";  // storage of bool: one byte holding 0 or 1
  const char* u16 = "unsigned short";     // storage of bf16 and f16: their bits
  // Reinterpreting f32 <-> u32 bits (OpenCL: as_uint / as_float); empty: a union.
  const char* bits_of_f32 = "";
  const char* f32_of_bits = "";
  // printf format of a saturating, round-toward-zero float->int conversion taking the target
  // type's name (OpenCL: "convert_%s_sat_rtz"); empty: an inline compare-and-clamp expression.
  const char* saturating_cast = "";
};

// The type of dtype d; bf16 and f16 are stored as their 16 bits (Dialect::u16): they are only
// loaded, stored and cast (arithmetic on them is widened to f32 by lower::decompose).
std::string type(lt_dtype d, const Dialect& c);
// Source of the conversion functions cast() uses for bf16/f16 (lt_bf16_to_f32, lt_f32_to_bf16,
// lt_f16_to_f32, lt_f32_to_f16: round to nearest even, NaN stays NaN, f16 overflow to inf,
// subnormals kept): emit it once before the kernels, prefixed by `qualifier` ("inline",
// "static inline", ...).
std::string storage_functions(const Dialect& c, const std::string& qualifier = "static inline");
// `v` converted to d as the op "cast" converts it (NaN/inf as NAN/INFINITY).
std::string literal(double v, lt_dtype d, const Dialect& c);
std::string cast(const std::string& x, lt_dtype from, lt_dtype to, const Dialect& c);

// The primitives rendered here: neg abs exp log sqrt tanh sin cos floor not, and add sub mul
// div pow maximum minimum eq ne lt le gt ge and or.
bool is_unary(std::string_view op);
bool is_binary(std::string_view op);
// Whether `op` of dtype d renders lane by lane on the dialect's vector types (OpenCL's floatN and
// doubleN): f32/f64 arithmetic, pow, maximum, minimum and the unary math functions, not `not`,
// comparisons (they give the boolean type), casts or selects. op "": a plain load or store of d.
// The lower::LaneOp of lower::vector_rows for C-family generators.
bool lane_wise(std::string_view op, lt_dtype d);
// `d` is the operands' dtype (for comparisons it differs from the result's).
std::string unary(std::string_view op, const std::string& a, lt_dtype d, const Dialect& c);
std::string binary(std::string_view op, const std::string& a, const std::string& b, lt_dtype d,
                   const Dialect& c);

// The reductions of lower::reduce_formula (reduce_formula.hpp) in a C-family loop: the
// accumulator's start (its identity as a literal: -inf/+inf saturate to the integer limits) and
// one accumulation step (its combining primitive, maximum/minimum with the IR's NaN rule) of `x`
// into `acc`, both of dtype d.
std::string reduce_init(std::string_view op, lt_dtype d, const Dialect& c);
std::string reduce_step(std::string_view op, const std::string& acc, const std::string& x,
                        lt_dtype d, const Dialect& c);

// `text` with every identifier `<prefix><node>` whose node is params[k] renamed `lt_arg<k>`: a
// kernel whose buffers are named by graph node becomes a text that names them by position, so that
// kernels differing only in the buffers they touch (the groups of a deep chain, the pieces of
// a wide sync) are one source, compiled once and launched with other arguments.
std::string rename_params(const std::string& text, char prefix, const std::vector<int32_t>& params);

// A multi-index as C-family expressions, one per dimension ("0" where the dimension has size 1).
using Index = std::vector<std::string>;
// The element offset of index `idx` through view `v`, as a 64-bit (L-suffixed) expression;
// dimensions indexed "0" or of stride 0 drop out ("0" when all do).
std::string offset(const View& v, const Index& idx);
// Whether index `idx` lies in v's window (View::lo/hi, where pad and concat read their operand)
// as a condition ("(i1) >= 2L && (i1) < 5L"); "" when the window is everything (no bound).
std::string in_window(const View& v, const Index& idx);
// Appends to `out` one `const <i64> <prefix><d> = ...;` line per dimension of `shape` over 1,
// each indented by `indent`: the coordinates of flat index `var` in dense `shape`; returns them.
Index unflatten(std::ostream& out, const std::string& indent, const std::string& var,
                const std::vector<int64_t>& shape, const std::string& prefix, const Dialect& c);

}  // namespace lt::lower::c_expr
