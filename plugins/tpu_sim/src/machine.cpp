// machine.cpp — TPU presets (figures from Norrie et al. 2021 and Jouppi et al. 2023, see
// docs/backends/tpu_sim.md) and strict parsing of the plugin's options.
#include "machine.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace lt::tpu {

using kit::fail;
namespace {

MachineConfig preset_config(const std::string& name) {
  MachineConfig m;
  m.preset = name;
  if (name == "v2") {
    // TPUv2: 2 cores x 1 MXU 128x128 @ 700 MHz = 45.9 TFLOP/s; 16 GiB HBM @ 700 GB/s.
    m.mxus_per_core = 1;
    m.clock_mhz = 700.0;
    m.hbm_gib = 16.0;
    m.hbm_gbps = 700.0;
    m.vmem_mib = 16.0;
  } else if (name == "v3") {
    // TPUv3: 2 cores x 2 MXU 128x128 @ 940 MHz = 123 TFLOP/s; 32 GiB HBM @ 900 GB/s.
    m.mxus_per_core = 2;
    m.clock_mhz = 940.0;
    m.hbm_gib = 32.0;
    m.hbm_gbps = 900.0;
    m.vmem_mib = 32.0;
  } else if (name == "v4") {
    // TPUv4: 2 cores x 4 MXU 128x128 @ 1050 MHz = 275 TFLOP/s; 32 GiB HBM @ 1200 GB/s.
    m.mxus_per_core = 4;
    m.clock_mhz = 1050.0;
    m.hbm_gib = 32.0;
    m.hbm_gbps = 1200.0;
    m.vmem_mib = 32.0;
  } else {
    fail(LT_STATUS_INVALID_ARGUMENT,
         "option preset = '" + name + "' is not a known preset (expected v2, v3 or v4)");
  }
  return m;
}

int64_t parse_int(const std::string& key, const std::string& value, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const char* first = value.data();
  const char* last = first + value.size();
  auto [ptr, ec] = std::from_chars(first, last, v);
  if (value.empty() || ec != std::errc() || ptr != last || v < lo || v > hi) {
    fail(LT_STATUS_INVALID_ARGUMENT, "option " + key + " = '" + value + "' is not an integer in [" +
                                         std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

double parse_real(const std::string& key, const std::string& value, double lo, double hi,
                  bool lo_inclusive) {
  double v = 0;
  const char* first = value.data();
  const char* last = first + value.size();
  auto [ptr, ec] = std::from_chars(first, last, v);
  bool ok = !value.empty() && ec == std::errc() && ptr == last && std::isfinite(v) &&
            (lo_inclusive ? v >= lo : v > lo) && v <= hi;
  if (!ok) {
    char range[96];
    std::snprintf(range, sizeof range, "%s%g, %g]", lo_inclusive ? "[" : "(", lo, hi);
    fail(LT_STATUS_INVALID_ARGUMENT,
         "option " + key + " = '" + value + "' is not a number in " + range);
  }
  return v;
}

// "128" (square) or "128x64" (rows x cols).
void parse_array(const std::string& value, MachineConfig& m) {
  auto x = value.find('x');
  const int64_t max_dim = 4096;
  if (x == std::string::npos) {
    m.array_rows = m.array_cols = parse_int("systolic_array", value, 1, max_dim);
    return;
  }
  std::string rows = value.substr(0, x), cols = value.substr(x + 1);
  int64_t r = 0, c = 0;
  auto r1 = std::from_chars(rows.data(), rows.data() + rows.size(), r);
  auto r2 = std::from_chars(cols.data(), cols.data() + cols.size(), c);
  if (rows.empty() || cols.empty() || r1.ec != std::errc() || r2.ec != std::errc() ||
      r1.ptr != rows.data() + rows.size() || r2.ptr != cols.data() + cols.size() || r < 1 ||
      c < 1 || r > max_dim || c > max_dim) {
    fail(LT_STATUS_INVALID_ARGUMENT,
         "option systolic_array = '" + value + "' is not N or RxC with sizes in [1, 4096]");
  }
  m.array_rows = r;
  m.array_cols = c;
}

}  // namespace

MachineConfig parse_machine_options(kit::Options& options) {
  MachineConfig m = preset_config(options.take("preset").value_or("v4"));
  bool custom = false;
  auto with = [&](const char* key, auto&& set) {
    if (auto v = options.take(key)) {
      set(*v);
      custom = true;
    }
  };
  with("systolic_array", [&](const std::string& v) { parse_array(v, m); });
  with("mxus_per_core",
       [&](const std::string& v) { m.mxus_per_core = parse_int("mxus_per_core", v, 1, 64); });
  with("cores", [&](const std::string& v) { m.cores = parse_int("cores", v, 1, 1024); });
  with("clock_mhz",
       [&](const std::string& v) { m.clock_mhz = parse_real("clock_mhz", v, 0.0, 1e5, false); });
  with("hbm_gib",
       [&](const std::string& v) { m.hbm_gib = parse_real("hbm_gib", v, 0.0, 1e6, false); });
  with("hbm_gbps",
       [&](const std::string& v) { m.hbm_gbps = parse_real("hbm_gbps", v, 0.0, 1e7, false); });
  with("vmem_mib",
       [&](const std::string& v) { m.vmem_mib = parse_real("vmem_mib", v, 0.0, 1e6, false); });
  with("vector_lanes",
       [&](const std::string& v) { m.vector_lanes = parse_int("vector_lanes", v, 1, 1 << 20); });
  with("launch_overhead_us", [&](const std::string& v) {
    m.launch_overhead_us = parse_real("launch_overhead_us", v, 0.0, 1e9, true);
  });
  if (custom) m.preset += " (customised)";
  return m;
}

std::string format_bytes(double bytes) {
  char buf[64];
  const double kib = 1024.0, mib = kib * 1024.0, gib = mib * 1024.0;
  if (bytes >= gib) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / gib);
  } else if (bytes >= mib) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / mib);
  } else if (bytes >= kib) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / kib);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  }
  return buf;
}

std::string MachineConfig::describe() const {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "simulated TPU %s: %lld cores x %lld MXU %lldx%lld @ %g MHz = %.1f TFLOP/s "
                "bf16, HBM %g GiB @ %g GB/s, VMEM %g MiB, launch %g us",
                preset.c_str(), (long long)cores, (long long)mxus_per_core, (long long)array_rows,
                (long long)array_cols, clock_mhz, peak_flops() / 1e12, hbm_gib, hbm_gbps, vmem_mib,
                launch_overhead_us);
  return buf;
}

}  // namespace lt::tpu
