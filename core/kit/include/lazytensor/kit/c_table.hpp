// c_table.hpp — part of plugin_kit.hpp (include that): the C function table of lt_plugin.h
// filled from an lt::kit::Backend: every argument struct checked (struct_size, NULLs, device
// index, byte ranges, buffer sizes), every graph validated, every exception turned into an
// lt_plugin_error; and LT_KIT_PLUGIN, which exports it.
#pragma once

#include "lazytensor/plugin_kit.hpp"

struct lt_plugin_context {
  std::unique_ptr<lt::kit::Backend> backend;
  std::vector<lt::kit::Device> devices;
};
struct lt_plugin_executable {
  lt::kit::detail::Compiled compiled;
};

namespace lt::kit::detail {

// The C table of backend B, named `name`. One per plugin (function-local statics).
template <class B>
struct Table {
  static inline const char* name = "";
  static inline const char* version = "";

  // The error returned when not even an error can be allocated; built with the table.
  static lt_plugin_error& oom() {
    static lt_plugin_error e{LT_STATUS_OUT_OF_MEMORY, std::string(name) + ": out of memory", true};
    return e;
  }
  static lt_plugin_error* make(lt_status_code code, const std::string& message) noexcept {
    try {
      return new lt_plugin_error{code, std::string(name) + ": " + message};
    } catch (...) {
      return &oom();
    }
  }
  // The one conversion point from C++ exceptions to ABI errors.
  template <class F>
  static lt_plugin_error* guard(F&& body) noexcept {
    try {
      body();
      return nullptr;
    } catch (const Error& e) {
      return make(e.code(), e.what());
    } catch (const std::bad_alloc&) {
      return make(LT_STATUS_OUT_OF_MEMORY, "out of memory");
    } catch (const std::exception& e) {
      return make(LT_STATUS_INTERNAL, std::string("internal error: ") + e.what());
    } catch (...) {
      return make(LT_STATUS_INTERNAL, "internal error: unknown exception");
    }
  }
  template <class Args>
  static void check(const Args* a, size_t need, const char* what) {
    if (!a) fail(LT_STATUS_INVALID_ARGUMENT, std::string(what) + ": args is NULL");
    if (a->struct_size < need)
      fail(LT_STATUS_ABI_MISMATCH, std::string(what) + ": struct_size " +
                                       std::to_string(a->struct_size) + " is smaller than " +
                                       std::to_string(need));
  }
  static Backend& ctx(lt_plugin_context* c, const char* what) {
    if (!c || !c->backend)
      fail(LT_STATUS_INVALID_ARGUMENT, std::string(what) + ": context is NULL");
    return *c->backend;
  }
  static void device(lt_plugin_context* c, size_t d, const char* what) {
    if (d >= c->devices.size())
      fail(LT_STATUS_NOT_FOUND, std::string(what) + ": device " + std::to_string(d) +
                                    " does not exist (" + std::to_string(c->devices.size()) +
                                    " devices)");
  }

  static const char* error_message(const lt_plugin_error* e) { return e ? e->message.c_str() : ""; }
  static lt_status_code error_code(const lt_plugin_error* e) { return e ? e->code : LT_STATUS_OK; }
  static void error_destroy(lt_plugin_error* e) {
    if (e && !e->is_static) delete e;
  }

  static lt_plugin_error* create(lt_plugin_create_args* a) {
    return guard([&] {
      check(a, LT_PLUGIN_CREATE_ARGS_STRUCT_SIZE, "create");
      if (a->core_abi_major != LT_PLUGIN_ABI_MAJOR)
        fail(LT_STATUS_ABI_MISMATCH, "core ABI major " + std::to_string(a->core_abi_major) +
                                         " != plugin ABI major " +
                                         std::to_string(LT_PLUGIN_ABI_MAJOR));
      if (a->num_options && !a->options)
        fail(LT_STATUS_INVALID_ARGUMENT, "create: options is NULL");
      std::vector<std::pair<std::string, std::string>> kv;
      for (size_t i = 0; i < a->num_options; ++i) {
        const lt_plugin_option& o = a->options[i];
        if (!o.key || !o.value) fail(LT_STATUS_INVALID_ARGUMENT, "option with a NULL key or value");
        kv.emplace_back(o.key, o.value);
      }
      Options options(std::move(kv));
      Context context{options, Log(a->log, a->log_user)};
      auto c = std::make_unique<lt_plugin_context>();
      c->backend = std::make_unique<B>(context);
      options.check_all_known();
      c->devices = c->backend->devices();
      a->context = c.release();
    });
  }
  static void destroy(lt_plugin_context* c) { delete c; }

