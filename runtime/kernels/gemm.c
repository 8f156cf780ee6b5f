/* gemm.c — trc_gemm (trainc.h): the GEMMs of generated code, cut into
 * single-threaded sgemm calls by a partition fixed by the shapes and the
 * machine's CPUs (max_parts), run by trc_parallel_for. Each pool thread has
 * set OpenMP's count to 1 (parallel.c), so neither library's OpenMP build
 * starts a team: every element of C is computed by the same call, with the
 * same blocking, whatever --threads is. The sgemm is oneDNN's where the CPU
 * has AVX-512 (there 10-25% faster than OpenBLAS's at the trainers' shapes,
 * cut in parts or not), OpenBLAS's where it has not: on AVX2 (AMD Zen 3)
 * oneDNN 2.6's sgemm ran most parts at half its whole-matrix rate (512 x
 * 1024 x 1024 in 4 parts 45 GFLOP/s on one core, whole 80-90), OpenBLAS's
 * every part at 80-92 (docs/trainer.md, *Memory and speed*). */
#include "rt_kernels.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SPLIT_BELOW_BATCH = 8, MIN_PART = 128, MIN_HALF = 64, MAX_PARTS = 16 };
/* Under bf16 with AMX: each part copies the operand it shares into oneDNN's
 * blocked layout, and beside AMX's arithmetic that copy weighs: parts of 256
 * rows ran 14-19% faster than of 128 (one core, cold weights: 1024 x 1024 x
 * 1024 527 -> 612 GFLOP/s, 3072 x 768 491 -> 585, 768 x 3072 388 -> 442). */
enum { MIN_PART_AMX = 256 };
#define HALVE_FROM_MACS (16.0 * 1024 * 1024)

/* The most parts a matrix is cut into on this machine: twice its CPUs (a
 * power of two, at most MAX_PARTS), a few parts a thread at most. Each
 * part repacks the operand it shares: on 2 CPUs at most 4 parts against
 * up to 16 made fp32 steps 1.5-6% faster (deep_mlp 339 -> 319 ms, the
 * issue-10 GPT 134 -> 129, medians of four alternations:
 * bench/RESULTS.md). It follows the machine, not --threads, so that C is
 * the same bits for any number of threads. */
static int max_parts(void) {
  int parts = 1;
  while (parts < MAX_PARTS && parts < 2 * trc_machine_cpus()) parts *= 2;
  return parts;
}

/* How many parts a matrix whose larger side is `dim` is cut into: the
 * largest power of two (at most max_parts) that leaves each part at least
 * min_part rows or columns (MIN_PART, or MIN_PART_AMX). Each part repacks
 * the operand it shares with the others, so thin parts cost: at 1024x256x1024 one core runs 64-row
 * parts at ~72 GFLOP/s, 256-row parts at ~94. A power of two divides evenly
 * among 2, 4, 8 or 16 threads (the pool hands each thread one block).
 * A matrix too narrow for two such parts but with work for two threads
 * (`macs` multiply-adds) is halved all the same: fashion_cnn's 128x128x3136
 * layer ran 97 GFLOP/s as one part on one core, its 64-wide halves 85-91
 * each (bench/gemm_shapes.c), so the two threads finish it in 0.6 ms, not
 * 1.05. */
static int parts_of(int64_t dim, double macs, int64_t min_part) {
  int parts = 1, most = max_parts();
  while (parts < most && dim / (2 * parts) >= min_part) parts *= 2;
  if (parts == 1 && dim >= 2 * MIN_HALF && macs >= HALVE_FROM_MACS) parts = 2;
  return parts;
}


/* Task t: part t % parts of matrix t / parts. */
static void gemm_tasks(void *ctx, int64_t lo, int64_t hi) {
  const trc_gemm_job *j = ctx;
  for (int64_t t = lo; t < hi; t++) {
    int64_t i = t / j->parts, part = t % j->parts, dim = j->split_rows ? j->m : j->n;
    int64_t from = dim * part / j->parts, to = dim * (part + 1) / j->parts;
    const float *a = j->a + trc_gemm_at(i, j->heads, j->stride_a, j->head_stride_a);
    const float *b = j->b + trc_gemm_at(i, j->heads, j->stride_b, j->head_stride_b);
    float *c = j->c + trc_gemm_at(i, j->heads, j->stride_c, j->head_stride_c);
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
    trc_sgemm(j->ta ? 'T' : 'N', j->tb ? 'T' : 'N', m, n, j->k, 1.0f, a, j->lda, b, j->ldb, j->beta, c,
              j->ldc);
  }
}

static int has_avx512(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512f");
#else
  return 1; /* oneDNN's, as before OpenBLAS was measured */
#endif
}

/* Which library's sgemm this machine runs: TRAINC_SGEMM=onednn or
 * openblas decides instead (tests run both on any machine). */
static int sgemm_on_openblas(void) {
  static _Atomic int chosen = -1; /* threads that race store the same value */
  int on_openblas = atomic_load_explicit(&chosen, memory_order_relaxed);
  if (on_openblas < 0) {
    const char *env = getenv("TRAINC_SGEMM");
    on_openblas = env && *env ? strcmp(env, "openblas") == 0 : !has_avx512();
    atomic_store_explicit(&chosen, on_openblas, memory_order_relaxed);
  }
  return on_openblas;
}

