// checkpoint.cpp — lt_checkpoint_*: tensors to and from safetensors files (docs/checkpoints.md).
// Saving writes a temporary file next to the target, fsyncs it and renames it over the target;
// opening validates the whole header against the file before any tensor is read.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "error.h"
#include "runtime.h"

using namespace lt;

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

namespace {

// The safetensors header is capped like the reference implementation's (100 MB), so a corrupt
// length cannot make us allocate the whole file or more.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr size_t kMaxRank = 64;
constexpr const char* kMetadataKey = "__metadata__";
// Keeps the header's key order (file order for ties between empty tensors).
using Json = nlohmann::ordered_json;

struct DtypeName {
  lt_dtype dtype;
  const char* name;
};
constexpr DtypeName kDtypes[] = {
    {LT_DTYPE_F32, "F32"},   {LT_DTYPE_F64, "F64"},   {LT_DTYPE_I32, "I32"}, {LT_DTYPE_I64, "I64"},
    {LT_DTYPE_BOOL, "BOOL"}, {LT_DTYPE_BF16, "BF16"}, {LT_DTYPE_F16, "F16"},
};
// Dtypes of the safetensors format that LazyTensor has no equivalent of.
constexpr const char* kOtherFormatDtypes[] = {"I8",      "U8",      "I16",     "U16",     "U32",
                                              "U64",     "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3",
                                              "F6_E3M2", "F4",      "C64"};

const char* format_dtype(lt_dtype d) {
  for (const auto& e : kDtypes)
    if (e.dtype == d) return e.name;
  return nullptr;
}

std::string dims_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

std::string errno_text(int err) {
  return std::strerror(err);
}

// Turns a C error returned by another entry point into the exception guard() expects.
void rethrow(lt_error* e, const std::string& context) {
  if (!e) return;
  Error err(lt_error_code(e), context + lt_error_message(e));
  lt_error_destroy(e);
  throw err;
}

// Element data crosses the file in little-endian order; a big-endian host swaps each element.
void to_little_endian(unsigned char* p, size_t nbytes, size_t esize) {
  if constexpr (std::endian::native == std::endian::big) {
    for (size_t i = 0; i + esize <= nbytes; i += esize) std::reverse(p + i, p + i + esize);
  } else {
    (void)p, (void)nbytes, (void)esize;
  }
}

// ---- reading ---------------------------------------------------------------------------------

// An IO_ERROR about the file being opened: "lt_checkpoint_open: 'path': what".
template <class... Args>
[[noreturn]] void bad_file(const std::string& path, fmt::format_string<Args...> f, Args&&... args) {
  fail(LT_STATUS_IO_ERROR, "lt_checkpoint_open: '{}': {}", path,
       fmt::format(f, std::forward<Args>(args)...));
}

// pread until `n` bytes are read; returns false at end of file.
bool read_at(int fd, void* dst, size_t n, uint64_t offset, int* err) {
  auto* p = static_cast<unsigned char*>(dst);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return false;
    }
    if (r == 0) {
      *err = 0;
      return false;
    }
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return true;
}

// A non-negative JSON integer that fits int64, or an error naming `what`.
int64_t json_size(const std::string& path, const std::string& what, const Json& v) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) bad_file(path, "{} {} is too large", what, u);
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) bad_file(path, "{} {} is negative", what, v.get<int64_t>());
  bad_file(path, "{} is {}, not a non-negative integer", what, v.dump());
}

