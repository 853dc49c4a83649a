// error.cpp — lt_error objects and the exception-to-error translation used by guard().
#include "error.h"

#include <cstdlib>
#include <cstring>

struct lt_error {
  lt_status_code code;
  std::string message;
  bool is_static;
};

namespace lt {
namespace {
// Returned when allocating an error itself fails; lt_error_destroy never frees it.
lt_error g_oom_error{LT_STATUS_OUT_OF_MEMORY, "out of memory", true};
}  // namespace

lt_error* make_error(lt_status_code code, const std::string& message) noexcept {
  try {
    return new lt_error{code, message, false};
  } catch (...) {
    return &g_oom_error;
  }
}

lt_error* error_from_current_exception() noexcept {
  try {
    throw;
  } catch (const Error& e) {
    return make_error(e.code(), e.message());
  } catch (const std::bad_alloc&) {
    return &g_oom_error;
  } catch (const std::exception& e) {
    return make_error(LT_STATUS_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return make_error(LT_STATUS_INTERNAL, "internal error: unknown exception");
  }
}

}  // namespace lt

extern "C" {

LT_API const char* lt_error_message(const lt_error* error) {
  return error ? error->message.c_str() : "";
}
LT_API lt_status_code lt_error_code(const lt_error* error) {
  return error ? error->code : LT_STATUS_OK;
}
LT_API const char* lt_status_name(lt_status_code code) {
  // Read as an int: a C caller may pass any value, and an out-of-range enum is UB in C++.
  int raw = 0;
  static_assert(sizeof code == sizeof raw);
  std::memcpy(&raw, &code, sizeof raw);
  static const char* const kNames[] = {
      "OK",          "INVALID_ARGUMENT", "SHAPE_MISMATCH", "DTYPE_MISMATCH",   "UNKNOWN_OP",
      "UNSUPPORTED", "NOT_FOUND",        "PLUGIN_ERROR",   "FALLBACK_REFUSED", "OUT_OF_MEMORY",
      "IO_ERROR",    "INTERNAL",         "ABI_MISMATCH",   "DISTRIBUTED"};
  static_assert(sizeof kNames / sizeof kNames[0] == LT_STATUS_DISTRIBUTED + 1);
  return raw >= 0 && raw <= LT_STATUS_DISTRIBUTED ? kNames[raw] : "UNKNOWN";
}
LT_API void lt_error_destroy(lt_error* error) {
  if (error && !error->is_static) delete error;
}
LT_API void lt_string_free(char* s) {
  std::free(s);
}

}  // extern "C"
