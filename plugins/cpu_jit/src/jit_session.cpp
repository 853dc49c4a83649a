// jit_session.cpp — the LLVM ORC session (one LLJIT per plugin context): host target
// detection (optionally narrowed to a vector width), a short kernel pipeline (SROA, LICM,
// loop vectoriser, then the vecmath bodies inlined) and libmvec mappings, object code from the
// persistent cache or compiled (then stored), linked in a JITDylib of its own per module.

#include <chrono>
#include <cstdlib>
#include <mutex>

#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Transforms/IPO/AlwaysInliner.h>
#include <llvm/Transforms/IPO/GlobalDCE.h>
#include <llvm/Transforms/InstCombine/InstCombine.h>
#include <llvm/Transforms/Scalar/EarlyCSE.h>
#include <llvm/Transforms/Scalar/LICM.h>
#include <llvm/Transforms/Scalar/SROA.h>
#include <llvm/Transforms/Scalar/SimplifyCFG.h>
#include <llvm/Transforms/Utils/LoopSimplify.h>
#include <llvm/Transforms/Utils/LCSSA.h>
#include <llvm/Transforms/Vectorize/LoopVectorize.h>
#include <llvm/Support/DynamicLibrary.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>

#include "codegen.h"
#include "lazytensor/lower/error.hpp"
#include "lazytensor/plugin_kit.hpp"

namespace lt::cpujit {

namespace {

// The host's features with every extension wider than `bits` off (for LLVM and our checks).
llvm::SubtargetFeatures narrow(const llvm::SubtargetFeatures& host, unsigned bits) {
  llvm::SubtargetFeatures out;
  for (const std::string& f : host.getFeatures()) {
    llvm::StringRef name = llvm::StringRef(f).drop_front();
    bool too_wide = (bits < 512 && (name.starts_with("avx512") || name == "evex512")) ||
                    (bits < 256 && (name.starts_with("avx") || name == "fma" || name == "f16c" ||
                                    name == "vaes" || name == "vpclmulqdq"));
    out.AddFeature(name, f[0] == '+' && !too_wide);
  }
  return out;
}

// An llvm::Expected's value, or lower::Error naming what failed and LLVM's message.
template <class T>
T take(llvm::Expected<T> x, const char* what) {
  if (!x) lower::fail(LT_STATUS_PLUGIN_ERROR, std::string(what) + llvm::toString(x.takeError()));
  return std::move(*x);
}

// The compiler: owns LLJIT and the host TargetMachine used for optimisation. Construction
// cannot fail; create_compiler() does the fallible work (no ExitOnError).
class OrcCompiler final : public Compiler {
 public:
  OrcCompiler(std::unique_ptr<llvm::orc::LLJIT> jit, std::unique_ptr<llvm::TargetMachine> tm,
              std::string cpu, std::string features, bool mvec, lower::DiskCache& cache)
      : cache_(cache),
        jit_(std::move(jit)),
        tm_(std::move(tm)),
        cpu_(std::move(cpu)),
        features_(std::move(features)),
        mvec_(mvec),
        wide_(has("avx512f") && features_.find("-evex512") == std::string::npos) {
    // The vector width kernels are compiled for and what the math may use at it.
    math_.avx512 = wide_ && has("avx512vl");
    math_.fma = has("fma");
    math_.vector_bits = wide_ ? 512 : has("avx") ? 256 : 128;
    description_ = "LLVM ORC JIT on " + cpu_ + " (" +
                   (math_.avx512  ? "AVX-512"
                    : has("avx2") ? "AVX2"
                                  : "SSE") +
                   ", " + std::to_string(math_.vector_bits) + "-bit vectors)" +
                   (mvec_ ? ", libmvec" : "");
  }

  std::string ir(std::vector<KernelDesc>& kernels) override {
    std::lock_guard<std::mutex> lock(mu_);
    llvm::LLVMContext ctx;
    llvm::Module mod("lt_cpu_jit", ctx);
    std::vector<std::string> names;
    for (size_t k = 0; k < kernels.size(); ++k) names.push_back("lt_k" + std::to_string(k));
    if (auto e = emit_kernels(mod, kernels, names, math_))
      lower::fail(LT_STATUS_INTERNAL, "codegen: " + llvm::toString(std::move(e)));
    std::string text;
    llvm::raw_string_ostream(text) << mod;
    return text;
  }

