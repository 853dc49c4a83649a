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
  /* lt_status_name: every code has its own name; anything else is "UNKNOWN". */
  if (strcmp(lt_status_name(LT_STATUS_OK), "OK") != 0 ||
      strcmp(lt_status_name(LT_STATUS_INVALID_ARGUMENT), "INVALID_ARGUMENT") != 0 ||
      strcmp(lt_status_name(LT_STATUS_DISTRIBUTED), "DISTRIBUTED") != 0 ||
      strcmp(lt_status_name((lt_status_code)14), "UNKNOWN") != 0 ||
      strcmp(lt_status_name((lt_status_code)-1), "UNKNOWN") != 0) {
    fprintf(stderr, "lt_status_name: wrong name\n");
    return 1;
  }
  {
    int i, j;
    for (i = LT_STATUS_OK; i <= LT_STATUS_DISTRIBUTED; ++i)
      for (j = 0; j < i; ++j)
        if (strcmp(lt_status_name((lt_status_code)i), lt_status_name((lt_status_code)j)) == 0 ||
            strcmp(lt_status_name((lt_status_code)i), "UNKNOWN") == 0) {
          fprintf(stderr, "lt_status_name(%d) is not its own name\n", i);
          return 1;
        }
  }
  return lt_random_bits(1, 2) == lt_random_bits(1, 2) ? 0 : 1;
}
