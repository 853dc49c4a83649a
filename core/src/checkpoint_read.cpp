// checkpoint_read.cpp — opening a safetensors file: the header streamed (SAX) straight into
// the entries, every length and range checked against the file before anything is allocated
// (checkpoint.h).
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

#include "error.h"
#include "lazytensor/regular_file.hpp"

#include "checkpoint.h"

namespace lt::ckpt {
namespace {

// ---- reading ---------------------------------------------------------------------------------

// An IO_ERROR about the file being opened: "lt_checkpoint_open: 'path': what".
template <class... Args>
[[noreturn]] void bad_file(const std::string& path, fmt::format_string<Args...> f, Args&&... args) {
  fail(LT_STATUS_IO_ERROR, "lt_checkpoint_open: '{}': {}", path,
       fmt::format(f, std::forward<Args>(args)...));
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

}  // namespace

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

}  // namespace lt::ckpt
