// SafetensorsTest.cpp — lt_checkpoint_* against the safetensors format: round trips of every
// dtype, files written byte by byte per the spec, our writer's bytes parsed per the spec, every
// kind of corrupt file refused with an error naming the file (and tensor), atomic saves.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "checkpoint_test_util.hpp"
#include "lazytensor/checkpoint.hpp"

namespace {

using lt::test::catch_error;
using lt::test::contains;
using lt::test::cpu;
using lt::test::ScratchDir;

// Takes a C error: {code, message}, destroying it.
std::pair<lt_status_code, std::string> take(lt_error* e) {
  if (!e) return {LT_STATUS_OK, ""};
  std::pair<lt_status_code, std::string> r{lt_error_code(e), lt_error_message(e)};
  lt_error_destroy(e);
  return r;
}

template <class T>
std::vector<uint8_t> host_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

lt::Tensor from_bytes(lt_dtype dtype, std::vector<int64_t> shape, const std::vector<uint8_t>& b) {
  lt_tensor* t = nullptr;
  lt::check(
      lt_tensor_from_host(cpu().get(), dtype, shape.data(), shape.size(), b.data(), b.size(), &t));
  return lt::Tensor(t);
}

struct Sample {
  std::string name;
  lt_dtype dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // host (native) order
};

std::vector<Sample> every_dtype() {
  const float inf = std::numeric_limits<float>::infinity();
  return {
      {"f32", LT_DTYPE_F32, {2, 2}, host_bytes<float>({1.5f, -0.0f, inf, -3.25e-20f})},
      {"f64", LT_DTYPE_F64, {3}, host_bytes<double>({3.25, -1e300, 0.1})},
      {"i32", LT_DTYPE_I32, {3}, host_bytes<int32_t>({INT32_MIN, 7, -1})},
      {"i64", LT_DTYPE_I64, {2, 1}, host_bytes<int64_t>({INT64_MAX, -5})},
      {"bool", LT_DTYPE_BOOL, {4}, {1, 0, 0, 1}},
      {"bf16", LT_DTYPE_BF16, {3}, host_bytes<uint16_t>({0x3f80, 0xc000, 0x7f80})},
      {"f16", LT_DTYPE_F16, {1, 3}, host_bytes<uint16_t>({0x3c00, 0xfbff, 0x0001})},
      {"scalar_f32", LT_DTYPE_F32, {}, host_bytes<float>({42.5f})},
      {"empty_f32", LT_DTYPE_F32, {0, 3}, {}},
      {"empty_i64", LT_DTYPE_I64, {2, 0}, {}},
      {"empty_bool", LT_DTYPE_BOOL, {0}, {}},
  };
}

TEST(Safetensors, RoundTripsEveryDtypeScalarAndEmptyTensors) {
  ScratchDir dir;
  std::vector<Sample> samples = every_dtype();
  std::vector<std::pair<std::string, lt::Tensor>> tensors;
  for (const auto& s : samples) tensors.emplace_back(s.name, from_bytes(s.dtype, s.shape, s.bytes));
  // A scalar graph parameter (lt_scalar) is saved like any other rank-0 tensor.
  tensors.emplace_back("scalar_i64", lt::Tensor::scalar(cpu(), 7, lt::i64));
  samples.push_back({"scalar_i64", LT_DTYPE_I64, {}, host_bytes<int64_t>({7})});
  lt::save(dir.file("all.safetensors"), tensors, {{"epoch", "3"}, {"note", "naïve ✓"}});

  lt::Checkpoint ck(dir.file("all.safetensors"));
  std::vector<std::string> want_names;
  for (const auto& s : samples) want_names.push_back(s.name);
  EXPECT_EQ(ck.names(), want_names);  // file order = save order
  for (const auto& s : samples) {
    SCOPED_TRACE(s.name);
    lt::TensorInfo info = ck.info(s.name);
    EXPECT_EQ(info.dtype, s.dtype);
    EXPECT_EQ(info.shape, s.shape);
    lt::Tensor t = ck.tensor(s.name, cpu());
    EXPECT_EQ(t.dtype(), s.dtype);
    EXPECT_EQ(t.shape(), s.shape);
    EXPECT_EQ(t.to_bytes(), s.bytes);
  }
  EXPECT_EQ(ck.metadata(),
            (std::map<std::string, std::string>{{"epoch", "3"}, {"note", "naïve ✓"}}));
  EXPECT_EQ(ck.metadata("epoch"), "3");
  EXPECT_FALSE(ck.metadata("absent").has_value());
}

TEST(Safetensors, CFunctionsSaveOpenAndRead) {
  ScratchDir dir;
  const std::string path = dir.file("c.safetensors");
  lt_device* d = cpu().get();
  float xs[] = {1, 2, 3, 4, 5, 6};
  int64_t shape[] = {2, 3};
  lt_tensor* a = nullptr;
  ASSERT_EQ(lt_tensor_from_host(d, LT_DTYPE_F32, shape, 2, xs, sizeof xs, &a), nullptr);
  const char* names[] = {"weights"};
  lt_tensor* ts[] = {a};
  const char* keys[] = {"epoch"};
  const char* vals[] = {"3"};
  ASSERT_EQ(take(lt_checkpoint_save(path.c_str(), 1, names, ts, 1, keys, vals)).second, "");

  lt_checkpoint* ck = nullptr;
  ASSERT_EQ(take(lt_checkpoint_open(path.c_str(), &ck)).second, "");
  EXPECT_EQ(lt_checkpoint_count(ck), 1u);
  EXPECT_STREQ(lt_checkpoint_name(ck, 0), "weights");
  EXPECT_EQ(lt_checkpoint_name(ck, 1), nullptr);
  lt_dtype dt = LT_DTYPE_INVALID;
  size_t rank = 0;
  const int64_t* sh = nullptr;
  ASSERT_EQ(lt_checkpoint_info(ck, "weights", &dt, &rank, &sh), nullptr);
  EXPECT_EQ(dt, LT_DTYPE_F32);
  ASSERT_EQ(rank, 2u);
  EXPECT_EQ(sh[0], 2);
  EXPECT_EQ(sh[1], 3);
  EXPECT_EQ(lt_checkpoint_metadata_count(ck), 1u);
  EXPECT_STREQ(lt_checkpoint_metadata_key(ck, 0), "epoch");
  EXPECT_EQ(lt_checkpoint_metadata_key(ck, 1), nullptr);
  EXPECT_STREQ(lt_checkpoint_metadata(ck, "epoch"), "3");
  EXPECT_EQ(lt_checkpoint_metadata(ck, "nope"), nullptr);

  lt_tensor* back = nullptr;
  ASSERT_EQ(lt_checkpoint_tensor(ck, "weights", d, &back), nullptr);
  float got[6] = {};
  ASSERT_EQ(lt_tensor_to_host(back, got, sizeof got), nullptr);
  EXPECT_EQ(std::memcmp(got, xs, sizeof xs), 0);

  auto [code, msg] = take(lt_checkpoint_tensor(ck, "bias", d, &back));
  EXPECT_EQ(code, LT_STATUS_NOT_FOUND);
  EXPECT_TRUE(contains(msg, "'bias'") && contains(msg, path)) << msg;
  std::tie(code, msg) = take(lt_checkpoint_info(ck, "bias", &dt, nullptr, nullptr));
  EXPECT_EQ(code, LT_STATUS_NOT_FOUND);
  EXPECT_TRUE(contains(msg, "'bias'")) << msg;

  // NULL arguments are errors or neutral answers, never crashes.
  EXPECT_EQ(take(lt_checkpoint_open(nullptr, &ck)).first, LT_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(take(lt_checkpoint_open(path.c_str(), nullptr)).first, LT_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(take(lt_checkpoint_tensor(ck, "weights", nullptr, &back)).first,
            LT_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(lt_checkpoint_count(nullptr), 0u);
  EXPECT_EQ(lt_checkpoint_name(nullptr, 0), nullptr);
  EXPECT_EQ(lt_checkpoint_metadata(nullptr, "epoch"), nullptr);
  EXPECT_EQ(take(lt_checkpoint_save(path.c_str(), 1, nullptr, ts, 0, nullptr, nullptr)).first,
            LT_STATUS_INVALID_ARGUMENT);
  lt_checkpoint_close(nullptr);

  lt_tensor_free(back);
  lt_tensor_free(a);
  lt_checkpoint_close(ck);
}

// A file assembled byte by byte from the spec, not by our writer: tensors listed out of file
// order, an empty tensor and a rank-0 bf16 one, no padding (header length not a multiple of 8).
TEST(Safetensors, ReadsAFileWrittenByHandPerTheSpec) {
  ScratchDir dir;
  const std::string header = R"({"__metadata__":{"format":"pt"},)"
                             R"("b":{"dtype":"I64","shape":[2],"data_offsets":[8,24]},)"
                             R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("s":{"dtype":"BF16","shape":[],"data_offsets":[24,26]},)"
                             R"("e":{"dtype":"F16","shape":[0,4],"data_offsets":[24,24]}})";
  std::vector<uint8_t> data;
  lt::test::put_f32(data, 1.5f);
  lt::test::put_f32(data, -2.0f);
  lt::test::put_u64(data, 7);
  lt::test::put_u64(data, static_cast<uint64_t>(-1));
  data.push_back(0xc0);  // bf16 1.5 = 0x3fc0, little-endian
  data.push_back(0x3f);
  for (size_t pad : {size_t{1}, size_t{8}}) {
    SCOPED_TRACE("header padded to a multiple of " + std::to_string(pad));
    const std::string path = dir.file("hand" + std::to_string(pad) + ".safetensors");
    lt::test::write_bytes(path, lt::test::safetensors_bytes(header, data, pad));
    lt::Checkpoint ck(path);
    EXPECT_EQ(ck.names(), (std::vector<std::string>{"a", "b", "e", "s"}));
    EXPECT_EQ(ck.tensor("a", cpu()).to_vector<float>(), (std::vector<float>{1.5f, -2.0f}));
    EXPECT_EQ(ck.tensor("b", cpu()).to_vector<int64_t>(), (std::vector<int64_t>{7, -1}));
    lt::Tensor e = ck.tensor("e", cpu());
    EXPECT_EQ(e.dtype(), lt::f16);
    EXPECT_EQ(e.shape(), (std::vector<int64_t>{0, 4}));
    lt::Tensor s = ck.tensor("s", cpu());
    EXPECT_EQ(s.rank(), 0u);
    EXPECT_EQ(s.cast(lt::f32).item<float>(), 1.5f);
    EXPECT_EQ(ck.metadata("format"), "pt");
  }
}

// Our writer's bytes, read per the spec with an independent JSON parser.
TEST(Safetensors, WriterBytesFollowTheSpec) {
  ScratchDir dir;
  const std::string path = dir.file("w.safetensors");
  lt::Tensor w = lt::Tensor::from(cpu(), std::vector<float>{1, 2, 3, 4}, {2, 2});
  lt::Tensor idx = lt::Tensor::from(cpu(), std::vector<int64_t>{10, -20, 30});
  lt::Tensor flag = from_bytes(LT_DTYPE_BOOL, {}, {1});
  lt::save(path, {{"w", w}, {"idx", idx}, {"flag", flag}}, {{"step", "12"}});

  std::vector<uint8_t> bytes = lt::test::read_bytes(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = lt::test::get_u64(bytes, 0);
  EXPECT_EQ(n % 8, 0u) << "header padded to a multiple of 8";
  ASSERT_LE(8 + n, bytes.size());
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<ptrdiff_t>(n));
  EXPECT_EQ(header.front(), '{');
  std::string trimmed = header.substr(0, header.find_last_not_of(' ') + 1);
  EXPECT_EQ(trimmed.back(), '}') << "only spaces after the JSON";
  nlohmann::json j = nlohmann::json::parse(header);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"__metadata__", "flag", "idx", "w"}));
  EXPECT_EQ(j["__metadata__"], (nlohmann::json{{"step", "12"}}));
  EXPECT_EQ(j["w"]["dtype"], "F32");
  EXPECT_EQ(j["w"]["shape"], (nlohmann::json{2, 2}));
  EXPECT_EQ(j["w"]["data_offsets"], (nlohmann::json{0, 16}));
  EXPECT_EQ(j["idx"]["dtype"], "I64");
  EXPECT_EQ(j["idx"]["shape"], (nlohmann::json{3}));
  EXPECT_EQ(j["idx"]["data_offsets"], (nlohmann::json{16, 40}));
  EXPECT_EQ(j["flag"]["dtype"], "BOOL");
  EXPECT_EQ(j["flag"]["shape"], nlohmann::json::array());
  EXPECT_EQ(j["flag"]["data_offsets"], (nlohmann::json{40, 41}));

  std::vector<uint8_t> want;
  for (float f : {1.f, 2.f, 3.f, 4.f}) lt::test::put_f32(want, f);
  for (int64_t v : {10, -20, 30}) lt::test::put_u64(want, static_cast<uint64_t>(v));
  want.push_back(1);
  std::vector<uint8_t> data(bytes.begin() + 8 + static_cast<ptrdiff_t>(n), bytes.end());
  EXPECT_EQ(data, want) << "little-endian data, back to back, nothing after it";
}

TEST(Safetensors, SaveMaterialisesPendingTensors) {
  ScratchDir dir;
  lt::Tensor x = lt::Tensor::from(cpu(), std::vector<float>{1, 2, 3});
  lt::Tensor y = x * 2.0 + 1.0;
  lt::Tensor z = (y * y).sum();
  ASSERT_FALSE(y.is_materialized());
  lt::save(dir.file("p.safetensors"), {{"y", y}, {"z", z}});
  lt::Checkpoint ck(dir.file("p.safetensors"));
  EXPECT_EQ(ck.tensor("y", cpu()).to_vector<float>(), (std::vector<float>{3, 5, 7}));
  EXPECT_EQ(ck.tensor("z", cpu()).item<float>(), 83.0f);
}

// ---- corrupt files ----------------------------------------------------------------------------

struct BadFile {
  const char* label;
  std::string header;
  std::vector<uint8_t> data;
  lt_status_code code;
  std::vector<std::string> says;  // substrings of the message (besides the file's path)
};

std::vector<uint8_t> zeros(size_t n) {
  return std::vector<uint8_t>(n, 0);
}

TEST(SafetensorsErrors, CorruptHeadersNameTheFileTheTensorAndTheProblem) {
  const std::vector<BadFile> cases = {
      {"corrupt_json",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})",
       zeros(4),
       LT_STATUS_IO_ERROR,
       {"not valid JSON"}},
      {"not_an_object", R"([1, 2, 3])", {}, LT_STATUS_IO_ERROR, {"does not start with '{'"}},
      {"unknown_dtype",
       R"({"w":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})",
       zeros(4),
       LT_STATUS_IO_ERROR,
       {"'w'", "unknown dtype \"F33\""}},
      {"unsupported_dtype",
       R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
       zeros(4),
       LT_STATUS_UNSUPPORTED,
       {"'w'", "U8", "not supported"}},
      {"shape_offsets_mismatch",
       R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
       zeros(8),
       LT_STATUS_IO_ERROR,
       {"'w'", "needs 12 bytes", "span 8"}},
      {"overlapping_offsets",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       zeros(12),
       LT_STATUS_IO_ERROR,
       {"'b'", "overlap tensor 'a'"}},
      {"hole_between_tensors",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
       zeros(12),
       LT_STATUS_IO_ERROR,
       {"'b'", "belong to no tensor"}},
      {"trailing_data",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
       zeros(8),
       LT_STATUS_IO_ERROR,
       {"trailing"}},
      {"offsets_past_the_data",
       R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
       zeros(12),
       LT_STATUS_IO_ERROR,
       {"'a'", "extend past the data"}},
      {"reversed_offsets",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})",
       zeros(8),
       LT_STATUS_IO_ERROR,
       {"'a'", "end before they begin"}},
      {"negative_dim",
       R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})",
       {},
       LT_STATUS_IO_ERROR,
       {"'a'", "negative"}},
      {"fractional_dim",
       R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})",
       zeros(4),
       LT_STATUS_IO_ERROR,
       {"'a'", "not a non-negative integer"}},
      {"overflowing_shape",
       R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
       zeros(8),
       LT_STATUS_IO_ERROR,
       {"'a'", "overflows"}},
      {"missing_offsets",
       R"({"a":{"dtype":"F32","shape":[1]}})",
       {},
       LT_STATUS_IO_ERROR,
       {"'a'", "data_offsets"}},
      {"duplicate_name",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
       R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       zeros(8),
       LT_STATUS_IO_ERROR,
       {"duplicate key 'a'"}},
      {"metadata_not_strings",
       R"({"__metadata__":{"epoch":3}})",
       {},
       LT_STATUS_IO_ERROR,
       {"__metadata__", "'epoch'", "not a string"}},
  };
  ScratchDir dir;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    const std::string path = dir.file(std::string(c.label) + ".safetensors");
    lt::test::write_bytes(path, lt::test::safetensors_bytes(c.header, c.data));
    auto err = catch_error([&] { lt::Checkpoint ck(path); });
    ASSERT_TRUE(err.thrown);
    EXPECT_EQ(err.code, c.code) << err.message;
    EXPECT_TRUE(contains(err.message, path)) << err.message;
    for (const auto& s : c.says) EXPECT_TRUE(contains(err.message, s)) << err.message;
  }
}

