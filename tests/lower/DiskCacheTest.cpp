// Tests of lower::DiskCache, the persistent compile cache the compiling backends share: round
// trips, a colliding or corrupt file never loaded (and replaced), LRU eviction under the size
// cap, stale temporaries cleaned, concurrent processes never seeing half an entry, and where
// the directory defaults to.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "lazytensor/lower/disk_cache.hpp"

namespace {

namespace fs = std::filesystem;
using lt::lower::DiskCache;

class DiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lt_disk_cache_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    if (fs::exists(dir_))
      for (auto& e : fs::directory_iterator(dir_)) out.push_back(e.path());
    return out;
  }
  static std::vector<char> bytes(const std::string& s) { return {s.begin(), s.end()}; }
  static std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }
  // The entry file holding `key` (keys are stored in full inside their files).
  fs::path file_of(const std::string& key) const {
    for (const fs::path& p : entries())
      if (read(p).find(key) != std::string::npos) return p;
    return {};
  }
  fs::path dir_;
};

TEST_F(DiskCacheTest, StoresAndLoadsByTheWholeKey) {
  DiskCache c(dir_.string());
  EXPECT_FALSE(c.load("key one"));  // nothing yet; the directory does not even exist
  c.store("key one", bytes("object code 1"));
  c.store("key two", bytes(std::string(100000, 'x')));
  EXPECT_EQ(c.load("key one"), bytes("object code 1"));
  EXPECT_EQ(c.load("key two")->size(), 100000u);
  c.store("key one", bytes("replaced"));
  EXPECT_EQ(c.load("key one"), bytes("replaced"));
  EXPECT_EQ(entries().size(), 2u);
  DiskCache::Stats s = c.stats();
  EXPECT_EQ(s.hits, 3u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.stores, 3u);
  // Another DiskCache on the same directory (another process) sees the entries.
  DiskCache other(dir_.string());
  EXPECT_EQ(other.load("key two")->size(), 100000u);
}

// A file under a key's name that holds another key (a 64-bit hash collision, or a file copied
// from elsewhere) is never loaded; it is removed and the next store replaces it.
TEST_F(DiskCacheTest, AForeignOrCorruptFileIsIgnoredRemovedAndReplaced) {
  DiskCache c(dir_.string());
  c.store("key A", bytes("payload A"));
  c.store("key B", bytes("payload B"));
  ASSERT_EQ(entries().size(), 2u);
  // Give A's file B's contents: A's name, another key inside.
  const fs::path fa = file_of("key A"), fb = file_of("key B");
  ASSERT_FALSE(fa.empty() || fb.empty());
  fs::copy_file(fb, fa, fs::copy_options::overwrite_existing);
  EXPECT_FALSE(c.load("key A"));  // never B's payload
  EXPECT_EQ(c.stats().rejected, 1u);
  EXPECT_FALSE(fs::exists(fa));  // the foreign file is gone
  EXPECT_EQ(c.load("key B"), bytes("payload B"));

  // Truncations of a good file at every length, a bad magic and a flipped payload byte.
  c.store("key C", bytes("some object code"));
  const fs::path cp = file_of("key C");
  ASSERT_FALSE(cp.empty());
  const std::string good = read(cp);
  std::vector<std::string> bad;
  for (size_t n = 0; n < good.size(); ++n) bad.push_back(good.substr(0, n));
  std::string flipped = good;
  flipped.back() ^= 1;
  bad.push_back(flipped);
  std::string magic = good;
  magic[0] = 'X';
  bad.push_back(magic);
  bad.push_back(good + "trailing");
  for (const std::string& contents : bad) {
    std::ofstream(cp, std::ios::binary | std::ios::trunc) << contents;
    EXPECT_FALSE(c.load("key C")) << contents.size() << " bytes";
    EXPECT_FALSE(fs::exists(cp));
    c.store("key C", bytes("some object code"));  // replaced
    EXPECT_EQ(c.load("key C"), bytes("some object code"));
  }
}

