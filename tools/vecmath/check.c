// Exhaustive f32 check of exp and tanh from plugins/cpu_jit/src/vecmath.cpp (see README.md).
// Build: gcc -O2 -mfma -ffp-contract=off tools/vecmath/check.c -o /tmp/vecmath_check -lm -pthread
// Run:   /tmp/vecmath_check [threads]                    every float, FMA and no FMA
//        /tmp/vecmath_check tune a3 a5 a7 a9 b2 b4 b6 b8   ulp search on tanh coefficients
// -ffp-contract=off matters: the non-FMA mode relies on a*b+c rounding twice.
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Constants exactly as written in vecmath.cpp. They are doubles there and splat() rounds
// them to float, so they are converted the same way here rather than written as 1.0f-style
// literals (decimal -> double -> float can differ from decimal -> float).
static const double kExpPoly[] = {
    0.00139261761199, 0.00836317307451, 0.0416665546621, 0.166665770256, 0.5, 1.0};
// tanh x = x P(x^2)/Q(x^2): P and Q highest power first, ending in P(0) = Q(0) = 1.
static const double kTanhP[] = {1.33842954e-08, 2.06358163e-05, 0.0034974583, 0.133826867, 1.0};
static const double kTanhQ[] = {7.79025072e-07, 0.000328851747, 0.0258843619, 0.467160076, 1.0};
static const double kTanhClamp[2] = {7.86710215, 8.02141953};  // [no FMA, FMA]
#define NTP ((int)(sizeof kTanhP / sizeof kTanhP[0]))
#define NTQ ((int)(sizeof kTanhQ / sizeof kTanhQ[0]))

