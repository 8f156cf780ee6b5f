/* head.c — trc_linear_cross_entropy (trainc.h): the chunked loss head,
 * cross_entropy(x @ op(w), labels) with its gradients, one block of `chunk`
 * rows at a time so that the [n, v] logits never exist whole. Per block:
 * the logits in scratch (trc_gemm), each row's statistics and its logit
 * gradient in place (rows in parallel, each row on one thread; under
 * precision bf16 rounded there, once), then dx and dw from that gradient
 * (trc_gemm again). The per-row arithmetic is that of
 * the unfused kernels (ir/ops/rows.c: logsumexp, cross_entropy and
 * cross_entropy_grad) in the same float operation order (expf: libmvec's
 * vector versions, as the generated loops call them). Blocks depend on
 * n and chunk only and the GEMMs' partitions on the shapes only: the same
 * bits for any number of threads. */
#define TRC_VECTOR_MATH /* the row loops call libmvec's expf (trainc.h) */
#include "rt_kernels.h"

/* One block's rows: its logits (overwritten with their gradient) and where
 * its statistics go. */
typedef struct {
  float *logits;          /* [rows, v], row r is the head's row first + r */
  int64_t first, v;
  const int32_t *labels;  /* all n rows' */
  int has_ignore;
  int64_t ignore_label;
  float dl, per_row;      /* the loss seed; 1/n, or 1 with ignore */
  float *loss, *argmax;   /* all n rows' */
  int bf16;               /* the gradient rounded to bf16 where it is made */
} head_block;

/* The row's scale as cross_entropy_grad_scale makes it: dl * per_row, then
 * with ignore times whether the row counts (1 or 0). */
static inline __attribute__((always_inline)) float row_scale(const head_block *b, int counts) {
  float scale = b->dl * b->per_row;
  return b->has_ignore ? scale * (float)counts : scale;
}

enum { LANES = ROW_LANES };

/* The sum of expf(l[c] - max) as the IR defines a row's reduction (ir.h,
 * *Reductions in lanes*), which every backend computes bitwise alike: column
 * c in lane c % LANES for the full groups, the rest in lanes 0, 1, ..., the
 * lanes then folded in halves; fewer than LANES columns in sequence. The
 * full groups a block of EXP_BLOCK columns at a time: first the block's
 * exponentials (libmvec's vector calls, which keep no register across them),
 * then their sums into the lanes, which so stay in registers (summed across
 * the calls, the lanes went through memory: a third of the head's rows). */
enum { EXP_BLOCK = 256 };

static inline __attribute__((always_inline)) float sum_exp_shifted(const float *l, int64_t v, float max) {
  float sum = 0.0f;
  if (v < LANES) {
    for (int64_t c = 0; c < v; c++) sum = sum + expf(l[c] - max);
    return sum;
  }
  float lane[LANES] = {0}, e[EXP_BLOCK];
  int64_t full = v / LANES * LANES;
  for (int64_t c0 = 0; c0 < full; c0 += EXP_BLOCK) {
    int64_t n = full - c0 < EXP_BLOCK ? full - c0 : EXP_BLOCK;
    for (int64_t c = 0; c < n; c++) e[c] = expf(l[c0 + c] - max);
    for (int64_t c = 0; c < n; c += LANES)
      for (int i = 0; i < LANES; i++) lane[i] = lane[i] + e[c + i];
  }
  for (int64_t c = full; c < v; c++) lane[c - full] = lane[c - full] + expf(l[c] - max);
  for (int w = LANES / 2; w >= 1; w /= 2)
    for (int i = 0; i < w; i++) lane[i] = lane[i] + lane[i + w];
  return lane[0];
}

/* The first column holding the maximum (trc_argmax_row's answer: 0 when
 * no column does, a row of NaNs), found a block of LANES columns at a time. */
static inline __attribute__((always_inline)) int64_t first_at(const float *l, int64_t v,
                                                              float max) {
  int64_t c = 0;
  for (; c + LANES <= v; c += LANES) {
    int hit = 0;
    for (int i = 0; i < LANES; i++) hit |= l[c + i] == max;
    if (hit) break;
  }
  for (; c < v; c++)
    if (l[c] == max) return c;
  return 0;
}

/* The row's logit gradient at column c, columns counted in 32 bits (a
 * vocabulary is far below 2^31), so that the comparison with the label
 * takes one vector of 16 lanes, not two of 8 (it was half the loop's time);
 * y is the label, or -1 where no column is. */
static inline __attribute__((always_inline)) float logit_gradient(float l, int32_t c, int32_t y,
                                                                  float lse, float scale) {
  return (expf(l - lse) - (float)(c == y)) * scale;
}

