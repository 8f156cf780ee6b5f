/* test_parallel_loops.c — kernel_mark_parallel (ir.h) marks exactly the top-level
 * loops whose iterations touch disjoint slabs of what they store: loop nests
 * built by hand (each unsafe case beside a safe twin), then the op table's
 * own kernels on small shapes. That the marked loops really give the same
 * results on 1 and 2 threads is tests/e2e/threads.sh. And kernel_grid's
 * threads (the CUDA backend's): on the same kernels, the grid each gets, and
 * an exhaustive run of every iteration proving that no element one thread
 * stores is touched by another. And kernel_drop_unit_loops: a bias add's
 * nest at batch 1, [1, 8, 4], becomes its loop of 8 rows, marked parallel,
 * storing and loading the same elements (checked by running every
 * iteration). */
#include "ir.h"
#include "check.h"

#include <stdlib.h>


enum { X = 1, Y = 2, IDS = 3 }; /* buffer ids of the hand-built kernels */

/* y[r*C + c] = x[r*C + c] - max over the row (a local of the row). */
static Kernel *row_wise(void) {
  Kernel *k = kernel_new(Y);
  int r, c, c2, m;
  KStmt *row = k_for(k, NULL, 8, &r);
  k_local(k, row, k_const(k, -1e30), &m);
  KStmt *l = k_for(k, row, 16, &c);
  KExpr *at = k_iadd(k, k_imul(k, k_index(k, r), 16), k_index(k, c));
  k_set(k, l, m, k_binary(k, KB_MAX, k_localv(k, m), k_load(k, X, at, false)));
  l = k_for(k, row, 16, &c2);
  at = k_iadd(k, k_imul(k, k_index(k, r), 16), k_index(k, c2));
  k_store(k, l, Y, at, k_binary(k, KB_SUB, k_load(k, X, at, false), k_localv(k, m)), false);
  return k;
}

/* y[ids[r]*D + d] += x[r*D + d] (embedding_grad), or at r*D + d (its safe twin). */
static Kernel *scatter(bool through_ids) {
  Kernel *k = kernel_new(Y);
  int r, d;
  KStmt *l = k_for(k, k_for(k, NULL, 8, &r), 4, &d);
  KExpr *row = through_ids ? k_load(k, IDS, k_index(k, r), true) : k_index(k, r);
  k_store(k, l, Y, k_iadd(k, k_imul(k, row, 4), k_index(k, d)),
          k_load(k, X, k_iadd(k, k_imul(k, k_index(k, r), 4), k_index(k, d)), false), true);
  return k;
}

/* for b < blocks: for r < 8: for j < width: y[ids[r]*4 + b*2 + j] += x[...]:
 * blocks of 2 columns of rows 4 wide picked by id (embedding_grad in column
 * blocks). 2 blocks of 2 are disjoint columns; 3 columns wide overlap the
 * next block; a third block runs into the next row. */
static Kernel *column_block_scatter(int64_t blocks, int64_t width) {
  Kernel *k = kernel_new(Y);
  int b, r, j;
  KStmt *l = k_for(k, k_for(k, k_for(k, NULL, blocks, &b), 8, &r), width, &j);
  KExpr *col = k_iadd(k, k_imul(k, k_index(k, b), 2), k_index(k, j));
  KExpr *at = k_iadd(k, k_imul(k, k_load(k, IDS, k_index(k, r), true), 4), col);
  col = k_iadd(k, k_imul(k, k_index(k, b), 2), k_index(k, j));
  k_store(k, l, Y, at, k_load(k, X, k_iadd(k, k_imul(k, k_index(k, r), 4), col), false), true);
  return k;
}

/* acc = sum of x; y[0] = acc: the loop sets a local declared outside it. */
static Kernel *outer_reduction(void) {
  Kernel *k = kernel_new(Y);
  int acc, i;
  k_local(k, NULL, k_const(k, 0), &acc);
  KStmt *l = k_for(k, NULL, 64, &i);
  k_set(k, l, acc, k_binary(k, KB_ADD, k_localv(k, acc), k_load(k, X, k_index(k, i), false)));
  k_store(k, NULL, Y, k_iconst(k, 0), k_localv(k, acc), false);
  return k;
}

