// device_client.h — the one wrapper around a backend plugin's entry points: every call the core
// makes into a plugin (capability, compile, execute, stats, buffers) is marshalled here, so
// struct sizes, optional entries, error conversion and exception containment live in one place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime.h"

namespace lt::client {

// `dev`'s plugin: does it run node `node` of `g` natively?
bool supports(Device* dev, const lt_graph& g, size_t node);

struct Compiled {
  lt_plugin_executable* exe = nullptr;
  bool dynamic = false;  // the executable runs every value of g's symbols (ABI >= 1.2)
  // Per output: 1 where the plugin accepted the donation offered (ABI >= 1.3); empty when
  // none was offered.
  std::vector<uint8_t> donation_accepted;
};
// Compiles `g`; throws lt::Error (the plugin's code and message) on failure. `donors`: per
// output of g, the input position whose buffer the core may share with it, or -1 (empty: none
// offered; never offered to a plugin of minor < 3, which keeps copies).
Compiled compile(Device* dev, const lt_graph& g, std::span<const int64_t> donors = {});
void execute(Device* dev, lt_plugin_executable* exe, std::span<lt_plugin_buffer* const> inputs,
             std::span<lt_plugin_buffer* const> outputs, std::span<const int64_t> symbols);
void destroy(Device* dev, lt_plugin_executable* exe) noexcept;

// The plugin's optional statistics of `exe` (nullptr: the whole context) as name/value pairs;
// empty when the plugin has no stats entry or it fails (stats are optional, never an error).
std::vector<std::pair<std::string, double>> stats(Plugin* p, lt_plugin_executable* exe);

// Buffers. alloc throws (the plugin's error); free never throws.
lt_plugin_buffer* alloc(Device* dev, size_t nbytes);
void free(Device* dev, lt_plugin_buffer* buffer) noexcept;
void upload(Device* dev, lt_plugin_buffer* buffer, const void* data, size_t nbytes);
void download(Device* dev, const lt_plugin_buffer* buffer, void* data, size_t nbytes);
// The host address of a buffer of a host-addressable device; nullptr when there is none.
void* host_ptr(Device* dev, const lt_plugin_buffer* buffer);
// Wraps host memory in place (ABI >= 1.1, buffer_wrap_host); nullptr when the plugin cannot.
lt_plugin_buffer* wrap_host(Device* dev, void* data, size_t nbytes);

// lt-info's probes: does `dev` run a canonical f32 example of built-in op `op` natively, or
// does it run every node of that example's decomposition?
bool example_supported(Device* dev, uint16_t op);
bool example_decomposes(Device* dev, uint16_t op);

}  // namespace lt::client

namespace lt {
// A Buffer's bytes to and from the host, through its device's plugin.
inline void upload_to(Device* dev, Buffer* buf, const void* data, size_t nbytes) {
  client::upload(dev, buf->handle, data, nbytes);
}
inline void download_from(Device* dev, const Buffer* buf, void* data, size_t nbytes) {
  client::download(dev, buf->handle, data, nbytes);
}
}  // namespace lt
