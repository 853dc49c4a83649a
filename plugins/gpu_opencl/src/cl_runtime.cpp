// OpenCL runtime layer: platform/device choice, CL error names, and the program cache whose
// binaries live on disk keyed by device name + driver version + source hash.
#include "cl_runtime.hpp"

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

namespace lt::ocl {

void fail(lt_status_code code, std::string message) {
  throw Failure{code, std::move(message)};
}

const char* cl_error_name(cl_int err) {
  switch (err) {
#define LT_CL_ERR(x) \
  case x:            \
    return #x;
    LT_CL_ERR(CL_SUCCESS)
    LT_CL_ERR(CL_DEVICE_NOT_FOUND)
    LT_CL_ERR(CL_DEVICE_NOT_AVAILABLE)
    LT_CL_ERR(CL_COMPILER_NOT_AVAILABLE)
    LT_CL_ERR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    LT_CL_ERR(CL_OUT_OF_RESOURCES)
    LT_CL_ERR(CL_OUT_OF_HOST_MEMORY)
    LT_CL_ERR(CL_PROFILING_INFO_NOT_AVAILABLE)
    LT_CL_ERR(CL_MEM_COPY_OVERLAP)
    LT_CL_ERR(CL_IMAGE_FORMAT_MISMATCH)
    LT_CL_ERR(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    LT_CL_ERR(CL_BUILD_PROGRAM_FAILURE)
    LT_CL_ERR(CL_MAP_FAILURE)
    LT_CL_ERR(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    LT_CL_ERR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    LT_CL_ERR(CL_COMPILE_PROGRAM_FAILURE)
    LT_CL_ERR(CL_LINKER_NOT_AVAILABLE)
    LT_CL_ERR(CL_LINK_PROGRAM_FAILURE)
    LT_CL_ERR(CL_DEVICE_PARTITION_FAILED)
    LT_CL_ERR(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    LT_CL_ERR(CL_INVALID_VALUE)
    LT_CL_ERR(CL_INVALID_DEVICE_TYPE)
    LT_CL_ERR(CL_INVALID_PLATFORM)
    LT_CL_ERR(CL_INVALID_DEVICE)
    LT_CL_ERR(CL_INVALID_CONTEXT)
    LT_CL_ERR(CL_INVALID_QUEUE_PROPERTIES)
    LT_CL_ERR(CL_INVALID_COMMAND_QUEUE)
    LT_CL_ERR(CL_INVALID_HOST_PTR)
    LT_CL_ERR(CL_INVALID_MEM_OBJECT)
    LT_CL_ERR(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    LT_CL_ERR(CL_INVALID_IMAGE_SIZE)
    LT_CL_ERR(CL_INVALID_SAMPLER)
    LT_CL_ERR(CL_INVALID_BINARY)
    LT_CL_ERR(CL_INVALID_BUILD_OPTIONS)
    LT_CL_ERR(CL_INVALID_PROGRAM)
    LT_CL_ERR(CL_INVALID_PROGRAM_EXECUTABLE)
    LT_CL_ERR(CL_INVALID_KERNEL_NAME)
    LT_CL_ERR(CL_INVALID_KERNEL_DEFINITION)
    LT_CL_ERR(CL_INVALID_KERNEL)
    LT_CL_ERR(CL_INVALID_ARG_INDEX)
    LT_CL_ERR(CL_INVALID_ARG_VALUE)
    LT_CL_ERR(CL_INVALID_ARG_SIZE)
    LT_CL_ERR(CL_INVALID_KERNEL_ARGS)
    LT_CL_ERR(CL_INVALID_WORK_DIMENSION)
    LT_CL_ERR(CL_INVALID_WORK_GROUP_SIZE)
    LT_CL_ERR(CL_INVALID_WORK_ITEM_SIZE)
    LT_CL_ERR(CL_INVALID_GLOBAL_OFFSET)
    LT_CL_ERR(CL_INVALID_EVENT_WAIT_LIST)
    LT_CL_ERR(CL_INVALID_EVENT)
    LT_CL_ERR(CL_INVALID_OPERATION)
    LT_CL_ERR(CL_INVALID_GL_OBJECT)
    LT_CL_ERR(CL_INVALID_BUFFER_SIZE)
    LT_CL_ERR(CL_INVALID_MIP_LEVEL)
    LT_CL_ERR(CL_INVALID_GLOBAL_WORK_SIZE)
    LT_CL_ERR(CL_INVALID_PROPERTY)
    LT_CL_ERR(CL_INVALID_IMAGE_DESCRIPTOR)
    LT_CL_ERR(CL_INVALID_COMPILER_OPTIONS)
    LT_CL_ERR(CL_INVALID_LINKER_OPTIONS)
    LT_CL_ERR(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef LT_CL_ERR
    case -1001:
      return "CL_PLATFORM_NOT_FOUND_KHR";
    default:
      return "CL error (unknown code)";
  }
}

void check(cl_int err, const char* what) {
  if (err == CL_SUCCESS) return;
  std::string msg = std::string("gpu_opencl: ") + what + " failed: " + cl_error_name(err) + " (" +
                    std::to_string(err) + ")";
  if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY)
    fail(LT_STATUS_OUT_OF_MEMORY, msg);
  if (err == CL_OUT_OF_RESOURCES || err == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    msg += " (the device ran out of resources or was lost)";
  fail(LT_STATUS_PLUGIN_ERROR, msg);
}

uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

namespace {

bool parse_bool(const std::string& v) {
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

std::string platform_str(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  if (clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  clGetPlatformInfo(p, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string device_str(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

template <typename T>
T device_val(cl_device_id d, cl_device_info what) {
  T v{};
  clGetDeviceInfo(d, what, sizeof(T), &v, nullptr);
  return v;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string default_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/lazytensor/opencl";
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/lazytensor/opencl";
  return {};
}

}  // namespace

Options parse_options(const lt_plugin_option* options, size_t count) {
  Options o;
  for (size_t i = 0; i < count; ++i) {
    if (!options[i].key || !options[i].value) continue;
    std::string k = options[i].key, v = options[i].value;
    if (k == "platform") {
      o.platform = v;
    } else if (k == "device") {
      char* end = nullptr;
      long d = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || d < 0)
        fail(LT_STATUS_INVALID_ARGUMENT,
             "gpu_opencl: option device = '" + v + "' is not a non-negative index");
      o.device = d;
    } else if (k == "type") {
      v = lower(v);
      if (v != "gpu" && v != "cpu" && v != "all")
        fail(LT_STATUS_INVALID_ARGUMENT,
             "gpu_opencl: option type = '" + v + "' must be gpu, cpu or all");
      o.type = v;
    } else if (k == "cache_dir") {
      o.cache_dir = v;
    } else if (k == "disk_cache") {
      o.disk_cache = parse_bool(lower(v));
    } else if (k == "inject_build_error") {
      o.inject_build_error = parse_bool(lower(v));
    }
    // Unknown keys are ignored so that configs written for newer versions still load.
  }
  return o;
}

Device* Device::create(const Options& options, const Logger& log) {
  cl_uint np = 0;
  cl_int err = clGetPlatformIDs(0, nullptr, &np);
  if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (err == CL_SUCCESS && np == 0))
    fail(LT_STATUS_NOT_FOUND,
         "gpu_opencl: no OpenCL platform found (install an OpenCL ICD such as "
         "pocl-opencl-icd or the GPU vendor's driver)");
  check(err, "clGetPlatformIDs");
  std::vector<cl_platform_id> platforms(np);
  check(clGetPlatformIDs(np, platforms.data(), nullptr), "clGetPlatformIDs");

  // Platform filter: an all-digit string is an index, anything else a name substring.
  std::vector<cl_platform_id> chosen_platforms;
  if (options.platform.empty()) {
    chosen_platforms = platforms;
  } else if (options.platform.find_first_not_of("0123456789") == std::string::npos) {
    size_t idx = std::stoul(options.platform);
    if (idx >= platforms.size())
      fail(LT_STATUS_NOT_FOUND, "gpu_opencl: option platform = " + options.platform + " but only " +
                                    std::to_string(platforms.size()) + " OpenCL platform(s) exist");
    chosen_platforms.push_back(platforms[idx]);
  } else {
    for (cl_platform_id p : platforms)
      if (lower(platform_str(p, CL_PLATFORM_NAME)).find(lower(options.platform)) !=
              std::string::npos ||
          lower(platform_str(p, CL_PLATFORM_VENDOR)).find(lower(options.platform)) !=
              std::string::npos)
        chosen_platforms.push_back(p);
    if (chosen_platforms.empty())
      fail(LT_STATUS_NOT_FOUND,
           "gpu_opencl: no OpenCL platform name contains '" + options.platform + "'");
  }

  auto list = [&](cl_device_type type) {
    std::vector<std::pair<cl_platform_id, cl_device_id>> out;
    for (cl_platform_id p : chosen_platforms) {
      cl_uint nd = 0;
      if (clGetDeviceIDs(p, type, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
      std::vector<cl_device_id> ds(nd);
      clGetDeviceIDs(p, type, nd, ds.data(), nullptr);
      for (cl_device_id d : ds) out.emplace_back(p, d);
    }
    return out;
  };
  std::vector<std::pair<cl_platform_id, cl_device_id>> devices;
  if (options.type == "gpu") {
    devices = list(CL_DEVICE_TYPE_GPU);
  } else if (options.type == "cpu") {
    devices = list(CL_DEVICE_TYPE_CPU);
  } else if (options.type == "all") {
    devices = list(CL_DEVICE_TYPE_ALL);
  } else {
    devices = list(CL_DEVICE_TYPE_GPU);
    if (devices.empty()) devices = list(CL_DEVICE_TYPE_ALL);
  }
  if (devices.empty())
    fail(LT_STATUS_NOT_FOUND, "gpu_opencl: no OpenCL device of type '" +
                                  (options.type.empty() ? std::string("any") : options.type) +
                                  "' on the chosen platform(s)");
  size_t di = options.device < 0 ? 0 : static_cast<size_t>(options.device);
  if (di >= devices.size())
    fail(LT_STATUS_NOT_FOUND, "gpu_opencl: option device = " + std::to_string(di) + " but only " +
                                  std::to_string(devices.size()) + " matching device(s) exist");

  auto* dev = new Device();
  std::unique_ptr<Device> guard(dev);
  dev->options_ = options;
  dev->log_ = log;
  dev->platform_ = devices[di].first;
  dev->device_ = devices[di].second;

  cl_int e = CL_SUCCESS;
  dev->context_ = clCreateContext(nullptr, 1, &dev->device_, nullptr, nullptr, &e);
  check(e, "clCreateContext");
  dev->queue_ = clCreateCommandQueue(dev->context_, dev->device_, 0, &e);
  check(e, "clCreateCommandQueue");

  std::string pname = platform_str(dev->platform_, CL_PLATFORM_NAME);
  std::string dname = device_str(dev->device_, CL_DEVICE_NAME);
  std::string driver = device_str(dev->device_, CL_DRIVER_VERSION);
  std::string dversion = device_str(dev->device_, CL_DEVICE_VERSION);
  auto type = device_val<cl_device_type>(dev->device_, CL_DEVICE_TYPE);
  dev->kind_ = (type & CL_DEVICE_TYPE_GPU)           ? "gpu"
               : (type & CL_DEVICE_TYPE_CPU)         ? "cpu"
               : (type & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator"
                                                     : "accelerator";
  dev->global_mem_ = device_val<cl_ulong>(dev->device_, CL_DEVICE_GLOBAL_MEM_SIZE);
  dev->local_mem_ = device_val<cl_ulong>(dev->device_, CL_DEVICE_LOCAL_MEM_SIZE);
  dev->max_wg_ = device_val<size_t>(dev->device_, CL_DEVICE_MAX_WORK_GROUP_SIZE);
  dev->native_float_ = device_val<cl_uint>(dev->device_, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT);
  dev->fp64_ =
      device_str(dev->device_, CL_DEVICE_EXTENSIONS).find("cl_khr_fp64") != std::string::npos;
  // Short name: "pocl-cpu" style — platform's first word + kind.
  std::string first = lower(pname.substr(0, pname.find(' ')));
  if (first == "portable") first = "pocl";
  dev->short_name_ = first + "-" + dev->kind_;
  std::ostringstream desc;
  desc << "OpenCL platform '" << pname << "', device '" << dname << "' (" << dversion
       << "), driver " << driver << ", " << (dev->global_mem_ >> 20) << " MiB global memory"
       << (dev->fp64_ ? ", fp64" : "");
  dev->description_ = desc.str();
  dev->cache_key_ = pname + "\n" + dname + "\n" + driver + "\n" + dversion;
  dev->cache_dir_ = options.cache_dir.empty() ? default_cache_dir() : options.cache_dir;
  log(1, "gpu_opencl: using " + dev->description_);
  return guard.release();
}

Device::~Device() {
  for (auto& [h, p] : programs_) clReleaseProgram(p);
  if (queue_) clReleaseCommandQueue(queue_);
  if (context_) clReleaseContext(context_);
}

Device::Stats Device::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

cl_program Device::program(const std::string& source_in) {
  std::string source = source_in;
  // Test hook: a kernel that cannot compile, to exercise the build-failure path.
  if (options_.inject_build_error) source += "\n#error lazytensor test hook inject_build_error\n";
  uint64_t hash = fnv1a(source);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = programs_.find(hash);
    if (it != programs_.end()) {
      ++stats_.memory_hits;
      clRetainProgram(it->second);
      return it->second;
    }
  }
  std::string path;
  if (options_.disk_cache && !cache_dir_.empty())
    path = cache_dir_ + "/" + hex(fnv1a(cache_key_)) + "-" + hex(hash) + ".bin";
  auto t0 = std::chrono::steady_clock::now();
  cl_program prog = path.empty() ? nullptr : load_from_disk(path);
  bool from_disk = prog != nullptr;
  if (!prog) {
    prog = build_from_source(source, hash);
    if (!path.empty()) store_to_disk(path, prog);
  }
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.compile_ms += ms;
  if (from_disk)
    ++stats_.disk_hits;
  else
    ++stats_.programs_built;
  auto [it, inserted] = programs_.emplace(hash, prog);
  if (!inserted) {  // another thread built the same source meanwhile
    clReleaseProgram(prog);
    prog = it->second;
  }
  clRetainProgram(prog);
  return prog;
}

cl_program Device::build_from_source(const std::string& source, uint64_t hash) {
  const char* src = source.c_str();
  size_t len = source.size();
  cl_int e = CL_SUCCESS;
  cl_program prog = clCreateProgramWithSource(context_, 1, &src, &len, &e);
  check(e, "clCreateProgramWithSource");
  e = clBuildProgram(prog, 1, &device_, "-cl-std=CL1.2", nullptr, nullptr);
  if (e != CL_SUCCESS) {
    std::string build_log;
    size_t n = 0;
    clGetProgramBuildInfo(prog, device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    if (n > 0) {
      build_log.resize(n);
      clGetProgramBuildInfo(prog, device_, CL_PROGRAM_BUILD_LOG, n, build_log.data(), nullptr);
      while (!build_log.empty() && build_log.back() == '\0') build_log.pop_back();
    }
    clReleaseProgram(prog);
    log_(1, "gpu_opencl: generated source of program " + hex(hash) + " that failed to build:\n" +
                source);
    fail(LT_STATUS_PLUGIN_ERROR, std::string("gpu_opencl: clBuildProgram failed: ") +
                                     cl_error_name(e) + "; build log:\n" + build_log);
  }
  return prog;
}

// File layout: "LTCLBIN1", u64 source hash, u64 size, binary bytes. Anything that does not
// match (truncated, wrong magic, rejected by the driver) is ignored and rebuilt.
cl_program Device::load_from_disk(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  char magic[8];
  uint64_t h = 0, size = 0;
  in.read(magic, 8);
  in.read(reinterpret_cast<char*>(&h), 8);
  in.read(reinterpret_cast<char*>(&size), 8);
  if (!in || std::memcmp(magic, "LTCLBIN1", 8) != 0 || size == 0 || size > (1ULL << 30)) {
    log_(2, "gpu_opencl: ignoring corrupt program cache file " + path);
    return nullptr;
  }
  std::vector<unsigned char> bin(size);
  in.read(reinterpret_cast<char*>(bin.data()), static_cast<std::streamsize>(size));
  if (!in || fnv1a(bin.data(), bin.size()) != h) {
    log_(2, "gpu_opencl: ignoring corrupt program cache file " + path);
    return nullptr;
  }
  const unsigned char* ptr = bin.data();
  size_t len = bin.size();
  cl_int status = CL_SUCCESS, e = CL_SUCCESS;
  cl_program prog = clCreateProgramWithBinary(context_, 1, &device_, &len, &ptr, &status, &e);
  if (e != CL_SUCCESS || status != CL_SUCCESS) {
    if (prog) clReleaseProgram(prog);
    log_(2, "gpu_opencl: driver rejected cached program " + path + "; rebuilding");
    return nullptr;
  }
  if (clBuildProgram(prog, 1, &device_, nullptr, nullptr, nullptr) != CL_SUCCESS) {
    clReleaseProgram(prog);
    log_(2, "gpu_opencl: cached program " + path + " failed to load; rebuilding");
    return nullptr;
  }
  return prog;
}

void Device::store_to_disk(const std::string& path, cl_program prog) {
  size_t size = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) != CL_SUCCESS ||
      size == 0)
    return;
  std::vector<unsigned char> bin(size);
  unsigned char* ptr = bin.data();
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) != CL_SUCCESS) return;
  std::error_code ec;
  std::filesystem::create_directories(cache_dir_, ec);
  // Write to a unique temporary and rename, so concurrent processes never see half a file.
  std::string tmp = path + ".tmp" + std::to_string(reinterpret_cast<uintptr_t>(this)) + "." +
                    std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      log_(2, "gpu_opencl: cannot write program cache in " + cache_dir_);
      return;
    }
    uint64_t h = fnv1a(bin.data(), bin.size()), n = size;
    out.write("LTCLBIN1", 8);
    out.write(reinterpret_cast<const char*>(&h), 8);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(reinterpret_cast<const char*>(bin.data()), static_cast<std::streamsize>(size));
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace lt::ocl
