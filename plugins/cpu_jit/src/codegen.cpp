// codegen.cpp — LLVM IR for fused groups: a loop nest over the (coalesced) domain with
// stride-0 broadcasts and row-wise multi-phase reductions; f32 transcendentals come from
// vecmath (vectorisable, no scalar libm call). Also answers which nodes the JIT can lower.
#include "codegen.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string_view>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>

#include "lazytensor/fusion.hpp"

namespace lt::cpujit {

namespace {

using fusion::find_attr;
using fusion::Role;

bool is_float(lt_dtype d) {
  return d == LT_DTYPE_F32 || d == LT_DTYPE_F64;
}
bool is_int(lt_dtype d) {
  return d == LT_DTYPE_I32 || d == LT_DTYPE_I64;
}
bool is_numeric(lt_dtype d) {
  return is_float(d) || is_int(d);
}

// ---------------------------------------------------------------------------------------
// supports

bool supported_elementwise(const lt_graph& g, const lt_graph_node& n) {
  std::string_view op = n.op;
  lt_dtype d = n.dtype;
  lt_dtype a = n.num_operands > 0 ? g.nodes[n.operands[0]].dtype : d;
  if (op == "exp" || op == "log" || op == "sqrt" || op == "rsqrt" || op == "tanh" ||
      op == "sigmoid" || op == "gelu" || op == "sin" || op == "cos" || op == "floor" || op == "pow")
    return is_float(d);
  if (op == "neg" || op == "abs" || op == "relu" || op == "add" || op == "sub" || op == "mul" ||
      op == "div" || op == "maximum" || op == "minimum")
    return is_numeric(d);
  if (op == "eq" || op == "ne") return is_numeric(a) || a == LT_DTYPE_BOOL;
  if (op == "lt" || op == "le" || op == "gt" || op == "ge") return is_numeric(a);
  if (op == "and" || op == "or" || op == "not") return d == LT_DTYPE_BOOL;
  if (op == "where") return is_numeric(d) || d == LT_DTYPE_BOOL;
  if (op == "cast")
    return (is_numeric(d) || d == LT_DTYPE_BOOL) && (is_numeric(a) || a == LT_DTYPE_BOOL);
  if (op == "full") {
    const lt_attr* v = find_attr(n, "value");
    return v && v->kind == LT_ATTR_FLOAT && (is_numeric(d) || d == LT_DTYPE_BOOL);
  }
  if (op == "broadcast_to") return is_numeric(d) || d == LT_DTYPE_BOOL;
  return false;
}

}  // namespace

bool codegen_supports(const lt_graph& g, size_t i) {
  const lt_graph_node& n = g.nodes[i];
  std::string_view op = n.op;
  if (n.rank > 16) return false;
  for (size_t k = 0; k < n.num_operands; ++k)
    if (g.nodes[n.operands[k]].rank > 16) return false;
  if (op == "input") return n.dtype != LT_DTYPE_BF16 && n.dtype != LT_DTYPE_F16;
  if (fusion::is_elementwise_op(op)) return supported_elementwise(g, n);
  if (op == "slice") return fusion::is_index_map(g, n) && n.dtype != LT_DTYPE_F16;
  if (fusion::is_reduction_op(op)) {
    if (n.num_operands != 1) return false;
    const lt_attr* ax = find_attr(n, "axes");
    if (!ax || ax->kind != LT_ATTR_INTS) return false;
    if (op == "mean") return is_float(n.dtype);
    return is_numeric(n.dtype);
  }
  return false;
}

namespace {

// ---------------------------------------------------------------------------------------
// kernel emission

struct Access {
  int slot;
  std::vector<int64_t> strides;  // per loop dim (after reorder + coalescing)
  int64_t offset = 0;            // elements (a slice's start)
};

class Emitter {
 public:
  Emitter(llvm::Module& m, KernelDesc& k, const std::string& name, const MathTarget& math)
      : m_(m), ctx_(m.getContext()), b_(ctx_), k_(k), g_(*k.graph), name_(name), math_(math) {
    // a·b + c may become one FMA (docs/ops.md): e.g. 0.5·x + 1 and s·t + x in the chain.
    llvm::FastMathFlags fmf;
    fmf.setAllowContract(true);
    b_.setFastMathFlags(fmf);
  }

  llvm::Error run();

