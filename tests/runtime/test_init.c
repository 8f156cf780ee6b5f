/* test_init.c — parameter init statistics and determinism, the counter-based
 * generator, and the per-epoch shuffle. */
#include "test_util.h"

#include <stdlib.h>

#define BIG 200000

static void moments(const float *x, int n, double *mean, double *std, double *lo, double *hi) {
  double s = 0, s2 = 0;
  *lo = INFINITY, *hi = -INFINITY;
  for (int i = 0; i < n; i++) {
    s += x[i];
    s2 += (double)x[i] * x[i];
    *lo = fmin(*lo, x[i]);
    *hi = fmax(*hi, x[i]);
  }
  *mean = s / n;
  *std = sqrt(s2 / n - *mean * *mean);
}

static float *init(trc_init_kind kind, float a, float b, int64_t fan_in, int64_t fan_out,
                   uint64_t seed, int index) {
  trc_param p = {"p", 1, {BIG}, 0, BIG, kind, a, b, fan_in, fan_out, 1};
  float *x = malloc(BIG * sizeof(float));
  trc_init_param(&p, index, seed, x);
  return x;
}

/* Standard errors at n = 2e5: mean ~ std/450, std ~ std/630; tolerances are
 * about 5 of them. */
static void test_distributions(void) {
  double mean, std, lo, hi;
  float *x = init(TRC_INIT_NORMAL, 0.5f, 2.0f, 0, 0, 1, 0);
  moments(x, BIG, &mean, &std, &lo, &hi);
  CHECK_NEAR(mean, 0.5, 0.025);
  CHECK_NEAR(std, 2.0, 0.02);
  free(x);
  x = init(TRC_INIT_UNIFORM, -1.0f, 3.0f, 0, 0, 1, 0);
  moments(x, BIG, &mean, &std, &lo, &hi);
  CHECK(lo >= -1.0 && hi < 3.0 && lo < -0.99 && hi > 2.99);
  CHECK_NEAR(mean, 1.0, 0.015);
  CHECK_NEAR(std, 4.0 / sqrt(12.0), 0.01);
  free(x);
  double bound = sqrt(6.0 / 400.0);
  x = init(TRC_INIT_XAVIER, 1.0f, 0.0f, 300, 100, 2, 0);
  moments(x, BIG, &mean, &std, &lo, &hi);
  CHECK(lo >= -bound && hi <= bound && hi > 0.99 * bound);
  CHECK_NEAR(std, bound / sqrt(3.0), 0.001);
  free(x);
  x = init(TRC_INIT_HE, 2.0f, 0.0f, 500, 10, 3, 0);
  moments(x, BIG, &mean, &std, &lo, &hi);
  CHECK_NEAR(mean, 0.0, 0.002);
  CHECK_NEAR(std, 2.0 * sqrt(2.0 / 500.0), 0.002);
  free(x);
  x = init(TRC_INIT_ONES, 0, 0, 0, 0, 1, 0);
  moments(x, BIG, &mean, &std, &lo, &hi);
  CHECK(lo == 1.0 && hi == 1.0);
  free(x);
}

static void test_determinism(void) {
  float *a = init(TRC_INIT_NORMAL, 0, 1, 0, 0, 42, 3),
        *b = init(TRC_INIT_NORMAL, 0, 1, 0, 0, 42, 3);
  float *c = init(TRC_INIT_NORMAL, 0, 1, 0, 0, 43, 3),
        *d = init(TRC_INIT_NORMAL, 0, 1, 0, 0, 42, 4);
  CHECK(memcmp(a, b, BIG * sizeof(float)) == 0);
  CHECK(memcmp(a, c, BIG * sizeof(float)) != 0);
  CHECK(memcmp(a, d, BIG * sizeof(float)) != 0);
  free(a), free(b), free(c), free(d);

  /* a parameter's values do not depend on the others: init the model, then
   * the second parameter alone */
  static const trc_param params[] = {
      {"w", 2, {3, 5}, 0, 15, TRC_INIT_NORMAL, 0, 1, 0, 0, 1},
      {"v", 1, {7}, 64, 7, TRC_INIT_UNIFORM, 0, 1, 0, 0, 1},
  };
  trc_model m = {.name = "m",
                 .batch = 1,
                 .arena_bytes = 256,
                 .param_offset = 0,
                 .param_count = 23,
                 .grad_offset = 128,
                 .n_params = 2,
                 .params = params};
  float arena[64] = {0}, alone[7];
  trc_init_params(&m, (char *)arena, 9);
  trc_init_param(&params[1], 1, 9, alone);
  CHECK(memcmp(arena + 16, alone, sizeof alone) == 0);
}

static void test_generator(void) {
  uint64_t key = trc_rng_key(7, 1, 2);
  CHECK(trc_rng_u64(key, 5) == trc_rng_u64(trc_rng_key(7, 1, 2), 5));
  CHECK(trc_rng_key(7, 1, 2) != trc_rng_key(7, 2, 1));
  double lo = 1, hi = 0;
  for (uint64_t i = 0; i < 100000; i++) {
    double u = trc_rng_uniform(key, i);
    lo = fmin(lo, u), hi = fmax(hi, u);
  }
  CHECK(lo >= 0 && lo < 1e-3 && hi < 1 && hi > 0.999);
}

static void test_shuffle(void) {
  enum { N = 1000 };
  int64_t a[N], b[N], c[N];
  int seen[N] = {0};
  trc_shuffle(a, N, 5, 0);
  trc_shuffle(b, N, 5, 0);
  trc_shuffle(c, N, 5, 1);
  CHECK(memcmp(a, b, sizeof a) == 0);
  CHECK(memcmp(a, c, sizeof a) != 0);
  int fixed = 0;
  for (int i = 0; i < N; i++) {
    if (a[i] >= 0 && a[i] < N) seen[a[i]]++;
    fixed += a[i] == i;
  }
  for (int i = 0; i < N; i++) CHECK(seen[i] == 1);
  CHECK(fixed < 10); /* expected 1 for a uniform permutation */
}

int main(void) {
  test_distributions();
  test_determinism();
  test_generator();
  test_shuffle();
  return test_finish("test_init");
}