static float bf(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint32_t fb(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

// llvm.fmuladd: one rounding where the target fuses, two otherwise.
static float ma(float a, float b, float c, int fma) {
  if (fma) return fmaf(a, b, c);
  float m = a * b;
  return m + c;
}
static float horner(float x, const double* c, int n, int fma) {
  float p = (float)c[0];
  for (int i = 1; i < n; ++i) p = ma(p, x, (float)c[i], fma);
  return p;
}
// vecmath's clamp(): select(x < lo, lo, x), then select(x > hi, hi, x); NaN passes.
static float clampf(float x, float lo, float hi) {
  x = x < lo ? lo : x;
  return x > hi ? hi : x;
}

static float vm_exp(float x, int fma) {
  float xc = clampf(x, -104.0f, 89.0f);
  float n = rintf(xc * (float)1.44269504088896341);
  float r = ma(n, (float)-0.693359375, xc, fma);
  r = ma(n, (float)2.12194440e-4, r, fma);
  float y = ma(horner(r, kExpPoly, 6, fma), r, 1.0f, fma);
  // scale(): two exponent-field multiplications. vscalefps (AVX-512) rounds once instead, but
  // on this range every result is normal, so both are exact and agree.
  int32_t ni = (int32_t)n, n1 = ni >> 1, n2 = ni - n1;
  return y * bf((uint32_t)(n1 + 127) << 23) * bf((uint32_t)(n2 + 127) << 23);
}

static float tanh_noclamp(float x, int fma) {
  float t = x * x;
  float p = horner(t, kTanhP, NTP, fma);
  float q = horner(t, kTanhQ, NTQ, fma);
  return (x * p) / q;
}
static float vm_tanh(float x, int fma) {
  float c = (float)kTanhClamp[fma];
  return tanh_noclamp(clampf(x, -c, c), fma);
}

// The exhaustive sweep: a list of bit-pattern ranges, cut into chunks that the threads take
// from a shared counter (the ranges differ a lot in cost, so a static split would idle).
enum { kExp, kTanh };
typedef struct {
  int fn, fma;
  uint32_t lo, hi;  // inclusive, one sign only so that bit order is value order
  double err;       // max relative error
  float at;
  float maxabs;  // max |result|
} chunk_t;

static chunk_t* chunks;
static int nchunks, next_chunk;

static void* worker(void* unused) {
  (void)unused;
  int i;
  while ((i = __atomic_fetch_add(&next_chunk, 1, __ATOMIC_RELAXED)) < nchunks) {
    chunk_t* c = &chunks[i];
    for (uint64_t u = c->lo; u <= c->hi; ++u) {
      float x = bf((uint32_t)u), r;
      double ref;
      if (c->fn == kExp) {
        r = vm_exp(x, c->fma);
        ref = exp((double)x);
      } else {
        r = vm_tanh(x, c->fma);
        ref = tanh((double)x);
      }
      double e = ref == 0 ? (r == 0 ? 0 : INFINITY) : fabs((r - ref) / ref);
      if (e > c->err) c->err = e, c->at = x;
      if (fabsf(r) > c->maxabs) c->maxabs = fabsf(r);
    }
  }
  return NULL;
}

static void add_range(int fn, int fma, uint32_t lo, uint32_t hi) {
  const uint32_t step = 1u << 24;
  for (uint64_t s = lo; s <= hi; s += step) {
    chunk_t c = {.fn = fn, .fma = fma, .lo = (uint32_t)s};
    c.hi = (uint32_t)(s + step - 1 < hi ? s + step - 1 : hi);
    chunks = realloc(chunks, (nchunks + 1) * sizeof *chunks);
    chunks[nchunks++] = c;
  }
}

// Smallest float x >= 1 where the unclamped tanh evaluates to exactly 1.0f, and the largest
// value the unclamped evaluation reaches in [1, 10] (why the clamp is needed).
static void tanh_clamp_point(int fma) {
  float c = -1, over = 0, over_at = 0;
  for (uint32_t u = fb(1.0f); u <= fb(10.0f); ++u) {
    float r = tanh_noclamp(bf(u), fma);
    if (c < 0 && r == 1.0f) c = bf(u);
    if (r > over) over = r, over_at = bf(u);
  }
  printf("tanh %-6s clamp point %.9g (vecmath.cpp: %.9g, %s); unclamped max %.9g at %.9g\n",
         fma ? "FMA" : "no FMA", c, (float)kTanhClamp[fma],
         c == (float)kTanhClamp[fma] ? "ok" : "MISMATCH", over, over_at);
}

static int check(int threads) {
  for (int fma = 1; fma >= 0; --fma) {
    add_range(kExp, fma, 0, fb(88.7f));
    add_range(kExp, fma, 0x80000000u, fb(-87.3f));
    add_range(kTanh, fma, 0, fb(10.0f));
    add_range(kTanh, fma, 0x80000000u, fb(-10.0f));
  }
  pthread_t th[64];
  if (threads < 1 || threads > 64) threads = 2;
  tanh_clamp_point(1);
  tanh_clamp_point(0);
  for (int i = 0; i < threads; ++i) pthread_create(&th[i], NULL, worker, NULL);
  for (int i = 0; i < threads; ++i) pthread_join(th[i], NULL);
  for (int fn = kExp; fn <= kTanh; ++fn) {
    for (int fma = 1; fma >= 0; --fma) {
      chunk_t m = {0};
      for (int i = 0; i < nchunks; ++i) {
        chunk_t* c = &chunks[i];
        if (c->fn != fn || c->fma != fma) continue;
        if (c->err > m.err) m.err = c->err, m.at = c->at;
        if (c->maxabs > m.maxabs) m.maxabs = c->maxabs;
      }
      printf("%s %-6s max rel err %.3g (%.2f x 2^-24) at %.9g", fn == kExp ? "exp " : "tanh",
             fma ? "FMA" : "no FMA", m.err, m.err * 0x1p24, m.at);
      if (fn == kTanh) printf("; max |result| %.9g", m.maxabs);
      printf("  [every float in %s]\n", fn == kExp ? "[-87.3, 88.7]" : "[-10, 10]");
    }
  }
  return 0;
}

// Tuning: rounding the Remez coefficients to float moves the error curve off its
// equioscillation. Coordinate search over pairs of coefficients, each moved by up to 3 ulps,
// keeping a move when it lowers the max relative error of x P(t)/Q(t) evaluated in long
// double (the coefficient rounding only; the evaluation rounding is what check measures) on
// 6000 points in (0, 8]. 8 is about where the clamp lands; above it the result is 1.0f.
#define NG 6000
static long double tx[NG], tref[NG];
// The tuned coefficients, in the order fit.py prints them: the P ones lowest power first
// (a3 a5 ..., a_{2k+1} multiplies x^{2k+1} in x P), then the Q ones (b2 b4 ...).
#define NA (NTP - 1)
#define NB (NTQ - 1)
#define NC (NA + NB)
static float coef[NC];

static void print_names(FILE* f) {
  for (int k = 0; k < NA; ++k) fprintf(f, " a%d", 2 * k + 3);
  for (int k = 0; k < NB; ++k) fprintf(f, " b%d", 2 * k + 2);
}

static long double tune_obj(void) {
  long double mx = 0;
  for (int i = 0; i < NG; ++i) {
    long double x = tx[i], t = x * x, p = 0, q = 0;
    for (int k = NA - 1; k >= 0; --k) p = (p + coef[k]) * t;
    for (int k = NC - 1; k >= NA; --k) q = (q + coef[k]) * t;
    long double e = fabsl(x * (p + 1) / (q + 1) / tref[i] - 1);
    if (e > mx) mx = e;
  }
  return mx;
}
static void step(float* c, int d) {
  for (int s = 0; s < abs(d); ++s) *c = nextafterf(*c, d > 0 ? INFINITY : -INFINITY);
}

static int tune(char** args) {
  for (int k = 0; k < NC; ++k) coef[k] = strtof(args[k], NULL);
  for (int i = 0; i < NG; ++i) tx[i] = 8.0L * (i + 1) / NG, tref[i] = tanhl(tx[i]);
  long double best = tune_obj();
  printf("start: max rel err %.4Lg\n", best);
  for (int improved = 1, it = 0; improved && it < 200; ++it) {
    improved = 0;
    for (int a = 0; a < NC; ++a) {
      for (int b = a; b < NC; ++b) {
        for (int da = -3; da <= 3; ++da) {
          for (int db = (a == b ? 0 : -3); db <= (a == b ? 0 : 3); ++db) {
            if (!da && !db) continue;
            float sa = coef[a], sb = coef[b];
            step(&coef[a], da);
            step(&coef[b], db);
            long double o = tune_obj();
            if (o < best * 0.999L) {  // the 0.1% margin stops it chasing noise
              best = o;
              improved = 1;
            } else {
              coef[a] = sa;
              coef[b] = sb;
            }
          }
        }
      }
    }
    printf("round %d: max rel err %.4Lg\n", it, best);
  }
  printf("#");
  print_names(stdout);
  printf(", tuned\n");
  for (int k = 0; k < NC; ++k) printf("%.9g%c", coef[k], k < NC - 1 ? ' ' : '\n');
  // The same set in the order kTanhP / kTanhQ and emit_tanh_f32 take it.
  printf("# P, Q for kTanhP / kTanhQ (highest power first)\n{");
  for (int k = NA - 1; k >= 0; --k) printf("%.9g, ", coef[k]);
  printf("1.0}\n{");
  for (int k = NC - 1; k >= NA; --k) printf("%.9g, ", coef[k]);
  printf("1.0}\n");
  return 0;
}

int main(int argc, char** argv) {
  if (argc == NC + 2 && !strcmp(argv[1], "tune")) return tune(argv + 2);
  if (argc <= 2 && (argc == 1 || atoi(argv[1]) > 0)) return check(argc > 1 ? atoi(argv[1]) : 2);
  fprintf(stderr, "usage: %s [threads] | %s tune", argv[0], argv[0]);
  print_names(stderr);
  fprintf(stderr, "\n");
  return 2;
}
