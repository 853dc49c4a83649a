// error.h — the one exception type used inside tpu_sim (the shared StatusError) and fail(),
// which names the plugin; converted to lt_plugin_error at the C ABI boundary (plugin.cpp).
#pragma once

#include <string>

#include "lt_plugin_support.hpp"

namespace lt::tpu {

using Error = plugin_support::StatusError;

[[noreturn]] inline void fail(lt_status_code code, const std::string& message) {
  throw Error(code, "tpu_sim: " + message);
}

}  // namespace lt::tpu