TEST(SafetensorsErrors, TruncatedDataNamesTheTensorCut) {
  ScratchDir dir;
  const std::string path = dir.file("t.safetensors");
  lt::save(path, {{"first", lt::zeros(cpu(), {4})}, {"second", lt::ones(cpu(), {4})}});
  std::vector<uint8_t> bytes = lt::test::read_bytes(path);
  bytes.resize(bytes.size() - 3);
  lt::test::write_bytes(path, bytes);
  auto err = catch_error([&] { lt::Checkpoint ck(path); });
  ASSERT_TRUE(err.thrown);
  EXPECT_EQ(err.code, LT_STATUS_IO_ERROR);
  EXPECT_TRUE(contains(err.message, path)) << err.message;
  EXPECT_TRUE(contains(err.message, "'second'")) << err.message;
  EXPECT_TRUE(contains(err.message, "truncated")) << err.message;
}

TEST(SafetensorsErrors, HeaderLengthsThatDoNotFitTheFile) {
  ScratchDir dir;
  std::vector<uint8_t> bytes;
  lt::test::put_u64(bytes, 1000);
  for (char ch : std::string("{}      ")) bytes.push_back(static_cast<uint8_t>(ch));
  lt::test::write_bytes(dir.file("long.safetensors"), bytes);
  auto err = catch_error([&] { lt::Checkpoint ck(dir.file("long.safetensors")); });
  EXPECT_EQ(err.code, LT_STATUS_IO_ERROR);
  EXPECT_TRUE(contains(err.message, dir.file("long.safetensors"))) << err.message;
  EXPECT_TRUE(contains(err.message, "header length 1000 exceeds the 8 bytes")) << err.message;

  lt::test::write_bytes(dir.file("short.safetensors"), {1, 2, 3});
  err = catch_error([&] { lt::Checkpoint ck(dir.file("short.safetensors")); });
  EXPECT_EQ(err.code, LT_STATUS_IO_ERROR);
  EXPECT_TRUE(contains(err.message, "too short")) << err.message;

  lt::test::write_bytes(dir.file("empty.safetensors"), {});
  err = catch_error([&] { lt::Checkpoint ck(dir.file("empty.safetensors")); });
  EXPECT_EQ(err.code, LT_STATUS_IO_ERROR);
  EXPECT_TRUE(contains(err.message, "0 bytes")) << err.message;
}

