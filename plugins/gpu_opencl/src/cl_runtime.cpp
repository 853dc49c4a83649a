// OpenCL runtime layer: platform/device choice, CL error names, and the program cache whose
// binaries persist in the shared compile cache (lower::DiskCache) keyed by platform, device,
// driver, version and the whole source.
#include "cl_runtime.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

namespace lt::ocl {
namespace {

// The names of the CL error codes -1..-19 and -30..-68 (cl.h; the values are fixed by the spec).
// clang-format off
const char* const kErrors[] = {
    "DEVICE_NOT_FOUND", "DEVICE_NOT_AVAILABLE", "COMPILER_NOT_AVAILABLE",
    "MEM_OBJECT_ALLOCATION_FAILURE", "OUT_OF_RESOURCES", "OUT_OF_HOST_MEMORY",
    "PROFILING_INFO_NOT_AVAILABLE", "MEM_COPY_OVERLAP", "IMAGE_FORMAT_MISMATCH",
    "IMAGE_FORMAT_NOT_SUPPORTED", "BUILD_PROGRAM_FAILURE", "MAP_FAILURE",
    "MISALIGNED_SUB_BUFFER_OFFSET", "EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST",
    "COMPILE_PROGRAM_FAILURE", "LINKER_NOT_AVAILABLE", "LINK_PROGRAM_FAILURE",
    "DEVICE_PARTITION_FAILED", "KERNEL_ARG_INFO_NOT_AVAILABLE"};
const char* const kInvalid[] = {
    "VALUE", "DEVICE_TYPE", "PLATFORM", "DEVICE", "CONTEXT", "QUEUE_PROPERTIES", "COMMAND_QUEUE",
    "HOST_PTR", "MEM_OBJECT", "IMAGE_FORMAT_DESCRIPTOR", "IMAGE_SIZE", "SAMPLER", "BINARY",
    "BUILD_OPTIONS", "PROGRAM", "PROGRAM_EXECUTABLE", "KERNEL_NAME", "KERNEL_DEFINITION", "KERNEL",
    "ARG_INDEX", "ARG_VALUE", "ARG_SIZE", "KERNEL_ARGS", "WORK_DIMENSION", "WORK_GROUP_SIZE",
    "WORK_ITEM_SIZE", "GLOBAL_OFFSET", "EVENT_WAIT_LIST", "EVENT", "OPERATION", "GL_OBJECT",
    "BUFFER_SIZE", "MIP_LEVEL", "GLOBAL_WORK_SIZE", "PROPERTY", "IMAGE_DESCRIPTOR",
    "COMPILER_OPTIONS", "LINKER_OPTIONS", "DEVICE_PARTITION_COUNT"};
// clang-format on
static_assert(CL_KERNEL_ARG_INFO_NOT_AVAILABLE == -19 && CL_INVALID_VALUE == -30 &&
              CL_INVALID_DEVICE_PARTITION_COUNT == -68);

std::string cl_error_name(cl_int err) {
  if (err <= -1 && err >= -19) return std::string("CL_") + kErrors[-err - 1];
  if (err <= -30 && err >= -68) return std::string("CL_INVALID_") + kInvalid[-err - 30];
  return err == -1001 ? "CL_PLATFORM_NOT_FOUND_KHR" : "CL error (unknown code)";
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

using lower::fnv1a;
using lower::hex;

}  // namespace

void check(cl_int err, const std::string& what) {
  if (err == CL_SUCCESS) return;
  std::string msg = what + " failed: " + cl_error_name(err) + " (" + std::to_string(err) + ")";
  if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY)
    fail(LT_STATUS_OUT_OF_MEMORY, msg);
  if (err == CL_OUT_OF_RESOURCES || err == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    msg += " (the device ran out of resources or was lost)";
  fail(LT_STATUS_PLUGIN_ERROR, msg);
}

std::unique_ptr<Device> Device::create(kit::Options& options, const kit::Log& log) {
  const std::string want = options.take("platform").value_or("");
  const int64_t index = options.take_int("device", 0, 0, 1 << 30);
  const std::string type = options.take_choice("type", {"auto", "gpu", "cpu", "all"});
  std::unique_ptr<Device> dev(new Device(log));
  dev->disk_ = kit::take_disk_cache(options, log, "gpu_opencl");
  dev->inject_build_error_ = options.take_flag("inject_build_error", false);

  std::vector<cl::Platform> all, platforms;
  const cl_int err = cl::Platform::get(&all);
  if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (err == CL_SUCCESS && all.empty()))
    fail(LT_STATUS_NOT_FOUND,
         "no OpenCL platform found (install an OpenCL ICD such as pocl-opencl-icd or the GPU "
         "vendor's driver)");
  check(err, "clGetPlatformIDs");

