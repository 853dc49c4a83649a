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

// Gives every referenced `lt.exp.f32*` declaration of `m` a body (internal, always
// inline). Run after loop vectorisation, before the inliner.
void define_math(llvm::Module& m, const MathTarget& target);

}  // namespace lt::cpujit

#endif  // LT_CPU_JIT_VECMATH_H
