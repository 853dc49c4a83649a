// vecmath.h — internal: f32 transcendentals as LLVM IR for the kernel emitter (codegen.cpp)
// and the optimiser (jit_session.cpp). exp is emitted as a call whose vector variants the
// loop vectoriser picks through the VFABI mapping, so each variant can use the host's own
// instructions (AVX-512 vscalefps); log and tanh are plain IR that vectorises as it is.
#ifndef LT_CPU_JIT_VECMATH_H
#define LT_CPU_JIT_VECMATH_H

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

namespace lt::cpujit {

// What the math bodies may use on the target the kernels are compiled for.
struct MathTarget {
  unsigned vector_bits = 128;  // widest vector the kernels use (128, 256, 512)
  bool avx512 = false;         // AVX-512 F+VL usable at every width up to vector_bits
  bool fma = false;            // llvm.fmuladd fuses (tanh's clamp point depends on it)
};

// e^x for a float: a call of `lt.exp.f32`, declared (with its vector variants up to
// target.vector_bits) in the builder's module on first use. Bodies come from define_math.
llvm::Value* emit_exp_f32(llvm::IRBuilder<>& b, llvm::Value* x, const MathTarget& target);
// log x and tanh x for a float or a vector of floats, inline.
llvm::Value* emit_log_f32(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_tanh_f32(llvm::IRBuilder<>& b, llvm::Value* x, const MathTarget& target);

// num/den for a quotient whose factors are bounded for every input (NaN aside): |num| <=
// num_bound and den >= 1. Such quotients are tagged, so that merge_quotients can multiply
// two of them with one division.
llvm::Value* emit_bounded_quotient(llvm::IRBuilder<>& b, llvm::Value* num, llvm::Value* den,
                                   double num_bound);
// Rewrites each product of two tagged quotients, n1/d1 · n2/d2 where each quotient has no
// other use, as (n1·n2)/(d1·d2): one division instead of two (sigmoid(a)·tanh(b) in gate
// arithmetic, the chain benchmark). d1·d2 >= 1 cannot underflow; when it overflows, the
// exact product is below n1·n2/FLT_MAX, and the merge is only made while the new numerator
// bound keeps that under 1e-33, so the result differs from the two-division form by less
// than that. The merged quotient is tagged again, so products of three merge too.
void merge_quotients(llvm::Function& f);

// Gives every referenced `lt.exp.f32*` declaration of `m` a body (internal, always
// inline). Run after loop vectorisation, before the inliner.
void define_math(llvm::Module& m, const MathTarget& target);

}  // namespace lt::cpujit

#endif  // LT_CPU_JIT_VECMATH_H
