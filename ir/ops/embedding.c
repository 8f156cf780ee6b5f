/* embedding.c — embedding lookups and pooling over positions (an encoder's
 * cls_pool and mean_pool), with their gradients. */
#include "ops_internal.h"

#include <math.h>
#include <stdlib.h>

bool infer_embedding(const Graph *g, Node *n, Diag *diag) {
  if (!want_f32(g, n, 0, diag) || !want_int(g, n, 1, diag)) return false;
  const Shape *t = &in_node(g, n, 0)->shape, *ids = &in_node(g, n, 1)->shape;
  if (t->rank != 2 || ids->rank + 1 > IR_MAX_RANK) {
    diag_error(diag, n->loc, "embedding needs a [vocab, dim] table");
    return false;
  }
  n->shape = *ids;
  n->shape.dim[n->shape.rank++] = t->dim[1];
  return true;
}

/* out[r, d] = table[ids[r], d]. */
Kernel *kernel_embedding(const Graph *g, const Node *n) {
  RowLoop rl = row_loop(g, n, &n->shape);
  Kernel *k = rl.k;
  int d;
  KStmt *loop = k_for(k, rl.row, rl.cols, &d);
  KExpr *row = k_load(k, n->in[1], k_index(k, rl.r), true);
  KExpr *src = k_iadd(k, k_imul(k, row, rl.cols), k_index(k, d));
  k_store(k, loop, n->id, row_index(&rl, d), k_load(k, n->in[0], src, false), accumulates(n));
  return k;
}

/* embedding(..., padding_idx = P): attr.i[1] = 1, attr.i[2] = P. */
void print_padding_idx(FILE *out, const Node *n) {
  if (n->attr.i[1]) fprintf(out, " {padding_idx=%lld}", (long long)n->attr.i[2]);
}

/* The gradient keeps the padding row (attr.i[1], [2]); attr.i[0] = the table. */
void bwd_embedding(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Node x = g->nodes[n];
  if (want[0]) {
    int in[2] = {x.in[1], dy};
    Attr a = x.attr;
    a.i[0] = x.in[0];
    dx[0] = graph_add_op(g, OP_EMBEDDING_GRAD, in, 2, &a, no_loc, NULL);
  }
}

/* d table[ids[r], d] += dy[r, d], the rows in order; in blocks of w columns
 * when D splits into them (as sum_to's), the loop over blocks outside: its
 * iterations add into disjoint columns of whatever rows the ids pick, so it
 * runs on the threads. */
Kernel *kernel_embedding_grad(const Graph *g, const Node *n) {
  const Shape *dys = &in_node(g, n, 1)->shape;
  Kernel *k = kernel_new(n->id);
  zero_output(k, n);
  int64_t cols = last_dim(dys), w = sum_to_block(cols);
  int b = -1, r, d;
  KStmt *blocks = w ? k_for(k, NULL, cols / w, &b) : NULL;
  KStmt *loop = k_for(k, k_for(k, blocks, rows_of(dys), &r), w ? w : cols, &d);
  KExpr *row = k_load(k, n->in[0], k_index(k, r), true);
  KExpr *dst = k_iadd(k, k_imul(k, row, cols), block_col(k, b, w, d));
  KExpr *src = k_iadd(k, k_imul(k, k_index(k, r), cols), block_col(k, b, w, d));
  KExpr *dy = k_load(k, n->in[1], src, false);
  if (n->attr.i[1]) { /* the padding row adds 0 */
    KExpr *pad = k_eq(k, k_load(k, n->in[0], k_index(k, r), true), k_iconst(k, n->attr.i[2]));
    dy = k_select(k, k_binary(k, KB_SUB, k_const(k, 1), pad), dy, k_const(k, 0));
  }
  k_store(k, loop, n->id, dst, dy, true);
  return k;
}

/* ---------------------------------------- pooling over positions (encoders) */