 private:
  // -- types and constants
  llvm::Type* reg_type(lt_dtype d) {
    switch (d) {
      case LT_DTYPE_F32:
        return b_.getFloatTy();
      case LT_DTYPE_F64:
        return b_.getDoubleTy();
      case LT_DTYPE_I32:
        return b_.getInt32Ty();
      case LT_DTYPE_I64:
        return b_.getInt64Ty();
      default:
        return b_.getInt1Ty();
    }
  }
  llvm::Type* mem_type(lt_dtype d) { return d == LT_DTYPE_BOOL ? b_.getInt8Ty() : reg_type(d); }
  llvm::Value* fconst(llvm::Type* t, double v) { return llvm::ConstantFP::get(t, v); }
  llvm::Value* const_of(lt_dtype d, double v);

  // -- layout
  bool in_kernel(int32_t v) const { return member_.count(v) != 0; }
  Role role(int32_t v) const {
    Role r = Role::kFull;
    const lt_graph_node& n = g_.nodes[v];
    if (!k_.reduce_axes.empty()) fusion::role_of(n.shape, n.rank, k_.domain, k_.reduce_axes, &r);
    return r;
  }
  std::vector<int64_t> domain_strides(int32_t buf, int32_t user, int64_t* offset) const;
  int slot_of(int32_t node);
  int access_of(int32_t buf, int32_t user);

  // -- loops
  // fold_tail: the vectoriser masks the last iteration instead of adding a scalar loop.
  template <class Body>
  void loop(llvm::Value* lo, llvm::Value* hi, bool fold_tail, Body body);
  // chunk: the innermost loop carries no reduction, so it may be split into unmasked
  // vector-width chunks (a reduction would then reduce horizontally every chunk).
  void nest(size_t first, size_t last, std::vector<llvm::Value*>& offs, bool chunk,
            const std::function<void(std::vector<llvm::Value*>&)>& body);

