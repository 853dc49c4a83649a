// plugin_loader.cpp — discovers lt_plugin_*.so on the plugin path with Boost.DLL, validates
// each table (ABI version, struct_size, required functions), creates its context and devices.
// A plugin that fails is recorded with its path and reason and skipped; the others load.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <boost/dll/shared_library.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "error.h"
#include "lazytensor/regular_file.hpp"
#include "runtime.h"

namespace lt {
namespace {

namespace fs = std::filesystem;

// Devices one plugin may report: beyond any machine (a plugin claiming 2^40 had every program
// ask for device_info 2^40 times).
constexpr size_t kMaxDevicesPerPlugin = 1024;

// Plugin libraries stay mapped for the life of the process: their thread pools (TBB,
// OpenCL runtimes) may outlive the contexts, and unloading them at exit is a classic crash.
std::mutex g_libs_mu;
std::vector<boost::dll::shared_library>* g_libs = new std::vector<boost::dll::shared_library>;

std::string install_plugin_dir() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&lt_version), &info) || !info.dli_fname) return {};
  fs::path lib = fs::absolute(info.dli_fname);
  return (lib.parent_path() / LT_PLUGIN_SUBDIR_REL).string();
}

void plugin_log(void* user, int level, const char* message) {
  auto* p = static_cast<Plugin*>(user);
  if (!p || !p->logger || !message) return;
  try {
    level = std::clamp(level, 0, 5);
    p->logger->log(static_cast<spdlog::level::level_enum>(level), "{}", message);
  } catch (...) {
  }
}

struct Required {
  size_t end;
  const char* name;
  bool set;
};

// Returns "" if the table is usable, else the reason.
std::string validate(const lt_plugin_api* api) {
  if (!api) return "entry symbol returned a NULL function table";
  // The version fields come first so that a plugin of another major is named as such even
  // when its table layout differs; they are read only if struct_size covers them.
  size_t head = offsetof(lt_plugin_api, abi_minor) + sizeof(uint32_t);
  if (api->struct_size < head)
    return fmt::format(
        "function table struct_size {} is too small to hold even the version fields ({} bytes)",
        api->struct_size, head);
  if (api->abi_major != LT_PLUGIN_ABI_MAJOR)
    return fmt::format(
        "plugin ABI version {}.{} is incompatible with the core's {}.{} (major "
        "versions differ)",
        api->abi_major, api->abi_minor, LT_PLUGIN_ABI_MAJOR, LT_PLUGIN_ABI_MINOR);
  size_t need = offsetof(lt_plugin_api, executable_destroy) + sizeof(void*);
  if (api->struct_size < need)
    return fmt::format("function table struct_size {} is smaller than the required {}",
                       api->struct_size, need);
  if (!api->name || !*api->name) return "plugin has no name";
  for (const char* c = api->name; *c; ++c)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
      return fmt::format("plugin name '{}' is not [a-z0-9_]+", api->name);
  std::vector<std::pair<const char*, const void*>> req = {
      {"error_message", reinterpret_cast<const void*>(api->error_message)},
      {"error_code", reinterpret_cast<const void*>(api->error_code)},
      {"error_destroy", reinterpret_cast<const void*>(api->error_destroy)},
      {"create", reinterpret_cast<const void*>(api->create)},
      {"destroy", reinterpret_cast<const void*>(api->destroy)},
      {"device_count", reinterpret_cast<const void*>(api->device_count)},
      {"device_info", reinterpret_cast<const void*>(api->device_info)},
      {"buffer_alloc", reinterpret_cast<const void*>(api->buffer_alloc)},
      {"buffer_free", reinterpret_cast<const void*>(api->buffer_free)},
      {"buffer_upload", reinterpret_cast<const void*>(api->buffer_upload)},
      {"buffer_download", reinterpret_cast<const void*>(api->buffer_download)},
      {"supports", reinterpret_cast<const void*>(api->supports)},
      {"compile", reinterpret_cast<const void*>(api->compile)},
      {"execute", reinterpret_cast<const void*>(api->execute)},
      {"executable_destroy", reinterpret_cast<const void*>(api->executable_destroy)},
  };
  std::string missing;
  for (auto& [n, p] : req)
    if (!p) missing += (missing.empty() ? "" : ", ") + std::string(n);
  if (!missing.empty()) return "required functions are NULL: " + missing;
  return {};
}

std::shared_ptr<spdlog::logger> plugin_logger(const std::string& name,
                                              spdlog::level::level_enum lv) {
  std::string ln = "lt.plugin." + name;
  auto lg = spdlog::get(ln);
  if (!lg) {
    try {
      lg = spdlog::stderr_color_mt(ln);
    } catch (const spdlog::spdlog_ex&) {
      lg = spdlog::get(ln);
    }
  }
  if (lg) lg->set_level(lv);
  return lg;
}