/* x [B, T, ...] → [B, ...]: one value per batch element and feature. */
bool infer_position_pool(const Graph *g, Node *n, Diag *diag) {
  if (!want_f32(g, n, 0, diag)) return false;
  const Shape *x = &in_node(g, n, 0)->shape;
  char sx[128], sm[128];
  if (x->rank < 2) {
    diag_error(diag, n->loc, "%s needs a sequence batch [B, T, ...], got %s", op_info(n->op)->name,
               shape_str(x, sx));
    return false;
  }
  if (n->nin == 2) {
    const Shape *m = &in_node(g, n, 1)->shape;
    if (!want_int(g, n, 1, diag)) return false;
    if (m->rank != 2 || m->dim[0] != x->dim[0] || m->dim[1] != x->dim[1]) {
      diag_error(diag, n->loc, "%s: the mask %s does not fit %s (expected [%lld, %lld])",
                 op_info(n->op)->name, shape_str(m, sm), shape_str(x, sx), (long long)x->dim[0],
                 (long long)x->dim[1]);
      return false;
    }
  }
  n->shape = *x;
  n->shape.rank--;
  for (int d = 1; d < n->shape.rank; d++) n->shape.dim[d] = x->dim[d + 1];
  return true;
}

/* The features of one position of a [B, T, ...] buffer: F = numel / (B T). */
static int64_t position_features(const Shape *seq) {
  return shape_numel(seq) / (seq->dim[0] * seq->dim[1]);
}

/* Element j of batch element b of a pooled [B, F] buffer. */
static KExpr *pooled_index(Kernel *k, int b, int64_t features, int j) {
  return k_iadd(k, k_imul(k, k_index(k, b), features), k_index(k, j));
}

/* Element j of position t of batch element b of a [B, T, F] buffer. */
static KExpr *seq_index(Kernel *k, const Shape *seq, int b, KExpr *t, int j) {
  KExpr *pos = k_iadd(k, k_imul(k, k_index(k, b), seq->dim[1]), t);
  return k_iadd(k, k_imul(k, pos, position_features(seq)), k_index(k, j));
}

/* cls_pool(x) = x[:, 0]: BERT's [CLS] token, the first position. */
Kernel *kernel_cls_pool(const Graph *g, const Node *n) {
  const Shape *x = &in_node(g, n, 0)->shape;
  Kernel *k = kernel_new(n->id);
  int b, j;
  KStmt *loop = k_for(k, k_for(k, NULL, x->dim[0], &b), position_features(x), &j);
  KExpr *first = k_load(k, n->in[0], seq_index(k, x, b, k_iconst(k, 0), j), false);
  k_store(k, loop, n->id, pooled_index(k, b, position_features(x), j), first, accumulates(n));
  return k;
}

/* The input's shape for a pooling gradient (attr.shape). */
static Attr pooled_from(const Graph *g, int n) {
  return (Attr){.shape = g->nodes[g->nodes[n].in[0]].shape};
}

void bwd_cls_pool(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Attr a = pooled_from(g, n);
  dx[0] = add_with(g, OP_CLS_POOL_GRAD, dy, &a);
}

/* dx = dy at the first position, 0 at the others: one pass over dx (no
 * zeroing pass and scatter). */
Kernel *kernel_cls_pool_grad(const Graph *g, const Node *n) {
  Kernel *k = kernel_new(n->id);
  int64_t features = position_features(&n->shape);
  int b, t, j;
  KStmt *loop = k_for(k, k_for(k, NULL, n->shape.dim[0], &b), n->shape.dim[1], &t);
  loop = k_for(k, loop, features, &j);
  KExpr *dy = k_load(k, n->in[0], pooled_index(k, b, features, j), false);
  KExpr *first = k_eq(k, k_index(k, t), k_iconst(k, 0));
  k_store(k, loop, n->id, seq_index(k, &n->shape, b, k_index(k, t), j),
          k_select(k, first, dy, k_const(k, 0)), accumulates(n));
  return k;
}