  // -- values
  llvm::Value* load(int acc, const std::vector<llvm::Value*>& offs, lt_dtype d);
  void tag(llvm::Instruction* mem, int slot) {
    mem->setMetadata(llvm::LLVMContext::MD_alias_scope, scope_[slot]);
    mem->setMetadata(llvm::LLVMContext::MD_noalias, noalias_[slot]);
  }
  void store(int acc, const std::vector<llvm::Value*>& offs, lt_dtype d, llvm::Value* v);
  void eval(const std::vector<int32_t>& targets, std::map<int32_t, llvm::Value*>& memo,
            const std::vector<llvm::Value*>& offs, bool inner);
  llvm::Value* op(int32_t v, const std::vector<llvm::Value*>& a);
  llvm::Value* cast(llvm::Value* x, lt_dtype from, lt_dtype to);
  llvm::Value* intrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Value*> args) {
    return b_.CreateIntrinsic(id, {args[0]->getType()}, args);
  }
  llvm::Value* fma(llvm::Value* a, llvm::Value* b, llvm::Value* c) {
    return intrinsic(llvm::Intrinsic::fmuladd, {a, b, c});
  }
  llvm::Value* exp_any(llvm::Value* x) {
    return x->getType()->isFloatTy() ? emit_exp_f32(b_, x, math_)
                                     : intrinsic(llvm::Intrinsic::exp, {x});
  }

  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  KernelDesc& k_;
  const lt_graph& g_;
  std::string name_;
  const MathTarget& math_;
  std::map<int32_t, int> member_;  // node -> position
  std::map<int32_t, int> slot_;    // node -> slot
  std::vector<Access> acc_;
  std::map<std::pair<int32_t, int32_t>, int> acc_of_;  // (buf, user) -> access
  std::vector<int64_t> loop_dims_;                     // coalesced loop extents
  size_t n_outer_ = 0;                                 // first n_outer_ loop dims are outer
  int64_t lanes_ = 16;              // lanes of the widest vector of the kernel's narrowest element
  std::vector<llvm::Value*> base_;  // slot -> base pointer
  // Slot k's accesses are in scope k and noalias with every other slot: buffers bound to
  // distinct slots never overlap where one is written (outputs and temps are fresh), so the
  // vectoriser needs no runtime checks and hoists stride-0 (scalar) loads out of loops.
  std::vector<llvm::MDNode*> scope_, noalias_;
  llvm::Function* fn_ = nullptr;
};

llvm::Value* Emitter::const_of(lt_dtype d, double v) {
  switch (d) {
    case LT_DTYPE_F32:
    case LT_DTYPE_F64:
      return fconst(reg_type(d), v);
    case LT_DTYPE_I32:
    case LT_DTYPE_I64: {
      double lo = d == LT_DTYPE_I32 ? -2147483648.0 : -9223372036854775808.0;
      double hi = d == LT_DTYPE_I32 ? 2147483647.0 : 9223372036854775807.0;
      int64_t i = std::isnan(v) ? 0
                  : v <= lo     ? static_cast<int64_t>(lo)
                  : v >= hi
                      ? (d == LT_DTYPE_I32 ? 2147483647LL : std::numeric_limits<int64_t>::max())
                      : static_cast<int64_t>(v);
      return llvm::ConstantInt::get(reg_type(d), i, true);
    }
    default:
      return b_.getInt1(v != 0.0);
  }
}

std::vector<int64_t> Emitter::domain_strides(int32_t buf, int32_t user, int64_t* offset) const {
  const lt_graph_node& b = g_.nodes[buf];
  *offset = 0;
  lt_graph_node u = g_.nodes[user];
  Role r = role(user);
  if (fusion::is_reduction_op(u.op) && buf != user) {
    // A reduction reads its operand over the full domain. Its own output (buf == user:
    // the store of a reduction that is a kernel output) is laid out by its reduced role,
    // like any other reduced-shape node; mapping it onto the full domain put the kept
    // axes' strides on the wrong loop dims (multi-row reductions overwrote row 0).
    u.shape = k_.domain.data();
    u.rank = k_.domain.size();
    r = Role::kFull;
  }
  std::vector<int64_t> dense(b.rank);
  int64_t s = 1;
  for (size_t i = b.rank; i-- > 0;) {
    dense[i] = s;
    s *= b.shape[i];
  }
  std::vector<int64_t> su(u.rank, 0);
  if (std::string_view(u.op) == "slice" && u.num_operands == 1 && u.operands[0] == buf) {
    // Affine index map: operand[start + i·step] (same rank; steps may be negative).
    const lt_attr* st = find_attr(u, "starts");
    const lt_attr* sp = find_attr(u, "steps");
    for (size_t j = 0; j < u.rank; ++j) {
      *offset += dense[j] * st->ints[j];
      if (u.shape[j] != 1) su[j] = dense[j] * sp->ints[j];
    }
  } else {
    for (size_t j = 0; j < u.rank; ++j) {
      int64_t jb = static_cast<int64_t>(j) - static_cast<int64_t>(u.rank - b.rank);
      if (jb >= 0 && b.shape[jb] != 1 && u.shape[j] != 1) su[j] = dense[jb];
    }
  }
  std::vector<int64_t> out(k_.domain.size(), 0);
  if (r == Role::kReducedDrop) {
    size_t j = 0;
    for (size_t d = 0; d < k_.domain.size(); ++d)
      if (!std::binary_search(k_.reduce_axes.begin(), k_.reduce_axes.end(), (int64_t)d))
        out[d] = su[j++];
  } else {
    for (size_t d = 0; d < out.size() && d < su.size(); ++d) out[d] = su[d];
  }
  return out;
}

int Emitter::slot_of(int32_t node) {
  auto it = slot_.find(node);
  if (it != slot_.end()) return it->second;
  int s = static_cast<int>(k_.slots.size());
  k_.slots.push_back(node);
  slot_[node] = s;
  return s;
}

int Emitter::access_of(int32_t buf, int32_t user) {
  auto it = acc_of_.find({buf, user});
  if (it != acc_of_.end()) return it->second;
  Access a{slot_of(buf), {}, 0};
  a.strides = domain_strides(buf, user, &a.offset);
  acc_.push_back(std::move(a));
  acc_of_[{buf, user}] = static_cast<int>(acc_.size() - 1);
  return static_cast<int>(acc_.size() - 1);
}

template <class Body>
void Emitter::loop(llvm::Value* lo, llvm::Value* hi, bool fold_tail, Body body) {
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
  {
    // Tail folding (masked last vector iteration) instead of a scalar remainder loop and a
    // second, epilogue-vectorised copy of the body.
    llvm::Metadata* pred[] = {llvm::MDString::get(ctx_, "llvm.loop.vectorize.predicate.enable"),
                              llvm::ConstantAsMetadata::get(b_.getInt1(fold_tail))};
    llvm::Metadata* il[] = {llvm::MDString::get(ctx_, "llvm.loop.interleave.count"),
                            llvm::ConstantAsMetadata::get(b_.getInt32(1))};
    llvm::Metadata* ops[] = {nullptr, llvm::MDNode::get(ctx_, pred), llvm::MDNode::get(ctx_, il)};
    llvm::MDNode* id = llvm::MDNode::getDistinct(ctx_, ops);
    id->replaceOperandWith(0, id);
    latch->setMetadata(llvm::LLVMContext::MD_loop, id);
  }
  b_.SetInsertPoint(exit);
}

void Emitter::nest(size_t first, size_t last, std::vector<llvm::Value*>& offs, bool chunk,
                   const std::function<void(std::vector<llvm::Value*>&)>& body) {
  if (first == last) {
    body(offs);
    return;
  }
  llvm::Value* lo = b_.getInt64(0);
  llvm::Value* hi = b_.getInt64(loop_dims_[first]);
  if (first == 0) {
    lo = fn_->getArg(1);
    hi = fn_->getArg(2);
  }
  auto level = [&](llvm::Value* i) {
    std::vector<llvm::Value*> inner = offs;
    for (size_t a = 0; a < acc_.size(); ++a) {
      int64_t s = acc_[a].strides[first];
      if (s != 0)
        inner[a] =
            b_.CreateAdd(offs[a], b_.CreateMul(i, b_.getInt64(s), "", true, true), "", true, true);
    }
    nest(first + 1, last, inner, chunk, body);
  };
  // The innermost loop is the one vectorised. Masking every iteration (tail folding) costs
  // ~6 instructions per vector (the i64 lane compares), 12% of the sigmoid·tanh chain, so
  // the bulk runs as chunks of `lanes_` (an inner loop of constant trip count, which the
  // vectoriser turns into one unmasked vector step with no remainder or trip-count check)
  // and the rest as one tail-folded loop.
  bool innermost = first + 1 == last;
  int64_t extent = loop_dims_[first];
  if (!chunk || !innermost || (first != 0 && extent < 2 * lanes_)) return loop(lo, hi, true, level);
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

llvm::Value* Emitter::load(int acc, const std::vector<llvm::Value*>& offs, lt_dtype d) {
  llvm::Value* p = b_.CreateInBoundsGEP(mem_type(d), base_[acc_[acc].slot], offs[acc]);
  llvm::LoadInst* ld = b_.CreateLoad(mem_type(d), p);
  tag(ld, acc_[acc].slot);
  llvm::Value* v = ld;
  if (d == LT_DTYPE_BOOL) v = b_.CreateICmpNE(v, b_.getInt8(0));
  return v;
}

void Emitter::store(int acc, const std::vector<llvm::Value*>& offs, lt_dtype d, llvm::Value* v) {
  if (d == LT_DTYPE_BOOL) v = b_.CreateZExt(v, b_.getInt8Ty());
  llvm::Value* p = b_.CreateInBoundsGEP(mem_type(d), base_[acc_[acc].slot], offs[acc]);
  tag(b_.CreateStore(v, p), acc_[acc].slot);
}

// Evaluates `targets` (and what they need) into memo. In an inner (full-domain) body,
// reduced-role nodes and reductions must already be in memo (computed per row).
void Emitter::eval(const std::vector<int32_t>& targets, std::map<int32_t, llvm::Value*>& memo,
                   const std::vector<llvm::Value*>& offs, bool inner) {
  std::vector<int32_t> need;
  std::vector<int32_t> stack(targets.begin(), targets.end());
  std::map<int32_t, bool> seen;
  while (!stack.empty()) {
    int32_t v = stack.back();
    stack.pop_back();
    if (memo.count(v) || seen[v]) continue;
    seen[v] = true;
    need.push_back(v);
    const lt_graph_node& n = g_.nodes[v];
    for (size_t k = 0; k < n.num_operands; ++k)
      if (in_kernel(n.operands[k])) stack.push_back(n.operands[k]);
  }
  std::sort(need.begin(), need.end());
  (void)inner;
  for (int32_t v : need) {
    const lt_graph_node& n = g_.nodes[v];
    std::vector<llvm::Value*> args;
    for (size_t k = 0; k < n.num_operands; ++k) {
      int32_t o = n.operands[k];
      if (in_kernel(o)) {
        args.push_back(memo.at(o));
      } else {
        args.push_back(load(acc_of_.at({o, v}), offs, g_.nodes[o].dtype));
      }
    }
    memo[v] = op(v, args);
  }
}

llvm::Value* Emitter::cast(llvm::Value* x, lt_dtype from, lt_dtype to) {
  llvm::Type* t = reg_type(to);
  if (from == to) return x;
  if (to == LT_DTYPE_BOOL) {
    if (is_float(from)) return b_.CreateFCmpUNE(x, fconst(x->getType(), 0.0));
    return b_.CreateICmpNE(x, llvm::ConstantInt::get(x->getType(), 0));
  }
  if (from == LT_DTYPE_BOOL) return is_float(to) ? b_.CreateUIToFP(x, t) : b_.CreateZExt(x, t);
  if (is_float(from) && is_float(to)) return b_.CreateFPCast(x, t);
  if (is_int(from) && is_float(to)) return b_.CreateSIToFP(x, t);
  if (is_float(from) && is_int(to))
    return b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {t, x->getType()}, {x});
  return b_.CreateSExtOrTrunc(x, t);
}

llvm::Value* Emitter::op(int32_t v, const std::vector<llvm::Value*>& a) {
  const lt_graph_node& n = g_.nodes[v];
  std::string_view op = n.op;
  lt_dtype d = n.dtype;
  lt_dtype ad = n.num_operands ? g_.nodes[n.operands[0]].dtype : d;
  llvm::Type* t = reg_type(d);
  bool fl = is_float(ad);
  using I = llvm::Intrinsic::ID;
  auto un = [&](I id) { return intrinsic(id, {a[0]}); };
  if (op == "full") return const_of(d, find_attr(n, "value")->f);
  if (op == "broadcast_to" || op == "slice") return a[0];  // slice: loaded through its map
  if (op == "cast") return cast(a[0], ad, d);
  if (op == "neg") return fl ? b_.CreateFNeg(a[0]) : b_.CreateNeg(a[0]);
  if (op == "abs")
    return fl ? un(llvm::Intrinsic::fabs)
              : b_.CreateIntrinsic(llvm::Intrinsic::abs, {t}, {a[0], b_.getFalse()});
  if (op == "relu") {
    if (!fl)
      return b_.CreateIntrinsic(llvm::Intrinsic::smax, {t}, {a[0], llvm::ConstantInt::get(t, 0)});
    // max(a, 0) with NaN kept: select(a < 0, 0, a) leaves NaN untouched.
    return b_.CreateSelect(b_.CreateFCmpOLT(a[0], fconst(t, 0.0)), fconst(t, 0.0), a[0]);
  }
  if (op == "exp") return exp_any(a[0]);
  if (op == "log") return d == LT_DTYPE_F32 ? emit_log_f32(b_, a[0]) : un(llvm::Intrinsic::log);
  if (op == "sqrt") return un(llvm::Intrinsic::sqrt);
  if (op == "rsqrt") return b_.CreateFDiv(fconst(t, 1.0), un(llvm::Intrinsic::sqrt));
  if (op == "sin") return un(llvm::Intrinsic::sin);
  if (op == "cos") return un(llvm::Intrinsic::cos);
  if (op == "floor") return un(llvm::Intrinsic::floor);
  if (op == "tanh") {
    if (d == LT_DTYPE_F32) return emit_tanh_f32(b_, a[0], math_);
    // f64: (1 − e^{−2x})/(1 + e^{−2x}) for x ≥ 0, odd symmetry otherwise.
    llvm::Value* ax = un(llvm::Intrinsic::fabs);
    llvm::Value* e = exp_any(b_.CreateFMul(ax, fconst(t, -2.0)));
    llvm::Value* r =
        b_.CreateFDiv(b_.CreateFSub(fconst(t, 1.0), e), b_.CreateFAdd(fconst(t, 1.0), e));
    return intrinsic(llvm::Intrinsic::copysign, {r, a[0]});
  }
  if (op == "sigmoid") {  // 1/(1 + e^-x): numerator 1, denominator >= 1
    llvm::Value* den = b_.CreateFAdd(fconst(t, 1.0), exp_any(b_.CreateFNeg(a[0])));
    return emit_bounded_quotient(b_, fconst(t, 1.0), den, 1.0);
  }
  if (op == "gelu") {
    // 0.5·x·(1 + tanh(u)) == x·sigmoid(2u): no cancellation for negative x.
    llvm::Value* x3 = b_.CreateFMul(b_.CreateFMul(a[0], a[0]), a[0]);
    llvm::Value* u =
        b_.CreateFMul(fma(x3, fconst(t, 0.044715), a[0]), fconst(t, -2.0 * 0.7978845608028654));
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
    llvm::Value* q = b_.CreateSDiv(a[0], b_.CreateSelect(bad, llvm::ConstantInt::get(t, 1), a[1]));
    llvm::Value* special = b_.CreateSelect(b_.CreateICmpEQ(a[1], zero), zero, b_.CreateNeg(a[0]));
    return b_.CreateSelect(bad, special, q);
  }
  if (op == "maximum")
    return fl ? intrinsic(llvm::Intrinsic::maximum, {a[0], a[1]})
              : b_.CreateIntrinsic(llvm::Intrinsic::smax, {t}, {a[0], a[1]});
  if (op == "minimum")
    return fl ? intrinsic(llvm::Intrinsic::minimum, {a[0], a[1]})
              : b_.CreateIntrinsic(llvm::Intrinsic::smin, {t}, {a[0], a[1]});
  if (op == "eq") return fl ? b_.CreateFCmpOEQ(a[0], a[1]) : b_.CreateICmpEQ(a[0], a[1]);
  if (op == "ne") return fl ? b_.CreateFCmpUNE(a[0], a[1]) : b_.CreateICmpNE(a[0], a[1]);
  if (op == "lt") return fl ? b_.CreateFCmpOLT(a[0], a[1]) : b_.CreateICmpSLT(a[0], a[1]);
  if (op == "le") return fl ? b_.CreateFCmpOLE(a[0], a[1]) : b_.CreateICmpSLE(a[0], a[1]);
  if (op == "gt") return fl ? b_.CreateFCmpOGT(a[0], a[1]) : b_.CreateICmpSGT(a[0], a[1]);
  if (op == "ge") return fl ? b_.CreateFCmpOGE(a[0], a[1]) : b_.CreateICmpSGE(a[0], a[1]);
  if (op == "and") return b_.CreateAnd(a[0], a[1]);
  if (op == "or") return b_.CreateOr(a[0], a[1]);
  if (op == "not") return b_.CreateNot(a[0]);
  if (op == "where") return b_.CreateSelect(a[0], a[1], a[2]);
  return llvm::UndefValue::get(t);  // unreachable for supported nodes
}

llvm::Error Emitter::run() {
  for (size_t i = 0; i < k_.nodes.size(); ++i) member_[k_.nodes[i]] = static_cast<int>(i);
  std::vector<int32_t> reductions;
  for (int32_t v : k_.nodes) {
    const lt_graph_node& n = g_.nodes[v];
    if (fusion::is_reduction_op(n.op)) {
      reductions.push_back(v);
      if (!k_.reduce_axes.empty() && k_.nodes.size() > 0) {
        // checked by the planner; keep codegen honest
      }
    }
    for (size_t k = 0; k < n.num_operands; ++k)
      if (!in_kernel(n.operands[k])) access_of(n.operands[k], v);
    if (std::string_view(n.op) == "slice" && in_kernel(n.operands[0]))
      return llvm::createStringError("slice fused with its operand (planner invariant)");
  }
  for (int32_t v : k_.outputs) access_of(v, v);
  size_t narrowest = 8;
  for (int32_t v : k_.nodes) narrowest = std::min(narrowest, lt_dtype_size(g_.nodes[v].dtype));
  for (int32_t v : k_.slots) narrowest = std::min(narrowest, lt_dtype_size(g_.nodes[v].dtype));
  lanes_ = std::max<int64_t>(1, math_.vector_bits / (8 * std::max<size_t>(1, narrowest)));
  if (!reductions.empty() && k_.reduce_axes.empty())
    return llvm::createStringError("reduction in a kernel without reduce axes");

  // Loop order: kept dims, then reduced dims; coalesce neighbours within each part.
  size_t rank = k_.domain.size();
  std::vector<size_t> order;
  std::vector<char> red(rank, 0);
  for (int64_t ax : k_.reduce_axes) red[ax] = 1;
  for (size_t d = 0; d < rank; ++d)
    if (!red[d]) order.push_back(d);
  size_t nkept = order.size();
  for (size_t d = 0; d < rank; ++d)
    if (red[d]) order.push_back(d);
  struct Dim {
    int64_t size;
    bool reduced;
    std::vector<int64_t> s;
  };
  std::vector<Dim> dims;
  for (size_t p = 0; p < rank; ++p) {
    size_t d = order[p];
    Dim dm{k_.domain[d], p >= nkept, {}};
    for (const Access& a : acc_) dm.s.push_back(a.strides[d]);
    if (dm.size == 1) continue;
    if (!dims.empty() && dims.back().reduced == dm.reduced) {
      Dim& prev = dims.back();
      bool ok = true;
      for (size_t a = 0; a < acc_.size() && ok; ++a) ok = prev.s[a] == dm.s[a] * dm.size;
      if (ok) {
        prev.size *= dm.size;
        prev.s = dm.s;
        continue;
      }
    }
    dims.push_back(std::move(dm));
  }
  if (dims.empty() || dims.front().reduced)
    dims.insert(dims.begin(), Dim{1, false, std::vector<int64_t>(acc_.size(), 0)});
  n_outer_ = 0;
  for (const Dim& dm : dims) n_outer_ += !dm.reduced;
  for (size_t a = 0; a < acc_.size(); ++a) acc_[a].strides.clear();
  for (const Dim& dm : dims) {
    loop_dims_.push_back(dm.size);
    for (size_t a = 0; a < acc_.size(); ++a) acc_[a].strides.push_back(dm.s[a]);
  }
  int64_t outer_numel = 1;
  for (size_t i = 0; i < n_outer_; ++i) outer_numel *= loop_dims_[i];
  k_.parallel_extent = outer_numel == 0 ? 0 : loop_dims_[0];
  k_.work_per_index = 1;
  for (size_t i = 1; i < loop_dims_.size(); ++i)
    k_.work_per_index *= std::max<int64_t>(1, loop_dims_[i]);
  int64_t reduce_count = 1;
  for (int64_t ax : k_.reduce_axes) reduce_count *= k_.domain[ax];

  // Function and base pointers.
  llvm::Type* ptr = b_.getPtrTy();
  auto* fty =
      llvm::FunctionType::get(b_.getVoidTy(), {ptr, b_.getInt64Ty(), b_.getInt64Ty()}, false);
  fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, name_, m_);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  fn_->addParamAttr(0, llvm::Attribute::NoAlias);
  llvm::BasicBlock* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  b_.SetInsertPoint(entry);
  llvm::MDBuilder mdb(ctx_);
  llvm::MDNode* domain = mdb.createAnonymousAliasScopeDomain(name_);
  std::vector<llvm::Metadata*> scopes;
  for (size_t s = 0; s < k_.slots.size(); ++s)
    scopes.push_back(mdb.createAnonymousAliasScope(domain, "slot" + std::to_string(s)));
  for (size_t s = 0; s < k_.slots.size(); ++s) {
    std::vector<llvm::Metadata*> others;
    for (size_t o = 0; o < scopes.size(); ++o)
      if (o != s) others.push_back(scopes[o]);
    scope_.push_back(llvm::MDNode::get(ctx_, {scopes[s]}));
    noalias_.push_back(llvm::MDNode::get(ctx_, others));
  }
  for (size_t s = 0; s < k_.slots.size(); ++s)
    base_.push_back(b_.CreateLoad(ptr, b_.CreateConstInBoundsGEP1_64(ptr, fn_->getArg(0), s)));
  std::vector<llvm::Value*> offs;
  for (const Access& a : acc_) offs.push_back(b_.getInt64(a.offset));

