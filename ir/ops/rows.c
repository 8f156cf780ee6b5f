/* rows.c — row ops on the last axis: the row loop every row kernel is built
 * on, softmax, log-softmax, logsumexp and cross-entropy. */
#include "ops_internal.h"

#include <math.h>
#include <stdlib.h>

/* ------------------------------------------------------------------ row ops */

/* Appends to k a loop over the rows of `shape`. */
static RowLoop row_loop_in(Kernel *k, const Shape *shape) {
  RowLoop rl = {.k = k, .cols = last_dim(shape), .block = -1, .scaled = -1, .key_mask = -1};
  rl.row = k_for(k, NULL, rows_of(shape), &rl.r);
  return rl;
}

KExpr *row_number(RowLoop *rl) {
  Kernel *k = rl->k;
  if (rl->block < 0) return k_index(k, rl->r);
  return k_iadd(k, k_imul(k, k_index(k, rl->block), rl->block_rows), k_index(k, rl->r));
}

/* A loop over the row's columns: all of them, or c <= r in a causal kernel. */
static KStmt *column_loop(RowLoop *rl, int *c) {
  Kernel *k = rl->k;
  if (!rl->causal) return k_for(k, rl->row, rl->cols, c);
  KExpr *through_diagonal = k_iadd(k, k_index(k, rl->r), k_iconst(k, 1));
  return k_for_bounded(k, rl->row, rl->cols, through_diagonal, c);
}

RowLoop row_loop(const Graph *g, const Node *n, const Shape *shape) {
  return row_loop_in(kernel_new(n->id), shape);
}

KExpr *row_index(RowLoop *rl, int c) {
  Kernel *k = rl->k;
  return k_iadd(k, k_imul(k, row_number(rl), rl->cols), k_index(k, c));
}

KExpr *row_elem(RowLoop *rl, int buf, int c) {
  Kernel *k = rl->k;
  KExpr *x = k_load(k, buf, row_index(rl, c), false);
  return buf == rl->scaled ? k_binary(k, KB_MUL, x, k_const(k, rl->scale)) : x;
}

/* v at column c, or `fill` where the row's key mask is 0 or c is past the
 * diagonal under the diagonal mask (no mask: v). */
static KExpr *unless_masked(RowLoop *rl, int c, KExpr *v, double fill) {
  Kernel *k = rl->k;
  if (rl->diagonal_mask) { /* r - c + 0.5 > 0: c <= r */
    KExpr *r_less_c = k_iadd(k, k_index(k, rl->r), k_imul(k, k_index(k, c), -1));
    KExpr *kept = k_binary(k, KB_ADD, k_to_float(k, r_less_c), k_const(k, 0.5));
    return k_select(k, kept, v, k_const(k, fill));
  }
  if (rl->key_mask < 0) return v;
  KExpr *at = k_iadd(k, k_imul(k, k_index(k, rl->block), rl->cols), k_index(k, c));
  KExpr *keep = k_to_float(k, k_load(k, rl->key_mask, at, true));
  return k_select(k, keep, v, k_const(k, fill));
}

int row_reduce(RowLoop *rl, KBinaryOp op, double init, KExpr *(*f)(RowLoop *, int c, const void *),
               const void *ctx) {
  int acc, c;
  Kernel *k = rl->k;
  k_local(k, rl->row, k_const(k, init), &acc);
  KStmt *loop = column_loop(rl, &c);
  KExpr *v = unless_masked(rl, c, f(rl, c, ctx), init);
  k_set(k, loop, acc, k_binary(k, op, k_localv(k, acc), v));
  return acc;
}

KExpr *f_elem(RowLoop *rl, int c, const void *ctx) {
  return row_elem(rl, ((const RowCtx *)ctx)->buf, c);
}

static KExpr *f_exp_shifted(RowLoop *rl, int c, const void *ctx) {
  const RowCtx *x = ctx;
  Kernel *k = rl->k;
  return k_unary(k, KU_EXP, k_binary(k, KB_SUB, row_elem(rl, x->buf, c), k_localv(k, x->shift_local)));
}

