// HardeningTest.cpp — issue #29's checkpoint cases: headers of many entries (linear reading, file
// order kept), names with NUL bytes, FIFOs and devices instead of checkpoint files, and the
// temporaries that killed saves leave (removed by the next save, never a live save's).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "checkpoint_test_util.hpp"
#include "lazytensor/checkpoint.hpp"

using lt::test::catch_error;
using lt::test::contains;
using lt::test::cpu;
using lt::test::ScratchDir;

namespace {

// A header of `n` F32 scalars t0..t{n-1} (4 bytes each), every third one an empty [0] tensor
// (all of them at the same offset as the next scalar: their order is the file's order).
std::vector<uint8_t> many_entries(size_t n, std::vector<std::string>* order) {
  std::string h = "{";
  uint64_t off = 0;
  std::vector<uint8_t> data;
  for (size_t i = 0; i < n; ++i) {
    const std::string name = "t" + std::to_string(n - i);  // not in sorted order
    const bool empty = i % 3 == 1;
    h += (i ? "," : "") + ("\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[") + (empty ? "0" : "") +
         "],\"data_offsets\":[" + std::to_string(off) + "," +
         std::to_string(off + (empty ? 0 : 4)) + "]}";
    if (!empty) {
      float v = static_cast<float>(i);
      const auto* b = reinterpret_cast<const uint8_t*>(&v);
      data.insert(data.end(), b, b + 4);
      off += 4;
    }
    order->push_back(name);
  }
  h += "}";
  return lt::test::safetensors_bytes(h, data);
}

void set_mtime(const std::string& path, time_t t) {
  struct timeval tv[2] = {{t, 0}, {t, 0}};
  ASSERT_EQ(::utimes(path.c_str(), tv), 0);
}

}  // namespace

// The reader is a stream over the header: every entry is found, the file order of empty
// tensors sharing an offset is kept (lt_checkpoint_name), and values read back.
TEST(CheckpointHardening, ManyEntriesKeepFileOrderAndReadBack) {
  ScratchDir dir;
  const std::string path = dir.file("many.safetensors");
  std::vector<std::string> order;
  lt::test::write_bytes(path, many_entries(30000, &order));
  lt::Checkpoint ck(path);
  ASSERT_EQ(ck.names().size(), order.size());
  EXPECT_EQ(ck.names(), order) << "file order (offsets ascending, ties in file order)";
  EXPECT_EQ(ck.tensor("t30000", cpu()).item<float>(), 0.0f);
  EXPECT_EQ(ck.tensor(order[29999], cpu()).item<float>(), 29999.0f);
  EXPECT_EQ(ck.info(order[1]).shape, (std::vector<int64_t>{0}));
}

// A NUL inside a name can never be asked for through the C API: refused at open, naming it.
TEST(CheckpointHardening, NamesWithNulBytesAreRefused) {
  ScratchDir dir;
  struct Case {
    const char* label;
    std::string header;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"tensor", R"({"a\u0000b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
       "tensor name 'a\\u0000b' contains a NUL byte"},
      {"meta_key",
       R"({"__metadata__":{"k\u0000":"v"},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
       "__metadata__ key 'k\\u0000' contains a NUL byte"},
      {"meta_value",
       R"({"__metadata__":{"k":"v\u0000w"},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
       "__metadata__ value of 'k' contains a NUL byte"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    const std::string path = dir.file(std::string(c.label) + ".safetensors");
    lt::test::write_bytes(path, lt::test::safetensors_bytes(c.header, std::vector<uint8_t>(4, 0)));
    auto err = catch_error([&] { lt::Checkpoint ck(path); });
    ASSERT_TRUE(err.thrown);
    EXPECT_EQ(err.code, LT_STATUS_IO_ERROR);
    EXPECT_TRUE(contains(err.message, path) && contains(err.message, c.says)) << err.message;
  }
  // The C++ API's std::string names: a NUL would silently save a shorter name.
  auto err = catch_error([&] {
    lt::save(dir.file("s.safetensors"), {{std::string("a\0b", 3), lt::ones(cpu(), {1})}});
  });
  ASSERT_TRUE(err.thrown);
  EXPECT_EQ(err.code, LT_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(err.message, "NUL")) << err.message;
  EXPECT_FALSE(std::filesystem::exists(dir.file("s.safetensors")));
}

// A FIFO (no writer) or a device named like a checkpoint is refused at once, never waited on.
TEST(CheckpointHardening, FifoAndDeviceAreRefusedWithoutBlocking) {
  ScratchDir dir;
  const std::string fifo = dir.file("f.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ::alarm(30);  // the bug was a blocking open: end the test process rather than hang
  auto err = catch_error([&] { lt::Checkpoint ck(fifo); });
  ::alarm(0);
  ASSERT_TRUE(err.thrown);
  EXPECT_EQ(err.code, LT_STATUS_IO_ERROR);
  EXPECT_TRUE(contains(err.message, fifo) && contains(err.message, "is a FIFO")) << err.message;
  err = catch_error([&] { lt::Checkpoint ck("/dev/zero"); });
  ASSERT_TRUE(err.thrown);
  EXPECT_TRUE(contains(err.message, "character device")) << err.message;
}

// Killed saves leave `<target>.tmp-XXXXXX`: the next save of the target removes those no live
// process holds and that are older than a minute; a live save's (locked) and a fresh one stay.
TEST(CheckpointHardening, StaleTemporariesOfKilledSavesAreRemoved) {
  ScratchDir dir;
  const std::string path = dir.file("m.safetensors");
  const time_t old = ::time(nullptr) - 3600;
  const std::string stale = path + ".tmp-AbC123", live = path + ".tmp-LiVe99",
                    fresh = path + ".tmp-NeW000", other = dir.file("x.safetensors.tmp-AbC123");
  for (const auto& p : {stale, live, fresh, other})
    lt::test::write_bytes(p, std::vector<uint8_t>(1000, 7));
  for (const auto& p : {stale, live, other}) set_mtime(p, old);
  // A save in progress in a live process holds its temporary locked.
  int fd = ::open(live.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);

  lt::save(path, {{"w", lt::ones(cpu(), {3})}});
  ::close(fd);
  EXPECT_FALSE(std::filesystem::exists(stale)) << "a killed save's temporary stays forever";
  EXPECT_TRUE(std::filesystem::exists(live)) << "a live save's temporary was removed";
  EXPECT_TRUE(std::filesystem::exists(fresh)) << "a temporary younger than a minute was removed";
  EXPECT_TRUE(std::filesystem::exists(other)) << "another target's temporary was removed";
  EXPECT_EQ(lt::Checkpoint(path).tensor("w", cpu()).to_vector<float>(),
            (std::vector<float>{1, 1, 1}));
  // Nothing of this save's own is left behind.
  EXPECT_EQ(dir.entries(),
            (std::vector<std::string>{"m.safetensors", "m.safetensors.tmp-LiVe99",
                                      "m.safetensors.tmp-NeW000", "x.safetensors.tmp-AbC123"}));
}
