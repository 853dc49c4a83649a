// codegen.cpp — LLVM IR for fused groups: a loop nest over the shared schedule's coalesced loops,
// operands read through its accesses (lower::LoopKernel: broadcasts, strided slices), row-wise
// multi-phase reductions, f32 transcendentals from vecmath (no scalar libm call). Which nodes it
// lowers is the shared kernel planner's cpu_jit target (lower::cpu_jit_kernel_node).
#include <algorithm>
#include <functional>
#include <map>
#include <string_view>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>

#include "codegen.h"
#include "lazytensor/lower/loop_kernel.hpp"
#include "lazytensor/lower/reduce_formula.hpp"
#include "lazytensor/lower/view.hpp"

namespace lt::cpujit {

using lower::is_float;

namespace {

// Stashes pay while a row of the stashed value stays in L2 with the row it is computed from.
constexpr lower::LoopOptions kLoops{.stash_row_bytes = 64 << 10};
// Vector iterations in flight in a row reduction's loop: four accumulators cover the latency
// of an add (3-4 cycles) or of max's compare-and-select sequence at one vector per cycle.
constexpr unsigned kReductionInterleave = 4;
// Rows of a column reduction combined per load and store of its accumulators.
constexpr int64_t kColumnRows = 8;

using Offsets = std::vector<llvm::Value*>;  // per access: the element offset at this point

class Emitter {
 public:
  Emitter(llvm::Module& m, KernelDesc& k, const std::string& name, const MathTarget& math)
      : m_(m),
        ctx_(m.getContext()),
        b_(ctx_),
        k_(k),
        g_(*k.graph),
        lk_(lower::schedule_loops(g_, k.nodes, k.outputs, k.domain, k.reduce_axes, kLoops)),
        name_(name),
        math_(math) {
    // a·b + c may become one FMA (docs/ops.md): e.g. 0.5·x + 1 and s·t + x in the chain.
    llvm::FastMathFlags fmf;
    fmf.setAllowContract(true);
    b_.setFastMathFlags(fmf);
  }

  llvm::Error run();

 private:
  llvm::Type* reg_type(lt_dtype d) {
    return d == LT_DTYPE_F32   ? b_.getFloatTy()
           : d == LT_DTYPE_F64 ? b_.getDoubleTy()
           : d == LT_DTYPE_I32 ? b_.getInt32Ty()
           : d == LT_DTYPE_I64 ? b_.getInt64Ty()
                               : b_.getInt1Ty();
  }
  llvm::Type* mem_type(lt_dtype d) { return d == LT_DTYPE_BOOL ? b_.getInt8Ty() : reg_type(d); }
  llvm::Value* fconst(llvm::Type* t, double v) { return llvm::ConstantFP::get(t, v); }
  llvm::Value* intrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Value*> args) {
    return b_.CreateIntrinsic(id, {args[0]->getType()}, args);
  }
  llvm::Value* exp_any(llvm::Value* x) {
    return x->getType()->isFloatTy() ? emit_exp_f32(b_, x, math_)
                                     : intrinsic(llvm::Intrinsic::exp, {x});
  }

  bool in_kernel(int32_t v) const { return lk_.in_kernel(v); }

