/* include_lt_onnx.c — proves lazytensor/lt_onnx.h (LazyTensor::onnx's C API) compiles alone as
 * strict C11 (-pedantic -Werror). */
#include "lazytensor/lt_onnx.h"

int lt_c_headers_lt_onnx(void);
int lt_c_headers_lt_onnx(void) {
  return LT_ONNX_MAX_OPSET > 0 ? 0 : 1;
}
