/* include_lt_types.c — proves lazytensor/lt_types.h compiles alone as strict C11 (-pedantic
 * -Werror). */
#include "lazytensor/lt_types.h"

int lt_c_headers_lt_types(void);
int lt_c_headers_lt_types(void) {
  return 0;
}
