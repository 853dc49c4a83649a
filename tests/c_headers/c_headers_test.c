/* c_headers_test.c — includes every public C header together as C11 and exercises the inline
 * helpers they define (dtype sizes and names, the counter-based random generator). */
#include "lazytensor/lt.h"
#include "lazytensor/lt_plugin.h"
#include "lazytensor/lt_random.h"
#include "lazytensor/lt_types.h"

#include <stdio.h>
#include <string.h>

int lt_c_headers_lt_types(void);
int lt_c_headers_lt(void);
int lt_c_headers_lt_plugin(void);
int lt_c_headers_lt_random(void);

static int failures = 0;

static void expect(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}

int main(void) {
  float u;
  double sum = 0.0;
  int i;
  expect(lt_c_headers_lt_types() + lt_c_headers_lt() + lt_c_headers_lt_plugin() +
                 lt_c_headers_lt_random() ==
             0,
         "per-header translation units link");
  expect(lt_dtype_size(LT_DTYPE_F32) == 4 && lt_dtype_size(LT_DTYPE_I64) == 8 &&
             lt_dtype_size(LT_DTYPE_BOOL) == 1 && lt_dtype_size(LT_DTYPE_INVALID) == 0,
         "lt_dtype_size");
  expect(strcmp(lt_dtype_name(LT_DTYPE_BF16), "bf16") == 0 &&
             strcmp(lt_dtype_name((lt_dtype)99), "invalid") == 0,
         "lt_dtype_name");
  expect(
      lt_random_bits(1, 0) == lt_random_bits(1, 0) && lt_random_bits(1, 0) != lt_random_bits(2, 0),
      "lt_random_bits is a pure function of (seed, index)");
  for (i = 0; i < 1000; ++i) {
    u = lt_random_unit_f32(42, (uint64_t)i);
    expect(u >= 0.0f && u < 1.0f, "lt_random_unit_f32 in [0, 1)");
    sum += u;
  }
  expect(sum / 1000.0 > 0.45 && sum / 1000.0 < 0.55, "lt_random_unit_f32 mean near 0.5");
  expect(LT_RUNTIME_OPTIONS_STRUCT_SIZE <= sizeof(lt_runtime_options), "options struct size");
  if (failures == 0) printf("c_headers: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
