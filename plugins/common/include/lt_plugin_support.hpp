// lt_plugin_support.hpp — error plumbing shared by the in-tree backend plugins (internal, never
// installed: third-party plugins build against lt_plugin.h alone).
#pragma once

#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "lazytensor/lt_plugin.h"

// Each plugin is its own shared object with hidden symbols, so this definition of the opaque
// ABI type never meets another plugin's.
struct lt_plugin_error {
  lt_status_code code;
  std::string message;
  bool is_static = false;  // the preallocated out-of-memory fallback; error_destroy keeps it
};

namespace lt::plugin_support {

// The exception a plugin throws to fail with a specific status; guard() passes code() and
// what() through without adding the plugin's wording for foreign exceptions.
class StatusError : public std::runtime_error {
 public:
  StatusError(lt_status_code code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  lt_status_code code() const noexcept { return code_; }

 private:
  lt_status_code code_;
};

// How one plugin words its errors. Messages are asserted on by tests and read by users, so
// each plugin keeps its own text. All fields must be string literals (or otherwise outlive
// the plugin); only invalid_argument may be NULL.
struct ErrorWording {
  const char* prefix;            // put before every message, including the ones below
  const char* out_of_memory;     // for std::bad_alloc
  const char* oom_fallback;      // returned when not even an error object can be allocated
  const char* internal;          // put before what() of any other std::exception
  const char* unknown;           // for a thrown object that is not a std::exception
  const char* invalid_argument;  // put before std::invalid_argument::what(), which then maps
                                 // to LT_STATUS_INVALID_ARGUMENT; NULL: treated as internal
};

// One per plugin, at namespace scope: it owns the out-of-memory fallback, which is built at
// load time so that reporting an allocation failure needs no allocation.
class ErrorFactory {
 public:
  explicit ErrorFactory(const ErrorWording& wording)
      : wording_(wording),
        oom_fallback_{LT_STATUS_OUT_OF_MEMORY, std::string(wording.prefix) + wording.oom_fallback,
                      true} {}
  ErrorFactory(const ErrorFactory&) = delete;
  ErrorFactory& operator=(const ErrorFactory&) = delete;

  // The error for prefix + head + tail. Concatenating here, inside the try, means a failing
  // allocation degrades to the fallback instead of throwing out of a noexcept caller.
  lt_plugin_error* make(lt_status_code code, std::string_view head,
                        std::string_view tail = {}) noexcept {
    try {
      std::string message(wording_.prefix);
      message.append(head).append(tail);
      return new lt_plugin_error{code, std::move(message)};
    } catch (...) {
      return &oom_fallback_;
    }
  }

  // Runs an entry point's body: the one conversion point from C++ exceptions to ABI errors.
  // A body returns void (success unless it throws) or its own lt_plugin_error*.
  template <class F>
  lt_plugin_error* guard(F&& body) noexcept {
    try {
      if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
        body();
        return nullptr;
      } else {
        return body();
      }
    } catch (const StatusError& e) {
      return make(e.code(), e.what());
    } catch (const std::bad_alloc&) {
      return make(LT_STATUS_OUT_OF_MEMORY, wording_.out_of_memory);
    } catch (const std::invalid_argument& e) {
      if (wording_.invalid_argument)
        return make(LT_STATUS_INVALID_ARGUMENT, wording_.invalid_argument, e.what());
      return make(LT_STATUS_INTERNAL, wording_.internal, e.what());
    } catch (const std::exception& e) {
      return make(LT_STATUS_INTERNAL, wording_.internal, e.what());
    } catch (...) {
      return make(LT_STATUS_INTERNAL, wording_.unknown);
    }
  }

 private:
  ErrorWording wording_;
  lt_plugin_error oom_fallback_;
};

// The three error entries of lt_plugin_api, identical for every plugin.
inline const char* error_message(const lt_plugin_error* e) {
  return e ? e->message.c_str() : "";
}
inline lt_status_code error_code(const lt_plugin_error* e) {
  return e ? e->code : LT_STATUS_OK;
}
inline void error_destroy(lt_plugin_error* e) {
  if (e && !e->is_static) delete e;
}

}  // namespace lt::plugin_support