// Loads one file; returns the plugin or sets `reason`.
std::unique_ptr<Plugin> load_one(Runtime* rt, const std::string& path, std::string& reason) {
  // dlopen would block on a FIFO named like a plugin: regular files only, opened non-blocking.
  {
    lt::file::RegularFile f;
    std::string why;
    if (!f.open(path, &why)) {
      reason = "cannot load shared object: it " + why;
      return nullptr;
    }
  }
  // dlopen first, ourselves: its dlerror() text ("undefined symbol: foo", "wrong ELF class")
  // is what a plugin author needs, and Boost.DLL consumes it and reports an unrelated errno.
  void* probe = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!probe) {
    const char* dl = dlerror();
    reason = fmt::format("cannot load shared object: {}", dl ? dl : "dlopen failed");
    return nullptr;
  }
  boost::dll::shared_library lib;
  try {
    lib.load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    ::dlclose(probe);
    reason = fmt::format("cannot load shared object: {}", e.what());
    return nullptr;
  }
  ::dlclose(probe);  // `lib` holds its own reference to the same object
  if (!lib.has(LT_PLUGIN_ENTRY_SYMBOL)) {
    reason = fmt::format("entry symbol '{}' not found", LT_PLUGIN_ENTRY_SYMBOL);
    return nullptr;
  }
  {
    std::lock_guard lk(g_libs_mu);
    g_libs->push_back(lib);
  }
  auto entry = lib.get<const lt_plugin_api*()>(LT_PLUGIN_ENTRY_SYMBOL);
  const lt_plugin_api* api = nullptr;
  try {
    api = entry();
  } catch (...) {
    reason = fmt::format("entry symbol '{}' threw a C++ exception", LT_PLUGIN_ENTRY_SYMBOL);
    return nullptr;
  }
  reason = validate(api);
  if (!reason.empty()) return nullptr;
  for (auto& p : rt->plugins)
    if (p->name == api->name) {
      reason = fmt::format("a plugin named '{}' is already loaded from {}", p->name, p->path);
      return nullptr;
    }
  auto plugin = std::make_unique<Plugin>();
  plugin->api = api;
  plugin->name = api->name;
  plugin->version = api->version ? api->version : "";
  plugin->path = path;
  plugin->abi_major = api->abi_major;
  plugin->abi_minor = api->abi_minor;
  plugin->logger = plugin_logger(plugin->name, spdlog::level::from_str(rt->config.log_level));
  auto oit = rt->config.plugin_options.find(plugin->name);
  if (oit != rt->config.plugin_options.end()) plugin->options = oit->second;
  uint64_t oh = hash_mix(plugin->options.size());
  for (auto& [k, v] : plugin->options) {
    oh = hash_combine(oh, hash_bytes(k.data(), k.size()));
    oh = hash_combine(oh, hash_bytes(v.data(), v.size()));
  }
  plugin->options_hash = oh;

  std::vector<lt_plugin_option> opts;
  for (auto& [k, v] : plugin->options) opts.push_back({k.c_str(), v.c_str()});
  lt_plugin_create_args ca{};
  ca.struct_size = LT_PLUGIN_CREATE_ARGS_STRUCT_SIZE;
  ca.core_abi_major = LT_PLUGIN_ABI_MAJOR;
  ca.core_abi_minor = LT_PLUGIN_ABI_MINOR;
  ca.num_options = opts.size();
  ca.options = opts.data();
  ca.log = plugin_log;
  ca.log_user = plugin.get();
  try {
    plugin->call("create", [&] { return api->create(&ca); });
    if (!ca.context) fail(LT_STATUS_PLUGIN_ERROR, "create returned no context");
  } catch (const Error& e) {
    reason = e.message();
    return nullptr;
  }
  plugin->ctx = ca.context;
  size_t count = 0;
  try {
    plugin->call("device_count", [&] { return api->device_count(plugin->ctx, &count); });
    if (count == 0) fail(LT_STATUS_PLUGIN_ERROR, "plugin reports 0 devices");
    if (count > kMaxDevicesPerPlugin)  // a plugin's answers are input: bounded like any other
      fail(LT_STATUS_PLUGIN_ERROR, "plugin reports {} devices (at most {})", count,
           kMaxDevicesPerPlugin);
    for (size_t i = 0; i < count; ++i) {
      lt_plugin_device_info_args ia{};
      ia.struct_size = LT_PLUGIN_DEVICE_INFO_ARGS_STRUCT_SIZE;
      ia.context = plugin->ctx;
      ia.device = i;
      plugin->call("device_info", [&] { return api->device_info(&ia); });
      auto dev = std::make_unique<lt_device>();
      dev->runtime = rt;
      dev->plugin = plugin.get();
      dev->index = i;
      dev->name = fmt::format("{}:{}", plugin->name, i);
      dev->info_name = ia.name ? ia.name : "";
      dev->kind = ia.kind ? ia.kind : "";
      dev->description = ia.description ? ia.description : "";
      dev->memory_bytes = ia.memory_bytes;
      dev->host_addressable = ia.host_addressable != 0 && LT_PLUGIN_HAS(plugin, buffer_host_ptr);
      dev->allocator = std::make_unique<Allocator>(dev.get());
      if (rt->config.async_execution) dev->queue = std::make_unique<ExecQueue>(dev.get());
      plugin->devices.push_back(dev.get());
      rt->devices.push_back(std::move(dev));
    }
  } catch (const Error& e) {
    // Roll back devices of this plugin before destroying its context.
    rt->devices.erase(std::remove_if(rt->devices.begin(), rt->devices.end(),
                                     [&](auto& d) { return d->plugin == plugin.get(); }),
                      rt->devices.end());
    plugin->call_noexcept("destroy", [&] { api->destroy(plugin->ctx); });
    reason = e.message();
    return nullptr;
  }
  return plugin;
}

}  // namespace

