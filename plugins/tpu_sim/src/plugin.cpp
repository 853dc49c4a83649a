// plugin.cpp — tpu_sim on the plugin kit: the simulated chip's device (HBM-accounted host
// buffers), supports/compile through compiler.cpp, execution through executor.cpp, and the
// cost model's totals as stats.
#include <atomic>
#include <cstdio>
#include <mutex>

#include "lazytensor/plugin_kit.hpp"
#include "program.h"

namespace lt::tpu {
namespace {

struct Totals {
  uint64_t executions = 0;
  double simulated_ns = 0, flops = 0, hbm_bytes = 0, mxu_ns = 0, vector_ns = 0, dma_ns = 0;
};

class TpuExecutable : public kit::Executable {
 public:
  TpuExecutable(Program p, std::mutex& mu, Totals& totals)
      : program_(std::move(p)), mu_(mu), totals_(totals) {}

  void run(std::span<kit::Buffer* const> in, std::span<kit::Buffer* const> out) override {
    execute_program(program_, kit::data_of(in).data(), kit::data_of(out).data());
    ++executions_;
    const Cost& c = program_.cost;
    std::lock_guard<std::mutex> lock(mu_);
    totals_.executions++;
    totals_.simulated_ns += c.simulated_ns;
    totals_.flops += c.flops;
    totals_.hbm_bytes += c.hbm_bytes;
    totals_.mxu_ns += c.mxu_ns;
    totals_.vector_ns += c.vector_ns;
    totals_.dma_ns += c.dma_ns;
  }

  void stats(const kit::Stats& emit) const override {
    const Cost& c = program_.cost;
    emit("simulated_ns", c.simulated_ns);
    emit("mxu_utilization", c.mxu_utilization);
    emit("hbm_bytes", c.hbm_bytes);
    emit("flops", c.flops);
    emit("padded_flops", c.padded_flops);
    emit("mxu_ns", c.mxu_ns);
    emit("vector_ns", c.vector_ns);
    emit("dma_ns", c.dma_ns);
    emit("instructions", double(program_.instrs.size()));
    emit("hbm_needed_bytes", double(program_.hbm_needed));
    emit("executions", double(executions_.load()));
  }

 private:
  Program program_;
  std::atomic<uint64_t> executions_{0};
  std::mutex& mu_;
  Totals& totals_;
};

class TpuSim : public kit::Backend {
 public:
  explicit TpuSim(kit::Context& ctx)
      : Backend(ctx), machine_(parse_machine_options(ctx.options)), log_(ctx.log) {
    log_(1, "tpu_sim: " + machine_.describe());
  }

  std::vector<kit::Device> devices() const override {
    return {{"tpu_sim", "tpu", machine_.describe(), machine_.hbm_capacity_bytes(), true}};
  }

  // Buffers are host memory standing in for HBM, counted against its capacity.
  kit::Buffer* alloc(size_t device, size_t nbytes) override {
    const uint64_t cap = machine_.hbm_capacity_bytes();
    uint64_t used = hbm_in_use_.load();
    do {
      if (nbytes > cap || used > cap - nbytes)
        kit::fail(LT_STATUS_OUT_OF_MEMORY, "cannot allocate " + format_bytes(double(nbytes)) +
                                               " of HBM: " + format_bytes(double(used)) + " of " +
                                               format_bytes(double(cap)) + " in use");
    } while (!hbm_in_use_.compare_exchange_weak(used, used + nbytes));
    kit::Buffer* b;
    try {
      b = Backend::alloc(device, nbytes);
    } catch (...) {
      hbm_in_use_ -= nbytes;
      throw;
    }
    uint64_t now = used + nbytes, peak = hbm_peak_.load();
    while (now > peak && !hbm_peak_.compare_exchange_weak(peak, now)) {
    }
    return b;
  }
  void free(kit::Buffer* b) noexcept override {
    hbm_in_use_ -= b->nbytes;
    Backend::free(b);
  }

  bool supports(const lt_graph& g, size_t node, size_t) override { return supports_node(g, node); }

  std::unique_ptr<kit::Executable> compile(const lt_graph& g, size_t) override {
    Program p = compile_program(g, machine_);
    compiles_++;
    char line[160];
    std::snprintf(line, sizeof line,
                  "tpu_sim: compiled %zu nodes to %zu instructions, simulated %.3f us",
                  p.nodes.size(), p.instrs.size(), p.cost.simulated_ns / 1e3);
    log_(1, line);
    if (p.nodes.size() <= 4096) log_(0, p.listing());  // a huge listing is never built for a log
    return std::make_unique<TpuExecutable>(std::move(p), mu_, totals_);
  }

  void stats(const kit::Stats& emit) const override {
    Totals t;
    {
      std::lock_guard<std::mutex> lock(mu_);
      t = totals_;
    }
    const double peak = machine_.peak_flops();
    emit("simulated_ns", t.simulated_ns);
    emit("mxu_utilization", t.simulated_ns > 0 ? t.flops / (t.simulated_ns * 1e-9 * peak) : 0.0);
    emit("hbm_bytes", t.hbm_bytes);
    emit("flops", t.flops);
    emit("mxu_ns", t.mxu_ns);
    emit("vector_ns", t.vector_ns);
    emit("dma_ns", t.dma_ns);
    emit("executions", double(t.executions));
    emit("compiles", double(compiles_.load()));
    emit("hbm_in_use_bytes", double(hbm_in_use_.load()));
    emit("hbm_peak_bytes", double(hbm_peak_.load()));
    emit("hbm_capacity_bytes", double(machine_.hbm_capacity_bytes()));
    emit("peak_tflops", peak / 1e12);
  }

 private:
  MachineConfig machine_;
  kit::Log log_;
  std::atomic<uint64_t> hbm_in_use_{0}, hbm_peak_{0}, compiles_{0};
  mutable std::mutex mu_;  // guards totals_
  Totals totals_;
};

}  // namespace
}  // namespace lt::tpu

LT_KIT_PLUGIN(lt::tpu::TpuSim, "tpu_sim", "0.2.0")
