// codegen.h — internal: emits LLVM IR for fused kernels (codegen.cpp); used only by
// jit_session.cpp. LLVM headers stay in these internal headers and their three .cpp files.
#ifndef LT_CPU_JIT_CODEGEN_H
#define LT_CPU_JIT_CODEGEN_H

#include <string>
#include <vector>

#include <llvm/IR/Module.h>
#include <llvm/Support/Error.h>

#include "kernel.h"
#include "vecmath.h"

namespace lt::cpujit {

// Emits `void names[k](ptr buffers, i64 begin, i64 end)` for every kernel into `module`
// and fills each desc's slots / parallel_extent / work_per_index.
llvm::Error emit_kernels(llvm::Module& module, std::vector<KernelDesc>& kernels,
                         const std::vector<std::string>& names, const MathTarget& math);

}  // namespace lt::cpujit

#endif  // LT_CPU_JIT_CODEGEN_H
