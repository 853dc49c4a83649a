// error.hpp — the one exception type of the lowering library, the host kernels and the plugin
// kit: a status code (lt_types.h) and a message that names the op, node, shape or dtype at
// fault. It never crosses a C ABI: the core and the plugin kit convert it at their entry points.
#pragma once

#include <stdexcept>
#include <string>

#include "lazytensor/lt_types.h"

namespace lt::lower {

class Error : public std::runtime_error {
 public:
  Error(lt_status_code code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  lt_status_code code() const noexcept { return code_; }

 private:
  lt_status_code code_;
};

[[noreturn]] inline void fail(lt_status_code code, const std::string& message) {
  throw Error(code, message);
}

}  // namespace lt::lower
