// checkpoint.cpp — lt_checkpoint_*: tensors to and from safetensors files (docs/checkpoints.md).
// Saving writes a temporary file next to the target, fsyncs it and renames it over the target;
// opening (checkpoint_read.cpp) validates the whole header against the file before any tensor
// is read.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint.h"
#include "device_client.h"
#include "error.h"
#include "executor.h"
#include "lazytensor/regular_file.hpp"
#include "runtime.h"

using namespace lt;

using namespace lt::ckpt;

namespace {

// ---- writing ---------------------------------------------------------------------------------

// The temporary file of one save: removed unless committed.
struct TempFile {
  std::string path;
  int fd = -1;
  bool committed = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!committed && !path.empty()) ::unlink(path.c_str());
  }
};

// Temporaries of a save that was killed (`<target>.tmp-XXXXXX`) are removed by the next save of
// the same target. A live save is never touched: every saver holds an exclusive flock on its
// temporary from creation until it is renamed over the target (the kernel drops the lock when
// the process dies, however it dies), and a temporary is only a candidate once it has not
// been written for kStaleSeconds (covering the instant between mkostemp and flock). A file of
// that name that is no regular file, or that was replaced meanwhile, is left alone.
constexpr int64_t kStaleSeconds = 60;

void remove_stale_temporaries(const std::string& path) {
  const size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  if (dir.empty()) dir = "/";
  const std::string prefix = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp-";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return;
  DIR* d = ::fdopendir(dfd);
  if (!d) {
    ::close(dfd);
    return;
  }
  const int64_t now = static_cast<int64_t>(::time(nullptr));
  while (dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (name.size() != prefix.size() + 6 || name.compare(0, prefix.size(), prefix) != 0) continue;
    int fd = ::openat(dfd, e->d_name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {
    }, again{};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        now - static_cast<int64_t>(st.st_mtime) >= kStaleSeconds &&
        ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&  // no live writer holds it
        ::fstatat(dfd, e->d_name, &again, AT_SYMLINK_NOFOLLOW) == 0 && again.st_ino == st.st_ino &&
        again.st_dev == st.st_dev) {
      (void)::unlinkat(dfd, e->d_name, 0);
    }
    ::close(fd);
  }
  ::closedir(d);  // closes dfd
}

// The process umask, read without changing it (umask(2) would race with other threads).
mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Umask:", 0) == 0) return static_cast<mode_t>(std::stoul(line.substr(6), 0, 8));
  }
  return 022;
}

