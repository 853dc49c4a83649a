// codegen.h — internal, LLVM side (only this header and its three .cpp files see LLVM): the
// kernel emitter (codegen.cpp) and the f32 vector math it emits (vecmath.cpp), for
// jit_session.cpp.
#ifndef LT_CPU_JIT_CODEGEN_H
#define LT_CPU_JIT_CODEGEN_H

#include <string>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/Error.h>

#include "program.h"

namespace lt::cpujit {

// What the math bodies may use on the target the kernels are compiled for.
struct MathTarget {
  unsigned vector_bits = 128;  // widest vector the kernels use (128, 256, 512)
  bool avx512 = false;         // AVX-512 F+VL usable at every width up to vector_bits
  bool fma = false;            // llvm.fmuladd fuses (tanh's clamp point depends on it)
};

// Emits `void names[k](ptr buffers, i64 begin, i64 end)` for every kernel into `module`
// and fills each desc's slots / parallel_extent / work_per_index.
llvm::Error emit_kernels(llvm::Module& module, std::vector<KernelDesc>& kernels,
                         const std::vector<std::string>& names, const MathTarget& math);

// e^x for a float: a call of `lt.exp.f32` with VFABI vector variants up to
// target.vector_bits, so the vectoriser picks one and define_math gives it a body for exactly
// that width (AVX-512: vscalefps).
llvm::Value* emit_exp_f32(llvm::IRBuilder<>& b, llvm::Value* x, const MathTarget& target);
// log x and tanh x for a float or a vector of floats, inline.
llvm::Value* emit_log_f32(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_tanh_f32(llvm::IRBuilder<>& b, llvm::Value* x, const MathTarget& target);

// num/den for a quotient whose factors are bounded for every input (NaN aside): |num| <=
// num_bound and den >= 1. Such quotients are tagged, so that merge_quotients can multiply
// two of them with one division.
llvm::Value* emit_bounded_quotient(llvm::IRBuilder<>& b, llvm::Value* num, llvm::Value* den,
                                   double num_bound);
// Rewrites each product of two tagged quotients with no other use, n1/d1 · n2/d2, as
// (n1·n2)/(d1·d2): one division for sigmoid(a)·tanh(b). d1·d2 >= 1 cannot underflow; where it
// overflows the exact product is below 1e-33 (merges that would raise the numerator bound
// past that are not made). The result is tagged again: products of three merge too.
void merge_quotients(llvm::Function& f);

// Gives every referenced `lt.exp.f32*` declaration of `m` a body (internal, always
// inline). Run after loop vectorisation, before the inliner.
void define_math(llvm::Module& m, const MathTarget& target);

}  // namespace lt::cpujit

#endif  // LT_CPU_JIT_CODEGEN_H
