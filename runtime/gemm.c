/* gemm.c — trc_gemm (trainc.h): the GEMMs of generated code, cut into
 * single-threaded OpenBLAS calls by a partition fixed by the shapes, run by
 * trc_parallel_for. Inside a parallel region the OpenMP build of OpenBLAS
 * runs each call on its own thread, so every element of C is computed by
 * the same call, with the same blocking, whatever --threads is. */
#include "rt_internal.h"

#include <cblas.h>

enum { SPLIT_BELOW_BATCH = 8, MIN_PART = 64, MAX_PARTS = 16 };

typedef struct {
  int64_t batch, m, n, k, parts;
  int ta, tb, split_rows; /* split m (rows of C) or n (its columns) */
  const float *a, *b;
  float *c;
  int64_t lda, ldb, ldc, stride_a, stride_b, stride_c;
  float beta;
} gemm_job;

/* Task t: part t % parts of matrix t / parts. */
static void gemm_tasks(void *ctx, int64_t lo, int64_t hi) {
  const gemm_job *j = ctx;
  for (int64_t t = lo; t < hi; t++) {
    int64_t i = t / j->parts, part = t % j->parts, dim = j->split_rows ? j->m : j->n;
    int64_t from = dim * part / j->parts, to = dim * (part + 1) / j->parts;
    const float *a = j->a + i * j->stride_a, *b = j->b + i * j->stride_b;
    float *c = j->c + i * j->stride_c;
    int64_t m = j->m, n = j->n;
    if (j->split_rows) { /* rows of op(A): A's rows, or its columns when transposed */
      a += j->ta ? from : from * j->lda;
      c += from * j->ldc;
      m = to - from;
    } else { /* columns of op(B) */
      b += j->tb ? from * j->ldb : from;
      c += from;
      n = to - from;
    }
    cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans, j->tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)j->k, 1.0f, a, (int)j->lda, b, (int)j->ldb, j->beta, c,
                (int)j->ldc);
  }
}

void trc_gemm(int64_t batch, int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a,
              int64_t lda, int64_t stride_a, const float *b, int64_t ldb, int64_t stride_b,
              float beta, float *c, int64_t ldc, int64_t stride_c) {
  gemm_job j = {.batch = batch, .m = m, .n = n, .k = k, .ta = ta, .tb = tb, .a = a, .b = b, .c = c,
                .lda = lda, .ldb = ldb, .ldc = ldc, .stride_a = stride_a, .stride_b = stride_b,
                .stride_c = stride_c, .beta = beta, .split_rows = m >= n, .parts = 1};
  int64_t dim = m >= n ? m : n;
  if (batch < SPLIT_BELOW_BATCH) {
    j.parts = (dim + MIN_PART - 1) / MIN_PART;
    if (j.parts > MAX_PARTS) j.parts = MAX_PARTS;
    if (j.parts < 1) j.parts = 1;
  }
  trc_parallel_for(batch * j.parts, gemm_tasks, &j);
}