lt_checkpoint::Entry parse_entry(const std::string& path, const std::string& name, const Json& v,
                                 uint64_t data_size) {
  const std::string where = "tensor '" + name + "'";
  if (!v.is_object()) bad_file(path, "{}: entry is {}, not an object", where, v.type_name());
  lt_checkpoint::Entry e;
  e.name = name;

  auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) bad_file(path, "{}: \"dtype\" string missing", where);
  const std::string dname = dt->get<std::string>();
  for (const auto& d : kDtypes)
    if (dname == d.name) e.dtype = d.dtype;
  if (e.dtype == LT_DTYPE_INVALID) {
    for (const char* other : kOtherFormatDtypes) {
      if (dname == other) {
        fail(LT_STATUS_UNSUPPORTED,
             "lt_checkpoint_open: '{}': {}: dtype {} is not supported by LazyTensor (supported: "
             "F32 F64 I32 I64 BOOL BF16 F16)",
             path, where, dname);
      }
    }
    bad_file(path, "{}: unknown dtype \"{}\"", where, dname);
  }

  auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array()) bad_file(path, "{}: \"shape\" array missing", where);
  if (sh->size() > kMaxRank) {
    fail(LT_STATUS_UNSUPPORTED, "lt_checkpoint_open: '{}': {}: rank {} exceeds the limit of {}",
         path, where, sh->size(), kMaxRank);
  }
  for (const auto& d : *sh) e.shape.push_back(json_size(path, where + ": a dimension", d));

  auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2)
    bad_file(path, "{}: \"data_offsets\" must be an array [begin, end]", where);
  e.begin = static_cast<uint64_t>(json_size(path, where + ": data_offsets begin", (*off)[0]));
  e.end = static_cast<uint64_t>(json_size(path, where + ": data_offsets end", (*off)[1]));

  uint64_t bytes = lt_dtype_size(e.dtype);
  for (int64_t d : e.shape) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
      bad_file(path, "{}: the byte size of shape {} overflows", where, dims_text(e.shape));
  }
  if (e.end < e.begin)
    bad_file(path, "{}: data_offsets [{}, {}] end before they begin", where, e.begin, e.end);
  if (e.end - e.begin != bytes) {
    bad_file(path, "{}: shape {} of {} needs {} bytes but data_offsets [{}, {}] span {}", where,
             dims_text(e.shape), dname, bytes, e.begin, e.end, e.end - e.begin);
  }
  if (e.end > data_size) {
    bad_file(path, "{}: data_offsets [{}, {}] extend past the data ({} bytes; file truncated?)",
             where, e.begin, e.end, data_size);
  }
  return e;
}

