/* c_quickstart — the smallest complete C program on lt.h: create a runtime, build a lazy
 * computation, read the result back, print the metrics; every call's error is checked. */
#include <lazytensor/lt.h>

#include <stdio.h>

/* Reports a failed call (naming it) and jumps to the single cleanup path. */
#define CHECK(call)                                                               \
  do {                                                                            \
    lt_error* err_ = (call);                                                      \
    if (err_ != NULL) {                                                           \
      fprintf(stderr, "%s failed: %s (code %d)\n", #call, lt_error_message(err_), \
              (int)lt_error_code(err_));                                          \
      lt_error_destroy(err_);                                                     \
      goto cleanup;                                                               \
    }                                                                             \
  } while (0)

int main(void) {
  int status = 1;
  lt_runtime* runtime = NULL;
  lt_device* device = NULL;
  lt_tensor *x = NULL, *w = NULL, *y = NULL, *act = NULL, *total = NULL;
  char* metrics = NULL;
  const int64_t x_shape[2] = {2, 3};
  const int64_t w_shape[2] = {3, 2};
  const float x_data[6] = {1, 2, 3, 4, 5, 6};
  const float w_data[6] = {0.5f, -1, 0.25f, 0, -0.5f, 1};
  float y_out[4];
  float total_out = 0;
  int i;

  printf("LazyTensor %s\n", lt_version_string());
  CHECK(lt_runtime_create(NULL, &runtime)); /* device from $LT_DEVICE, config or default */
  device = lt_runtime_default_device(runtime);
  printf("device: %s (backend %s)\n", lt_device_name(device), lt_device_backend(device));

  CHECK(lt_tensor_from_host(device, LT_DTYPE_F32, x_shape, 2, x_data, sizeof x_data, &x));
  CHECK(lt_tensor_from_host(device, LT_DTYPE_F32, w_shape, 2, w_data, sizeof w_data, &w));
  /* Nothing runs yet: each call records one node of a lazy graph. */
  CHECK(lt_matmul(x, w, &y));
  CHECK(lt_relu(y, &act));
  CHECK(lt_sum(act, NULL, 0, 0, &total));
  printf("pending before read: %s\n", lt_tensor_is_materialized(total) ? "no" : "yes");

  /* Reading materialises the graph: compile (or cache hit), then execute. */
  CHECK(lt_tensor_to_host(y, y_out, sizeof y_out));
  CHECK(lt_tensor_to_host(total, &total_out, sizeof total_out));
  printf("x @ w =");
  for (i = 0; i < 4; ++i) printf(" %g", (double)y_out[i]);
  printf("\nsum(relu(x @ w)) = %g\n", (double)total_out);

  CHECK(lt_metrics_report(runtime, 0, &metrics));
  printf("--- metrics ---\n%s\n", metrics);
  status = 0;

cleanup:
  lt_string_free(metrics);
  lt_tensor_free(total);
  lt_tensor_free(act);
  lt_tensor_free(y);
  lt_tensor_free(w);
  lt_tensor_free(x);
  lt_runtime_destroy(runtime);
  return status;
}
