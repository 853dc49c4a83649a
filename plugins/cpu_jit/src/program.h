// program.h — the LLVM-free side of cpu_jit: a fused kernel to generate, the JIT compiler
// (jit_session.cpp, codegen.cpp), and a compiled region (Program): generated kernels, a
// host-kernel step (LazyTensor::host_kernels) for every other node, one arena for temporaries.
#ifndef LT_CPU_JIT_PROGRAM_H
#define LT_CPU_JIT_PROGRAM_H

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lazytensor/host/kernels.hpp"
#include "lazytensor/lower/graph.hpp"

namespace lt::cpujit {

// A generated kernel: outer loop indices [begin, end); buffers[k]: slot k's base pointer.
using KernelFn = void (*)(void* const* buffers, int64_t begin, int64_t end);

// One fused group to generate. The graph is borrowed for the duration of compile().
struct KernelDesc {
  const lt_graph* graph = nullptr;
  std::vector<int32_t> nodes;        // nodes computed in the kernel, ascending
  std::vector<int32_t> outputs;      // nodes it stores (subset of nodes)
  std::vector<int64_t> domain;       // loop domain
  std::vector<int64_t> reduce_axes;  // reduced axes of domain (empty: elementwise)
  // Filled by codegen:
  std::vector<int32_t> slots{};  // node held by buffer slot k (external inputs, outputs)
  int64_t parallel_extent = 0;   // number of outer indices (0: nothing to run)
  int64_t work_per_index = 1;    // elements touched per outer index (for chunking)
};

// The JIT compiler. Owns the LLVM ORC session; hides every LLVM type.
class Compiler {
 public:
  virtual ~Compiler() = default;
  // Generates, optimises (short pipeline, loop vectorisation with tail folding) and links
  // one module holding a kernel per desc; throws lower::Error (INTERNAL) on failure.
  virtual std::vector<KernelFn> compile(std::vector<KernelDesc>& kernels) = 0;
  virtual const std::string& host_description() const = 0;
};

// The compiler for the host CPU, its vectors narrowed to vector_bits (128/256/512; 0: the
// host's widest); throws lower::Error when LLVM cannot target the host.
std::unique_ptr<Compiler> create_compiler(unsigned vector_bits);

// Whether the JIT can lower node `node` of a validated graph.
bool codegen_supports(const lt_graph& graph, size_t node);

// Whether cpu_jit runs node `node` of a validated graph: codegen or a host kernel does, unless
// it is softmax / log_softmax (the core decomposes those: their decomposition fuses better).
bool program_supports(const lt_graph& graph, size_t node);

class Program {
 public:
  // Plans and compiles a validated region (decomposing what supports() declines, as the
  // core does); throws lower::Error (UNSUPPORTED naming a node it cannot run).
  Program(const lt_graph& graph, Compiler& compiler);
  // Host pointers of the region's input/output buffers, in graph order.
  void run(void* const* inputs, void* const* outputs) const;

  size_t num_kernels() const { return kernels_.size(); }
  double compile_ms() const { return compile_ms_; }

 private:
  enum class Kind : uint8_t { kKernel, kHost, kConv, kReshape };
  struct Step {
    Kind kind;
    int32_t node = -1;            // what a host / conv / reshape step computes
    size_t index = 0;             // kKernel: kernels_ and fns_; kConv: convs_
    host::KernelFn fn = nullptr;  // kHost, called with params_[params, params + num_params)
    size_t params = 0, num_params = 0;
    int64_t scratch = -1;  // kConv: arena byte offset of the im2col matrix, -1 if none
  };
  void add_host_step(int32_t v);

  lower::OwnedGraph owned_;
  const lt_graph* g_ = nullptr;
  std::vector<Step> steps_;
  std::vector<KernelDesc> kernels_;
  std::vector<KernelFn> fns_;
  std::vector<int64_t> params_;
  std::vector<host::ConvGeom> convs_;
  std::vector<int64_t> numel_;        // per node
  std::vector<int64_t> temp_offset_;  // per node: byte offset in the arena, -1 if none
  size_t arena_bytes_ = 0;
  double compile_ms_ = 0;
  mutable std::mutex arena_mu_;  // guards arena_ (reused by one run at a time)
  mutable std::unique_ptr<char[], void (*)(void*)> arena_{nullptr, nullptr};
};

}  // namespace lt::cpujit

#endif  // LT_CPU_JIT_PROGRAM_H
