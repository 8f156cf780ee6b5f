/* test_gemm.c — trc_gemm (trainc.h) against a double-precision product:
 * transposed and plain operands, leading dimensions past the minimum,
 * batches with strides, batches split into heads (each operand's heads
 * interleaved in its rows, [rows, heads*cols], or one matrix after the
 * other), beta 0 (overwrite) and 1 (accumulate), and sizes around the
 * partition's cuts (a power of two of parts of at least 128 rows or
 * columns, at most 16; two of 64 or more where a matrix has 2^24
 * multiply-adds; batches of 8 and more not cut, heads not counted);
 * bitwise the same C on 1, 2 and 3 threads; in fp32, and the head cases
 * under bf16 too (against the product of the operands rounded to bf16);
 * trc_gemm_rounded bitwise trc_gemm under bf16, and trc_gemm_f32 under
 * bf16 bitwise trc_gemm under fp32, on every case; and the parameters'
 * bf16 copy as the optimizer updates it.
 * Every element of C's buffer outside the matrices must keep its value. */
#include "test_util.h"

#include <stdlib.h>

enum { A = 1, B = 2, C = 4 }; /* head-interleaved operands */

typedef struct {
  int64_t batch, heads, m, n, k;
  int ta, tb;
  float beta;
  int interleaved; /* A, B, C bits */
} gemm_case;

/* One operand's storage: matrix (o, h) at o*stride + h*head_stride, row r at r*ld. */
typedef struct {
  int64_t ld, stride, head_stride, size;
} layout;

/* rows x cols matrices, PAD past the minimum leading dimension and a gap
 * between the matrices, so that a wrong stride reads or writes elsewhere. */
static layout make_layout(const gemm_case *g, int64_t rows, int64_t cols, int interleaved) {
  enum { PAD = 3, GAP = 2 };
  layout l;
  if (interleaved) {
    l.ld = g->heads * cols + PAD, l.head_stride = cols, l.stride = rows * l.ld + GAP;
  } else {
    l.ld = cols + PAD, l.head_stride = rows * l.ld + GAP, l.stride = g->heads * l.head_stride + GAP;
  }
  l.size = g->batch * l.stride;
  return l;
}

static float *random_floats(uint64_t seed, int64_t count) {
  float *x = malloc((size_t)count * sizeof *x);
  for (int64_t i = 0; i < count; i++) x[i] = (float)trc_rng_normal(seed, (uint64_t)i);
  return x;
}

/* op(X)[r][c] of matrix (o, h), as the precision's GEMM reads it. */
static double at(const float *x, const layout *l, int transposed, int64_t o, int64_t h, int64_t r,
                 int64_t c, trc_precision p) {
  float v = x[o * l->stride + h * l->head_stride + (transposed ? c * l->ld + r : r * l->ld + c)];
  return p == TRC_BF16 ? test_bf16(v) : v;
}

/* C's buffer as it must be after the product: beta C + op(A) op(B) in the
 * matrices (scale: the sum of the terms' magnitudes, for the tolerance), the
 * rest as it was. */
static void expect(const gemm_case *g, const float *a, const float *b, const float *start,
                   const layout *la, const layout *lb, const layout *lc, trc_precision p,
                   double *want, double *scale) {
  for (int64_t i = 0; i < lc->size; i++) want[i] = start[i], scale[i] = 0;
  for (int64_t o = 0; o < g->batch; o++)
    for (int64_t h = 0; h < g->heads; h++)
      for (int64_t r = 0; r < g->m; r++)
        for (int64_t col = 0; col < g->n; col++) {
          int64_t i = o * lc->stride + h * lc->head_stride + r * lc->ld + col;
          double sum = g->beta * start[i], size = 1;
          for (int64_t q = 0; q < g->k; q++) {
            double term = at(a, la, g->ta, o, h, r, q, p) * at(b, lb, g->tb, o, h, q, col, p);
            sum += term, size += fabs(term);
          }
          want[i] = sum, scale[i] = size;
        }
}