KExpr *f_product(RowLoop *rl, int c, const void *ctx) {
  const RowCtx *x = ctx;
  return k_binary(rl->k, KB_MUL, row_elem(rl, x->buf, c), row_elem(rl, x->other_buf, c));
}

KExpr *f_square_shifted(RowLoop *rl, int c, const void *ctx) {
  const RowCtx *x = ctx;
  Kernel *k = rl->k;
  KExpr *d = k_binary(k, KB_SUB, row_elem(rl, x->buf, c), k_localv(k, x->shift_local));
  return k_binary(k, KB_MUL, d, d);
}

void row_logsumexp(RowLoop *rl, int buf, int *m, int *lse) {
  Kernel *k = rl->k;
  RowCtx ctx = {.buf = buf};
  *m = row_reduce(rl, KB_MAX, -INFINITY, f_elem, &ctx);
  ctx.shift_local = *m;
  int s = row_reduce(rl, KB_ADD, 0, f_exp_shifted, &ctx);
  k_local(k, rl->row, k_binary(k, KB_ADD, k_localv(k, *m), k_unary(k, KU_LOG, k_localv(k, s))), lse);
}

void row_store(RowLoop *rl, const Node *n, KExpr *(*f)(RowLoop *, int c, const void *), const void *ctx) {
  int c;
  KStmt *loop = column_loop(rl, &c);
  KExpr *v = unless_masked(rl, c, f(rl, c, ctx), 0);
  k_store(rl->k, loop, n->id, row_index(rl, c), v, accumulates(n));
}

bool infer_rows(const Graph *g, Node *n, Diag *diag) {
  if (!want_f32(g, n, 0, diag)) return false;
  if (in_node(g, n, 0)->shape.rank < 1) {
    diag_error(diag, n->loc, "%s needs at least one axis, got a scalar", op_info(n->op)->name);
    return false;
  }
  n->shape = in_node(g, n, 0)->shape;
  return true;
}

KExpr *f_softmax(RowLoop *rl, int c, const void *p) {
  const SoftCtx *s = p;
  return f_exp_shifted(rl, c, &(RowCtx){.buf = s->x, .shift_local = s->lse});
}

static KExpr *f_log_softmax(RowLoop *rl, int c, const void *p) {
  const SoftCtx *s = p;
  return k_binary(rl->k, KB_SUB, row_elem(rl, s->x, c), k_localv(rl->k, s->lse));
}

static Kernel *kernel_softmax_like(const Graph *g, const Node *n, bool log) {
  RowLoop rl = row_loop(g, n, &n->shape);
  SoftCtx s = {.x = n->in[0]};
  int m;
  row_logsumexp(&rl, s.x, &m, &s.lse);
  row_store(&rl, n, log ? f_log_softmax : f_softmax, &s);
  return rl.k;
}

Kernel *kernel_softmax(const Graph *g, const Node *n) { return kernel_softmax_like(g, n, false); }
Kernel *kernel_log_softmax(const Graph *g, const Node *n) { return kernel_softmax_like(g, n, true); }

void bwd_softmax(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add2(g, OP_SOFTMAX_GRAD, n, dy);
}

void bwd_log_softmax(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add2(g, OP_LOG_SOFTMAX_GRAD, n, dy);
}

KExpr *f_softmax_grad(RowLoop *rl, int c, const void *p) {
  const SoftCtx *s = p;
  Kernel *k = rl->k;
  KExpr *d = k_binary(k, KB_SUB, row_elem(rl, s->dy, c), k_localv(k, s->s));
  return k_binary(k, KB_MUL, row_elem(rl, s->y, c), d);
}

Kernel *kernel_softmax_grad(const Graph *g, const Node *n) {
  RowLoop rl = row_loop(g, n, &n->shape);
  SoftCtx s = {.y = n->in[0], .dy = n->in[1]};
  RowCtx dot = {.buf = s.y, .other_buf = s.dy};
  s.s = row_reduce(&rl, KB_ADD, 0, f_product, &dot);
  row_store(&rl, n, f_softmax_grad, &s);
  return rl.k;
}