TEST(SafetensorsErrors, MissingFileAndDirectory) {
  ScratchDir dir;
  auto err = catch_error([&] { lt::Checkpoint ck(dir.file("absent.safetensors")); });
  EXPECT_EQ(err.code, LT_STATUS_NOT_FOUND);
  EXPECT_TRUE(contains(err.message, dir.file("absent.safetensors"))) << err.message;
  EXPECT_TRUE(contains(err.message, "no such file")) << err.message;

  err = catch_error([&] { lt::Checkpoint ck(dir.path().string()); });
  EXPECT_EQ(err.code, LT_STATUS_IO_ERROR);
  EXPECT_TRUE(contains(err.message, dir.path().string())) << err.message;
  EXPECT_TRUE(contains(err.message, "is a directory")) << err.message;
}

TEST(SafetensorsErrors, BoolBytesOtherThanZeroOrOneAreRefusedOnRead) {
  ScratchDir dir;
  const std::string path = dir.file("b.safetensors");
  lt::test::write_bytes(
      path, lt::test::safetensors_bytes(
                R"({"mask":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", {1, 2, 0}));
  lt::Checkpoint ck(path);  // the header is valid
  auto err = catch_error([&] { ck.tensor("mask", cpu()); });
  EXPECT_EQ(err.code, LT_STATUS_IO_ERROR);
  EXPECT_TRUE(contains(err.message, path) && contains(err.message, "'mask'")) << err.message;
  EXPECT_TRUE(contains(err.message, "element 1 is 2")) << err.message;
}

