// config.cpp — the runtime configuration: TOML (toml++) or JSON (nlohmann) file, then
// LT_* environment variables, then lt_runtime_options fields (docs/config.md).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "error.h"
#include "lazytensor/regular_file.hpp"
#include "runtime.h"

namespace lt {
namespace {

std::vector<std::string> split_path(const std::string& s, char sep = ':') {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// Reads option field `f` only if the caller's struct_size covers it.
template <class T>
const char* opt(const lt_runtime_options* o, const char* T::*f) {
  if (!o) return nullptr;
  size_t end =
      reinterpret_cast<size_t>(&(static_cast<const T*>(nullptr)->*f)) + sizeof(const char*);
  if (o->struct_size < end) return nullptr;
  const char* v = o->*f;
  return v && *v ? v : nullptr;
}

std::string scalar_to_string(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) {
    std::ostringstream os;
    os << v.get<double>();
    return os.str();
  }
  return {};
}

bool ends_with(const std::string& s, const char* suf) {
  size_t n = std::strlen(suf);
  return s.size() >= n && s.compare(s.size() - n, n, suf) == 0;
}

// Both formats are converted to one JSON value so the key handling exists once.
// A config is a regular file of at most kMaxConfigBytes: /dev/zero, a FIFO with no writer or a
// directory is refused at once (opened non-blocking, checked with fstat), never read forever.
constexpr size_t kMaxConfigBytes = size_t{1} << 20;

std::string read_text(const std::string& path) {
  lt::file::RegularFile f;
  std::string why, text;
  if (!f.open(path, &why)) fail(LT_STATUS_IO_ERROR, "config: '{}': {}", path, why);
  if (!f.read_all(&text, kMaxConfigBytes, &why))
    fail(LT_STATUS_IO_ERROR, "config: '{}' {}", path, why);
  return text;
}

nlohmann::json read_file(const std::string& path) {
  std::string text = read_text(path);
  if (ends_with(path, ".json")) {
    try {
      return nlohmann::json::parse(text);
    } catch (const std::exception& e) {
      fail(LT_STATUS_IO_ERROR, "config: cannot parse '{}': {}", path, e.what());
    }
  }
  toml::table tbl;
  try {
    tbl = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    fail(LT_STATUS_IO_ERROR, "config: cannot parse '{}': {} (line {}, column {})", path,
         e.description(), e.source().begin.line, e.source().begin.column);
  }
  std::stringstream js;
  js << toml::json_formatter{tbl};
  return nlohmann::json::parse(js.str());
}

// dynamic_buckets: an array of positive sizes (the file) or "8,16,32" (LT_DYNAMIC_BUCKETS),
// kept sorted.
std::vector<int64_t> parse_buckets(const nlohmann::json& v, const std::string& where) {
  std::vector<int64_t> out;
  if (!v.is_array())
    fail(LT_STATUS_IO_ERROR, "config: '{}': dynamic_buckets must be an array of sizes", where);
  for (auto& e : v) {
    if (!e.is_number_integer() || e.get<int64_t>() < 1 || e.get<int64_t>() > (int64_t{1} << 40))
      fail(LT_STATUS_IO_ERROR, "config: '{}': dynamic_buckets holds {}, not a size in 1..2^40",
           where, e.dump());
    out.push_back(e.get<int64_t>());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void apply_file(Config& c, const std::string& path) {
  nlohmann::json j = read_file(path);
  if (!j.is_object()) fail(LT_STATUS_IO_ERROR, "config: '{}' is not a table/object", path);
  auto str = [&](const char* key, const nlohmann::json& v) {
    if (!v.is_string())
      fail(LT_STATUS_IO_ERROR, "config: '{}': key '{}' must be a string", path, key);
    return v.get<std::string>();
  };
  for (auto& [k, v] : j.items()) {
    if (k == "device")
      c.device = str("device", v);
    else if (k == "fallback")
      c.fallback = str("fallback", v);
    else if (k == "log_level")
      c.log_level = str("log_level", v);
    else if (k == "dump_dir")
      c.dump_dir = str("dump_dir", v);
    else if (k == "profile")
      c.profile = str("profile", v);
    else if (k == "optimize")
      c.optimize = str("optimize", v);
    else if (k == "dynamic_shapes")
      c.dynamic_shapes = str("dynamic_shapes", v);
    else if (k == "dynamic_buckets")
      c.dynamic_buckets = parse_buckets(v, path);
    else if (k == "background_compile") {
      if (!v.is_boolean())
        fail(LT_STATUS_IO_ERROR, "config: '{}': background_compile must be true or false", path);
      c.background_compile = v.get<bool>();
    } else if (k == "async_execution") {
      if (!v.is_boolean())
        fail(LT_STATUS_IO_ERROR, "config: '{}': async_execution must be true or false", path);
      c.async_execution = v.get<bool>();
    } else if (k == "cache_capacity") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1)
        fail(LT_STATUS_IO_ERROR, "config: '{}': cache_capacity must be a positive integer", path);
      c.cache_capacity = static_cast<size_t>(v.get<int64_t>());
    } else if (k == "max_region_nodes") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1)
        fail(LT_STATUS_IO_ERROR, "config: '{}': max_region_nodes must be a positive integer", path);
      c.max_region_nodes = static_cast<size_t>(v.get<int64_t>());
    } else if (k == "plugin_path") {
      if (v.is_string()) {
        for (auto& p : split_path(v.get<std::string>())) c.plugin_path.push_back(p);
      } else if (v.is_array()) {
        for (auto& e : v) c.plugin_path.push_back(str("plugin_path", e));
      } else {
        fail(LT_STATUS_IO_ERROR, "config: '{}': plugin_path must be a string or array", path);
      }
    } else if (k == "plugins") {
      if (!v.is_object()) fail(LT_STATUS_IO_ERROR, "config: '{}': plugins must be a table", path);
      for (auto& [pname, tbl] : v.items()) {
        if (!tbl.is_object())
          fail(LT_STATUS_IO_ERROR, "config: '{}': plugins.{} must be a table", path, pname);
        for (auto& [ok, ov] : tbl.items()) {
          if (ov.is_object() || ov.is_array() || ov.is_null()) {
            c.warnings.push_back("config: ignoring non-scalar option plugins." + pname + "." + ok);
            continue;
          }
          c.plugin_options[pname].emplace_back(ok, scalar_to_string(ov));
        }
      }
    } else {
      c.warnings.push_back("config: unknown key '" + k + "' in " + path);
    }
  }
}

}  // namespace

