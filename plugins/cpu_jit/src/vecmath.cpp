// vecmath.cpp — f32 exp/log/tanh in LLVM IR. Every function here is written once over a
// value type that is either float or <N x float>, so the scalar body and each vector
// variant come from the same code. Accuracy bounds: docs/backends/cpu_jit.md, tested by
// CpuJit.TranscendentalAccuracySweep.
#include "codegen.h"

#include <cmath>
#include <limits>
#include <string>

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

namespace lt::cpujit {

namespace {

constexpr const char* kExp = "lt.exp.f32";
// Metadata on an fdiv from emit_bounded_quotient: its numerator bound (a double).
constexpr const char* kQuotientTag = "lt.bounded_quotient";
// Largest numerator bound a merged quotient may have: with d1·d2 = inf, the exact product is
// below 2^16/FLT_MAX ~ 1.9e-34 (merge_quotients returns 0 there).
constexpr double kMaxMergedBound = 65536.0;

// Polynomial coefficients, highest power first (horner()). exp: the fit of (e^r − 1 − r)/r²
// with a 1 appended, so horner gives (e^r − 1)/r and exp_body's r·p + 1 gives e^r. log:
// cephes logf's log(1+m) polynomial.
constexpr double kExpPoly[] = {
    0.00139261761199, 0.00836317307451, 0.0416665546621, 0.166665770256, 0.5, 1.0};
constexpr double kLogPoly[] = {7.0376836292E-2,  -1.1514610310E-1, 1.1676998740E-1,
                               -1.2420140846E-1, 1.4249322787E-1,  -1.6668057665E-1,
                               2.0000714765E-1,  -2.4999993993E-1, 3.3333331174E-1};
// tanh x = x·P(x²)/Q(x²) on |x| <= clamp (emit_tanh_f32): highest power first, P(0) = Q(0)
// = 1. Clamp points: {without FMA, with FMA}. tools/vecmath derives and checks all three.
constexpr double kTanhP[] = {1.33842954e-08, 2.06358163e-05, 0.0034974583, 0.133826867, 1.0};
constexpr double kTanhQ[] = {7.79025072e-07, 0.000328851747, 0.0258843619, 0.467160076, 1.0};
constexpr double kTanhClamp[] = {7.86710215, 8.02141953};

llvm::Value* splat(llvm::Type* t, double v) {
  return llvm::ConstantFP::get(t, v);
}
// a·b + c, fused where the target has FMA (a libm call to fmaf otherwise, which would stop
// the vectoriser); the polynomials and the Cody-Waite split are accurate either way.
llvm::Value* fma(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y, llvm::Value* z) {
  return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {x, y, z});
}
template <size_t N>  // highest power first
llvm::Value* horner(llvm::IRBuilder<>& b, llvm::Value* x, const double (&c)[N]) {
  llvm::Type* t = x->getType();
  llvm::Value* p = splat(t, c[0]);
  for (size_t i = 1; i < N; ++i) p = fma(b, p, x, splat(t, c[i]));
  return p;
}
// min(max(x, lo), hi) that keeps NaN: select(x < lo, lo, x) is one vmaxps on x86, whereas
// llvm.maxnum returns the number and needs a compare and a blend to get NaN right.
llvm::Value* clamp(llvm::IRBuilder<>& b, llvm::Value* x, double lo, double hi) {
  llvm::Type* t = x->getType();
  x = b.CreateSelect(b.CreateFCmpOLT(x, splat(t, lo)), splat(t, lo), x);
  return b.CreateSelect(b.CreateFCmpOGT(x, splat(t, hi)), splat(t, hi), x);
}

unsigned lanes(llvm::Type* t) {
  auto* v = llvm::dyn_cast<llvm::FixedVectorType>(t);
  return v ? v->getNumElements() : 1;
}

// The AVX-512 vscalefps intrinsic for vectors of t's width, if the target has one there.
llvm::Intrinsic::ID scalef_for(llvm::Type* t, const MathTarget& tg) {
  unsigned w = lanes(t);
  if (!tg.avx512 || w * 32 > tg.vector_bits) return llvm::Intrinsic::not_intrinsic;
  return w == 16  ? llvm::Intrinsic::x86_avx512_mask_scalef_ps_512
         : w == 8 ? llvm::Intrinsic::x86_avx512_mask_scalef_ps_256
         : w == 4 ? llvm::Intrinsic::x86_avx512_mask_scalef_ps_128
                  : llvm::Intrinsic::ID(llvm::Intrinsic::not_intrinsic);
}

// y·2^n for float-valued integers n in [-150, 128]: vscalefps (`scalef`, from scalef_for)
// where there is one, else two exponent-field multiplications (2^(n/2) twice) so that
// subnormal results and 2^128 (overflow to inf) come out right.
llvm::Value* scale(llvm::IRBuilder<>& b, llvm::Value* y, llvm::Value* n,
                   llvm::Intrinsic::ID scalef) {
  if (scalef != llvm::Intrinsic::not_intrinsic) {
    unsigned w = lanes(y->getType());
    std::vector<llvm::Value*> args = {
        y, n, llvm::PoisonValue::get(y->getType()),
        llvm::ConstantInt::getAllOnesValue(b.getIntNTy(std::max(8u, w)))};
    if (w == 16) args.push_back(b.getInt32(4));  // current rounding direction
    return b.CreateIntrinsic(scalef, {}, args);
  }
  llvm::Type* it = y->getType()->getWithNewType(b.getInt32Ty());
  llvm::Value* ni = b.CreateFPToSI(n, it);
  llvm::Value* n1 = b.CreateAShr(ni, 1);
  llvm::Value* n2 = b.CreateSub(ni, n1);
  auto pow2 = [&](llvm::Value* e) {
    return b.CreateBitCast(b.CreateShl(b.CreateAdd(e, llvm::ConstantInt::get(it, 127)), 23),
                           y->getType());
  };
  return b.CreateFMul(b.CreateFMul(y, pow2(n1)), pow2(n2));
}

// expf: n = rint(x·log2 e), r = x − n·ln2 (Cody-Waite, ln2 in two parts), e^r by a degree-6
// polynomial in Horner form (our Chebyshev fit of (e^r − 1 − r)/r² on [−ln2/2, ln2/2],
// 6.5e-8 absolute, so ~0.1 ulp on e^r before rounding; tools/vecmath), then ·2^n. Inputs
// are clamped to [-104, 89] first (e^x is 0 below and inf above in f32); NaN passes through.
llvm::Value* exp_body(llvm::IRBuilder<>& b, llvm::Value* x, const MathTarget& tg) {
  llvm::Type* t = x->getType();
  llvm::Value* xc = clamp(b, x, -104.0, 89.0);
  llvm::Value* n = b.CreateIntrinsic(llvm::Intrinsic::rint, {t},
                                     {b.CreateFMul(xc, splat(t, 1.44269504088896341))});
  llvm::Value* r = fma(b, n, splat(t, -0.693359375), xc);
  r = fma(b, n, splat(t, 2.12194440e-4), r);
  llvm::Value* p = horner(b, r, kExpPoly);
  llvm::Intrinsic::ID scalef = scalef_for(t, tg);
  llvm::Value* y = scale(b, fma(b, p, r, splat(t, 1.0)), n, scalef);
  // vscalefps keeps NaN; the integer path turns it into poison, so select it back.
  if (scalef != llvm::Intrinsic::not_intrinsic) return y;
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, y);
}

