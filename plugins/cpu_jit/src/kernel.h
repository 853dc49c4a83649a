// kernel.h — the LLVM-free boundary between the plugin (program.cpp, plugin.cpp) and the
// JIT (jit_session.cpp, codegen.cpp): what one fused kernel computes, and the compiler.
#ifndef LT_CPU_JIT_KERNEL_H
#define LT_CPU_JIT_KERNEL_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lazytensor/lt_plugin.h"

namespace lt::cpujit {

// Generated kernels run the outer loop's indices [begin, end); buffers[k] is the base
// pointer of slot k (KernelDesc::slots).
using KernelFn = void (*)(void* const* buffers, int64_t begin, int64_t end);

// One fused group to generate. The graph is borrowed for the duration of compile().
struct KernelDesc {
  const lt_graph* graph = nullptr;
  std::vector<int32_t> nodes;        // nodes computed in the kernel, ascending
  std::vector<int32_t> outputs;      // nodes it stores (subset of nodes)
  std::vector<int64_t> domain;       // loop domain
  std::vector<int64_t> reduce_axes;  // reduced axes of domain (empty: elementwise)
  // Filled by codegen:
  std::vector<int32_t> slots;   // node held by buffer slot k (external inputs, outputs)
  int64_t parallel_extent = 0;  // number of outer indices (0: nothing to run)
  int64_t work_per_index = 1;   // elements touched per outer index (for chunking)
};

// The JIT compiler. Owns the LLVM ORC session; hides every LLVM type.
class Compiler {
 public:
  virtual ~Compiler() = default;
  // Generates, optimises (short pipeline, loop vectorisation with tail folding) and links
  // one module holding a kernel per desc. On failure returns false and sets *error.
  virtual bool compile(std::vector<KernelDesc>& kernels, std::vector<KernelFn>* fns,
                       std::string* error) = 0;
  virtual const std::string& host_description() const = 0;
};

// Creates the compiler for the host CPU, its vectors narrowed to vector_bits (128/256/512;
// 0: the host's widest); nullptr + *error on failure.
std::unique_ptr<Compiler> create_compiler(unsigned vector_bits, std::string* error);

// Whether the JIT can lower `node` of `graph` (used by the plugin's `supports`).
bool codegen_supports(const lt_graph& graph, size_t node);

}  // namespace lt::cpujit

#endif  // LT_CPU_JIT_KERNEL_H
