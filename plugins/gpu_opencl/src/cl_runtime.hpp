// OpenCL runtime layer of the gpu_opencl plugin: device selection, CL error text, and the
// program cache (in memory and on disk). plugin.cpp is the only other file that sees CL handles.
// Handles are Khronos' C++ bindings (CL/opencl.hpp, package opencl-clhpp-headers): they release
// what they own and read info queries as typed values; errors are returned codes (no
// CL_HPP_ENABLE_EXCEPTIONS), which check() turns into messages naming the call.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#define CL_HPP_TARGET_OPENCL_VERSION 120
#define CL_HPP_MINIMUM_OPENCL_VERSION 120
#include <CL/opencl.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "lazytensor/plugin_kit.hpp"

namespace lt::ocl {

using kit::fail;

// Throws lower::Error naming `what` and the CL error; allocation failures map to
// LT_STATUS_OUT_OF_MEMORY, the rest to LT_STATUS_PLUGIN_ERROR.
void check(cl_int err, const std::string& what);

// One OpenCL device with its context and in-order queue. Immutable after creation except
// for the program cache, which locks.
class Device {
 public:
  // The device the options of docs/backends/gpu_opencl.md ([plugins.gpu_opencl]) choose.
  static std::unique_ptr<Device> create(kit::Options& options, const kit::Log& log);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const cl::Context& context() const { return context_; }
  const cl::CommandQueue& queue() const { return queue_; }
  kit::Device info;  // name ("pocl-cpu"), kind, description, memory; never host-addressable
  size_t max_work_group = 1;
  unsigned native_float_width = 1;  // CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT (16 on AVX-512 PoCL)
  size_t base_align = 64;           // bytes: CL_DEVICE_MEM_BASE_ADDR_ALIGN, a sub-buffer's origin
  bool fp64 = false;

  // A built program for `source` (cached in memory by source hash, then on disk by device +
  // driver + source hash). A build failure carries the build log.
  cl::Program program(const std::string& source);
  void stats(const kit::Stats& emit) const;

 private:
  explicit Device(const kit::Log& log) : log_(log) {}
  cl::Program build(const std::string& source, uint64_t hash);
  cl::Program load(const std::vector<char>& binary);
  void store(const std::string& key, const cl::Program& program);

  kit::Log log_;
  cl::Device device_;
  cl::Context context_;
  cl::CommandQueue queue_;
  std::string cache_key_;  // platform, device, driver, version: what a binary depends on
  lower::DiskCache disk_;  // program binaries across processes (lazytensor/lower/disk_cache.hpp)
  bool inject_build_error_ = false;  // test hook: appends a syntax error to every program
  mutable std::mutex mutex_;         // guards programs_ and the counters
  std::map<uint64_t, cl::Program> programs_;
  uint64_t built_ = 0, memory_hits_ = 0, disk_hits_ = 0;
  double compile_ms_ = 0;
};

}  // namespace lt::ocl