  // fold_tail: the vectoriser masks the last iteration instead of adding a scalar loop.
  // interleave: vector iterations in flight; a loop that carries a reduction takes several
  // (independent accumulators: max's NaN-propagating compare and select, or an add, then waits
  // on its own latency, not on the previous vector's).
  template <class Body>
  void loop(llvm::Value* lo, llvm::Value* hi, bool fold_tail, Body body, unsigned interleave = 1) {
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx_, "loop", fn_);
    llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx_, "exit", fn_);
    b_.CreateCondBr(b_.CreateICmpSLT(lo, hi), head, exit);
    b_.SetInsertPoint(head);
    llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2, "i");
    i->addIncoming(lo, pre);
    body(static_cast<llvm::Value*>(i));
    llvm::Value* next = b_.CreateAdd(i, b_.getInt64(1), "", true, true);
    i->addIncoming(next, b_.GetInsertBlock());
    // `!=` rather than `<` (equivalent after the lo < hi guard) gives SCEV the exact trip count.
    llvm::BranchInst* latch = b_.CreateCondBr(b_.CreateICmpNE(next, hi), head, exit);
    // Tail folding (masked last vector iteration) instead of a scalar remainder loop and a
    // second, epilogue-vectorised copy of the body.
    llvm::Metadata* pred[] = {llvm::MDString::get(ctx_, "llvm.loop.vectorize.predicate.enable"),
                              llvm::ConstantAsMetadata::get(b_.getInt1(fold_tail))};
    llvm::Metadata* il[] = {llvm::MDString::get(ctx_, "llvm.loop.interleave.count"),
                            llvm::ConstantAsMetadata::get(b_.getInt32(interleave))};
    llvm::Metadata* ops[] = {nullptr, llvm::MDNode::get(ctx_, pred), llvm::MDNode::get(ctx_, il)};
    llvm::MDNode* id = llvm::MDNode::getDistinct(ctx_, ops);
    id->replaceOperandWith(0, id);
    latch->setMetadata(llvm::LLVMContext::MD_loop, id);
    b_.SetInsertPoint(exit);
  }

  // Loops over loop dims [first, last). chunk: the innermost loop carries no reduction, so it
  // may be split into unmasked vector-width chunks (a reduction would then reduce
  // horizontally every chunk).
  void nest(size_t first, size_t last, Offsets& offs, bool chunk,
            const std::function<void(Offsets&)>& body) {
    if (first == last) return body(offs);
    llvm::Value* lo = first ? b_.getInt64(0) : static_cast<llvm::Value*>(fn_->getArg(1));
    llvm::Value* hi =
        first ? b_.getInt64(loop_dims_[first]) : static_cast<llvm::Value*>(fn_->getArg(2));
    auto level = [&](llvm::Value* i) {
      Offsets inner = offs;
      for (size_t a = 0; a < acc_.size(); ++a)
        if (int64_t s = acc_[a].strides[first])
          inner[a] = b_.CreateAdd(offs[a], b_.CreateMul(i, b_.getInt64(s), "", true, true), "",
                                  true, true);
      nest(first + 1, last, inner, chunk, body);
    };
    // The innermost loop is the one vectorised. Masking every iteration (tail folding) costs
    // ~6 instructions per vector (the i64 lane compares), 12% of the sigmoid·tanh chain, so
    // the bulk runs as chunks of `lanes_` (an inner loop of constant trip count, which the
    // vectoriser turns into one unmasked vector step with no remainder or trip-count check)
    // and the rest as one tail-folded loop (alone below two chunks: half the code to compile).
    int64_t extent = loop_dims_[first];
    // The innermost loop of a row reduction; rows shorter than a few interleaved steps would
    // only run more masked vectors.
    if (!chunk && first + 1 == loop_dims_.size() && extent >= 8 * lanes_)
      return loop(lo, hi, true, level, kReductionInterleave);
    if (!chunk || first + 1 != last || extent < 2 * lanes_) return loop(lo, hi, true, level);
    llvm::Value* chunks = b_.CreateSDiv(b_.CreateSub(hi, lo, "", true, true), b_.getInt64(lanes_));
    loop(b_.getInt64(0), chunks, true, [&](llvm::Value* c) {
      llvm::Value* base =
          b_.CreateAdd(lo, b_.CreateMul(c, b_.getInt64(lanes_), "", true, true), "", true, true);
      loop(b_.getInt64(0), b_.getInt64(lanes_), false,
           [&](llvm::Value* t) { level(b_.CreateAdd(base, t, "", true, true)); });
    });
    if (first != 0 && extent % lanes_ == 0) return;
    llvm::Value* rest =
        b_.CreateAdd(lo, b_.CreateMul(chunks, b_.getInt64(lanes_), "", true, true), "", true, true);
    loop(rest, hi, true, level);
  }

  // Slot k's accesses are in alias scope k and noalias with every other slot.
  llvm::Value* address(int acc, const Offsets& offs, lt_dtype d) {
    return b_.CreateInBoundsGEP(mem_type(d), base_[slot_of_[acc]], offs[acc]);
  }
  template <class I>
  I* tag(I* mem, int acc) {
    mem->setMetadata(llvm::LLVMContext::MD_alias_scope, scope_[slot_of_[acc]]);
    mem->setMetadata(llvm::LLVMContext::MD_noalias, noalias_[slot_of_[acc]]);
    return mem;
  }
  llvm::Value* load(int acc, const Offsets& offs, lt_dtype d) {
    llvm::Value* v = tag(b_.CreateLoad(mem_type(d), address(acc, offs, d)), acc);
    return d == LT_DTYPE_BOOL ? b_.CreateICmpNE(v, b_.getInt8(0)) : v;
  }
  void store(int32_t v, const Offsets& offs, llvm::Value* x) {
    lt_dtype d = g_.nodes[v].dtype;
    if (d == LT_DTYPE_BOOL) x = b_.CreateZExt(x, b_.getInt8Ty());
    int acc = lk_.access(v, v);
    tag(b_.CreateStore(x, address(acc, offs, d)), acc);
  }

  // Evaluates `targets` (and what they need) into memo. In an inner (full-domain) body,
  // reduced-role nodes and reductions must already be in memo (computed per row).
  void eval(const std::vector<int32_t>& targets, std::map<int32_t, llvm::Value*>& memo,
            const Offsets& offs) {
    std::vector<char> need(k_.nodes.size(), 0);  // by position; operands come first
    for (int32_t t : targets) need[lk_.position(t)] = 1;
    for (size_t p = need.size(); p-- > 0;) {
      const lt_graph_node& n = g_.nodes[k_.nodes[p]];
      if (need[p] && (need[p] = !memo.count(k_.nodes[p])))
        for (size_t k = 0; k < n.num_operands; ++k)
          if (in_kernel(n.operands[k])) need[lk_.position(n.operands[k])] = 1;
    }
    for (size_t p = 0; p < need.size(); ++p) {
      if (!need[p]) continue;
      int32_t v = k_.nodes[p];
      const lt_graph_node& n = g_.nodes[v];
      std::vector<llvm::Value*> args;
      for (size_t k = 0; k < n.num_operands; ++k) {
        int32_t o = n.operands[k];
        args.push_back(in_kernel(o) ? memo.at(o) : load(lk_.access(o, v), offs, g_.nodes[o].dtype));
      }
      if (int index = lk_.access(v, v, true); index >= 0) args.push_back(offs[index]);
      memo[v] = op(v, std::move(args));
    }
  }

  llvm::Value* cast(llvm::Value* x, lt_dtype from, lt_dtype to) {
    llvm::Type* t = reg_type(to);
    if (from == to) return x;
    if (to == LT_DTYPE_BOOL)
      return is_float(from) ? b_.CreateFCmpUNE(x, fconst(x->getType(), 0.0))
                            : b_.CreateICmpNE(x, llvm::ConstantInt::get(x->getType(), 0));
    if (from == LT_DTYPE_BOOL) return is_float(to) ? b_.CreateUIToFP(x, t) : b_.CreateZExt(x, t);
    if (is_float(from) && is_float(to)) return b_.CreateFPCast(x, t);
    if (is_float(to)) return b_.CreateSIToFP(x, t);
    if (is_float(from))  // saturating, NaN -> 0
      return b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {t, x->getType()}, {x});
    return b_.CreateSExtOrTrunc(x, t);
  }

  // lt_random_unit_f32(seed, index) of lt_random.h (24 random bits in [0, 1), exact in t).
  llvm::Value* unit(llvm::Value* seed, llvm::Value* index, llvm::Type* t) {
    auto mix = [&](llvm::Value* z, unsigned shift, uint64_t k) {
      return b_.CreateMul(b_.CreateXor(z, b_.CreateLShr(z, shift)), b_.getInt64(k));
    };
    llvm::Value* z = b_.CreateAdd(seed, b_.CreateMul(b_.CreateAdd(index, b_.getInt64(1)),
                                                     b_.getInt64(0x9E3779B97F4A7C15ULL)));
    z = mix(mix(z, 30, 0xBF58476D1CE4E5B9ULL), 27, 0x94D049BB133111EBULL);
    z = b_.CreateLShr(b_.CreateXor(z, b_.CreateLShr(z, 31)), 40);
    return b_.CreateFMul(b_.CreateUIToFP(z, t), fconst(t, 1.0 / 16777216.0));
  }

  // Node v of its operands' values `a` (then its flat index, for arange and random_*).
  llvm::Value* op(int32_t v, std::vector<llvm::Value*> a) {
    const lt_graph_node& n = g_.nodes[v];
    std::string_view op = n.op;
    lt_dtype d = n.dtype, ad = n.num_operands ? g_.nodes[n.operands[0]].dtype : d;
    llvm::Type* t = reg_type(d);
    llvm::Type* f64 = b_.getDoubleTy();
    if (op == "full") return cast(fconst(f64, lower::Attrs(n).f("value")), LT_DTYPE_F64, d);
    if (op == "arange") {  // start + i·step in f64, uncontracted (as docs/ops.md defines it)
      lower::Attrs at(n);
      llvm::IRBuilder<>::FastMathFlagGuard exact(b_);
      b_.clearFastMathFlags();
      llvm::Value* x = b_.CreateFMul(b_.CreateSIToFP(a[0], f64), fconst(f64, at.f("step")));
      return cast(b_.CreateFAdd(fconst(f64, at.f("start")), x), LT_DTYPE_F64, d);
    }
    if (op == "random_unit") {  // a[0] the seed, a[1] the flat index
      lower::Attrs at(n);
      llvm::Value* k = b_.CreateMul(a[1], b_.getInt64(at.i("stride")));
      return unit(a[0], b_.CreateAdd(k, b_.getInt64(at.i("offset"))), t);
    }
    if (op == "random_normal") {  // decomposed, its two random_units would anchor two kernels
      // Box-Muller on the streams 2i and 2i+1: sqrt(−2 ln(1 − u1))·cos(2π·u2).
      lower::Attrs at(n);
      llvm::Value* i2 = b_.CreateShl(a[1], 1);
      llvm::Value* u1 = b_.CreateFSub(fconst(t, 1.0), unit(a[0], i2, t));
      llvm::Value* u2 = unit(a[0], b_.CreateOr(i2, b_.getInt64(1)), t);
      llvm::Value* r = arith("sqrt", d, {b_.CreateFMul(arith("log", d, {u1}), fconst(t, -2.0))});
      llvm::Value* c = arith("cos", d, {b_.CreateFMul(u2, fconst(t, 6.283185307179586))});
      return b_.CreateFAdd(fconst(t, at.f("mean")),
                           b_.CreateFMul(fconst(t, at.f("std")), b_.CreateFMul(r, c)));
    }
    if (op == "broadcast_to" || op == "slice") return a[0];  // slice: loaded through its map
    if (op == "cast") return cast(a[0], ad, d);
    if (op == "where") return b_.CreateSelect(a[0], a[1], a[2]);
    return arith(op, ad, a);
  }

  // The elementwise arithmetic of op on operands of dtype ad (reductions use add, maximum
  // and minimum too).
  llvm::Value* arith(std::string_view op, lt_dtype ad, std::vector<llvm::Value*> a) {
    llvm::Type* t = a[0]->getType();
    bool fl = is_float(ad);
    auto un = [&](llvm::Intrinsic::ID id) { return intrinsic(id, {a[0]}); };
    auto sint = [&](llvm::Intrinsic::ID id, llvm::Value* y) {
      return b_.CreateIntrinsic(id, {t}, {a[0], y});
    };
    if (op == "neg") return fl ? b_.CreateFNeg(a[0]) : b_.CreateNeg(a[0]);
    if (op == "abs")
      return fl ? un(llvm::Intrinsic::fabs) : sint(llvm::Intrinsic::abs, b_.getFalse());
    if (op == "relu") {  // max(a, 0) with NaN kept: select(a < 0, 0, a) leaves NaN untouched
      if (!fl) return sint(llvm::Intrinsic::smax, llvm::ConstantInt::get(t, 0));
      return b_.CreateSelect(b_.CreateFCmpOLT(a[0], fconst(t, 0.0)), fconst(t, 0.0), a[0]);
    }
    if (op == "exp") return exp_any(a[0]);
    if (op == "log") return t->isFloatTy() ? emit_log_f32(b_, a[0]) : un(llvm::Intrinsic::log);
    if (op == "sqrt") return un(llvm::Intrinsic::sqrt);
    if (op == "rsqrt") return b_.CreateFDiv(fconst(t, 1.0), un(llvm::Intrinsic::sqrt));
    if (op == "sin") return un(llvm::Intrinsic::sin);
    if (op == "cos") return un(llvm::Intrinsic::cos);
    if (op == "floor") return un(llvm::Intrinsic::floor);
    if (op == "tanh") {
      if (t->isFloatTy()) return emit_tanh_f32(b_, a[0], math_);
      // f64: (1 − e^{−2x})/(1 + e^{−2x}) for x ≥ 0, odd symmetry otherwise.
      llvm::Value* e = exp_any(b_.CreateFMul(un(llvm::Intrinsic::fabs), fconst(t, -2.0)));
      llvm::Value* r =
          b_.CreateFDiv(b_.CreateFSub(fconst(t, 1.0), e), b_.CreateFAdd(fconst(t, 1.0), e));
      return intrinsic(llvm::Intrinsic::copysign, {r, a[0]});
    }
    if (op == "sigmoid") {  // 1/(1 + e^-x): numerator 1, denominator >= 1
      llvm::Value* den = b_.CreateFAdd(fconst(t, 1.0), exp_any(b_.CreateFNeg(a[0])));
      return emit_bounded_quotient(b_, fconst(t, 1.0), den, 1.0);
    }
    if (op == "gelu") {  // 0.5·x·(1 + tanh(u)) == x·sigmoid(2u): no cancellation for x < 0
      llvm::Value* x3 = b_.CreateFMul(b_.CreateFMul(a[0], a[0]), a[0]);
      llvm::Value* u = intrinsic(llvm::Intrinsic::fmuladd, {x3, fconst(t, 0.044715), a[0]});
      u = b_.CreateFMul(u, fconst(t, -2.0 * 0.7978845608028654));
      return b_.CreateFDiv(a[0], b_.CreateFAdd(fconst(t, 1.0), exp_any(u)));
    }
    if (op == "pow") return intrinsic(llvm::Intrinsic::pow, {a[0], a[1]});
    if (op == "add") return fl ? b_.CreateFAdd(a[0], a[1]) : b_.CreateAdd(a[0], a[1]);
    if (op == "sub") return fl ? b_.CreateFSub(a[0], a[1]) : b_.CreateSub(a[0], a[1]);
    if (op == "mul") return fl ? b_.CreateFMul(a[0], a[1]) : b_.CreateMul(a[0], a[1]);
    if (op == "div") {
      if (fl) return b_.CreateFDiv(a[0], a[1]);
      // x/0 = 0 and INT_MIN/−1 = INT_MIN (wraps): divide by a safe divisor, then select.
      llvm::Value* zero = llvm::ConstantInt::get(t, 0);
      llvm::Value* m1 = llvm::ConstantInt::get(t, -1, true);
      llvm::Value* bad = b_.CreateOr(b_.CreateICmpEQ(a[1], zero), b_.CreateICmpEQ(a[1], m1));
      llvm::Value* q =
          b_.CreateSDiv(a[0], b_.CreateSelect(bad, llvm::ConstantInt::get(t, 1), a[1]));
      llvm::Value* special = b_.CreateSelect(b_.CreateICmpEQ(a[1], zero), zero, b_.CreateNeg(a[0]));
      return b_.CreateSelect(bad, special, q);
    }
    if (op == "maximum")
      return fl ? intrinsic(llvm::Intrinsic::maximum, a) : sint(llvm::Intrinsic::smax, a[1]);
    if (op == "minimum")
      return fl ? intrinsic(llvm::Intrinsic::minimum, a) : sint(llvm::Intrinsic::smin, a[1]);
    if (op == "and") return b_.CreateAnd(a[0], a[1]);
    if (op == "or") return b_.CreateOr(a[0], a[1]);
    if (op == "not") return b_.CreateNot(a[0]);
    if (ad == LT_DTYPE_BOOL)  // false < true: compare bools as 0/1 bytes
      for (llvm::Value*& x : a) x = b_.CreateZExt(x, b_.getInt8Ty());
    if (op == "eq") return fl ? b_.CreateFCmpOEQ(a[0], a[1]) : b_.CreateICmpEQ(a[0], a[1]);
    if (op == "ne") return fl ? b_.CreateFCmpUNE(a[0], a[1]) : b_.CreateICmpNE(a[0], a[1]);
    if (op == "lt") return fl ? b_.CreateFCmpOLT(a[0], a[1]) : b_.CreateICmpSLT(a[0], a[1]);
    if (op == "le") return fl ? b_.CreateFCmpOLE(a[0], a[1]) : b_.CreateICmpSLE(a[0], a[1]);
    if (op == "gt") return fl ? b_.CreateFCmpOGT(a[0], a[1]) : b_.CreateICmpSGT(a[0], a[1]);
    if (op == "ge") return fl ? b_.CreateFCmpOGE(a[0], a[1]) : b_.CreateICmpSGE(a[0], a[1]);
    return llvm::UndefValue::get(t);  // unreachable for supported nodes
  }

  // Reduction r's identity (lower::reduce_formula: 0 or ±inf, saturated for integers); acc
  // combined with x by its primitive (float sums reassociable: docs/ops.md).
  llvm::Value* identity(const lt_graph_node& r) {
    llvm::Type* t = reg_type(r.dtype);
    const double v = lower::reduce_formula(r.op)->identity;
    if (v == 0) return llvm::Constant::getNullValue(t);
    if (!t->isIntegerTy()) return llvm::ConstantFP::get(t, v);
    unsigned bits = t->getIntegerBitWidth();
    return llvm::ConstantInt::get(
        t, v < 0 ? llvm::APInt::getSignedMinValue(bits) : llvm::APInt::getSignedMaxValue(bits));
  }
  llvm::Value* combine(const lt_graph_node& r, llvm::Value* acc, llvm::Value* x) {
    const lower::ReduceFormula& f = *lower::reduce_formula(r.op);
    llvm::Value* v = arith(f.combine, r.dtype, {acc, x});
    if (is_float(r.dtype) && f.combine == "add")
      llvm::cast<llvm::Instruction>(v)->setHasAllowReassoc(true);
    return v;
  }
  void emit_reductions(Offsets& offs);
  bool emit_column_reductions(Offsets& offs);

  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  KernelDesc& k_;
  const lt_graph& g_;
  const lower::LoopKernel lk_;  // roles, phases, per-row nodes, output roles, loops, accesses
  std::string name_;
  const MathTarget& math_;
  const std::vector<lower::Access>& acc_ = lk_.accesses;   // reads by kernel nodes, then stores
  const std::vector<int64_t>& loop_dims_ = lk_.loop_dims;  // kept loops, then reduced loops
  const size_t n_outer_ = lk_.outer_loops;                 // first n_outer_ loop dims are outer
  std::map<int32_t, int> slot_;                            // node -> slot
  std::vector<int> slot_of_;                               // per access: slot (-1: an index)
  int64_t lanes_ = 16;              // lanes of the widest vector of the kernel's narrowest element
  std::vector<llvm::Value*> base_;  // slot -> base pointer
  // A written slot's accesses are in its own scope, read-only slots' in one shared scope;
  // each is noalias with every scope it could conflict with: buffers bound to distinct slots
  // never overlap where one is written (outputs and temps are fresh), so the vectoriser needs
  // no runtime checks and hoists stride-0 (scalar) loads out of loops.
  std::vector<llvm::MDNode*> scope_, noalias_;
  llvm::Function* fn_ = nullptr;
};