std::string variant_name(unsigned w) {
  return std::string(kExp) + ".v" + std::to_string(w);
}

}  // namespace

llvm::Value* emit_exp_f32(llvm::IRBuilder<>& b, llvm::Value* x, const MathTarget& target) {
  llvm::Module& m = *b.GetInsertBlock()->getModule();
  llvm::LLVMContext& ctx = m.getContext();
  llvm::AttrBuilder ab(ctx);
  ab.addAttribute(llvm::Attribute::NoUnwind);
  ab.addAttribute(llvm::Attribute::WillReturn);
  ab.addMemoryAttr(llvm::MemoryEffects::none());
  auto declare = [&](llvm::Type* t, const std::string& name) {
    auto* fty = llvm::FunctionType::get(t, {t}, false);
    llvm::FunctionCallee c = m.getOrInsertFunction(name, fty);
    llvm::cast<llvm::Function>(c.getCallee())->addFnAttrs(ab);
    return c;
  };
  llvm::FunctionCallee scalar = declare(b.getFloatTy(), kExp);
  // Vector variants up to the kernels' width, in the VFABI mangling LLVM's own vector
  // libraries use: _ZGV_LLVM_N<lanes>v_<scalar>(<vector>).
  std::string variants;
  for (unsigned w = 4; w * 32 <= target.vector_bits; w *= 2) {
    declare(llvm::FixedVectorType::get(b.getFloatTy(), w), variant_name(w));
    if (!variants.empty()) variants += ",";
    variants += "_ZGV_LLVM_N" + std::to_string(w) + "v_" + kExp + "(" + variant_name(w) + ")";
  }
  llvm::CallInst* call = b.CreateCall(scalar, {x});
  if (!variants.empty())
    call->addFnAttr(llvm::Attribute::get(ctx, "vector-function-abi-variant", variants));
  return call;
}

