/* test_loop_work.c — what the cost model counts in a loop kernel besides its
 * FLOPs (ir.h), on the op table's kernels, against counts worked out by hand:
 *   - kernel_math_calls: erff per element of a GELU, erff and expf per
 *     element of its gradient, none in a relu; a causal softmax (bounded at
 *     the diagonal from T = 128) counts its rows' loops at their extents,
 *     and its log-sum-exp's logf once a row;
 *   - kernel_short_row_work: a 2x2 max-pool by rows (windows that tile
 *     the rows) loads 2 elements and sets 1 of its row a column, then
 *     reads 2 of the row and stores 1 a window (9 a window); with
 *     overlapping windows it reads 4 elements and stores 1 a window; its
 *     gradient reads the window once to find the maximum,
 *     then reads dy, x (the fused relu's mask) and stores each element
 *     (4 + 3 * 4 a window; 4 + 2 * 4 without the mask); elementwise and
 *     softmax kernels have no windows;
 *   - kernel_random_draws: dropout draws one number an element (in its
 *     forward and its backward alike), a GELU none. */
#include "ir.h"
#include "check.h"

static int leaf(Graph *g, Shape s) {
  int id = graph_add(g, OP_PARAM, NULL, 0, (SrcLoc){0}, NULL);
  g->nodes[id].shape = s;
  return id;
}

/* Node id's kernel's counts. */
static double math_calls(const Graph *g, int id) {
  Kernel *k = op_info(g->nodes[id].op)->kernel(g, &g->nodes[id]);
  double calls = kernel_math_calls(k);
  kernel_free(k);
  return calls;
}

static double random_draws(const Graph *g, int id) {
  Kernel *k = op_info(g->nodes[id].op)->kernel(g, &g->nodes[id]);
  double draws = kernel_random_draws(k);
  kernel_free(k);
  return draws;
}

static ShortRowWork short_rows(const Graph *g, int id) {
  Kernel *k = op_info(g->nodes[id].op)->kernel(g, &g->nodes[id]);
  ShortRowWork w = kernel_short_row_work(k);
  kernel_free(k);
  return w;
}

static double window_accesses(const Graph *g, int id) { return short_rows(g, id).accesses; }

static void test_math_calls(void) {
  Graph *g = graph_new();
  int x = leaf(g, (Shape){.rank = 2, .dim = {3, 5}}), dy = leaf(g, (Shape){.rank = 2, .dim = {3, 5}});
  int gelu = graph_add(g, OP_GELU, &x, 1, (SrcLoc){0}, NULL);
  int grad = graph_add(g, OP_GELU_GRAD, (int[2]){x, dy}, 2, (SrcLoc){0}, NULL);
  int relu = graph_add(g, OP_RELU, &x, 1, (SrcLoc){0}, NULL);
  CHECK(math_calls(g, gelu) == 15, "gelu: an erff an element");
  CHECK(math_calls(g, grad) == 30, "gelu_grad: an erff and an expf an element");
  CHECK(math_calls(g, relu) == 0, "relu: none");
  CHECK(window_accesses(g, gelu) == 0 && window_accesses(g, relu) == 0, "elementwise: no windows");
  int s = leaf(g, (Shape){.rank = 3, .dim = {2, 128, 128}});
  int soft = graph_add_attr(g, OP_CAUSAL_SOFTMAX, &s, 1, 1.0, 0, 0, (SrcLoc){0}, NULL);
  CHECK(math_calls(g, soft) == 2.0 * 128 * (2 * 128 + 1),
        "causal softmax: an expf an element in the sum and in the store, each row at its extent, and a logf a row");
  CHECK(window_accesses(g, soft) == 0, "causal softmax: a bounded row is no row of windows");
  graph_free(g);
}

static void test_window_accesses(void) {
  Graph *g = graph_new();
  Shape img = {.rank = 4, .dim = {2, 3, 8, 8}};
  int x = leaf(g, img), dy = leaf(g, (Shape){.rank = 4, .dim = {2, 3, 4, 4}});
  double windows = 2.0 * 3 * 4 * 4;
  int pool = graph_add_attr(g, OP_MAXPOOL, &x, 1, 0, 2, 2, (SrcLoc){0}, NULL);
  /* by rows (ir/ops/images.c): each of a window's 2 columns 2 loads and a
   * row's element set, then the window's 2 row elements read and a store */
  ShortRowWork rows = short_rows(g, pool);
  CHECK(rows.accesses == (2 * 3 + 3) * windows && rows.scratch, "maxpool by rows: 9 accesses a window");
  CHECK(rows.runs == 2 * 3 * (4 + 1), "maxpool by rows: a row of 8 columns an output row, a row of cells a plane");
  int loose = graph_add_attr(g, OP_MAXPOOL, &x, 1, 0, 2, 1, (SrcLoc){0}, NULL); /* overlapping: 7x7 windows */
  ShortRowWork each = short_rows(g, loose);
  CHECK(each.accesses == 5.0 * 2 * 3 * 7 * 7 && !each.scratch, "maxpool by elements: 4 loads and a store a window");
  CHECK(each.runs == 2 * 3 * 7, "maxpool by elements: a row of windows an output row");
  CHECK(math_calls(g, pool) == 0, "maxpool: no math calls");
  Attr a = g->nodes[pool].attr;
  int grad = graph_add_op(g, OP_MAXPOOL_GRAD, (int[2]){x, dy}, 2, &a, (SrcLoc){0}, NULL);
  CHECK(window_accesses(g, grad) == (4 + 2 * 4) * windows, "maxpool_grad: the window, then dy and a store");
  a.i[2] = 1; /* the POOL pass's fused relu mask */
  int masked = graph_add_op(g, OP_MAXPOOL_GRAD, (int[2]){x, dy}, 2, &a, (SrcLoc){0}, NULL);
  CHECK(window_accesses(g, masked) == (4 + 3 * 4) * windows, "maxpool_grad with relu: and x's mask");
  graph_free(g);
}

static void test_random_draws(void) {
  Graph *g = graph_new();
  int x = leaf(g, (Shape){.rank = 2, .dim = {3, 5}}), key = leaf(g, (Shape){.rank = 1, .dim = {2}});
  int training = leaf(g, (Shape){.rank = 0});
  g->nodes[key].dtype = DT_I32;
  Attr a = {.f = {0.25}, .i = {0}};
  int drop = graph_add_op(g, OP_DROPOUT, (int[3]){x, key, training}, 3, &a, (SrcLoc){0}, NULL);
  int gelu = graph_add(g, OP_GELU, &x, 1, (SrcLoc){0}, NULL);
  CHECK(random_draws(g, drop) == 15, "dropout: a draw an element");
  CHECK(math_calls(g, drop) == 0, "dropout: no math calls");
  CHECK(random_draws(g, gelu) == 0, "gelu: no draws");
  graph_free(g);
}

int main(void) {
  test_math_calls();
  test_window_accesses();
  test_random_draws();
  printf("test_loop_work: %d failures\n", failures);
  return failures != 0;
}
