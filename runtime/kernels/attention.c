/* attention.c — trc_causal_attention and its gradient (trainc.h): causal
 * self-attention per head without the [b, heads, t, t] probabilities. The
 * forward pass takes a block of query rows at a time: their scores against
 * every key they see (one single-threaded oneDNN sgemm), the causal softmax
 * of each row, and the product with v (another): a block's probabilities
 * live in a buffer of BLOCK_FLOATS on the stack and are gone after it. The
 * backward pass makes them again the same way (bitwise), and from them and
 * dy the gradients: dq for the block's rows, dk and dv summed over the
 * blocks, in block order. Blocks and their order depend on the shapes only,
 * each forward block and each head's backward is one task of
 * trc_parallel_for: the same bits for any number of threads. (Attention
 * that keeps each row's log-sum-exp and walks the keys in blocks too, as
 * flash-attention does, would need no buffer of a whole row; with rows of
 * at most a few thousand keys a row block fits in the cache as it is.) */
#define TRC_VECTOR_MATH /* the softmax's rows call libmvec's expf (trainc.h) */
#include "rt_kernels.h"

#include <math.h>
#include <string.h>

enum { BLOCK_FLOATS = TRC_ATTENTION_BLOCK_FLOATS };


typedef struct {
  int64_t b, t, c, heads, d, rows, blocks;
  float scale;
  const float *q, *k, *v, *dy;
  float *out;
} attention;

static attention attention_of(int64_t b, int64_t t, int64_t c, int64_t heads, float scale) {
  int64_t rows = trc_attention_block_rows(t);
  return (attention){.b = b, .t = t, .c = c, .heads = heads, .d = c / heads, .rows = rows,
                     .blocks = (t + rows - 1) / rows, .scale = scale};
}

/* Sums in ROW_LANES lanes, so that the loops vectorize (the order is
 * fixed: the same bits every time). */
enum { LANES = ROW_LANES };

static inline __attribute__((always_inline)) float dot(const float *x, const float *y, int64_t n) {
  float lane[LANES] = {0}, sum = 0.0f;
  int64_t full = n / LANES * LANES;
  for (int64_t j = 0; j < full; j += LANES)
    for (int l = 0; l < LANES; l++) lane[l] += x[j + l] * y[j + l];
  for (int l = 0; l < LANES; l++) sum += lane[l];
  for (int64_t j = full; j < n; j++) sum += x[j] * y[j];
  return sum;
}

static inline __attribute__((always_inline)) float sum_of(const float *x, int64_t n) {
  float lane[LANES] = {0}, sum = 0.0f;
  int64_t full = n / LANES * LANES;
  for (int64_t j = 0; j < full; j += LANES)
    for (int l = 0; l < LANES; l++) lane[l] += x[j + l];
  for (int l = 0; l < LANES; l++) sum += lane[l];
  for (int64_t j = full; j < n; j++) sum += x[j];
  return sum;
}

/* Row i of a block from query row `first` sees keys [0, first + i]: its
 * scores (`keys` of them, the later ones unused) become its probabilities,
 * 0 past the diagonal. Compiled for AVX-512 and AVX2 too (the runtime is
 * built for any x86-64), its expf vectorized with libmvec's of that width,
 * as the loss head's rows (kernels/head.c). */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void softmax_rows(float *s, int64_t rows, int64_t keys, int64_t first) {
  for (int64_t i = 0; i < rows; i++) {
    float *row = s + i * keys;
    int64_t seen = first + i + 1;
    float max = trc_row_max(row, seen);
    for (int64_t j = 0; j < seen; j++) row[j] = expf(row[j] - max);
    float sum = sum_of(row, seen);
    for (int64_t j = 0; j < seen; j++) row[j] /= sum;
    for (int64_t j = seen; j < keys; j++) row[j] = 0.0f;
  }
}

/* The probabilities of rows [first, first + rows) of head h of sequence
 * i into s (rows x keys, keys = first + rows: all the block sees). */
