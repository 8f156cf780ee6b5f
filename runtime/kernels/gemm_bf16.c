/* gemm_bf16.c — trc_gemm under `precision bf16`: A and B rounded to bf16
 * (round to nearest even) into scratch buffers, then multiplied by oneDNN's
 * matmul primitive with f32 accumulation and an f32 C (beta by a sum
 * post-op). The work is cut by trc_gemm's partition (gemm.c: fixed by the
 * shapes), each part one single-threaded matmul on the runtime's pool, so
 * that every element of C is computed by the same primitive, with the same
 * blocking, whatever --threads is: results are bitwise the same run to run
 * and across thread counts on one machine. oneDNN here is built with OpenMP:
 * every pool thread has set its OpenMP thread count to 1 (parallel.c), so
 * oneDNN starts no OpenMP team of its own and never competes with the pool.
 * (Also here, beside the rounding they share: trc_bf16_pack and
 * trc_bf16_unpack, activations stored in bf16.)
 * Primitives are cached per part shape (at most two shapes per GEMM);
 * oneDNN's scratchpads grow to the largest part once and are kept. The
 * rounded operands go to one buffer whose size the compiler plans
 * (trc_bf16_operands_reserve). Operands that lie in the parameter region
 * are not rounded per call: they are read from the parameters' bf16 copy
 * (trc_bf16_weights_*, trainc_rt.h), which holds the same bytes the
 * rounding would make; nor are those a caller rounded where it made them
 * (trc_gemm_bf16_given: the loss head's logit gradients). */
#include "rt_kernels.h"

#include <oneapi/dnnl/dnnl.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What one part's primitive depends on: the part of C (rows x cols), k, the
 * strides of the packed bf16 op(A) and op(B), C's leading dimension and
 * beta. All 8-byte fields: compared with memcmp. */
typedef struct {
  int64_t rows, cols, k, a_stride[2], b_stride[2], ldc;
  double beta;
} part_shape;

typedef struct {
  part_shape shape;
  dnnl_primitive_t primitive;
  dnnl_memory_desc_t a_md, b_md, c_md, scratch_md;
} cached_matmul;

static struct {
  dnnl_engine_t engine;
  dnnl_stream_t streams[TRC_MAX_THREADS]; /* one per slot (concurrent executions) */
  cached_matmul *cache;
  int cached, cache_cap;
  char *scratchpad; /* one oneDNN scratchpad per slot */
  size_t scratchpad_cap, slot_bytes;
  int transpose_a; /* A transposed while rounded, from n = TRANSPOSE_A_FROM_N on */
  int amx;         /* oneDNN runs bf16 on AMX's tiles */
  int emulated;    /* oneDNN has no bf16 matmul on this CPU: trc_bf16_emulated */
} dnn;

/* The rounded operands of a GEMM: A's copy, then B's, each padded to ALIGN
 * (as ir.h's node_bf16_operand_bytes counts them, BF16_COPY_ALIGN). Reserved
 * at the planned size it never grows: a GEMM needing more is a compiler bug.
 * Unreserved (a test, `trainc calibrate`) it grows to the largest GEMM. */
static struct {
  uint16_t *data;
  size_t cap, high_water; /* high_water: the most one GEMM took */
  int planned;
} operands;

/* The parameters' bf16 copy: copy[i] is params[i] rounded when current. */
static struct {
  const float *params;
  uint16_t *copy, *check; /* check: a second rounding, TRAINC_CHECK_BF16_WEIGHTS */
  uint64_t count;
  int current;
} weights;

static trc_precision precision = TRC_FP32;

void trc_set_precision(trc_precision p) { precision = p; }
trc_precision trc_get_precision(void) { return precision; }

/* oneDNN failing here is a broken installation or out of memory: the GEMM
 * has no way to report, so the trainer stops (every rank, under MPI). */
static void check(dnnl_status_t status, const char *what) {
  if (status == dnnl_success) return;
  fprintf(stderr, "trainer: error: oneDNN %s failed (status %d) in a bf16 GEMM\n", what,
          (int)status);
  trc_comm_abort(1);
}

enum { ALIGN = 64 }; /* a cache line: what oneDNN's buffers want */

static size_t padded(size_t bytes) { return (bytes + ALIGN - 1) / ALIGN * ALIGN; }

static void *grow(void *buf, size_t *cap, size_t bytes) {
  bytes = padded(bytes);
  if (bytes <= *cap) return buf;
  free(buf);
  buf = aligned_alloc(ALIGN, bytes);
  if (!buf) {
    fprintf(stderr, "trainer: error: out of memory for %zu bytes of bf16 GEMM scratch\n", bytes);
    trc_comm_abort(1);
  }
  *cap = bytes;
  return buf;
}

/* An environment switch for tests: `unset` when it is not set (or empty),
 * else whether it is other than "0". */
