// PluginLoaderTest.cpp — broken plugins are each reported with path and reason while the good
// ones still load and work.
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

#include "lazytensor/lt_plugin.h"

using namespace lt_test;

namespace {
std::string all_dirs() {
  std::string p;
  for (const char* c : {"not_elf", "no_entry", "wrong_abi", "null_fns", "create_fails",
                        "zero_devices", "undefined_sym", "partial"})
    p += (p.empty() ? "" : ":") + plugin_dir(c);
  return p;
}
}  // namespace

TEST(PluginLoader, ReportsEachBrokenPluginWithPathAndReason) {
  RuntimeHandle h{make_runtime(all_dirs(), "partial")};
  ASSERT_NE(h.rt, nullptr);
  std::string r = report(h.rt);
  struct Case {
    const char* path_part;
    const char* reason_part;
  } cases[] = {
      {"not_elf/lt_plugin_bad.so", "cannot load shared object"},
      {"no_entry/lt_plugin_no_entry.so", "entry symbol 'lt_plugin_get_api' not found"},
      {"wrong_abi/lt_plugin_wrong_abi.so", "ABI version 99.0 is incompatible with the core's 1."},
      {"null_fns/lt_plugin_null_fns.so", "required functions are NULL: compile, execute"},
      {"create_fails/lt_plugin_create_fails.so", "create failed: simulated create failure"},
      {"zero_devices/lt_plugin_zero_devices.so", "0 devices"},
      // dlopen's own words, not an unrelated errno ("Bad file descriptor") after them.
      {"undefined_sym/lt_plugin_undefined_sym.so", "undefined symbol: lt_test_symbol_nowhere"},
  };
  for (auto& c : cases) {
    size_t at = r.find(c.path_part);
    ASSERT_NE(at, std::string::npos) << c.path_part << "\n" << r;
    size_t eol = r.find('\n', at);
    std::string line = r.substr(at, eol - at);
    EXPECT_NE(line.find(c.reason_part), std::string::npos) << line;
    EXPECT_EQ(line.find("Bad file descriptor"), std::string::npos) << line;
  }
  // partial.c is built with this header's ABI version.
  EXPECT_NE(r.find("partial 0.1-test (ABI " + std::to_string(LT_PLUGIN_ABI_MAJOR) + "." +
                   std::to_string(LT_PLUGIN_ABI_MINOR) + ")"),
            std::string::npos)
      << r;
  EXPECT_NE(r.find("ops (4): relu add mul matmul"), std::string::npos) << r;
  EXPECT_NE(r.find("openblas:"), std::string::npos);
  std::string js = report(h.rt, true);
  EXPECT_NE(js.find("\"failed\""), std::string::npos);
  EXPECT_NE(js.find("zero_devices"), std::string::npos);

  // The good plugin works.
  lt_device* d = lt_runtime_default_device(h.rt);
  lt_tensor* a = from_host(d, {1, 2}, {2});
  lt_tensor* m = nullptr;
  LT_OK(lt_add(a, a, &m));
  EXPECT_EQ(to_host(m), (std::vector<float>{2, 4}));
  lt_tensor_free(a);
  lt_tensor_free(m);
}

// Issue #29: dlopen of a FIFO named like a plugin blocks forever; the loader refuses any file on
// the plugin path that is not regular, reports it, and loads the others.
TEST(PluginLoader, AFifoNamedLikeAPluginIsReportedNotOpened) {
  std::string dir = ::testing::TempDir() + "/lt_fifo_plugins_" + std::to_string(::getpid());
  ::mkdir(dir.c_str(), 0700);
  std::string fifo = dir + "/lt_plugin_fifo.so";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ::alarm(30);  // the bug was a blocking open: end the test process rather than hang
  RuntimeHandle h{make_runtime(dir + ":" + plugin_dir("partial"), "partial")};
  ::alarm(0);
  ASSERT_NE(h.rt, nullptr);
  std::string r = report(h.rt);
  size_t at = r.find(fifo);
  ASSERT_NE(at, std::string::npos) << r;
  std::string line = r.substr(at, r.find('\n', at) - at);
  EXPECT_NE(line.find("is a FIFO, not a regular file"), std::string::npos) << line;
  ::unlink(fifo.c_str());
  ::rmdir(dir.c_str());
}

TEST(PluginLoader, MissingDeviceFailsCreationWithAvailableList) {
  lt_runtime_options o{};
  o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
  std::string p = plugin_dir("partial");
  o.plugin_path = p.c_str();
  o.device = "tpu_nonexistent";
  lt_runtime* rt = nullptr;
  Err e(lt_runtime_create(&o, &rt));
  EXPECT_EQ(e.code(), LT_STATUS_NOT_FOUND);
  EXPECT_NE(e.msg().find("tpu_nonexistent"), std::string::npos);
  EXPECT_NE(e.msg().find("partial:0"), std::string::npos) << e.msg();
  EXPECT_EQ(rt, nullptr);
}
