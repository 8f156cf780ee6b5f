/* gradcheck.c — backward() against central differences of forward().
 *
 * For up to 24 elements of each parameter (spread evenly over it):
 *   fd = (L(p+h) - L(p-h)) / ((p+h) - (p-h)),  h = 1e-2 * max(1, |p|),
 * where the denominator uses the perturbed values as rounded to float, and
 * the element agrees when
 *   |g - fd| <= 2e-2 * max(|g|, |fd|) + 1e-3 * max(1, |L|).
 * Why these numbers: the loss is a float32, so each evaluation carries a
 * rounding error of a few ulps of |L| times the reduction's length; divided by
 * 2h = 2e-2 that is ~1e-4*|L| for batch-sized sums — the absolute term is ten
 * times that. The central difference's truncation error is O(h^2 f'''),
 * about 1e-4 relative for smooth ops at h = 1e-2, well inside 2e-2; a wrong
 * backward rule (a missing factor, a transposed operand, a dropped term) is
 * off by far more than 2%.
 *
 * Kinks (relu, max, abs): when p lies within h of a kink the central
 * difference straddles it and is meaningless. Such an element is recognised
 * by its one-sided differences disagreeing with each other; it passes if g
 * matches one of them (the slope on its own side) and is counted as a kink.
 *
 * Dropout runs in training mode with one fixed key, the same mask for every
 * evaluation of the loss. */
#include "rt_train.h"
#include "data/rt_data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHECKS_PER_PARAM 24
#define REL_TOL 2e-2
#define ABS_TOL 1e-3

typedef struct {
  int checked, failed, kinks;
  double max_grad, max_abs, max_rel;
} param_report;

/* `ignore`: the ignored label of this input (every third value), or NULL. */
static void fill_input(const trc_input *in, int index, int64_t batch, uint64_t seed,
                       const int64_t *ignore, char *slot) {
  uint64_t key = trc_rng_key(seed, TRC_STREAM_GRADCHECK, (uint64_t)index);
  uint64_t n = (uint64_t)batch * trc_input_example_elems(in);
  uint64_t range = in->index_limit > 0 ? (uint64_t)in->index_limit : in->dtype == TRC_U8 ? 256 : 10;
  for (uint64_t i = 0; i < n; i++) {
    if (in->dtype == TRC_F32) {
      float v = (float)trc_rng_normal(key, i);
      memcpy(slot + 4 * i, &v, 4);
    } else if (in->dtype == TRC_U8) {
      slot[i] = (char)(uint8_t)(trc_rng_u64(key, i) % range);
    } else {
      int32_t v = (int32_t)(trc_rng_u64(key, i) % range);
      if (ignore && i % 3 == 1) v = (int32_t)*ignore; /* rows that count for nothing */
      memcpy(slot + 4 * i, &v, 4);
    }
  }
}

static double loss_of(const trc_model *m, char *arena) {
  float loss;
  m->forward(arena);
  memcpy(&loss, arena + m->loss_offset, sizeof loss);
  return loss;
}

static int agree(double a, double b, double atol) {
  return fabs(a - b) <= REL_TOL * fmax(fabs(a), fabs(b)) + atol;
}

static void record_error(param_report *r, double g, double fd) {
  double abs_err = fabs(g - fd), scale = fmax(fabs(g), fabs(fd));
  r->max_abs = fmax(r->max_abs, abs_err);
  r->max_rel = fmax(r->max_rel, scale > 0 ? abs_err / scale : 0.0);
}

/* The one-sided slopes disagree (p is within h of a kink) and g is one of them. */
static int at_kink(double g, double Lm, double L0, double Lp, float minus, float orig, float plus,
                   double atol) {
  double right = (Lp - L0) / ((double)plus - orig), left = (L0 - Lm) / ((double)orig - minus);
  return !agree(left, right, atol) && (agree(g, left, atol) || agree(g, right, atol));
}

static void check_element(const trc_model *m, char *arena, float *p, double g, double L0,
                          param_report *r) {
  const float orig = *p;
  const double h = 1e-2 * fmax(1.0, fabs(orig)), atol = ABS_TOL * fmax(1.0, fabs(L0));
  const float plus = (float)(orig + h), minus = (float)(orig - h);
  *p = plus;
  double Lp = loss_of(m, arena);
  *p = minus;
  double Lm = loss_of(m, arena);
  *p = orig;
  double fd = (Lp - Lm) / ((double)plus - (double)minus);
  r->checked++;
  r->max_grad = fmax(r->max_grad, fabs(g));
  if (agree(g, fd, atol)) {
    record_error(r, g, fd);
  } else if (at_kink(g, Lm, L0, Lp, minus, orig, plus, atol)) {
    r->kinks++;
  } else {
    record_error(r, g, fd);
    r->failed++;
  }
}