namespace {
// The exception in flight, for a message; called only inside a catch block.
std::string escaped_what() {
  try {
    throw;
  } catch (const std::exception& e) {
    return fmt::format("std::exception: {}", e.what());
  } catch (...) {
    return "an exception of unknown type";
  }
}
}  // namespace

void Plugin::escaped(const char* what) const {
  fail(LT_STATUS_PLUGIN_ERROR,
       "{}: {} threw a C++ exception across the plugin ABI ({}); plugins must return errors "
       "as lt_plugin_error values ({})",
       name, what, escaped_what(), path);
}

void Plugin::log_escaped(const char* what) const noexcept {
  try {
    std::string msg = fmt::format("{}: {} threw a C++ exception across the plugin ABI ({})", name,
                                  what, escaped_what());
    if (logger) logger->error("{}", msg);
  } catch (...) {
  }
}

void Plugin::check(lt_plugin_error* err, const char* what) const {
  if (!err) return;
  std::string msg;
  lt_status_code code = LT_STATUS_PLUGIN_ERROR;
  try {
    const char* m = api->error_message(err);
    msg = m ? m : "";
    code = api->error_code(err);
    api->error_destroy(err);
  } catch (...) {
    msg = "(the plugin's error functions threw a C++ exception)";
  }
  // Out-of-memory stays recognisable to the application; every other plugin failure, a code
  // outside lt_status_code's values included (its range sentinels make any int32 defined to
  // read), is reported as PLUGIN_ERROR with the plugin's own message.
  fail(code == LT_STATUS_OUT_OF_MEMORY ? LT_STATUS_OUT_OF_MEMORY : LT_STATUS_PLUGIN_ERROR,
       "{}: {} failed: {}", name, what, msg);
}

std::string choose_openblas_coretype() {
  if (const char* v = std::getenv("OPENBLAS_CORETYPE"))
    return fmt::format("OPENBLAS_CORETYPE={} (already set in the environment)", v);
  __builtin_cpu_init();
  const char* pick = nullptr;
  const char* why = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    pick = "SkylakeX", why = "CPU has avx512f+avx512bw+avx512vl";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    pick = "Haswell", why = "CPU has avx2+fma";
  else if (__builtin_cpu_supports("avx"))
    pick = "Sandybridge", why = "CPU has avx";
  if (!pick) return "OPENBLAS_CORETYPE left unset (no avx on this CPU)";
  setenv("OPENBLAS_CORETYPE", pick, 0);
  return fmt::format("OPENBLAS_CORETYPE={} set by the core ({})", pick, why);
}

void load_plugins(Runtime* rt) {
  std::vector<std::string> dirs = rt->config.plugin_path;
  std::string inst = install_plugin_dir();
  if (!inst.empty()) dirs.push_back(inst);
  std::vector<std::string> seen;
  for (auto& d : dirs) {
    std::error_code ec;
    std::string canon = fs::weakly_canonical(d, ec).string();
    if (ec) canon = d;
    if (std::find(seen.begin(), seen.end(), canon) != seen.end()) continue;
    seen.push_back(canon);
    rt->search_paths.push_back(d);
    if (!fs::is_directory(d, ec)) {
      rt->log->debug("plugin directory {} does not exist", d);
      continue;
    }
    std::vector<std::string> files;
    for (auto& e : fs::directory_iterator(d, ec)) {
      std::string fn = e.path().filename().string();
      if (fn.rfind("lt_plugin_", 0) == 0 || fn.rfind("liblt_plugin_", 0) == 0)
        if (fn.size() > 3 && fn.compare(fn.size() - 3, 3, ".so") == 0)
          files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    for (auto& f : files) {
      std::string reason;
      std::unique_ptr<Plugin> p;
      try {
        p = load_one(rt, f, reason);
      } catch (const std::exception& e) {
        reason = std::string("unexpected error: ") + e.what();
      } catch (...) {
        reason = "unexpected error: an exception of unknown type while loading";
      }
      if (p) {
        rt->log->debug("loaded plugin {} {} from {}", p->name, p->version, f);
        if (p->name == "cpu_eager") rt->fallback = p.get();
        rt->plugins.push_back(std::move(p));
      } else {
        rt->log->warn("plugin {} skipped: {}", f, reason);
        rt->failed.push_back({f, reason});
      }
    }
  }
}

}  // namespace lt
