/* norm.c — layernorm: its statistics, the normalization, and the gradients
 * of x and of gamma. */
#include "ops_internal.h"

#include <math.h>
#include <stdlib.h>

bool infer_layernorm(const Graph *g, Node *n, Diag *diag) {
  if (!infer_rows(g, n, diag)) return false;
  Shape vec = {.rank = 1, .dim = {last_dim(&n->shape)}};
  for (int i = 1; i < 3; i++) {
    if (!shape_equal(&in_node(g, n, i)->shape, &vec)) {
      char s1[128], s2[128];
      diag_error(diag, n->loc, "layernorm: parameter %s does not match the last axis of %s",
                 shape_str(&in_node(g, n, i)->shape, s1), shape_str(&n->shape, s2));
      return false;
    }
  }
  return true;
}

/* Mean and 1/sqrt(var + eps) of row `x` (biased variance, as PyTorch). */
static void row_moments(RowLoop *rl, int x, double eps, int *mean, int *rstd) {
  Kernel *k = rl->k;
  double inv_c = 1.0 / (double)rl->cols;
  RowCtx ctx = {.buf = x};
  int sum = row_reduce(rl, KB_ADD, 0, f_elem, &ctx);
  k_local(k, rl->row, k_binary(k, KB_MUL, k_localv(k, sum), k_const(k, inv_c)), mean);
  ctx.shift_local = *mean;
  int sq = row_reduce(rl, KB_ADD, 0, f_square_shifted, &ctx);
  KExpr *var = k_binary(k, KB_MUL, k_localv(k, sq), k_const(k, inv_c));
  KExpr *std = k_unary(k, KU_SQRT, k_binary(k, KB_ADD, var, k_const(k, eps)));
  k_local(k, rl->row, k_binary(k, KB_DIV, k_const(k, 1), std), rstd);
}

/* [..., C] → [..., 2]: each row's mean and 1/sqrt(var + eps), made by
 * layernorm for itself and its gradients (computed once, not in each). */
bool infer_layernorm_stats(const Graph *g, Node *n, Diag *diag) {
  if (!infer_rows(g, n, diag)) return false;
  n->shape.dim[n->shape.rank - 1] = 2;
  return true;
}

Kernel *kernel_layernorm_stats(const Graph *g, const Node *n) {
  RowLoop rl = row_loop(g, n, &in_node(g, n, 0)->shape);
  Kernel *k = rl.k;
  int moment[2];
  row_moments(&rl, n->in[0], n->attr.f[0], &moment[0], &moment[1]);
  for (int i = 0; i < 2; i++)
    k_store(k, rl.row, n->id, k_iadd(k, k_imul(k, k_index(k, rl.r), 2), k_iconst(k, i)),
            k_localv(k, moment[i]), accumulates(n));
  return k;
}

typedef struct {
  int x, gamma, beta, dy, mean, rstd, a, b;
} NormCtx;

/* Moment i (0: mean, 1: rstd) of row r in a layernorm_stats buffer. */
static KExpr *stats_elem(Kernel *k, int stats, int r, int i) {
  return k_load(k, stats, k_iadd(k, k_imul(k, k_index(k, r), 2), k_iconst(k, i)), false);
}

/* The row's mean and rstd from the stats buffer, as locals of `parent`. */
static void load_moments(Kernel *k, KStmt *parent, int r, int stats, NormCtx *s) {
  k_local(k, parent, stats_elem(k, stats, r, 0), &s->mean);
  k_local(k, parent, stats_elem(k, stats, r, 1), &s->rstd);
}

static KExpr *norm_xhat(RowLoop *rl, const NormCtx *s, int c) {
  Kernel *k = rl->k;
  KExpr *d = k_binary(k, KB_SUB, row_elem(rl, s->x, c), k_localv(k, s->mean));
  return k_binary(k, KB_MUL, d, k_localv(k, s->rstd));
}

static KExpr *col_elem(Kernel *k, int buf, int c) { return k_load(k, buf, k_index(k, c), false); }

static KExpr *f_layernorm(RowLoop *rl, int c, const void *p) {
  const NormCtx *s = p;
  Kernel *k = rl->k;
  KExpr *scaled = k_binary(k, KB_MUL, norm_xhat(rl, s, c), col_elem(k, s->gamma, c));
  return k_binary(k, KB_ADD, scaled, col_elem(k, s->beta, c));
}

Kernel *kernel_layernorm(const Graph *g, const Node *n) {
  RowLoop rl = row_loop(g, n, &n->shape);
  NormCtx s = {.x = n->in[0], .gamma = n->in[1], .beta = n->in[2]};
  load_moments(rl.k, rl.row, rl.r, n->in[3], &s);
  row_store(&rl, n, f_layernorm, &s);
  return rl.k;
}