/* `grads`: the trained parameters' gradients, laid out as the gradient region. */
static param_report check_param(const trc_model *m, char *arena, const float *grads, int index,
                                double L0) {
  const trc_param *p = &m->params[index];
  const float *grad = grads + (p->offset - m->param_offset) / sizeof(float);
  float *w = (float *)(arena + p->offset);
  param_report r = {0};
  uint64_t checks = p->count < CHECKS_PER_PARAM ? p->count : CHECKS_PER_PARAM;
  for (uint64_t k = 0; k < checks; k++) {
    uint64_t e = (2 * k + 1) * p->count / (2 * checks); /* the middle of k-th of `checks` spans */
    check_element(m, arena, w + e, grad[e], L0, &r);
  }
  return r;
}

/* Gradients of loss * 1.0 into a zeroed gradient region. */
static double forward_backward(const trc_model *m, char *arena) {
  const float seed = 1.0f;
  memset(arena + m->grad_offset, 0, m->trained_count * sizeof(float));
  memcpy(arena + m->loss_seed_offset, &seed, sizeof seed);
  double loss = loss_of(m, arena);
  m->backward(arena, NULL);
  return loss;
}

static void print_row(FILE *out, const trc_param *p, const param_report *r) {
  fprintf(out, "%-24s %9llu %7d %10.3g %10.3g %10.3g %5d  %s\n", p->name,
          (unsigned long long)p->count, r->checked, r->max_grad, r->max_abs, r->max_rel, r->kinks,
          r->failed ? "FAIL" : "ok");
}

/* Compares `grads` (backward()'s, at the point whose loss is L0) with finite
 * differences, parameter by parameter. */
static int check_gradients(const trc_model *m, char *arena, const float *grads, double L0,
                           uint64_t seed, FILE *out, trc_error *err) {
  double again = loss_of(m, arena);
  if (!isfinite(L0)) return trc_fail(err, "gradcheck: the loss is %g at the initial point", L0);
  if (again != L0)
    return trc_fail(err, "gradcheck: forward() is not deterministic (loss %.9g, then %.9g)", L0,
                    again);
  fprintf(out, "gradcheck: model %s, seed %llu, loss %.6g, h = 1e-2*max(1,|p|)\n", m->name,
          (unsigned long long)seed, L0);
  fprintf(out, "%-24s %9s %7s %10s %10s %10s %5s  %s\n", "param", "elements", "checked",
          "max|grad|", "max_abs", "max_rel", "kinks", "result");
  int failed = 0;
  for (int i = 0; i < m->n_params; i++) {
    if (m->params[i].frozen) { /* no gradient to check */
      fprintf(out, "%-24s %9llu %7s %10s %10s %10s %5s  frozen\n", m->params[i].name,
              (unsigned long long)m->params[i].count, "-", "-", "-", "-", "-");
      continue;
    }
    param_report r = check_param(m, arena, grads, i, L0);
    print_row(out, &m->params[i], &r);
    failed += r.failed;
  }
  fprintf(out, "gradcheck: %s (|g-fd| <= %g*max(|g|,|fd|) + %g*max(1,|loss|))\n",
          failed ? "FAIL" : "PASS", REL_TOL, ABS_TOL);
  return failed ? 1 : 0;
}

int trc_gradcheck(const trc_model *m, char *arena, uint64_t seed, FILE *out, trc_error *err) {
  /* Training mode with one fixed key: dropout is on and deterministic, so its
   * backward rule is checked like any other. */
  trc_set_mode(m, arena, trc_rng_key(seed, TRC_STREAM_DROPOUT, 0), 1);
  for (int i = 0; i < m->n_inputs; i++)
    fill_input(&m->inputs[i], i, m->batch, seed, trc_ignore_input(m) == i ? &m->ignore_label : NULL,
               arena + m->inputs[i].offset);
  double L0 = forward_backward(m, arena);
  /* The checks read a copy of the gradients: a model with the chunked loss
   * head adds w's gradient inside forward(), so every forward() of the
   * finite differences below changes the gradient region. */
  const size_t bytes = m->trained_count * sizeof(float);
  float *grads = malloc(bytes ? bytes : 1);
  if (!grads) return trc_fail(err, "out of memory (gradcheck)");
  memcpy(grads, arena + m->grad_offset, bytes);
  int rc = check_gradients(m, arena, grads, L0, seed, out, err);
  free(grads);
  return rc;
}
