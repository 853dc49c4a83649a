/* include_lt_plugin.c — proves lazytensor/lt_plugin.h compiles alone as strict C11 (-pedantic
 * -Werror). */
#include "lazytensor/lt_plugin.h"

int lt_c_headers_lt_plugin(void);
int lt_c_headers_lt_plugin(void) {
  return 0;
}