Config load_config(const lt_runtime_options* o) {
  Config c;
  const char* file = opt(o, &lt_runtime_options::config_path);
  if (!file) file = env("LT_CONFIG");
  if (file) {
    c.config_file = file;
    apply_file(c, file);
  }
  auto over = [&](std::string& dst, const char* env_name, const char* lt_runtime_options::*f) {
    if (const char* v = env(env_name)) dst = v;
    if (const char* v = opt(o, f)) dst = v;
  };
  over(c.device, "LT_DEVICE", &lt_runtime_options::device);
  over(c.fallback, "LT_FALLBACK", &lt_runtime_options::fallback);
  over(c.log_level, "LT_LOG_LEVEL", &lt_runtime_options::log_level);
  over(c.dump_dir, "LT_DUMP_DIR", &lt_runtime_options::dump_dir);
  if (const char* v = env("LT_PROFILE")) c.profile = v;
  over(c.dynamic_shapes, "LT_DYNAMIC_SHAPES", &lt_runtime_options::dynamic_shapes);
  over(c.optimize, "LT_OPTIMIZE", &lt_runtime_options::optimize);
  if (const char* v = env("LT_DYNAMIC_BUCKETS")) {
    nlohmann::json list = nlohmann::json::array();
    for (const std::string& item : split_path(std::string(v), ',')) {
      char* end = nullptr;
      long long n = std::strtoll(item.c_str(), &end, 10);
      if (item.empty() || *end)
        fail(LT_STATUS_INVALID_ARGUMENT, "LT_DYNAMIC_BUCKETS='{}': '{}' is not a size", v, item);
      list.push_back(n);
    }
    c.dynamic_buckets = parse_buckets(list, "LT_DYNAMIC_BUCKETS");
  }
  if (const char* v = env("LT_BACKGROUND_COMPILE")) {
    std::string b = v;
    if (b != "0" && b != "1" && b != "true" && b != "false")
      fail(LT_STATUS_INVALID_ARGUMENT, "LT_BACKGROUND_COMPILE='{}' is not one of 0, 1, true, false",
           b);
    c.background_compile = b == "1" || b == "true";
  }
  if (const char* v = env("LT_MAX_REGION_NODES")) {
    char* end = nullptr;
    const long long n = std::strtoll(v, &end, 10);
    if (!*v || *end || n < 1)
      fail(LT_STATUS_INVALID_ARGUMENT, "LT_MAX_REGION_NODES='{}' is not a positive integer", v);
    c.max_region_nodes = static_cast<size_t>(n);
  }
  if (const char* v = env("LT_ASYNC_EXECUTION")) {
    std::string b = v;
    if (b != "0" && b != "1" && b != "true" && b != "false")
      fail(LT_STATUS_INVALID_ARGUMENT, "LT_ASYNC_EXECUTION='{}' is not one of 0, 1, true, false",
           b);
    c.async_execution = b == "1" || b == "true";
  }
  // Plugin directories accumulate: explicit option first, then env, then the config file.
  std::vector<std::string> dirs;
  if (const char* v = opt(o, &lt_runtime_options::plugin_path))
    for (auto& p : split_path(v)) dirs.push_back(p);
  if (const char* v = env("LT_PLUGIN_PATH"))
    for (auto& p : split_path(v)) dirs.push_back(p);
  for (auto& p : c.plugin_path) dirs.push_back(p);
  c.plugin_path = std::move(dirs);
  if (c.fallback != "silent" && c.fallback != "warn" && c.fallback != "error")
    fail(LT_STATUS_INVALID_ARGUMENT, "config: fallback '{}' is not one of silent, warn, error",
         c.fallback);
  if (c.dynamic_shapes != "auto" && c.dynamic_shapes != "marked" && c.dynamic_shapes != "off")
    fail(LT_STATUS_INVALID_ARGUMENT, "config: dynamic_shapes '{}' is not one of auto, marked, off",
         c.dynamic_shapes);
  if (c.optimize != "none" && c.optimize != "exact" && c.optimize != "fast")
    fail(LT_STATUS_INVALID_ARGUMENT, "config: optimize '{}' is not one of none, exact, fast",
         c.optimize);
  if (spdlog::level::from_str(c.log_level) == spdlog::level::off && c.log_level != "off")
    fail(LT_STATUS_INVALID_ARGUMENT,
         "config: log_level '{}' is not one of trace, debug, info, warn, error, critical, off",
         c.log_level);
  return c;
}

}  // namespace lt
