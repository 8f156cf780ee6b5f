/* rng.c — counter-based random numbers: the value at position `counter` of a
 * stream is a pure function of (key, counter) — splitmix64's output function
 * applied to key + (counter+1)*golden — so init, shuffling and gradcheck data
 * are deterministic and independent of the order anything is computed in. */
#include "rt_core.h"

#include <math.h>
#include <string.h>

#define GOLDEN 0x9E3779B97F4A7C15ull
#define PI 3.14159265358979323846

uint64_t trc_rng_key(uint64_t seed, uint64_t stream, uint64_t substream) {
  uint64_t k = trc_mix64(seed);
  k = trc_mix64(k + GOLDEN * (stream + 1));
  return trc_mix64(k + GOLDEN * (substream + 1));
}

/* Inlined into the vectorized loops below (a call would stop them). */
#define INLINE static inline __attribute__((always_inline))

INLINE uint64_t position(uint64_t key, uint64_t counter) {
  return trc_mix64(key + GOLDEN * (counter + 1));
}

uint64_t trc_rng_u64(uint64_t key, uint64_t counter) { return position(key, counter); }

double trc_rng_uniform(uint64_t key, uint64_t counter) {
  return (double)(trc_rng_u64(key, counter) >> 11) * 0x1.0p-53;
}

/* Box-Muller on positions 2c and 2c+1; u1 in (0, 1] keeps the log finite. */
double trc_rng_normal(uint64_t key, uint64_t counter) {
  double u1 = (double)((trc_rng_u64(key, 2 * counter) >> 11) + 1) * 0x1.0p-53;
  double u2 = trc_rng_uniform(key, 2 * counter + 1);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * PI * u2);
}

/* ---- numbers for initialization, in blocks ----
 * Normal numbers by Box-Muller on pairs: numbers 2c and 2c+1 are r·cos(θ)
 * and r·sin(θ), r = sqrt(-2 ln u1), from positions 2c (u1 = (k + 1)/2^30 in
 * (0, 1], k its top 30 bits, rounded to float: |r| stays below 6.5, which a
 * normal number passes about once in 10^10) and 2c+1 (θ = 2π·k/2^24, k its
 * top 24 bits) of the stream. The logarithm, sine and cosine are
 * polynomials here, in float, with no library call and no FMA contraction:
 * plain IEEE operations, so the compiler vectorizes the loops (clones for
 * AVX2 and AVX-512 on x86-64) and every machine computes the same bits.
 * Against libm's Box-Muller in double on the same bits the numbers differ
 * by at most 6e-7 (2e7 of them; test_init.c checks 1e-6); their Taylor
 * tails are below 2e-9. */

#define LN2_HI 0.693145751953125f /* ln 2 split: e·LN2_HI is exact for |e| < 2^8 */
#define LN2_LO 1.42860682030941723212e-6f
#define QUARTER (1 << 22) /* a quarter turn in units of 2^-24 turns */

/* ln x for x in (0, 1], a normal float: x = 2^e·m with m in [√½, √2), and
 * ln m = 2 atanh(s), s = (m - 1)/(m + 1), |s| < 0.172, as a series in s². */
INLINE float log_unit(float x) {
  union { float f; uint32_t u; } v = {x};
  uint32_t mantissa = v.u & 0x7fffffu, big = mantissa > 0x3504f3u; /* 1.mantissa > √2 */
  int32_t e = (int32_t)(v.u >> 23) - 127 + (int32_t)big;
  v.u = mantissa | (0x3f800000u - (big << 23)); /* m: 1.mantissa, halved when big */
  float m = v.f;
  float s = (m - 1.0f) / (m + 1.0f), z = s * s;
  float series = s * (2.0f + z * (2.0f / 3 + z * (2.0f / 5 + z * (2.0f / 7 + z * (2.0f / 9)))));
  return (float)e * LN2_HI + (series + (float)e * LN2_LO);
}

/* sin and cos of 2π·k/2^24 for 0 <= k < 2^24: the nearest quarter turn q
 * (integers, exact) and a in [-π/4, π/4] from it, Taylor polynomials of a,
 * then the quarter's swap and signs. */
