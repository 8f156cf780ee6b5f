/* test_pool_rows.c — max- and average-pools by rows (ir/ops/images.c:
 * windows that tile each image row fold a plane's window rows into a row of
 * scratch, then each window's run in it), and the element-by-element form
 * they fall back to (overlapping windows).
 *
 * Each kernel runs in the interpreter of kernel_run.h and is checked against
 * the pool computed here directly: a max skips NaNs (a window all NaN gives
 * NaN), -inf stays -inf; a mean, in double, within float rounding. Every
 * output element is stored once, no access leaves its buffer or row, and the
 * row is never read before it is written (the interpreter fills it with
 * NaN: a max over finite values would show it). Then the form each shape
 * gets and its analyses: parallel over planes, a CUDA thread per plane. */
#include "ir.h"
#include "check.h"
#include "kernel_run.h"

#include <stdio.h>

/* x (node 0) [n, c, h, w] and its pool (node 1). */
static Graph *pool_graph(OpKind op, Shape x, int64_t size, int64_t stride) {
  Graph *g = graph_new();
  int img = graph_add(g, OP_PARAM, NULL, 0, (SrcLoc){0}, NULL);
  g->nodes[img].shape = x;
  graph_add_attr(g, op, &img, 1, 0, size, stride, (SrcLoc){0}, NULL);
  return g;
}

/* Ties, zeros of both signs, NaNs and -inf, in a scattered order. */
static float awkward(int64_t i) {
  static const float v[] = {0.5f, -1.0f, 0.5f, -0.0f, 0.0f, NAN, 2.0f, -INFINITY, 1.25f, 0.5f, -3.0f};
  return v[(i * 7 + i / 5) % (int64_t)(sizeof v / sizeof v[0])];
}

/* Finite, for means: a few values, many ties. */
static float finite(int64_t i) { return (float)((i * 5 + i / 3) % 9) * 0.25f - 1.0f; }

/* The pool of window (plane, oh, ow), computed directly. */
static double window_value(const Run *r, const Shape *x, OpKind op, int64_t size, int64_t stride, int64_t plane,
                           int64_t oh, int64_t ow) {
  double max = NAN, sum = 0;
  for (int64_t i = 0; i < size; i++)
    for (int64_t j = 0; j < size; j++) {
      float v = r->buf[0][(plane * x->dim[2] + oh * stride + i) * x->dim[3] + ow * stride + j];
      sum += v;
      if (!isnan(v) && (isnan(max) || v > max)) max = v;
    }
  return op == OP_MAXPOOL ? max : sum / (double)(size * size);
}

static bool same(double got, double want, OpKind op) {
  if (op == OP_MAXPOOL) return isnan(want) ? isnan(got) : got == want;
  return fabs(got - want) <= 1e-6 * (1 + fabs(want));
}

static void check_pool(OpKind op, Shape x, int64_t size, int64_t stride, bool by_rows, const char *what) {
  Graph *g = pool_graph(op, x, size, stride);
  const Node *y = &g->nodes[1];
  Run r = {0};
  run_buffer(&r, 0, shape_numel(&x), op == OP_MAXPOOL ? awkward : finite);
  run_buffer(&r, 1, shape_numel(&y->shape), finite);
  Kernel *k = op_info(op)->kernel(g, y);
  bool has_row = k->body[0]->nbody > 0 && k->body[0]->body[0]->kind == KS_LOCAL && k->body[0]->body[0]->extent > 0;
  CHECK(has_row == by_rows, what);
  run(&r, k->body, k->nbody);
  CHECK(!r.out_of_range && !r.past_extent, what);
  int64_t planes = x.dim[0] * x.dim[1], oh_n = y->shape.dim[2], ow_n = y->shape.dim[3];
  for (int64_t p = 0; p < planes; p++)
    for (int64_t oh = 0; oh < oh_n; oh++)
      for (int64_t ow = 0; ow < ow_n; ow++) {
        int64_t at = (p * oh_n + oh) * ow_n + ow;
        CHECK(r.stores[1][at] == 1, what);
        CHECK(same(r.buf[1][at], window_value(&r, &x, op, size, stride, p, oh, ow), op), what);
      }
  kernel_free(k);
  run_free(&r);
  graph_free(g);
}

/* The row form runs its planes in parallel, one CUDA thread a plane. */
static void check_analyses(void) {
  Shape x = {.rank = 4, .dim = {2, 3, 8, 8}};
  Graph *g = pool_graph(OP_MAXPOOL, x, 2, 2);
  Kernel *k = op_info(OP_MAXPOOL)->kernel(g, &g->nodes[1]);
  kernel_mark_parallel(k);
  CHECK(k->nbody == 1 && k->body[0]->parallel, "maxpool by rows: parallel over planes");
  CHECK(kernel_grid(k, k->body[0]).threads == 6, "maxpool by rows: a CUDA thread per plane");
  kernel_mark_by_ranges(g, k); /* reads rows in no select: nothing to mark, nothing to trip on */
  kernel_free(k);
  graph_free(g);
}

int main(void) {
  check_pool(OP_MAXPOOL, (Shape){.rank = 4, .dim = {2, 3, 8, 8}}, 2, 2, true, "maxpool 2 by rows");
  check_pool(OP_MAXPOOL, (Shape){.rank = 4, .dim = {1, 2, 6, 9}}, 3, 3, true, "maxpool 3 by rows");
  check_pool(OP_MAXPOOL, (Shape){.rank = 4, .dim = {1, 2, 7, 6}}, 2, 2, true,
             "maxpool 2 by rows, the last image row left out");
  check_pool(OP_MAXPOOL, (Shape){.rank = 4, .dim = {1, 2, 7, 7}}, 2, 2, false,
             "maxpool 2 on 7 columns: element by element");
  check_pool(OP_MAXPOOL, (Shape){.rank = 4, .dim = {1, 1, 7, 7}}, 3, 2, false,
             "maxpool 3 stride 2 (windows overlap): element by element");
  check_pool(OP_AVGPOOL, (Shape){.rank = 4, .dim = {2, 3, 8, 8}}, 2, 2, true, "avgpool 2 by rows");
  check_pool(OP_AVGPOOL, (Shape){.rank = 4, .dim = {1, 2, 6, 9}}, 3, 3, true, "avgpool 3 by rows");
  check_pool(OP_AVGPOOL, (Shape){.rank = 4, .dim = {1, 1, 8, 8}}, 3, 3, false,
             "avgpool 3 on 8 columns: element by element");
  check_analyses();
  printf("test_pool_rows: %d failures\n", failures);
  return failures != 0;
}