/* Mask value of position t of batch element b as a float (1 without a mask). */
static KExpr *position_mask(Kernel *k, int mask, int64_t t_count, int b, int t) {
  if (mask < 0) return k_const(k, 1);
  KExpr *at = k_iadd(k, k_imul(k, k_index(k, b), t_count), k_index(k, t));
  return k_to_float(k, k_load(k, mask, at, true));
}

/* A local of `parent` (the loop over b): the count of b's real positions,
 * at least 1e-9 (sentence-transformers' clamp: a sequence of padding pools
 * to 0, not NaN). */
static int pool_count(Kernel *k, KStmt *parent, int mask, int64_t t_count, int b) {
  int count, t;
  k_local(k, parent, k_const(k, 0), &count);
  KStmt *loop = k_for(k, parent, t_count, &t);
  KExpr *real = position_mask(k, mask, t_count, b, t);
  k_set(k, loop, count, k_binary(k, KB_ADD, k_localv(k, count), real));
  int clamped;
  k_local(k, parent, k_binary(k, KB_MAX, k_localv(k, count), k_const(k, 1e-9)), &clamped);
  return clamped;
}

/* mean_pool(x, mask) = sum over t of x[:, t] * mask[:, t], divided by the
 * clamped count of the mask's ones (sentence-transformers' mean pooling;
 * without a mask, every position counts). */
Kernel *kernel_mean_pool(const Graph *g, const Node *n) {
  const Shape *x = &in_node(g, n, 0)->shape;
  int64_t features = position_features(x), t_count = x->dim[1];
  int mask = n->nin == 2 ? n->in[1] : -1;
  Kernel *k = kernel_new(n->id);
  int b, j, t, sum;
  KStmt *batch = k_for(k, NULL, x->dim[0], &b);
  int count = pool_count(k, batch, mask, t_count, b);
  KStmt *feature = k_for(k, batch, features, &j);
  k_local(k, feature, k_const(k, 0), &sum);
  KStmt *loop = k_for(k, feature, t_count, &t);
  KExpr *v = k_binary(k, KB_MUL, k_load(k, n->in[0], seq_index(k, x, b, k_index(k, t), j), false),
                      position_mask(k, mask, t_count, b, t));
  k_set(k, loop, sum, k_binary(k, KB_ADD, k_localv(k, sum), v));
  KExpr *mean = k_binary(k, KB_DIV, k_localv(k, sum), k_localv(k, count));
  k_store(k, feature, n->id, pooled_index(k, b, features, j), mean, accumulates(n));
  return k;
}

void bwd_mean_pool(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Attr a = pooled_from(g, n);
  int in[2] = {dy, g->nodes[n].in[1]};
  if (want[0]) dx[0] = graph_add_op(g, OP_MEAN_POOL_GRAD, in, g->nodes[n].nin, &a, no_loc, NULL);
}

/* dx[b, t] = dy[b] / count * mask[b, t], as PyTorch differentiates the
 * division, then the product. */
Kernel *kernel_mean_pool_grad(const Graph *g, const Node *n) {
  const Shape *x = &n->shape;
  int64_t features = position_features(x), t_count = x->dim[1];
  int mask = n->nin == 2 ? n->in[1] : -1;
  Kernel *k = kernel_new(n->id);
  int b, t, j;
  KStmt *batch = k_for(k, NULL, x->dim[0], &b);
  int count = pool_count(k, batch, mask, t_count, b);
  KStmt *loop = k_for(k, k_for(k, batch, t_count, &t), features, &j);
  KExpr *dy = k_load(k, n->in[0], pooled_index(k, b, features, j), false);
  KExpr *v = k_binary(k, KB_MUL, k_binary(k, KB_DIV, dy, k_localv(k, count)),
                      position_mask(k, mask, t_count, b, t));
  k_store(k, loop, n->id, seq_index(k, x, b, k_index(k, t), j), v, accumulates(n));
  return k;
}
