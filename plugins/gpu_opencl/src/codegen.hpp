// OpenCL C code generation for the gpu_opencl plugin: turns a validated graph region plus the
// shared kernel planner's steps (lower::plan_kernels) into one program source with one kernel per
// fusion group, and the launch description the executable needs. Knows nothing about CL handles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lazytensor/lower/kernel_plan.hpp"
#include "lazytensor/lt_plugin.h"

namespace lt::ocl {

struct DeviceCaps {
  bool fp64 = false;
  bool cpu = false;        // tune work-group sizes and use vector kernels for a CPU device (PoCL)
  size_t max_wg = 256;     // CL_DEVICE_MAX_WORK_GROUP_SIZE
  unsigned vec_width = 8;  // CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT
  bool dynamic = false;    // a dynamic graph: kernel shapes (tiles, work-groups) chosen by no size
};

struct KernelLaunch {
  size_t kernel = 0;  // runs kernel k<kernel> of the program
  unsigned dims = 1;
  size_t global[3] = {1, 1, 1};
  size_t local[3] = {0, 0, 0};  // local[0] == 0: let the runtime choose
  std::vector<int32_t> args;    // node bound to each buffer parameter, in order
};

struct GeneratedProgram {
  std::string source;
  std::vector<KernelLaunch> kernels;  // launches, in execution order
  size_t distinct_kernels = 0;        // kernels in the source (launches share them)
  std::vector<int32_t> stored;        // nodes that need a device buffer (inputs included)
  size_t groups = 0;                  // fusion groups planned
  size_t split_groups = 0;            // groups lowered node by node (unfusable shape mix)
  lower::KernelPlan plan;             // the steps the launches run, splits included
};

// Whether node `node` (validated by the kit) runs here: a primitive this generator lowers, on
// dtypes the device has. Composite ops are left to the core's decompositions.
bool node_supported(const lt_graph& graph, size_t node, const DeviceCaps& caps);

// The program for a validated region of supported nodes.
GeneratedProgram generate(const lt_graph& graph, const DeviceCaps& caps);

}  // namespace lt::ocl