// ---- saving -----------------------------------------------------------------------------------

TEST(SafetensorsSave, RefusesBadNamesAndLeavesTheOldFileAndNoTemporaryFile) {
  ScratchDir dir;
  const std::string path = dir.file("m.safetensors");
  lt::Tensor a = lt::ones(cpu(), {2});
  lt::save(path, {{"a", a}});
  const std::vector<uint8_t> before = lt::test::read_bytes(path);

  auto expect_refused = [&](const char* label, const std::function<void()>& f,
                            const std::string& says) {
    SCOPED_TRACE(label);
    auto err = catch_error(f);
    ASSERT_TRUE(err.thrown);
    EXPECT_EQ(err.code, LT_STATUS_INVALID_ARGUMENT) << err.message;
    EXPECT_TRUE(contains(err.message, says)) << err.message;
    EXPECT_TRUE(contains(err.message, path)) << err.message;
    EXPECT_EQ(lt::test::read_bytes(path), before);
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"m.safetensors"});
  };
  expect_refused(
      "duplicate",
      [&] {
        lt::save(path, {{"x", a}, {"x", a}});
      },
      "duplicate");
  expect_refused(
      "empty",
      [&] {
        lt::save(path, {{"", a}});
      },
      "empty");
  expect_refused(
      "reserved",
      [&] {
        lt::save(path, {{"__metadata__", a}});
      },
      "reserved");
  expect_refused(
      "null tensor",
      [&] {
        lt::save(path, {{"x", lt::Tensor()}});
      },
      "'x' is null");
  expect_refused(
      "not utf-8",
      [&] {
        lt::save(path, {{"bad\xff", a}});
      },
      "UTF-8");
  expect_refused(
      "duplicate metadata",
      [&] {
        const char* names[] = {"a"};
        lt_tensor* ts[] = {a.get()};
        const char* keys[] = {"k", "k"};
        const char* vals[] = {"1", "2"};
        lt::check(lt_checkpoint_save(path.c_str(), 1, names, ts, 2, keys, vals));
      },
      "duplicate metadata key 'k'");
}

