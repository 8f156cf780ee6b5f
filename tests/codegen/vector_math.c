/* vector_math.c — the vector math of generated kernels against libm. Built
 * as trainers are (the C compiler and flags of `trainc --help`, trainc.h,
 * -lmvec: vector_math.sh, which also checks that the loops below really call
 * libmvec's vector functions), each function's loop runs over every float
 * whose bit pattern is a multiple of STEP (about 33 million of the 2^32, all
 * signs and exponents), then the edges: +-0, +-inf, NaN, the smallest
 * subnormal and normal, the largest finite float, and the points where
 * results overflow or underflow. Each result is compared with libm's double
 * function rounded to float (an independent, near-correctly-rounded
 * reference): at most MAX_ULP units in the last place apart, the same
 * infinities, NaN where the reference is NaN. Exit 0 when every function
 * passes; prints each one's largest error. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define TRC_VECTOR_MATH 1 /* as generated trainers do */
#include "trainc.h"

#define STEP 131u
#define CHUNK 65536
#define MAX_ULP 4.0

/* The loops a kernel has: y[i] = f(x[i]) over contiguous floats, a
 * constant number of them (a kernel's extents are constants; a bounded
 * loop's run-time count is split at a multiple of 16 that GCC sees). */
#define VECTOR_LOOP(f)                                                                             \
  __attribute__((noinline)) static void loop_##f(float *restrict y, const float *restrict x) {     \
    for (int64_t i = 0; i < CHUNK; i++)                                                            \
      y[i] = f(x[i]);                                                                              \
  }
VECTOR_LOOP(expf)
VECTOR_LOOP(logf)
VECTOR_LOOP(tanhf)
VECTOR_LOOP(erff)

typedef struct {
  const char *name;
  void (*loop)(float *restrict, const float *restrict);
  double (*reference)(double);
  double worst; /* largest error in ulps */
  float worst_at;
  int64_t failures;
} Fn;

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* The spacing of floats at the magnitude of r (subnormals: 2^-149). */
static double ulp_at(double r) {
  int e;
  frexp(fabs(r), &e); /* |r| in [2^(e-1), 2^e) */
  return ldexp(1.0, (e - 1 < -126 ? -126 : e - 1) - 23);
}

static void compare(Fn *f, const float *x, const float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    double ref = f->reference((double)x[i]);
    float want = (float)ref;
    bool ok;
    double err = 0;
    if (isnan(want) || isinf(want) || isinf(y[i]))
      ok = isnan(want) ? isnan(y[i]) : y[i] == want;
    else {
      err = fabs((double)y[i] - ref) / ulp_at(ref);
      ok = !isnan(y[i]) && err <= MAX_ULP;
    }
    if (!ok && f->failures++ < 5)
      fprintf(stderr, "%s(%a) = %a, libm says %a\n", f->name, x[i], y[i], want);
    if (err > f->worst)
      f->worst = err, f->worst_at = x[i];
  }
}

/* The first n of x (n <= CHUNK; the rest of the chunk is zeros). */
static void run(Fn *f, const float *x, int64_t n) {
  static float in[CHUNK], y[CHUNK];
  memset(in, 0, sizeof in);
  memcpy(in, x, (size_t)n * sizeof *x);
  f->loop(y, in);
  compare(f, in, y, n);
}

int main(void) {
  Fn fns[] = {{"expf", loop_expf, exp},
              {"logf", loop_logf, log},
              {"tanhf", loop_tanhf, tanh},
              {"erff", loop_erff, erf}};
  static float x[CHUNK];
  const float edges[] = {0.0f,
                         -0.0f,
                         INFINITY,
                         -INFINITY,
                         NAN,
                         0x1p-149f,
                         -0x1p-149f,
                         0x1p-126f,
                         -0x1p-126f,
                         0x1.fffffep127f,
                         -0x1.fffffep127f,
                         1.0f,
                         -1.0f,
                         0x1.62e42ep6f,
                         0x1.62e430p6f,
                         -0x1.9fe368p6f,
                         -0x1.9fe36ap6f,
                         -0x1.5d589ep6f,
                         0x1.fffffep-1f,
                         0x1.000002p0f,
                         9.0f,
                         -9.0f,
                         4.0f,
                         -4.0f};
  int failed = 0;
  for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
    Fn *f = &fns[k];
    int64_t n = 0;
    for (uint64_t u = 0; u <= UINT32_MAX; u += STEP) {
      x[n++] = from_bits((uint32_t)u);
      if (n == CHUNK)
        run(f, x, n), n = 0;
    }
    if (n)
      run(f, x, n);
    run(f, edges, (int64_t)(sizeof edges / sizeof edges[0]));
    printf("%-6s max error %.2f ulp (at %a), bound %.0f: %s\n", f->name, f->worst, f->worst_at,
           MAX_ULP, f->failures ? "FAIL" : "ok");
    failed |= f->failures != 0;
  }
  return failed;
}
