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
 * Primitives are cached per part shape (at most two shapes per GEMM);
 * scratch buffers grow to the largest GEMM once and are kept. */
#include "rt_kernels.h"

#include <oneapi/dnnl/dnnl.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
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
  uint16_t *a16, *b16;
  size_t a16_cap, b16_cap;
  char *scratchpad; /* one oneDNN scratchpad per slot */
  size_t scratchpad_cap, slot_bytes;
} dnn;

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

static void *grow(void *buf, size_t *cap, size_t bytes) {
  bytes = (bytes + ALIGN - 1) / ALIGN * ALIGN;
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

/* Round to nearest even; a NaN stays a NaN (quieted). */
static inline uint16_t bf16_bits(uint32_t u) {
  uint32_t rounded = (u + 0x7fffu + (u >> 16 & 1)) >> 16, quiet_nan = u >> 16 | 0x40;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

static void round_portable(const float *restrict from, uint16_t *restrict to, int64_t n) {
  const uint32_t *bits = (const uint32_t *)(const void *)from;
  for (int64_t i = 0; i < n; i++) to[i] = bf16_bits(bits[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* AVX512_BF16's vcvtneps2bf16 rounds 16 floats to nearest even in one
 * instruction and quiets NaNs as bf16_bits does, but flushes subnormal
 * inputs to zero: those lanes (rare: below 1.2e-38) are redone by
 * bf16_bits, so the result is bitwise the portable one's. Rounding was 38%
 * of a bf16 gpt step when it was scalar, 17% vectorized by the compiler. */
__attribute__((target("avx512f,avx512bf16,avx512vl"))) static void
round_avx512_bf16(const float *restrict from, uint16_t *restrict to, int64_t n) {
  const uint32_t *bits = (const uint32_t *)(const void *)from;
  const __m512i exponent = _mm512_set1_epi32(0x7f800000), mantissa = _mm512_set1_epi32(0x7fffff);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 x = _mm512_loadu_ps(from + i);
    __m256bh y = _mm512_cvtneps_pbh(x);
    memcpy(to + i, &y, sizeof y);
    __m512i u = _mm512_castps_si512(x);
    __mmask16 subnormal =
        _mm512_testn_epi32_mask(u, exponent) & _mm512_test_epi32_mask(u, mantissa);
    for (int lane = 0; subnormal; lane++, subnormal >>= 1)
      if (subnormal & 1) to[i + lane] = bf16_bits(bits[i + lane]);
  }
  round_portable(from + i, to + i, n - i);
}
#endif

static void round_to_bf16(const float *restrict from, uint16_t *restrict to, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512bf16")) {
    round_avx512_bf16(from, to, n);
    return;
  }
#endif
  round_portable(from, to, n);
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

/* Called on one thread, before any part runs: the cache does not move
 * while the parts read it. */
static const cached_matmul *get_matmul(const part_shape *s) {
  const cached_matmul *found = find_matmul(s);
  if (found) return found;
  cached_matmul *e = trc_cache_append((void **)&dnn.cache, &dnn.cached, &dnn.cache_cap, sizeof *e);
  if (!e) check(dnnl_out_of_memory, "primitive cache");
  e->shape = *s;
  create_matmul(e);
  size_t need = dnnl_memory_desc_get_size(&e->scratch_md);
  need = (need + ALIGN - 1) / ALIGN * ALIGN;
  if (need > dnn.slot_bytes) dnn.slot_bytes = need;
  return e;
}

/* ---- the parts ---- */

typedef struct {
  const trc_gemm_job *j;
  int64_t tasks, slots;
} bf16_run;

/* Part `part` of matrix i: its primitive's shape and its operands. */
static part_shape part_of(const trc_gemm_job *j, int64_t part, int64_t *from) {
  int64_t dim = j->split_rows ? j->m : j->n;
  int64_t lo = dim * part / j->parts, hi = dim * (part + 1) / j->parts;
  part_shape s = {.rows = j->split_rows ? hi - lo : j->m,
                  .cols = j->split_rows ? j->n : hi - lo,
                  .k = j->k,
                  .a_stride = {j->ta ? 1 : j->k, j->ta ? j->m : 1},
                  .b_stride = {j->tb ? 1 : j->n, j->tb ? j->k : 1},
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

static void run_part(const trc_gemm_job *j, int64_t task, int64_t slot) {
  int64_t i = task / j->parts, from;
  part_shape s = part_of(j, task % j->parts, &from);
  const cached_matmul *e = find_matmul(&s);
  uint16_t *a = dnn.a16 + i * j->m * j->k, *b = dnn.b16 + i * j->k * j->n;
  float *c = j->c + trc_gemm_at(i, j->heads, j->stride_c, j->head_stride_c);
  if (j->split_rows) /* rows of op(A) */
    a += from * s.a_stride[0], c += from * j->ldc;
  else /* columns of op(B) */
    b += from * s.b_stride[1], c += from;
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
      run_part(r->j, t, slot);
}

static void prepare(const trc_gemm_job *j, int64_t slots) {
  if (!dnn.engine) check(dnnl_engine_create(&dnn.engine, dnnl_cpu, 0), "engine");
  for (int64_t s = 0; s < slots; s++)
    if (!dnn.streams[s])
      check(dnnl_stream_create(&dnn.streams[s], dnn.engine, dnnl_stream_default_flags), "stream");
  for (int64_t part = 0, from; part < j->parts; part++) {
    part_shape s = part_of(j, part, &from);
    get_matmul(&s);
  }
  dnn.a16 = grow(dnn.a16, &dnn.a16_cap, (size_t)(j->batch * j->m * j->k) * sizeof(uint16_t));
  dnn.b16 = grow(dnn.b16, &dnn.b16_cap, (size_t)(j->batch * j->k * j->n) * sizeof(uint16_t));
  dnn.scratchpad = grow(dnn.scratchpad, &dnn.scratchpad_cap, (size_t)slots * dnn.slot_bytes + 1);
}

void trc_gemm_bf16(const trc_gemm_job *j) {
  int64_t tasks = j->batch * j->parts, slots = trc_threads();
  if (slots > tasks) slots = tasks;
  prepare(j, slots);
  /* the stored matrices, op() applied by the primitives' strides */
  round_matrices(j, j->a, j->ta ? j->k : j->m, j->ta ? j->m : j->k, j->lda, j->stride_a,
                 j->head_stride_a, dnn.a16);
  round_matrices(j, j->b, j->tb ? j->n : j->k, j->tb ? j->k : j->n, j->ldb, j->stride_b,
                 j->head_stride_b, dnn.b16);
  bf16_run r = {j, tasks, slots};
  trc_parallel_for(slots, run_slots, &r);
}
