// data.hpp — header-only loaders for labelled data sets: small CSV sets (the shipped digits
// set: 64 pixel values 0..16 then a label 0..9 per row) and image sets in the idx format
// (MNIST, Fashion-MNIST from Debian's dataset-fashion-mnist), plain or gzip-compressed (zlib:
// link ZLIB::ZLIB), with validation, normalisation, seeded shuffling, train/test split and
// static-shape batching. Owned by the train engineer.
#ifndef LAZYTENSOR_DATA_HPP
#define LAZYTENSOR_DATA_HPP

#include "lazytensor/lazytensor.hpp"
#include "lazytensor/lt_random.h"
#include "lazytensor/regular_file.hpp"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace lt::data {

// Rows of `features` floats and one integer label each.
struct Dataset {
  int64_t features = 0;
  int64_t classes = 0;
  std::vector<float> x;  // rows * features, row-major
  std::vector<int64_t> y;
  int64_t rows() const { return static_cast<int64_t>(y.size()); }
};

namespace detail {
[[noreturn]] inline void fail_at(const std::string& path, int64_t line, const std::string& what) {
  throw Error(LT_STATUS_IO_ERROR, path + ":" + std::to_string(line) + ": " + what);
}
}  // namespace detail

// Reads `path` (gzip or plain; gzread passes plain files through). Each non-blank line must
// hold features + 1 comma-separated numbers, the last an integer label in [0, classes).
// Errors (lt::Error, IO_ERROR) name the file and line: missing file, empty file, wrong
// column count, a non-numeric cell, a label out of range.
inline Dataset load_csv(const std::string& path, int64_t features, int64_t classes) {
  if (features <= 0 || classes <= 0) {
    throw Error(LT_STATUS_INVALID_ARGUMENT, "load_csv: features and classes must be positive");
  }
  // Opened as every file LazyTensor reads (lazytensor/regular_file.hpp): a FIFO or a device
  // named like the data set is refused, never waited on.
  lt::file::RegularFile file;
  std::string why;
  if (!file.open(path, &why)) {
    throw Error(file.error() == ENOENT ? LT_STATUS_NOT_FOUND : LT_STATUS_IO_ERROR,
                path + ": cannot open (" + why + ")");
  }
  gzFile f = gzdopen(file.fd(), "rb");
  if (!f) throw Error(LT_STATUS_IO_ERROR, path + ": cannot open (out of memory)");
  file.release();  // gzclose closes it
  std::string text;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  int errnum = 0;
  const char* zmsg = n < 0 ? gzerror(f, &errnum) : nullptr;
  std::string zerr = zmsg ? zmsg : "";
  gzclose(f);
  if (n < 0) throw Error(LT_STATUS_IO_ERROR, path + ": read error (" + zerr + ")");

  Dataset d;
  d.features = features;
  d.classes = classes;
  size_t pos = 0;
  int64_t line_no = 0;
  std::vector<double> cells;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    cells.clear();
    size_t c = 0;
    while (true) {
      size_t comma = line.find(',', c);
      std::string cell = line.substr(c, comma == std::string::npos ? std::string::npos : comma - c);
      size_t a = cell.find_first_not_of(" \t"), b = cell.find_last_not_of(" \t");
      cell = a == std::string::npos ? "" : cell.substr(a, b - a + 1);
      char* stop = nullptr;
      errno = 0;
      double v = cell.empty() ? 0.0 : std::strtod(cell.c_str(), &stop);
      if (cell.empty() || *stop != '\0' || errno == ERANGE || !std::isfinite(v)) {
        detail::fail_at(
            path, line_no,
            "column " + std::to_string(cells.size() + 1) + ": '" + cell + "' is not a number");
      }
      cells.push_back(v);
      if (comma == std::string::npos) break;
      c = comma + 1;
    }
    if (static_cast<int64_t>(cells.size()) != features + 1) {
      detail::fail_at(path, line_no,
                      "expected " + std::to_string(features + 1) + " columns (" +
                          std::to_string(features) + " features and a label), got " +
                          std::to_string(cells.size()));
    }
    double label = cells.back();
    if (label != std::floor(label) || label < 0 || label >= static_cast<double>(classes)) {
      detail::fail_at(path, line_no,
                      "label " + std::to_string(label) + " is not an integer in [0, " +
                          std::to_string(classes) + ")");
    }
    for (int64_t k = 0; k < features; ++k) d.x.push_back(static_cast<float>(cells[k]));
    d.y.push_back(static_cast<int64_t>(label));
  }
  if (d.y.empty()) throw Error(LT_STATUS_IO_ERROR, path + ": empty (no data rows)");
  return d;
}

