/* optim.c — SGD and AdamW with PyTorch's semantics, as flat loops over
 * contiguous f32 slices that the compiler vectorizes; gradient clipping.
 *
 * Per-step scalars are computed once in double (as PyTorch does in Python)
 * and rounded to float; the element loops are pure float, in PyTorch's order
 * of operations. */
#include "rt_train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* SGD's floats (trainc.h's trc_update_scalars). */
static void sgd_scalars(const trc_sgd_hparams *h, trc_update_scalars *u) {
  u->lr = (float)h->lr, u->momentum = (float)h->momentum, u->weight_decay = (float)h->weight_decay;
  u->nesterov = h->nesterov;
}

/* AdamW's floats: the bias corrections in double, then each scalar rounded
 * once. */
static void adamw_scalars(const trc_adamw_hparams *h, trc_update_scalars *u) {
  const double bc1 = 1.0 - pow(h->beta1, (double)h->step);
  const double bc2 = 1.0 - pow(h->beta2, (double)h->step);
  u->decay = (float)(1.0 - h->lr * h->weight_decay);
  u->b1 = (float)h->beta1, u->b2 = (float)h->beta2;
  u->c1 = (float)(1.0 - h->beta1), u->c2 = (float)(1.0 - h->beta2), u->eps = (float)h->eps;
  u->step_size = (float)(h->lr / bc1), u->bc2_sqrt = (float)sqrt(bc2);
}

/* torch.optim.SGD, dampening 0 (trc_sgd_element), on the gradient
 * g[i] * scale: clipping's factor applied as the update reads it (the same
 * float as scaling g in place first, without that pass over g). */
TRC_VECTOR_CLONES
void trc_sgd_update(float *restrict p, const float *restrict g, float scale, float *restrict buf,
                    uint64_t n, const trc_sgd_hparams *h) {
  trc_update_scalars u;
  sgd_scalars(h, &u);
  const float lr = u.lr, mu = u.momentum, wd = u.weight_decay;
  if (mu == 0.0f) /* the same loop without the buffer, so that it vectorizes */
    for (uint64_t i = 0; i < n; i++) trc_sgd_element(&p[i], g[i] * scale, NULL, lr, 0.0f, wd, 0);
  else if (h->nesterov)
    for (uint64_t i = 0; i < n; i++) trc_sgd_element(&p[i], g[i] * scale, &buf[i], lr, mu, wd, 1);
  else
    for (uint64_t i = 0; i < n; i++) trc_sgd_element(&p[i], g[i] * scale, &buf[i], lr, mu, wd, 0);
}

/* torch.optim.AdamW (trc_adamw_element), on the gradient g[i] * scale. */
TRC_VECTOR_CLONES
void trc_adamw_update(float *restrict p, const float *restrict g, float scale, float *restrict m,
                      float *restrict v, uint64_t n, const trc_adamw_hparams *h) {
  trc_update_scalars u;
  adamw_scalars(h, &u);
  for (uint64_t i = 0; i < n; i++)
    trc_adamw_element(&p[i], g[i] * scale, &m[i], &v[i], u.decay, &u);
}

/* The floats of the update trc_optimizer_step would make next (it counts
 * the step), for decayed parameters. */
trc_update_scalars trc_optimizer_scalars(trc_optimizer *o, const trc_train_config *cfg,
                                         double lr) {
  trc_update_scalars u = {.kind = o->kind, .clip_norm = cfg->clip_norm};
  o->step++;
  trc_sgd_hparams sgd = {lr, cfg->momentum, cfg->weight_decay, cfg->nesterov};
  trc_adamw_hparams adam = {lr, cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay, o->step};
  if (o->kind == TRC_SGD)
    sgd_scalars(&sgd, &u);
  else
    adamw_scalars(&adam, &u);
  return u;
}

int trc_optimizer_needs_m(const trc_train_config *cfg) {
  return cfg->optimizer == TRC_ADAMW || cfg->momentum != 0.0;
}

int trc_optimizer_needs_v(const trc_train_config *cfg) { return cfg->optimizer == TRC_ADAMW; }

int trc_optimizer_init(trc_optimizer *o, const trc_train_config *cfg, uint64_t count,
                       trc_error *err) {
  memset(o, 0, sizeof *o);
  o->kind = cfg->optimizer;
  o->count = count;
  size_t bytes = (size_t)(count ? count : 1) * sizeof(float);
  int needs_m = trc_optimizer_needs_m(cfg), needs_v = trc_optimizer_needs_v(cfg);
  /* Zeroed and touched now, as the arena: fresh pages would otherwise cost
   * ~12 us each inside the first step (measured on this project's machine). */
  if (needs_m && !(o->m = (float *)trc_arena_alloc(bytes, err))) return -1;
  if (needs_v && !(o->v = (float *)trc_arena_alloc(bytes, err))) {
    trc_optimizer_free(o);
    return -1;
  }
  return 0;
}

void trc_optimizer_free(trc_optimizer *o) {
  trc_arena_free((char *)o->m);
  trc_arena_free((char *)o->v);
  o->m = o->v = NULL;
}

/* One optimizer step over floats [lo, hi) of the parameter region: the part
 * of each parameter that falls inside (runs on the trainer's threads: every
 * element's update is independent of the others). */
