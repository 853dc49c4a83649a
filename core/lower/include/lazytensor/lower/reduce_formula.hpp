// reduce_formula.hpp — how each reduction accumulates, written once for every code generator:
// the accumulator's identity and the binary primitive that folds one element into it (cpu_jit
// renders them as LLVM IR, c_expr as C text for gpu_opencl).
#pragma once

#include <limits>
#include <string_view>

namespace lt::lower {

struct ReduceFormula {
  std::string_view op;       // the reduction: sum, mean, max, min
  std::string_view combine;  // acc = combine(acc, x): the primitive add, maximum or minimum
  double identity;           // 0, -inf or +inf; an integer accumulator saturates to its limits
  bool mean;                 // the result is divided by the number of elements reduced
};

inline constexpr ReduceFormula kReduceFormulas[] = {
    {"sum", "add", 0.0, false},
    {"mean", "add", 0.0, true},
    {"max", "maximum", -std::numeric_limits<double>::infinity(), false},
    {"min", "minimum", std::numeric_limits<double>::infinity(), false}};

// The formula of reduction `op`, or nullptr when no generator accumulates it (argmax: a host step).
inline const ReduceFormula* reduce_formula(std::string_view op) {
  for (const ReduceFormula& f : kReduceFormulas)
    if (f.op == op) return &f;
  return nullptr;
}

}  // namespace lt::lower
