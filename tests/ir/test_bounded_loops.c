/* test_bounded_loops.c — loops with a run-time bound (KStmt.limit, ir.h),
 * checked on the ops that have them: causal_softmax and its gradient from
 * T = 128 on (shorter rows run whole, the columns past the diagonal masked:
 * checked here too).
 *
 * Their kernels are run here by a small interpreter (kernel_run.h) that
 * honours each loop's limit, and checked against the formulas computed directly in double: row t
 * of each [T, T] matrix is softmax(scale * x) over columns c <= t and 0
 * above; the gradient is scale * y * (dy - sum_{c<=t} y * dy), 0 above.
 * Bounded, the forward kernel calls expf T(T + 1) times per matrix (2T^2
 * for causal_mask then softmax, or whole rows). Every output element is
 * stored exactly once (the bounded column loop and the loop of zeros tile
 * the row), and, bounded, no column above the diagonal of an input is ever
 * loaded (the masked half is never read). Then the analyses:
 * the loop over matrices is parallel, the CUDA grid is one thread per row
 * (the bounded loops are no grid loops), and a loop's limit is part of its
 * kernel's form. A bound off by one either way fails here. */
#include "ir.h"
#include "check.h"
#include "kernel_run.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A graph of x [M, T, T] (node 0), dy (node 1), y = causal_softmax(x)
 * (node 2) and dx = causal_softmax_grad(y, dy) (node 3). */
static Graph *causal_graph(int64_t m, int64_t t, double scale) {
  Graph *g = graph_new();
  for (int i = 0; i < 2; i++) {
    int leaf = graph_add(g, OP_PARAM, NULL, 0, (SrcLoc){0}, NULL);
    g->nodes[leaf].shape = (Shape){.rank = 3, .dim = {m, t, t}};
  }
  int x = 0, y_dy[2];
  graph_add_attr(g, OP_CAUSAL_SOFTMAX, &x, 1, scale, 0, 0, (SrcLoc){0}, NULL);
  y_dy[0] = 2, y_dy[1] = 1;
  graph_add_attr(g, OP_CAUSAL_SOFTMAX_GRAD, y_dy, 2, scale, 0, 0, (SrcLoc){0}, NULL);
  return g;
}

/* Runs node id's kernel on the buffers of r; checks its stores and loads. */
static void run_node(const Graph *g, int id, Run *r, int64_t t, bool bounded, const char *what) {
  Kernel *k = op_info(g->nodes[id].op)->kernel(g, &g->nodes[id]);
  for (int b = 0; b < MAX_BUFS; b++) {
    memset(r->stores[b], 0, (size_t)r->n[b] * sizeof(int));
    memset(r->loads[b], 0, (size_t)r->n[b] * sizeof(int));
  }
  run(r, k->body, k->nbody);
  CHECK(!r->out_of_range && !r->past_extent, what);
  for (int64_t i = 0; i < r->n[id]; i++) {
    int64_t row = i / t % t, col = i % t;
    CHECK(r->stores[id][i] == 1, what); /* every element once, the zeros too */
    for (int in = 0; in < g->nodes[id].nin; in++) {
      int b = g->nodes[id].in[in];
      bool above = col > row;
      CHECK(above && bounded ? r->loads[b][i] == 0 : r->loads[b][i] > 0, what);
    }
  }
  kernel_free(k);
}

static bool close_to(double got, double want) {
  return fabs(got - want) <= 1e-5 * (1 + fabs(want));
}

