// device_client.cpp — every plugin entry point the core calls, marshalled once (device_client.h).
#include "device_client.h"

#include <chrono>
#include <cstring>

#include "error.h"
#include "lazytensor/lower/decompose.hpp"
#include "lazytensor/lower/graph.hpp"
#include "ops.h"
#include "profile.h"
#include "runtime.h"

namespace lt::client {
namespace {

lt_plugin_buffer_args buffer_args(Device* dev, const lt_plugin_buffer* buffer) {
  lt_plugin_buffer_args a{};
  a.struct_size = LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE;
  a.context = dev->plugin->ctx;
  a.device = dev->index;
  a.buffer = const_cast<lt_plugin_buffer*>(buffer);
  return a;
}

// ABI 1.3: a plugin's kernel or host step, a child span of the region's execution (called on
// the thread of the execute call, inside it). Nothing may throw across the plugin.
void kernel_span(void* user, const char* name, int64_t start_ns, int64_t end_ns) {
  try {
    using Clock = Profiler::Clock;
    const auto at = [](int64_t ns) { return Clock::time_point(std::chrono::nanoseconds(ns)); };
    static_cast<Profiler*>(user)->complete("kernel", name ? name : "kernel", at(start_ns),
                                           at(end_ns));
  } catch (...) {  // a span lost to out of memory
  }
}

}  // namespace

bool supports(Device* dev, const lt_graph& g, size_t node) {
  Plugin* p = dev->plugin;
  lt_plugin_supports_args a{};
  a.struct_size = LT_PLUGIN_SUPPORTS_ARGS_STRUCT_SIZE;
  a.context = p->ctx;
  a.device = dev->index;
  a.graph = &g;
  a.node = node;
  p->call("supports", [&] { return p->api->supports(&a); });
  return a.supported != 0;
}

Compiled compile(Device* dev, const lt_graph& g, std::span<const int64_t> donors) {
  Plugin* p = dev->plugin;
  lt_plugin_compile_args a{};
  a.struct_size = LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE;
  a.context = p->ctx;
  a.device = dev->index;
  a.graph = &g;
  // Donation is offered to plugins of minor >= 3 only: an older one never reads the fields.
  std::vector<uint8_t> accepted;
  if (p->abi_minor >= 3 && !donors.empty() && donors.size() == g.num_outputs) {
    accepted.assign(donors.size(), 0);
    a.donor_inputs = donors.data();
    a.donation_accepted = accepted.data();
  }
  p->call("compile", [&] { return p->api->compile(&a); });
  if (!a.executable) fail(LT_STATUS_PLUGIN_ERROR, "{}: compile returned no executable", p->name);
  for (size_t k = 0; k < accepted.size(); ++k)  // anything but 1 (or no offer) means no
    accepted[k] = accepted[k] == 1 && donors[k] >= 0 ? 1 : 0;
  // A plugin of ABI 1.0/1.1 never wrote the field: its executables are static.
  return {a.executable, p->abi_minor >= 2 && a.dynamic == 1, std::move(accepted)};
}

void execute(Device* dev, lt_plugin_executable* exe, std::span<lt_plugin_buffer* const> inputs,
             std::span<lt_plugin_buffer* const> outputs, std::span<const int64_t> symbols) {
  Plugin* p = dev->plugin;
  lt_plugin_execute_args a{};
  a.struct_size = LT_PLUGIN_EXECUTE_ARGS_STRUCT_SIZE;
  a.context = p->ctx;
  a.executable = exe;
  a.num_inputs = inputs.size();
  a.inputs = const_cast<lt_plugin_buffer**>(inputs.data());
  a.num_outputs = outputs.size();
  a.outputs = const_cast<lt_plugin_buffer**>(outputs.data());
  a.num_symbols = symbols.size();
  a.symbol_values = symbols.empty() ? nullptr : symbols.data();
  if (Profiler* prof = dev->runtime->profiler.get(); prof && p->abi_minor >= 3) {
    a.span = &kernel_span;  // older plugins are profiled as whole executables
    a.span_user = prof;
  }
  p->call("execute", [&] { return p->api->execute(&a); });
}

void destroy(Device* dev, lt_plugin_executable* exe) noexcept {
  Plugin* p = dev->plugin;
  p->call_noexcept("executable_destroy", [&] { p->api->executable_destroy(p->ctx, exe); });
}

std::vector<std::pair<std::string, double>> stats(Plugin* p, lt_plugin_executable* exe) {
  std::vector<std::pair<std::string, double>> out;
  if (!LT_PLUGIN_HAS(p, stats)) return out;
  lt_plugin_stats_args a{};
  a.struct_size = LT_PLUGIN_STATS_ARGS_STRUCT_SIZE;
  a.context = p->ctx;
  a.executable = exe;
  a.user = &out;
  a.emit = [](void* user, const char* name, double v) {
    if (!name) return;
    try {
      static_cast<std::vector<std::pair<std::string, double>>*>(user)->emplace_back(name, v);
    } catch (...) {  // out of memory: the stat is lost, nothing else
    }
  };
  try {
    p->call("stats", [&] { return p->api->stats(&a); });
  } catch (const Error&) {
    out.clear();  // optional: a failing stats call only loses them
  }
  return out;
}

lt_plugin_buffer* alloc(Device* dev, size_t nbytes) {
  Plugin* p = dev->plugin;
  lt_plugin_buffer_args a = buffer_args(dev, nullptr);
  a.nbytes = nbytes;
  p->call("buffer_alloc", [&] { return p->api->buffer_alloc(&a); });
  if (!a.buffer) fail(LT_STATUS_PLUGIN_ERROR, "{}: buffer_alloc returned no buffer", p->name);
  return a.buffer;
}

void free(Device* dev, lt_plugin_buffer* buffer) noexcept {
  Plugin* p = dev->plugin;
  p->call_noexcept("buffer_free", [&] { p->api->buffer_free(p->ctx, buffer); });
}

void upload(Device* dev, lt_plugin_buffer* buffer, const void* data, size_t nbytes) {
  if (!nbytes) return;
  lt_plugin_buffer_args a = buffer_args(dev, buffer);
  a.nbytes = nbytes;
  a.src = data;
  dev->plugin->call("buffer_upload", [&] { return dev->plugin->api->buffer_upload(&a); });
}

void download(Device* dev, const lt_plugin_buffer* buffer, void* data, size_t nbytes) {
  if (!nbytes) return;
  lt_plugin_buffer_args a = buffer_args(dev, buffer);
  a.nbytes = nbytes;
  a.dst = data;
  dev->plugin->call("buffer_download", [&] { return dev->plugin->api->buffer_download(&a); });
}

void* host_ptr(Device* dev, const lt_plugin_buffer* buffer) {
  if (!dev->host_addressable || !LT_PLUGIN_HAS(dev->plugin, buffer_host_ptr)) return nullptr;
  lt_plugin_buffer_args a = buffer_args(dev, buffer);
  dev->plugin->call("buffer_host_ptr", [&] { return dev->plugin->api->buffer_host_ptr(&a); });
  return a.host_ptr;
}

lt_plugin_buffer* wrap_host(Device* dev, void* data, size_t nbytes) {
  if (!dev->host_addressable || !LT_PLUGIN_HAS(dev->plugin, buffer_wrap_host)) return nullptr;
  lt_plugin_buffer_args a = buffer_args(dev, nullptr);
  a.nbytes = nbytes;
  a.host_ptr = data;
  dev->plugin->call("buffer_wrap_host", [&] { return dev->plugin->api->buffer_wrap_host(&a); });
  return a.buffer;
}

bool example_supported(Device* dev, uint16_t op) {
  if (op == kOpInput || op >= kNumBuiltinOps) return false;  // custom ops have no example
  lower::OwnedGraph g = lower::example_graph(static_cast<OpId>(op));
  const lt_graph& v = g.view();
  std::lock_guard lk(dev->exec_mu);
  return supports(dev, v, static_cast<size_t>(v.outputs[0]));
}

bool example_decomposes(Device* dev, uint16_t op) {
  if (op == kOpInput || op >= kNumBuiltinOps || !lower::op_info(static_cast<OpId>(op)).composite)
    return false;
  lower::OwnedGraph g = lower::example_graph(static_cast<OpId>(op)), out;
  lower::DecomposeReport report;
  std::lock_guard lk(dev->exec_mu);
  auto ask = [&](const lt_graph& gr, size_t i) { return supports(dev, gr, i); };
  if (!lower::decompose(g.view(), ask, &out, &report)) return false;
  const lt_graph& v = out.view();
  for (size_t i = 0; i < v.num_nodes; ++i)
    if (std::strcmp(v.nodes[i].op, "input") != 0 && report.supported[i] != 1) return false;
  return true;
}

}  // namespace lt::client