  std::vector<KernelFn> compile(std::vector<KernelDesc>& kernels,
                                std::shared_ptr<void>* code) override {
    // ORC is thread-safe but compiles stay serial so kernel names and the TargetMachine used
    // by the optimiser are never shared concurrently.
    std::lock_guard<std::mutex> lock(mu_);
    auto ctx = std::make_unique<llvm::LLVMContext>();
    auto mod = std::make_unique<llvm::Module>("lt_cpu_jit", *ctx);
    std::vector<std::string> names;
    uint64_t id = next_id_++;
    for (size_t k = 0; k < kernels.size(); ++k) names.push_back("lt_k" + std::to_string(k));
    if (auto e = emit_kernels(*mod, kernels, names, math_))
      lower::fail(LT_STATUS_INTERNAL, "codegen: " + llvm::toString(std::move(e)));
    std::string verr;
    llvm::raw_string_ostream os(verr);
    if (llvm::verifyModule(*mod, &os))
      lower::fail(LT_STATUS_INTERNAL, "codegen produced invalid IR: " + os.str());
    // The persistent cache's key: this build of the plugin, LLVM, the target, the module.
    std::string key;
    if (cache_.enabled())
      llvm::raw_string_ostream(key) << build_id_ << "\nLLVM " LLVM_VERSION_STRING "\n"
                                    << cpu_ << "\n"
                                    << features_ << (mvec_ ? "\nmvec\n" : "\n") << *mod;
    std::optional<std::vector<char>> cached = cache_.load(key);
    std::unique_ptr<llvm::MemoryBuffer> obj =
        cached ? llvm::MemoryBuffer::getMemBufferCopy({cached->data(), cached->size()}) : nullptr;
    if (!obj) {
      optimize(*mod);
      // LT_CPU_JIT_DUMP=<dir>: each optimised module (check vectorisation: <16 x float>).
      if (const char* dump = std::getenv("LT_CPU_JIT_DUMP"); dump && *dump) {
        std::error_code ec;
        llvm::raw_fd_ostream(std::string(dump) + "/lt_cpu_jit_" + std::to_string(id) + ".ll", ec)
            << *mod;
      }
      obj = take(llvm::orc::SimpleCompiler(*tm_)(*mod), "codegen: ");
      cache_.store(key, {obj->getBufferStart(), obj->getBufferSize()});
    }
    // A JITDylib per module (kernel names repeat): its code goes with the program (unless the
    // JIT went first).
    llvm::orc::JITDylib* jd =
        &jit_->getExecutionSession().createBareJITDylib("lt_m" + std::to_string(id));
    jd->addToLinkOrder(jit_->getMainJITDylib());
    *code = std::shared_ptr<void>(nullptr, [jd, alive = std::weak_ptr<int>(alive_)](void*) {
      if (alive.lock()) llvm::consumeError(jd->getExecutionSession().removeJITDylib(*jd));
    });
    if (auto e = jit_->addObjectFile(*jd, std::move(obj)))
      lower::fail(LT_STATUS_INTERNAL, "link: " + llvm::toString(std::move(e)));
    std::vector<KernelFn> fns;
    for (const std::string& n : names)
      fns.push_back(take(jit_->lookup(*jd, n), "link: ").toPtr<KernelFn>());
    return fns;
  }

  const std::string& host_description() const override { return description_; }

 private:
  // Whether the feature list enables `name` ("avx512f"; whole names, so fma is not fma4).
  bool has(const char* name) const {
    return ("," + features_ + ",").find(std::string(",+") + name + ",") != std::string::npos;
  }

