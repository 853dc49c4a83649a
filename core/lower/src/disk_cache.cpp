// disk_cache.cpp — the persistent compile cache (see disk_cache.hpp).
//
// File layout (little-endian host order; a file from another architecture fails the checks):
//   "LTCACHE1" | u64 key length | u64 data length | u64 checksum of key then data | key | data
#include "lazytensor/lower/disk_cache.hpp"

#include <cerrno>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "lazytensor/regular_file.hpp"

namespace lt::lower {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[8] = {'L', 'T', 'C', 'A', 'C', 'H', 'E', '1'};
constexpr size_t kHeader = 32;
constexpr uint64_t kMaxEntry = uint64_t{1} << 30;  // no artifact is this large

}  // namespace

uint64_t fnv1a(const void* p, size_t n, uint64_t h) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

std::string hex(uint64_t v) {
  char buf[17];
  for (int i = 15; i >= 0; --i, v >>= 4) buf[i] = "0123456789abcdef"[v & 15];
  buf[16] = '\0';
  return buf;
}

std::string DiskCache::default_dir(const std::string& configured, std::string_view backend) {
  if (!configured.empty()) return configured;
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v && *v ? v : "";
  };
  std::string b(backend);
  if (std::string d = env("LT_CACHE_DIR"); d == "off") return "";
  if (std::string d = env("LT_CACHE_DIR"); !d.empty()) return d + "/" + b;
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return d + "/lazytensor/" + b;
  if (std::string d = env("HOME"); !d.empty()) return d + "/.cache/lazytensor/" + b;
  return "";
}

DiskCache::DiskCache(std::string dir, uint64_t max_bytes, Log log)
    : dir_(std::move(dir)), max_bytes_(max_bytes), log_(std::move(log)) {}

std::string DiskCache::path_of(std::string_view key) const {
  return dir_ + "/" + hex(fnv1a(key.data(), key.size())) + ".ltc";
}

DiskCache::Stats DiskCache::stats() const {
  std::lock_guard lock(*mu_);
  return stats_;
}

std::optional<std::vector<char>> DiskCache::load(std::string_view key) {
  if (!enabled()) return std::nullopt;
  const std::string path = path_of(key);
  auto count = [&](uint64_t Stats::*field) {
    std::lock_guard lock(*mu_);
    ++(stats_.*field);
  };
  // Opened non-blocking and only if regular (a FIFO named like an entry hung every lookup), and
  // the lengths in the header checked against the file's size before anything is allocated (a
  // header claiming 1 GiB made a 4.5 KB file allocate 1 GiB).
  lt::file::RegularFile in;
  std::string why;
  if (!in.open(path, &why)) {
    if (in.error() == ENOENT) {
      count(&Stats::misses);
      return std::nullopt;
    }
    if (log_) log_(3, "compile cache: ignoring and removing " + path + ": it " + why);
    std::error_code ec;
    fs::remove(path, ec);
    count(&Stats::rejected);
    count(&Stats::misses);
    return std::nullopt;
  }
  char head[kHeader];
  uint64_t klen = 0, dlen = 0, sum = 0;
  std::vector<char> k, data;
  bool ok = in.size() >= kHeader && in.read_at(head, kHeader, 0, nullptr) &&
            std::memcmp(head, kMagic, 8) == 0;
  if (ok) {
    std::memcpy(&klen, head + 8, 8);
    std::memcpy(&dlen, head + 16, 8);
    std::memcpy(&sum, head + 24, 8);
    // Exactly header + key + data, so neither length can exceed the file.
    ok = klen == key.size() && dlen <= kMaxEntry && klen <= in.size() && dlen <= in.size() &&
         in.size() == kHeader + klen + dlen;
  }
  if (ok) {
    k.resize(klen);
    data.resize(dlen);
    ok = in.read_at(k.data(), klen, kHeader, nullptr) &&
         in.read_at(data.data(), dlen, kHeader + klen, nullptr);
  }
  ok = ok && fnv1a(data.data(), data.size(), fnv1a(k.data(), k.size())) == sum;
  if (!ok || std::string_view(k.data(), k.size()) != key) {
    // Corrupt, truncated, from another key (a hash collision) or not ours: never loaded.
    if (log_)
      log_(3, "compile cache: ignoring and removing " + path +
                  (ok ? " (another key)" : " (corrupt or truncated)"));
    std::error_code ec;
    fs::remove(path, ec);
    count(&Stats::rejected);
    count(&Stats::misses);
    return std::nullopt;
  }
  std::error_code ec;
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // recently used
  count(&Stats::hits);
  return data;
}

void DiskCache::store(std::string_view key, std::span<const char> data) {
  if (!enabled() || data.size() > kMaxEntry || data.size() + key.size() + kHeader > max_bytes_)
    return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  static std::atomic<uint64_t> seq{0};
  const std::string path = path_of(key);
  const std::string tmp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(seq.fetch_add(1)) + "." +
      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  char head[kHeader];
  const uint64_t klen = key.size(), dlen = data.size();
  const uint64_t sum = fnv1a(data.data(), data.size(), fnv1a(key.data(), key.size()));
  std::memcpy(head, kMagic, 8);
  std::memcpy(head + 8, &klen, 8);
  std::memcpy(head + 16, &dlen, 8);
  std::memcpy(head + 24, &sum, 8);
  bool ok;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(head, kHeader).write(key.data(), static_cast<std::streamsize>(klen));
    out.write(data.data(), static_cast<std::streamsize>(dlen));
    out.flush();
    ok = static_cast<bool>(out);
  }
  if (ok) fs::rename(tmp, path, ec);
  if (!ok || ec) {
    fs::remove(tmp, ec);
    if (log_) log_(3, "compile cache: cannot write an entry in " + dir_);
    std::lock_guard lock(*mu_);
    ++stats_.errors;
    return;
  }
  {
    std::lock_guard lock(*mu_);
    ++stats_.stores;
  }
  evict();
}

// Removes the least recently used entries (and temporaries older than an hour, left by a
// crashed writer) until the entries fit in max_bytes.
void DiskCache::evict() {
  struct Entry {
    fs::path path;
    fs::file_time_type time;
    uint64_t size;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    const fs::path& p = it->path();
    const std::string name = p.filename().string();
    const auto time = fs::last_write_time(p, e2);
    const uint64_t size = fs::file_size(p, e2);
    if (e2) continue;
    if (name.find(".ltc.tmp.") != std::string::npos) {
      if (now - time > std::chrono::hours(1)) fs::remove(p, e2);
      continue;
    }
    if (p.extension() != ".ltc") continue;  // not ours: left alone
    entries.push_back({p, time, size});
    total += size;
  }
  if (total <= max_bytes_) return;
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.time < b.time; });
  uint64_t removed = 0;
  for (const Entry& e : entries) {
    if (total <= max_bytes_) break;
    std::error_code e2;
    if (fs::remove(e.path, e2)) ++removed;
    total -= e.size;  // gone, whoever removed it
  }
  std::lock_guard lock(*mu_);
  stats_.evictions += removed;
}

}  // namespace lt::lower