  static lt_plugin_error* device_count(lt_plugin_context* c, size_t* out) {
    return guard([&] {
      ctx(c, "device_count");
      if (!out) fail(LT_STATUS_INVALID_ARGUMENT, "device_count: out is NULL");
      *out = c->devices.size();
    });
  }
  static lt_plugin_error* device_info(lt_plugin_device_info_args* a) {
    return guard([&] {
      check(a, LT_PLUGIN_DEVICE_INFO_ARGS_STRUCT_SIZE, "device_info");
      ctx(a->context, "device_info");
      device(a->context, a->device, "device_info");
      const Device& d = a->context->devices[a->device];
      a->name = d.name.c_str();
      a->kind = d.kind.c_str();
      a->description = d.description.c_str();
      a->memory_bytes = d.memory_bytes;
      a->host_addressable = d.host_addressable ? 1 : 0;
    });
  }

  static Backend& buffer_call(lt_plugin_buffer_args* a, const char* what, bool needs_buffer) {
    check(a, LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE, what);
    Backend& b = ctx(a->context, what);
    device(a->context, a->device, what);
    if (needs_buffer && !a->buffer)
      fail(LT_STATUS_INVALID_ARGUMENT, std::string(what) + ": buffer is NULL");
    return b;
  }
  static void range(const lt_plugin_buffer_args* a, const char* what) {
    if (a->offset > a->buffer->nbytes || a->nbytes > a->buffer->nbytes - a->offset)
      fail(LT_STATUS_INVALID_ARGUMENT,
           std::string(what) + ": byte range [" + std::to_string(a->offset) + ", " +
               std::to_string(a->offset + a->nbytes) + ") exceeds the buffer's " +
               std::to_string(a->buffer->nbytes) + " bytes");
  }
  static lt_plugin_error* buffer_alloc(lt_plugin_buffer_args* a) {
    return guard([&] {
      Backend& b = buffer_call(a, "buffer_alloc", false);
      a->buffer = b.alloc(a->device, a->nbytes);
      if (!a->buffer) fail(LT_STATUS_OUT_OF_MEMORY, "buffer_alloc returned no buffer");
    });
  }
  static void buffer_free(lt_plugin_context* c, lt_plugin_buffer* buf) {
    if (!buf) return;
    if (buf->borrowed) {  // the memory belongs to whoever lent it; only the handle is ours
      delete buf;
      return;
    }
    if (c && c->backend) {
      c->backend->free(buf);
    } else {
      std::free(buf->data);
      delete buf;
    }
  }
  static lt_plugin_error* buffer_upload(lt_plugin_buffer_args* a) {
    return guard([&] {
      Backend& b = buffer_call(a, "buffer_upload", true);
      range(a, "buffer_upload");
      if (!a->nbytes) return;
      if (!a->src) fail(LT_STATUS_INVALID_ARGUMENT, "buffer_upload: src is NULL");
      b.upload(a->buffer, a->offset, a->src, a->nbytes);
    });
  }
  static lt_plugin_error* buffer_download(lt_plugin_buffer_args* a) {
    return guard([&] {
      Backend& b = buffer_call(a, "buffer_download", true);
      range(a, "buffer_download");
      if (!a->nbytes) return;
      if (!a->dst) fail(LT_STATUS_INVALID_ARGUMENT, "buffer_download: dst is NULL");
      b.download(a->buffer, a->offset, a->dst, a->nbytes);
    });
  }
  static lt_plugin_error* buffer_host_ptr(lt_plugin_buffer_args* a) {
    return guard([&] {
      Backend& b = buffer_call(a, "buffer_host_ptr", true);
      a->host_ptr =
          a->context->devices[a->device].host_addressable ? b.host_ptr(a->buffer) : nullptr;
    });
  }

  // Host memory is used in place on a host-addressable device when it is 64-byte aligned, the
  // alignment of the kit's own buffers (generated kernels may rely on it); else the core copies.
  static lt_plugin_error* buffer_wrap_host(lt_plugin_buffer_args* a) {
    return guard([&] {
      buffer_call(a, "buffer_wrap_host", false);
      a->buffer = nullptr;
      if (!a->context->devices[a->device].host_addressable || !a->host_ptr ||
          reinterpret_cast<uintptr_t>(a->host_ptr) % 64 != 0)
        return;
      auto b = std::make_unique<Buffer>();
      b->data = a->host_ptr;
      b->nbytes = b->capacity = a->nbytes;
      b->device = a->device;
      b->borrowed = true;
      a->buffer = b.release();
    });
  }