/* for i < 63: y[i + shift] = y[i] + x[i]: with shift 1 iteration i reads what
 * iteration i-1 wrote; with shift 0 each reads only its own element. */
static Kernel *recurrence(int64_t shift) {
  Kernel *k = kernel_new(Y);
  int i;
  KStmt *l = k_for(k, NULL, 63, &i);
  KExpr *v =
      k_binary(k, KB_ADD, k_load(k, Y, k_index(k, i), false), k_load(k, X, k_index(k, i), false));
  k_store(k, l, Y, k_iadd(k, k_index(k, i), k_iconst(k, shift)), v, false);
  return k;
}

/* for r < 8, c < width: y[r*4 + c] = x[...]: rows of 4 apart, `width` wide
 * (5: neighbours overlap). */
static Kernel *strided_rows(int64_t width) {
  Kernel *k = kernel_new(Y);
  int r, c;
  KStmt *l = k_for(k, k_for(k, NULL, 8, &r), width, &c);
  KExpr *at = k_iadd(k, k_imul(k, k_index(k, r), 4), k_index(k, c));
  k_store(k, l, Y, at, k_load(k, X, k_index(k, r), false), false);
  return k;
}

/* y[c] += x[r*C + c] over rows r: every row stores to the same elements. */
static Kernel *column_sum(void) {
  Kernel *k = kernel_new(Y);
  int r, c;
  KStmt *l = k_for(k, k_for(k, NULL, 8, &r), 16, &c);
  k_store(k, l, Y, k_index(k, c),
          k_load(k, X, k_iadd(k, k_imul(k, k_index(k, r), 16), k_index(k, c)), false), true);
  return k;
}

static bool top_loop_parallel(Kernel *k, int which) {
  kernel_mark_parallel(k);
  int seen = 0;
  bool parallel = false;
  for (int i = 0; i < k->nbody; i++)
    if (k->body[i]->kind == KS_FOR && seen++ == which)
      parallel = k->body[i]->parallel;
  kernel_free(k);
  return parallel;
}

/* ---- kernel_grid, checked by running every iteration ---- */

/* The ids a scatter reads: repeated rows, so that rows picked by id collide. */
static const int64_t ids_values[] = {3, 1, 3, 0, 4, 1, 2, 0};

/* Who stored each (buffer, element) first, in a table open-addressed by key;
 * owner -1: free. */
enum { SLOTS = 1 << 18 };
typedef struct {
  int64_t key[SLOTS];
  int64_t owner[SLOTS];
} Owners;

typedef struct {
  const KGrid *grid;
  int64_t *vars;
  Owners *owners;
  bool storing; /* pass 1 records stores; pass 2 checks every access */
  bool conflict;
} Run;

static int64_t *slot(Owners *o, int buf, int64_t element) {
  int64_t key = ((int64_t)buf << 40) + element;
  uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15u >> 46;
  while (o->owner[h] != -1 && o->key[h] != key) h = (h + 1) % SLOTS;
  o->key[h] = key;
  return &o->owner[h];
}

/* The thread that runs the current iteration: the grid loops' variables. */
static int64_t thread_of(const Run *r) {
  int64_t t = 0;
  for (int c = 0; c < r->grid->n; c++)
    if (r->grid->grid[c]) t = t * r->grid->loop[c]->extent + r->vars[r->grid->loop[c]->var];
  return t;
}

static int64_t eval_index(const KExpr *e, const int64_t *vars);

static void access(Run *r, int buf, const KExpr *index, bool store) {
  if (buf == IDS) return; /* never stored */
  int64_t *owner = slot(r->owners, buf, eval_index(index, r->vars)), me = thread_of(r);
  if (r->storing && store && *owner == -1) *owner = me;
  else if (r->storing && store && *owner != me) r->conflict = true;
  else if (!r->storing && *owner != -1 && *owner != me) r->conflict = true;
}