INLINE void sincos_turn(int32_t k, float *sin_out, float *cos_out) {
  int32_t q = (k + QUARTER / 2) >> 22;
  float a = (float)(k - q * QUARTER) * (float)(1.57079632679489662 / (double)QUARTER), a2 = a * a;
  float s = a + a * a2 * (-1.0f / 6 + a2 * (1.0f / 120 + a2 * (-1.0f / 5040 +
                                                                a2 * (1.0f / 362880))));
  float c = 1.0f + a2 * (-0.5f + a2 * (1.0f / 24 + a2 * (-1.0f / 720 +
                                                         a2 * (1.0f / 40320 +
                                                               a2 * (-1.0f / 3628800)))));
  int32_t swap = q & 1, sin_negative = q & 2, cos_negative = (q + 1) & 2;
  float sq = swap ? c : s, cq = swap ? s : c;
  *sin_out = sin_negative ? -sq : sq;
  *cos_out = cos_negative ? -cq : cq;
}

enum { PAIRS = 256 }; /* pairs drawn per block */

/* Normal numbers 2c, 2c+1 of the stream for c in [first, first + n), n <=
 * PAIRS, into z[0, 2n). */
TRC_VECTOR_CLONES
static void normal_pairs(uint64_t key, uint64_t first, uint64_t n, float *z) {
  for (uint64_t j = 0; j < n; j++) {
    uint64_t c = first + j;
    float u1 = (float)((int32_t)(position(key, 2 * c) >> 34) + 1) * 0x1.0p-30f;
    float r = sqrtf(-2.0f * log_unit(u1)), s, co;
    sincos_turn((int32_t)(position(key, 2 * c + 1) >> 40), &s, &co);
    z[2 * j] = r * co;
    z[2 * j + 1] = r * s;
  }
}

TRC_VECTOR_CLONES
static void scale(const float *z, uint64_t n, double mean, double std, float *out) {
  for (uint64_t i = 0; i < n; i++) out[i] = (float)(mean + std * (double)z[i]);
}

void trc_rng_normals(uint64_t key, uint64_t from, uint64_t to, double mean, double std,
                     float *out) {
  float z[2 * PAIRS];
  for (uint64_t c = from / 2; 2 * c < to; c += PAIRS) {
    uint64_t end = (to + 1) / 2 < c + PAIRS ? (to + 1) / 2 : c + PAIRS;
    normal_pairs(key, c, end - c, z);
    uint64_t lo = 2 * c > from ? 2 * c : from, hi = 2 * end < to ? 2 * end : to;
    scale(z + (lo - 2 * c), hi - lo, mean, std, out + (lo - from));
  }
}

/* trc_rng_uniform's numbers, each (double)x·2^-53 for a 53-bit x, with x
 * converted in two exact halves (a vector int64 conversion needs AVX-512DQ). */
TRC_VECTOR_CLONES
void trc_rng_uniforms(uint64_t key, uint64_t from, uint64_t to, double low, double high,
                      float *out) {
  for (uint64_t i = from; i < to; i++) {
    uint64_t x = position(key, i) >> 11;
    double u = ((double)(int32_t)(x >> 26) * 0x1.0p26 + (double)(int32_t)(x & 0x3ffffff)) *
               0x1.0p-53;
    out[i - from] = (float)(low + (high - low) * u);
  }
}

void trc_set_mode(const trc_model *m, char *arena, uint64_t rng_key, int training) {
  const float flag = training ? 1.0f : 0.0f, no_gradient = 0.0f;
  memcpy(arena + m->rng_key_offset, &rng_key, sizeof rng_key);
  memcpy(arena + m->training_offset, &flag, sizeof flag);
  if (!training) /* a loss head wants no gradient (trc_linear_cross_entropy) */
    memcpy(arena + m->loss_seed_offset, &no_gradient, sizeof no_gradient);
}

/* Fisher-Yates from the identity. The modulo's bias is below n / 2^64. */
void trc_shuffle(int64_t *perm, int64_t n, uint64_t seed, uint64_t epoch) {
  uint64_t key = trc_rng_key(seed, TRC_STREAM_SHUFFLE, epoch);
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)(trc_rng_u64(key, (uint64_t)i) % (uint64_t)(i + 1));
    int64_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}