void define_math(llvm::Module& m, const MathTarget& target) {
  for (llvm::Function& f : m) {
    if (!f.isDeclaration() || f.use_empty() || !f.getName().starts_with(kExp)) continue;
    f.setLinkage(llvm::GlobalValue::InternalLinkage);
    f.addFnAttr(llvm::Attribute::AlwaysInline);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(m.getContext(), "entry", &f));
    b.CreateRet(exp_body(b, f.getArg(0), target));
  }
}

// logf (cephes): x = m·2^e with m in [√½, √2), log(1+f) by a degree-9 polynomial, e·ln2
// added in two parts. Subnormals are pre-scaled by 2^23.
llvm::Value* emit_log_f32(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* f = x->getType();
  llvm::Type* i32 = f->getWithNewType(b.getInt32Ty());
  auto ic = [&](int v) { return llvm::ConstantInt::get(i32, v); };
  llvm::Value* sub = b.CreateFCmpOLT(x, splat(f, 1.17549435e-38));
  llvm::Value* xs = b.CreateSelect(sub, b.CreateFMul(x, splat(f, 8388608.0)), x);
  llvm::Value* bits = b.CreateBitCast(xs, i32);
  llvm::Value* e = b.CreateSub(b.CreateAnd(b.CreateLShr(bits, 23), ic(0xff)), ic(126));
  e = b.CreateSelect(sub, b.CreateSub(e, ic(23)), e);
  llvm::Value* m =
      b.CreateBitCast(b.CreateOr(b.CreateAnd(bits, ic(0x807fffff)), ic(0x3f000000)), f);
  llvm::Value* small = b.CreateFCmpOLT(m, splat(f, 0.707106781186547524));
  e = b.CreateSelect(small, b.CreateSub(e, ic(1)), e);
  m = b.CreateSelect(small, b.CreateFSub(b.CreateFAdd(m, m), splat(f, 1.0)),
                     b.CreateFSub(m, splat(f, 1.0)));
  llvm::Value* z = b.CreateFMul(m, m);
  llvm::Value* p = horner(b, m, kLogPoly);
  llvm::Value* y = b.CreateFMul(b.CreateFMul(p, m), z);
  llvm::Value* fe = b.CreateSIToFP(e, f);
  y = fma(b, fe, splat(f, -2.12194440e-4), y);
  y = fma(b, z, splat(f, -0.5), y);
  llvm::Value* r = b.CreateFAdd(m, y);
  r = fma(b, fe, splat(f, 0.693359375), r);
  float inf = std::numeric_limits<float>::infinity();
  r = b.CreateSelect(b.CreateFCmpOEQ(x, splat(f, inf)), x, r);
  r = b.CreateSelect(b.CreateFCmpOEQ(x, splat(f, 0.0)), splat(f, -inf), r);
  return b.CreateSelect(b.CreateFCmpULT(x, splat(f, 0.0)),
                        splat(f, std::numeric_limits<float>::quiet_NaN()), r);
}