  void optimize(llvm::Module& m) {
    m.setDataLayout(jit_->getDataLayout());
    m.setTargetTriple(tm_->getTargetTriple().str());
    for (llvm::Function& f : m) {
      if (f.isDeclaration()) continue;
      f.addFnAttr("target-cpu", cpu_);
      f.addFnAttr("target-features", features_);
      // Skylake-X/Cascade Lake tuning prefers 256-bit vectors; our kernels are long FMA
      // chains (polynomial exp/tanh), where 512-bit halves the instruction count: measured
      // 1.5x less CPU per element on the sigmoid·tanh chain.
      if (wide_) f.addFnAttr("prefer-vector-width", "512");
    }
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(tm_.get());  // analyses only: the pipeline is ours
    llvm::Triple triple(tm_->getTargetTriple());
    llvm::TargetLibraryInfoImpl tlii(triple);
    if (mvec_)
      tlii.addVectorizableFunctionsFromVecLib(llvm::TargetLibraryInfoImpl::LIBMVEC_X86, triple);
    // Registered before the defaults so the vector-library mappings win.
    fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    {
      // Our kernels are generated clean (one loop nest, allocas only for reduction
      // accumulators, calls only to vecmath), so the O3 function passes that matter run
      // alone, in a fraction of the time: promote, clean up, hoist invariants, vectorise.
      // (buildPerModuleDefaultPipeline(O3) itself left the tail-folded chain loop scalar:
      // measured 10x slower kernels, no faster compiles.)
      llvm::FunctionPassManager fpm;
      fpm.addPass(llvm::SROAPass(llvm::SROAOptions::ModifyCFG));
      fpm.addPass(llvm::EarlyCSEPass());
      fpm.addPass(llvm::InstCombinePass());
      fpm.addPass(llvm::SimplifyCFGPass());
      fpm.addPass(llvm::LoopSimplifyPass());
      fpm.addPass(llvm::LCSSAPass());
      fpm.addPass(llvm::createFunctionToLoopPassAdaptor(llvm::LICMPass(llvm::LICMOptions()),
                                                        /*UseMemorySSA=*/true));
      fpm.addPass(
          llvm::LoopVectorizePass(llvm::LoopVectorizeOptions(/*InterleaveOnlyWhenForced=*/false,
                                                             /*VectorizeOnlyWhenForced=*/false)));
      llvm::ModulePassManager mpm;
      mpm.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(fpm)));
      mpm.run(m, mam);
    }
    // The vectoriser has picked the vecmath variants it needs; give them bodies, inline
    // them, clean up, and drop the bodies.
    define_math(m, math_);
    {
      llvm::FunctionPassManager fpm;
      fpm.addPass(llvm::EarlyCSEPass());
      fpm.addPass(llvm::InstCombinePass());
      fpm.addPass(llvm::SimplifyCFGPass());
      llvm::ModulePassManager mpm;
      mpm.addPass(llvm::AlwaysInlinerPass(/*InsertLifetimeIntrinsics=*/false));
      mpm.addPass(llvm::GlobalDCEPass());
      mpm.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(fpm)));
      mpm.run(m, mam);
    }
  }

  lower::DiskCache& cache_;
  std::string build_id_ = kit::shared_object_id(reinterpret_cast<const void*>(&create_compiler));
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::unique_ptr<llvm::TargetMachine> tm_;
  std::string cpu_, features_;
  bool mvec_;
  bool wide_;  // AVX-512 with 512-bit registers available
  MathTarget math_;
  std::string description_;
  std::mutex mu_;
  uint64_t next_id_ = 0;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // expires before jit_ is destroyed
};

}  // namespace

// vector_bits: 0 for the host's widest vectors, or 128/256/512 (256 drops AVX-512, 128 AVX).
std::unique_ptr<Compiler> create_compiler(unsigned vector_bits, lower::DiskCache& cache) {
  static std::once_flag init;
  std::call_once(init, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  auto check = [](auto x) { return take(std::move(x), "cannot create the LLVM JIT: "); };
  auto jtmb = check(llvm::orc::JITTargetMachineBuilder::detectHost());
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  if (vector_bits) jtmb.getFeatures() = narrow(jtmb.getFeatures(), vector_bits);
  auto tm = check(jtmb.createTargetMachine());
  auto jit = check(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(jtmb).create());
  // Vector math from glibc's libmvec (sin/cos/exp/log f64, sin/cos f32); optional.
  std::string err;
  bool mvec = !llvm::sys::DynamicLibrary::LoadLibraryPermanently("libmvec.so.1", &err);
  jit->getMainJITDylib().addGenerator(
      check(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
          jit->getDataLayout().getGlobalPrefix())));
  return std::make_unique<OrcCompiler>(std::move(jit), std::move(tm), jtmb.getCPU(),
                                       jtmb.getFeatures().getString(), mvec, cache);
}

}  // namespace lt::cpujit
