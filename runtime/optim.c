/* optim.c — SGD and AdamW with PyTorch's semantics, as flat loops over
 * contiguous f32 slices that the compiler vectorizes; gradient clipping.
 *
 * Per-step scalars are computed once in double (as PyTorch does in Python)
 * and rounded to float; the element loops are pure float, in PyTorch's order
 * of operations. */
#include "rt_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The library is built for the baseline ISA; on x86-64 the element loops are
 * also compiled for AVX2 and AVX-512 and picked at load time. Each element is
 * computed by the same IEEE operations in every clone (no FMA contraction in
 * ISO C mode, no reductions), so results are bitwise the same. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VECTOR_CLONES
#endif

/* torch.optim.SGD, dampening 0: g += wd*p; buf = momentum*buf + g;
 * g = nesterov ? g + momentum*buf : buf; p -= lr*g. The first step's
 * buf = g falls out of buf starting at zero. */
VECTOR_CLONES
void trc_sgd_update(float *restrict p, const float *restrict g, float *restrict buf, uint64_t n,
                    const trc_sgd_hparams *h) {
  const float lr = (float)h->lr, mu = (float)h->momentum, wd = (float)h->weight_decay;
  if (mu == 0.0f) {
    for (uint64_t i = 0; i < n; i++) p[i] -= lr * (g[i] + wd * p[i]);
    return;
  }
  if (h->nesterov) {
    for (uint64_t i = 0; i < n; i++) {
      float d = g[i] + wd * p[i];
      buf[i] = mu * buf[i] + d;
      p[i] -= lr * (d + mu * buf[i]);
    }
  } else {
    for (uint64_t i = 0; i < n; i++) {
      float d = g[i] + wd * p[i];
      buf[i] = mu * buf[i] + d;
      p[i] -= lr * buf[i];
    }
  }
}

/* torch.optim.AdamW (single-tensor path): p *= 1 - lr*wd;
 * m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
 * p -= (lr/bc1) * m / (sqrt(v)/sqrt(bc2) + eps). */
VECTOR_CLONES
void trc_adamw_update(float *restrict p, const float *restrict g, float *restrict m,
                      float *restrict v, uint64_t n, const trc_adamw_hparams *h) {
  const double bc1 = 1.0 - pow(h->beta1, (double)h->step);
  const double bc2 = 1.0 - pow(h->beta2, (double)h->step);
  const float decay = (float)(1.0 - h->lr * h->weight_decay);
  const float b1 = (float)h->beta1, b2 = (float)h->beta2, c1 = (float)(1.0 - h->beta1),
              c2 = (float)(1.0 - h->beta2), eps = (float)h->eps;
  const float step_size = (float)(h->lr / bc1), bc2_sqrt = (float)sqrt(bc2);
  for (uint64_t i = 0; i < n; i++) {
    float gi = g[i];
    p[i] *= decay;
    m[i] = b1 * m[i] + c1 * gi;
    v[i] = b2 * v[i] + c2 * (gi * gi);
    p[i] -= step_size * (m[i] / (sqrtf(v[i]) / bc2_sqrt + eps));
  }
}

int trc_optimizer_init(trc_optimizer *o, const trc_train_config *cfg, uint64_t count,
                       trc_error *err) {
  memset(o, 0, sizeof *o);
  o->kind = cfg->optimizer;
  o->count = count;
  size_t bytes = (size_t)(count ? count : 1) * sizeof(float);
  int needs_m = cfg->optimizer == TRC_ADAMW || cfg->momentum != 0.0;
  int needs_v = cfg->optimizer == TRC_ADAMW;
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

void trc_optimizer_step(trc_optimizer *o, const trc_model *model, const trc_train_config *cfg,
                        char *arena, double lr) {
  o->step++;
  trc_sgd_hparams sgd = {lr, cfg->momentum, 0.0, cfg->nesterov};
  trc_adamw_hparams adam = {lr, cfg->beta1, cfg->beta2, cfg->eps, 0.0, o->step};
  for (int i = 0; i < model->n_params; i++) {
    const trc_param *p = &model->params[i];
    uint64_t first = (p->offset - model->param_offset) / sizeof(float);
    float *w = (float *)(arena + p->offset);
    const float *g = (const float *)(arena + model->grad_offset) + first;
    double wd = p->decay ? cfg->weight_decay : 0.0;
    if (o->kind == TRC_SGD) {
      sgd.weight_decay = wd;
      trc_sgd_update(w, g, o->m ? o->m + first : NULL, p->count, &sgd);
    } else {
      adam.weight_decay = wd;
      trc_adamw_update(w, g, o->m + first, o->v + first, p->count, &adam);
    }
  }
}

double trc_clip_grad_norm(float *g, uint64_t n, double max_norm) {
  double sum = 0.0;
  for (uint64_t i = 0; i < n; i++) sum += (double)g[i] * g[i];
  double norm = sqrt(sum);
  if (max_norm > 0.0 && norm > max_norm) {
    float scale = (float)(max_norm / (norm + 1e-6)); /* PyTorch's 1e-6 */
    for (uint64_t i = 0; i < n; i++) g[i] *= scale;
  }
  return norm;
}