std::unique_ptr<lt_checkpoint> open_checkpoint(const std::string& path) {
  auto ck = std::make_unique<lt_checkpoint>();
  ck->path = path;
  ck->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (ck->fd < 0) {
    int err = errno;
    if (err == ENOENT) fail(LT_STATUS_NOT_FOUND, "lt_checkpoint_open: '{}': no such file", path);
    bad_file(path, "cannot open: {}", errno_text(err));
  }
  struct stat st {};
  if (::fstat(ck->fd, &st) != 0) bad_file(path, "cannot stat: {}", errno_text(errno));
  if (S_ISDIR(st.st_mode)) bad_file(path, "is a directory, not a checkpoint file");
  if (!S_ISREG(st.st_mode)) bad_file(path, "is not a regular file");
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) {
    bad_file(path, "file is {} bytes, too short for the 8-byte header length", file_size);
  }

  int err = 0;
  unsigned char len_bytes[8];
  if (!read_at(ck->fd, len_bytes, 8, 0, &err))
    bad_file(path, "reading the header length failed: {}", err ? errno_text(err) : "end of file");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > file_size - 8) {
    bad_file(path, "header length {} exceeds the {} bytes that follow it (file truncated?)",
             header_len, file_size - 8);
  }
  if (header_len > kMaxHeaderBytes)
    bad_file(path, "header length {} exceeds the limit of {} bytes", header_len, kMaxHeaderBytes);
  if (header_len < 2) bad_file(path, "header length {} is too small for a JSON object", header_len);
  std::string header(header_len, '\0');
  if (!read_at(ck->fd, header.data(), header_len, 8, &err))
    bad_file(path, "reading the header failed: {}", err ? errno_text(err) : "end of file");
  if (header[0] != '{') bad_file(path, "header does not start with '{{'");

  // Duplicate keys are an error (nlohmann would keep the last one silently).
  std::set<std::string> top_keys, meta_keys;
  std::string duplicate, current_top;
  auto on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event != Json::parse_event_t::key || !parsed.is_string()) return true;
    const std::string& k = parsed.get_ref<const std::string&>();
    if (depth == 1) {
      current_top = k;
      if (!top_keys.insert(k).second && duplicate.empty()) duplicate = "key '" + k + "'";
    } else if (depth == 2 && current_top == kMetadataKey) {
      if (!meta_keys.insert(k).second && duplicate.empty())
        duplicate = "__metadata__ key '" + k + "'";
    }
    return true;
  };
  Json j;
  try {
    j = Json::parse(header.begin(), header.end(), on_event);
  } catch (const Json::parse_error& e) {
    bad_file(path, "header is not valid JSON: {}", e.what());
  }
  if (!duplicate.empty()) bad_file(path, "header has a duplicate {}", duplicate);
  if (!j.is_object()) bad_file(path, "header is {}, not a JSON object", j.type_name());

  ck->data_start = 8 + header_len;
  const uint64_t data_size = file_size - ck->data_start;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == kMetadataKey) {
      if (!it.value().is_object())
        bad_file(path, "__metadata__ is {}, not an object", it.value().type_name());
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string())
          bad_file(path, "__metadata__ value of '{}' is {}, not a string", m.key(),
                   m.value().type_name());
        ck->metadata.emplace_back(m.key(), m.value().get<std::string>());
      }
      continue;
    }
    ck->entries.push_back(parse_entry(path, it.key(), it.value(), data_size));
  }
  std::sort(ck->metadata.begin(), ck->metadata.end());

  // Byte ranges must tile the data exactly: no overlap, no hole, nothing after the last one.
  // (Stable: empty tensors at one offset keep the header's order.)
  std::stable_sort(ck->entries.begin(), ck->entries.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const std::string* last = nullptr;
  for (const auto& e : ck->entries) {
    if (e.begin < covered) {
      bad_file(path, "tensor '{}': data_offsets [{}, {}] overlap tensor '{}' (which ends at {})",
               e.name, e.begin, e.end, *last, covered);
    }
    if (e.begin > covered) {
      bad_file(path, "tensor '{}': data bytes [{}, {}) before it belong to no tensor", e.name,
               covered, e.begin);
    }
    if (e.end > covered || !last) last = &e.name;
    covered = std::max(covered, e.end);
  }
  if (covered != data_size) {
    bad_file(path, "the data is {} bytes but the tensors cover only {} (trailing bytes)", data_size,
             covered);
  }
  for (size_t i = 0; i < ck->entries.size(); ++i) ck->by_name.emplace(ck->entries[i].name, i);
  return ck;
}

const lt_checkpoint::Entry& find_entry(const lt_checkpoint* ck, const char* fn, const char* name) {
  auto it = ck->by_name.find(name);
  if (it == ck->by_name.end())
    fail(LT_STATUS_NOT_FOUND, "{}: '{}': no tensor named '{}'", fn, ck->path, name);
  return ck->entries[it->second];
}

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
  Json header = Json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (size_t i = 0; i < count; ++i) {
    const Node* n = tensors[i]->node;
    uint64_t bytes = n->nbytes();
    header[names[i]] = {{"dtype", format_dtype(n->dtype)},
                        {"shape", std::vector<int64_t>(n->shape.begin(), n->shape.end())},
                        {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump(-1, ' ', false, Json::error_handler_t::strict);
  } catch (const Json::type_error& e) {
    fail(LT_STATUS_INVALID_ARGUMENT, "{}: '{}': a tensor name or metadata string is not UTF-8: {}",
         fn, path, e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  materialize_all(tensors, count);

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
  int fd = tmp.fd;
  tmp.fd = -1;
  if (::close(fd) != 0)
    fail(LT_STATUS_IO_ERROR, "{}: '{}': closing failed: {}", fn, path, errno_text(errno));
  if (::rename(tmp.path.c_str(), path.c_str()) != 0) {
    fail(LT_STATUS_IO_ERROR, "{}: '{}': renaming the temporary file over it failed: {}", fn, path,
         errno_text(errno));
  }
  tmp.committed = true;
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