  // Platform filter: an all-digit string is an index, anything else a name/vendor substring.
  if (want.empty()) {
    platforms = all;
  } else if (want.find_first_not_of("0123456789") == std::string::npos) {
    size_t i = std::stoul(want);
    if (i >= all.size())
      fail(LT_STATUS_NOT_FOUND, "option platform = " + want + " but only " +
                                    std::to_string(all.size()) + " OpenCL platform(s) exist");
    platforms.push_back(all[i]);
  } else {
    for (const cl::Platform& p : all)
      if (lower(p.getInfo<CL_PLATFORM_NAME>() + "\n" + p.getInfo<CL_PLATFORM_VENDOR>())
              .find(lower(want)) != std::string::npos)
        platforms.push_back(p);
    if (platforms.empty())
      fail(LT_STATUS_NOT_FOUND, "no OpenCL platform name contains '" + want + "'");
  }
  auto list = [&](cl_device_type type) {
    std::vector<cl::Device> out, ds;
    for (const cl::Platform& p : platforms)
      if (p.getDevices(type, &ds) == CL_SUCCESS) out.insert(out.end(), ds.begin(), ds.end());
    return out;
  };
  std::vector<cl::Device> devices = list(type == "cpu"   ? CL_DEVICE_TYPE_CPU
                                         : type == "all" ? CL_DEVICE_TYPE_ALL
                                                         : CL_DEVICE_TYPE_GPU);
  if (devices.empty() && type == "auto") devices = list(CL_DEVICE_TYPE_ALL);
  if (devices.empty())
    fail(LT_STATUS_NOT_FOUND, "no OpenCL device of type '" + type + "' on the chosen platform(s)");
  if (static_cast<size_t>(index) >= devices.size())
    fail(LT_STATUS_NOT_FOUND, "option device = " + std::to_string(index) + " but only " +
                                  std::to_string(devices.size()) + " matching device(s) exist");

  const cl::Device& id = dev->device_ = devices[index];
  cl_int e = CL_SUCCESS;
  dev->context_ = cl::Context(id, nullptr, nullptr, nullptr, &e);
  check(e, "clCreateContext");
  dev->queue_ = cl::CommandQueue(dev->context_, id, 0, &e);
  check(e, "clCreateCommandQueue");

