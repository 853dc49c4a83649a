// profile.h — the profiler (config `profile`, env LT_PROFILE=FILE): every stage of a step as a
// span in the Chrome trace event format, which Perfetto and chrome://tracing open: the host's
// tracing between steps, each lt_sync and read, collect, the plan lookup, compiles (per
// region and backend), each region's execution, transfers, collectives and queue waits.
// One Profiler per runtime, owned by it; spans cost one branch when profiling is off. The file
// is written when the runtime is destroyed. Inside a region's execution, a plugin of ABI 1.3
// reports each kernel or host step through the execute call's span callback (category
// "kernel", device_client.cpp): cpu_jit, cpu_eager and gpu_opencl do; older plugins and
// tpu_sim show as whole executables.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "ir.h"

namespace lt {

class Profiler {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Profiler(std::string path);
  ~Profiler();  // writes the file
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // A finished span. `args` is a JSON object's members ("\"bytes\": 64") or empty.
  void complete(const char* cat, std::string name, Clock::time_point start, Clock::time_point end,
                std::string args = {});
  Clock::time_point started() const { return t0_; }
  const std::string& path() const { return path_; }

 private:
  struct Event {
    const char* cat;
    std::string name, args;
    int64_t ts_ns, dur_ns;
    uint32_t tid;
  };
  void write() noexcept;

  std::string path_;
  Clock::time_point t0_;
  std::mutex mu_;
  std::vector<Event> events_;
  uint64_t dropped_ = 0;  // beyond kMaxEvents: counted, not kept (memory stays bounded)
};

// A span of the runtime's profiler, from construction to destruction; nothing when `rt` has no
// profiler.
class Span {
 public:
  Span(Runtime* rt, const char* cat, const char* name);
  Span(Runtime* rt, const char* cat, std::string name);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  bool on() const { return p_ != nullptr; }
  void args(std::string a) { args_ = std::move(a); }

 private:
  Profiler* p_ = nullptr;
  const char* cat_ = nullptr;
  std::string name_, args_;
  Profiler::Clock::time_point start_;
};

}  // namespace lt
