// executable.h — cpu_eager's compiled form of a graph region (an owned, flattened copy of
// the borrowed lt_graph plus a memory plan) and the host buffers it runs on.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels.h"

// Host buffer: 64-byte aligned memory owned by the plugin context that allocated it.
struct lt_plugin_buffer {
  void* data;
  size_t nbytes;    // the size the core asked for
  size_t capacity;  // the allocation's size class
};

namespace lt::eager {

void* aligned_alloc64(size_t bytes);  // throws Error(OUT_OF_MEMORY); never returns NULL
void aligned_free(void* p);

class Executable {
 public:
  // Copies and validates `graph`, prepares every live node and plans intermediate memory.
  // Throws Error naming the node and op on any invalid input.
  static std::unique_ptr<Executable> compile(const lt_graph& graph);
  ~Executable();

  void execute(lt_plugin_buffer* const* inputs, size_t num_inputs, lt_plugin_buffer* const* outputs,
               size_t num_outputs);

  uint64_t kernels_per_run() const { return schedule_.size(); }
  uint64_t executions() const { return executions_.load(); }
  double compile_ms() const { return compile_ms_; }
  uint64_t workspace_bytes() const;
  size_t num_nodes() const { return nodes_.size(); }

 private:
  enum class Loc : uint8_t { kNone, kInput, kOutput, kSlot };
  struct Node {
    KernelFn fn = nullptr;
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
    std::vector<TensorArg> args;
    ~Workspace();
  };

  Executable() = default;
  TensorArg arg_of(uint32_t node, char* data) const;
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

// Validates a single node against the op registry (used by supports()).
// Returns normally if cpu_eager can run it; throws Error otherwise.
void check_node(const lt_graph& graph, size_t node);

}  // namespace lt::eager
