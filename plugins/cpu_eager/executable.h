// executable.h — cpu_eager's compiled form of a graph region: an owned, flattened copy of the
// borrowed lt_graph, one host kernel per live node and a memory plan for the intermediates.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "lazytensor/host/kernels.hpp"
#include "lazytensor/plugin_kit.hpp"

namespace lt::eager {

class Executable : public kit::Executable {
 public:
  // Prepares every live node of a validated graph (dead nodes are dropped) and plans
  // intermediate memory by liveness (best-fit reuse). Throws UNSUPPORTED naming a node the
  // host kernels do not run (supports() said no to it).
  explicit Executable(const lt_graph& graph);

  void run(std::span<kit::Buffer* const> inputs, std::span<kit::Buffer* const> outputs) override;
  void stats(const kit::Stats& emit) const override;

 private:
  enum class Loc : uint8_t { kNone, kInput, kOutput, kSlot };
  struct Node {
    host::KernelFn fn = nullptr;
    int64_t numel = 1;
    uint32_t operand_off = 0, num_operands = 0;
    uint32_t shape_off = 0, param_off = 0, param_len = 0;
    uint32_t loc_index = 0;
    lt_dtype dtype = LT_DTYPE_INVALID;
    uint8_t rank = 0;
    Loc loc = Loc::kNone;
  };
  // Per-execution scratch: intermediate slots plus pointer tables; pooled for reuse so a
  // steady-state run allocates nothing.
  struct Workspace {
    std::vector<void*> slots;
    std::vector<char*> ptrs;
    std::vector<host::TensorArg> args;
    ~Workspace();
  };

  host::TensorArg arg_of(uint32_t node, char* data) const;
  std::unique_ptr<Workspace> acquire();
  void release(std::unique_ptr<Workspace> ws);

  std::vector<Node> nodes_;
  std::vector<int32_t> operands_;
  std::vector<int64_t> dims_;
  std::vector<int64_t> params_;
  std::vector<uint32_t> schedule_;       // live compute nodes in execution order
  std::vector<uint32_t> input_nodes_;    // node of input k
  std::vector<uint32_t> output_nodes_;   // node of output k
  std::vector<uint32_t> output_copies_;  // outputs filled by copying after the run
  std::vector<size_t> slot_bytes_;
  std::mutex pool_mutex_;
  std::vector<std::unique_ptr<Workspace>> pool_;
  std::atomic<uint64_t> executions_{0};
  double compile_ms_ = 0;
};

}  // namespace lt::eager