/* The stats input gets no gradient: layernorm_grad's formula is the whole
 * derivative through the mean and variance. */
void bwd_layernorm(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Node x = g->nodes[n];
  if (want[0]) {
    int in[4] = {x.in[0], x.in[1], dy, x.in[3]};
    dx[0] = graph_add(g, OP_LAYERNORM_GRAD, in, 4, no_loc, NULL);
  }
  if (want[1]) dx[1] = add3(g, OP_LAYERNORM_GRAD_GAMMA, x.in[0], dy, x.in[3], 0);
  if (want[2]) dx[2] = graph_sum_to(g, dy, x.in[2]);
}

/* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), where g = dy * gamma. */
static KExpr *norm_g(RowLoop *rl, const NormCtx *s, int c) {
  return k_binary(rl->k, KB_MUL, row_elem(rl, s->dy, c), col_elem(rl->k, s->gamma, c));
}

static KExpr *f_norm_g(RowLoop *rl, int c, const void *p) { return norm_g(rl, p, c); }
static KExpr *f_norm_g_xhat(RowLoop *rl, int c, const void *p) {
  return k_binary(rl->k, KB_MUL, norm_g(rl, p, c), norm_xhat(rl, p, c));
}

static KExpr *f_layernorm_grad(RowLoop *rl, int c, const void *p) {
  const NormCtx *s = p;
  Kernel *k = rl->k;
  double inv_c = 1.0 / (double)rl->cols;
  KExpr *mean_g = k_binary(k, KB_MUL, k_localv(k, s->a), k_const(k, inv_c));
  KExpr *mean_gx = k_binary(k, KB_MUL, k_localv(k, s->b), k_const(k, inv_c));
  KExpr *t = k_binary(k, KB_SUB, norm_g(rl, s, c), mean_g);
  t = k_binary(k, KB_SUB, t, k_binary(k, KB_MUL, norm_xhat(rl, s, c), mean_gx));
  return k_binary(k, KB_MUL, t, k_localv(k, s->rstd));
}

Kernel *kernel_layernorm_grad(const Graph *g, const Node *n) {
  RowLoop rl = row_loop(g, n, &n->shape);
  NormCtx s = {.x = n->in[0], .gamma = n->in[1], .dy = n->in[2]};
  load_moments(rl.k, rl.row, rl.r, n->in[3], &s);
  s.a = row_reduce(&rl, KB_ADD, 0, f_norm_g, &s);
  s.b = row_reduce(&rl, KB_ADD, 0, f_norm_g_xhat, &s);
  row_store(&rl, n, f_layernorm_grad, &s);
  return rl.k;
}

bool infer_layernorm_grad_gamma(const Graph *g, Node *n, Diag *diag) {
  n->shape = (Shape){.rank = 1, .dim = {last_dim(&in_node(g, n, 0)->shape)}};
  return true;
}

KExpr *block_col(Kernel *k, int b, int64_t w, int c) {
  return w ? k_iadd(k, k_imul(k, k_index(k, b), w), k_index(k, c)) : k_index(k, c);
}

/* d gamma[c] = sum over rows of dy * xhat, the rows in order. In blocks of w
 * columns when C splits into them (as sum_to's), with the loop over blocks
 * outside, so that it runs on the threads. */
Kernel *kernel_layernorm_grad_gamma(const Graph *g, const Node *n) {
  const Shape *xs = &in_node(g, n, 0)->shape;
  Kernel *k = kernel_new(n->id);
  zero_output(k, n);
  int64_t cols = last_dim(xs), w = sum_to_block(cols);
  int b = -1, r, c;
  KStmt *blocks = w ? k_for(k, NULL, cols / w, &b) : NULL;
  KStmt *row = k_for(k, blocks, rows_of(xs), &r);
  NormCtx s = {.x = n->in[0], .dy = n->in[1]};
  load_moments(k, row, r, n->in[2], &s);
  KStmt *loop = k_for(k, row, w ? w : cols, &c);
  KExpr *at[2];
  for (int i = 0; i < 2; i++)
    at[i] = k_iadd(k, k_imul(k, k_index(k, r), cols), block_col(k, b, w, c));
  KExpr *d = k_binary(k, KB_SUB, k_load(k, s.x, at[0], false), k_localv(k, s.mean));
  KExpr *xhat = k_binary(k, KB_MUL, d, k_localv(k, s.rstd));
  KExpr *v = k_binary(k, KB_MUL, k_load(k, s.dy, at[1], false), xhat);
  k_store(k, loop, n->id, block_col(k, b, w, c), v, true);
  return k;
}
