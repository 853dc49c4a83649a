// checkpoint.h — what the safetensors reader (checkpoint_read.cpp) and writer and C API
// (checkpoint.cpp) share: the open checkpoint's state and the format's constants and helpers.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "error.h"
#include "lazytensor/lt.h"

struct lt_checkpoint {
  struct Entry {
    std::string name;
    lt_dtype dtype = LT_DTYPE_INVALID;
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;  // byte range, relative to the start of the data
  };
  std::string path;
  int fd = -1;  // kept open: the data read later is the data validated now
  uint64_t data_start = 0;
  std::vector<Entry> entries;  // in file order
  std::unordered_map<std::string, size_t> by_name;
  std::vector<std::pair<std::string, std::string>> metadata;  // sorted by key

  lt_checkpoint() = default;
  lt_checkpoint(const lt_checkpoint&) = delete;
  lt_checkpoint& operator=(const lt_checkpoint&) = delete;
  ~lt_checkpoint() {
    if (fd >= 0) ::close(fd);
  }
};

namespace lt::ckpt {

// The safetensors header is capped like the reference implementation's (100 MB), so a corrupt
// length cannot make us allocate the whole file or more.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr size_t kMaxRank = 64;
constexpr const char* kMetadataKey = "__metadata__";

struct DtypeName {
  lt_dtype dtype;
  const char* name;
};
inline constexpr DtypeName kDtypes[] = {
    {LT_DTYPE_F32, "F32"},   {LT_DTYPE_F64, "F64"},   {LT_DTYPE_I32, "I32"}, {LT_DTYPE_I64, "I64"},
    {LT_DTYPE_BOOL, "BOOL"}, {LT_DTYPE_BF16, "BF16"}, {LT_DTYPE_F16, "F16"},
};
// Dtypes of the safetensors format that LazyTensor has no equivalent of.
inline constexpr const char* kOtherFormatDtypes[] = {
    "I8",      "U8",      "I16",     "U16",     "U32", "U64", "F8_E4M3",
    "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4",  "C64"};

inline const char* format_dtype(lt_dtype d) {
  for (const auto& e : kDtypes)
    if (e.dtype == d) return e.name;
  return nullptr;
}

inline std::string dims_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

inline std::string errno_text(int err) {
  return std::strerror(err);
}

// Turns a C error returned by another entry point into the exception guard() expects.
inline void rethrow(lt_error* e, const std::string& context) {
  if (!e) return;
  Error err(lt_error_code(e), context + lt_error_message(e));
  lt_error_destroy(e);
  throw err;
}

// Element data crosses the file in little-endian order; a big-endian host swaps each element.
inline void to_little_endian(unsigned char* p, size_t nbytes, size_t esize) {
  if constexpr (std::endian::native == std::endian::big) {
    for (size_t i = 0; i + esize <= nbytes; i += esize) std::reverse(p + i, p + i + esize);
  } else {
    (void)p, (void)nbytes, (void)esize;
  }
}

// Opens and validates `path` (checkpoint_read.cpp): the whole header against the file's size
// before anything is allocated; throws lt::Error naming the file and what is wrong.
std::unique_ptr<lt_checkpoint> open_checkpoint(const std::string& path);
// pread until `n` bytes are read; false at end of file (`*err` 0) or on an error (`*err`).
bool read_at(int fd, void* dst, size_t n, uint64_t offset, int* err);
// The entry named `name`; NOT_FOUND naming `fn`, the file and the name otherwise.
const lt_checkpoint::Entry& find_entry(const lt_checkpoint* ck, const char* fn, const char* name);

}  // namespace lt::ckpt
