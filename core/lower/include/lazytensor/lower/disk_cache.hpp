// disk_cache.hpp — the persistent compile cache every compiling backend shares (cpu_jit's
// object code, gpu_opencl's program binaries, a third party's artifacts): one file per entry
// in a directory that several processes may use at once.
//
// - Keyed by a string holding everything the artifact depends on (backend, its version, the
//   options and CPU features that change code, the code or graph itself): the file name is a
//   64-bit hash of the key, and the whole key is stored in the file and compared on load, so a
//   colliding or foreign file is never loaded.
// - Written atomically (a unique temporary in the same directory, then rename): concurrent
//   processes and crashes never leave a half-written entry under an entry's name.
// - Checked on load (magic, lengths, a checksum of key and data): a corrupt, truncated or
//   foreign file is ignored, removed, and replaced by the next store.
// - Size-capped: after a store, the least recently used entries (modification time, refreshed
//   on every hit) are removed until the directory holds at most max_bytes.
// - Never fails the caller: I/O errors are logged and counted; the compile just happens.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lt::lower {

// FNV-1a over `n` bytes, chained through `h` (the cache's file names and checksums; a
// backend's in-memory keys of generated source).
uint64_t fnv1a(const void* p, size_t n, uint64_t h = 1469598103934665603ULL);
// `v` as 16 lower-case hex digits.
std::string hex(uint64_t v);

class DiskCache {
 public:
  // level as spdlog's (3: warning), message
  using Log = std::function<void(int level, const std::string& message)>;
  struct Stats {
    uint64_t hits = 0, misses = 0, stores = 0, evictions = 0, rejected = 0, errors = 0;
  };

  // The directory for `backend`: `configured` when not empty, else $LT_CACHE_DIR/<backend>,
  // else $XDG_CACHE_HOME/lazytensor/<backend>, else $HOME/.cache/lazytensor/<backend>; empty
  // (no cache) when LT_CACHE_DIR is "off" or none of them is set.
  static std::string default_dir(const std::string& configured, std::string_view backend);

  // dir empty: disabled (load misses, store does nothing). The directory is created on the
  // first store.
  explicit DiskCache(std::string dir = {}, uint64_t max_bytes = uint64_t{1} << 30, Log log = {});

  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }
  uint64_t max_bytes() const { return max_bytes_; }

  // The data stored under `key`, or nothing (counted as a miss; a bad file is removed).
  std::optional<std::vector<char>> load(std::string_view key);
  // Stores `data` under `key` (replacing any entry), then evicts down to max_bytes.
  void store(std::string_view key, std::span<const char> data);

  Stats stats() const;

 private:
  std::string path_of(std::string_view key) const;
  void evict();

  std::string dir_;
  uint64_t max_bytes_;
  Log log_;
  std::unique_ptr<std::mutex> mu_ = std::make_unique<std::mutex>();  // guards stats_ (movable)
  Stats stats_;
};

}  // namespace lt::lower
