/* c11_headers.c — the public headers compile as strict C11 (-std=c11 -pedantic -Werror) and
 * the library links from C. */
#include "lazytensor/lt.h"
#include "lazytensor/lt_plugin.h"
#include "lazytensor/lt_random.h"
#include "lazytensor/lt_types.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  lt_runtime_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
  if (lt_version() != ((LT_VERSION_MAJOR << 16) | (LT_VERSION_MINOR << 8) | LT_VERSION_PATCH)) {
    fprintf(stderr, "version mismatch: %s\n", lt_version_string());
    return 1;
  }
  if (lt_dtype_size(LT_DTYPE_F32) != 4 || LT_PLUGIN_API_STRUCT_SIZE == 0) return 1;
  return lt_random_bits(1, 2) == lt_random_bits(1, 2) ? 0 : 1;
}