static inline __attribute__((always_inline)) int32_t label_column(int64_t label, int64_t v) {
  return label >= 0 && label < v ? (int32_t)label : -1;
}

static inline __attribute__((always_inline)) void gradient_f32(float *l, int64_t v, int64_t label,
                                                               float lse, float scale) {
  const int32_t columns = (int32_t)v, y = label_column(label, v);
  for (int32_t c = 0; c < columns; c++) l[c] = logit_gradient(l[c], c, y, lse, scale);
}

/* The same rounded to bf16 into the row's own first 2v bytes, EXP_BLOCK
 * columns at a time through a buffer: block [c0, c0 + n) lands on the
 * floats [c0 / 2, (c0 + n) / 2), which it and the blocks before it have
 * read. One pass over the row instead of two. */
static inline __attribute__((always_inline)) void gradient_bf16(float *l, int64_t v, int64_t label,
                                                                float lse, float scale) {
  const int32_t columns = (int32_t)v, y = label_column(label, v);
  float g[EXP_BLOCK];
  for (int32_t c0 = 0; c0 < columns; c0 += EXP_BLOCK) {
    int32_t n = columns - c0 < EXP_BLOCK ? columns - c0 : EXP_BLOCK;
    for (int32_t c = 0; c < n; c++) g[c] = logit_gradient(l[c0 + c], c0 + c, y, lse, scale);
    trc_bf16_round(g, (uint16_t *)l + c0, n);
  }
}

static inline __attribute__((always_inline)) void head_row(const head_block *b, int64_t r) {
  float *l = b->logits + r * b->v;
  int64_t row = b->first + r, label = b->labels[row];
  int counts = !(b->has_ignore && label == b->ignore_label);
  float max = trc_row_max(l, b->v);
  float lse = max + logf(sum_exp_shifted(l, b->v, max)); /* row_logsumexp's arithmetic */
  b->argmax[row] = (float)first_at(l, b->v, max);
  b->loss[row] = counts ? lse - l[label] : 0.0f;
  float scale = row_scale(b, counts);
  if (b->dl == 0.0f) return; /* no gradient wanted (trc_linear_cross_entropy) */
  /* under bf16 rounded once, here, where the two GEMMs that read them take
   * them as they are (gradient_gemm): the bits their rounding would make,
   * made from the cache instead of from the block's gradients in memory
   * per GEMM */
  if (b->bf16)
    gradient_bf16(l, b->v, label, lse, scale);
  else
    gradient_f32(l, b->v, label, lse, scale);
}

/* The rows' expf loops are most of the head's time beside its GEMMs: they
 * are compiled for AVX-512 and AVX2 too (the runtime itself is built for any
 * x86-64), each vectorized with libmvec's expf of its width. */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void head_rows(void *ctx,
                                                                                    int64_t lo,
                                                                                    int64_t hi) {
  for (int64_t r = lo; r < hi; r++) head_row(ctx, r);
}

/* C[m, n] = op(A) op(B) + beta C, one matrix, no heads. */
static void gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                 const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  trc_gemm(1, 1, ta, tb, m, n, k, a, lda, 0, 0, b, ldb, 0, 0, beta, c, ldc, 0, 0);
}

/* Under bf16 head_row leaves each row's gradients rounded in the row's own
 * first half (rows 2v bf16 values apart); oneDNN's AMX kernels take only a
 * dense operand (a leading dimension of 2v sent dx's GEMM to its slower
 * jit gemm), so the rows are moved together, row r to r·v. In waves: rows
 * [f, 2f) land in [f·v, 2f·v), where rows below f lay (moved already), and
 * are read from [2f·v, 4f·v), which no row of the wave lands on. */
typedef struct {
  uint16_t *g16;
  int64_t v, first;
} row_wave;

static void move_rows(void *ctx, int64_t lo, int64_t hi) {
  const row_wave *w = ctx;
  for (int64_t r = w->first + lo; r < w->first + hi; r++)
    memcpy(w->g16 + r * w->v, w->g16 + 2 * r * w->v, (size_t)w->v * sizeof *w->g16);
}

static void pack_rounded_rows(float *logits, int64_t rows, int64_t v) {
  for (int64_t first = 1; first < rows; first *= 2) {
    row_wave w = {(uint16_t *)logits, v, first};
    trc_parallel_for((rows < 2 * first ? rows : 2 * first) - first, move_rows, &w);
  }
}

/* g^T of the packed [rows, v] gradients into the scratch's second half,
 * free once they are packed (v rows of `rows`): w's gradient reads it
 * row-major where oneDNN's AMX kernels want a transposed A so
 * (trc_gemm_bf16_transposes_a). Blocks of columns of g, one per task. */
