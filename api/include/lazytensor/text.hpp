// text.hpp — header-only character-level text data for language models: a corpus read from
// plain-text files (by default Debian's `fortunes` package: English quotations, jokes and
// literature excerpts, fortune(6)'s "%"-separated format), a character vocabulary, a
// train/validation split, and seeded random windows as [batch, context] token tensors.
#ifndef LAZYTENSOR_TEXT_HPP
#define LAZYTENSOR_TEXT_HPP

#include "lazytensor/data.hpp"
#include "lazytensor/lazytensor.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace lt::text {

// Where Debian's fortunes package puts its English text files.
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

// Bytes <-> token ids: the sorted set of distinct bytes of the text it was built from.
class Vocab {
 public:
  Vocab() = default;
  explicit Vocab(const std::string& text) {
    std::array<bool, 256> seen{};
    for (unsigned char c : text) seen[c] = true;
    for (int c = 0; c < 256; ++c)
      if (seen[c]) chars_.push_back(static_cast<char>(c));
    rebuild();
  }
  // From the characters themselves, as stored in a checkpoint's metadata.
  static Vocab from_chars(const std::string& chars) {
    Vocab v;
    v.chars_ = chars;
    v.rebuild();
    return v;
  }
  int64_t size() const { return static_cast<int64_t>(chars_.size()); }
  const std::string& chars() const { return chars_; }
  // The id of byte c, or -1 when the vocabulary does not have it.
  int64_t id(char c) const { return ids_[static_cast<unsigned char>(c)]; }
  char chr(int64_t id) const {
    if (id < 0 || id >= size())
      throw Error(LT_STATUS_INVALID_ARGUMENT, "text: token id " + std::to_string(id) +
                                                  " is outside the vocabulary of " +
                                                  std::to_string(size()));
    return chars_[static_cast<size_t>(id)];
  }
  std::vector<int64_t> encode(const std::string& s) const {
    std::vector<int64_t> out;
    out.reserve(s.size());
    for (char c : s) {
      int64_t t = id(c);
      if (t < 0) {
        throw Error(LT_STATUS_INVALID_ARGUMENT, "text: character '" + std::string(1, c) +
                                                    "' (byte " +
                                                    std::to_string(static_cast<unsigned char>(c)) +
                                                    ") is not in the model's vocabulary");
      }
      out.push_back(t);
    }
    return out;
  }

 private:
  void rebuild() {
    ids_.fill(-1);
    for (size_t i = 0; i < chars_.size(); ++i)
      ids_[static_cast<unsigned char>(chars_[i])] = static_cast<int64_t>(i);
  }
  std::string chars_;
  std::array<int64_t, 256> ids_{};
};

// Reads the plain-text files of `dir` (not recursing; sorted by name, so the corpus is the
// same on every machine with the same package) that are fortune data files: skips the
// ".dat" indexes, the ".u8" links, and the two ASCII-art collections, which are pictures,
// not English. The "%" lines between fortunes become blank lines. A file path instead of a
// directory reads that one file as it is.
inline std::string load_corpus(const std::string& path = kFortunesDir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    throw Error(LT_STATUS_NOT_FOUND, path +
                                         ": no such file or directory (the default corpus is "
                                         "Debian's fortunes package: apt-get install fortunes)");
  }
  // Opened as every file LazyTensor reads (lazytensor/regular_file.hpp): non-blocking, regular
  // files only, at most 1 GiB.
  auto read = [](const fs::path& p) {
    lt::file::RegularFile f;
    std::string why, text;
    if (!f.open(p.string(), &why) || !f.read_all(&text, uint64_t{1} << 30, &why))
      throw Error(LT_STATUS_IO_ERROR, p.string() + ": cannot read: it " + why);
    return text;
  };
  if (!fs::is_directory(status)) return read(path);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(path, ec)) {
    const fs::path& p = e.path();
    std::string name = p.filename().string();
    if (!e.is_regular_file() || e.is_symlink() || p.has_extension() || name == "art" ||
        name == "ascii-art")
      continue;
    files.push_back(p);
  }
  if (ec) throw Error(LT_STATUS_IO_ERROR, path + ": cannot list (" + ec.message() + ")");
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& p : files) {
    std::istringstream in(read(p));
    std::string line;
    while (std::getline(in, line)) text += line == "%" ? "\n" : line + "\n";
  }
  if (text.size() < 1024) {
    throw Error(LT_STATUS_IO_ERROR, path + ": only " + std::to_string(text.size()) +
                                        " bytes of text; a language model needs more");
  }
  return text;
}

// A tokenised corpus split into training and validation parts (the last `val_fraction` of
// the text: contiguous, so no validation window overlaps a training one).
struct Corpus {
  Vocab vocab;
  std::vector<int64_t> train, val;

  static Corpus from_text(const std::string& text, double val_fraction = 0.1) {
    if (!(val_fraction > 0.0 && val_fraction < 1.0))
      throw Error(LT_STATUS_INVALID_ARGUMENT, "text: validation fraction must be in (0, 1)");
    Corpus c;
    c.vocab = Vocab(text);
    std::vector<int64_t> all = c.vocab.encode(text);
    auto cut = static_cast<size_t>(static_cast<double>(all.size()) * (1.0 - val_fraction));
    c.train.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(cut));
    c.val.assign(all.begin() + static_cast<std::ptrdiff_t>(cut), all.end());
    return c;
  }
};

// `batch` windows of `context` + 1 tokens from `tokens`: inputs [batch, context] and the
// next-token targets [batch * context], both i64. Window starts come from (seed, step), so a
// run resumed at step s sees the batches an uninterrupted run would.
// With a Shard (lazytensor/data.hpp): this process's rows of that global batch.
inline std::pair<Tensor, Tensor> sample_batch(const Device& dev, const std::vector<int64_t>& tokens,
                                              int64_t batch, int64_t context, uint64_t seed,
                                              uint64_t step, const data::Shard& shard = {}) {
  if (static_cast<int64_t>(tokens.size()) <= context + 1) {
    throw Error(LT_STATUS_INVALID_ARGUMENT, "text: " + std::to_string(tokens.size()) +
                                                " tokens are too few for context " +
                                                std::to_string(context));
  }
  const uint64_t span = tokens.size() - static_cast<uint64_t>(context) - 1;
  if (shard.world < 1 || shard.rank < 0 || shard.rank >= shard.world || shard.world > batch) {
    throw Error(LT_STATUS_INVALID_ARGUMENT,
                "text: shard " + std::to_string(shard.rank) + " of " + std::to_string(shard.world) +
                    " does not fit batch size " + std::to_string(batch));
  }
  const int64_t first = shard.first(batch), rows = shard.count(batch);
  std::vector<int64_t> x(static_cast<size_t>(rows * context)), y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = first + r;
    uint64_t start =
        lt_random_bits(seed, step * static_cast<uint64_t>(batch) + static_cast<uint64_t>(b)) % span;
    for (int64_t t = 0; t < context; ++t) {
      x[static_cast<size_t>(r * context + t)] = tokens[start + static_cast<uint64_t>(t)];
      y[static_cast<size_t>(r * context + t)] = tokens[start + static_cast<uint64_t>(t) + 1];
    }
  }
  return {Tensor::from(dev, x, {rows, context}).set_name("x"),
          Tensor::from(dev, y, {rows * context}).set_name("y")};
}

}  // namespace lt::text

#endif  // LAZYTENSOR_TEXT_HPP
