// plugin.cpp — cpu_jit on the plugin kit: options vector_bits, program_cache and the persistent
// cache's (cache_dir, disk_cache, disk_cache_mb), supports, and compile with an LRU cache of
// Programs by structural hash (an identical region compiles once, even in different graphs; an
// evicted Program's code goes with its last executable).
#include <mutex>

#include "lazytensor/plugin_kit.hpp"
#include "program.h"

namespace {

using lt::cpujit::Program;

// A cached Program; hit: it came from the cache (no compile time of its own). Donation where
// no generated kernel both reads the input and writes the output (its loads and stores are
// declared not to alias: StepProgram::can_donate).
struct Executable final : lt::kit::StepsExecutable<lt::host::StepProgram> {
  Executable(std::shared_ptr<const Program> p, bool hit) : program_(std::move(p)), hit_(hit) {}
  const lt::host::StepProgram& steps() const override { return program_->steps(); }
  void stats(const lt::kit::Stats& emit) const override {
    emit("kernels", static_cast<double>(program_->num_kernels()));
    emit("compile_ms", hit_ ? 0.0 : program_->compile_ms());
    emit("cache_hit", hit_ ? 1.0 : 0.0);
    emit("workspace_bytes", static_cast<double>(program_->steps().arena_bytes()));
  }
  std::shared_ptr<const Program> program_;
  bool hit_;
};

class CpuJit final : public lt::kit::Backend {
 public:
  explicit CpuJit(lt::kit::Context& ctx)
      : Backend(ctx),
        disk_(lt::kit::take_disk_cache(ctx.options, ctx.log, "cpu_jit")),
        programs_(static_cast<size_t>(ctx.options.take_int("program_cache", 64, 0, 1 << 20))) {
    std::string bits = ctx.options.take_choice("vector_bits", {"auto", "128", "256", "512", "0"});
    compiler_ = lt::cpujit::create_compiler(bits == "auto" ? 0 : std::stoul(bits), disk_);
    device_.description = compiler_->host_description();
  }

  std::vector<lt::kit::Device> devices() const override { return {device_}; }

  bool supports(const lt_graph& g, size_t node, size_t) override {
    return lt::cpujit::program_supports(g, node);
  }

  std::unique_ptr<lt::kit::Executable> compile(const lt_graph& g, size_t) override {
    const uint64_t key = lt::lower::structural_hash(g);
    std::shared_ptr<const Program> p = programs_.get(key).value_or(nullptr);
    const bool hit = p != nullptr;
    if (!hit) programs_.put(key, p = std::make_shared<const Program>(g, *compiler_));
    std::lock_guard<std::mutex> lock(mu_);
    if (hit) ++cache_hits_;
    if (!hit) kernels_ += double(p->num_kernels()), compile_ms_ += p->compile_ms(), ++compiles_;
    auto exe = std::make_unique<Executable>(p, hit);
    if (!p->dynamic()) return exe;
    auto instance = [p](const lt_graph& at) {  // its kernels; host steps prepared per size
      return std::make_unique<Executable>(std::make_shared<const Program>(at, p), true);
    };
    return std::make_unique<lt::kit::PerValue>(g, std::move(exe), instance, nullptr);
  }

  void stats(const lt::kit::Stats& emit) const override {
    pool_.stats(emit);
    std::lock_guard<std::mutex> lock(mu_);
    emit("kernels", kernels_);
    emit("compile_ms", compile_ms_);
    emit("compiles", compiles_);
    emit("cache_hits", cache_hits_);
    lt::kit::disk_cache_stats(disk_, emit);
  }

 private:
  lt::lower::DiskCache disk_;  // object code across processes (options cache_dir, disk_cache)
  std::unique_ptr<lt::cpujit::Compiler> compiler_;
  lt::kit::Device device_;
  mutable std::mutex mu_;                                                 // guards the counters
  lt::kit::LruCache<uint64_t, std::shared_ptr<const Program>> programs_;  // option program_cache
  double kernels_ = 0, compiles_ = 0, cache_hits_ = 0, compile_ms_ = 0;
};

}  // namespace

LT_KIT_PLUGIN(CpuJit, "cpu_jit", "0.2.0")
