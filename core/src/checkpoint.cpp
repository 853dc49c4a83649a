// checkpoint.cpp — lt_checkpoint_*: tensors to and from safetensors files (docs/checkpoints.md).
// Saving writes a temporary file next to the target, fsyncs it and renames it over the target;
// opening validates the whole header against the file before any tensor is read.
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

#include "device_client.h"
#include "error.h"
#include "executor.h"
#include "lazytensor/regular_file.hpp"
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

// What a tensor entry of the header holds, as the SAX reader below collects it.
struct RawEntry {
  bool is_object = false;
  const char* type = "object";  // the JSON type of the entry's value, when not an object
  bool has_dtype = false, dtype_ok = false;
  std::string dtype;
  bool has_shape = false, shape_ok = false;
  std::vector<int64_t> shape;
  bool has_offsets = false, offsets_ok = false;
  std::vector<int64_t> offsets;
};

// A name as a message shows it: control bytes (NUL included) escaped as \u00XX.
std::string shown(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) {
    if (ch < 0x20)
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(ch));
    else
      out += static_cast<char>(ch);
  }
  return out;
}

lt_checkpoint::Entry make_entry(const std::string& path, const std::string& name, const RawEntry& v,
                                uint64_t data_size) {
  auto where = [&] { return "tensor '" + name + "'"; };  // built only for an error message
  if (!v.is_object) bad_file(path, "{}: entry is {}, not an object", where(), v.type);
  lt_checkpoint::Entry e;
  e.name = name;

  if (!v.has_dtype || !v.dtype_ok) bad_file(path, "{}: \"dtype\" string missing", where());
  const std::string& dname = v.dtype;
  for (const auto& d : kDtypes)
    if (dname == d.name) e.dtype = d.dtype;
  if (e.dtype == LT_DTYPE_INVALID) {
    for (const char* other : kOtherFormatDtypes) {
      if (dname == other) {
        fail(LT_STATUS_UNSUPPORTED,
             "lt_checkpoint_open: '{}': {}: dtype {} is not supported by LazyTensor (supported: "
             "F32 F64 I32 I64 BOOL BF16 F16)",
             path, where(), dname);
      }
    }
    bad_file(path, "{}: unknown dtype \"{}\"", where(), dname);
  }

  if (!v.has_shape || !v.shape_ok) bad_file(path, "{}: \"shape\" array missing", where());
  e.shape = v.shape;
  if (!v.has_offsets || !v.offsets_ok || v.offsets.size() != 2)
    bad_file(path, "{}: \"data_offsets\" must be an array [begin, end]", where());
  e.begin = static_cast<uint64_t>(v.offsets[0]);
  e.end = static_cast<uint64_t>(v.offsets[1]);

  uint64_t bytes = lt_dtype_size(e.dtype);
  for (int64_t d : e.shape) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
      bad_file(path, "{}: the byte size of shape {} overflows", where(), dims_text(e.shape));
  }
  if (e.end < e.begin)
    bad_file(path, "{}: data_offsets [{}, {}] end before they begin", where(), e.begin, e.end);
  if (e.end - e.begin != bytes) {
    bad_file(path, "{}: shape {} of {} needs {} bytes but data_offsets [{}, {}] span {}", where(),
             dims_text(e.shape), dname, bytes, e.begin, e.end, e.end - e.begin);
  }
  if (e.end > data_size) {
    bad_file(path, "{}: data_offsets [{}, {}] extend past the data ({} bytes; file truncated?)",
             where(), e.begin, e.end, data_size);
  }
  return e;
}

// Reads the header as a stream of SAX events straight into entries: no JSON tree and no
// ordered map searched per key (issue #29: that was quadratic, 200,000 entries took 31 s), so
// a header opens in time linear in its size. Depth 1 is the top object; depth 2 a tensor
// entry or __metadata__; depth 3 the arrays shape and data_offsets. Other fields of an entry
// are skipped whatever they hold.
class HeaderReader : public nlohmann::json_sax<nlohmann::json> {
 public:
  HeaderReader(lt_checkpoint& ck, uint64_t data_size) : ck_(ck), data_size_(data_size) {}