/* y and dx against the formulas, in double. */
static void check_values(const Run *r, int64_t m, int64_t t, double scale, const char *what) {
  const float *x = r->buf[0], *dy = r->buf[1], *y = r->buf[2], *dx = r->buf[3];
  for (int64_t row = 0; row < m * t; row++) {
    int64_t last = row % t; /* the row's position: columns 0..last are kept */
    const int64_t at = row * t;
    double max = -INFINITY, sum = 0, dot = 0;
    for (int64_t c = 0; c <= last; c++) max = fmax(max, scale * x[at + c]);
    for (int64_t c = 0; c <= last; c++) sum += exp(scale * x[at + c] - max);
    for (int64_t c = 0; c <= last; c++) dot += exp(scale * x[at + c] - max) / sum * dy[at + c];
    for (int64_t c = 0; c < t; c++) {
      double want_y = c <= last ? exp(scale * x[at + c] - max) / sum : 0;
      double want_dx = c <= last ? scale * want_y * (dy[at + c] - dot) : 0;
      CHECK(close_to(y[at + c], want_y), what);
      CHECK(close_to(dx[at + c], want_dx), what);
      if (c > last) CHECK(y[at + c] == 0 && dx[at + c] == 0, what); /* exactly 0 */
    }
  }
}

static float uniform(int64_t i) {
  (void)i;
  return (float)rand() / RAND_MAX * 4 - 2;
}

static void check_causal(int64_t m, int64_t t, double scale, const char *what) {
  Graph *g = causal_graph(m, t, scale);
  Run r = {0};
  srand(7);
  for (int b = 0; b < MAX_BUFS; b++) run_buffer(&r, b, m * t * t, uniform);
  bool bounded = t >= 128;
  run_node(g, 2, &r, t, bounded, what);
  /* two per kept column (the sum, the store): T(T + 1) per matrix, not 2T^2 */
  CHECK(r.exps == m * t * (bounded ? t + 1 : 2 * t), what);
  run_node(g, 3, &r, t, bounded, what);
  check_values(&r, m, t, scale, what);
  run_free(&r);
  graph_free(g);
}

/* The loop over matrices is parallel; the grid has a thread per row, never
 * one per column of a bounded loop. */
static void check_analyses(void) {
  Graph *g = causal_graph(3, 130, 0.5);
  for (int id = 2; id <= 3; id++) {
    Kernel *k = op_info(g->nodes[id].op)->kernel(g, &g->nodes[id]);
    kernel_mark_parallel(k);
    CHECK(k->nbody == 1 && k->body[0]->parallel, "causal kernels: parallel over matrices");
    KGrid grid = kernel_grid(k, k->body[0]);
    CHECK(grid.threads == 3 * 130, "causal kernels: a CUDA thread per row");
    kernel_free(k);
  }
  graph_free(g);
}

/* y[r*4 + c] = x[r*4 + c] for c < extent 4, bounded by r + 1 or not. */
static Kernel *copy_rows(bool bounded) {
  Kernel *k = kernel_new(2);
  int r, c;
  KStmt *row = k_for(k, NULL, 4, &r);
  KStmt *col = bounded ? k_for_bounded(k, row, 4, k_iadd(k, k_index(k, r), k_iconst(k, 1)), &c)
                       : k_for(k, row, 4, &c);
  KExpr *at = k_iadd(k, k_imul(k, k_index(k, r), 4), k_index(k, c));
  k_store(k, col, 2, at, k_load(k, 0, at, false), false);
  return k;
}

static void check_form(void) {
  Graph *g = causal_graph(1, 4, 1);
  Kernel *a = copy_rows(false), *b = copy_rows(true);
  KernelForm fa = kernel_form(g, 2, a), fb = kernel_form(g, 2, b);
  CHECK(strcmp(fa.code, fb.code) != 0, "a loop's limit is part of its kernel's form");
  kernel_form_free(&fa);
  kernel_form_free(&fb);
  kernel_free(a);
  kernel_free(b);
  graph_free(g);
}

int main(void) {
  check_causal(2, 130, 0.5, "causal T = 130 (bounded)"); /* [2, 130, 130] */
  check_causal(1, 128, 0.25, "causal T = 128 (bounded)");
  check_causal(2, 20, 0.5, "causal T = 20 (whole rows, past K_LANES)");
  check_causal(3, 5, 0.25, "causal T = 5 (whole rows)");
  check_causal(2, 1, 1.0, "causal T = 1 (no zeros)");
  check_analyses();
  check_form();
  return failures != 0;
}
