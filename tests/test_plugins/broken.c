/* broken.c — test-only plugins that fail to load in one specific way each (chosen by
 * BROKEN_KIND at compile time); the core must report them with path and reason and go on. */
#include <stdlib.h>

#include "lazytensor/lt_plugin.h"

#define NO_ENTRY 1
#define WRONG_ABI 2
#define NULL_FNS 3
#define CREATE_FAILS 4
#define ZERO_DEVICES 5
#define UNDEFINED_SYMBOL 6

#if BROKEN_KIND == UNDEFINED_SYMBOL
/* Defined nowhere: dlopen(RTLD_NOW) fails with "undefined symbol: lt_test_symbol_nowhere", the
 * message a plugin built without its static libraries gets. */
extern int lt_test_symbol_nowhere(void);
#endif

struct lt_plugin_error {
  int unused;
};
static lt_plugin_error g_err;
static int g_ctx;

static const char* err_message(const lt_plugin_error* e) {
  (void)e;
  return "simulated create failure";
}
static lt_status_code err_code(const lt_plugin_error* e) {
  (void)e;
  return LT_STATUS_PLUGIN_ERROR;
}
static void err_destroy(lt_plugin_error* e) {
  (void)e;
}
static lt_plugin_error* create(lt_plugin_create_args* a) {
  if (BROKEN_KIND == CREATE_FAILS) return &g_err;
#if BROKEN_KIND == UNDEFINED_SYMBOL
  if (lt_test_symbol_nowhere()) return &g_err;
#endif
  a->context = (lt_plugin_context*)&g_ctx;
  return NULL;
}
static void destroy(lt_plugin_context* c) {
  (void)c;
}
static lt_plugin_error* device_count(lt_plugin_context* c, size_t* out) {
  (void)c;
  *out = BROKEN_KIND == ZERO_DEVICES ? 0 : 1;
  return NULL;
}
static lt_plugin_error* device_info(lt_plugin_device_info_args* a) {
  a->name = "none";
  a->kind = "cpu";
  a->description = "broken";
  return NULL;
}
static lt_plugin_error* buffer_alloc(lt_plugin_buffer_args* a) {
  (void)a;
  return &g_err;
}
static void buffer_free(lt_plugin_context* c, lt_plugin_buffer* b) {
  (void)c, (void)b;
}
static lt_plugin_error* buffer_copy(lt_plugin_buffer_args* a) {
  (void)a;
  return &g_err;
}
static lt_plugin_error* supports(lt_plugin_supports_args* a) {
  a->supported = 0;
  return NULL;
}
static lt_plugin_error* compile(lt_plugin_compile_args* a) {
  (void)a;
  return &g_err;
}
static lt_plugin_error* execute(lt_plugin_execute_args* a) {
  (void)a;
  return &g_err;
}
static void executable_destroy(lt_plugin_context* c, lt_plugin_executable* e) {
  (void)c, (void)e;
}

static const lt_plugin_api kApi = {LT_PLUGIN_API_STRUCT_SIZE,
                                   BROKEN_KIND == WRONG_ABI ? 99 : LT_PLUGIN_ABI_MAJOR,
                                   0,
                                   BROKEN_NAME,
                                   "0-broken",
                                   err_message,
                                   err_code,
                                   err_destroy,
                                   create,
                                   destroy,
                                   device_count,
                                   device_info,
                                   buffer_alloc,
                                   buffer_free,
                                   buffer_copy,
                                   buffer_copy,
                                   NULL,
                                   supports,
                                   BROKEN_KIND == NULL_FNS ? NULL : compile,
                                   BROKEN_KIND == NULL_FNS ? NULL : execute,
                                   executable_destroy,
                                   NULL};

#if BROKEN_KIND == NO_ENTRY
LT_PLUGIN_EXPORT const lt_plugin_api* lt_plugin_get_api_misspelled(void) {
  return &kApi;
}
#else
LT_PLUGIN_EXPORT const lt_plugin_api* lt_plugin_get_api(void) {
  return &kApi;
}
#endif
