// IdxDataTest.cpp — the idx image loader (MNIST format, plain and gzip) and Fashion-MNIST from
// Debian's dataset-fashion-mnist: values and shapes read back, every lying header refused
// before anything is allocated with the file and the field named, a FIFO refused without
// blocking, and a missing set named with the package to install.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lazytensor/data.hpp"

namespace {

namespace fs = std::filesystem;

std::string be32(uint32_t v) {
  return {char(v >> 24), char(v >> 16 & 255), char(v >> 8 & 255), char(v & 255)};
}

// An idx file of unsigned bytes: magic, then one u32 per dimension, then `data`.
std::string idx(std::vector<uint32_t> dims, const std::string& data) {
  std::string s = std::string("\0\0\x08", 3) + char(dims.size());
  for (uint32_t d : dims) s += be32(d);
  return s + data;
}

fs::path dir() {
  fs::path d = fs::temp_directory_path() / ("lt_idx_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

std::string write_plain(const std::string& name, const std::string& bytes) {
  fs::path p = dir() / name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p.string();
}

std::string write_gz(const std::string& name, const std::string& bytes) {
  fs::path p = dir() / name;
  gzFile f = gzopen(p.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  return p.string();
}

std::string error_of(const std::string& images, const std::string& labels) {
  try {
    lt::data::load_idx(images, labels);
  } catch (const lt::Error& e) {
    return e.what();
  }
  return "";
}

// Three 2x2 images 0..11 and labels 7, 0, 9.
const std::string kPixels = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
const std::string kLabels = {7, 0, 9};

TEST(IdxData, ReadsPlainAndGzipAlikeScaledToUnitRange) {
  for (bool gz : {false, true}) {
    auto write = gz ? write_gz : write_plain;
    auto d = lt::data::load_idx(write(gz ? "i.gz" : "i", idx({3, 2, 2}, kPixels)),
                                write(gz ? "l.gz" : "l", idx({3}, kLabels)));
    ASSERT_EQ(d.rows(), 3) << gz;
    EXPECT_EQ(d.features, 4);
    EXPECT_EQ(d.y, (std::vector<int64_t>{7, 0, 9}));
    EXPECT_FLOAT_EQ(d.x[5], 5.0f / 255.0f);
    EXPECT_FLOAT_EQ(d.x[11], 11.0f / 255.0f);
  }
}

TEST(IdxData, LyingOrBrokenHeadersAreRefusedNamingFileAndField) {
  const std::string labels = write_plain("ok_l", idx({3}, kLabels));
  // 10^8 images declared in a 28-byte file: refused from the header, nothing allocated.
  std::string big = write_plain("big", idx({100000000u, 28, 28}, kPixels));
  std::string msg = error_of(big, labels);
  EXPECT_NE(msg.find(big), std::string::npos) << msg;
  EXPECT_NE(msg.find("header declares"), std::string::npos) << msg;
  // The same lie compressed: the gzip trailer's length disagrees.
  std::string big_gz = write_gz("big.gz", idx({100000000u, 28, 28}, kPixels));
  msg = error_of(big_gz, labels);
  EXPECT_NE(msg.find("decompresses to"), std::string::npos) << msg;
  // Truncated, bad magic, another element type, the wrong rank, extra bytes.
  msg = error_of(write_plain("short", idx({3, 2, 2}, kPixels.substr(0, 7))), labels);
  EXPECT_NE(msg.find("header declares 12 elements"), std::string::npos) << msg;
  msg = error_of(write_plain("magic", "PK\x03\x04" + kPixels), labels);
  EXPECT_NE(msg.find("bad magic"), std::string::npos) << msg;
  std::string f32 = idx({3, 2, 2}, kPixels);
  f32[2] = 0x0d;
  msg = error_of(write_plain("f32", f32), labels);
  EXPECT_NE(msg.find("element type 0x0d"), std::string::npos) << msg;
  msg = error_of(write_plain("rank", idx({12}, kPixels)), labels);
  EXPECT_NE(msg.find("rank 1, expected 3"), std::string::npos) << msg;
  msg = error_of(write_plain("zero", idx({0, 2, 2}, "")), labels);
  EXPECT_NE(msg.find("dimension 0 is 0"), std::string::npos) << msg;
  // Counts that disagree, and a label beyond the classes.
  const std::string images = write_plain("ok_i", idx({3, 2, 2}, kPixels));
  msg = error_of(images, write_plain("two", idx({2}, kLabels.substr(0, 2))));
  EXPECT_NE(msg.find("holds 3 images but"), std::string::npos) << msg;
  msg = error_of(images, write_plain("label", idx({3}, std::string{1, 2, 10})));
  EXPECT_NE(msg.find("label 10 of item 2"), std::string::npos) << msg;
}

TEST(IdxData, AFifoIsRefusedWithoutBlockingAndAMissingFileIsNotFound) {
  fs::path fifo = dir() / "fifo";
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string msg = error_of(fifo.string(), fifo.string());
  EXPECT_NE(msg.find("FIFO"), std::string::npos) << msg;
  try {
    lt::data::load_idx((dir() / "absent").string(), (dir() / "absent").string());
    ADD_FAILURE() << "no error";
  } catch (const lt::Error& e) {
    EXPECT_EQ(e.code(), LT_STATUS_NOT_FOUND) << e.what();
  }
}

TEST(FashionMnist, AMissingSetNamesTheDebianPackage) {
  try {
    lt::data::load_fashion_mnist((dir() / "nowhere").string());
    ADD_FAILURE() << "no error";
  } catch (const lt::Error& e) {
    EXPECT_EQ(e.code(), LT_STATUS_NOT_FOUND);
    EXPECT_NE(std::string(e.what()).find("dataset-fashion-mnist"), std::string::npos) << e.what();
  }
}

// tools/install-deps.sh installs dataset-fashion-mnist: 60,000 + 10,000 images of 28x28, ten
// classes of exactly 6,000 and 1,000 each.
TEST(FashionMnist, LoadsTheDebianPackagesSet) {
  auto [train, test] = lt::data::load_fashion_mnist();
  ASSERT_EQ(train.rows(), 60000);
  ASSERT_EQ(test.rows(), 10000);
  EXPECT_EQ(train.features, 784);
  std::array<int, 10> per_class{};
  for (int64_t y : test.y) ++per_class.at(static_cast<size_t>(y));
  for (int c : per_class) EXPECT_EQ(c, 1000);
  double sum = 0;
  for (float v : train.x) sum += v;
  EXPECT_NEAR(sum / static_cast<double>(train.x.size()), 0.286, 0.002);  // its known mean
}

}  // namespace
