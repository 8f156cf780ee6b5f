/* test_kernel_helpers.c — trainc.h's helpers for generated kernels:
 * trc_maxf and trc_minf, the maximum and minimum, against the C library's
 * fmaxf and fminf (a NaN operand yields the other one) over every pair of
 * special and ordinary values, and trc_lanes_maxf / trc_lanes_minf against
 * them lane by lane, and both against their definition's ternary to the
 * bit (zeros' signs, NaN payloads); trc_selectf against c > 0 ? a : b, to the bit;
 * trc_kernel_uniform against SplitMix64 spelled out; and
 * trc_round_bf16, the CUDA trainer's
 * rounding of a bf16 GEMM's inputs, against the C trainer's: trc_gemm under
 * bf16 of A^T [N x 1] times B = [1] is A rounded to bf16, exactly (as
 * test_gemm.c's check of that rounding), for every upper half of a float
 * with the lower halves that decide a rounding (zero, ties, either side of
 * them, all ones): every sign, exponent, NaN payload and overflow to
 * infinity. Subnormal inputs are left out: the C trainer's bf16 GEMM may
 * treat them as zero (AVX512_BF16's dot products do). And
 * trc_bf16_round (the loss head's rounding of its logit gradients, vector
 * code on AVX512_BF16) against trc_round_bf16 element by element: lengths
 * around its 16 lanes, subnormals, NaNs, ties; and trc_bf16_round_in_place
 * (emulated bf16's rounding kept in f32) and trc_bf16_unpack (the widening)
 * against the same bits. And trc_row_max (vector code
 * on AVX-512) against trc_maxf over the row in order: lengths around its
 * 16 lanes, NaNs passed over, a row of NaNs (-inf), infinities. */
#include "test_util.h"
#include "kernels/rt_kernels.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static bool same(float got, float want) { return isnan(want) ? isnan(got) : got == want; }

static void test_max_min(void) {
  const float v[] = {NAN, -INFINITY, -3.5f, -1e-40f, -0.0f, 0.0f, 1e-40f, 2.0f, 3.4e38f, INFINITY};
  const int n = (int)(sizeof v / sizeof v[0]);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      CHECK(same(trc_maxf(v[i], v[j]), fmaxf(v[i], v[j])));
      CHECK(same(trc_minf(v[i], v[j]), fminf(v[i], v[j])));
    }
}

static uint32_t bits_of(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

/* trc_maxf and trc_minf (masked on the bits) pick the bits the kernels'
 * definition picks, `b != b ? a : a > b ? a : b` (and <): zeros' signs and
 * NaN payloads included, which fmaxf leaves open. */
static void test_max_min_bits(void) {
  float payload, negative_nan;
  memcpy(&payload, &(uint32_t){0x7fc01234u}, sizeof payload);
  memcpy(&negative_nan, &(uint32_t){0xffc00001u}, sizeof negative_nan);
  const float v[] = {payload, negative_nan, -INFINITY, -3.5f, -1e-40f, -0.0f, 0.0f, 1e-40f, 2.0f, INFINITY};
  const int n = (int)(sizeof v / sizeof v[0]);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      float a = v[i], b = v[j];
      CHECK(bits_of(trc_maxf(a, b)) == bits_of(b != b ? a : a > b ? a : b));
      CHECK(bits_of(trc_minf(a, b)) == bits_of(b != b ? a : a < b ? a : b));
    }
}

/* trc_selectf (masked on the bits) picks the bits of c > 0 ? a : b: every
 * condition above (a NaN, -0 and the subnormals among them) with arms that
 * differ in sign, zero's sign and NaN payload. */
static void test_selectf(void) {
  const float c[] = {NAN, -INFINITY, -3.5f, -1e-40f, -0.0f, 0.0f, 1e-40f, 2.0f, 3.4e38f, INFINITY};
  float payload;
  memcpy(&payload, &(uint32_t){0x7fc01234u}, sizeof payload);
  const float arms[][2] = {{1.5f, -2.0f}, {-0.0f, 0.0f}, {payload, -INFINITY}, {0.0f, -NAN}};
  for (int i = 0; i < (int)(sizeof c / sizeof c[0]); i++)
    for (int j = 0; j < (int)(sizeof arms / sizeof arms[0]); j++) {
      float a = arms[j][0], b = arms[j][1];
      CHECK(bits_of(trc_selectf(c[i], a, b)) == bits_of(c[i] > 0.0f ? a : b));
    }
}

