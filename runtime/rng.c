/* rng.c — counter-based random numbers: the value at position `counter` of a
 * stream is a pure function of (key, counter) — splitmix64's output function
 * applied to key + (counter+1)*golden — so init, shuffling and gradcheck data
 * are deterministic and independent of the order anything is computed in. */
#include "rt_internal.h"

#include <math.h>
#include <string.h>

#define GOLDEN 0x9E3779B97F4A7C15ull
#define PI 3.14159265358979323846

uint64_t trc_rng_key(uint64_t seed, uint64_t stream, uint64_t substream) {
  uint64_t k = trc_mix64(seed);
  k = trc_mix64(k + GOLDEN * (stream + 1));
  return trc_mix64(k + GOLDEN * (substream + 1));
}

uint64_t trc_rng_u64(uint64_t key, uint64_t counter) {
  return trc_mix64(key + GOLDEN * (counter + 1));
}

double trc_rng_uniform(uint64_t key, uint64_t counter) {
  return (double)(trc_rng_u64(key, counter) >> 11) * 0x1.0p-53;
}

/* Box-Muller on positions 2c and 2c+1; u1 in (0, 1] keeps the log finite. */
double trc_rng_normal(uint64_t key, uint64_t counter) {
  double u1 = (double)((trc_rng_u64(key, 2 * counter) >> 11) + 1) * 0x1.0p-53;
  double u2 = trc_rng_uniform(key, 2 * counter + 1);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * PI * u2);
}

void trc_set_mode(const trc_model *m, char *arena, uint64_t rng_key, int training) {
  const float flag = training ? 1.0f : 0.0f;
  memcpy(arena + m->rng_key_offset, &rng_key, sizeof rng_key);
  memcpy(arena + m->training_offset, &flag, sizeof flag);
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
