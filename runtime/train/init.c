/* init.c — parameter initialization. Element e of parameter i is a function
 * of (seed, i, e) only (see rng.c), so it does not depend on the order the
 * parameters are visited in, or on threads: the parameter region is drawn
 * on the trainer's threads, each its own range of elements. */
#include "rt_train.h"

#include <math.h>

static void fill_constant(float *dst, uint64_t from, uint64_t to, float value) {
  for (uint64_t i = from; i < to; i++) dst[i] = value;
}

/* Elements [from, to) of parameter `index`, p, into dst[from, to). */
static void init_elements(const trc_param *p, int index, uint64_t seed, float *dst, uint64_t from,
                          uint64_t to) {
  uint64_t key = trc_rng_key(seed, TRC_STREAM_INIT, (uint64_t)index);
  double bound, std;
  switch (p->init) {
  case TRC_INIT_ZEROS: fill_constant(dst, from, to, 0.0f); break;
  case TRC_INIT_ONES: fill_constant(dst, from, to, 1.0f); break;
  case TRC_INIT_NORMAL: trc_rng_normals(key, from, to, p->a, p->b, dst + from); break;
  case TRC_INIT_UNIFORM: trc_rng_uniforms(key, from, to, p->a, p->b, dst + from); break;
  case TRC_INIT_XAVIER:
    bound = p->a * sqrt(6.0 / (double)(p->fan_in + p->fan_out));
    trc_rng_uniforms(key, from, to, -bound, bound, dst + from);
    break;
  case TRC_INIT_HE:
    std = p->a * sqrt(2.0 / (double)p->fan_in);
    trc_rng_normals(key, from, to, 0.0, std, dst + from);
    break;
  }
}

void trc_init_param(const trc_param *p, int index, uint64_t seed, float *dst) {
  init_elements(p, index, seed, dst, 0, p->count);
}

typedef struct {
  const trc_model *m;
  char *arena;
  uint64_t seed;
} init_job;

static void init_part(void *ctx, int i, uint64_t from, uint64_t to) {
  const init_job *j = ctx;
  const trc_param *p = &j->m->params[i];
  init_elements(p, i, j->seed, (float *)(j->arena + p->offset), from, to);
}

/* Floats [lo, hi) of the parameter region. */
static void init_range(void *ctx, int64_t lo, int64_t hi) {
  trc_param_parts(((const init_job *)ctx)->m, lo, hi, init_part, ctx);
}

void trc_init_params(const trc_model *m, char *arena, uint64_t seed) {
  init_job job = {m, arena, seed};
  trc_parallel_for((int64_t)m->param_count, init_range, &job);
}