  if (reductions.empty()) {
    nest(0, loop_dims_.size(), offs, true, [&](std::vector<llvm::Value*>& o) {
      std::map<int32_t, llvm::Value*> memo;
      eval(k_.outputs, memo, o, true);
      for (int32_t v : k_.outputs) store(acc_of_.at({v, v}), o, g_.nodes[v].dtype, memo.at(v));
    });
    b_.CreateRetVoid();
    return llvm::Error::success();
  }

  // Reduction phases: a reduction's phase is the number of in-kernel reductions below it.
  std::map<int32_t, int> level;
  int phases = 0;
  for (int32_t v : k_.nodes) {
    const lt_graph_node& n = g_.nodes[v];
    int lv = 0;
    for (size_t k = 0; k < n.num_operands; ++k)
      if (in_kernel(n.operands[k])) lv = std::max(lv, level[n.operands[k]]);
    if (fusion::is_reduction_op(n.op)) {
      phases = std::max(phases, lv + 1);
      level[v] = lv + 1;
    } else {
      level[v] = lv;
    }
  }
  // Accumulators live in allocas in the entry block (SROA turns them into registers).
  std::map<int32_t, llvm::AllocaInst*> accs;
  for (int32_t r : reductions) accs[r] = b_.CreateAlloca(reg_type(g_.nodes[r].dtype));