/* SplitMix64's output function, spelled out again (Steele, Lea and Flood,
 * 2014): the reference for dropout's draw. */
static uint64_t splitmix64_mix(uint64_t z) {
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* trc_kernel_uniform (dropout's draw, vector code in generated loops) is
 * the top 24 bits of mix(mix(key + G (stream + 1)) + G (counter + 1)),
 * G the golden ratio's 64 bits, over 2^24: to the bit, for keys whose
 * halves have their top bits set, several streams, and counters across
 * chunks and near 2^32. */
static void test_kernel_uniform(void) {
  const uint64_t golden = 0x9E3779B97F4A7C15ull;
  const uint64_t keys[] = {0, 42, 0xFFFFFFFF80000001ull, 0x8000000000000000ull};
  const uint64_t streams[] = {0, 1, 7};
  const int64_t starts[] = {0, 4093, 4294967290ll};
  for (int k = 0; k < 4; k++)
    for (int s = 0; s < 3; s++)
      for (int c = 0; c < 3; c++)
        for (int64_t i = starts[c]; i < starts[c] + 64; i++) {
          int32_t key[2] = {(int32_t)(uint32_t)keys[k], (int32_t)(uint32_t)(keys[k] >> 32)};
          uint64_t z = splitmix64_mix(splitmix64_mix(keys[k] + golden * (streams[s] + 1)) +
                                      golden * ((uint64_t)i + 1));
          float got = trc_kernel_uniform(key, streams[s], i);
          CHECK(got == (float)ldexp((double)(z >> 40), -24) && got >= 0.0f && got < 1.0f);
        }
}

/* trc_lanes_maxf and trc_lanes_minf (a reduction's 16 lanes, vector code
 * under GCC) take trc_maxf / trc_minf lane by lane, to the bit (signed
 * zeros, NaNs on either side): every pair of the values above, 16 at a time. */
static void test_lanes(void) {
  const float v[] = {NAN, -INFINITY, -3.5f, -1e-40f, -0.0f, 0.0f, 1e-40f, 2.0f, 3.4e38f, INFINITY};
  const int n = (int)(sizeof v / sizeof v[0]);
  for (int first = 0; first < n * n; first += TRC_LANES) {
    float max[TRC_LANES], min[TRC_LANES], e[TRC_LANES], want_max[TRC_LANES], want_min[TRC_LANES];
    for (int l = 0; l < TRC_LANES; l++) {
      const int pair = (first + l) % (n * n);
      max[l] = min[l] = v[pair / n];
      e[l] = v[pair % n];
      want_max[l] = trc_maxf(max[l], e[l]);
      want_min[l] = trc_minf(min[l], e[l]);
    }
    trc_lanes_maxf(max, e);
    trc_lanes_minf(min, e);
    CHECK(memcmp(max, want_max, sizeof max) == 0);
    CHECK(memcmp(min, want_min, sizeof min) == 0);
  }
}

static float from_bits(uint32_t bits) {
  float x;
  memcpy(&x, &bits, sizeof x);
  return x;
}

static float widen(uint16_t bf16) { return from_bits((uint32_t)bf16 << 16); }

static void test_round_bf16(void) {
  static const uint32_t lows[] = {0x0000, 0x0001, 0x4000, 0x7fff, 0x8000, 0x8001, 0xc000, 0xffff};
  enum { LOWS = sizeof lows / sizeof lows[0], N = 0x10000 * LOWS };
  float *a = malloc(N * sizeof *a), *c = malloc(N * sizeof *c), one = 1.0f;
  int64_t n = 0;
  for (uint32_t high = 0; high <= 0xffff; high++)
    for (int l = 0; l < LOWS; l++) {
      const float x = from_bits(high << 16 | lows[l]);
      if (fpclassify(x) != FP_SUBNORMAL) a[n++] = x;
    }
  trc_set_precision(TRC_BF16);
  trc_gemm(1, 1, 1, 0, n, 1, 1, a, n, 0, 0, &one, 1, 0, 0, 0.0f, c, 1, 0, 0);
  trc_set_precision(TRC_FP32);
  int64_t differ = 0;
  for (int64_t i = 0; i < n; i++) {
    const float want = c[i], got = widen(trc_round_bf16(a[i]));
    differ += isnan(want) ? !isnan(got) : got != want;
  }
  CHECK(n > N / 2 && differ == 0);
  free(a), free(c);
  /* and it does round: to nearest, ties to even, NaN kept, overflow to infinity */
  CHECK(trc_round_bf16(from_bits(0x3f808000)) == 0x3f80); /* 1 + 2^-8, a tie: down to even */
  CHECK(trc_round_bf16(from_bits(0x3f818000)) == 0x3f82); /* 1 + 3*2^-8, a tie: up to even */
  CHECK(trc_round_bf16(from_bits(0x3f808001)) == 0x3f81); /* just above the tie: up */
  CHECK(trc_round_bf16(from_bits(0x7f7fffff)) == 0x7f80); /* FLT_MAX: infinity */
  CHECK(trc_round_bf16(from_bits(0x7f800001)) == 0x7fc0); /* a NaN infinite in its upper half */
  CHECK(trc_round_bf16(from_bits(0x00000001)) == 0x0000); /* the least subnormal: zero */
}

static void test_round(void) {
  const float special[] = {NAN, -INFINITY, INFINITY, 1e-40f, -1e-45f, 0.0f, -0.0f, 3.4e38f};
  const int64_t lengths[] = {1, 15, 16, 17, 255, 256, 257, 1001};
  for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
    int64_t n = lengths[l];
    float *x = malloc((size_t)n * sizeof *x);
    uint16_t *got = malloc((size_t)n * sizeof *got);
    for (int64_t i = 0; i < n; i++) {
      uint32_t bits = (uint32_t)(0x3f800000u + (uint32_t)i * 0x9E3779B1u % 0x00ffffffu);
      if (i % 5 == 3) bits |= 0x8000u; /* a tie's half */
      memcpy(&x[i], &bits, sizeof bits);
      if (i % 7 == 0) x[i] = special[i / 7 % 8];
    }
    trc_bf16_round(x, got, n);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; i++) wrong += got[i] != trc_round_bf16(x[i]);
    if (wrong) fprintf(stderr, "trc_bf16_round of %lld floats: %lld wrong\n", (long long)n, (long long)wrong);
    CHECK(wrong == 0);
    /* emulated bf16's rounding kept in f32, and the widening back */
    float *kept = malloc((size_t)n * sizeof *kept), *widened = malloc((size_t)n * sizeof *widened);
    memcpy(kept, x, (size_t)n * sizeof *kept);
    trc_bf16_round_in_place(kept, n);
    trc_bf16_unpack(n, got, widened);
    int64_t wrong_kept = 0, wrong_widened = 0;
    for (int64_t i = 0; i < n; i++) {
      uint32_t want = (uint32_t)trc_round_bf16(x[i]) << 16, kept_bits, widened_bits;
      memcpy(&kept_bits, &kept[i], sizeof kept_bits);
      memcpy(&widened_bits, &widened[i], sizeof widened_bits);
      wrong_kept += kept_bits != want, wrong_widened += widened_bits != want;
    }
    if (wrong_kept || wrong_widened)
      fprintf(stderr, "%lld floats: trc_bf16_round_in_place %lld wrong, trc_bf16_unpack %lld wrong\n",
              (long long)n, (long long)wrong_kept, (long long)wrong_widened);
    CHECK(wrong_kept == 0 && wrong_widened == 0);
    free(kept);
    free(widened);
    free(x);
    free(got);
  }
}

static void test_row_max(void) {
  const int64_t lengths[] = {1, 5, 16, 17, 31, 32, 33, 100, 50257};
  float *x = malloc(50257 * sizeof *x);
  for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
    for (int kind = 0; kind < 4; kind++) {
      int64_t n = lengths[l];
      float want = -INFINITY;
      for (int64_t i = 0; i < n; i++) {
        x[i] = kind == 3 ? NAN : (float)((i * 7919) % 1000) - 500.0f; /* the largest at no fixed lane */
        if (kind == 1 && i % 3 == 1) x[i] = NAN;
        if (kind == 2 && i == n / 2) x[i] = INFINITY;
        want = trc_maxf(want, x[i]);
      }
      float got = trc_row_max(x, n);
      if (!same(got, want)) fprintf(stderr, "trc_row_max of %lld (kind %d): %g, want %g\n", (long long)n, kind, got, want);
      CHECK(same(got, want));
    }
  free(x);
}

int main(void) {
  test_max_min();
  test_max_min_bits();
  test_lanes();
  test_selectf();
  test_kernel_uniform();
  test_row_max();
  test_round_bf16();
  test_round();
  return test_failures != 0;
}
