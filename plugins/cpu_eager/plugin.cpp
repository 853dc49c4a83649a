// plugin.cpp — cpu_eager, the reference backend and the fallback for every other one: the
// shared host kernels (LazyTensor::host_kernels) behind the plugin kit. It runs every node the
// host kernels run; option composites=decompose declines composite ops so that the core's
// decompositions run instead (how the test suite checks them against the references).
#include <cblas.h>
#include <tbb/info.h>
#include <unistd.h>

#include <string>

#include "executable.h"

namespace {

class CpuEager : public lt::kit::Backend {
 public:
  explicit CpuEager(lt::kit::Context& ctx)
      : Backend(ctx),
        native_composites_(ctx.options.take_choice("composites", {"native", "decompose"}) ==
                           "native") {
    const char* core = openblas_get_corename();
    device_.description = "host CPU, " + std::to_string(tbb::info::default_concurrency()) +
                          " TBB threads; OpenBLAS core " + (core ? core : "?") + ", " +
                          std::to_string(openblas_get_num_threads()) + " threads";
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    device_.memory_bytes = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
  }

  std::vector<lt::kit::Device> devices() const override { return {device_}; }

  bool supports(const lt_graph& g, size_t node, size_t) override {
    if (!native_composites_) {
      const lt::lower::OpInfo* op = lt::lower::find_op(g.nodes[node].op);
      if (op && op->composite) return false;
    }
    std::vector<int64_t> params;
    return lt::host::prepare(g, node, &params) != nullptr;
  }

  std::unique_ptr<lt::kit::Executable> compile(const lt_graph& g, size_t) override {
    auto steps = [](const lt_graph& at) { return std::make_unique<lt::eager::Executable>(at); };
    // Dynamic shapes: host steps prepared per size (microseconds), one executable for all.
    if (!lt::lower::dynamic_of(g).empty()) return std::make_unique<lt::kit::PerValue>(g, steps);
    return steps(g);
  }

 private:
  bool native_composites_;
  lt::kit::Device device_;
};

}  // namespace

LT_KIT_PLUGIN(CpuEager, "cpu_eager", "0.2.0")
