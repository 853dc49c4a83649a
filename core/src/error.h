// error.h — the core's internal error type and the one boundary helper that turns C++
// exceptions into lt_error values at every C entry point.
#pragma once

#include <exception>
#include <new>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "lazytensor/lt.h"

namespace lt {

// Thrown anywhere inside the core; never crosses the C ABI (see guard()).
class Error : public std::exception {
 public:
  Error(lt_status_code code, std::string message) : code_(code), message_(std::move(message)) {}
  lt_status_code code() const noexcept { return code_; }
  const char* what() const noexcept override { return message_.c_str(); }
  const std::string& message() const noexcept { return message_; }

 private:
  lt_status_code code_;
  std::string message_;
};

template <class... Args>
[[noreturn]] void fail(lt_status_code code, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(code, fmt::format(f, std::forward<Args>(args)...));
}

// Allocates an lt_error; returns a static out-of-memory error if even that fails.
lt_error* make_error(lt_status_code code, const std::string& message) noexcept;

// Translates the exception in flight into an lt_error (called only from guard()).
lt_error* error_from_current_exception() noexcept;

// THE boundary: every C entry point that can fail runs its body through guard().
template <class F>
lt_error* guard(F&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (...) {
    return error_from_current_exception();
  }
}

}  // namespace lt