// The shipped digits set: 64 features, 10 classes.
inline Dataset load_digits(const std::string& path) {
  return load_csv(path, 64, 10);
}

// ---- idx files (the MNIST format): a big-endian header, magic 0x0000 <type> <rank>, one
// u32 per dimension, then the elements. Only unsigned bytes (type 0x08) are read here.
namespace detail {

// The bytes of an idx file, plain or gzip: the header is read first and every length it
// declares is checked against the file (a plain file's size; a gzip member's trailer, ISIZE,
// and deflate's maximum ratio) before the payload is allocated.
class IdxReader {
 public:
  IdxReader(const std::string& path, int rank) : path_(path), rank_(rank) {
    std::string why;
    if (!file_.open(path, &why)) {
      throw Error(file_.error() == ENOENT ? LT_STATUS_NOT_FOUND : LT_STATUS_IO_ERROR,
                  path + ": cannot open (" + why + ")");
    }
    file_size_ = file_.size();
    unsigned char magic[2] = {0, 0};
    gzip_ = file_.size() >= 18 && file_.read_at(magic, 2, 0, nullptr) && magic[0] == 0x1f &&
            magic[1] == 0x8b;
    if (gzip_) {
      unsigned char t[4];
      if (!file_.read_at(t, 4, file_.size() - 4, &why)) fail("gzip trailer: " + why);
      isize_ = uint32_t(t[0]) | uint32_t(t[1]) << 8 | uint32_t(t[2]) << 16 | uint32_t(t[3]) << 24;
    }
    gz_ = gzdopen(file_.fd(), "rb");
    if (!gz_) fail("cannot open (out of memory)");
    file_.release();  // gzclose closes it
  }
  IdxReader(const IdxReader&) = delete;
  IdxReader& operator=(const IdxReader&) = delete;
  ~IdxReader() {
    if (gz_) gzclose(gz_);
  }

  // The header's dimensions, checked: magic, unsigned-byte type, the expected rank, no zero
  // dimension, and header + elements equal to what the file holds.
  std::vector<int64_t> header() {
    unsigned char h[4];
    read(h, 4, "header");
    if (h[0] != 0 || h[1] != 0) fail("not an idx file (bad magic)");
    if (h[2] != 0x08) fail("element type 0x" + hex(h[2]) + " (only unsigned bytes, 0x08)");
    if (h[3] != rank_) {
      fail("rank " + std::to_string(h[3]) + ", expected " + std::to_string(rank_));
    }
    dims_.clear();
    uint64_t elements = 1;
    for (int i = 0; i < rank_; ++i) {
      unsigned char d[4];
      read(d, 4, "header");
      const uint64_t v =
          uint64_t(d[0]) << 24 | uint64_t(d[1]) << 16 | uint64_t(d[2]) << 8 | uint64_t(d[3]);
      if (v == 0) fail("dimension " + std::to_string(i) + " is 0");
      elements *= v;  // at most 3 factors below 2^32 each would overflow: checked next
      if (elements > (uint64_t(1) << 40)) fail("declares more than 2^40 elements");
      dims_.push_back(static_cast<int64_t>(v));
    }
    const uint64_t total = 4 + 4 * uint64_t(rank_) + elements;
    // A plain file holds exactly the declared bytes. A gzip member stores its length mod 2^32
    // and deflate expands at most 1032:1, so a header that lies is refused before allocating.
    const bool fits =
        gzip_ ? (total & 0xffffffffu) == isize_ && total <= file_size_ * 1032 : total == file_size_;
    if (!fits) {
      fail("header declares " + std::to_string(elements) + " elements (" + std::to_string(total) +
           " bytes) but the file " +
           (gzip_ ? "decompresses to " + std::to_string(isize_) + " bytes (mod 2^32)"
                  : "is " + std::to_string(file_size_) + " bytes"));
    }
    elements_ = elements;
    return dims_;
  }

  // The elements, then a check that nothing follows them.
  std::vector<uint8_t> payload() {
    std::vector<uint8_t> out(static_cast<size_t>(elements_));
    read(out.data(), out.size(), "data");
    unsigned char extra;
    if (gzread(gz_, &extra, 1) != 0) fail("data continues past the declared elements");
    return out;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(LT_STATUS_IO_ERROR, path_ + ": " + what);
  }

