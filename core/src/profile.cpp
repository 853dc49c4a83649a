// profile.cpp — spans kept in memory and written as a Chrome trace event file (profile.h).
#include "profile.h"

#include <unistd.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "runtime.h"

namespace lt {
namespace {

constexpr size_t kMaxEvents = 2'000'000;  // ~100 bytes each: a bounded buffer

uint32_t thread_number() {
  static std::atomic<uint32_t> next{1};
  thread_local uint32_t id = next.fetch_add(1, std::memory_order_relaxed);
  return id;
}

}  // namespace

Profiler::Profiler(std::string path) : path_(std::move(path)), t0_(Clock::now()) {}

Profiler::~Profiler() {
  write();
}

void Profiler::complete(const char* cat, std::string name, Clock::time_point start,
                        Clock::time_point end, std::string args) {
  const auto ns = [&](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - t0_).count();
  };
  std::lock_guard lk(mu_);
  if (events_.size() >= kMaxEvents) {
    ++dropped_;
    return;
  }
  events_.push_back(
      {cat, std::move(name), std::move(args), ns(start), ns(end) - ns(start), thread_number()});
}

// One JSON object: {"traceEvents": [...]} with complete events ("ph": "X") in microseconds.
void Profiler::write() noexcept {
  try {
    std::lock_guard lk(mu_);
    std::FILE* f = std::fopen(path_.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "lazytensor: profile: cannot write %s\n", path_.c_str());
      return;
    }
    const long pid = static_cast<long>(::getpid());
    std::fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", f);
    std::fprintf(f,
                 "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %ld, \"tid\": 0, "
                 "\"args\": {\"name\": \"LazyTensor\"}}",
                 pid);
    for (const Event& e : events_) {
      std::fprintf(f,
                   ",\n{\"name\": %s, \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.3f, \"dur\": "
                   "%.3f, \"pid\": %ld, \"tid\": %u, \"args\": {%s}}",
                   nlohmann::json(e.name).dump().c_str(), e.cat, static_cast<double>(e.ts_ns) / 1e3,
                   static_cast<double>(e.dur_ns) / 1e3, pid, e.tid, e.args.c_str());
    }
    std::fprintf(f, "\n], \"otherData\": {\"dropped_events\": %llu}}\n",
                 static_cast<unsigned long long>(dropped_));
    std::fclose(f);
  } catch (...) {  // out of memory while formatting: the profile is lost, nothing else
  }
}

Span::Span(Runtime* rt, const char* cat, const char* name) : Span(rt, cat, std::string()) {
  if (p_) name_ = name;
}

Span::Span(Runtime* rt, const char* cat, std::string name) {
  if (!rt || !rt->profiler) return;
  p_ = rt->profiler.get();
  cat_ = cat;
  name_ = std::move(name);
  start_ = Profiler::Clock::now();
}

Span::~Span() {
  if (!p_) return;
  try {
    p_->complete(cat_, std::move(name_), start_, Profiler::Clock::now(), std::move(args_));
  } catch (...) {  // a span lost to out of memory
  }
}

}  // namespace lt