/* log_softmax: dx = dy - exp(y) * sum(dy). */
static KExpr *f_log_softmax_grad(RowLoop *rl, int c, const void *p) {
  const SoftCtx *s = p;
  Kernel *k = rl->k;
  KExpr *e = k_binary(k, KB_MUL, k_unary(k, KU_EXP, row_elem(rl, s->y, c)), k_localv(k, s->s));
  return k_binary(k, KB_SUB, row_elem(rl, s->dy, c), e);
}

Kernel *kernel_log_softmax_grad(const Graph *g, const Node *n) {
  RowLoop rl = row_loop(g, n, &n->shape);
  SoftCtx s = {.y = n->in[0], .dy = n->in[1]};
  RowCtx sum = {.buf = s.dy};
  s.s = row_reduce(&rl, KB_ADD, 0, f_elem, &sum);
  row_store(&rl, n, f_log_softmax_grad, &s);
  return rl.k;
}

/* [..., C] → [...]: one value per row. */
bool infer_row_values(const Graph *g, Node *n, Diag *diag) {
  if (!infer_rows(g, n, diag)) return false;
  n->shape.rank--;
  return true;
}

/* Each row's log-sum-exp, which cross_entropy's loss and gradient both read
 * (computed once, in parallel rows, instead of once in each). */
Kernel *kernel_logsumexp(const Graph *g, const Node *n) {
  RowLoop rl = row_loop(g, n, &in_node(g, n, 0)->shape);
  int m, lse;
  row_logsumexp(&rl, n->in[0], &m, &lse);
  k_store(rl.k, rl.row, n->id, k_index(rl.k, rl.r), k_localv(rl.k, lse), accumulates(n));
  return rl.k;
}

bool infer_cross_entropy(const Graph *g, Node *n, Diag *diag) {
  if (!infer_rows(g, n, diag) || !want_int(g, n, 1, diag)) return false;
  const Shape *x = &in_node(g, n, 0)->shape, *y = &in_node(g, n, 1)->shape;
  Shape rows = *x;
  rows.rank--;
  if (!shape_equal(&rows, y)) {
    char sx[128], sy[128];
    diag_error(diag, n->loc,
               "cross_entropy: labels %s do not match logits %s (expected one label per row)",
               shape_str(y, sy), shape_str(x, sx));
    return false;
  }
  if (!shape_equal(&rows, &in_node(g, n, 2)->shape)) /* only lowering makes it */
    diag_internal_error("cross_entropy %d: its third input is not one value per row", n->id);
  n->shape = (Shape){.rank = 0};
  return true;
}

/* A few operations per row: the log-sum-exps are their own kernel. */
double flops_cross_entropy(const Graph *g, const Node *n) {
  return 3.0 * (double)shape_numel(&in_node(g, n, 1)->shape);
}

/* The label of the current row, as an integer index expression. */
static KExpr *row_label(RowLoop *rl, int labels) {
  return k_load(rl->k, labels, k_index(rl->k, rl->r), true);
}

/* cross_entropy(..., ignore = L): attr.i[0] = 1, attr.i[1] = L. */
void print_ignore(FILE *out, const Node *n) {
  if (n->attr.i[0]) fprintf(out, " {ignore %lld}", (long long)n->attr.i[1]);
}

/* 1 for a row whose label counts, 0 for an ignored one (always 1 without
 * ignore). */
static KExpr *row_counts(RowLoop *rl, const Node *n, int labels) {
  Kernel *k = rl->k;
  if (!n->attr.i[0]) return k_const(k, 1);
  KExpr *ignored = k_eq(k, row_label(rl, labels), k_iconst(k, n->attr.i[1]));
  return k_binary(k, KB_SUB, k_const(k, 1), ignored);
}

/* loss = mean over rows of (lse(x_r) - x_r[label_r]); with ignore, the sum
 * over the rows that count (the runtime divides by their number across the
 * whole accumulation window, as the loss seed). An ignored row reads its
 * logit at column 0 instead of at its (negative) label. */
