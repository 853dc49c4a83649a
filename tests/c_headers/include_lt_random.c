/* include_lt_random.c — proves lazytensor/lt_random.h compiles alone as strict C11 (-pedantic
 * -Werror). */
#include "lazytensor/lt_random.h"

int lt_c_headers_lt_random(void);
int lt_c_headers_lt_random(void) {
  return 0;
}