static void check_precision(const gemm_case *g, trc_precision p) {
  layout la = make_layout(g, g->ta ? g->k : g->m, g->ta ? g->m : g->k, g->interleaved & A);
  layout lb = make_layout(g, g->tb ? g->n : g->k, g->tb ? g->k : g->n, g->interleaved & B);
  layout lc = make_layout(g, g->m, g->n, g->interleaved & C);
  size_t bytes = (size_t)lc.size * sizeof(float);
  float *a = random_floats(1, la.size), *b = random_floats(2, lb.size);
  float *start = random_floats(3, lc.size); /* what C holds before: kept or added onto */
  float *one = malloc(bytes), *many = malloc(bytes);
  trc_set_precision(p);
  for (int threads = 1; threads <= 3; threads++) {
    float *c = threads == 1 ? one : many;
    memcpy(c, start, bytes);
    trc_set_threads(threads);
    trc_gemm(g->batch, g->heads, g->ta, g->tb, g->m, g->n, g->k, a, la.ld, la.stride,
             la.head_stride, b, lb.ld, lb.stride, lb.head_stride, g->beta, c, lc.ld, lc.stride,
             lc.head_stride);
    if (threads > 1) CHECK(memcmp(one, many, bytes) == 0);
  }
  trc_set_precision(TRC_FP32);
  double *want = malloc((size_t)lc.size * sizeof *want);
  double *scale = malloc((size_t)lc.size * sizeof *scale);
  expect(g, a, b, start, &la, &lb, &lc, p, want, scale);
  double worst = 0;
  for (int64_t i = 0; i < lc.size; i++) {
    double err = scale[i] > 0 ? fabs(one[i] - want[i]) / scale[i] : one[i] != start[i];
    if (err > worst) worst = err;
  }
  if (worst >= 1e-6)
    fprintf(stderr, "case batch %lld heads %lld m %lld n %lld k %lld (%s): error %g\n",
            (long long)g->batch, (long long)g->heads, (long long)g->m, (long long)g->n,
            (long long)g->k, p == TRC_BF16 ? "bf16" : "fp32", worst);
  CHECK(worst < 1e-6);
  free(a), free(b), free(start), free(one), free(many), free(want), free(scale);
}

typedef void gemm_fn(int64_t batch, int64_t heads, int ta, int tb, int64_t m, int64_t n, int64_t k,
                     const float *a, int64_t lda, int64_t stride_a, int64_t head_stride_a,
                     const float *b, int64_t ldb, int64_t stride_b, int64_t head_stride_b,
                     float beta, float *c, int64_t ldc, int64_t stride_c, int64_t head_stride_c);

/* `forced` (trc_gemm_rounded, trc_gemm_f32) run under precision `run` is
 * trc_gemm under precision `as`, bitwise. */
static void check_forced(const gemm_case *g, gemm_fn *forced, trc_precision run, trc_precision as) {
  layout la = make_layout(g, g->ta ? g->k : g->m, g->ta ? g->m : g->k, g->interleaved & A);
  layout lb = make_layout(g, g->tb ? g->n : g->k, g->tb ? g->k : g->n, g->interleaved & B);
  layout lc = make_layout(g, g->m, g->n, g->interleaved & C);
  size_t bytes = (size_t)lc.size * sizeof(float);
  float *a = random_floats(1, la.size), *b = random_floats(2, lb.size);
  float *got = random_floats(3, lc.size), *want = malloc(bytes);
  memcpy(want, got, bytes);
  trc_set_threads(2);
  trc_set_precision(run);
  forced(g->batch, g->heads, g->ta, g->tb, g->m, g->n, g->k, a, la.ld, la.stride, la.head_stride, b,
         lb.ld, lb.stride, lb.head_stride, g->beta, got, lc.ld, lc.stride, lc.head_stride);
  trc_set_precision(as);
  trc_gemm(g->batch, g->heads, g->ta, g->tb, g->m, g->n, g->k, a, la.ld, la.stride, la.head_stride,
           b, lb.ld, lb.stride, lb.head_stride, g->beta, want, lc.ld, lc.stride, lc.head_stride);
  trc_set_precision(TRC_FP32);
  CHECK(memcmp(got, want, bytes) == 0);
  free(a), free(b), free(got), free(want);
}

/* Under bf16, op(A) = A^T [37 x 1] times B = [1] is A rounded to bf16, exactly:
 * the rounding of a stored row of 37 floats (two blocks of 16 and a tail)
 * on values where rounding is easy to get wrong. */
static void check_bf16_rounding(void) {
  enum { N = 37 };
  const float special[] = {1.00390625f,  1.01171875f, -1.00390625f, -1.01171875f, /* ties */
                           3.4028235e38f, -3.4028235e38f,                          /* to inf */
                           INFINITY,      -INFINITY,   1e-30f,       -7.5f};
  float a[N], one = 1.0f, c[N];
  for (int i = 0; i < N; i++)
    a[i] = i < (int)(sizeof special / sizeof *special) ? special[(i * 3) % 10] : 1.0f + i / 7.0f;
  a[17] = 1.01171875f, a[18] = NAN;    /* a tie and a NaN in the second block */
  a[34] = -1.01171875f, a[35] = NAN;   /* and in the tail */
  trc_set_precision(TRC_BF16);
  trc_gemm(1, 1, 1, 0, N, 1, 1, a, N, 0, 0, &one, 1, 0, 0, 0.0f, c, 1, 0, 0);
  trc_set_precision(TRC_FP32);
  for (int i = 0; i < N; i++) {
    if (isnan(a[i])) {
      CHECK(isnan(c[i]));
    } else if (isinf(a[i]) || fabsf(a[i]) > 3e38f) {
      CHECK(isinf(c[i]) && signbit(c[i]) == signbit(a[i]));
    } else if ((double)c[i] != test_bf16(a[i])) {
      fprintf(stderr, "bf16 rounding of element %d: %.9g gave %.9g, expected %.9g\n", i, a[i],
              c[i], test_bf16(a[i]));
      test_failures++;
    }
  }
}

