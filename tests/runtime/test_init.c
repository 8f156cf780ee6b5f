/* test_init.c — parameter init statistics and determinism (on any number of
 * threads), the normal numbers against libm's Box-Muller on the same random
 * bits, the counter-based generator, and the per-epoch shuffle. */
#include "core/rt_core.h"
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
  trc_param p = {"p", 1, {BIG}, 0, BIG, kind, a, b, fan_in, fan_out, 1, 0, NULL, 0};
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
      {"w", 2, {3, 5}, 0, 15, TRC_INIT_NORMAL, 0, 1, 0, 0, 1, 0, NULL, 0},
      {"v", 1, {7}, 64, 7, TRC_INIT_UNIFORM, 0, 1, 0, 0, 1, 0, NULL, 0},
  };
  trc_model m = {.name = "m",
                 .batch = 1,
                 .arena_bytes = 256,
                 .param_offset = 0,
                 .param_count = 23, .trained_count = 23,
                 .grad_offset = 128,
                 .n_params = 2,
                 .params = params};
  float arena[64] = {0}, alone[7];
  trc_init_params(&m, (char *)arena, 9);
  trc_init_param(&params[1], 1, 9, alone);
  CHECK(memcmp(arena + 16, alone, sizeof alone) == 0);
}

/* Normal number i: Box-Muller in double with libm on the random bits rng.c
 * documents (u1 from the top 30 bits of position 2c, θ from the top 24 of
 * 2c+1, c = i/2; cos for even i, sin for odd). */
static double reference_normal(uint64_t key, uint64_t i) {
  uint64_t c = i / 2;
  double u1 = (float)((double)((trc_rng_u64(key, 2 * c) >> 34) + 1) * 0x1.0p-30);
  double theta = 6.283185307179586477 * (double)(trc_rng_u64(key, 2 * c + 1) >> 40) * 0x1.0p-24;
  double r = sqrt(-2.0 * log(u1));
  return r * (i & 1 ? sin(theta) : cos(theta));
}

static void test_normals(void) {
  float *x = init(TRC_INIT_NORMAL, 0, 1, 0, 0, 11, 2);
  uint64_t key = trc_rng_key(11, TRC_STREAM_INIT, 2);
  double worst = 0;
  int within_one = 0;
  for (uint64_t i = 0; i < BIG; i++) {
    worst = fmax(worst, fabs(x[i] - reference_normal(key, i)));
    within_one += fabs(x[i]) < 1;
  }
  CHECK(worst < 1e-6); /* measured 6e-7 over 2e7 numbers, |x| up to 5.6 */
  CHECK_NEAR(within_one / (double)BIG, 0.682689, 0.005);
  /* a range that starts and ends on odd indices holds the same numbers */
  float part[13];
  trc_rng_normals(key, 7, 20, 0.0, 1.0, part);
  CHECK(memcmp(part, x + 7, sizeof part) == 0);
  free(x);
}

/* The vectorized uniform numbers are trc_rng_uniform's, bit for bit. */
static void test_uniforms(void) {
  enum { N = 100000 };
  float *x = malloc(N * sizeof(float));
  uint64_t key = trc_rng_key(4, TRC_STREAM_INIT, 1);
  trc_rng_uniforms(key, 5, 5 + N, -0.3, 0.7, x);
  int same = 1;
  for (uint64_t i = 0; i < N; i++)
    same &= x[i] == (float)(-0.3 + (0.7 - -0.3) * trc_rng_uniform(key, 5 + i));
  CHECK(same);
  free(x);
}

/* The same weights on 1 and 3 threads (parameters of every kind, cut
 * anywhere between the threads). */
static void test_threads(void) {
  static const trc_param params[] = {
      {"a", 2, {300, 7}, 0, 2100, TRC_INIT_NORMAL, 0.5, 0.02, 0, 0, 1, 0, NULL, 0},
      {"b", 1, {7}, 8448, 7, TRC_INIT_ZEROS, 0, 0, 0, 0, 0, 0, NULL, 0},
      {"c", 2, {5, 201}, 8512, 1005, TRC_INIT_HE, 1, 0, 201, 5, 1, 0, NULL, 0},
      {"d", 1, {33}, 12608, 33, TRC_INIT_XAVIER, 1, 0, 11, 3, 0, 0, NULL, 0},
  };
  trc_model m = {.name = "m", .batch = 1, .arena_bytes = 16384, .param_offset = 0,
                 .param_count = 3185, .trained_count = 3185, .grad_offset = 12800,
                 .n_params = 4, .params = params};
  char *one = calloc(1, 16384), *three = calloc(1, 16384);
  trc_set_threads(1);
  trc_init_params(&m, one, 5);
  trc_set_threads(3);
  trc_init_params(&m, three, 5);
  trc_set_threads(1);
  CHECK(memcmp(one, three, 16384) == 0);
  float alone[1005];
  trc_init_param(&params[2], 2, 5, alone);
  CHECK(memcmp(one + 8512, alone, sizeof alone) == 0);
  free(one), free(three);
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
  test_normals();
  test_uniforms();
  test_threads();
  test_generator();
  test_shuffle();
  return test_finish("test_init");
}
