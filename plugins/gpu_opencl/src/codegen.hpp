// OpenCL C code generation for the gpu_opencl plugin: turns a graph region plus the
// lt::fusion plan into one program source with one kernel per fusion group, and the launch
// description the executable needs. Knows nothing about CL handles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lazytensor/lt_plugin.h"

namespace lt::ocl {

struct DeviceCaps {
  bool fp64 = false;
  bool cpu = false;        // tune work-group sizes for a CPU device (PoCL)
  size_t max_wg = 256;     // CL_DEVICE_MAX_WORK_GROUP_SIZE
  unsigned vec_width = 8;  // CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT (CPU kernels use it)
};

struct KernelLaunch {
  std::string name;
  unsigned dims = 1;
  size_t global[3] = {1, 1, 1};
  size_t local[3] = {0, 0, 0};  // local[0] == 0: let the runtime choose
  std::vector<int32_t> args;    // node index bound to each buffer parameter, in order
};

struct GeneratedProgram {
  std::string source;
  std::vector<KernelLaunch> kernels;  // in execution order
  std::vector<int32_t> stored;        // nodes that need a device buffer (inputs included)
  size_t groups = 0;                  // fusion groups planned
  size_t split_groups = 0;            // groups lowered node by node (unfusable shape mix)
};

// Can this backend run node `node` of `graph`? (op known, dtypes supported.)
bool node_supported(const lt_graph& graph, size_t node, const DeviceCaps& caps);

// Generates the program for a region. Throws lt::ocl::Failure on a graph it cannot lower.
GeneratedProgram generate(const lt_graph& graph, const DeviceCaps& caps);

}  // namespace lt::ocl
