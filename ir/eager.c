/* eager.c — which selects may evaluate both arms, and which conversions to
 * float may start from 32 bits (kernel_mark_by_ranges, ir.h). A C
 * compiler must not evaluate the arm of `c ? x[i] : 0` that C leaves
 * unevaluated, so it branches instead of vectorizing (GCC 12: a relu
 * gradient ran 7x slower than with the load made unconditional). When every
 * load in both arms reads inside its buffer for every value the loop
 * variables take, evaluating them always is harmless, and the C backend
 * prints the select as a function call whose arguments are all evaluated.
 * Index expressions are int64, and x86 before AVX-512 converts an int64 to
 * float one at a time: a causal softmax of T = 64, whose mask is
 * (float)(row - column), ran scalar, 4-5x its vector time on an AVX2 CPU
 * (bench/RESULTS.md). A value that fits in 32 bits converts from 32 bits to
 * the same float, in vectors. */
#include "ir.h"

#include <stdint.h>
#include <stdlib.h>

typedef struct {
  const Graph *g;
  const Kernel *k;
  int64_t *extent; /* per loop variable */
} EagerScan;

/* Whether index e lies in [0, size) for every value of the loop variables. */
static bool index_in_bounds(const EagerScan *s, const KExpr *e, int64_t size) {
  int64_t lo, hi;
  return kexpr_range(s->k, e, s->extent, &lo, &hi) && lo >= 0 && hi < size;
}

/* Whether every load in e (its indices' loads included) and every read of
 * a row's element is in bounds. */
static bool loads_in_bounds(const EagerScan *s, const KExpr *e) {
  if (!e) return true;
  if (e->kind == KE_LOAD &&
      !index_in_bounds(s, e->a, shape_numel(&s->g->nodes[e->buf].shape)))
    return false;
  if (e->kind == KE_LOCAL && e->a && !index_in_bounds(s, e->a, e->i)) return false; /* a row's element */
  return loads_in_bounds(s, e->a) && loads_in_bounds(s, e->b) && loads_in_bounds(s, e->c);
}

/* Whether integer e fits in 32 bits for every value of the loop variables:
 * a load (integer buffers are i32 or u8), or affine within INT32's range. */
static bool fits_32_bits(const EagerScan *s, const KExpr *e) {
  int64_t lo, hi;
  if (!e->is_int) return false;
  if (e->kind == KE_LOAD) return true;
  return kexpr_range(s->k, e, s->extent, &lo, &hi) && lo >= INT32_MIN && hi <= INT32_MAX;
}

static void mark_expr(const EagerScan *s, KExpr *e) {
  if (!e) return;
  if (e->kind == KE_SELECT) /* a float select: trc_selectf's arms are floats */
    e->eager = !e->is_int && loads_in_bounds(s, e->b) && loads_in_bounds(s, e->c);
  if (e->kind == KE_TO_FLOAT) e->narrow = fits_32_bits(s, e->a);
  mark_expr(s, e->a), mark_expr(s, e->b), mark_expr(s, e->c);
}

static void mark_stmts(EagerScan *s, KStmt **body, int n) {
  for (int i = 0; i < n; i++) {
    KStmt *st = body[i];
    if (st->kind == KS_FOR) {
      s->extent[st->var] = st->extent;
      mark_stmts(s, st->body, st->nbody);
    } else {
      mark_expr(s, st->index);
      mark_expr(s, st->value);
    }
  }
}

void kernel_mark_by_ranges(const Graph *g, Kernel *k) {
  EagerScan s = {.g = g, .k = k, .extent = xcalloc((size_t)k->n_vars + 1, sizeof(int64_t))};
  mark_stmts(&s, k->body, k->nbody);
  free(s.extent);
}
