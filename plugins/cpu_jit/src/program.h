// program.h — the LLVM-free side of cpu_jit: a fused kernel to generate, the JIT compiler
// (jit_session.cpp, codegen.cpp), and a compiled region (Program): generated kernels, a
// host-kernel step (LazyTensor::host_kernels) for every other node, one arena for temporaries.
#ifndef LT_CPU_JIT_PROGRAM_H
#define LT_CPU_JIT_PROGRAM_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lazytensor/host/steps.hpp"
#include "lazytensor/lower/disk_cache.hpp"
#include "lazytensor/lower/dynamic.hpp"
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
  // one module holding a kernel per desc; throws lower::Error (INTERNAL) on failure. The
  // machine code is freed when the last copy of *code is released.
  virtual std::vector<KernelFn> compile(std::vector<KernelDesc>& kernels,
                                        std::shared_ptr<void>* code) = 0;
  // The unoptimised IR of those kernels, as text (fills the descs as compile does).
  virtual std::string ir(std::vector<KernelDesc>& kernels) = 0;
  virtual const std::string& host_description() const = 0;
};

// The compiler for the host CPU, its vectors narrowed to vector_bits (128/256/512; 0: the
// host's widest), object code through `cache`; throws lower::Error when LLVM cannot target the
// host.
std::unique_ptr<Compiler> create_compiler(unsigned vector_bits, lower::DiskCache& cache);

// Whether cpu_jit runs node `node` of a validated graph: codegen or a host kernel does, unless
// it is softmax / log_softmax (the core decomposes those: their decomposition fuses with their
// producers). It takes whole the softmax of a fused attention (lazytensor/host/attention.hpp)
// and an f32 softmax of a value no generated kernel computes (a host step runs it).
bool program_supports(const lt_graph& graph, size_t node);

class Program {
 public:
  // Plans and compiles a validated region (decomposing what supports() declines, as the
  // core does); throws lower::Error (UNSUPPORTED naming a node it cannot run).
  Program(const lt_graph& graph, Compiler& compiler);
  // A dynamic program at the values of `at` (an instance of its graph): its kernels, host steps
  // prepared for those sizes.
  Program(const lt_graph& at, std::shared_ptr<const Program> dynamic);
  // Compiled from a dynamic graph into kernels whose code no size changes (only their outer
  // extents): one Program for every value. Else static, at the graph's own values.
  bool dynamic() const { return dynamic_; }

  size_t num_kernels() const { return kernels_.size(); }
  // What runs: its kernels and host steps (kit::StepsExecutable runs it).
  const host::StepProgram& steps() const { return *steps_; }
  double compile_ms() const { return compile_ms_; }

 private:
  lower::OwnedGraph owned_;
  const lt_graph* g_ = nullptr;
  void add_steps();  // steps_ from order_, kernels_ and attention_
  // The steps: a node the host kernels run, ~kernel index, or num_nodes + attention index.
  std::vector<int64_t> order_;
  std::vector<KernelDesc> kernels_;
  std::vector<host::AttentionMatch> attention_;
  std::vector<lower::DimForm> extents_;  // dynamic: kernel k's parallel extent
  bool dynamic_ = false;
  std::shared_ptr<const Program> base_;  // an instance: the dynamic program it runs
  std::vector<KernelFn> fns_;
  std::shared_ptr<void> code_;  // keeps fns_'s machine code alive
  std::unique_ptr<host::StepProgram> steps_;
  double compile_ms_ = 0;
};

}  // namespace lt::cpujit

#endif  // LT_CPU_JIT_PROGRAM_H