void write_all(const std::string& target, int fd, const void* data, size_t n) {
  auto* p = static_cast<const unsigned char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail(LT_STATUS_IO_ERROR, "lt_checkpoint_save: '{}': writing failed: {}", target,
           errno_text(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Computes every pending tensor, one graph per device (not one per tensor).
void materialize_all(lt_tensor* const* tensors, size_t count) {
  std::map<Device*, std::vector<NodeRef>> pending;
  for (size_t i = 0; i < count; ++i) {
    Node* n = tensors[i]->node;
    if (n->is_leaf() || n->materialized.load(std::memory_order_acquire)) continue;
    pending[tensors[i]->device].push_back(NodeRef::share(n));
  }
  for (auto& [dev, roots] : pending) materialize(dev, roots);
}

void save(const char* path_c, size_t count, const char* const* names, lt_tensor* const* tensors,
          size_t num_metadata, const char* const* meta_keys, const char* const* meta_values) {
  const char* fn = "lt_checkpoint_save";
  if (!path_c) fail(LT_STATUS_INVALID_ARGUMENT, "{}: path is NULL", fn);
  const std::string path = path_c;
  if (path.empty()) fail(LT_STATUS_INVALID_ARGUMENT, "{}: path is empty", fn);
  if (count && (!names || !tensors))
    fail(LT_STATUS_INVALID_ARGUMENT, "{}: '{}': names or tensors is NULL", fn, path);
  if (num_metadata && (!meta_keys || !meta_values))
    fail(LT_STATUS_INVALID_ARGUMENT, "{}: '{}': meta_keys or meta_values is NULL", fn, path);

  std::set<std::string_view> seen;
  for (size_t i = 0; i < count; ++i) {
    if (!names[i]) fail(LT_STATUS_INVALID_ARGUMENT, "{}: '{}': name {} is NULL", fn, path, i);
    std::string_view name = names[i];
    if (name.empty()) fail(LT_STATUS_INVALID_ARGUMENT, "{}: '{}': name {} is empty", fn, path, i);
    if (name == kMetadataKey)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: '{}': the name {} is reserved", fn, path, name);
    if (!seen.insert(name).second)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: '{}': duplicate tensor name '{}'", fn, path, name);
    if (!tensors[i])
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: '{}': tensor '{}' is NULL", fn, path, name);
    if (!is_live(tensors[i])) live_tensor(tensors[i], fn, fmt::format("tensor '{}'", name).c_str());
    if (!format_dtype(tensors[i]->node->dtype)) {
      fail(LT_STATUS_INTERNAL, "{}: '{}': tensor '{}' has dtype {} with no safetensors name", fn,
           path, name, lt_dtype_name(tensors[i]->node->dtype));
    }
  }
  std::map<std::string, std::string> metadata;
  for (size_t i = 0; i < num_metadata; ++i) {
    if (!meta_keys[i] || !meta_values[i]) {
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: '{}': metadata key or value {} is NULL", fn, path, i);
    }
    if (!metadata.emplace(meta_keys[i], meta_values[i]).second) {
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: '{}': duplicate metadata key '{}'", fn, path,
           meta_keys[i]);
    }
  }

  // Header: tensors in the order given, packed back to back; then padded with spaces to a
  // multiple of 8 so the data starts aligned.
  // Written as text, entry by entry (a JSON object built key by key searched its keys on every
  // insert: quadratic in the tensors). Strings go through nlohmann for escaping and the UTF-8
  // check.
  std::string text;
  auto quoted = [&](const std::string& v) {
    try {
      return nlohmann::json(v).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
    } catch (const nlohmann::json::type_error& e) {
      fail(LT_STATUS_INVALID_ARGUMENT,
           "{}: '{}': a tensor name or metadata string is not UTF-8: {}", fn, path, e.what());
    }
  };
  text += '{';
  if (!metadata.empty()) {
    text += quoted(kMetadataKey) + ":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      text += (first ? "" : ",") + quoted(k) + ":" + quoted(v);
      first = false;
    }
    text += '}';
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < count; ++i) {
    const Node* n = tensors[i]->node;
    uint64_t bytes = n->nbytes();
    if (text.size() > 1) text += ',';
    text += quoted(names[i]) + ":{\"dtype\":\"" + format_dtype(n->dtype) + "\",\"shape\":[";
    for (size_t d = 0; d < n->shape.size(); ++d)
      text += (d ? "," : "") + std::to_string(n->shape[d]);
    text += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + bytes) +
            "]}";
    offset += bytes;
  }
  text += '}';
  text.append((8 - text.size() % 8) % 8, ' ');

  materialize_all(tensors, count);

  remove_stale_temporaries(path);
  TempFile tmp;
  {
    std::string templ = path + ".tmp-XXXXXX";
    tmp.fd = ::mkostemp(templ.data(), O_CLOEXEC);
    if (tmp.fd < 0) {
      fail(LT_STATUS_IO_ERROR, "{}: '{}': cannot create a temporary file next to it: {}", fn, path,
           errno_text(errno));
    }
    tmp.path = templ;
  }
  // Held until the temporary is renamed over the target: marks it as a live save's.
  (void)::flock(tmp.fd, LOCK_EX);
  if (::fchmod(tmp.fd, 0666 & ~current_umask()) != 0)
    fail(LT_STATUS_IO_ERROR, "{}: '{}': fchmod failed: {}", fn, path, errno_text(errno));

  unsigned char len_bytes[8];
  uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(len >> (8 * i));
  write_all(path, tmp.fd, len_bytes, 8);
  write_all(path, tmp.fd, text.data(), text.size());
  std::vector<unsigned char> buf;
  for (size_t i = 0; i < count; ++i) {
    const Node* n = tensors[i]->node;
    buf.resize(n->nbytes());
    if (!buf.empty()) {
      rethrow(lt_tensor_to_host(tensors[i], buf.data(), buf.size()),
              fmt::format("{}: '{}': tensor '{}': ", fn, path, names[i]));
    }
    to_little_endian(buf.data(), buf.size(), lt_dtype_size(n->dtype));
    write_all(path, tmp.fd, buf.data(), buf.size());
  }
  if (::fsync(tmp.fd) != 0)
    fail(LT_STATUS_IO_ERROR, "{}: '{}': fsync failed: {}", fn, path, errno_text(errno));
  // Renamed while still open and locked, so no other save's clean-up can take it for stale.
  if (::rename(tmp.path.c_str(), path.c_str()) != 0) {
    fail(LT_STATUS_IO_ERROR, "{}: '{}': renaming the temporary file over it failed: {}", fn, path,
         errno_text(errno));
  }
  tmp.committed = true;
  int fd = tmp.fd;
  tmp.fd = -1;
  if (::close(fd) != 0)
    fail(LT_STATUS_IO_ERROR, "{}: '{}': closing failed: {}", fn, path, errno_text(errno));
  // Make the rename itself durable. Best effort: some file systems refuse fsync on a directory,
  // and the file is complete either way.
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  if (dir.empty()) dir = "/";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

extern "C" {

LT_API lt_error* lt_checkpoint_save(const char* path, size_t count, const char* const* names,
                                    lt_tensor* const* tensors, size_t num_metadata,
                                    const char* const* meta_keys, const char* const* meta_values) {
  return guard([&] { save(path, count, names, tensors, num_metadata, meta_keys, meta_values); });
}

LT_API lt_error* lt_checkpoint_open(const char* path, lt_checkpoint** out) {
  return guard([&] {
    if (!path) fail(LT_STATUS_INVALID_ARGUMENT, "lt_checkpoint_open: path is NULL");
    if (!out) fail(LT_STATUS_INVALID_ARGUMENT, "lt_checkpoint_open: out is NULL");
    *out = open_checkpoint(path).release();
  });
}

LT_API void lt_checkpoint_close(lt_checkpoint* checkpoint) {
  delete checkpoint;
}

LT_API size_t lt_checkpoint_count(const lt_checkpoint* checkpoint) {
  return checkpoint ? checkpoint->entries.size() : 0;
}

LT_API const char* lt_checkpoint_name(const lt_checkpoint* checkpoint, size_t index) {
  if (!checkpoint || index >= checkpoint->entries.size()) return nullptr;
  return checkpoint->entries[index].name.c_str();
}

LT_API lt_error* lt_checkpoint_info(const lt_checkpoint* checkpoint, const char* name,
                                    lt_dtype* dtype, size_t* rank, const int64_t** shape) {
  return guard([&] {
    const char* fn = "lt_checkpoint_info";
    if (!checkpoint || !name)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: checkpoint or name is NULL", fn);
    const auto& e = find_entry(checkpoint, fn, name);
    if (dtype) *dtype = e.dtype;
    if (rank) *rank = e.shape.size();
    if (shape) *shape = e.shape.data();
  });
}

LT_API lt_error* lt_checkpoint_tensor(const lt_checkpoint* checkpoint, const char* name,
                                      lt_device* device, lt_tensor** out) {
  return guard([&] {
    const char* fn = "lt_checkpoint_tensor";
    if (!checkpoint || !name)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: checkpoint or name is NULL", fn);
    if (!device || !out) fail(LT_STATUS_INVALID_ARGUMENT, "{}: device or out is NULL", fn);
    const auto& e = find_entry(checkpoint, fn, name);
    std::vector<unsigned char> buf(e.end - e.begin);
    int err = 0;
    if (!buf.empty() &&
        !read_at(checkpoint->fd, buf.data(), buf.size(), checkpoint->data_start + e.begin, &err)) {
      fail(LT_STATUS_IO_ERROR, "{}: '{}': tensor '{}': reading {} bytes failed: {}", fn,
           checkpoint->path, name, buf.size(),
           err ? errno_text(err) : "end of file (file truncated since it was opened?)");
    }
    if (e.dtype == LT_DTYPE_BOOL) {
      for (size_t i = 0; i < buf.size(); ++i) {
        if (buf[i] > 1) {
          fail(LT_STATUS_IO_ERROR, "{}: '{}': tensor '{}': BOOL element {} is {}, not 0 or 1", fn,
               checkpoint->path, name, i, buf[i]);
        }
      }
    }
    to_little_endian(buf.data(), buf.size(), lt_dtype_size(e.dtype));
    rethrow(lt_tensor_from_host(device, e.dtype, e.shape.data(), e.shape.size(), buf.data(),
                                buf.size(), out),
            fmt::format("{}: '{}': tensor '{}': ", fn, checkpoint->path, name));
  });
}

LT_API size_t lt_checkpoint_metadata_count(const lt_checkpoint* checkpoint) {
  return checkpoint ? checkpoint->metadata.size() : 0;
}

LT_API const char* lt_checkpoint_metadata_key(const lt_checkpoint* checkpoint, size_t index) {
  if (!checkpoint || index >= checkpoint->metadata.size()) return nullptr;
  return checkpoint->metadata[index].first.c_str();
}

LT_API const char* lt_checkpoint_metadata(const lt_checkpoint* checkpoint, const char* key) {
  if (!checkpoint || !key) return nullptr;
  auto it = std::lower_bound(
      checkpoint->metadata.begin(), checkpoint->metadata.end(), key,
      [](const std::pair<std::string, std::string>& m, const char* k) { return m.first < k; });
  if (it == checkpoint->metadata.end() || it->first != key) return nullptr;
  return it->second.c_str();
}

}  // extern "C"