static int64_t eval_index(const KExpr *e, const int64_t *vars) {
  switch (e->kind) {
  case KE_ICONST: return e->i;
  case KE_INDEX: return vars[e->var];
  case KE_LOAD: return ids_values[eval_index(e->a, vars) % 8];
  case KE_BINARY: {
    int64_t a = eval_index(e->a, vars), b = eval_index(e->b, vars);
    return e->op == KB_ADD ? a + b : e->op == KB_SUB ? a - b : a * b;
  }
  default: return 0;
  }
}

static void run_expr(Run *r, const KExpr *e) {
  if (!e) return;
  if (e->kind == KE_LOAD && !e->is_int) access(r, e->buf, e->a, false);
  run_expr(r, e->a);
  run_expr(r, e->b);
  run_expr(r, e->c);
}

static void run_stmts(Run *r, KStmt *const *body, int n) {
  for (int i = 0; i < n; i++) {
    const KStmt *s = body[i];
    if (s->kind == KS_FOR)
      for (r->vars[s->var] = 0; r->vars[s->var] < s->extent; r->vars[s->var]++)
        run_stmts(r, s->body, s->nbody);
    if (s->kind == KS_STORE) access(r, s->buf, s->index, true);
    run_expr(r, s->index);
    run_expr(r, s->value);
  }
}

/* Whether, on grid g of top-level loop top, no element one thread stores is
 * touched by another. */
static bool threads_disjoint(const Kernel *k, const KStmt *top, const KGrid *g) {
  static Owners owners;
  for (int i = 0; i < SLOTS; i++) owners.owner[i] = -1;
  Run r = {.grid = g, .vars = calloc((size_t)k->n_vars + 1, sizeof(int64_t)), .owners = &owners};
  KStmt *const one[] = {(KStmt *)top};
  for (int pass = 0; pass < 2; pass++) {
    r.storing = pass == 0;
    run_stmts(&r, one, 1);
  }
  free(r.vars);
  return !r.conflict;
}

/* The threads of top-level loop `which`'s grid (the kernel freed), -1 when
 * two of them touch an element one stores. */
static int64_t grid_threads(Kernel *k, int which) {
  int seen = 0;
  int64_t threads = 0;
  for (int i = 0; i < k->nbody; i++)
    if (k->body[i]->kind == KS_FOR && seen++ == which) {
      KGrid g = kernel_grid(k, k->body[i]);
      threads = threads_disjoint(k, k->body[i], &g) ? g.threads : -1;
    }
  kernel_free(k);
  return threads;
}

/* for r < 8: { acc = 0; for c < 16: { acc += x[r*16 + c]; y[r*16 + c] = acc } }:
 * a running sum, whose column loop sets the row's local. */
static Kernel *running_sum(void) {
  Kernel *k = kernel_new(Y);
  int r, c, acc;
  KStmt *row = k_for(k, NULL, 8, &r);
  k_local(k, row, k_const(k, 0), &acc);
  KStmt *l = k_for(k, row, 16, &c);
  KExpr *at = k_iadd(k, k_imul(k, k_index(k, r), 16), k_index(k, c));
  k_set(k, l, acc, k_binary(k, KB_ADD, k_localv(k, acc), k_load(k, X, at, false)));
  k_store(k, l, Y, at, k_localv(k, acc), false);
  return k;
}

/* for b < 2: for r < 4: for i < 8: for j < 8: y[j + b*8 + i*16] += x[...]:
 * a column sum to a [8, 16] bias in two blocks of 8 columns (sum_to's
 * form): the blocks are disjoint only once i is fixed. */
