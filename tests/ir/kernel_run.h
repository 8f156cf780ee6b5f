/* kernel_run.h — a small interpreter of kernels (ir.h's loop nests) for the
 * ir tests: buffers by node id, each element's loads and stores counted,
 * loops run to their run-time limit, rows of scratch (k_row) filled with
 * NaN when declared so that a read before its write shows in the values.
 * An index outside its buffer or row sets out_of_range (the access is
 * skipped); a limit past its loop's extent sets past_extent. Reductions run
 * in sequence (the lanes only reorder them). */
#ifndef TESTS_IR_KERNEL_RUN_H
#define TESTS_IR_KERNEL_RUN_H

#include "ir.h"

#include <math.h>
#include <stdlib.h>

enum { MAX_BUFS = 4, MAX_VARS = 16 };

typedef struct {
  float *buf[MAX_BUFS];
  int *stores[MAX_BUFS], *loads[MAX_BUFS];
  int64_t n[MAX_BUFS];
  int64_t var[MAX_VARS];
  float local[MAX_VARS];
  float *row[MAX_VARS]; /* a row local's elements */
  int64_t row_n[MAX_VARS];
  bool out_of_range, past_extent;
  int64_t exps; /* expf calls */
} Run;

/* Buffer b of n elements, each from value(i); its counts zero. */
static void run_buffer(Run *r, int b, int64_t n, float (*value)(int64_t)) {
  r->n[b] = n;
  r->buf[b] = malloc((size_t)n * sizeof(float));
  r->stores[b] = calloc((size_t)n, sizeof(int));
  r->loads[b] = calloc((size_t)n, sizeof(int));
  for (int64_t i = 0; i < n; i++) r->buf[b][i] = value(i);
}

static void run_free(Run *r) {
  for (int b = 0; b < MAX_BUFS; b++) free(r->buf[b]), free(r->stores[b]), free(r->loads[b]);
  for (int v = 0; v < MAX_VARS; v++) free(r->row[v]);
}

static int64_t eval_int(Run *r, const KExpr *e) {
  switch (e->kind) {
  case KE_ICONST: return e->i;
  case KE_INDEX: return r->var[e->var];
  case KE_BINARY: {
    int64_t a = eval_int(r, e->a), b = eval_int(r, e->b);
    return e->op == KB_ADD ? a + b : e->op == KB_SUB ? a - b : a * b;
  }
  default: abort(); /* no other index form in these kernels */
  }
}

/* Element `index` of row local var, or NULL (out_of_range) outside it. */
static float *row_element(Run *r, int var, const KExpr *index) {
  int64_t i = eval_int(r, index);
  if (i < 0 || i >= r->row_n[var]) {
    r->out_of_range = true;
    return NULL;
  }
  return &r->row[var][i];
}

static float eval(Run *r, const KExpr *e) {
  switch (e->kind) {
  case KE_CONST: return (float)e->f;
  case KE_LOCAL: {
    if (!e->a) return r->local[e->var];
    const float *at = row_element(r, e->var, e->a);
    return at ? *at : 0;
  }
  case KE_LOAD: {
    int64_t i = eval_int(r, e->a);
    if (i < 0 || i >= r->n[e->buf]) {
      r->out_of_range = true;
      return 0;
    }
    r->loads[e->buf][i]++;
    return r->buf[e->buf][i];
  }
  case KE_UNARY: {
    float a = eval(r, e->a);
    r->exps += e->op == KU_EXP;
    return e->op == KU_EXP ? expf(a) : e->op == KU_LOG ? logf(a) : -a;
  }
  case KE_SELECT: {
    float c = eval(r, e->a), a = eval(r, e->b), b = eval(r, e->c);
    return c > 0 ? a : b;
  }
  case KE_TO_FLOAT: return (float)eval_int(r, e->a);
  case KE_BINARY: {
    float a = eval(r, e->a), b = eval(r, e->b);
    switch (e->op) {
    case KB_ADD: return a + b;
    case KB_SUB: return a - b;
    case KB_MUL: return a * b;
    case KB_DIV: return a / b;
    case KB_MAX: return a > b || b != b ? a : b;
    default: return a < b || b != b ? a : b;
    }
  }
  default: abort();
  }
}

static void declare_row(Run *r, const KStmt *s) {
  free(r->row[s->var]);
  r->row[s->var] = malloc((size_t)s->extent * sizeof(float));
  r->row_n[s->var] = s->extent;
  for (int64_t i = 0; i < s->extent; i++) r->row[s->var][i] = NAN;
}

static void run_store(Run *r, const KStmt *s) {
  int64_t at = eval_int(r, s->index);
  if (at < 0 || at >= r->n[s->buf]) {
    r->out_of_range = true;
    return;
  }
  float v = eval(r, s->value);
  r->buf[s->buf][at] = s->accumulate ? r->buf[s->buf][at] + v : v;
  r->stores[s->buf][at]++;
}

static void run(Run *r, KStmt *const *body, int n) {
  for (int i = 0; i < n; i++) {
    const KStmt *s = body[i];
    switch (s->kind) {
    case KS_FOR: {
      int64_t end = s->limit ? eval_int(r, s->limit) : s->extent;
      r->past_extent |= end < 0 || end > s->extent;
      for (r->var[s->var] = 0; r->var[s->var] < end; r->var[s->var]++) run(r, s->body, s->nbody);
      break;
    }
    case KS_LOCAL:
      if (s->extent) declare_row(r, s);
      else r->local[s->var] = eval(r, s->value);
      break;
    case KS_SET:
      if (!s->index) {
        r->local[s->var] = eval(r, s->value);
      } else {
        float v = eval(r, s->value), *at = row_element(r, s->var, s->index);
        if (at) *at = v;
      }
      break;
    case KS_STORE: run_store(r, s); break;
    }
  }
}

#endif