/* The parameters' bf16 copy (trc_bf16_weights_*), as the optimizer keeps it:
 * under bf16 a GEMM of A = [1] and B = the weights w [1 x N] is w rounded;
 * after w changes in [FIRST, FIRST + COUNT) and trc_bf16_weights_update
 * rewrites that range of the copy (stored past the cache on AVX512_BF16:
 * from 6 bytes past a 32-byte boundary, a ragged prologue, the vector body
 * and a tail), the same GEMM gives the new values rounded, the others as
 * they were. */
static void check_bf16_weights_update(void) {
  enum { N = 1000, FIRST = 3, COUNT = 990 };
  float *w = malloc(N * sizeof *w), one = 1.0f, *c = malloc(N * sizeof *c);
  for (int i = 0; i < N; i++) w[i] = 1.0f + (float)i / 7.0f;
  trc_error err = {0};
  CHECK(trc_bf16_weights_attach(w, N, &err) == 0);
  trc_set_precision(TRC_BF16);
  trc_gemm(1, 1, 0, 0, 1, N, 1, &one, 1, 0, 0, w, N, 0, 0, 0.0f, c, N, 0, 0); /* the copy made */
  for (int i = FIRST; i < FIRST + COUNT; i++)
    w[i] = i % 11 == 5 ? 1.00390625f : i % 11 == 7 ? NAN : -3.0f - (float)i / 3.0f; /* ties, NaNs */
  trc_bf16_weights_update(FIRST, COUNT);
  trc_gemm(1, 1, 0, 0, 1, N, 1, &one, 1, 0, 0, w, N, 0, 0, 0.0f, c, N, 0, 0);
  trc_set_precision(TRC_FP32);
  int64_t wrong = 0;
  for (int i = 0; i < N; i++) wrong += isnan(w[i]) ? !isnan(c[i]) : (double)c[i] != test_bf16(w[i]);
  if (wrong) fprintf(stderr, "the bf16 copy after trc_bf16_weights_update: %lld of %d wrong\n", (long long)wrong, N);
  CHECK(wrong == 0);
  trc_bf16_weights_detach();
  free(w), free(c);
}

int main(void) {
  const gemm_case cases[] = {
      {1, 1, 391, 7, 33, 0, 0, 0, 0},  /* cut by rows into 2 ragged parts */
      {1, 1, 5, 300, 17, 1, 0, 1, 0},  /* cut by columns, A transposed, accumulating */
      {1, 1, 1100, 3, 9, 0, 1, 0, 0},  /* rows for 8.6 parts: 8 parts */
      {1, 1, 4500, 3, 5, 1, 0, 0, 0},  /* more than 16 parts' worth of rows: 16 parts */
      {1, 1, 150, 130, 1000, 0, 1, 0, 0}, /* narrow, but 2^24 multiply-adds: halved */
      {3, 1, 270, 66, 12, 1, 1, 1, 0}, /* a small batch, each matrix cut */
      {9, 1, 20, 13, 31, 0, 1, 0, 0},  /* a batch of 8 or more: matrices not cut */
      {2, 1, 64, 64, 1, 0, 0, 1, 0},   /* k = 1 */
      /* heads, as attention's: scores = q k^T, y = probs v, and their gradients */
      {2, 3, 270, 70, 5, 0, 1, 0, A | B},    /* q k^T: a small batch, cut by rows */
      {3, 4, 9, 5, 9, 0, 0, 0, B | C},       /* probs v */
      {2, 3, 9, 5, 9, 0, 0, 1, B | C},       /* dq = dscores k, accumulating */
      {2, 3, 9, 5, 9, 1, 0, 0, B | C},       /* dk = dscores^T q */
      {2, 3, 9, 9, 5, 0, 1, 0, A | B},       /* dprobs = dy v^T */
      {9, 2, 6, 4, 7, 1, 0, 0, A | B | C},   /* a batch of 8 or more, all interleaved */
      {1, 2, 66, 300, 3, 1, 1, 1, A | C},    /* cut by columns, both transposed */
      /* bf16 makes a transposed A row-major when n >= 512: ragged blocks of 16 */
      {1, 2, 37, 600, 21, 1, 0, 0, A},        /* heads interleaved in A */
      {2, 2, 300, 520, 35, 1, 1, 1, 0},       /* cut by rows, accumulating */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    check_precision(&cases[i], TRC_FP32);
    if (cases[i].heads > 1) check_precision(&cases[i], TRC_BF16);
    check_forced(&cases[i], trc_gemm_rounded, TRC_FP32, TRC_BF16);
    check_forced(&cases[i], trc_gemm_f32, TRC_BF16, TRC_FP32);
  }
  check_bf16_rounding();
  check_bf16_weights_update();
  return test_failures != 0;
}