static Kernel *blocked_column_sum(void) {
  Kernel *k = kernel_new(Y);
  int b, r, i, j;
  KStmt *l = k_for(k, k_for(k, k_for(k, k_for(k, NULL, 2, &b), 4, &r), 8, &i), 8, &j);
  KExpr *col = k_iadd(k, k_iadd(k, k_index(k, j), k_imul(k, k_index(k, b), 8)),
                      k_imul(k, k_index(k, i), 16));
  KExpr *src = k_iadd(k, k_iadd(k, k_index(k, j), k_imul(k, k_index(k, b), 8)),
                      k_iadd(k, k_imul(k, k_index(k, i), 16), k_imul(k, k_index(k, r), 128)));
  k_store(k, l, Y, col, k_load(k, X, src, false), true);
  return k;
}

static void grids(void) {
  CHECK(grid_threads(row_wise(), 0) == 8, "row-wise: a thread per row");
  CHECK(grid_threads(strided_rows(4), 0) == 32, "adjacent rows: a thread per element");
  CHECK(grid_threads(strided_rows(5), 0) == 1, "overlapping rows: neither loop");
  CHECK(grid_threads(column_sum(), 0) == 16, "column sum: a thread per column");
  CHECK(grid_threads(scatter(true), 0) == 4, "scatter through ids: a thread per column");
  CHECK(grid_threads(column_block_scatter(2, 2), 0) == 4, "blocks of columns picked by id");
  CHECK(grid_threads(column_block_scatter(2, 3), 0) == 1, "overlapping blocks: none");
  CHECK(grid_threads(column_block_scatter(3, 2), 0) == 1, "blocks past the row's end: none");
  CHECK(grid_threads(outer_reduction(), 0) == 1, "a reduction into an outer local");
  CHECK(grid_threads(recurrence(1), 0) == 1, "y[i+1] = y[i] + x[i]");
  CHECK(grid_threads(running_sum(), 0) == 8, "a running sum: its column loop sets the row's local");
  CHECK(grid_threads(blocked_column_sum(), 0) == 128, "sum_to's blocks once a column row is fixed");
}

static void hand_built(void) {
  CHECK(top_loop_parallel(row_wise(), 0), "row-wise kernel");
  CHECK(!top_loop_parallel(scatter(true), 0), "scatter through ids");
  CHECK(top_loop_parallel(scatter(false), 0), "the same at r*D + d");
  CHECK(top_loop_parallel(column_block_scatter(2, 2), 0), "column blocks of rows picked by id");
  CHECK(!top_loop_parallel(column_block_scatter(2, 3), 0), "column blocks that overlap");
  CHECK(!top_loop_parallel(column_block_scatter(3, 2), 0), "column blocks past the row's end");
  CHECK(!top_loop_parallel(outer_reduction(), 0), "reduction into an outer local");
  CHECK(!top_loop_parallel(recurrence(1), 0), "y[i+1] = y[i] + x[i]");
  CHECK(top_loop_parallel(recurrence(0), 0), "y[i] = y[i] + x[i]");
  CHECK(!top_loop_parallel(strided_rows(5), 0), "overlapping rows");
  CHECK(top_loop_parallel(strided_rows(4), 0), "adjacent rows");
  CHECK(!top_loop_parallel(column_sum(), 0), "column sum");
  Kernel *k = row_wise(); /* inner loops are never marked */
  kernel_mark_parallel(k);
  CHECK(k->body[0]->parallel && !k->body[0]->body[1]->parallel, "inner loop of a row");
  kernel_free(k);
}

/* ---- the op table's kernels ---- */

static int leaf(Graph *g, OpKind op, DType t, Shape s) {
  int id = graph_add(g, op, NULL, 0, (SrcLoc){0}, NULL);
  g->nodes[id].dtype = t;
  g->nodes[id].shape = s;
  return id;
}

/* The kernel of op on the inputs, attr i0 (and attr.i[1] = i1). */
static Kernel *op_kernel(Graph *g, OpKind op, const int *in, int nin, int64_t i0, int64_t i1) {
  int id = graph_add_attr(g, op, in, nin, 0, i0, i1, (SrcLoc){0}, NULL);
  return op_info(op)->kernel(g, &g->nodes[id]);
}