static int env_switch(const char *name, int unset) {
  const char *env = getenv(name);
  return env && *env ? strcmp(env, "0") != 0 : unset;
}

void *trc_cache_append(void **items, int *len, int *cap, size_t size) {
  if (*len == *cap) {
    int bigger = *cap ? 2 * *cap : 16;
    void *grown = realloc(*items, (size_t)bigger * size);
    if (!grown) return NULL;
    *items = grown, *cap = bigger;
  }
  char *e = (char *)*items + (size_t)(*len)++ * size;
  memset(e, 0, size);
  return e;
}

/* trc_round_bf16 (trainc.h): to nearest even, a NaN kept a NaN. */
static void round_portable(const float *restrict from, uint16_t *restrict to, int64_t n) {
  for (int64_t i = 0; i < n; i++) to[i] = trc_round_bf16(from[i]);
}

/* The same, kept in f32: the low half of the bits cleared. */
static void round_in_place_portable(float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t u = (uint32_t)trc_round_bf16(x[i]) << 16;
    memcpy(&x[i], &u, sizeof u);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define AVX512_BF16 __attribute__((target("avx512f,avx512bf16,avx512vl")))
/* AVX512_BF16's vcvtneps2bf16 rounds 16 floats to nearest even in one
 * instruction and quiets NaNs as trc_round_bf16 does, but flushes subnormal
 * inputs to zero: those lanes (rare: below 1.2e-38) are redone by
 * trc_round_bf16, so the result is bitwise the portable one's. Rounding was 38%
 * of a bf16 gpt step when it was scalar, 17% vectorized by the compiler. */
static inline AVX512_BF16 __m256i round16_avx512_bf16(__m512 x) {
  const __m512i exponent = _mm512_set1_epi32(0x7f800000), mantissa = _mm512_set1_epi32(0x7fffff);
  __m256bh y = _mm512_cvtneps_pbh(x);
  __m512i u = _mm512_castps_si512(x);
  __mmask16 subnormal = _mm512_testn_epi32_mask(u, exponent) & _mm512_test_epi32_mask(u, mantissa);
  __m256i bits;
  memcpy(&bits, &y, sizeof bits);
  if (subnormal) {
    float in[16];
    uint16_t out[16];
    memcpy(in, &x, sizeof in);
    memcpy(out, &bits, sizeof out);
    for (int lane = 0; subnormal; lane++, subnormal >>= 1)
      if (subnormal & 1) out[lane] = trc_round_bf16(in[lane]);
    memcpy(&bits, out, sizeof bits);
  }
  return bits;
}

AVX512_BF16 static void round_avx512_bf16(const float *restrict from, uint16_t *restrict to, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(to + i), round16_avx512_bf16(_mm512_loadu_ps(from + i)));
  round_portable(from + i, to + i, n - i);
}

/* The same bits stored past the cache (non-temporal stores, from the first
 * 32-byte boundary of `to`), for a copy no one reads soon: the parameters'
 * bf16 copy, which the optimizer writes block by block and the next
 * forward pass reads after the whole update has gone through the cache.
 * Plain stores would first read every line of the copy they write
 * (GPT-2 124M's: 248 MB a step; bench/RESULTS.md). */
AVX512_BF16 static void round_streaming_avx512_bf16(const float *restrict from, uint16_t *restrict to,
                                                    int64_t n) {
  int64_t i = 0;
  for (; i < n && (uintptr_t)(to + i) % 32; i++) to[i] = trc_round_bf16(from[i]);
  for (; i + 16 <= n; i += 16)
    _mm256_stream_si256((__m256i *)(to + i), round16_avx512_bf16(_mm512_loadu_ps(from + i)));
  round_portable(from + i, to + i, n - i);
  _mm_sfence(); /* the streamed stores seen before any later store: the pool's handover */
}

/* A CPU without AVX512_BF16 (AVX2: AMD Zen 3) rounds 8 at a time by
 * trc_round_bf16's integer steps, bitwise its result; GCC at -O2 leaves
 * the portable loop scalar. The bf16 bits of each lane, in its low half. */
#define AVX2 __attribute__((target("avx2")))
static inline AVX2 __m256i round8_avx2(__m256i u) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
  __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                   _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(rounded, quiet_nan, nan);
}

AVX2 static void round_avx2(const float *restrict from, uint16_t *restrict to, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i lo = round8_avx2(_mm256_loadu_si256((const __m256i *)(from + i)));
    __m256i hi = round8_avx2(_mm256_loadu_si256((const __m256i *)(from + i + 8)));
    /* packus packs within 128-bit halves: the quadwords put back in order */
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
    _mm256_storeu_si256((__m256i *)(to + i), packed);
  }
  round_portable(from + i, to + i, n - i);
}