// Issue #29: a FIFO (no writer) named like an entry hung every process that looked the entry
// up; a directory, a socket or a device there is as foreign. Each is refused without blocking.
TEST_F(DiskCacheTest, AFifoOrDirectoryNamedLikeAnEntryIsRefusedWithoutBlocking) {
  std::vector<std::string> logged;
  DiskCache c(dir_.string(), uint64_t{1} << 30,
              [&](int, const std::string& m) { logged.push_back(m); });
  c.store("key F", bytes("payload F"));
  const fs::path fp = file_of("key F");
  ASSERT_FALSE(fp.empty());
  fs::remove(fp);
  ASSERT_EQ(::mkfifo(fp.c_str(), 0600), 0);
  ::alarm(30);  // the bug was a blocking open: end the test process rather than hang
  EXPECT_FALSE(c.load("key F"));
  ::alarm(0);
  EXPECT_EQ(c.stats().rejected, 1u);
  ASSERT_FALSE(logged.empty());
  EXPECT_NE(logged.back().find("is a FIFO"), std::string::npos) << logged.back();
  fs::remove(fp);
  fs::create_directory(fp);
  EXPECT_FALSE(c.load("key F"));
  EXPECT_NE(logged.back().find("is a directory"), std::string::npos) << logged.back();
  c.store("key F", bytes("payload F"));  // the name is usable again
  EXPECT_EQ(c.load("key F"), bytes("payload F"));
}

// Issue #29: an entry whose header claims a 1 GiB payload in a 4.5 KB file made the loader
// allocate 1 GiB before looking at the file's size. Under an address-space limit far below
// that, the load must answer "miss" and remove the entry (a child process, so the limit
// stays there).
TEST_F(DiskCacheTest, ALengthLargerThanTheFileIsRefusedBeforeAllocating) {
  DiskCache c(dir_.string());
  c.store("key L", bytes(std::string(4500, 'o')));
  const fs::path lp = file_of("key L");
  ASSERT_FALSE(lp.empty());
  std::string f = read(lp);
  const uint64_t huge = uint64_t{1} << 30;
  std::memcpy(f.data() + 16, &huge, 8);  // the data length field
  std::ofstream(lp, std::ios::binary | std::ios::trunc) << f;
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    struct rlimit rl {};
    ::getrlimit(RLIMIT_AS, &rl);
    std::ifstream st("/proc/self/statm");
    uint64_t pages = 0;
    st >> pages;
    rl.rlim_cur = pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) + (uint64_t{256} << 20);
    ::setrlimit(RLIMIT_AS, &rl);
    int code = 0;
    try {
      if (c.load("key L"))
        code = 1;  // loaded garbage
      else if (fs::exists(lp))
        code = 2;  // the bad entry stays for every later run
      else if (c.stats().rejected != 1)
        code = 4;  // not counted
    } catch (const std::bad_alloc&) {
      code = 3;  // allocated the claimed size
    }
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: loaded, 2: not removed, 3: allocated 1 GiB, "
                                       "4: not counted as rejected";
}

TEST_F(DiskCacheTest, EvictsTheLeastRecentlyUsedBeyondTheCap) {
  // Entries of ~1 KiB (header + key + 1000 bytes) under a 3.5 KiB cap: three fit.
  DiskCache c(dir_.string(), 3584);
  const std::vector<char> kb(1000, 'z');
  auto age = [&](const std::string& key, int seconds) {
    fs::last_write_time(file_of(key),
                        fs::file_time_type::clock::now() - std::chrono::seconds(seconds));
  };
  c.store("k1", kb);
  c.store("k2", kb);
  c.store("k3", kb);
  age("k1", 300);
  age("k2", 200);
  age("k3", 100);
  EXPECT_TRUE(c.load("k1"));  // k1 used now: k2 is the least recently used
  c.store("k4", kb);
  EXPECT_EQ(entries().size(), 3u);
  EXPECT_FALSE(c.load("k2"));
  EXPECT_TRUE(c.load("k1"));
  EXPECT_TRUE(c.load("k3"));
  EXPECT_TRUE(c.load("k4"));
  EXPECT_EQ(c.stats().evictions, 1u);
  // An entry larger than the whole cap is not stored at all.
  c.store("huge", std::vector<char>(5000, 'h'));
  EXPECT_FALSE(c.load("huge"));
  EXPECT_EQ(entries().size(), 3u);
}