typedef struct {
  trc_optimizer *o;
  const trc_model *model;
  const trc_train_config *cfg;
  char *arena;
  double lr;
  float grad_scale;
} update_ctx;

/* Floats [at, at + n) of the parameter region, with weight decay wd. */
static void update_block(const update_ctx *u, uint64_t at, uint64_t n, double wd) {
  const trc_model *model = u->model;
  const trc_train_config *cfg = u->cfg;
  float *params = (float *)(u->arena + model->param_offset) + at;
  float *grads = (float *)(u->arena + model->grad_offset) + at;
  if (u->o->kind == TRC_SGD) {
    trc_sgd_hparams sgd = {u->lr, cfg->momentum, wd, cfg->nesterov};
    trc_sgd_update(params, grads, u->grad_scale, u->o->m ? u->o->m + at : NULL, n, &sgd);
  } else {
    trc_adamw_hparams adam = {u->lr, cfg->beta1, cfg->beta2, cfg->eps, wd, u->o->step};
    trc_adamw_update(params, grads, u->grad_scale, u->o->m + at, u->o->v + at, n, &adam);
  }
  memset(grads, 0, n * sizeof *grads);
}

/* In blocks that stay in the cache, so that the bf16 copy of what a block
 * wrote (under precision bf16) is made from the cache. */
enum { UPDATE_BLOCK = 4096 };

static void update_part(void *ctx, int i, uint64_t from, uint64_t to) {
  const update_ctx *u = ctx;
  const trc_param *p = &u->model->params[i];
  uint64_t first = (p->offset - u->model->param_offset) / sizeof(float);
  double wd = p->decay ? u->cfg->weight_decay : 0.0;
  for (uint64_t at = first + from; at < first + to; at += UPDATE_BLOCK) {
    uint64_t n = first + to - at < UPDATE_BLOCK ? first + to - at : UPDATE_BLOCK;
    update_block(u, at, n, wd);
    trc_bf16_weights_update(at, n);
  }
}

static void update_range(void *ctx, int64_t lo, int64_t hi) {
  trc_param_parts(((const update_ctx *)ctx)->model, lo, hi, update_part, ctx);
}

void trc_optimizer_step(trc_optimizer *o, const trc_model *model, const trc_train_config *cfg,
                        char *arena, double lr, float grad_scale) {
  o->step++;
  update_ctx u = {o, model, cfg, arena, lr, grad_scale};
  trc_parallel_for((int64_t)model->trained_count, update_range, &u);
  o->gradients_zero = 1;
}

/* The squared L2 norm is summed in double over at most NORM_BLOCKS blocks
 * whose size depends only on n, each block in NORM_LANES lanes (element i
 * of the block into lane i % NORM_LANES) added up in a fixed tree, then the
 * blocks in order: the same sum, bitwise, on any number of threads, and the
 * lanes vectorize (built for the baseline x86-64 alone, the lanes went
 * through memory: 26 ms for GPT-2 124M's gradients, 15 with the clones). */
#define NORM_BLOCKS TRC_NORM_BLOCKS
#define NORM_LANES TRC_NORM_LANES

typedef struct {
  const float *g;
  uint64_t n, block;
  double partial[NORM_BLOCKS];
} norm_ctx;

TRC_VECTOR_CLONES
static void sum_squares(void *ctx, int64_t lo, int64_t hi) {
  norm_ctx *c = ctx;
  for (int64_t b = lo; b < hi; b++) {
    uint64_t start = (uint64_t)b * c->block;
    uint64_t end = start + c->block < c->n ? start + c->block : c->n;
    double lane[NORM_LANES] = {0};
    uint64_t i = start;
    for (; i + NORM_LANES <= end; i += NORM_LANES)
      for (int l = 0; l < NORM_LANES; l++) lane[l] += (double)c->g[i + l] * c->g[i + l];
    for (int l = 0; i < end; i++, l++) lane[l] += (double)c->g[i] * c->g[i];
    for (int width = NORM_LANES / 2; width > 0; width /= 2)
      for (int l = 0; l < width; l++) lane[l] += lane[l + width];
    c->partial[b] = lane[0];
  }
}

/* A whole number of lanes, at least 4096 floats. */
uint64_t trc_norm_block(uint64_t n) {
  uint64_t block = (n + NORM_BLOCKS - 1) / NORM_BLOCKS;
  block = (block + NORM_LANES - 1) / NORM_LANES * NORM_LANES;
  return block < 4096 ? 4096 : block;
}

double trc_grad_norm(const float *g, uint64_t n) {
  norm_ctx c = {.g = g, .n = n, .block = trc_norm_block(n)};
  int64_t blocks = (int64_t)((n + c.block - 1) / c.block);
  trc_parallel_for(blocks, sum_squares, &c);
  double sum = 0.0;
  for (int64_t b = 0; b < blocks; b++) sum += c.partial[b];
  return sqrt(sum);
}

float trc_clip_scale(double norm, double max_norm) {
  if (max_norm > 0.0 && norm > max_norm) return (float)(max_norm / (norm + 1e-6)); /* PyTorch's 1e-6 */
  return 1.0f;
}