 private:
  void read(void* dst, size_t n, const char* part) {
    auto* p = static_cast<unsigned char*>(dst);
    while (n > 0) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n, 1u << 30));
      const int got = gzread(gz_, p, chunk);
      if (got <= 0) {
        int errnum = 0;
        const char* msg = got < 0 ? gzerror(gz_, &errnum) : nullptr;
        fail(std::string(part) + ": " + (msg ? msg : "truncated (end of file)"));
      }
      p += got;
      n -= static_cast<size_t>(got);
    }
  }
  static std::string hex(unsigned v) {
    const char* digits = "0123456789abcdef";
    return std::string{digits[v >> 4 & 15], digits[v & 15]};
  }

  std::string path_;
  int rank_;
  lt::file::RegularFile file_;
  uint64_t file_size_ = 0;  // at open (the gzip reader takes the descriptor)
  gzFile gz_ = nullptr;
  bool gzip_ = false;
  uint32_t isize_ = 0;
  std::vector<int64_t> dims_;
  uint64_t elements_ = 0;
};

}  // namespace detail

// An image set in the idx format: `images` (rank 3: count, rows, cols) and `labels` (rank 1)
// of unsigned bytes, plain or gzip. Pixels are scaled to [0, 1]; each row of the Dataset is
// one image, rows * cols features. Errors (lt::Error; NOT_FOUND for a missing file, else
// IO_ERROR) name the file and what is wrong: magic, type, rank, a length the file does not
// hold, counts that differ, a label out of range.
inline Dataset load_idx(const std::string& images, const std::string& labels,
                        int64_t classes = 10) {
  detail::IdxReader img(images, 3), lab(labels, 1);
  const auto di = img.header();
  const auto dl = lab.header();
  if (di[0] != dl[0]) {
    throw Error(LT_STATUS_IO_ERROR, images + " holds " + std::to_string(di[0]) + " images but " +
                                        labels + " " + std::to_string(dl[0]) + " labels");
  }
  Dataset d;
  d.features = di[1] * di[2];
  d.classes = classes;
  const std::vector<uint8_t> pixels = img.payload(), y = lab.payload();
  d.x.resize(pixels.size());
  for (size_t i = 0; i < pixels.size(); ++i) d.x[i] = static_cast<float>(pixels[i]) / 255.0f;
  d.y.reserve(y.size());
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] >= classes) {
      lab.fail("label " + std::to_string(y[i]) + " of item " + std::to_string(i) +
               " is not in [0, " + std::to_string(classes) + ")");
    }
    d.y.push_back(y[i]);
  }
  return d;
}

// Where Debian's dataset-fashion-mnist installs Fashion-MNIST.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Fashion-MNIST (60,000 training and 10,000 test images of 28x28, 10 classes) from `dir`
// (default: the Debian package's). A missing set is a NOT_FOUND error naming the package.
inline std::pair<Dataset, Dataset> load_fashion_mnist(const std::string& dir = kFashionMnistDir) {
  auto file = [&](const char* name) {
    std::string p = dir + "/" + name;
    struct stat st {};
    if (::stat((p + ".gz").c_str(), &st) == 0) return p + ".gz";
    if (::stat(p.c_str(), &st) == 0) return p;
    throw Error(LT_STATUS_NOT_FOUND,
                "Fashion-MNIST: " + p +
                    ".gz not found; install Debian's dataset-fashion-mnist "
                    "(sudo apt-get install dataset-fashion-mnist, or tools/install-deps.sh)");
  };
  // Looked up in this order, so a missing set names its first file.
  const std::string train_x = file("train-images-idx3-ubyte"),
                    train_y = file("train-labels-idx1-ubyte"),
                    test_x = file("t10k-images-idx3-ubyte"),
                    test_y = file("t10k-labels-idx1-ubyte");
  return {load_idx(train_x, train_y), load_idx(test_x, test_y)};
}

// One mean and standard deviation over every feature (images: per-pixel statistics would
// erase the spatial structure a convolution learns from).
struct GlobalStandardizer {
  float mean = 0, inv_std = 1;
  static GlobalStandardizer fit(const Dataset& d) {
    double sum = 0, sq = 0;
    for (float v : d.x) {
      sum += v;
      sq += static_cast<double>(v) * v;
    }
    const double n = static_cast<double>(d.x.size()), m = sum / n, var = sq / n - m * m;
    return {static_cast<float>(m), static_cast<float>(var > 1e-12 ? 1.0 / std::sqrt(var) : 1.0)};
  }
  void apply(Dataset& d) const {
    for (float& v : d.x) v = (v - mean) * inv_std;
  }
};

// A seeded permutation of 0..n-1 (Fisher-Yates over lt_random_bits: the stateless generator
// of lt_random.h, so shuffles are reproducible across standard libraries).
inline std::vector<int64_t> permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(lt_random_bits(seed, static_cast<uint64_t>(i)) %
                                     static_cast<uint64_t>(i + 1));
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(j)]);
  }
  return p;
}