  bool null() override { return scalar("null", "null"); }
  bool boolean(bool v) override { return scalar("boolean", v ? "true" : "false"); }
  bool number_integer(number_integer_t v) override {
    if (in_dims()) bad_file(ck_.path, "{}{} is negative", what_dim(), v);
    return scalar("number", std::to_string(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (in_dims()) {
      if (v > static_cast<uint64_t>(INT64_MAX))
        bad_file(ck_.path, "{}{} is too large", what_dim(), v);
      dims().push_back(static_cast<int64_t>(v));
      return true;
    }
    return scalar("number", std::to_string(v));
  }
  bool number_float(number_float_t, const string_t& text) override {
    return scalar("number", text);
  }
  bool string(string_t& v) override {
    if (depth_ == 2 && meta_) {
      if (v.find('\0') != std::string::npos)
        bad_file(ck_.path, "__metadata__ value of '{}' contains a NUL byte (values are C strings)",
                 shown(meta_key_));
      ck_.metadata.emplace_back(meta_key_, std::move(v));
      return true;
    }
    if (depth_ == 2 && field_ == kDtype) {
      raw_.dtype_ok = true;
      raw_.dtype = std::move(v);
      return true;
    }
    return scalar("string", nlohmann::json(v).dump());
  }
  bool binary(binary_t&) override { return scalar("binary", "binary"); }

  bool start_object(std::size_t) override { return open(false); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& k) override {
    if (depth_ == 1) {
      if (k.find('\0') != std::string::npos)
        bad_file(ck_.path, "tensor name '{}' contains a NUL byte (names are C strings)", shown(k));
      // Duplicate tensor names are found once all are read (open_checkpoint's name index).
      name_ = std::move(k);
      meta_ = name_ == kMetadataKey;
      if (meta_ && std::exchange(seen_meta_, true))
        bad_file(ck_.path, "header has a duplicate key '{}'", name_);
      reset_raw();
    } else if (depth_ == 2 && meta_) {
      if (k.find('\0') != std::string::npos)
        bad_file(ck_.path, "__metadata__ key '{}' contains a NUL byte (keys are C strings)",
                 shown(k));
      if (!meta_keys_.insert(k).second)
        bad_file(ck_.path, "header has a duplicate __metadata__ key '{}'", k);
      meta_key_ = std::move(k);
    } else if (depth_ == 2) {
      field_ = k == "dtype"          ? kDtype
               : k == "shape"        ? kShape
               : k == "data_offsets" ? kOffsets
                                     : kOther;
      if (field_ == kDtype) {  // a repeated field: the last one counts, as in a JSON object
        raw_.has_dtype = true;
        raw_.dtype_ok = false;
      } else if (field_ == kShape) {
        raw_.has_shape = true;
        raw_.shape_ok = false;
        raw_.shape.clear();
      } else if (field_ == kOffsets) {
        raw_.has_offsets = true;
        raw_.offsets_ok = false;
        raw_.offsets.clear();
      }
    }
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    bad_file(ck_.path, "header is not valid JSON: {}", e.what());
  }

 private:
  enum Field { kOther, kDtype, kShape, kOffsets };

  bool in_dims() const {
    return depth_ == 3 && !meta_ && raw_.is_object &&
           ((field_ == kShape && raw_.shape_ok) || (field_ == kOffsets && raw_.offsets_ok));
  }
  std::vector<int64_t>& dims() { return field_ == kShape ? raw_.shape : raw_.offsets; }
  std::string what_dim() const {
    std::string w = "tensor '" + name_ + "': ";
    if (field_ == kShape) return w + "a dimension ";
    return w + (raw_.offsets.empty() ? "data_offsets begin " : "data_offsets end ");
  }

  // A value that is no container; `type` its JSON type, `text` as JSON.
  bool scalar(const char* type, const std::string& text) {
    if (depth_ == 1) {
      if (meta_) bad_file(ck_.path, "__metadata__ is {}, not an object", type);
      raw_.type = type;
      add_entry();
    } else if (depth_ == 2 && meta_) {
      bad_file(ck_.path, "__metadata__ value of '{}' is {}, not a string", meta_key_, type);
    } else if (in_dims()) {
      bad_file(ck_.path, "{}is {}, not a non-negative integer", what_dim(), text);
    }
    return true;
  }

  bool open(bool array) {
    const char* type = array ? "array" : "object";
    if (depth_ == 1) {
      if (meta_ && array) bad_file(ck_.path, "__metadata__ is array, not an object");
      raw_.is_object = !array;
      raw_.type = type;
    } else if (depth_ == 2 && meta_) {
      bad_file(ck_.path, "__metadata__ value of '{}' is {}, not a string", meta_key_, type);
    } else if (depth_ == 2 && raw_.is_object) {
      if (field_ == kShape) raw_.shape_ok = array;
      if (field_ == kOffsets) raw_.offsets_ok = array;
    } else if (in_dims()) {
      bad_file(ck_.path, "{}is {}, not a non-negative integer", what_dim(), type);
    }
    ++depth_;
    return true;
  }

  bool close() {
    if (in_dims() && field_ == kShape && raw_.shape.size() > kMaxRank) {
      fail(LT_STATUS_UNSUPPORTED,
           "lt_checkpoint_open: '{}': tensor '{}': rank {} exceeds the limit of {}", ck_.path,
           name_, raw_.shape.size(), kMaxRank);
    }
    --depth_;
    if (depth_ == 2) field_ = kOther;  // the field's container ended
    if (depth_ == 1) {
      field_ = kOther;
      if (!meta_) add_entry();
    }
    return true;
  }

  void add_entry() {
    ck_.entries.push_back(make_entry(ck_.path, name_, raw_, data_size_));
    reset_raw();
  }
  // Reused from entry to entry (no allocation per entry for its shape and offsets).
  void reset_raw() {
    raw_.is_object = false;
    raw_.type = "object";
    raw_.has_dtype = raw_.dtype_ok = raw_.has_shape = raw_.shape_ok = false;
    raw_.has_offsets = raw_.offsets_ok = false;
    raw_.dtype.clear();
    raw_.shape.clear();
    raw_.offsets.clear();
  }

  lt_checkpoint& ck_;
  uint64_t data_size_;
  int depth_ = 0;
  bool meta_ = false, seen_meta_ = false;
  Field field_ = kOther;
  std::string name_, meta_key_;
  RawEntry raw_;
  std::unordered_set<std::string> meta_keys_;
};

std::unique_ptr<lt_checkpoint> open_checkpoint(const std::string& path) {
  auto ck = std::make_unique<lt_checkpoint>();
  ck->path = path;
  lt::file::RegularFile file;
  std::string why;
  if (!file.open(path, &why)) {
    if (file.error() == ENOENT)
      fail(LT_STATUS_NOT_FOUND, "lt_checkpoint_open: '{}': no such file", path);
    bad_file(path, "{}", why);
  }
  const uint64_t file_size = file.size();
  ck->fd = file.release();
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

  ck->data_start = 8 + header_len;
  const uint64_t data_size = file_size - ck->data_start;
  HeaderReader reader(*ck, data_size);
  nlohmann::json::sax_parse(header.begin(), header.end(), &reader);
  std::sort(ck->metadata.begin(), ck->metadata.end());

  // One index by name, which also finds duplicate names (a set of names searched per key
  // while parsing cost as much again).
  std::vector<lt_checkpoint::Entry>& es = ck->entries;
  ck->by_name.reserve(es.size());
  for (size_t i = 0; i < es.size(); ++i)
    if (!ck->by_name.emplace(es[i].name, i).second)
      bad_file(path, "header has a duplicate key '{}'", es[i].name);

  // Byte ranges must tile the data exactly: no overlap, no hole, nothing after the last one.
  // (Stable: empty tensors at one offset keep the header's order.)
  std::vector<uint32_t> order(es.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return es[a].begin != es[b].begin ? es[a].begin < es[b].begin : es[a].end < es[b].end;
  });
  uint64_t covered = 0;
  const std::string* last = nullptr;
  for (uint32_t i : order) {
    const auto& e = es[i];
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
  // Entries in data order (lt_checkpoint_name's order), the index following them.
  std::vector<size_t> position(es.size());
  std::vector<lt_checkpoint::Entry> sorted;
  sorted.reserve(es.size());
  for (uint32_t i : order) {
    position[i] = sorted.size();
    sorted.push_back(std::move(es[i]));
  }
  es = std::move(sorted);
  for (auto& [name, index] : ck->by_name) index = position[index];
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