  nest(0, n_outer_, offs, false, [&](std::vector<llvm::Value*>& o) {
    std::map<int32_t, llvm::Value*> outer;
    auto emit_ready = [&](int upto) {
      std::vector<int32_t> ready;
      for (int32_t v : k_.nodes)
        if (role(v) != Role::kFull && !fusion::is_reduction_op(g_.nodes[v].op) &&
            level[v] <= upto && !outer.count(v))
          ready.push_back(v);
      eval(ready, outer, o, false);
    };
    emit_ready(0);
    for (int p = 1; p <= phases; ++p) {
      std::vector<int32_t> rs;
      for (int32_t r : reductions)
        if (level[r] == p) rs.push_back(r);
      for (int32_t r : rs) {
        const lt_graph_node& n = g_.nodes[r];
        std::string_view op = n.op;
        llvm::Type* t = reg_type(n.dtype);
        llvm::Value* init;
        if (op == "sum" || op == "mean") {
          init = is_float(n.dtype) ? fconst(t, 0.0) : llvm::ConstantInt::get(t, 0);
        } else if (is_float(n.dtype)) {
          double inf = std::numeric_limits<double>::infinity();
          init = fconst(t, op == "max" ? -inf : inf);
        } else {
          llvm::APInt v = op == "max" ? llvm::APInt::getSignedMinValue(t->getIntegerBitWidth())
                                      : llvm::APInt::getSignedMaxValue(t->getIntegerBitWidth());
          init = llvm::ConstantInt::get(t, v);
        }
        b_.CreateStore(init, accs[r]);
      }
      nest(n_outer_, loop_dims_.size(), o, false, [&](std::vector<llvm::Value*>& io) {
        std::map<int32_t, llvm::Value*> memo = outer;
        std::vector<int32_t> srcs;
        for (int32_t r : rs) {
          int32_t src = g_.nodes[r].operands[0];
          if (in_kernel(src)) srcs.push_back(src);
        }
        eval(srcs, memo, io, true);
        for (int32_t r : rs) {
          const lt_graph_node& n = g_.nodes[r];
          int32_t src = n.operands[0];
          llvm::Value* x = in_kernel(src) ? memo.at(src) : load(acc_of_.at({src, r}), io, n.dtype);
          llvm::Type* t = reg_type(n.dtype);
          llvm::Value* cur = b_.CreateLoad(t, accs[r]);
          std::string_view op = n.op;
          llvm::Value* nv;
          bool fl = is_float(n.dtype);
          if (op == "sum" || op == "mean") {
            if (fl) {
              nv = b_.CreateFAdd(cur, x);
              // Float sums may be reassociated (docs/ops.md), which lets them vectorise.
              llvm::cast<llvm::Instruction>(nv)->setHasAllowReassoc(true);
            } else {
              nv = b_.CreateAdd(cur, x);
            }
          } else if (op == "max") {
            nv = fl ? intrinsic(llvm::Intrinsic::maximum, {cur, x})
                    : b_.CreateIntrinsic(llvm::Intrinsic::smax, {t}, {cur, x});
          } else {
            nv = fl ? intrinsic(llvm::Intrinsic::minimum, {cur, x})
                    : b_.CreateIntrinsic(llvm::Intrinsic::smin, {t}, {cur, x});
          }
          b_.CreateStore(nv, accs[r]);
        }
      });
      for (int32_t r : rs) {
        const lt_graph_node& n = g_.nodes[r];
        llvm::Value* v = b_.CreateLoad(reg_type(n.dtype), accs[r]);
        if (std::string_view(n.op) == "mean")
          v = b_.CreateFDiv(v, fconst(v->getType(), static_cast<double>(reduce_count)));
        outer[r] = v;
      }
      emit_ready(p);
    }
    // Reduced-role outputs once per row, full-role outputs in a final pass.
    std::vector<int32_t> full_out;
    for (int32_t v : k_.outputs) {
      if (role(v) == Role::kFull) {
        full_out.push_back(v);
        continue;
      }
      store(acc_of_.at({v, v}), o, g_.nodes[v].dtype, outer.at(v));
    }
    if (!full_out.empty()) {
      nest(n_outer_, loop_dims_.size(), o, true, [&](std::vector<llvm::Value*>& io) {
        std::map<int32_t, llvm::Value*> memo = outer;
        eval(full_out, memo, io, true);
        for (int32_t v : full_out) store(acc_of_.at({v, v}), io, g_.nodes[v].dtype, memo.at(v));
      });
    }
  });
  b_.CreateRetVoid();
  return llvm::Error::success();
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
