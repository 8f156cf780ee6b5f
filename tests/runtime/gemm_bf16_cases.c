/* gemm_bf16_cases.c — runs trc_gemm on a few shapes (transposes, padded
 * leading dimensions, beta, a batch, broadcast B, parts of two sizes) in fp32
 * and in bf16 (a transposed A read in place, or transposed while rounded:
 * the test runs under TRAINC_BF16_TRANSPOSE_A=0 and =1), and writes
 * operands and results as .npy files into OUTDIR for gemm_bf16_reference.py,
 * which checks them against NumPy. Also checks here that the bf16 results
 * are bitwise the same on 1 and 3 threads.
 * usage: gemm_bf16_cases OUTDIR   (prints one line per case: its file stem
 * and parameters) */
#include "test_util.h"

#include <stdint.h>
#include <stdlib.h>

typedef struct {
  int64_t batch;
  int ta, tb;
  int64_t m, n, k;
  float beta;
  int pad;          /* added to every leading dimension */
  int broadcast_b;  /* stride_b 0: one B for every matrix */
} gemm_case;

static const gemm_case cases[] = {
    {1, 0, 0, 201, 70, 50, 0.0f, 0, 0},  /* rows split in 4 parts of 50 and 51 */
    {1, 1, 0, 30, 150, 40, 1.0f, 3, 0},  /* columns split, A transposed, padded */
    {1, 0, 1, 64, 64, 784, 0.5f, 0, 0},  /* long k, B transposed */
    {10, 1, 1, 12, 9, 17, 0.0f, 2, 0},   /* a batch: one part per matrix */
    {3, 0, 0, 100, 20, 33, 1.0f, 1, 1},  /* one B for the batch */
    {1, 1, 0, 40, 520, 30, 1.0f, 2, 0},  /* A transposed, n >= 512: with AMX (or
                                            TRAINC_BF16_TRANSPOSE_A=1) A is transposed
                                            while rounded */
    {1, 1, 0, 70, 530, 50, 0.0f, 3, 0},  /* the same over blocks of 16 rows (3 and a
                                            tail of A's 50 stored rows) and 16 columns
                                            (4 and one of 6 of its 70), padded */
};

typedef struct {
  int64_t rows, cols, ld, count; /* stored rows x cols, leading dimension ld, `count` matrices */
  float *data;
} stored;

static stored make_stored(int64_t rows, int64_t cols, int pad, int64_t count, uint64_t seed) {
  stored s = {rows, cols, cols + pad, count, NULL};
  size_t n = (size_t)(count * rows * s.ld);
  s.data = malloc(n * sizeof(float));
  uint64_t key = trc_rng_key(seed, 5, 7);
  for (size_t i = 0; i < n; i++) s.data[i] = (float)(trc_rng_normal(key, i) * (1 + i % 3));
  return s;
}

static void write_stored(const char *dir, const char *stem, const char *what, const stored *s) {
  char name[256], path[1024];
  snprintf(name, sizeof name, "%s_%s.npy", stem, what);
  test_path(path, sizeof path, dir, name);
  int64_t dims[3] = {s->count, s->rows, s->ld};
  CHECK(test_write_npy(path, "<f4", 3, dims, s->data,
                       (size_t)(s->count * s->rows * s->ld) * sizeof(float)) == 0);
}

/* Values halfway between two bf16 numbers: round to nearest even sends
 * 1 + 2^-8 down to 1 and 1 + 3*2^-8 up to 1 + 2^-6 (truncation or rounding
 * half up would not). */
static void plant_ties(stored *a) {
  static const float ties[] = {1.00390625f, 1.01171875f, -1.00390625f, -1.01171875f};
  for (int i = 0; i < 4 && i < a->cols; i++) a->data[i] = ties[i];
}

static void run(const gemm_case *g, const stored *a, const stored *b, const stored *c0, float *c,
                trc_precision p) {
  memcpy(c, c0->data, (size_t)(c0->count * c0->rows * c0->ld) * sizeof(float));
  trc_set_precision(p);
  trc_gemm(g->batch, 1, g->ta, g->tb, g->m, g->n, g->k, a->data, a->ld, a->rows * a->ld, 0,
           b->data, b->ld, g->broadcast_b ? 0 : b->rows * b->ld, 0, g->beta, c, c0->ld,
           c0->rows * c0->ld, 0);
}

static void run_case(const char *dir, int index, const gemm_case *g) {
  char stem[32];
  snprintf(stem, sizeof stem, "case%d", index);
  stored a = make_stored(g->ta ? g->k : g->m, g->ta ? g->m : g->k, g->pad, g->batch, 1 + index);
  stored b = make_stored(g->tb ? g->n : g->k, g->tb ? g->k : g->n, g->pad,
                         g->broadcast_b ? 1 : g->batch, 100 + index);
  stored c0 = make_stored(g->m, g->n, g->pad, g->batch, 200 + index);
  plant_ties(&a);
  size_t c_bytes = (size_t)(g->batch * g->m * c0.ld) * sizeof(float);
  stored fp32 = c0, bf16 = c0, bf16_3 = c0;
  fp32.data = malloc(c_bytes), bf16.data = malloc(c_bytes), bf16_3.data = malloc(c_bytes);
  trc_set_threads(1);
  run(g, &a, &b, &c0, fp32.data, TRC_FP32);
  run(g, &a, &b, &c0, bf16.data, TRC_BF16);
  trc_set_threads(3);
  run(g, &a, &b, &c0, bf16_3.data, TRC_BF16);
  if (memcmp(bf16.data, bf16_3.data, c_bytes) != 0) {
    fprintf(stderr, "%s: bf16 results differ between 1 and 3 threads\n", stem);
    test_failures++;
  }
  write_stored(dir, stem, "a", &a);
  write_stored(dir, stem, "b", &b);
  write_stored(dir, stem, "c0", &c0);
  write_stored(dir, stem, "fp32", &fp32);
  write_stored(dir, stem, "bf16", &bf16);
  printf("%s %lld %d %d %lld %lld %lld %.9g\n", stem, (long long)g->batch, g->ta, g->tb,
         (long long)g->m, (long long)g->n, (long long)g->k, (double)g->beta);
  free(a.data), free(b.data), free(c0.data), free(fp32.data), free(bf16.data), free(bf16_3.data);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
    return 2;
  }
  for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) run_case(argv[1], i, &cases[i]);
  trc_set_threads(1);
  return test_failures ? 1 : 0;
}