llvm::Error Emitter::run() {
  for (int32_t v : k_.nodes)
    if (std::string_view(g_.nodes[v].op) == "slice" && in_kernel(g_.nodes[v].operands[0]))
      return llvm::createStringError("slice fused with its operand (planner invariant)");
  if (!lk_.affine) return llvm::createStringError("a read with no index map (planner invariant)");
  for (const lower::Access& a : acc_) {  // a slot per buffer, in the order of first access
    auto [s, added] =
        a.index ? std::pair{slot_.end(), false} : slot_.try_emplace(a.buffer, int(k_.slots.size()));
    if (added) k_.slots.push_back(a.buffer);
    slot_of_.push_back(a.index ? -1 : s->second);
  }
  size_t narrowest = 8;
  for (int32_t v : k_.nodes) narrowest = std::min(narrowest, lt_dtype_size(g_.nodes[v].dtype));
  for (int32_t v : k_.slots) narrowest = std::min(narrowest, lt_dtype_size(g_.nodes[v].dtype));
  lanes_ = std::max<int64_t>(1, math_.vector_bits / (8 * std::max<size_t>(1, narrowest)));
  if (!lk_.reductions.empty() && k_.reduce_axes.empty())
    return llvm::createStringError("reduction in a kernel without reduce axes");

  k_.parallel_extent = lk_.rows() == 0 ? 0 : loop_dims_[0];  // rows: the outer loops' product
  k_.work_per_index = 1;
  for (size_t i = 1; i < loop_dims_.size(); ++i)
    k_.work_per_index *= std::max<int64_t>(1, loop_dims_[i]);

  // Function, alias scopes, base pointers.
  llvm::Type* ptr = b_.getPtrTy();
  auto* fty =
      llvm::FunctionType::get(b_.getVoidTy(), {ptr, b_.getInt64Ty(), b_.getInt64Ty()}, false);
  fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, name_, m_);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  fn_->addParamAttr(0, llvm::Attribute::NoAlias);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn_));
  llvm::MDBuilder mdb(ctx_);
  llvm::MDNode* domain = mdb.createAnonymousAliasScopeDomain(name_);
  // One scope per written slot, one for all read-only slots: metadata grows with the outputs,
  // not the slots squared (a 1,000-input chain kernel had 6 MB of it: seconds of AA queries).
  std::vector<char> written(k_.slots.size(), 0);
  for (int32_t v : k_.outputs) written[slot_.at(v)] = 1;
  llvm::Metadata* reads = mdb.createAnonymousAliasScope(domain, "inputs");
  std::vector<llvm::Metadata*> scopes(k_.slots.size(), reads), outs;
  for (size_t s = 0; s < k_.slots.size(); ++s)
    if (written[s])
      outs.push_back(scopes[s] = mdb.createAnonymousAliasScope(domain, "slot" + std::to_string(s)));
  llvm::MDNode* reads_noalias = llvm::MDNode::get(ctx_, outs);
  for (size_t s = 0; s < k_.slots.size(); ++s) {
    std::vector<llvm::Metadata*> others{reads};
    for (llvm::Metadata* o : outs)
      if (o != scopes[s]) others.push_back(o);
    scope_.push_back(llvm::MDNode::get(ctx_, {scopes[s]}));
    noalias_.push_back(written[s] ? llvm::MDNode::get(ctx_, others) : reads_noalias);
    base_.push_back(b_.CreateLoad(ptr, b_.CreateConstInBoundsGEP1_64(ptr, fn_->getArg(0), s)));
  }
  Offsets offs;
  for (const lower::Access& a : acc_) offs.push_back(b_.getInt64(a.offset));
  if (lk_.reductions.empty()) {
    nest(0, loop_dims_.size(), offs, true, [&](Offsets& o) {
      std::map<int32_t, llvm::Value*> memo;
      eval(k_.outputs, memo, o);
      for (int32_t v : k_.outputs) store(v, o, memo.at(v));
    });
  } else {
    emit_reductions(offs);
  }
  b_.CreateRetVoid();
  return llvm::Error::success();
}

