// error.h — the one exception type used inside tpu_sim; converted to lt_plugin_error at the
// C ABI boundary (plugin.cpp) and never allowed to cross it.
#pragma once

#include <stdexcept>
#include <string>

#include "lazytensor/lt_types.h"

namespace lt::tpu {

class Error : public std::runtime_error {
 public:
  Error(lt_status_code code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  lt_status_code code() const { return code_; }

 private:
  lt_status_code code_;
};

[[noreturn]] inline void fail(lt_status_code code, const std::string& message) {
  throw Error(code, "tpu_sim: " + message);
}

}  // namespace lt::tpu