inline Dataset select(const Dataset& d, const std::vector<int64_t>& rows) {
  Dataset out;
  out.features = d.features;
  out.classes = d.classes;
  out.x.reserve(rows.size() * static_cast<size_t>(d.features));
  for (int64_t r : rows) {
    auto first = d.x.begin() + r * d.features;
    out.x.insert(out.x.end(), first, first + d.features);
    out.y.push_back(d.y[static_cast<size_t>(r)]);
  }
  return out;
}

// Shuffles with `seed`, then puts round(test_fraction * rows) rows in the test set.
inline std::pair<Dataset, Dataset> train_test_split(const Dataset& d, double test_fraction,
                                                    uint64_t seed) {
  if (!(test_fraction > 0.0 && test_fraction < 1.0)) {
    throw Error(LT_STATUS_INVALID_ARGUMENT, "train_test_split: test_fraction must be in (0, 1)");
  }
  auto p = permutation(d.rows(), seed);
  auto n_test = static_cast<int64_t>(std::llround(test_fraction * static_cast<double>(d.rows())));
  std::vector<int64_t> test(p.begin(), p.begin() + n_test), train(p.begin() + n_test, p.end());
  return {select(d, train), select(d, test)};
}

// Per-feature standardisation fitted on one set and applied to others.
struct Standardizer {
  std::vector<float> mean, inv_std;
  static Standardizer fit(const Dataset& d) {
    Standardizer s;
    auto f = static_cast<size_t>(d.features);
    std::vector<double> sum(f, 0.0), sq(f, 0.0);
    for (size_t i = 0; i < d.x.size(); ++i) {
      sum[i % f] += d.x[i];
      sq[i % f] += static_cast<double>(d.x[i]) * d.x[i];
    }
    double n = static_cast<double>(d.rows());
    for (size_t k = 0; k < f; ++k) {
      double m = sum[k] / n, var = sq[k] / n - m * m;
      s.mean.push_back(static_cast<float>(m));
      // Constant features (always-0 border pixels) are left centred, not blown up.
      s.inv_std.push_back(static_cast<float>(var > 1e-12 ? 1.0 / std::sqrt(var) : 1.0));
    }
    return s;
  }
  void apply(Dataset& d) const {
    auto f = mean.size();
    for (size_t i = 0; i < d.x.size(); ++i) d.x[i] = (d.x[i] - mean[i % f]) * inv_std[i % f];
  }
};

// Fixed-size batches over a data set, reshuffled per epoch. The last partial batch is dropped
// unless keep_last_partial(true): with dynamic shapes (docs/dynamic-shapes.md) a step at its
// size reuses the training step's dynamic executable or bucket instead of a compile per epoch.
// Data-parallel training: process `rank` of `world` takes a contiguous share of every global
// batch, rows [first, first + count); the first (rows % world) ranks take one row more.
// lt::dist::shard() gives the current process's (lazytensor/distributed.hpp).
struct Shard {
  int64_t rank = 0, world = 1;
  int64_t first(int64_t rows) const { return rank * (rows / world) + std::min(rank, rows % world); }
  int64_t count(int64_t rows) const { return rows / world + (rank < rows % world ? 1 : 0); }
};