TEST_F(DiskCacheTest, StaleTemporariesOfACrashedWriterAreCleanedOthersLeftAlone) {
  DiskCache c(dir_.string(), 1 << 20);
  fs::create_directories(dir_);
  const fs::path stale = dir_ / "0123456789abcdef.ltc.tmp.99999.0.0";
  const fs::path fresh = dir_ / "0123456789abcdef.ltc.tmp.99999.1.0";
  const fs::path user = dir_ / "notes.txt";
  for (const fs::path& p : {stale, fresh, user}) std::ofstream(p) << "half an entry";
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(2));
  // Cleaning runs with eviction: fill past the cap.
  DiskCache small(dir_.string(), 200);
  small.store("a", std::vector<char>(100, 'a'));
  small.store("b", std::vector<char>(100, 'b'));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));  // may still be being written
  EXPECT_TRUE(fs::exists(user));   // not ours
}

// Several processes storing and loading the same keys at once: every load is either a miss
// or exactly the stored bytes, never a partial entry.
TEST_F(DiskCacheTest, ConcurrentProcessesNeverLoadAPartialEntry) {
  const int kProcs = 4, kRounds = 200;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      DiskCache c(dir_.string(), 64 << 10);  // small: evictions race with loads too
      int bad = 0;
      for (int r = 0; r < kRounds; ++r) {
        const std::string key = "key " + std::to_string(r % 7);
        const std::vector<char> want(3000 + (r % 7) * 1000, static_cast<char>('a' + r % 7));
        if (auto v = c.load(key); v && *v != want) ++bad;
        c.store(key, want);
      }
      ::_exit(bad == 0 ? 0 : 1);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a process loaded a bad entry";
  }
  for (const fs::path& p : entries()) EXPECT_EQ(p.extension(), ".ltc") << p << " left behind";
}

TEST_F(DiskCacheTest, DefaultDirectoryAndDisabledCache) {
  auto with_env = [](const char* name, const char* value) {
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  };
  const char* saved[3] = {std::getenv("LT_CACHE_DIR"), std::getenv("XDG_CACHE_HOME"),
                          std::getenv("HOME")};
  std::string keep[3];
  for (int i = 0; i < 3; ++i) keep[i] = saved[i] ? saved[i] : "";
  with_env("LT_CACHE_DIR", "/tmp/ltc");
  with_env("XDG_CACHE_HOME", "/tmp/xdg");
  with_env("HOME", "/home/u");
  EXPECT_EQ(DiskCache::default_dir("/configured", "cpu_jit"), "/configured");
  EXPECT_EQ(DiskCache::default_dir("", "cpu_jit"), "/tmp/ltc/cpu_jit");
  with_env("LT_CACHE_DIR", "off");
  EXPECT_EQ(DiskCache::default_dir("", "cpu_jit"), "");
  EXPECT_EQ(DiskCache::default_dir("/configured", "cpu_jit"), "/configured");
  with_env("LT_CACHE_DIR", nullptr);
  EXPECT_EQ(DiskCache::default_dir("", "cpu_jit"), "/tmp/xdg/lazytensor/cpu_jit");
  with_env("XDG_CACHE_HOME", nullptr);
  EXPECT_EQ(DiskCache::default_dir("", "gpu_opencl"), "/home/u/.cache/lazytensor/gpu_opencl");
  with_env("HOME", nullptr);
  EXPECT_EQ(DiskCache::default_dir("", "cpu_jit"), "");
  const char* names[3] = {"LT_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
  for (int i = 0; i < 3; ++i) with_env(names[i], saved[i] ? keep[i].c_str() : nullptr);

  DiskCache off;  // no directory: every load misses, stores do nothing
  EXPECT_FALSE(off.enabled());
  off.store("k", bytes("v"));
  EXPECT_FALSE(off.load("k"));
  // A directory that cannot be created: stores fail quietly (counted), the caller goes on.
  DiskCache blocked("/proc/lt_cannot_create_this");
  blocked.store("k", bytes("v"));
  EXPECT_FALSE(blocked.load("k"));
  EXPECT_EQ(blocked.stats().errors, 1u);
}

}  // namespace
