/* toy_demo.c — runs relu(a*b + -a) and exp(a) on the "toy" backend through the core and checks
 * the results: the first graph runs on toy, exp falls back to cpu_eager (counted). Exit 0 = ok.
 * Run with LT_PLUGIN_PATH pointing at the folder holding liblt_plugin_toy.so. */
#include <lazytensor/lt.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

static int check(lt_error* e, const char* what) {
  if (!e) return 0;
  fprintf(stderr, "toy_demo: %s: %s\n", what, lt_error_message(e));
  lt_error_destroy(e);
  return 1;
}

int main(void) {
  lt_runtime_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
  o.device = "toy";
  o.fallback = "silent";
  lt_runtime* rt = NULL;
  if (check(lt_runtime_create(&o, &rt), "lt_runtime_create")) return 1;
  lt_device* dev = lt_runtime_default_device(rt);
  printf("device %s (backend %s)\n", lt_device_name(dev), lt_device_backend(dev));
  if (strcmp(lt_device_backend(dev), "toy") != 0) return 1;

  const int64_t shape[2] = {2, 3};
  const float av[6] = {-2, -1, 0, 1, 2, 3};
  const float bv[6] = {4, 3, 2, 1, 0, -1};
  lt_tensor *a = NULL, *b = NULL, *ab = NULL, *na = NULL, *s = NULL, *r = NULL, *e = NULL;
  int bad = check(lt_tensor_from_host(dev, LT_DTYPE_F32, shape, 2, av, sizeof av, &a), "a") ||
            check(lt_tensor_from_host(dev, LT_DTYPE_F32, shape, 2, bv, sizeof bv, &b), "b") ||
            check(lt_mul(a, b, &ab), "mul") || check(lt_neg(a, &na), "neg") ||
            check(lt_add(ab, na, &s), "add") || check(lt_relu(s, &r), "relu") ||
            check(lt_exp(a, &e), "exp");
  float rv[6], ev[6];
  if (!bad) bad = check(lt_tensor_to_host(r, rv, sizeof rv), "read relu");
  if (!bad) bad = check(lt_tensor_to_host(e, ev, sizeof ev), "read exp");
  for (int i = 0; !bad && i < 6; ++i) {
    float want = av[i] * bv[i] - av[i];
    if (want < 0) want = 0;
    if (rv[i] != want || fabsf(ev[i] - expf(av[i])) > 1e-5f * expf(av[i])) {
      fprintf(stderr, "toy_demo: element %d: got %g/%g want %g/%g\n", i, rv[i], ev[i], want,
              expf(av[i]));
      bad = 1;
    }
  }
  /* exp fell back to cpu_eager; mul/neg/add/relu ran on toy (no fallback counted for them). */
  double fallback_exp = 0, nodes = 0, unused = 0;
  if (!bad) bad = check(lt_metric_get(rt, "fallback.exp", &fallback_exp), "fallback.exp");
  if (!bad) bad = check(lt_metric_get(rt, "plugin.toy.nodes", &nodes), "plugin.toy.nodes");
  lt_error* none = lt_metric_get(rt, "fallback.relu", &unused);
  if (!none) {
    fprintf(stderr, "toy_demo: relu fell back although toy supports it\n");
    bad = 1;
  }
  lt_error_destroy(none);
  if (!bad) printf("toy_demo: ok (fallback.exp=%g, plugin.toy.nodes=%g)\n", fallback_exp, nodes);
  lt_tensor_free(a), lt_tensor_free(b), lt_tensor_free(ab), lt_tensor_free(na);
  lt_tensor_free(s), lt_tensor_free(r), lt_tensor_free(e);
  lt_runtime_destroy(rt);
  return bad || fallback_exp < 1 ? 1 : 0;
}
