/* test_gemm.c — trc_gemm (trainc.h) in fp32 against a double-precision
 * product: transposed and plain operands, leading dimensions past the
 * minimum, batches with strides, beta 0 (overwrite) and 1 (accumulate), and
 * sizes around the partition's cuts (a power of two of parts of at least
 * 128 rows or columns, at most 16; batches of 8 and more not cut); bitwise the same C on 1, 2 and
 * 3 threads. */
#include "test_util.h"

#include <stdlib.h>

typedef struct {
  int64_t batch, m, n, k;
  int ta, tb;
  float beta;
} gemm_case;

static float *random_floats(uint64_t seed, int64_t count) {
  float *x = malloc((size_t)count * sizeof *x);
  for (int64_t i = 0; i < count; i++) x[i] = (float)trc_rng_normal(seed, (uint64_t)i);
  return x;
}

/* op(X)[r][c] of a row-major X with leading dimension ld. */
static float at(const float *x, int transposed, int64_t ld, int64_t r, int64_t c) {
  return transposed ? x[c * ld + r] : x[r * ld + c];
}

static void check_case(const gemm_case *g) {
  enum { PAD = 3 }; /* leading dimensions PAD past the minimum */
  int64_t lda = (g->ta ? g->m : g->k) + PAD, ldb = (g->tb ? g->k : g->n) + PAD, ldc = g->n + PAD;
  int64_t sa = (g->ta ? g->k : g->m) * lda + 1, sb = (g->tb ? g->n : g->k) * ldb + 2;
  int64_t sc = g->m * ldc + 5, csize = g->batch * sc;
  float *a = random_floats(1, g->batch * sa), *b = random_floats(2, g->batch * sb);
  float *start = random_floats(3, csize); /* what C holds before: kept or added onto */
  float *one = malloc((size_t)csize * sizeof *one), *many = malloc((size_t)csize * sizeof *many);
  for (int threads = 1; threads <= 3; threads++) {
    float *c = threads == 1 ? one : many;
    memcpy(c, start, (size_t)csize * sizeof *c);
    trc_set_threads(threads);
    trc_gemm(g->batch, g->ta, g->tb, g->m, g->n, g->k, a, lda, sa, b, ldb, sb, g->beta, c, ldc, sc);
    if (threads > 1) CHECK(memcmp(one, many, (size_t)csize * sizeof *one) == 0);
  }
  double worst = 0;
  for (int64_t i = 0; i < g->batch; i++)
    for (int64_t r = 0; r < g->m; r++)
      for (int64_t col = 0; col < ldc && r * ldc + col < sc; col++) {
        int64_t at_c = i * sc + r * ldc + col;
        double want = start[at_c], scale = 1;
        if (col < g->n) { /* inside C: beta C + op(A) op(B); the padding stays */
          want *= g->beta;
          for (int64_t p = 0; p < g->k; p++) {
            double term = (double)at(a + i * sa, g->ta, lda, r, p) * at(b + i * sb, g->tb, ldb, p, col);
            want += term;
            scale += fabs(term);
          }
        }
        double err = fabs(one[at_c] - want) / scale;
        if (err > worst) worst = err;
      }
  CHECK(worst < 1e-6);
  free(a), free(b), free(start), free(one), free(many);
}

int main(void) {
  const gemm_case cases[] = {
      {1, 391, 7, 33, 0, 0, 0},    /* cut by rows into 2 ragged parts */
      {1, 5, 300, 17, 1, 0, 1},    /* cut by columns, A transposed, accumulating */
      {1, 1100, 3, 9, 0, 1, 0},    /* rows for 8.6 parts: 8 parts */
      {1, 4500, 3, 5, 1, 0, 0},    /* more than 16 parts' worth of rows: 16 parts */
      {3, 270, 66, 12, 1, 1, 1},   /* a small batch, each matrix cut */
      {9, 20, 13, 31, 0, 1, 0},    /* a batch of 8 or more: matrices not cut */
      {2, 64, 64, 1, 0, 0, 1},     /* k = 1 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
  return test_failures != 0;
}