enum { TRANSPOSE_COLUMNS = 64 };

typedef struct {
  const uint16_t *g16;
  uint16_t *t16;
  int64_t rows, v;
} transposing;

static void transpose_columns(void *ctx, int64_t lo, int64_t hi) {
  const transposing *t = ctx;
  for (int64_t c0 = lo * TRANSPOSE_COLUMNS; c0 < hi * TRANSPOSE_COLUMNS && c0 < t->v;
       c0 += TRANSPOSE_COLUMNS) {
    int64_t c1 = c0 + TRANSPOSE_COLUMNS < t->v ? c0 + TRANSPOSE_COLUMNS : t->v;
    for (int64_t r = 0; r < t->rows; r++)
      for (int64_t c = c0; c < c1; c++) t->t16[c * t->rows + r] = t->g16[r * t->v + c];
  }
}

static const uint16_t *transposed_gradients(float *logits, int64_t rows, int64_t v) {
  transposing t = {(const uint16_t *)logits, (uint16_t *)logits + rows * v, rows, v};
  trc_parallel_for((v + TRANSPOSE_COLUMNS - 1) / TRANSPOSE_COLUMNS, transpose_columns, &t);
  return t.t16;
}

/* C = op(A) op(B) + beta C where A (g_is_a) or B is the block's logit
 * gradients: floats (leading dimension v), or under bf16 as head_row
 * rounded them and pack_rounded_rows packed them (v bf16 values a row). */
static void gradient_gemm(const head_block *hb, int g_is_a, int ta, int tb, int64_t m, int64_t n,
                          int64_t k, const float *other, int64_t ld_other, float beta, float *c,
                          int64_t ldc) {
  const float *g = hb->logits;
  const uint16_t *g16 = (const uint16_t *)g;
  if (!hb->bf16 && g_is_a)
    gemm(ta, tb, m, n, k, g, hb->v, other, ld_other, beta, c, ldc);
  else if (!hb->bf16)
    gemm(ta, tb, m, n, k, other, ld_other, g, hb->v, beta, c, ldc);
  else if (g_is_a)
    trc_gemm_bf16_given(ta, tb, m, n, k, NULL, g16, hb->v, other, NULL, ld_other, beta, c, ldc);
  else
    trc_gemm_bf16_given(ta, tb, m, n, k, other, NULL, ld_other, NULL, g16, hb->v, beta, c, ldc);
}

void trc_linear_cross_entropy(int64_t n, int64_t d, int64_t v, int64_t chunk, int w_vd,
                              int has_ignore, int64_t ignore_label, const float *x,
                              const float *w, const int32_t *labels, const float *seed,
                              float *out, float *dw, float *scratch) {
  /* w's leading dimension: [v, d] or [d, v] */
  int64_t ldw = w_vd ? d : v;
  head_block b = {.logits = scratch, .v = v, .labels = labels, .has_ignore = has_ignore,
                  .ignore_label = ignore_label, .dl = *seed,
                  .per_row = has_ignore ? 1.0f : (float)(1.0 / (double)n),
                  .loss = out + n * d, .argmax = out + n * d + n,
                  .bf16 = trc_get_precision() == TRC_BF16};
  for (int64_t first = 0; first < n; first += chunk) {
    int64_t rows = n - first < chunk ? n - first : chunk;
    const float *xb = x + first * d;
    b.first = first;
    gemm(0, w_vd, rows, v, d, xb, d, w, ldw, 0.0f, scratch, v); /* logits */
    trc_parallel_for(rows, head_rows, &b);
    if (b.dl == 0.0f) { /* evaluation: the loss alone, no gradient GEMMs */
      memset(out + first * d, 0, (size_t)(rows * d) * sizeof *out);
      continue;
    }
    if (b.bf16) pack_rounded_rows(scratch, rows, v);
    gradient_gemm(&b, 1, 0, !w_vd, rows, d, v, w, ldw, 0.0f, out + first * d, d); /* dx */
    if (!dw) continue;
    if (w_vd && b.bf16 && trc_gemm_bf16_transposes_a(d)) /* dw[v, d] += (g^T) x */
      trc_gemm_bf16_given(0, 0, v, d, rows, NULL, transposed_gradients(scratch, rows, v), rows,
                          xb, NULL, d, 1.0f, dw, d);
    else if (w_vd) /* dw[v, d] += g^T x */
      gradient_gemm(&b, 1, 1, 0, v, d, rows, xb, d, 1.0f, dw, d);
    else /* dw[d, v] += x^T g */
      gradient_gemm(&b, 0, 1, 0, d, v, rows, xb, d, 1.0f, dw, v);
  }
}
