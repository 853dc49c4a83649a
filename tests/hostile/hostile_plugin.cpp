// hostile_plugin.cpp — misbehaving test plugins, one per HOSTILE_CASE (see CMakeLists.txt):
// C++ exceptions thrown out of table functions, NULL required entries, a table too small for
// its own version fields, zero or 2^40 devices, buffers smaller than asked for, and a compile
// that takes 400 ms (background compiles run meanwhile on cpu_eager), a NULL table, a table of
// version fields only, bad and duplicate names, a failing device count, create without a
// context, compile without an executable, execute failing after three good steps, buffers that
// are NULL without an error, errors with a NULL message and errors whose code is no
// lt_status_code. The core must
// report each (plugin path + reason, or an lt_error naming the call) and keep working.
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <thread>

#include "../abi/mini_backend.h"

namespace {

#define THROWS_CREATE 1
#define THROWS_SUPPORTS 2
#define THROWS_COMPILE 3
#define THROWS_EXECUTE 4
#define NULL_FIELDS 5
#define TINY_STRUCT 6
#define ZERO_DEVICES 7
#define SHORT_BUFFERS 8
#define THROWS_FREE 9
#define HUGE_DEVICE_COUNT 10
#define SLOW_COMPILE 11
#define NULL_TABLE 12
#define SHORT_TABLE 13
#define BAD_NAME 14
#define DUPLICATE_NAME 15
#define DEVICE_COUNT_FAILS 16
#define NULL_CONTEXT 17
#define NULL_EXECUTABLE 18
#define EXECUTE_FAILS_LATER 19
#define NULL_BUFFER 20
#define NULL_ERROR_MESSAGE 21
#define GARBAGE_ERROR_CODE 22

[[noreturn]] void boom(const char* where) {
  throw std::runtime_error(std::string("hostile plugin threw in ") + where);
}

lt_plugin_api make() {
  lt_plugin_api t = mini::table(HOSTILE_NAME);
#if HOSTILE_CASE == THROWS_CREATE
  t.create = [](lt_plugin_create_args*) -> lt_plugin_error* { boom("create"); };
#elif HOSTILE_CASE == THROWS_SUPPORTS
  t.supports = [](lt_plugin_supports_args*) -> lt_plugin_error* { boom("supports"); };
#elif HOSTILE_CASE == THROWS_COMPILE
  t.compile = [](lt_plugin_compile_args*) -> lt_plugin_error* { boom("compile"); };
#elif HOSTILE_CASE == THROWS_EXECUTE
  t.execute = [](lt_plugin_execute_args*) -> lt_plugin_error* { boom("execute"); };
#elif HOSTILE_CASE == NULL_FIELDS
  t.compile = nullptr;
  t.buffer_free = nullptr;
#elif HOSTILE_CASE == TINY_STRUCT
  t.struct_size = 4;  // not even the struct_size field itself
#elif HOSTILE_CASE == ZERO_DEVICES
  t.device_count = [](lt_plugin_context*, size_t* n) -> lt_plugin_error* {
    *n = 0;
    return nullptr;
  };
#elif HOSTILE_CASE == HUGE_DEVICE_COUNT
  t.device_count = [](lt_plugin_context*, size_t* n) -> lt_plugin_error* {
    *n = size_t{1} << 40;  // asking for device_info 2^40 times used to hang every program
    return nullptr;
  };
#elif HOSTILE_CASE == SHORT_BUFFERS
  t.buffer_alloc = [](lt_plugin_buffer_args* a) -> lt_plugin_error* {
    a->buffer = new lt_plugin_buffer{std::vector<unsigned char>(a->nbytes / 2)};
    return nullptr;
  };
#elif HOSTILE_CASE == THROWS_FREE
  t.buffer_free = [](lt_plugin_context*, lt_plugin_buffer* b) {
    delete b;
    boom("buffer_free");
  };
  t.executable_destroy = [](lt_plugin_context*, lt_plugin_executable* e) {
    delete e;
    boom("executable_destroy");
  };
#elif HOSTILE_CASE == SLOW_COMPILE
  t.compile = [](lt_plugin_compile_args* a) -> lt_plugin_error* {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));  // a long LLVM/driver compile
    return mini::compile(a);
  };
#elif HOSTILE_CASE == SHORT_TABLE
  t.struct_size = offsetof(lt_plugin_api, create);  // the version fields, no functions
#elif HOSTILE_CASE == BAD_NAME
  t.name = "Bad Name/../x";
#elif HOSTILE_CASE == DUPLICATE_NAME
  t.name = "cpu_eager";  // a second backend of that name
#elif HOSTILE_CASE == DEVICE_COUNT_FAILS
  t.device_count = [](lt_plugin_context*, size_t*) -> lt_plugin_error* {
    return mini::err(LT_STATUS_PLUGIN_ERROR, "no device answers");
  };
#elif HOSTILE_CASE == NULL_CONTEXT
  t.create = [](lt_plugin_create_args*) -> lt_plugin_error* { return nullptr; };  // no context
#elif HOSTILE_CASE == NULL_EXECUTABLE
  t.compile = [](lt_plugin_compile_args*) -> lt_plugin_error* { return nullptr; };  // success?
#elif HOSTILE_CASE == EXECUTE_FAILS_LATER
  t.execute = [](lt_plugin_execute_args* a) -> lt_plugin_error* {
    static int calls = 0;  // a device that fails mid-training, after three good steps
    if (++calls > 3) return mini::err(LT_STATUS_PLUGIN_ERROR, "device lost at execution 4");
    return mini::execute(a);
  };
#elif HOSTILE_CASE == NULL_BUFFER
  t.buffer_alloc = [](lt_plugin_buffer_args* a) -> lt_plugin_error* {
    a->buffer = nullptr;  // and no error
    return nullptr;
  };
#elif HOSTILE_CASE == NULL_ERROR_MESSAGE
  t.compile = [](lt_plugin_compile_args*) -> lt_plugin_error* {
    return mini::err(LT_STATUS_PLUGIN_ERROR, "unused");
  };
  t.error_message = [](const lt_plugin_error*) -> const char* { return nullptr; };
#elif HOSTILE_CASE == GARBAGE_ERROR_CODE
  t.execute = [](lt_plugin_execute_args*) -> lt_plugin_error* {
    return mini::err(LT_STATUS_PLUGIN_ERROR, "garbage code");
  };
  t.error_code = [](const lt_plugin_error*) -> lt_status_code {
    static int calls = 0;  // far above, then below, the codes of lt_types.h
    return static_cast<lt_status_code>(++calls % 2 ? 0x7ff0beef : -3);
  };
#endif
  return t;
}

const lt_plugin_api kTable = make();

}  // namespace

extern "C" LT_PLUGIN_EXPORT const lt_plugin_api* lt_plugin_get_api(void) {
#if HOSTILE_CASE == NULL_TABLE
  return nullptr;
#else
  return &kTable;
#endif
}