AVX2 static void round_in_place_avx2(float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i bits = round8_avx2(_mm256_loadu_si256((const __m256i *)(x + i)));
    _mm256_storeu_si256((__m256i *)(x + i), _mm256_slli_epi32(bits, 16));
  }
  round_in_place_portable(x + i, n - i);
}
#endif

/* past_cache: the vector path's stores non-temporal (a copy no one reads
 * soon) */
static void round_bf16_stored(const float *restrict from, uint16_t *restrict to, int64_t n, bool past_cache) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512bf16")) {
    (past_cache ? round_streaming_avx512_bf16 : round_avx512_bf16)(from, to, n);
    return;
  }
  if (__builtin_cpu_supports("avx2")) {
    round_avx2(from, to, n);
    return;
  }
#endif
  round_portable(from, to, n);
}

static void round_to_bf16(const float *restrict from, uint16_t *restrict to, int64_t n) {
  round_bf16_stored(from, to, n, false);
}

void trc_bf16_round(const float *restrict from, uint16_t *restrict to, int64_t n) {
  round_to_bf16(from, to, n);
}

/* bf16 to f32: the bits shifted up (exact). */
static void widen_portable(const uint16_t *restrict from, float *restrict to, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t u = (uint32_t)from[i] << 16;
    memcpy(&to[i], &u, sizeof u);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The same 16 at a time (the runtime is built for any x86-64). */
__attribute__((target("avx512f"))) static void widen_avx512(const uint16_t *restrict from,
                                                            float *restrict to, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i half = _mm256_loadu_si256((const __m256i *)(from + i));
    _mm512_storeu_si512(to + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
  }
  widen_portable(from + i, to + i, n - i);
}

AVX2 static void widen_avx2(const uint16_t *restrict from, float *restrict to, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i half = _mm_loadu_si128((const __m128i *)(from + i));
    _mm256_storeu_si256((__m256i *)(to + i), _mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
  }
  widen_portable(from + i, to + i, n - i);
}
#endif

static void widen_bf16(const uint16_t *restrict from, float *restrict to, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) {
    widen_avx512(from, to, n);
    return;
  }
  if (__builtin_cpu_supports("avx2")) {
    widen_avx2(from, to, n);
    return;
  }
#endif
  widen_portable(from, to, n);
}

void trc_bf16_round_in_place(float *x, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx2")) {
    round_in_place_avx2(x, n);
    return;
  }
#endif
  round_in_place_portable(x, n);
}

/* ---- rounding A and B: rows of the stored (not transposed) matrices ---- */

typedef struct {
  const float *src;
  uint16_t *dst;
  /* per matrix: rows x cols at src + trc_gemm_at(i, heads, stride, head_stride), row r at r*ld */
  int64_t rows, cols, ld, heads, stride, head_stride;
} rounding;

static void round_rows(void *ctx, int64_t lo, int64_t hi) {
  const rounding *r = ctx;
  for (int64_t t = lo; t < hi; t++) {
    int64_t i = t / r->rows;
    const float *from = r->src + trc_gemm_at(i, r->heads, r->stride, r->head_stride) +
                        t % r->rows * r->ld;
    round_to_bf16(from, r->dst + t * r->cols, r->cols);
  }
}

/* Matrix i of the job's operand X (rows x cols, leading dimension ld) at
 * dst + i*rows*cols. */
static void round_matrices(const trc_gemm_job *j, const float *x, int64_t rows, int64_t cols,
                           int64_t ld, int64_t stride, int64_t head_stride, uint16_t *dst) {
  rounding r = {x, dst, rows, cols, ld, j->heads, stride, head_stride};
  trc_parallel_for(j->batch * rows, round_rows, &r);
}

/* ---- rounding and transposing: the columns of the stored matrices ---- */

enum { COLUMN_BLOCK = 16 };

/* to[c * rows + r] = from[r * ld + c] rounded, for c in [c0, c1) and r from
 * first_row: down 16 rows at a time, so that the 16 lines of a block are
 * read once. */
static void round_columns_portable(const float *from, int64_t first_row, int64_t rows, int64_t ld,
                                   int64_t c0, int64_t c1, uint16_t *to) {
  for (int64_t r0 = first_row; r0 < rows; r0 += COLUMN_BLOCK)
    for (int64_t c = c0; c < c1; c++)
      for (int64_t r = r0; r < rows && r < r0 + COLUMN_BLOCK; r++)
        to[c * rows + r] = trc_round_bf16(from[r * ld + c]);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The same with AVX-512: 16 rows of a column gathered, rounded as in
 * round_avx512_bf16, stored as a row. */
AVX512_BF16 static void round_columns_avx512_bf16(const float *from, int64_t rows, int64_t ld, int64_t c0,
                                                  int64_t c1, uint16_t *to) {
  const __m512i down = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32((int)ld));
  int64_t whole = rows / COLUMN_BLOCK * COLUMN_BLOCK;
  for (int64_t r0 = 0; r0 < whole; r0 += COLUMN_BLOCK)
    for (int64_t c = c0; c < c1; c++)
      _mm256_storeu_si256((__m256i *)(to + c * rows + r0),
                          round16_avx512_bf16(_mm512_i32gather_ps(down, from + r0 * ld + c, 4)));
  round_columns_portable(from, whole, rows, ld, c0, c1, to);
}
#endif

