/* rt_kernels.h — what kernels/'s GEMMs, convolutions and row loops share:
 * a GEMM's partition, the bf16 path, oneDNN's primitive caches, row
 * reductions. Not installed. */
#ifndef TRAINC_RT_KERNELS_H
#define TRAINC_RT_KERNELS_H

#include "core/rt_core.h"

#include <math.h>

/* ---- GEMMs (gemm.c, gemm_bf16.c) ---- */
/* One trc_gemm call and its partition: `parts` parts per matrix, each a
 * block of rows of C (split_rows) or of its columns. batch: the number of
 * matrices, trc_gemm's batch * heads. */
typedef struct {
  int64_t batch, heads, m, n, k, parts;
  int ta, tb, split_rows;
  const float *a, *b;
  /* bf16 only: A or B already rounded (stored as a or b would be, leading
   * dimension lda or ldb; one matrix), read as they are; NULL: rounded here */
  const uint16_t *a16, *b16;
  float *c;
  int64_t lda, ldb, ldc, stride_a, stride_b, stride_c;
  int64_t head_stride_a, head_stride_b, head_stride_c;
  float beta;
} trc_gemm_job;
/* The offset of matrix i, (i / heads, i % heads), of a trc_gemm operand. */
static inline int64_t trc_gemm_at(int64_t i, int64_t heads, int64_t stride, int64_t head_stride) {
  return i / heads * stride + i % heads * head_stride;
}
/* C = alpha op(A) op(B) + beta C, row-major, by oneDNN's sgemm (CPUs with
 * AVX-512) or OpenBLAS's (without; TRAINC_SGEMM=onednn|openblas decides
 * instead) on the calling thread (a part of trc_gemm, a block of fused
 * attention); a failure stops the trainer. */
void trc_sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
               int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
/* The CPUs this process may run on (its affinity mask, read once): what a
 * GEMM's partition may follow, never --threads, so that its results are
 * the same bits for any number of threads on one machine (parallel.c). */
int trc_machine_cpus(void);
/* The job on oneDNN's bf16 matmul, the same parts on the trainer's threads. */
void trc_gemm_bf16(const trc_gemm_job *j);
/* n floats rounded to bf16 (trc_round_bf16's bits), on the calling thread:
 * the loss head's logit gradients, rounded once where made. */
void trc_bf16_round(const float *restrict from, uint16_t *restrict to, int64_t n);
/* trc_gemm of one matrix under bf16 with A or B (a16, b16; the other NULL)
 * rounded by the caller where it made them: the loss head's logit
 * gradients, rounded once for the two GEMMs that read them (head.c). k > 0. */
void trc_gemm_bf16_given(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a,
                         const uint16_t *a16, int64_t lda, const float *b, const uint16_t *b16,
                         int64_t ldb, float beta, float *c, int64_t ldc);
/* Whether trc_gemm_bf16 makes a transposed A of a GEMM with n columns
 * row-major before oneDNN reads it (with AMX, from n = 512: gemm_bf16.c);
 * a caller that gives A rounded (trc_gemm_bf16_given) does it itself. */
int trc_gemm_bf16_transposes_a(int64_t n);
/* Whether oneDNN runs the bf16 GEMMs on AMX's tiles (gemm.c cuts them into
 * thicker parts there). */
int trc_gemm_bf16_on_amx(void);
/* n floats rounded to bf16's precision in place (trc_round_bf16's bits,
 * kept as f32), on the calling thread. */
void trc_bf16_round_in_place(float *x, int64_t n);
/* The oneDNN primitive caches (gemm_bf16.c, conv.c): a zeroed new entry at
 * the end of *items (len entries of `size` bytes, room for *cap, doubled
 * when full); NULL when out of memory. */
void *trc_cache_append(void **items, int *len, int *cap, size_t size);
/* Bytes of trc_conv2d's workspace so far (oneDNN's scratchpads and the
 * per-block weight gradients): memory outside the arena (conv.c). */
uint64_t trc_conv_workspace_bytes(void);
/* Bytes of the bf16 GEMMs' oneDNN scratchpads so far (gemm_bf16.c), also
 * outside every plan: what its operand buffer is not. */
uint64_t trc_bf16_scratchpad_bytes(void);

/* ---- row loops (head.c, attention.c) ---- */
/* Row reductions in ROW_LANES lanes, so that they vectorize. */
enum { ROW_LANES = 16 }; /* K_LANES of ir/ir.h */
/* The row's maximum (trc_maxf: a NaN is passed over); a maximum is the
 * same in any order (a tie of +0 and -0 changes no result in these rows).
 * rows.c: GCC 12 vectorizes no loop of trc_maxf (its NaN test), so AVX-512
 * machines take explicit vector code. */
float trc_row_max(const float *x, int64_t n);

#endif