/* kernel_grid on the op table's kernels: rows, columns, windows. */
static void grid_kernels(Graph *g, int x, int vec, int ids, int img) {
  CHECK(grid_threads(op_kernel(g, OP_SOFTMAX, &x, 1, 0, 0), 0) == 6, "softmax: a row each");
  CHECK(grid_threads(op_kernel(g, OP_GELU, &x, 1, 0, 0), 0) == 60, "gelu: an element each");
  int stats = graph_add(g, OP_LAYERNORM_STATS, &x, 1, (SrcLoc){0}, NULL);
  int ln[4] = {x, vec, vec, stats};
  CHECK(grid_threads(op_kernel(g, OP_LAYERNORM, ln, 4, 0, 0), 0) == 60,
        "layernorm: an element each");
  int lse = graph_add(g, OP_LOGSUMEXP, &x, 1, (SrcLoc){0}, NULL), ce[3] = {x, ids, lse};
  CHECK(grid_threads(op_kernel(g, OP_CROSS_ENTROPY, ce, 3, 0, 0), 0) == 1, "cross_entropy's mean");
  Shape wide = {.rank = 3, .dim = {2, 3, 32}};
  int xw = leaf(g, OP_PARAM, DT_F32, wide);
  int wstats = graph_add(g, OP_LAYERNORM_STATS, &xw, 1, (SrcLoc){0}, NULL);
  int row_bias = leaf(g, OP_PARAM, DT_F32, (Shape){.rank = 2, .dim = {3, 32}});
  int bias = leaf(g, OP_PARAM, DT_F32, (Shape){.rank = 1, .dim = {32}}), gam[3] = {xw, xw, wstats};
  CHECK(grid_threads(op_kernel(g, OP_SUM_TO, &x, 1, vec, 0), 1) == 10, "sum_to: a column each");
  CHECK(grid_threads(op_kernel(g, OP_SUM_TO, &xw, 1, bias, 0), 1) == 32, "sum_to in blocks");
  CHECK(grid_threads(op_kernel(g, OP_SUM_TO, &xw, 1, row_bias, 0), 1) == 96, "sum_to [3, 32]");
  CHECK(grid_threads(op_kernel(g, OP_LAYERNORM_GRAD_GAMMA, gam, 3, 0, 0), 1) == 32,
        "layernorm_grad_gamma: a column each");
  int table = leaf(g, OP_PARAM, DT_F32, (Shape){.rank = 2, .dim = {5, 32}});
  int wids = leaf(g, OP_INPUT, DT_I32, (Shape){.rank = 2, .dim = {2, 3}}), emb[2] = {wids, xw};
  CHECK(grid_threads(op_kernel(g, OP_EMBEDDING_GRAD, emb, 2, table, 0), 1) == 32,
        "embedding_grad's scatter: a column each");
  int pool = graph_add_attr(g, OP_MAXPOOL, &img, 1, 0, 2, 2, (SrcLoc){0}, NULL);
  int mp[2] = {img, pool};
  CHECK(grid_threads(op_kernel(g, OP_MAXPOOL, &img, 1, 2, 2), 0) == 6, "maxpool by rows: a plane each");
  CHECK(grid_threads(op_kernel(g, OP_MAXPOOL, &img, 1, 2, 1), 0) == 2 * 3 * 5 * 5,
        "maxpool, overlapping windows: a window each");
  /* a window's columns are two runs of 2 elements 6 apart, not one slab:
   * a thread per row of windows (the windows tile the 6x6 image: no zeroing
   * loop before theirs) */
  CHECK(grid_threads(op_kernel(g, OP_MAXPOOL_GRAD, mp, 2, 2, 2), 0) == 18,
        "maxpool_grad: a row of windows each");
  int cols = graph_add_attr(g, OP_IM2COL, &img, 1, 0, 3, 1, (SrcLoc){0}, NULL);
  Attr back = {.i = {3, 1}, .shape = (Shape){.rank = 4, .dim = {2, 3, 6, 6}}};
  int dimg = graph_add_op(g, OP_COL2IM, &cols, 1, &back, (SrcLoc){0}, NULL);
  CHECK(grid_threads(op_info(OP_COL2IM)->kernel(g, &g->nodes[dimg]), 1) == 6,
        "col2im: an image's channel each");
}