// tanhf: x·P(x²)/Q(x²) with P and Q of degree 8 in x (4 in x², kTanhP/kTanhQ), P(0) =
// Q(0) = 1: our own minimax fit (Remez in mpmath, 2.2e-8 in exact arithmetic), float
// coefficients then tuned by ulp search to cut the error their rounding adds (tools/vecmath
// reproduces and checks them). Equal degrees cost one multiply-add less than the [6/3] form
// at the same accuracy. The input is clamped to ±c, the smallest float at which the float
// evaluation is exactly 1 (it is <= 1 below c and grows past 1 beyond it, to 1.000002 near
// 10, so the clamp matters); c depends on whether the multiply-adds fuse. Odd by
// construction (±0 stay ±0), tiny inputs come back as x, NaN passes through the clamp. Max
// relative error over every float in [-10, 10]: 3.04e-7 with FMA, 3.56e-7 without. The
// result is a bounded quotient (emit_bounded_quotient), so a product with sigmoid or tanh
// costs one division.
llvm::Value* emit_tanh_f32(llvm::IRBuilder<>& b, llvm::Value* a, const MathTarget& target) {
  double c = target.fma ? kTanhClamp[1] : kTanhClamp[0];
  llvm::Value* x = clamp(b, a, -c, c);
  llvm::Value* t = b.CreateFMul(x, x);
  llvm::Value* p = horner(b, t, kTanhP);
  llvm::Value* q = horner(b, t, kTanhQ);
  // |x·P(x²)| <= c·Σ|p_k|c^2k, and Q >= 1: its coefficients are positive, Q(0) = 1.
  double bound = 0;
  for (double k : kTanhP) bound = bound * c * c + std::fabs(k);
  return emit_bounded_quotient(b, b.CreateFMul(x, p), q, bound * c);
}

llvm::Value* emit_bounded_quotient(llvm::IRBuilder<>& b, llvm::Value* num, llvm::Value* den,
                                   double num_bound) {
  llvm::Value* q = b.CreateFDiv(num, den);
  if (auto* i = llvm::dyn_cast<llvm::Instruction>(q)) {
    llvm::LLVMContext& ctx = i->getContext();
    llvm::Constant* v = llvm::ConstantFP::get(llvm::Type::getDoubleTy(ctx), num_bound);
    i->setMetadata(kQuotientTag, llvm::MDNode::get(ctx, {llvm::ConstantAsMetadata::get(v)}));
  }
  return q;
}

void merge_quotients(llvm::Function& f) {
  auto bound_of = [](llvm::Value* v) -> double {  // 0: not a tagged quotient
    auto* i = llvm::dyn_cast_or_null<llvm::Instruction>(v);
    llvm::MDNode* md = i && i->getOpcode() == llvm::Instruction::FDiv && i->hasOneUse()
                           ? i->getMetadata(kQuotientTag)
                           : nullptr;
    if (!md) return 0;
    auto* c = llvm::mdconst::dyn_extract<llvm::ConstantFP>(md->getOperand(0));
    return c ? c->getValueAPF().convertToDouble() : 0;
  };
  auto is_one = [](llvm::Value* v) {
    auto* c = llvm::dyn_cast<llvm::ConstantFP>(v);
    return c && c->isExactlyValue(1.0);
  };
  std::vector<llvm::Instruction*> muls;
  for (llvm::BasicBlock& bb : f)
    for (llvm::Instruction& i : bb)
      if (i.getOpcode() == llvm::Instruction::FMul) muls.push_back(&i);
  for (llvm::Instruction* mul : muls) {
    auto* q1 = llvm::dyn_cast<llvm::Instruction>(mul->getOperand(0));
    auto* q2 = llvm::dyn_cast<llvm::Instruction>(mul->getOperand(1));
    double b1 = bound_of(q1), b2 = bound_of(q2);
    if (q1 == q2 || b1 == 0 || b2 == 0 || b1 * b2 > kMaxMergedBound) continue;
    llvm::IRBuilder<> b(mul);
    b.setFastMathFlags(mul->getFastMathFlags());
    llvm::Value *n1 = q1->getOperand(0), *n2 = q2->getOperand(0);
    llvm::Value* num = is_one(n1) ? n2 : is_one(n2) ? n1 : b.CreateFMul(n1, n2);
    llvm::Value* den = b.CreateFMul(q1->getOperand(1), q2->getOperand(1));
    mul->replaceAllUsesWith(emit_bounded_quotient(b, num, den, b1 * b2));
    mul->eraseFromParent();
    q1->eraseFromParent();
    q2->eraseFromParent();
  }
}

}  // namespace lt::cpujit