  std::string pname = cl::Platform(id.getInfo<CL_DEVICE_PLATFORM>()).getInfo<CL_PLATFORM_NAME>();
  std::string dname = id.getInfo<CL_DEVICE_NAME>(), driver = id.getInfo<CL_DRIVER_VERSION>(),
              version = id.getInfo<CL_DEVICE_VERSION>();
  auto kind = id.getInfo<CL_DEVICE_TYPE>();
  kit::Device& info = dev->info;
  info.kind = (kind & CL_DEVICE_TYPE_GPU)   ? "gpu"
              : (kind & CL_DEVICE_TYPE_CPU) ? "cpu"
                                            : "accelerator";
  info.memory_bytes = id.getInfo<CL_DEVICE_GLOBAL_MEM_SIZE>();
  info.host_addressable = false;
  dev->max_work_group = id.getInfo<CL_DEVICE_MAX_WORK_GROUP_SIZE>();
  dev->native_float_width = id.getInfo<CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT>();
  // In bits; the arena's sub-buffers start at multiples of it (and of 64 bytes).
  dev->base_align = std::max<size_t>(64, id.getInfo<CL_DEVICE_MEM_BASE_ADDR_ALIGN>() / 8);
  dev->fp64 = id.getInfo<CL_DEVICE_EXTENSIONS>().find("cl_khr_fp64") != std::string::npos;
  // Short name: "pocl-cpu" style — the platform's first word + kind.
  std::string first = lower(pname.substr(0, pname.find(' ')));
  info.name = (first == "portable" ? "pocl" : first) + "-" + info.kind;
  info.description = "OpenCL platform '" + pname + "', device '" + dname + "' (" + version +
                     "), driver " + driver + ", " + std::to_string(info.memory_bytes >> 20) +
                     " MiB global memory" + (dev->fp64 ? ", fp64" : "");
  dev->cache_key_ = pname + "\n" + dname + "\n" + driver + "\n" + version;
  log(1, "gpu_opencl: using " + info.description);
  return dev;
}

void Device::stats(const kit::Stats& emit) const {
  std::lock_guard<std::mutex> lock(mutex_);
  emit("programs_built", static_cast<double>(built_));
  emit("program_cache_hits", static_cast<double>(memory_hits_ + disk_hits_));
  emit("program_disk_cache_hits", static_cast<double>(disk_hits_));
  kit::disk_cache_stats(disk_, emit);
  emit("compile_ms", compile_ms_);
}

cl::Program Device::program(const std::string& source_in) {
  std::string source = source_in;
  if (inject_build_error_) source += "\n#error lazytensor test hook inject_build_error\n";
  uint64_t hash = fnv1a(source.data(), source.size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = programs_.find(hash); it != programs_.end()) {
      ++memory_hits_;
      return it->second;
    }
  }
  const std::string key = cache_key_ + "\n" + source;  // the whole source: no collision loads
  auto t0 = std::chrono::steady_clock::now();
  std::optional<std::vector<char>> binary = disk_.load(key);
  cl::Program prog = binary ? load(*binary) : cl::Program();
  const bool from_disk = prog() != nullptr;
  if (!from_disk) {
    prog = build(source, hash);
    store(key, prog);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  compile_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ++(from_disk ? disk_hits_ : built_);
  return programs_.emplace(hash, prog).first->second;  // another thread's build if it went first
}

cl::Program Device::build(const std::string& source, uint64_t hash) {
  cl_int e = CL_SUCCESS;
  cl::Program prog(context_, source, false, &e);
  check(e, "clCreateProgramWithSource");
  e = prog.build({device_}, "-cl-std=CL1.2");
  if (e == CL_SUCCESS) return prog;
  const std::string build_log = prog.getBuildInfo<CL_PROGRAM_BUILD_LOG>(device_);
  log_(1, "gpu_opencl: generated source of program " + hex(hash) + " that failed to build:\n" +
              source);
  fail(LT_STATUS_PLUGIN_ERROR, std::string("clBuildProgram failed: ") + cl_error_name(e) +
                                   "; build log:\n" + build_log.c_str());
}

// A program from a cached binary, or an empty one when the driver rejects it (then rebuilt).
cl::Program Device::load(const std::vector<char>& binary) {
  std::vector<cl_int> status;
  cl_int e = CL_SUCCESS;
  const cl::Program::Binaries binaries{{binary.begin(), binary.end()}};
  cl::Program prog(context_, {device_}, binaries, &status, &e);
  if (e == CL_SUCCESS && status[0] == CL_SUCCESS && prog.build({device_}) == CL_SUCCESS)
    return prog;
  log_(2, "gpu_opencl: a cached program binary was rejected by the driver; rebuilding");
  return {};
}

void Device::store(const std::string& key, const cl::Program& prog) {
  cl::Program::Binaries bins;
  if (!disk_.enabled() || prog.getInfo(CL_PROGRAM_BINARIES, &bins) != CL_SUCCESS || bins.empty())
    return;
  const std::vector<char> bin(bins[0].begin(), bins[0].end());
  if (!bin.empty()) disk_.store(key, bin);
}

}  // namespace lt::ocl
