/* test_parallel.c — the trainer's threads (trainc.h): trc_parallel_for
 * runs every index exactly once, in one contiguous block per thread, on
 * min(threads, n) threads; and what the runtime sums on them does not
 * depend on how many: the gradient norm of clipping is bitwise the same on
 * 1, 2 and 3 threads, and near a long double reference. Every thread of the
 * pool, the caller included, flushes subnormal floats to zero. */
#include "test_util.h"

#include <stdlib.h>

#include <pthread.h>

enum { MAX_N = 1000 };

typedef struct {
  int visits[MAX_N];
  int64_t block_of[MAX_N]; /* lo of the block that ran the index */
  pthread_t thread_of[MAX_N];
} record;

static void visit(void *ctx, int64_t lo, int64_t hi) {
  record *r = ctx;
  for (int64_t i = lo; i < hi; i++) {
    r->visits[i]++;
    r->block_of[i] = lo;
    r->thread_of[i] = pthread_self();
  }
}

static void check_partition(int threads, int64_t n) {
  trc_set_threads(threads);
  record *r = calloc(1, sizeof *r);
  trc_parallel_for(n, visit, r);
  int blocks = 0;
  for (int64_t i = 0; i < n; i++) {
    CHECK(r->visits[i] == 1);
    if (i == 0 || r->block_of[i] != r->block_of[i - 1]) {
      blocks++;
      CHECK(r->block_of[i] == i); /* a block starts where the last one ended */
      for (int64_t j = 0; j < i; j++) /* each block on a thread of its own */
        CHECK(!pthread_equal(r->thread_of[i], r->thread_of[j]));
    }
  }
  CHECK(trc_threads() == threads);
  int64_t want = threads < n ? threads : n;
  CHECK(n == 0 ? blocks == 0 : blocks == want);
  free(r);
}

/* The gradient norm clipping uses, on `threads` threads. */
static double clip_norm(int threads, const float *g, uint64_t n) {
  trc_set_threads(threads);
  return trc_grad_norm(g, n);
}

static void check_clip(void) {
  uint64_t n = 3000011; /* more blocks than threads, a ragged last block */
  float *g = malloc(n * sizeof *g);
  long double ref = 0;
  for (uint64_t i = 0; i < n; i++) {
    g[i] = (float)(trc_rng_normal(7, i) * 1e-3);
    ref += (long double)g[i] * g[i];
  }
  double one = clip_norm(1, g, n);
  for (int threads = 2; threads <= 3; threads++) {
    double many = clip_norm(threads, g, n);
    CHECK(memcmp(&one, &many, sizeof one) == 0);
  }
  CHECK_NEAR(one, sqrtl(ref), 1e-12 * sqrtl(ref));
  free(g);
}

/* What each block's thread makes of a product below 2^-126 (FTZ) and of a
 * subnormal operand times 2^30 (DAZ): both must be 0. volatile: computed here, at run
 * time, not folded by the compiler. */
typedef struct {
  float product[MAX_N], operand[MAX_N];
} subnormals;

static void make_subnormals(void *ctx, int64_t lo, int64_t hi) {
  subnormals *s = ctx;
  volatile float tiny = 1e-20f, subnormal = 1e-40f, scale = 0x1p30f;
  for (int64_t i = lo; i < hi; i++) {
    s->product[i] = tiny * tiny;
    s->operand[i] = subnormal * scale; /* normal, were the operand read */
  }
}

static uint32_t bits_of(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static void check_subnormals_flushed(int threads) {
  trc_set_threads(threads);
  subnormals *s = calloc(1, sizeof *s);
  for (int i = 0; i < MAX_N; i++) s->product[i] = s->operand[i] = -1.0f;
  trc_parallel_for(threads, make_subnormals, s);
  for (int i = 0; i < threads; i++) /* bits: under DAZ a subnormal compares equal to 0 */
    CHECK(bits_of(s->product[i]) == 0 && bits_of(s->operand[i]) == 0);
  free(s);
}

int main(void) {
  int64_t sizes[] = {0, 1, 2, 3, 7, MAX_N};
  for (int threads = 1; threads <= 4; threads++)
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
      check_partition(threads, sizes[i]);
  check_clip();
#if defined(__x86_64__) || defined(__i386__) /* the flush is MXCSR's (parallel.c) */
  for (int threads = 1; threads <= 3; threads++) check_subnormals_flushed(threads);
#endif
  return test_failures != 0;
}