static void op_kernels(void) {
  Graph *g = graph_new();
  Shape rows = {.rank = 2, .dim = {6, 10}}, image = {.rank = 4, .dim = {2, 3, 6, 6}};
  int x = leaf(g, OP_PARAM, DT_F32, rows), table = leaf(g, OP_PARAM, DT_F32, rows);
  int ids = leaf(g, OP_INPUT, DT_I32, (Shape){.rank = 1, .dim = {6}});
  int img = leaf(g, OP_PARAM, DT_F32, image),
      vec = leaf(g, OP_PARAM, DT_F32, (Shape){.rank = 1, .dim = {10}});
  int lse = graph_add(g, OP_LOGSUMEXP, &x, 1, (SrcLoc){0}, NULL);
  int stats = graph_add(g, OP_LAYERNORM_STATS, &x, 1, (SrcLoc){0}, NULL);
  int ce[3] = {x, ids, lse}, ln[4] = {x, vec, vec, stats};
  CHECK(top_loop_parallel(op_kernel(g, OP_SOFTMAX, &x, 1, 0, 0), 0), "softmax rows");
  CHECK(top_loop_parallel(op_kernel(g, OP_LAYERNORM_STATS, &x, 1, 0, 0), 0), "layernorm_stats rows");
  CHECK(top_loop_parallel(op_kernel(g, OP_LAYERNORM, ln, 4, 0, 0), 0), "layernorm rows");
  CHECK(top_loop_parallel(op_kernel(g, OP_GELU, &x, 1, 0, 0), 0), "gelu");
  CHECK(top_loop_parallel(op_kernel(g, OP_LOGSUMEXP, &x, 1, 0, 0), 0), "logsumexp rows");
  CHECK(!top_loop_parallel(op_kernel(g, OP_CROSS_ENTROPY, ce, 3, 0, 0), 0),
        "cross_entropy's mean");
  CHECK(!top_loop_parallel(op_kernel(g, OP_SUM, &x, 1, 0, 0), 0), "sum");
  int emb[2] = {ids, x}; /* embedding_grad: ids, dy -> d table (attr.i[0] = table) */
  CHECK(top_loop_parallel(op_kernel(g, OP_EMBEDDING_GRAD, emb, 2, table, 0), 0),
        "embedding_grad's zeroing");
  CHECK(!top_loop_parallel(op_kernel(g, OP_EMBEDDING_GRAD, emb, 2, table, 0), 1),
        "embedding_grad's scatter");
  int tin[2] = {table, ids};
  CHECK(top_loop_parallel(op_kernel(g, OP_EMBEDDING, tin, 2, 0, 0), 0), "embedding's gather");
  int gam[3] = {x, x, stats};
  CHECK(!top_loop_parallel(op_kernel(g, OP_LAYERNORM_GRAD_GAMMA, gam, 3, 0, 0), 1),
        "layernorm_grad_gamma of 10 columns: rows in sequence");
  CHECK(!top_loop_parallel(op_kernel(g, OP_SUM_TO, &x, 1, vec, 0), 1),
        "sum_to a bias of 10 columns: rows in sequence");
  /* 32 columns: two blocks of 16, each adding its own columns */
  Shape wide = {.rank = 3, .dim = {2, 3, 32}};
  int xw = leaf(g, OP_PARAM, DT_F32, wide), bias = leaf(g, OP_PARAM, DT_F32, (Shape){.rank = 1, .dim = {32}});
  int row_bias = leaf(g, OP_PARAM, DT_F32, (Shape){.rank = 2, .dim = {3, 32}});
  int wstats = graph_add(g, OP_LAYERNORM_STATS, &xw, 1, (SrcLoc){0}, NULL);
  int wgam[3] = {xw, xw, wstats};
  CHECK(top_loop_parallel(op_kernel(g, OP_SUM_TO, &xw, 1, bias, 0), 1), "sum_to in column blocks");
  CHECK(!top_loop_parallel(op_kernel(g, OP_SUM_TO, &xw, 1, row_bias, 0), 1),
        "sum_to [2, 3, 32] -> [3, 32]: a block's columns are not one slab");
  CHECK(top_loop_parallel(op_kernel(g, OP_LAYERNORM_GRAD_GAMMA, wgam, 3, 0, 0), 1),
        "layernorm_grad_gamma in column blocks");
  int wtable = leaf(g, OP_PARAM, DT_F32, (Shape){.rank = 2, .dim = {5, 32}});
  int wids = leaf(g, OP_INPUT, DT_I32, (Shape){.rank = 2, .dim = {2, 3}});
  int wemb[2] = {wids, xw};
  CHECK(top_loop_parallel(op_kernel(g, OP_EMBEDDING_GRAD, wemb, 2, wtable, 0), 1),
        "embedding_grad in column blocks");
  int pool = graph_add_attr(g, OP_MAXPOOL, &img, 1, 0, 2, 2, (SrcLoc){0}, NULL),
      mp[2] = {img, pool};
  CHECK(top_loop_parallel(op_kernel(g, OP_MAXPOOL_GRAD, mp, 2, 2, 2), 0),
        "maxpool_grad over images"); /* windows that tile it: one loop, no zeroing */
  CHECK(top_loop_parallel(op_kernel(g, OP_IM2COL, &img, 1, 3, 1), 0), "im2col");
  grid_kernels(g, x, vec, ids, img);
  /* col2im adds overlapping windows back: parallel over images only */
  int cols = graph_add_attr(g, OP_IM2COL, &img, 1, 0, 3, 1, (SrcLoc){0}, NULL);
  Attr back = {.i = {3, 1}, .shape = image};
  int dimg = graph_add_op(g, OP_COL2IM, &cols, 1, &back, (SrcLoc){0}, NULL);
  CHECK(top_loop_parallel(op_info(OP_COL2IM)->kernel(g, &g->nodes[dimg]), 1), "col2im over images");
  graph_free(g);
}