// lower::LoopKernel::column_reduction: each call owns a range [lo, hi) of the kept loop and
// accumulates in the outputs themselves, the vectorised inner loop along the kept axis.
bool Emitter::emit_column_reductions(Offsets& offs) {
  if (!lk_.column_reduction) return false;
  const std::vector<int32_t>& reductions = lk_.reductions;
  const std::vector<int32_t>& full_out = lk_.full_outputs;  // stored as the inner loop visits
  llvm::Value* lo = fn_->getArg(1);
  llvm::Value* hi = fn_->getArg(2);
  auto at = [&](const Offsets& o, size_t d, llvm::Value* i) {
    Offsets r = o;
    for (size_t a = 0; a < acc_.size(); ++a)
      if (int64_t s = acc_[a].strides[d])
        r[a] = b_.CreateAdd(o[a], b_.CreateMul(i, b_.getInt64(s), "", true, true), "", true, true);
    return r;
  };
  loop(lo, hi, true, [&](llvm::Value* j) {
    Offsets o = at(offs, 0, j);
    for (int32_t r : reductions) store(r, o, identity(g_.nodes[r]));
  });
  std::vector<int32_t> srcs = full_out;
  for (int32_t r : reductions)
    if (in_kernel(g_.nodes[r].operands[0])) srcs.push_back(g_.nodes[r].operands[0]);
  // The innermost reduced dim runs `rows` rows per step: each kept index's accumulators are
  // loaded once, combined with the rows in order (the order of one row at a time, so the sums
  // are the same) and stored once. One row per step reloads every accumulator right after
  // storing it, and at a 4 KB row stride those loads wait on 4K-aliased stores.
  const size_t last = loop_dims_.size() - 1;
  int64_t rows = kColumnRows;
  while (loop_dims_[last] % rows) rows /= 2;
  std::function<void(size_t, const Offsets&)> over = [&](size_t d, const Offsets& o) {
    if (d < last)
      return loop(b_.getInt64(0), b_.getInt64(loop_dims_[d]), true,
                  [&](llvm::Value* i) { over(d + 1, at(o, d, i)); });
    loop(b_.getInt64(0), b_.getInt64(loop_dims_[last] / rows), true, [&](llvm::Value* i) {
      // The kept indices as nest() runs an innermost map loop: unmasked vector chunks, then
      // one masked tail (a mask on every vector costs a compare and masked loads and stores).
      Offsets oo = at(o, last, b_.CreateMul(i, b_.getInt64(rows), "", true, true));
      nest(0, 1, oo, true, [&](Offsets& io) {
        std::map<int32_t, llvm::Value*> acc;
        for (int32_t r : reductions) acc[r] = load(lk_.access(r, r), io, g_.nodes[r].dtype);
        for (int64_t k = 0; k < rows; ++k) {
          Offsets ik = at(io, last, b_.getInt64(k));
          std::map<int32_t, llvm::Value*> memo;
          eval(srcs, memo, ik);
          for (int32_t v : full_out) store(v, ik, memo.at(v));
          for (int32_t r : reductions) {
            const lt_graph_node& n = g_.nodes[r];
            int32_t src = n.operands[0];
            llvm::Value* x = in_kernel(src) ? memo.at(src) : load(lk_.access(src, r), ik, n.dtype);
            acc[r] = combine(n, acc[r], x);
          }
        }
        for (int32_t r : reductions) store(r, io, acc[r]);
      });
    });
  };
  over(1, offs);
  // host::parallel_for chunks 16384 / work_per_index indices: claim 256 per index so that a
  // chunk holds >= 64 kept indices (whole cache lines per row, full vectors), not 4.
  k_.work_per_index = 256;
  const double count = static_cast<double>(lk_.row_length());
  for (int32_t r : reductions) {
    if (!lower::reduce_formula(g_.nodes[r].op)->mean) continue;
    loop(lo, hi, true, [&](llvm::Value* j) {
      Offsets o = at(offs, 0, j);
      llvm::Value* v = load(lk_.access(r, r), o, g_.nodes[r].dtype);
      store(r, o, b_.CreateFDiv(v, fconst(v->getType(), count)));
    });
  }
  return true;
}

