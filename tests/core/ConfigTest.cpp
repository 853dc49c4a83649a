// ConfigTest.cpp — TOML and JSON config files, environment overrides, explicit options over
// both, and a clear IO_ERROR for malformed, non-regular or huge files.
#include "test_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

using namespace lt_test;

namespace {
std::string write(const std::string& name, const std::string& text) {
  std::string p = ::testing::TempDir() + "/" + name;
  std::ofstream(p) << text;
  return p;
}
lt_error* create(const std::string& cfg, lt_runtime** rt, const char* fallback = nullptr) {
  lt_runtime_options o{};
  o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
  o.config_path = cfg.c_str();
  o.fallback = fallback;
  return lt_runtime_create(&o, rt);
}
std::string fallback_of(lt_runtime* rt) {
  std::string js = report(rt, true);
  auto at = js.find("\"fallback_policy\": \"");
  return at == std::string::npos ? "" : js.substr(at + 20, js.find('"', at + 20) - at - 20);
}
}  // namespace

TEST(Config, TomlFileSetsDevicePathFallbackAndCapacity) {
  std::string p = write("lt_cfg.toml",
                        "device = \"partial\"\nfallback = \"error\"\n"
                        "plugin_path = [\"" +
                            plugin_dir("partial") +
                            "\"]\n"
                            "cache_capacity = 7\nunknown_key = 1\n");
  lt_runtime* rt = nullptr;
  LT_OK(create(p, &rt));
  EXPECT_STREQ(lt_device_name(lt_runtime_default_device(rt)), "partial:0");
  EXPECT_EQ(fallback_of(rt), "error");
  EXPECT_EQ(metric(rt, "cache_capacity"), 7);
  lt_runtime_destroy(rt);
}

TEST(Config, JsonFileAndExplicitOptionWins) {
  std::string p = write("lt_cfg.json",
                        "{\"device\": \"partial:0\", \"fallback\": \"error\", "
                        "\"plugin_path\": \"" +
                            plugin_dir("partial") + "\"}");
  lt_runtime* rt = nullptr;
  LT_OK(create(p, &rt, "silent"));
  EXPECT_STREQ(lt_device_name(lt_runtime_default_device(rt)), "partial:0");
  EXPECT_EQ(fallback_of(rt), "silent");
  lt_runtime_destroy(rt);
}

TEST(Config, EnvironmentOverridesFile) {
  std::string p = write("lt_cfg_env.toml",
                        "device = \"partial\"\nfallback = \"error\"\n"
                        "plugin_path = \"" +
                            plugin_dir("partial") + "\"\n");
  setenv("LT_FALLBACK", "warn", 1);
  lt_runtime* rt = nullptr;
  lt_error* e = create(p, &rt);
  unsetenv("LT_FALLBACK");
  LT_OK(e);
  EXPECT_EQ(fallback_of(rt), "warn");
  lt_runtime_destroy(rt);

  setenv("LT_CONFIG", p.c_str(), 1);
  lt_runtime_options o{};
  o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
  e = lt_runtime_create(&o, &rt);
  unsetenv("LT_CONFIG");
  LT_OK(e);
  EXPECT_STREQ(lt_device_name(lt_runtime_default_device(rt)), "partial:0");
  lt_runtime_destroy(rt);
}

TEST(Config, MalformedFilesGiveIoErrorNamingFile) {
  for (auto [name, text] : {std::pair<const char*, const char*>{"lt_bad.toml", "device = = 3\n"},
                            {"lt_bad.json", "{\"device\": }"}}) {
    std::string p = write(name, text);
    lt_runtime* rt = nullptr;
    Err e(create(p, &rt));
    EXPECT_EQ(e.code(), LT_STATUS_IO_ERROR);
    EXPECT_NE(e.msg().find(p), std::string::npos) << e.msg();
    EXPECT_NE(e.msg().find("cannot parse"), std::string::npos) << e.msg();
  }
  lt_runtime* rt = nullptr;
  Err missing(create("/nonexistent/lt.toml", &rt));
  EXPECT_EQ(missing.code(), LT_STATUS_IO_ERROR);
  Err bad_policy(create(write("lt_badpol.toml", "fallback = \"sometimes\"\n"), &rt));
  EXPECT_EQ(bad_policy.code(), LT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(bad_policy.msg().find("sometimes"), std::string::npos);
}

// A config must be a regular file of bounded size: /dev/zero, a FIFO nobody writes, a
// directory and a huge file are refused at once with the path named (they used to hang the
// runtime's creation, or read forever). CTest's time limit bounds a regression to a hang.
TEST(Config, NonRegularOrHugeFilesAreRefusedNotRead) {
  std::string fifo = ::testing::TempDir() + "/lt_cfg_fifo.toml";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string huge = ::testing::TempDir() + "/lt_cfg_huge.toml";
  {
    std::ofstream f(huge);
    f << "# " << std::string(size_t{3} << 20, 'x') << "\n";
  }
  for (const std::string& p : {std::string("/dev/zero"), fifo, ::testing::TempDir(), huge}) {
    lt_runtime* rt = nullptr;
    Err e(create(p, &rt));
    EXPECT_EQ(rt, nullptr) << p;
    EXPECT_EQ(e.code(), LT_STATUS_IO_ERROR) << p;
    EXPECT_NE(e.msg().find(p), std::string::npos) << e.msg();
  }
  ::unlink(fifo.c_str());
  ::unlink(huge.c_str());
}