/* The kernel of the pooling gradient `op` of dy into x's shape. */
static Kernel *pool_grad_kernel(Graph *g, OpKind op, const int *in, int nin, int x) {
  Attr a = {.shape = g->nodes[x].shape};
  int id = graph_add_op(g, op, in, nin, &a, (SrcLoc){0}, NULL);
  return op_info(op)->kernel(g, &g->nodes[id]);
}

/* An encoder's ops: one batch element per top-level iteration (the masked
 * softmax's key mask row and the pools' counts are the element's), on the
 * grid a row of scores, an element's features or one element each. */
static void encoder_kernels(void) {
  Graph *g = graph_new();
  int scores = leaf(g, OP_PARAM, DT_F32, (Shape){.rank = 4, .dim = {2, 3, 4, 4}});
  int mask = leaf(g, OP_INPUT, DT_I32, (Shape){.rank = 2, .dim = {2, 4}});
  int seq = leaf(g, OP_PARAM, DT_F32, (Shape){.rank = 3, .dim = {2, 4, 5}});
  int pooled = leaf(g, OP_PARAM, DT_F32, (Shape){.rank = 2, .dim = {2, 5}});
  int soft[2] = {scores, mask}, grad[2] = {scores, scores}, pool[2] = {seq, mask};
  int dpool[2] = {pooled, mask};
  for (int masked = 0; masked < 2; masked++) {
    CHECK(top_loop_parallel(op_kernel(g, OP_MASKED_SOFTMAX, soft, 1 + masked, 0, 0), 0),
          "masked_softmax over batch elements");
    CHECK(grid_threads(op_kernel(g, OP_MASKED_SOFTMAX, soft, 1 + masked, 0, 0), 0) == 24,
          "masked_softmax: a row each");
    CHECK(top_loop_parallel(op_kernel(g, OP_MEAN_POOL, pool, 1 + masked, 0, 0), 0),
          "mean_pool over batch elements");
    CHECK(grid_threads(op_kernel(g, OP_MEAN_POOL, pool, 1 + masked, 0, 0), 0) == 2,
          "mean_pool: a batch element each (its count, then its features)");
    CHECK(top_loop_parallel(pool_grad_kernel(g, OP_MEAN_POOL_GRAD, dpool, 1 + masked, seq), 0),
          "mean_pool_grad over batch elements");
  }
  CHECK(top_loop_parallel(op_kernel(g, OP_MASKED_SOFTMAX_GRAD, grad, 2, 0, 0), 0),
        "masked_softmax_grad over batch elements");
  CHECK(grid_threads(op_kernel(g, OP_CLS_POOL, &seq, 1, 0, 0), 0) == 10,
        "cls_pool: an element each");
  CHECK(top_loop_parallel(pool_grad_kernel(g, OP_CLS_POOL_GRAD, &pooled, 1, seq), 0),
        "cls_pool_grad over batch elements");
  CHECK(grid_threads(pool_grad_kernel(g, OP_CLS_POOL_GRAD, &pooled, 1, seq), 0) == 40,
        "cls_pool_grad: an element of dx each");
  graph_free(g);
}

