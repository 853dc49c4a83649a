// DataTest.cpp — the digits CSV loader (plain and gzip) with its validation errors naming
// file and line, seeded shuffling and splitting, standardisation, static-shape batching and the
// random left-right flip of images.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "lazytensor/data.hpp"

namespace {

namespace fs = std::filesystem;

std::string temp_file(const std::string& name, const std::string& text) {
  fs::path p = fs::temp_directory_path() / ("lt_data_test_" + name);
  std::ofstream(p) << text;
  return p.string();
}

std::string load_error(const std::string& path, int64_t features = 2, int64_t classes = 3) {
  try {
    lt::data::load_csv(path, features, classes);
  } catch (const lt::Error& e) {
    return e.what();
  }
  return "";
}

TEST(DigitsData, LoadsTheShippedSet) {
  auto d = lt::data::load_digits(LT_TEST_DIGITS);
  EXPECT_EQ(d.rows(), 1797);
  EXPECT_EQ(d.features, 64);
  EXPECT_EQ(d.x.size(), 1797u * 64u);
  for (int64_t y : d.y) ASSERT_TRUE(y >= 0 && y < 10);
  EXPECT_EQ(d.y[0], 0);  // the first row of the file is a 0
}

TEST(DigitsData, ReadsGzipAndPlainAlike) {
  std::string text = "1,2,0\n3,4,2\n";
  std::string plain = temp_file("plain.csv", text);
  fs::path gz = fs::temp_directory_path() / "lt_data_test_gz.csv.gz";
  gzFile f = gzopen(gz.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  auto a = lt::data::load_csv(plain, 2, 3), b = lt::data::load_csv(gz.string(), 2, 3);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.y, (std::vector<int64_t>{0, 2}));
}

TEST(DigitsData, ErrorsNameFileAndLine) {
  std::string empty = temp_file("empty.csv", "");
  std::string msg = load_error(empty);
  EXPECT_NE(msg.find(empty), std::string::npos) << msg;
  EXPECT_NE(msg.find("empty"), std::string::npos) << msg;

  std::string cols = temp_file("cols.csv", "1,2,0\n1,2\n");
  msg = load_error(cols);
  EXPECT_NE(msg.find(cols + ":2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected 3 columns"), std::string::npos) << msg;

  std::string nan = temp_file("nan.csv", "1,2,0\n1,abc,1\n");
  msg = load_error(nan);
  EXPECT_NE(msg.find(nan + ":2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'abc' is not a number"), std::string::npos) << msg;

  std::string label = temp_file("label.csv", "1,2,0\n\n1,2,7\n");
  msg = load_error(label);
  EXPECT_NE(msg.find(label + ":3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("label"), std::string::npos) << msg;

  msg = load_error("/nonexistent/digits.csv");
  EXPECT_NE(msg.find("/nonexistent/digits.csv"), std::string::npos) << msg;
}

// Issue #29: a FIFO (no writer) named like a data set hung gzopen; a directory is no data set.
// Both are refused at once, naming the file and what it is.
TEST(DigitsData, AFifoOrDirectoryIsRefusedWithoutBlocking) {
  // Its own name (a FIFO left by a killed run would block any writer of a shared name).
  std::string fifo =
      (fs::temp_directory_path() / ("lt_data_test_fifo_" + std::to_string(::getpid()) + ".csv"))
          .string();
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ::alarm(30);  // the bug was a blocking open: end the test process rather than hang
  std::string msg = load_error(fifo);
  ::alarm(0);
  EXPECT_NE(msg.find(fifo), std::string::npos) << msg;
  EXPECT_NE(msg.find("is a FIFO"), std::string::npos) << msg;
  fs::remove(fifo);
  msg = load_error(fs::temp_directory_path().string());
  EXPECT_NE(msg.find("is a directory"), std::string::npos) << msg;
}

TEST(DigitsData, SplitShuffleAndBatchAreSeeded) {
  auto d = lt::data::load_digits(LT_TEST_DIGITS);
  auto [tr1, te1] = lt::data::train_test_split(d, 0.2, 5);
  auto [tr2, te2] = lt::data::train_test_split(d, 0.2, 5);
  EXPECT_EQ(te1.rows(), 359);
  EXPECT_EQ(tr1.rows() + te1.rows(), d.rows());
  EXPECT_EQ(te1.y, te2.y);
  auto [tr3, te3] = lt::data::train_test_split(d, 0.2, 6);
  EXPECT_NE(te1.y, te3.y);

  auto st = lt::data::Standardizer::fit(tr1);
  st.apply(tr1);
  double mean0 = 0;
  for (int64_t r = 0; r < tr1.rows(); ++r) mean0 += tr1.x[static_cast<size_t>(r * 64 + 20)];
  EXPECT_NEAR(mean0 / static_cast<double>(tr1.rows()), 0.0, 1e-4);

  lt::data::Batcher b(tr1, 100, 1);
  EXPECT_EQ(b.batches(), tr1.rows() / 100);  // the last partial batch is dropped
}

// Data parallelism: the ranks' shards of a global batch are its rows, contiguous, in rank
// order, the first (rows % world) ranks taking one more; N processes see what one sees.
TEST(DigitsData, ShardsOfABatchAreItsRowsInRankOrder) {
  const int64_t firsts[] = {0, 4, 7}, counts[] = {4, 3, 3};
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_EQ((lt::data::Shard{r, 3}.first(10)), firsts[r]);
    EXPECT_EQ((lt::data::Shard{r, 3}.count(10)), counts[r]);
  }
  auto d = lt::data::load_digits(LT_TEST_DIGITS);
  lt::Runtime rt = lt::Runtime::create();
  lt::Device dev = rt.find_device("cpu_eager");
  lt::data::Batcher whole(d, 10, 7);
  whole.shuffle(2);
  std::vector<float> x = whole.batch_one_hot(dev, 3).first.to_vector<float>(), joined;
  for (int64_t r = 0; r < 3; ++r) {
    lt::data::Batcher part(d, 10, 7);
    part.set_shard({r, 3});
    part.shuffle(2);
    EXPECT_EQ(part.local_batch(), counts[r]);
    auto [px, py] = part.batch_one_hot(dev, 3);
    EXPECT_EQ(px.shape(), (std::vector<int64_t>{counts[r], 64}));
    EXPECT_EQ(py.shape(), (std::vector<int64_t>{counts[r], 10}));
    auto v = px.to_vector<float>();
    joined.insert(joined.end(), v.begin(), v.end());
  }
  EXPECT_EQ(joined, x);
  lt::data::Batcher small(d, 2, 1);
  try {
    small.set_shard({0, 3});
    FAIL() << "3 shards of a batch of 2 accepted";
  } catch (const lt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("shard 0 of 3 does not fit batch size 2"),
              std::string::npos)
        << e.what();
  }
}

// --augment flip: every row comes out as itself or mirrored within each image row (never
// anything else), about half mirrored, the same choice for the same epoch and a new one for the
// next; a width that does not divide the features is refused by name.
TEST(DigitsData, RandomFlipMirrorsImageRowsPerEpoch) {
  lt::data::Dataset d;
  d.features = 6;  // 2x3 images
  d.classes = 2;
  const int64_t rows = 200;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < 6; ++j) d.x.push_back(static_cast<float>(r * 10 + j));
    d.y.push_back(r % 2);
  }
  lt::Runtime rt = lt::Runtime::create();
  lt::Device dev = rt.find_device("cpu_eager");
  lt::data::Batcher b(d, rows, 3);
  b.set_random_hflip(3);
  auto flips = [&](int64_t epoch) {
    b.shuffle(epoch);
    std::vector<float> x = b.batch(dev, 0).first.to_vector<float>();
    std::vector<int> flipped(static_cast<size_t>(rows), -1);
    for (int64_t i = 0; i < rows; ++i) {
      const float* v = x.data() + i * 6;
      const auto src = static_cast<int64_t>(v[0]) / 10;
      const float base = static_cast<float>(src * 10);
      const bool same = v[0] == base && v[1] == base + 1 && v[2] == base + 2 && v[3] == base + 3 &&
                        v[4] == base + 4 && v[5] == base + 5;
      const bool mirrored = v[0] == base + 2 && v[1] == base + 1 && v[2] == base &&
                            v[3] == base + 5 && v[4] == base + 4 && v[5] == base + 3;
      EXPECT_TRUE(same || mirrored) << "row " << i << " of epoch " << epoch;
      flipped[static_cast<size_t>(src)] = mirrored ? 1 : 0;
    }
    return flipped;
  };
  std::vector<int> e1 = flips(1), e2 = flips(2);
  const auto count = std::count(e1.begin(), e1.end(), 1);
  EXPECT_GT(count, rows / 4);
  EXPECT_LT(count, rows * 3 / 4);
  EXPECT_EQ(flips(1), e1);
  EXPECT_NE(e2, e1);
  try {
    b.set_random_hflip(4);
    FAIL() << "a flip width of 4 accepted for 6 features";
  } catch (const lt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("flip width 4 does not divide 6 features"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
