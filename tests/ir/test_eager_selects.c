/* test_eager_selects.c — kernel_mark_by_ranges (ir.h) marks a select
 * eager exactly when every load in its arms is inside its buffer for every
 * value of the loop variables: hand-built kernels, each unsafe case beside a
 * safe twin, and the op table's relu gradient; and a conversion to float
 * narrow exactly when its integer fits in 32 bits over the loops. */
#include "ir.h"
#include "check.h"

#include <stdint.h>
#include <stdlib.h>

static int leaf(Graph *g, DType t, int64_t n) {
  int id = graph_add(g, OP_INPUT, NULL, 0, (SrcLoc){0}, NULL);
  g->nodes[id].dtype = t;
  g->nodes[id].shape = (Shape){.rank = 1, .dim = {n}};
  return id;
}

/* for i < 8: y[i] = x[i] > 0 ? x[i + shift] : 0 (x has 8 + extra elements),
 * the arm's load optionally at ids[i] (a gather) instead. */
static bool eager_shifted(Graph *g, int64_t shift, int64_t extra, bool gather) {
  int x = leaf(g, DT_F32, 8 + extra), ids = leaf(g, DT_I32, 8), y = leaf(g, DT_F32, 8);
  Kernel *k = kernel_new(y);
  int i;
  KStmt *l = k_for(k, NULL, 8, &i);
  KExpr *at = gather ? k_load(k, ids, k_index(k, i), true) : k_iadd(k, k_index(k, i), k_iconst(k, shift));
  KExpr *sel = k_select(k, k_load(k, x, k_index(k, i), false), k_load(k, x, at, false), k_const(k, 0));
  k_store(k, l, y, k_index(k, i), sel, false);
  kernel_mark_by_ranges(g, k);
  bool eager = sel->eager;
  kernel_free(k);
  return eager;
}

/* for i < extent: y[i] = (float)(i * scale + offset), or (float)ids[i]. */
static bool narrow_conversion(Graph *g, int64_t extent, int64_t scale, int64_t offset, bool load) {
  int ids = leaf(g, DT_I32, extent), y = leaf(g, DT_F32, extent);
  Kernel *k = kernel_new(y);
  int i;
  KStmt *l = k_for(k, NULL, extent, &i);
  KExpr *v = load ? k_load(k, ids, k_index(k, i), true)
                  : k_iadd(k, k_imul(k, k_index(k, i), scale), k_iconst(k, offset));
  KExpr *f = k_to_float(k, v);
  k_store(k, l, y, k_index(k, i), f, false);
  kernel_mark_by_ranges(g, k);
  bool narrow = f->narrow;
  kernel_free(k);
  return narrow;
}

int main(void) {
  Graph *g = graph_new();
  CHECK(eager_shifted(g, 0, 0, false), "x[i] over x's 8 elements");
  CHECK(eager_shifted(g, 1, 1, false), "x[i + 1] over 9 elements");
  CHECK(!eager_shifted(g, 1, 0, false), "x[i + 1] past the 8th element");
  CHECK(!eager_shifted(g, -1, 0, false), "x[i - 1] before the first");
  CHECK(!eager_shifted(g, 0, 0, true), "x[ids[i]]: an index loaded from memory");
  CHECK(narrow_conversion(g, 8, 1, -4, false), "i - 4 over 8");
  CHECK(narrow_conversion(g, 2, INT32_MAX, 0, false), "i * INT32_MAX over 2: at most INT32_MAX");
  CHECK(!narrow_conversion(g, 3, INT32_MAX, 0, false), "i * INT32_MAX over 3: past it");
  CHECK(narrow_conversion(g, 2, -INT32_MAX - 1, 0, false), "i * INT32_MIN over 2: at least INT32_MIN");
  CHECK(!narrow_conversion(g, 2, -INT32_MAX - 1, -1, false), "one below INT32_MIN");
  CHECK(narrow_conversion(g, 8, 0, 0, true), "ids[i]: an i32 load");
  int x = leaf(g, DT_F32, 24), dy = leaf(g, DT_F32, 24), in[2] = {x, dy};
  int id = graph_add(g, OP_RELU_GRAD, in, 2, (SrcLoc){0}, NULL);
  Kernel *k = op_info(OP_RELU_GRAD)->kernel(g, &g->nodes[id]);
  kernel_mark_by_ranges(g, k);
  const KStmt *s = k->body[0];
  while (s->kind == KS_FOR) s = s->body[s->nbody - 1];
  CHECK(s->value->kind == KE_SELECT && s->value->eager, "relu_grad's dy[i] where x[i] > 0");
  kernel_free(k);
  graph_free(g);
  return failures != 0;
}