static void round_columns(const float *from, int64_t rows, int64_t ld, int64_t c0, int64_t c1,
                          uint16_t *to) {
#if defined(__x86_64__) && defined(__GNUC__)
  /* the gather's offsets are 32-bit */
  if (__builtin_cpu_supports("avx512bf16") && ld * COLUMN_BLOCK <= INT32_MAX) {
    round_columns_avx512_bf16(from, rows, ld, c0, c1, to);
    return;
  }
#endif
  round_columns_portable(from, 0, rows, ld, c0, c1, to);
}

static void round_column_blocks(void *ctx, int64_t lo, int64_t hi) {
  const rounding *r = ctx;
  int64_t blocks = (r->cols + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
  for (int64_t t = lo; t < hi; t++) {
    int64_t i = t / blocks, c0 = t % blocks * COLUMN_BLOCK;
    int64_t c1 = c0 + COLUMN_BLOCK < r->cols ? c0 + COLUMN_BLOCK : r->cols;
    round_columns(r->src + trc_gemm_at(i, r->heads, r->stride, r->head_stride), r->rows, r->ld,
                  c0, c1, r->dst + i * r->rows * r->cols);
  }
}

/* Matrix i of operand X (stored rows x cols, leading dimension ld),
 * transposed, at dst + i*rows*cols: cols rows of `rows` values. */
static void round_matrices_transposed(const trc_gemm_job *j, const float *x, int64_t rows,
                                      int64_t cols, int64_t ld, int64_t stride,
                                      int64_t head_stride, uint16_t *dst) {
  rounding r = {x, dst, rows, cols, ld, j->heads, stride, head_stride};
  trc_parallel_for(j->batch * ((cols + COLUMN_BLOCK - 1) / COLUMN_BLOCK), round_column_blocks, &r);
}

/* ---- the parameters' bf16 copy ---- */

/* The copy is arena memory (trc_arena_alloc: huge pages, touched before
 * training): every forward and input-gradient GEMM streams its weights from
 * it, and on 4 KiB pages oneDNN's AMX kernels read a cold 4.7 MB weight a
 * third slower (GPT-2 124M's 128 x 3072 x 768 parts: 1.96 -> 1.31 ms). */
int trc_bf16_weights_attach(const float *params, uint64_t count, trc_error *err) {
  trc_bf16_weights_detach();
  const uint64_t bytes = count * sizeof(uint16_t);
  const int checked = env_switch("TRAINC_CHECK_BF16_WEIGHTS", 0);
  if (!(weights.copy = (uint16_t *)trc_arena_alloc(bytes, err)) ||
      (checked && !(weights.check = (uint16_t *)trc_arena_alloc(bytes, err)))) {
    trc_bf16_weights_detach();
    return -1;
  }
  weights.params = params, weights.count = count, weights.current = 0;
  return 0;
}

void trc_bf16_weights_detach(void) {
  trc_arena_free((char *)weights.copy);
  trc_arena_free((char *)weights.check);
  memset(&weights, 0, sizeof weights);
}

void trc_bf16_weights_changed(void) { weights.current = 0; }

uint64_t trc_bf16_weights_bytes(void) {
  return weights.copy ? weights.count * sizeof(uint16_t) : 0;
}

void trc_bf16_weights_update(uint64_t first, uint64_t count) {
  if (weights.current) round_bf16_stored(weights.params + first, weights.copy + first, (int64_t)count, true);
}

enum { ROUND_BLOCK = 1 << 16 };

static void round_weight_blocks(void *ctx, int64_t lo, int64_t hi) {
  uint16_t *to = ctx;
  for (int64_t b = lo; b < hi; b++) {
    int64_t from = b * ROUND_BLOCK, n = (int64_t)weights.count - from;
    round_to_bf16(weights.params + from, to + from, n < ROUND_BLOCK ? n : ROUND_BLOCK);
  }
}

static void round_weights(uint16_t *to) {
  trc_parallel_for(((int64_t)weights.count + ROUND_BLOCK - 1) / ROUND_BLOCK, round_weight_blocks,
                   to);
}

/* The copy made current; under TRAINC_CHECK_BF16_WEIGHTS (tests) a copy
 * that claims to be current is first compared with a fresh rounding: a
 * writer of the parameters that did not call trc_bf16_weights_changed
 * stops the trainer here instead of training on stale weights. */
static void make_weights_current(void) {
  if (weights.current && weights.check) {
    round_weights(weights.check);
    if (memcmp(weights.check, weights.copy, weights.count * sizeof(uint16_t)) != 0) {
      fprintf(stderr, "trainer: internal error: the parameters' bf16 copy is stale\n");
      trc_comm_abort(1);
    }
  }
  if (!weights.current) round_weights(weights.copy);
  weights.current = 1;
}

/* ---- the operands as the primitives read them ---- */

/* bf16 data, op()'s strides within a matrix, the distance between matrices. */
typedef struct {
  const uint16_t *data;
  int64_t stride[2], matrix_stride;
} operand16;

/* Whether the parameters' copy holds a stored rows x cols matrix at x
 * (leading dimension ld): the GEMM has one matrix and it lies in the
 * parameter region. */
static int in_weights_copy(const trc_gemm_job *j, const float *x, int64_t rows, int64_t cols,
                           int64_t ld) {
  if (!weights.copy || j->batch != 1 || x < weights.params) return 0;
  uint64_t first = (uint64_t)(x - weights.params), span = (uint64_t)((rows - 1) * ld + cols);
  return first <= weights.count && span <= weights.count - first;
}

/* The bf16 copy of that matrix, current; NULL when the copy has none. */
static const uint16_t *weights_copy_of(const trc_gemm_job *j, const float *x, int64_t rows,
                                       int64_t cols, int64_t ld) {
  if (!in_weights_copy(j, x, rows, cols, ld)) return NULL;
  make_weights_current();
  return weights.copy + (x - weights.params);
}

/* The bytes operand X (op(X) rows x cols) takes in the operand buffer:
 * none when it is given rounded (x16) or in the weights' copy. */
static size_t copy_bytes(const trc_gemm_job *j, const float *x, const uint16_t *x16,
                         int transposed, int64_t rows, int64_t cols, int64_t ld) {
  if (x16 || in_weights_copy(j, x, transposed ? cols : rows, transposed ? rows : cols, ld)) return 0;
  return padded((size_t)(j->batch * rows * cols) * sizeof(uint16_t));
}

int trc_bf16_operands_reserve(uint64_t bytes, trc_error *err) {
  trc_bf16_operands_release();
  operands.data = aligned_alloc(ALIGN, padded(bytes) ? padded(bytes) : ALIGN);
  if (!operands.data)
    return trc_fail(err, "out of memory for the bf16 GEMM operands (%llu bytes)",
                    (unsigned long long)bytes);
  memset(operands.data, 0, padded(bytes)); /* touched now, as the arena is */
  operands.cap = padded(bytes), operands.planned = 1;
  return 0;
}

void trc_bf16_operands_release(void) {
  free(operands.data);
  memset(&operands, 0, sizeof operands);
}

uint64_t trc_bf16_operands_high_water(void) { return operands.high_water; }

uint64_t trc_bf16_scratchpad_bytes(void) { return dnn.scratchpad_cap; }

/* The operand buffer, at least `bytes` long. */
static uint16_t *operand_space(size_t bytes) {
  if (bytes > operands.cap && operands.planned) {
    fprintf(stderr,
            "trainer: internal error: a bf16 GEMM needs %zu bytes of operands, the plan "
            "reserved %zu\n",
            bytes, operands.cap);
    trc_comm_abort(1);
  }
  if (bytes > operands.high_water) operands.high_water = bytes;
  operands.data = grow(operands.data, &operands.cap, bytes);
  return operands.data;
}

/* Operand X of the job: op(X) is rows x cols (the stored matrix is its
 * transpose when transposed); as given rounded (x16), from the weights'
 * copy, or rounded into scratch (packed, op() applied by the strides, or
 * made row-major when row_major). */
static operand16 operand(const trc_gemm_job *j, const float *x, const uint16_t *x16,
                         int transposed, int64_t rows, int64_t cols, int64_t ld, int64_t stride,
                         int64_t head_stride, uint16_t *scratch, int row_major) {
  int64_t stored_rows = transposed ? cols : rows, stored_cols = transposed ? rows : cols;
  const uint16_t *copy = x16 ? x16 : weights_copy_of(j, x, stored_rows, stored_cols, ld);
  if (copy) return (operand16){copy, {transposed ? 1 : ld, transposed ? ld : 1}, 0};
  if (transposed && row_major) {
    round_matrices_transposed(j, x, stored_rows, stored_cols, ld, stride, head_stride, scratch);
    return (operand16){scratch, {cols, 1}, rows * cols};
  }
  round_matrices(j, x, stored_rows, stored_cols, ld, stride, head_stride, scratch);
  return (operand16){scratch, {transposed ? 1 : stored_cols, transposed ? stored_cols : 1},
                     rows * cols};
}

/* ---- primitives ---- */

static void strided_md(dnnl_memory_desc_t *md, int64_t d0, int64_t d1, dnnl_data_type_t type,
                       const int64_t stride[2]) {
  dnnl_dims_t dims = {d0, d1}, strides = {stride[0], stride[1]};
  check(dnnl_memory_desc_init_by_strides(md, 2, dims, type, strides), "memory descriptor");
}

static void create_matmul(cached_matmul *e) {
  const part_shape *s = &e->shape;
  int64_t c_stride[2] = {s->ldc, 1};
  strided_md(&e->a_md, s->rows, s->k, dnnl_bf16, s->a_stride);
  strided_md(&e->b_md, s->k, s->cols, dnnl_bf16, s->b_stride);
  strided_md(&e->c_md, s->rows, s->cols, dnnl_f32, c_stride);
  dnnl_matmul_desc_t desc;
  check(dnnl_matmul_desc_init(&desc, &e->a_md, &e->b_md, NULL, &e->c_md), "matmul descriptor");
  dnnl_primitive_attr_t attr;
  check(dnnl_primitive_attr_create(&attr), "attributes");
  check(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "scratchpad");
  dnnl_post_ops_t post_ops = NULL;
  if (s->beta != 0) {
    check(dnnl_post_ops_create(&post_ops), "post-ops");
    check(dnnl_post_ops_append_sum(post_ops, (float)s->beta), "sum post-op");
    check(dnnl_primitive_attr_set_post_ops(attr, post_ops), "post-ops");
  }
  dnnl_primitive_desc_t pd;
  check(dnnl_primitive_desc_create(&pd, &desc, attr, dnn.engine, NULL), "matmul");
  e->scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  check(dnnl_primitive_create(&e->primitive, pd), "primitive");
  dnnl_primitive_desc_destroy(pd);
  if (post_ops) dnnl_post_ops_destroy(post_ops);
  dnnl_primitive_attr_destroy(attr);
}

static const cached_matmul *find_matmul(const part_shape *s) {
  for (int i = 0; i < dnn.cached; i++)
    if (memcmp(&dnn.cache[i].shape, s, sizeof *s) == 0) return &dnn.cache[i];
  return NULL;
}

/* ---- emulated bf16 ---- */

/* Where oneDNN has no bf16 matmul (trc_bf16_emulated), a part widens its
 * rounded op(A) and op(B) into its slot's scratch and multiplies them by
 * oneDNN's sgemm: the products of bf16 values are exact in f32, so this is
 * the bf16 GEMM up to the order of its f32 sums, and, with the parts fixed
 * by the shapes, the same bits for any thread count. */

/* The slot scratch of a part: its op(A) and op(B) in f32. */
static size_t widened_bytes(const part_shape *s) {
  return (size_t)(s->rows * s->k + s->k * s->cols) * sizeof(float);
}

/* op(X), rows x cols of bf16 at strides st, widened into `to` as stored: row
 * by row, or column by column (for sgemm's 'T') when its rows are not
 * contiguous. */
typedef struct {
  const float *data;
  char trans;
  int64_t ld;
} widened;

static widened widen_part(const uint16_t *x, const int64_t st[2], int64_t rows, int64_t cols,
                          float *to) {
  int by_columns = st[1] != 1;
  int64_t lines = by_columns ? cols : rows, len = by_columns ? rows : cols;
  for (int64_t l = 0; l < lines; l++) widen_bf16(x + l * st[by_columns], to + l * len, len);
  return (widened){to, by_columns ? 'T' : 'N', len};
}

static void run_part_emulated(const part_shape *s, const uint16_t *a, const uint16_t *b, float *c,
                              int64_t slot) {
  float *scratch = (float *)(dnn.scratchpad + slot * dnn.slot_bytes);
  widened wa = widen_part(a, s->a_stride, s->rows, s->k, scratch);
  widened wb = widen_part(b, s->b_stride, s->k, s->cols, scratch + s->rows * s->k);
  trc_sgemm(wa.trans, wb.trans, s->rows, s->cols, s->k, 1.0f, wa.data, wa.ld, wb.data, wb.ld,
            (float)s->beta, c, s->ldc);
}

/* Called on one thread, before any part runs: the cache does not move
 * while the parts read it. */
static const cached_matmul *get_matmul(const part_shape *s) {
  const cached_matmul *found = find_matmul(s);
  if (found) return found;
  cached_matmul *e = trc_cache_append((void **)&dnn.cache, &dnn.cached, &dnn.cache_cap, sizeof *e);
  if (!e) check(dnnl_out_of_memory, "primitive cache");
  e->shape = *s;
  size_t need = widened_bytes(s);
  if (!dnn.emulated) {
    create_matmul(e);
    need = dnnl_memory_desc_get_size(&e->scratch_md);
  }
  need = padded(need);
  if (need > dnn.slot_bytes) dnn.slot_bytes = need;
  return e;
}

/* ---- the parts ---- */

typedef struct {
  const trc_gemm_job *j;
  operand16 a, b;
  int64_t tasks, slots;
} bf16_run;

/* Part `part` of each matrix: its primitive's shape; *from, its first row
 * (split_rows) or column of C. */
static part_shape part_of(const bf16_run *r, int64_t part, int64_t *from) {
  const trc_gemm_job *j = r->j;
  int64_t dim = j->split_rows ? j->m : j->n;
  int64_t lo = dim * part / j->parts, hi = dim * (part + 1) / j->parts;
  part_shape s = {.rows = j->split_rows ? hi - lo : j->m,
                  .cols = j->split_rows ? j->n : hi - lo,
                  .k = j->k,
                  .a_stride = {r->a.stride[0], r->a.stride[1]},
                  .b_stride = {r->b.stride[0], r->b.stride[1]},
                  .ldc = j->ldc,
                  .beta = j->beta};
  *from = lo;
  return s;
}

static dnnl_memory_t memory(const dnnl_memory_desc_t *md, void *data) {
  dnnl_memory_t mem;
  check(dnnl_memory_create(&mem, md, dnn.engine, data), "memory");
  return mem;
}

static void run_part(const bf16_run *r, int64_t task, int64_t slot) {
  const trc_gemm_job *j = r->j;
  int64_t i = task / j->parts, from;
  part_shape s = part_of(r, task % j->parts, &from);
  const cached_matmul *e = find_matmul(&s);
  /* oneDNN takes a non-const handle; it only reads A and B */
  uint16_t *a = (uint16_t *)r->a.data + i * r->a.matrix_stride;
  uint16_t *b = (uint16_t *)r->b.data + i * r->b.matrix_stride;
  float *c = j->c + trc_gemm_at(i, j->heads, j->stride_c, j->head_stride_c);
  if (j->split_rows) /* rows of op(A) */
    a += from * s.a_stride[0], c += from * j->ldc;
  else /* columns of op(B) */
    b += from * s.b_stride[1], c += from;
  if (dnn.emulated) {
    run_part_emulated(&s, a, b, c, slot);
    return;
  }
  dnnl_exec_arg_t args[4] = {
      {DNNL_ARG_SRC, memory(&e->a_md, a)},
      {DNNL_ARG_WEIGHTS, memory(&e->b_md, b)},
      {DNNL_ARG_DST, memory(&e->c_md, c)},
      {DNNL_ARG_SCRATCHPAD, memory(&e->scratch_md, dnn.scratchpad + slot * dnn.slot_bytes)},
  };
  check(dnnl_primitive_execute(e->primitive, dnn.streams[slot], 4, args), "execute");
  check(dnnl_stream_wait(dnn.streams[slot]), "stream");
  for (int m = 0; m < 4; m++) dnnl_memory_destroy(args[m].memory);
}

/* Slot s runs tasks [tasks*s/slots, tasks*(s+1)/slots) with scratchpad s. */
static void run_slots(void *ctx, int64_t lo, int64_t hi) {
  const bf16_run *r = ctx;
  for (int64_t slot = lo; slot < hi; slot++)
    for (int64_t t = r->tasks * slot / r->slots; t < r->tasks * (slot + 1) / r->slots; t++)
      run_part(r, t, slot);
}

/* oneDNN 2.6 runs a transposed A on its jit gemm, a row-major one on its
 * brgemm. With AMX, brgemm is far the faster (~550 GFLOP/s a core against
 * ~350 on an Intel Xeon): transposing A while rounding it costs ~1 ns an
 * element, which that repays (2n flops an element of A) from n of about
 * 500 on (measured on gpt, n = 256, a loss, and gpt124m, n = 768, a gain).
 * Without AMX (AVX512_BF16 alone: AMD Zen 4) the jit gemm on the
 * transposed A ran every weight-gradient shape of the examples as fast as
 * brgemm after the transposition or faster, by up to 30%
 * (bench/RESULTS.md): A is never transposed there. */
enum { TRANSPOSE_A_FROM_N = 512 };

static int transposes_a(int64_t n) { return dnn.transpose_a && n >= TRANSPOSE_A_FROM_N; }

static int has_amx(void) {
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa(); /* a bit mask: AMX's bits all set */
  return (isa & dnnl_cpu_isa_avx512_core_amx) == dnnl_cpu_isa_avx512_core_amx;
}

/* Whether oneDNN makes a bf16 matmul on this CPU: 2.6 has bf16 kernels
 * from AVX512_CORE on, none (dnnl_unimplemented) on an AVX2 CPU. */
static int has_bf16_matmul(void) {
  dnnl_memory_desc_t a, c;
  dnnl_dims_t dims = {16, 16};
  check(dnnl_memory_desc_init_by_tag(&a, 2, dims, dnnl_bf16, dnnl_ab), "memory descriptor");
  check(dnnl_memory_desc_init_by_tag(&c, 2, dims, dnnl_f32, dnnl_ab), "memory descriptor");
  dnnl_matmul_desc_t desc;
  check(dnnl_matmul_desc_init(&desc, &a, &a, NULL, &c), "matmul descriptor");
  dnnl_primitive_desc_t pd;
  dnnl_status_t status = dnnl_primitive_desc_create(&pd, &desc, NULL, dnn.engine, NULL);
  if (status == dnnl_unimplemented) return 0;
  check(status, "matmul");
  dnnl_primitive_desc_destroy(pd);
  return 1;
}

static void prepare(int64_t slots) {
  if (!dnn.engine) {
    check(dnnl_engine_create(&dnn.engine, dnnl_cpu, 0), "engine");
    /* TRAINC_BF16_EMULATE=1 emulates on any CPU (tests: both paths) */
    dnn.emulated = env_switch("TRAINC_BF16_EMULATE", !has_bf16_matmul());
    dnn.amx = !dnn.emulated && has_amx();
    /* TRAINC_BF16_TRANSPOSE_A=1 or 0 decides instead (tests: both roundings
     * of A on any machine) */
    dnn.transpose_a = env_switch("TRAINC_BF16_TRANSPOSE_A", dnn.amx);
  }
  for (int64_t s = 0; s < slots; s++)
    if (!dnn.streams[s])
      check(dnnl_stream_create(&dnn.streams[s], dnn.engine, dnnl_stream_default_flags), "stream");
}

int trc_gemm_bf16_transposes_a(int64_t n) {
  prepare(0);
  return transposes_a(n);
}

int trc_gemm_bf16_on_amx(void) {
  prepare(0);
  return dnn.amx;
}

int trc_bf16_emulated(void) {
  prepare(0);
  return dnn.emulated;
}

static void prepare_parts(const bf16_run *r) {
  for (int64_t part = 0, from; part < r->j->parts; part++) {
    part_shape s = part_of(r, part, &from);
    get_matmul(&s);
  }
  dnn.scratchpad =
      grow(dnn.scratchpad, &dnn.scratchpad_cap, (size_t)r->slots * dnn.slot_bytes + 1);
}

void trc_gemm_bf16(const trc_gemm_job *j) {
  int64_t tasks = j->batch * j->parts, slots = trc_threads();
  if (slots > tasks) slots = tasks;
  prepare(slots);
  size_t a_bytes = copy_bytes(j, j->a, j->a16, j->ta, j->m, j->k, j->lda);
  uint16_t *a16 = operand_space(a_bytes + copy_bytes(j, j->b, j->b16, j->tb, j->k, j->n, j->ldb));
  uint16_t *b16 = a16 + a_bytes / sizeof(uint16_t);
  bf16_run r = {j,
                operand(j, j->a, j->a16, j->ta, j->m, j->k, j->lda, j->stride_a, j->head_stride_a,
                        a16, transposes_a(j->n)),
                operand(j, j->b, j->b16, j->tb, j->k, j->n, j->ldb, j->stride_b, j->head_stride_b,
                        b16, 0),
                tasks, slots};
  prepare_parts(&r);
  trc_parallel_for(slots, run_slots, &r);
}

/* ---- activations stored in bf16 (trc_bf16_pack, trc_bf16_unpack) ---- */

/* Blocks of elements per parallel iteration: whole cache lines of both. */
enum { PACK_BLOCK = 1 << 14 };

typedef struct {
  int64_t n;
  const void *from;
  void *to;
} packing;

static void pack_blocks(void *ctx, int64_t lo, int64_t hi) {
  const packing *p = ctx;
  int64_t start = lo * PACK_BLOCK, end = hi * PACK_BLOCK < p->n ? hi * PACK_BLOCK : p->n;
  round_to_bf16((const float *)p->from + start, (uint16_t *)p->to + start, end - start);
}

static void unpack_blocks(void *ctx, int64_t lo, int64_t hi) {
  const packing *p = ctx;
  int64_t start = lo * PACK_BLOCK, end = hi * PACK_BLOCK < p->n ? hi * PACK_BLOCK : p->n;
  widen_bf16((const uint16_t *)p->from + start, (float *)p->to + start, end - start);
}

void trc_bf16_pack(int64_t n, const float *from, uint16_t *to) {
  packing p = {n, from, to};
  trc_parallel_for((n + PACK_BLOCK - 1) / PACK_BLOCK, pack_blocks, &p);
}

void trc_bf16_unpack(int64_t n, const uint16_t *from, float *to) {
  packing p = {n, from, to};
  trc_parallel_for((n + PACK_BLOCK - 1) / PACK_BLOCK, unpack_blocks, &p);
}