TEST(SafetensorsSave, ReplacesAtomicallyWithTheUsualFileMode) {
  ScratchDir dir;
  const std::string path = dir.file("r.safetensors");
  lt::save(path, {{"a", lt::ones(cpu(), {3})}});
  lt::save(path, {{"b", lt::zeros(cpu(), {2})}});
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"r.safetensors"});
  lt::Checkpoint ck(path);
  EXPECT_EQ(ck.names(), std::vector<std::string>{"b"});
  mode_t mask = ::umask(0);
  ::umask(mask);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);
}

TEST(SafetensorsSave, IoErrorsNameThePath) {
  ScratchDir dir;
  lt::Tensor a = lt::ones(cpu(), {2});
  const std::string missing = dir.file("no/such/dir/x.safetensors");
  auto err = catch_error([&] { lt::save(missing, {{"a", a}}); });
  EXPECT_EQ(err.code, LT_STATUS_IO_ERROR);
  EXPECT_TRUE(contains(err.message, missing)) << err.message;

  std::filesystem::create_directory(dir.file("taken"));
  err = catch_error([&] { lt::save(dir.file("taken"), {{"a", a}}); });
  EXPECT_EQ(err.code, LT_STATUS_IO_ERROR);
  EXPECT_TRUE(contains(err.message, dir.file("taken"))) << err.message;
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"taken"}) << "temporary file left behind";
}

}  // namespace
