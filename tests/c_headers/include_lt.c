/* include_lt.c — proves lazytensor/lt.h compiles alone as strict C11 (-pedantic -Werror). */
#include "lazytensor/lt.h"

int lt_c_headers_lt(void);
int lt_c_headers_lt(void) {
  return 0;
}
