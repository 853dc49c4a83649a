// checkpoint_test_util.hpp — what the checkpoint tests share: a cpu_eager runtime, a scratch
// directory removed after each test, raw file helpers and an error catcher.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <iterator>
#include <string>
#include <vector>

#include "lazytensor/lazytensor.hpp"
#include "test_support.hpp"

namespace lt::test {

inline lt::Runtime& eager_runtime() {
  return runtime(on_device("cpu_eager", "silent"));
}
inline lt::Device cpu() {
  return eager_runtime().find_device("cpu_eager");
}

// A fresh directory per test (mkdtemp), removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "lt_ckpt_XXXXXX").string();
    if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }
  // Names of the entries in the directory, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::filesystem::path path_;
};

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Little-endian encoders, byte by byte (independent of the host's byte order).
inline void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void put_f32(std::vector<uint8_t>& out, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  put_u32(out, bits);
}
inline uint64_t get_u64(const std::vector<uint8_t>& in, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | in.at(at + static_cast<size_t>(i));
  return v;
}

// A safetensors file: 8-byte length, `header` verbatim (padded with spaces to `pad_to`), data.
inline std::vector<uint8_t> safetensors_bytes(const std::string& header,
                                              const std::vector<uint8_t>& data, size_t pad_to = 8) {
  std::string h = header;
  while (h.size() % pad_to) h += ' ';
  std::vector<uint8_t> out;
  put_u64(out, h.size());
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

struct Caught {
  bool thrown = false;
  lt_status_code code = LT_STATUS_OK;
  std::string message;
};
inline Caught catch_error(const std::function<void()>& f) {
  Caught c;
  try {
    f();
  } catch (const lt::Error& e) {
    c.thrown = true;
    c.code = e.code();
    c.message = e.what();
  }
  return c;
}
inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace lt::test