Kernel *kernel_cross_entropy(const Graph *g, const Node *n) {
  const Shape *xs = &in_node(g, n, 0)->shape;
  Kernel *k = kernel_new(n->id);
  int total;
  k_local(k, NULL, k_const(k, 0), &total);
  RowLoop rl = row_loop_in(k, xs);
  KExpr *counts = row_counts(&rl, n, n->in[1]);
  KExpr *label = n->attr.i[0] ? k_select(k, counts, row_label(&rl, n->in[1]), k_iconst(k, 0))
                              : row_label(&rl, n->in[1]);
  KExpr *at = k_iadd(k, k_imul(k, k_index(k, rl.r), rl.cols), label);
  KExpr *at_label = k_load(k, n->in[0], at, false);
  KExpr *lse = k_load(k, n->in[2], k_index(k, rl.r), false);
  KExpr *term = k_binary(k, KB_SUB, lse, at_label);
  if (n->attr.i[0]) term = k_binary(k, KB_MUL, counts, term);
  k_set(k, rl.row, total, k_binary(k, KB_ADD, k_localv(k, total), term));
  double scale = n->attr.i[0] ? 1.0 : 1.0 / (double)rows_of(xs);
  KExpr *mean = k_binary(k, KB_MUL, k_localv(k, total), k_const(k, scale));
  k_store(k, NULL, n->id, k_iconst(k, 0), mean, accumulates(n));
  return k;
}

void bwd_cross_entropy(Graph *g, int n, int dy, const bool want[], int dx[]) {
  const Node *x = &g->nodes[n];
  Attr attr = x->attr;
  int in[4] = {x->in[0], x->in[1], x->in[2], dy};
  if (want[0]) dx[0] = graph_add_op(g, OP_CROSS_ENTROPY_GRAD, in, 4, &attr, no_loc, NULL);
}

/* Labels and column numbers are exact as floats below 2^24 (every real
 * vocabulary): the row's label is then a float local and onehot compares
 * floats. Hoisted out of the column loop, the row's label and scale are no
 * loads a C compiler must repeat per column (it cannot tell they are not
 * stored to), so the loop vectorizes. */
#define EXACT_FLOAT_INTS (1 << 24)

/* d logits = (softmax(x) - onehot(label)) * scale, scale a row local. */
static KExpr *f_cross_entropy_grad(RowLoop *rl, int c, const void *p) {
  const SoftCtx *s = p;
  Kernel *k = rl->k;
  KExpr *onehot = s->row_label >= 0
                      ? k_eq(k, k_to_float(k, k_index(k, c)), k_localv(k, s->row_label))
                      : k_eq(k, k_index(k, c), row_label(rl, s->label));
  KExpr *d = k_binary(k, KB_SUB, f_softmax(rl, c, p), onehot);
  return k_binary(k, KB_MUL, d, k_localv(k, s->row_scale));
}

/* The row's scale: dl / R; with ignore, dl times whether the row counts. */
static KExpr *cross_entropy_grad_scale(RowLoop *rl, const Node *n) {
  Kernel *k = rl->k;
  double per_row = n->attr.i[0] ? 1.0 : 1.0 / (double)rows_of(&n->shape);
  KExpr *dl = k_load(k, n->in[3], k_iconst(k, 0), false);
  KExpr *scale = k_binary(k, KB_MUL, dl, k_const(k, per_row));
  if (n->attr.i[0]) scale = k_binary(k, KB_MUL, scale, row_counts(rl, n, n->in[1]));
  return scale;
}

Kernel *kernel_cross_entropy_grad(const Graph *g, const Node *n) {
  RowLoop rl = row_loop(g, n, &n->shape);
  Kernel *k = rl.k;
  SoftCtx s = {.x = n->in[0], .label = n->in[1], .row_label = -1};
  k_local(k, rl.row, k_load(k, n->in[2], k_index(k, rl.r), false), &s.lse);
  k_local(k, rl.row, cross_entropy_grad_scale(&rl, n), &s.row_scale);
  if (rl.cols <= EXACT_FLOAT_INTS && (!n->attr.i[0] || llabs(n->attr.i[1]) <= EXACT_FLOAT_INTS))
    k_local(k, rl.row, k_to_float(k, row_label(&rl, s.label)), &s.row_label);
  row_store(&rl, n, f_cross_entropy_grad, &s);
  return k;
}