void trc_sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
               int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  if (sgemm_on_openblas()) { /* OpenBLAS takes int dimensions: the compiler's shapes fit */
    cblas_sgemm(CblasRowMajor, ta == 'T' ? CblasTrans : CblasNoTrans,
                tb == 'T' ? CblasTrans : CblasNoTrans, (blasint)m, (blasint)n, (blasint)k, alpha, a,
                (blasint)lda, b, (blasint)ldb, beta, c, (blasint)ldc);
    return;
  }
  dnnl_status_t status = dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  /* Only a broken installation fails here (the shapes are the compiler's):
   * the GEMM cannot report, so the trainer stops, every rank under MPI. */
  if (status != dnnl_success) {
    fprintf(stderr, "trainer: error: oneDNN sgemm failed (status %d)\n", (int)status);
    trc_comm_abort(1);
  }
}

/* The job's partition: `parts` blocks of rows or of columns per matrix. */
static void partition(trc_gemm_job *j, int bf16, int64_t batch) {
  j->split_rows = j->m >= j->n;
  j->parts = 1;
  /* bf16: blocks of rows where there are enough, C's rows being whole
   * (with AMX oneDNN 2.6 runs those on its brgemm, column blocks on its
   * slower gemm; on AVX512_BF16 alone the two ran alike: bench/RESULTS.md) */
  if (bf16 && j->m >= 2 * MIN_PART) j->split_rows = 1;
  if (batch < SPLIT_BELOW_BATCH)
    j->parts = parts_of(j->split_rows ? j->m : j->n, (double)j->m * (double)j->n * (double)j->k,
                        bf16 && trc_gemm_bf16_on_amx() ? MIN_PART_AMX : MIN_PART);
}

/* trc_gemm's job, in f32 or with A and B rounded to bf16 (bf16). */
static void gemm(int bf16, int64_t batch, int64_t heads, int ta, int tb, int64_t m, int64_t n,
                 int64_t k, const float *a, int64_t lda, int64_t stride_a, int64_t head_stride_a,
                 const float *b, int64_t ldb, int64_t stride_b, int64_t head_stride_b, float beta,
                 float *c, int64_t ldc, int64_t stride_c, int64_t head_stride_c) {
  trc_gemm_job j = {.batch = batch * heads, .heads = heads, .m = m, .n = n, .k = k, .ta = ta,
                    .tb = tb, .a = a, .b = b, .c = c, .lda = lda, .ldb = ldb, .ldc = ldc,
                    .stride_a = stride_a, .stride_b = stride_b, .stride_c = stride_c,
                    .head_stride_a = head_stride_a, .head_stride_b = head_stride_b,
                    .head_stride_c = head_stride_c, .beta = beta};
  bf16 = bf16 && m > 0 && n > 0 && k > 0;
  partition(&j, bf16, batch);
  if (bf16)
    trc_gemm_bf16(&j);
  else
    trc_parallel_for(j.batch * j.parts, gemm_tasks, &j);
}

void trc_gemm_bf16_given(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a,
                         const uint16_t *a16, int64_t lda, const float *b, const uint16_t *b16,
                         int64_t ldb, float beta, float *c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  trc_gemm_job j = {.batch = 1, .heads = 1, .m = m, .n = n, .k = k, .ta = ta, .tb = tb, .a = a,
                    .b = b, .a16 = a16, .b16 = b16, .c = c, .lda = lda, .ldb = ldb, .ldc = ldc,
                    .beta = beta};
  partition(&j, 1, 1);
  trc_gemm_bf16(&j);
}

void trc_gemm(int64_t batch, int64_t heads, int ta, int tb, int64_t m, int64_t n, int64_t k,
              const float *a, int64_t lda, int64_t stride_a, int64_t head_stride_a,
              const float *b, int64_t ldb, int64_t stride_b, int64_t head_stride_b, float beta,
              float *c, int64_t ldc, int64_t stride_c, int64_t head_stride_c) {
  gemm(trc_get_precision() == TRC_BF16, batch, heads, ta, tb, m, n, k, a, lda, stride_a,
       head_stride_a, b, ldb, stride_b, head_stride_b, beta, c, ldc, stride_c, head_stride_c);
}

void trc_gemm_f32(int64_t batch, int64_t heads, int ta, int tb, int64_t m, int64_t n, int64_t k,
                  const float *a, int64_t lda, int64_t stride_a, int64_t head_stride_a,
                  const float *b, int64_t ldb, int64_t stride_b, int64_t head_stride_b, float beta,
                  float *c, int64_t ldc, int64_t stride_c, int64_t head_stride_c) {
  gemm(0, batch, heads, ta, tb, m, n, k, a, lda, stride_a, head_stride_a, b, ldb, stride_b,
       head_stride_b, beta, c, ldc, stride_c, head_stride_c);
}

void trc_gemm_rounded(int64_t batch, int64_t heads, int ta, int tb, int64_t m, int64_t n,
                      int64_t k, const float *a, int64_t lda, int64_t stride_a,
                      int64_t head_stride_a, const float *b, int64_t ldb, int64_t stride_b,
                      int64_t head_stride_b, float beta, float *c, int64_t ldc, int64_t stride_c,
                      int64_t head_stride_c) {
  gemm(1, batch, heads, ta, tb, m, n, k, a, lda, stride_a, head_stride_a, b, ldb, stride_b,
       head_stride_b, beta, c, ldc, stride_c, head_stride_c);
}
