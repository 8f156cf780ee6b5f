/* init.c — parameter initialization. Element e of parameter i is a function
 * of (seed, i, e) only (see rng.c), so it does not depend on the order the
 * parameters are visited in, or on threads. */
#include "rt_internal.h"

#include <math.h>

static void fill_constant(float *dst, uint64_t n, float value) {
  for (uint64_t i = 0; i < n; i++) dst[i] = value;
}

static void fill_normal(float *dst, uint64_t n, uint64_t key, double mean, double std) {
  for (uint64_t i = 0; i < n; i++) dst[i] = (float)(mean + std * trc_rng_normal(key, i));
}

static void fill_uniform(float *dst, uint64_t n, uint64_t key, double low, double high) {
  for (uint64_t i = 0; i < n; i++) dst[i] = (float)(low + (high - low) * trc_rng_uniform(key, i));
}

void trc_init_param(const trc_param *p, int index, uint64_t seed, float *dst) {
  uint64_t key = trc_rng_key(seed, TRC_STREAM_INIT, (uint64_t)index);
  double bound, std;
  switch (p->init) {
  case TRC_INIT_ZEROS: fill_constant(dst, p->count, 0.0f); break;
  case TRC_INIT_ONES: fill_constant(dst, p->count, 1.0f); break;
  case TRC_INIT_NORMAL: fill_normal(dst, p->count, key, p->a, p->b); break;
  case TRC_INIT_UNIFORM: fill_uniform(dst, p->count, key, p->a, p->b); break;
  case TRC_INIT_XAVIER:
    bound = p->a * sqrt(6.0 / (double)(p->fan_in + p->fan_out));
    fill_uniform(dst, p->count, key, -bound, bound);
    break;
  case TRC_INIT_HE:
    std = p->a * sqrt(2.0 / (double)p->fan_in);
    fill_normal(dst, p->count, key, 0.0, std);
    break;
  }
}

void trc_init_params(const trc_model *m, char *arena, uint64_t seed) {
  for (int i = 0; i < m->n_params; i++)
    trc_init_param(&m->params[i], i, seed, (float *)(arena + m->params[i].offset));
}