  static const lt_graph& graph(const lt_graph* g, const char* what) {
    if (!g) fail(LT_STATUS_INVALID_ARGUMENT, std::string(what) + ": graph is NULL");
    return *g;
  }
  static lt_plugin_error* supports(lt_plugin_supports_args* a) {
    return guard([&] {
      check(a, LT_PLUGIN_SUPPORTS_ARGS_STRUCT_SIZE, "supports");
      Backend& b = ctx(a->context, "supports");
      device(a->context, a->device, "supports");
      const lt_graph& g = graph(a->graph, "supports");
      if (a->node >= g.num_nodes || !g.nodes)
        fail(LT_STATUS_INVALID_ARGUMENT, "supports: node " + std::to_string(a->node) +
                                             " is out of range (" + std::to_string(g.num_nodes) +
                                             " nodes)");
      a->supported = 0;
      if (g.nodes[a->node].op && std::strcmp(g.nodes[a->node].op, "input") == 0) {
        a->supported = 1;  // leaves are bound to buffers; every backend takes them
        return;
      }
      try {
        lower::validate_node(g, a->node);
      } catch (const Error&) {
        return;  // a node this plugin cannot trust: "no", not an error
      }
      a->supported = b.supports(g, a->node, a->device) ? 1 : 0;
    });
  }
  static lt_plugin_error* compile(lt_plugin_compile_args* a) {
    return guard([&] {
      check(a, LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE_1_2, "compile");  // a 1.2 core still calls
      Backend& b = ctx(a->context, "compile");
      device(a->context, a->device, "compile");
      const lt_graph& g = graph(a->graph, "compile");
      lower::validate(g);
      auto exe = std::make_unique<lt_plugin_executable>();
      exe->compiled.exe = b.compile(g, a->device);
      if (!exe->compiled.exe) fail(LT_STATUS_INTERNAL, "compile returned no executable");
      for (size_t k = 0; k < g.num_inputs; ++k)
        exe->compiled.in_bytes.push_back(node_bytes(g.nodes[g.inputs[k]]));
      for (size_t k = 0; k < g.num_outputs; ++k)
        exe->compiled.out_bytes.push_back(node_bytes(g.nodes[g.outputs[k]]));
      lower::DynamicView dv = lower::dynamic_of(g);
      if (!dv.empty() && exe->compiled.exe->dynamic() &&
          a->struct_size >= LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE_1_2) {
        Compiled& c = exe->compiled;
        c.symbols.assign(dv.values.begin(), dv.values.end());
        for (size_t k = 0; k < g.num_inputs; ++k) {
          c.in_forms.push_back(lower::shape_forms(g, static_cast<size_t>(g.inputs[k])));
          c.in_dtypes.push_back(g.nodes[g.inputs[k]].dtype);
        }
        for (size_t k = 0; k < g.num_outputs; ++k) {
          c.out_forms.push_back(lower::shape_forms(g, static_cast<size_t>(g.outputs[k])));
          c.out_dtypes.push_back(g.nodes[g.outputs[k]].dtype);
        }
        a->dynamic = 1;
      }
      accept_donations(a, g, exe->compiled);
      a->executable = exe.release();
    });
  }
  // ABI 1.3 buffer donation: asks the executable about each pair the core offers (a static
  // graph only; same byte size checked here, so a backend answers only for its schedule).
  static void accept_donations(lt_plugin_compile_args* a, const lt_graph& g, const Compiled& c) {
    if (a->struct_size < LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE || !a->donor_inputs ||
        !a->donation_accepted || c.exe->dynamic())
      return;
    for (size_t k = 0; k < g.num_outputs; ++k) {
      const int64_t in = a->donor_inputs[k];
      a->donation_accepted[k] = 0;
      if (in < 0 || static_cast<size_t>(in) >= g.num_inputs || c.in_bytes[in] != c.out_bytes[k])
        continue;
      a->donation_accepted[k] = c.exe->accepts_donation(static_cast<size_t>(in), k) ? 1 : 0;
    }
  }
  static void buffers(lt_plugin_buffer* const* bufs, size_t n, const std::vector<size_t>& need,
                      const char* what) {
    if (n != need.size())
      fail(LT_STATUS_INVALID_ARGUMENT, std::string("execute: got ") + std::to_string(n) + " " +
                                           what + "s, the executable has " +
                                           std::to_string(need.size()));
    if (n && !bufs) fail(LT_STATUS_INVALID_ARGUMENT, std::string("execute: ") + what + "s is NULL");
    for (size_t k = 0; k < n; ++k) {
      if (!bufs[k])
        fail(LT_STATUS_INVALID_ARGUMENT,
             std::string("execute: ") + what + " " + std::to_string(k) + " is NULL");
      if (bufs[k]->nbytes < need[k])
        fail(LT_STATUS_INVALID_ARGUMENT, std::string("execute: ") + what + " " + std::to_string(k) +
                                             " has " + std::to_string(bufs[k]->nbytes) +
                                             " bytes, needs " + std::to_string(need[k]));
    }
  }
  static lt_plugin_error* execute(lt_plugin_execute_args* a) {
    return guard([&] {
      check(a, LT_PLUGIN_EXECUTE_ARGS_STRUCT_SIZE_1_2, "execute");
      ctx(a->context, "execute");
      if (!a->executable) fail(LT_STATUS_INVALID_ARGUMENT, "execute: executable is NULL");
      // ABI 1.3: the core's span callback, current on this thread until execute returns.
      struct SpanScope {
        SpanSink saved = current_spans();
        explicit SpanScope(const lt_plugin_execute_args* a) {
          const bool covered = a->struct_size >= LT_PLUGIN_EXECUTE_ARGS_STRUCT_SIZE;
          current_spans() = covered ? SpanSink{a->span, a->span_user} : SpanSink{};
        }
        ~SpanScope() { current_spans() = saved; }
      } span_scope(a);
      const Compiled& c = a->executable->compiled;
      std::span<const int64_t> values;
      if (a->num_symbols) {
        if (c.symbols.size() != a->num_symbols || !a->symbol_values)
          fail(LT_STATUS_INVALID_ARGUMENT,
               "execute: " + std::to_string(a->num_symbols) + " symbol values for an executable " +
                   (c.symbols.empty() ? std::string("compiled static")
                                      : "of " + std::to_string(c.symbols.size()) + " symbols"));
        values = {a->symbol_values, a->num_symbols};
        for (int64_t v : values)
          if (v < 0) fail(LT_STATUS_INVALID_ARGUMENT, "execute: a negative symbol value");
      }
      if (values.empty()) {
        buffers(a->inputs, a->num_inputs, c.in_bytes, "input");
        buffers(a->outputs, a->num_outputs, c.out_bytes, "output");
        c.exe->run({a->inputs, a->num_inputs}, {a->outputs, a->num_outputs});
        return;
      }
      auto need = [&](const auto& forms, const auto& dtypes) {
        std::vector<size_t> bytes;
        for (size_t k = 0; k < forms.size(); ++k)
          bytes.push_back(lower::bytes_at(forms[k], dtypes[k], values));
        return bytes;
      };
      buffers(a->inputs, a->num_inputs, need(c.in_forms, c.in_dtypes), "input");
      buffers(a->outputs, a->num_outputs, need(c.out_forms, c.out_dtypes), "output");
      c.exe->run_at(values, {a->inputs, a->num_inputs}, {a->outputs, a->num_outputs});
    });
  }
  static void executable_destroy(lt_plugin_context*, lt_plugin_executable* e) { delete e; }
  static lt_plugin_error* stats(lt_plugin_stats_args* a) {
    return guard([&] {
      check(a, LT_PLUGIN_STATS_ARGS_STRUCT_SIZE, "stats");
      Backend& b = ctx(a->context, "stats");
      if (!a->emit) fail(LT_STATUS_INVALID_ARGUMENT, "stats: emit is NULL");
      Stats emit(a->emit, a->user);
      if (a->executable)
        a->executable->compiled.exe->stats(emit);
      else
        b.stats(emit);
    });
  }

  static const lt_plugin_api* api() {
    oom();
    static const lt_plugin_api table = {
        LT_PLUGIN_API_STRUCT_SIZE,
        LT_PLUGIN_ABI_MAJOR,
        LT_PLUGIN_ABI_MINOR,
        name,
        version,
        error_message,
        error_code,
        error_destroy,
        create,
        destroy,
        device_count,
        device_info,
        buffer_alloc,
        buffer_free,
        buffer_upload,
        buffer_download,
        buffer_host_ptr,
        supports,
        compile,
        execute,
        executable_destroy,
        stats,
        buffer_wrap_host,
    };
    return &table;
  }
};

}  // namespace lt::kit::detail

// Exports backend class B as plugin `name` (lowercase [a-z0-9_]) of version `version`.
#define LT_KIT_PLUGIN(B, plugin_name, plugin_version)                        \
  extern "C" LT_PLUGIN_EXPORT const lt_plugin_api* lt_plugin_get_api(void) { \
    using T = ::lt::kit::detail::Table<B>;                                   \
    T::name = plugin_name;                                                   \
    T::version = plugin_version;                                             \
    return T::api();                                                         \
  }