// Global batches of a shuffled set; with a Shard (set_shard) each batch is this process's rows
// of the global batch, so N processes together see exactly what one process would.
class Batcher {
 public:
  Batcher(const Dataset& d, int64_t batch, uint64_t seed) : d_(d), batch_(batch), seed_(seed) {
    if (batch <= 0 || batch > d.rows()) {
      throw Error(LT_STATUS_INVALID_ARGUMENT, "Batcher: batch size " + std::to_string(batch) +
                                                  " must be in [1, " + std::to_string(d.rows()) +
                                                  "]");
    }
    order_ = permutation(d.rows(), seed_);
  }
  int64_t batches() const {
    const int64_t full = d_.rows() / batch_, rest = d_.rows() % batch_;
    return full + (keep_last_ && rest >= shard_.world ? 1 : 0);  // every process needs a row
  }
  void keep_last_partial(bool keep) { keep_last_ = keep; }
  // Rows of global batch b (batch_ but for a kept last partial batch).
  int64_t batch_rows(int64_t b) const { return std::min(batch_, d_.rows() - b * batch_); }
  // Rows of this process's share of batch b.
  int64_t local_batch(int64_t b) const { return shard_.count(batch_rows(b)); }
  void set_shard(const Shard& s) {
    if (s.world < 1 || s.rank < 0 || s.rank >= s.world || s.world > batch_) {
      throw Error(LT_STATUS_INVALID_ARGUMENT,
                  "Batcher: shard " + std::to_string(s.rank) + " of " + std::to_string(s.world) +
                      " does not fit batch size " + std::to_string(batch_) +
                      " (every process needs at least one row)");
    }
    shard_ = s;
  }
  const Shard& shard() const { return shard_; }
  int64_t global_batch() const { return batch_; }
  // Rows of this process's share of a batch.
  int64_t local_batch() const { return shard_.count(batch_); }
  // Reshuffles for epoch `epoch` (same seed and epoch: same order).
  void shuffle(int64_t epoch) {
    epoch_ = static_cast<uint64_t>(epoch);
    order_ = permutation(d_.rows(), lt_random_bits(seed_, epoch_));
  }
  // Augmentation: rows are images `width` pixels wide (features a multiple of it), each mirrored
  // left-right with probability 1/2, drawn anew every epoch from the seed (0: off). Cheap (a
  // copy in reverse on the host) and the same on every backend and process.
  void set_random_hflip(int64_t width) {
    if (width < 0 || (width > 0 && d_.features % width)) {
      throw Error(LT_STATUS_INVALID_ARGUMENT, "Batcher: flip width " + std::to_string(width) +
                                                  " does not divide " +
                                                  std::to_string(d_.features) + " features");
    }
    flip_width_ = width;
  }
  // Batch b as x [batch, features] f32 and y [batch] i64 tensors on `device`.
  std::pair<Tensor, Tensor> batch(const Device& device, int64_t b) const {
    std::vector<float> x;
    std::vector<int64_t> y;
    gather_rows(b, x, y);
    return {Tensor::from(device, x, {local_batch(b), d_.features}).set_name("x"),
            Tensor::from(device, y, {local_batch(b)}).set_name("y")};
  }
  // Batch b with one-hot f32 labels [batch, classes] (for nn::cross_entropy: keeps the
  // training step free of integer ops).
  std::pair<Tensor, Tensor> batch_one_hot(const Device& device, int64_t b) const {
    std::vector<float> x;
    std::vector<int64_t> y;
    gather_rows(b, x, y);
    std::vector<float> onehot(static_cast<size_t>(local_batch(b) * d_.classes), 0.0f);
    for (size_t i = 0; i < y.size(); ++i) {
      onehot[i * static_cast<size_t>(d_.classes) + static_cast<size_t>(y[i])] = 1.0f;
    }
    return {Tensor::from(device, x, {local_batch(b), d_.features}).set_name("x"),
            Tensor::from(device, onehot, {local_batch(b), d_.classes}).set_name("y")};
  }

 private:
  void gather_rows(int64_t b, std::vector<float>& x, std::vector<int64_t>& y) const {
    if (b < 0 || b >= batches()) {
      throw Error(LT_STATUS_INVALID_ARGUMENT, "Batcher: batch " + std::to_string(b) +
                                                  " out of range [0, " + std::to_string(batches()) +
                                                  ")");
    }
    x.reserve(static_cast<size_t>(batch_ * d_.features));
    y.reserve(static_cast<size_t>(batch_));
    const int64_t first = b * batch_ + shard_.first(batch_rows(b));
    for (int64_t i = first; i < first + local_batch(b); ++i) {
      int64_t r = order_[static_cast<size_t>(i)];
      auto first = d_.x.begin() + r * d_.features;
      const size_t at = x.size();
      x.insert(x.end(), first, first + d_.features);
      if (flip_width_ > 0 &&
          (lt_random_bits(seed_ ^ 0x9e3779b97f4a7c15ull, epoch_ << 32 ^ static_cast<uint64_t>(r)) &
           1)) {
        for (auto row = x.begin() + static_cast<std::ptrdiff_t>(at); row != x.end();
             row += flip_width_)
          std::reverse(row, row + flip_width_);
      }
      y.push_back(d_.y[static_cast<size_t>(r)]);
    }
  }
  const Dataset& d_;  // borrowed: must outlive the Batcher
  int64_t batch_;
  uint64_t seed_;
  std::vector<int64_t> order_;
  Shard shard_;
  bool keep_last_ = false;
  int64_t flip_width_ = 0;  // set_random_hflip
  uint64_t epoch_ = 0;
};

// A whole set as tensors (x [rows, features] f32, y [rows] i64).
inline std::pair<Tensor, Tensor> to_tensors(const Device& device, const Dataset& d) {
  return {Tensor::from(device, d.x, {d.rows(), d.features}), Tensor::from(device, d.y, {d.rows()})};
}

}  // namespace lt::data

#endif  // LAZYTENSOR_DATA_HPP