/* y[(b*8 + r)*4 + c] = x[(b*8 + r)*4 + c] + x[c] over b < 1, r < 8, c < 4. */
static Kernel *bias_add_batch_1(void) {
  Kernel *k = kernel_new(Y);
  int b, r, c;
  KStmt *l = k_for(k, k_for(k, k_for(k, NULL, 1, &b), 8, &r), 4, &c);
  KExpr *at = k_iadd(k, k_imul(k, k_iadd(k, k_imul(k, k_index(k, b), 8), k_index(k, r)), 4), k_index(k, c));
  k_store(k, l, Y, at, k_binary(k, KB_ADD, k_load(k, X, at, false), k_load(k, X, k_index(k, c), false)), false);
  return k;
}

/* The value of an integer index expression with loop variables vars. */
static int64_t index_at(const KExpr *e, const int64_t *vars) {
  switch (e->kind) {
  case KE_ICONST: return e->i;
  case KE_INDEX: return vars[e->var];
  case KE_BINARY:
    return e->op == KB_ADD ? index_at(e->a, vars) + index_at(e->b, vars) : index_at(e->a, vars) * index_at(e->b, vars);
  default: return -1;
  }
}

static void unit_loops(void) {
  Kernel *k = bias_add_batch_1();
  kernel_drop_unit_loops(k);
  kernel_mark_parallel(k);
  KStmt *rows = k->body[0];
  CHECK(k->nbody == 1 && rows->kind == KS_FOR && rows->extent == 8 && rows->parallel,
        "the batch-1 nest's loop of rows is its top loop, parallel");
  KStmt *cols = rows->body[0], *store = cols->body[0];
  int64_t vars[16], stored = 0;
  for (int v = 0; v < 16; v++) vars[v] = 7; /* the dropped loop's variable, were it still read */
  for (vars[rows->var] = 0; vars[rows->var] < 8; vars[rows->var]++)
    for (vars[cols->var] = 0; vars[cols->var] < 4; vars[cols->var]++) {
      int64_t want = vars[rows->var] * 4 + vars[cols->var];
      stored += index_at(store->index, vars) == want && index_at(store->value->a->a, vars) == want &&
                index_at(store->value->b->a, vars) == vars[cols->var];
    }
  CHECK(stored == 32, "every element stored where it was, from what it read");
  kernel_free(k);
}

int main(void) {
  unit_loops();
  grids();
  hand_built();
  op_kernels();
  encoder_kernels();
  return failures != 0;
}