static void probabilities(const attention *a, int64_t i, int64_t h, int64_t first, int64_t rows,
                          float *s) {
  int64_t keys = first + rows, head = i * a->t * a->c + h * a->d;
  trc_sgemm('N', 'T', rows, keys, a->d, a->scale, a->q + head + first * a->c, a->c, a->k + head, a->c,
        0.0f, s, keys);
  softmax_rows(s, rows, keys, first);
}

static void forward_blocks(void *ctx, int64_t lo, int64_t hi) {
  const attention *a = ctx;
  float s[BLOCK_FLOATS];
  for (int64_t task = lo; task < hi; task++) {
    int64_t block = task % a->blocks, h = task / a->blocks % a->heads, i = task / a->blocks / a->heads;
    int64_t first = block * a->rows, rows = a->t - first < a->rows ? a->t - first : a->rows;
    int64_t keys = first + rows, head = i * a->t * a->c + h * a->d;
    probabilities(a, i, h, first, rows, s);
    trc_sgemm('N', 'N', rows, a->d, keys, 1.0f, s, keys, a->v + head, a->c, 0.0f,
          a->out + head + first * a->c, a->c);
  }
}

void trc_causal_attention(int64_t b, int64_t t, int64_t c, int64_t heads, float scale,
                          const float *q, const float *k, const float *v, float *out) {
  attention a = attention_of(b, t, c, heads, scale);
  a.q = q, a.k = k, a.v = v, a.out = out;
  trc_parallel_for(b * heads * a.blocks, forward_blocks, &a);
}

/* ds = p * (dp - sum p dp) in place of dp, row by row (0 past the diagonal,
 * where p is). */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void softmax_grad_rows(const float *p, float *dp, int64_t rows, int64_t keys) {
  for (int64_t i = 0; i < rows; i++) {
    const float *pr = p + i * keys;
    float *g = dp + i * keys, sum = dot(pr, g, keys);
    for (int64_t j = 0; j < keys; j++) g[j] = pr[j] * (g[j] - sum);
  }
}

/* One head of one sequence: dq block by block, dk and dv summed over them. */
static void backward_head(const attention *a, int64_t i, int64_t h, float *s, float *ds) {
  int64_t head = i * a->t * a->c + h * a->d, all = a->b * a->t * a->c;
  float *dq = a->out + head, *dk = a->out + all + head, *dv = a->out + 2 * all + head;
  for (int64_t r = 0; r < a->t; r++) {
    memset(dk + r * a->c, 0, (size_t)a->d * sizeof *dk);
    memset(dv + r * a->c, 0, (size_t)a->d * sizeof *dv);
  }
  for (int64_t first = 0; first < a->t; first += a->rows) {
    int64_t rows = a->t - first < a->rows ? a->t - first : a->rows, keys = first + rows;
    const float *qb = a->q + head + first * a->c, *dyb = a->dy + head + first * a->c;
    probabilities(a, i, h, first, rows, s);
    trc_sgemm('N', 'T', rows, keys, a->d, 1.0f, dyb, a->c, a->v + head, a->c, 0.0f, ds, keys);
    softmax_grad_rows(s, ds, rows, keys);
    trc_sgemm('N', 'N', rows, a->d, keys, a->scale, ds, keys, a->k + head, a->c, 0.0f,
          dq + first * a->c, a->c);
    trc_sgemm('T', 'N', keys, a->d, rows, a->scale, ds, keys, qb, a->c, 1.0f, dk, a->c);
    trc_sgemm('T', 'N', keys, a->d, rows, 1.0f, s, keys, dyb, a->c, 1.0f, dv, a->c);
  }
}

static void backward_heads(void *ctx, int64_t lo, int64_t hi) {
  const attention *a = ctx;
  float s[BLOCK_FLOATS], ds[BLOCK_FLOATS];
  for (int64_t task = lo; task < hi; task++) backward_head(a, task / a->heads, task % a->heads, s, ds);
}

void trc_causal_attention_grad(int64_t b, int64_t t, int64_t c, int64_t heads, float scale,
                               const float *q, const float *k, const float *v, const float *dy,
                               float *out) {
  attention a = attention_of(b, t, c, heads, scale);
  a.q = q, a.k = k, a.v = v, a.dy = dy, a.out = out;
  trc_parallel_for(b * heads, backward_heads, &a);
}
