// fuzz_util.hpp — shared plumbing of the libFuzzer harnesses: a byte reader that never runs
// out (zeros past the end), a per-process scratch directory and small value tables.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>

#include "lazytensor/lt.h"

namespace lt::fuzz {

// Consumes the input front to back; past the end every read is 0, so every input is a program.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  bool empty() const { return p_ == end_; }
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  uint8_t u8() { return p_ == end_ ? 0 : *p_++; }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{u8()} << (8 * i);
    return v;
  }
  // Mostly small values, sometimes the edges where arithmetic overflows.
  int64_t int_value() {
    static constexpr int64_t kEdges[] = {0,
                                         1,
                                         2,
                                         3,
                                         -1,
                                         -2,
                                         4,
                                         7,
                                         int64_t{1} << 31,
                                         int64_t{1} << 44,
                                         int64_t{1} << 62,
                                         std::numeric_limits<int64_t>::max(),
                                         std::numeric_limits<int64_t>::min(),
                                         -(int64_t{1} << 62)};
    uint8_t b = u8();
    if (b < 0xf0) return static_cast<int64_t>(b % 6);
    return kEdges[b % (sizeof kEdges / sizeof kEdges[0])];
  }
  double float_value() {
    static constexpr double kFloats[] = {0.0,
                                         1.0,
                                         -1.0,
                                         0.5,
                                         2.0,
                                         -3.25,
                                         1e30,
                                         -1e300,
                                         std::numeric_limits<double>::infinity(),
                                         -std::numeric_limits<double>::infinity(),
                                         std::numeric_limits<double>::quiet_NaN(),
                                         std::numeric_limits<double>::denorm_min(),
                                         65504.0,
                                         3e38,
                                         1e10,
                                         -0.0};
    return kFloats[u8() % (sizeof kFloats / sizeof kFloats[0])];
  }
  // Valid dtypes mostly; sometimes LT_DTYPE_INVALID or a value outside the enum.
  lt_dtype dtype() {
    uint8_t b = u8();
    if (b < 0xf8) return static_cast<lt_dtype>(1 + b % 7);
    return static_cast<lt_dtype>(b == 0xff ? 1000 : b % 2 == 0 ? 0 : -1);
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// A private directory for files a harness writes (configs, checkpoints); removed at exit.
inline const std::string& scratch_dir() {
  // Never destroyed, so that the exit handler that removes the directory can still name it.
  static const std::string* dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    auto* t = new std::string(std::string(tmp && *tmp ? tmp : "/tmp") + "/lt_fuzz_XXXXXX");
    if (!::mkdtemp(t->data())) std::abort();
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return t;
  }();
  return *dir;
}

inline std::string write_scratch(const char* name, const uint8_t* data, size_t size) {
  std::string path = scratch_dir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

// An lt_error is a fine answer to bad input; it must carry a message.
inline bool ok(lt_error* e) {
  if (!e) return true;
  const char* m = lt_error_message(e);
  if (!m) std::abort();
  lt_error_destroy(e);
  return false;
}

// One runtime per process on cpu_eager, quiet, fallback silent; never destroyed (a static
// keeps it reachable for LeakSanitizer).
inline lt_runtime* eager_runtime() {
  static lt_runtime* rt = [] {
    ::unsetenv("LT_CONFIG");
    ::unsetenv("LT_DEVICE");
    lt_runtime_options o{};
    o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
    o.device = "cpu_eager";
    o.fallback = "silent";
    o.log_level = "off";
    lt_runtime* rt = nullptr;
    if (lt_error* e = lt_runtime_create(&o, &rt)) {
      std::fprintf(stderr, "fuzz: cannot create a cpu_eager runtime: %s\n", lt_error_message(e));
      std::abort();
    }
    return rt;
  }();
  return rt;
}
inline lt_device* eager_device() {
  return lt_runtime_default_device(eager_runtime());
}

}  // namespace lt::fuzz
