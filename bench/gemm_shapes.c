/* gemm_shapes.c — one GEMM shape timed alone on one thread, four ways:
 *   trainc   trc_gemm as a trainer runs it (its parts, on the machine's
 *            sgemm: gemm.c; under bf16 the rounding of the operands that
 *            are not parameters);
 *   sgemm    oneDNN's dnnl_sgemm on the whole matrix (fp32);
 *   openblas OpenBLAS's cblas_sgemm on the whole matrix (fp32);
 *   matmul   oneDNN's bf16 matmul primitive on the whole matrix, weights
 *            reordered once into the layout it prefers (bf16; operands
 *            already bf16: the library's best case).
 * Each is the best of REPS runs, in GFLOP/s (2mnk flops), operands in the
 * trainer's layout: C[m x n] = op(A) op(B), op = transpose when TA / TB.
 * WEIGHT_B=1 says B is a parameter (under bf16 the trainer reads it from its
 * bf16 copy, made here once as the optimizer would).
 * usage: gemm_shapes M N K TA TB WEIGHT_B [REPS]   (bench/gemm_shapes.sh) */
#include "trainc_rt.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void ok(dnnl_status_t s, const char *what) {
  if (s == dnnl_success) return;
  fprintf(stderr, "gemm_shapes: oneDNN %s failed (%d)\n", what, (int)s);
  exit(1);
}

typedef struct {
  int64_t m, n, k;
  int ta, tb, weight_b, reps;
  float *a, *b, *c;
} shape;

static float *filled(int64_t count, float value) {
  float *x = aligned_alloc(64, ((size_t)count * sizeof(float) + 63) / 64 * 64);
  for (int64_t i = 0; i < count; i++) x[i] = value * (float)(1 + i % 7);
  return x;
}

static double gflops(const shape *s, double seconds) {
  return 2.0 * (double)s->m * (double)s->n * (double)s->k / seconds / 1e9;
}

/* Best of s->reps calls of fn. */
static double best_seconds(void (*fn)(const shape *, void *), const shape *s, void *ctx) {
  double best = 1e30;
  for (int r = 0; r < s->reps; r++) {
    double t0 = now();
    fn(s, ctx);
    double t = now() - t0;
    if (t < best) best = t;
  }
  return best;
}

static void trainc_gemm(const shape *s, void *ctx) {
  (void)ctx;
  int64_t lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
  trc_gemm(1, 1, s->ta, s->tb, s->m, s->n, s->k, s->a, lda, 0, 0, s->b, ldb, 0, 0, 0.0f, s->c,
           s->n, 0, 0);
}

static void onednn_sgemm(const shape *s, void *ctx) {
  (void)ctx;
  int64_t lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
  ok(dnnl_sgemm(s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->m, s->n, s->k, 1.0f, s->a, lda, s->b,
                ldb, 0.0f, s->c, s->n),
     "sgemm");
}

static void openblas_sgemm(const shape *s, void *ctx) {
  (void)ctx;
  int lda = (int)(s->ta ? s->m : s->k), ldb = (int)(s->tb ? s->k : s->n);
  cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans,
              (int)s->m, (int)s->n, (int)s->k, 1.0f, s->a, lda, s->b, ldb, 0.0f, s->c, (int)s->n);
}

/* ---- the bf16 matmul primitive on the whole matrix ---- */

typedef struct {
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  dnnl_primitive_t matmul;
  dnnl_memory_t a, b, c;
} bf16_matmul;

static void plain_md(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, int transposed,
                     dnnl_data_type_t type) {
  dnnl_dims_t dims = {rows, cols};
  dnnl_dims_t strides = {transposed ? 1 : cols, transposed ? rows : 1};
  ok(dnnl_memory_desc_init_by_strides(md, 2, dims, type, strides), "memory descriptor");
}

static dnnl_memory_t bf16_memory(bf16_matmul *x, const dnnl_memory_desc_t *md, int64_t count) {
  dnnl_memory_t mem;
  ok(dnnl_memory_create(&mem, md, x->engine, DNNL_MEMORY_ALLOCATE), "memory");
  void *data;
  ok(dnnl_memory_get_data_handle(mem, &data), "data handle");
  memset(data, 0, dnnl_memory_desc_get_size(md));
  uint16_t *h = data;
  for (int64_t i = 0; i < count && md->format_kind == dnnl_blocked; i++) h[i] = 0x3f80; /* 1.0 */
  return mem;
}

