/* eager.c — which selects may evaluate both arms (kernel_mark_eager_selects,
 * ir.h). A C compiler must not evaluate the arm of `c ? x[i] : 0` that C
 * leaves unevaluated, so it branches instead of vectorizing (GCC 12: a
 * relu gradient ran 7x slower than with the load made unconditional). When
 * every load in both arms reads inside its buffer for every value the loop
 * variables take, evaluating them always is harmless, and the C backend
 * prints the select as a function call whose arguments are all evaluated. */
#include "ir.h"

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

/* Whether every load in e (its indices' loads included) is in bounds. */
static bool loads_in_bounds(const EagerScan *s, const KExpr *e) {
  if (!e) return true;
  if (e->kind == KE_LOAD &&
      !index_in_bounds(s, e->a, shape_numel(&s->g->nodes[e->buf].shape)))
    return false;
  return loads_in_bounds(s, e->a) && loads_in_bounds(s, e->b) && loads_in_bounds(s, e->c);
}

static void mark_expr(const EagerScan *s, KExpr *e) {
  if (!e) return;
  if (e->kind == KE_SELECT) /* a float select: trc_selectf's arms are floats */
    e->eager = !e->is_int && loads_in_bounds(s, e->b) && loads_in_bounds(s, e->c);
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

void kernel_mark_eager_selects(const Graph *g, Kernel *k) {
  EagerScan s = {.g = g, .k = k, .extent = xcalloc((size_t)k->n_vars + 1, sizeof(int64_t))};
  mark_stmts(&s, k->body, k->nbody);
  free(s.extent);
}
