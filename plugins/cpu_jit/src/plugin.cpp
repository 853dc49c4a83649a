// plugin.cpp — cpu_jit on the plugin kit: options vector_bits and program_cache, supports, and
// compile with an LRU cache of Programs by structural hash (an identical region compiles once,
// even in different graphs; an evicted Program's code goes with its last executable).
#include <list>
#include <mutex>
#include <unordered_map>

#include "lazytensor/plugin_kit.hpp"
#include "program.h"

namespace {

using lt::cpujit::Program;

// A cached Program; hit: it came from the cache (no compile time of its own).
struct Executable final : lt::kit::Executable {
  Executable(std::shared_ptr<const Program> p, bool hit) : program_(std::move(p)), hit_(hit) {}
  void run(std::span<lt::kit::Buffer* const> in, std::span<lt::kit::Buffer* const> out) override {
    std::vector<void*> ins(in.size()), outs(out.size());
    for (size_t k = 0; k < in.size(); ++k) ins[k] = in[k]->data;
    for (size_t k = 0; k < out.size(); ++k) outs[k] = out[k]->data;
    program_->run(ins.data(), outs.data());
  }
  void stats(const lt::kit::Stats& emit) const override {
    emit("kernels", static_cast<double>(program_->num_kernels()));
    emit("compile_ms", hit_ ? 0.0 : program_->compile_ms());
    emit("cache_hit", hit_ ? 1.0 : 0.0);
  }
  std::shared_ptr<const Program> program_;
  bool hit_;
};

class CpuJit final : public lt::kit::Backend {
 public:
  explicit CpuJit(lt::kit::Context& ctx)
      : Backend(ctx),
        capacity_(static_cast<size_t>(ctx.options.take_int("program_cache", 64, 0, 1 << 20))) {
    std::string bits = ctx.options.take_choice("vector_bits", {"auto", "128", "256", "512", "0"});
    compiler_ = lt::cpujit::create_compiler(bits == "auto" ? 0 : std::stoul(bits));
    device_.description = compiler_->host_description();
  }

  std::vector<lt::kit::Device> devices() const override { return {device_}; }

  bool supports(const lt_graph& g, size_t node, size_t) override {
    return lt::cpujit::program_supports(g, node);
  }

  std::unique_ptr<lt::kit::Executable> compile(const lt_graph& g, size_t) override {
    uint64_t key = lt::lower::structural_hash(g);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(key);
      if (it != cache_.end()) {
        ++cache_hits_;
        lru_.splice(lru_.begin(), lru_, it->second);
        return std::make_unique<Executable>(it->second->second, true);
      }
    }
    auto p = std::make_shared<const Program>(g, *compiler_);
    std::lock_guard<std::mutex> lock(mu_);
    kernels_ += static_cast<double>(p->num_kernels());
    compile_ms_ += p->compile_ms();
    ++compiles_;
    if (capacity_ && !cache_.count(key)) {
      cache_[key] = lru_.emplace(lru_.begin(), key, p);
      if (lru_.size() > capacity_) cache_.erase(lru_.back().first), lru_.pop_back();
    }
    return std::make_unique<Executable>(std::move(p), false);
  }

  void stats(const lt::kit::Stats& emit) const override {
    pool_.stats(emit);
    std::lock_guard<std::mutex> lock(mu_);
    emit("kernels", kernels_);
    emit("compile_ms", compile_ms_);
    emit("compiles", compiles_);
    emit("cache_hits", cache_hits_);
  }

 private:
  std::unique_ptr<lt::cpujit::Compiler> compiler_;
  lt::kit::Device device_;
  mutable std::mutex mu_;  // guards the cache and the counters
  size_t capacity_;        // Programs the cache keeps (option program_cache, default 64)
  std::list<std::pair<uint64_t, std::shared_ptr<const Program>>> lru_;  // most recent first
  std::unordered_map<uint64_t, decltype(lru_)::iterator> cache_;
  double kernels_ = 0, compiles_ = 0, cache_hits_ = 0, compile_ms_ = 0;
};

}  // namespace

LT_KIT_PLUGIN(CpuJit, "cpu_jit", "0.2.0")