static void bf16_matmul_init(bf16_matmul *x, const shape *s) {
  ok(dnnl_engine_create(&x->engine, dnnl_cpu, 0), "engine");
  ok(dnnl_stream_create(&x->stream, x->engine, dnnl_stream_default_flags), "stream");
  dnnl_memory_desc_t a, b_any, c;
  plain_md(&a, s->m, s->k, s->ta, dnnl_bf16);
  dnnl_dims_t bdims = {s->k, s->n};
  ok(dnnl_memory_desc_init_by_tag(&b_any, 2, bdims, dnnl_bf16, dnnl_format_tag_any), "weights");
  plain_md(&c, s->m, s->n, 0, dnnl_f32);
  dnnl_matmul_desc_t desc;
  ok(dnnl_matmul_desc_init(&desc, &a, &b_any, NULL, &c), "matmul descriptor");
  dnnl_primitive_desc_t pd;
  ok(dnnl_primitive_desc_create(&pd, &desc, NULL, x->engine, NULL), "matmul");
  ok(dnnl_primitive_create(&x->matmul, pd), "primitive");
  x->a = bf16_memory(x, &a, s->m * s->k);
  x->b = bf16_memory(x, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), 0);
  x->c = bf16_memory(x, &c, 0);
  dnnl_primitive_desc_destroy(pd);
}

static void onednn_bf16_matmul(const shape *s, void *ctx) {
  (void)s;
  bf16_matmul *x = ctx;
  dnnl_exec_arg_t args[3] = {
      {DNNL_ARG_SRC, x->a}, {DNNL_ARG_WEIGHTS, x->b}, {DNNL_ARG_DST, x->c}};
  ok(dnnl_primitive_execute(x->matmul, x->stream, 3, args), "execute");
  ok(dnnl_stream_wait(x->stream), "wait");
}

int main(int argc, char **argv) {
  if (argc < 7) {
    fprintf(stderr, "usage: gemm_shapes M N K TA TB WEIGHT_B [REPS]\n");
    return 2;
  }
  shape s = {atoll(argv[1]), atoll(argv[2]), atoll(argv[3]), atoi(argv[4]), atoi(argv[5]),
             atoi(argv[6]), argc > 7 ? atoi(argv[7]) : 7, NULL, NULL, NULL};
  s.a = filled(s.m * s.k, 0.01f), s.b = filled(s.k * s.n, 0.02f), s.c = filled(s.m * s.n, 0);
  trc_set_threads(1);
  trc_error err = {0};
  printf("%6lld x %6lld x %6lld ta %d tb %d:", (long long)s.m, (long long)s.n, (long long)s.k,
         s.ta, s.tb);
  trc_set_precision(TRC_FP32);
  printf(" fp32 trainc %6.1f sgemm %6.1f openblas %6.1f |",
         gflops(&s, best_seconds(trainc_gemm, &s, NULL)),
         gflops(&s, best_seconds(onednn_sgemm, &s, NULL)),
         gflops(&s, best_seconds(openblas_sgemm, &s, NULL)));
  trc_set_precision(TRC_BF16);
  if (s.weight_b && trc_bf16_weights_attach(s.b, (uint64_t)(s.k * s.n), &err)) {
    fprintf(stderr, "gemm_shapes: %s\n", err.msg);
    return 1;
  }
  printf(" bf16%s trainc %6.1f", trc_bf16_emulated() ? " (emulated)" : "",
         gflops(&s, best_seconds(trainc_gemm, &s, NULL)));
  if (trc_bf16_emulated()) { /* oneDNN has no bf16 matmul on this CPU */
    printf(" matmul      - GFLOP/s (one thread)\n");
  } else {
    bf16_matmul x;
    bf16_matmul_init(&x, &s);
    printf(" matmul %6.1f GFLOP/s (one thread)\n",
           gflops(&s, best_seconds(onednn_bf16_matmul, &s, &x)));
  }
  trc_bf16_weights_detach();
  return 0;
}
