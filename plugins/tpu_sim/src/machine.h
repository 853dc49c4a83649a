// machine.h — the simulated TPU's configuration: presets from the public papers and the
// parsing of [plugins.tpu_sim] options into it. Immutable once a context is created.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lazytensor/plugin_kit.hpp"

namespace lt::tpu {

// One chip. Rates are per chip (all cores together) unless a name says otherwise.
struct MachineConfig {
  std::string preset = "v4";
  int64_t array_rows = 128;  // systolic array: K and M are padded to rows, N to cols
  int64_t array_cols = 128;
  int64_t mxus_per_core = 4;
  int64_t cores = 2;
  double clock_mhz = 1050.0;
  double hbm_gib = 32.0;
  double hbm_gbps = 1200.0;     // GB/s (1e9 bytes/s)
  double vmem_mib = 32.0;       // on-chip vector memory, treated as one pool per chip
  int64_t vector_lanes = 1024;  // f32 vector ops per cycle per core (8 sublanes x 128 lanes)
  double launch_overhead_us = 5.0;

  double clock_hz() const { return clock_mhz * 1e6; }
  // Peak bf16 matrix FLOP/s: 2 FLOPs per MAC, every MXU cell every cycle.
  double peak_flops() const {
    return 2.0 * double(array_rows) * double(array_cols) * double(mxus_per_core) * double(cores) *
           clock_hz();
  }
  double vector_ops_per_s() const { return double(vector_lanes) * double(cores) * clock_hz(); }
  double hbm_bytes_per_s() const { return hbm_gbps * 1e9; }
  uint64_t hbm_capacity_bytes() const { return uint64_t(hbm_gib * 1073741824.0); }
  uint64_t vmem_bytes() const { return uint64_t(vmem_mib * 1048576.0); }
  std::string describe() const;
};

// Builds the machine from the plugin options: `preset` first, then every other key overrides
// one figure. Malformed values throw INVALID_ARGUMENT (unknown keys: the kit, after this).
MachineConfig parse_machine_options(kit::Options& options);

// "18.2 GiB", "512.0 MiB", "96 B": sizes in error messages and descriptions.
std::string format_bytes(double bytes);

}  // namespace lt::tpu