// Per outer index (row): phase p accumulates the reductions with p in-kernel reductions below
// them (max, then the sum of exp(x − max), ...), the reduced-role nodes that need them follow,
// then one pass writes the full-role outputs.
void Emitter::emit_reductions(Offsets& offs) {
  if (emit_column_reductions(offs)) return;
  // Accumulators live in allocas in the entry block (SROA turns them into registers).
  std::map<int32_t, llvm::AllocaInst*> accs;
  for (int32_t r : lk_.reductions) accs[r] = b_.CreateAlloca(reg_type(g_.nodes[r].dtype));

  nest(0, n_outer_, offs, false, [&](Offsets& o) {
    std::map<int32_t, llvm::Value*> outer;  // per-row values
    eval(lk_.row_nodes[0], outer, o);
    for (size_t p = 1; p <= lk_.phases.size(); ++p) {
      const std::vector<int32_t>& rs = lk_.phases[p - 1];
      std::vector<int32_t> srcs;
      for (int32_t r : rs) {
        if (in_kernel(g_.nodes[r].operands[0])) srcs.push_back(g_.nodes[r].operands[0]);
        b_.CreateStore(identity(g_.nodes[r]), accs[r]);
      }
      nest(n_outer_, loop_dims_.size(), o, false, [&](Offsets& io) {
        std::map<int32_t, llvm::Value*> memo = outer;
        eval(srcs, memo, io);
        for (int32_t r : rs) {
          const lt_graph_node& n = g_.nodes[r];
          int32_t src = n.operands[0];
          llvm::Value* x = in_kernel(src) ? memo.at(src) : load(lk_.access(src, r), io, n.dtype);
          b_.CreateStore(combine(n, b_.CreateLoad(reg_type(n.dtype), accs[r]), x), accs[r]);
        }
        if (p == lk_.phases.size())
          for (const lower::LoopKernel::Stash& s : lk_.stashes)
            store(s.output, io, memo.at(s.value));
      });
      for (int32_t r : rs) {
        llvm::Value* v = b_.CreateLoad(reg_type(g_.nodes[r].dtype), accs[r]);
        if (lower::reduce_formula(g_.nodes[r].op)->mean)
          v = b_.CreateFDiv(v, fconst(v->getType(), static_cast<double>(lk_.row_length())));
        outer[r] = v;
      }
      eval(lk_.row_nodes[p], outer, o);
    }
    // Reduced-role outputs once per row, full-role outputs in a final pass.
    for (int32_t v : lk_.row_outputs) store(v, o, outer.at(v));
    const std::vector<int32_t>& full_out = lk_.full_outputs;
    if (full_out.empty()) return;
    nest(n_outer_, loop_dims_.size(), o, true, [&](Offsets& io) {
      std::map<int32_t, llvm::Value*> memo = outer;
      for (const lower::LoopKernel::Stash& s : lk_.stashes)  // stored by the last phase
        memo[s.value] = load(lk_.access(s.output, s.output), io, g_.nodes[s.output].dtype);
      eval(full_out, memo, io);
      for (int32_t v : full_out) store(v, io, memo.at(v));
    });
  });
}

}  // namespace

llvm::Error emit_kernels(llvm::Module& module, std::vector<KernelDesc>& kernels,
                         const std::vector<std::string>& names, const MathTarget& math) {
  for (size_t k = 0; k < kernels.size(); ++k) {
    kernels[k].slots.clear();
    Emitter e(module, kernels[k], names[k], math);
    if (auto err = e.run()) return err;
    merge_quotients(*module.getFunction(names[k]));
  }
  return llvm::Error::success();
}

}  // namespace lt::cpujit
