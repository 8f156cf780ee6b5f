/* attention.c — attention's row kernels: the causal mask, the causal and
 * masked softmaxes, and dropout; and fused causal attention (a runtime
 * call). */
#include "ops_internal.h"

#include <math.h>
#include <stdlib.h>

/* -------------------------------------------------- causal mask and dropout */

bool infer_causal_mask(const Graph *g, Node *n, Diag *diag) {
  if (!want_f32(g, n, 0, diag)) return false;
  const Shape *x = &in_node(g, n, 0)->shape;
  if (x->rank < 2 || x->dim[x->rank - 1] != x->dim[x->rank - 2]) {
    char sx[128];
    diag_error(diag, n->loc, "%s needs square scores [..., T, T], got %s", op_info(n->op)->name,
               shape_str(x, sx));
    return false;
  }
  n->shape = *x;
  return true;
}

void print_scale(FILE *out, const Node *n) { fprintf(out, " {scale=%g}", n->attr.f[0]); }

/* Loops over [..., T, T]: x * scale on and below the diagonal (column <=
 * row), `above` elsewhere. */
static Kernel *causal_kernel(const Graph *g, const Node *n, double above) {
  Kernel *k = kernel_new(n->id);
  int64_t t = last_dim(&n->shape);
  int b, r, c;
  KStmt *loop = k_for(k, NULL, shape_numel(&n->shape) / (t * t), &b);
  loop = k_for(k, loop, t, &r);
  loop = k_for(k, loop, t, &c);
  KExpr *idx = k_iadd(k, k_imul(k, k_iadd(k, k_imul(k, k_index(k, b), t), k_index(k, r)), t), k_index(k, c));
  KExpr *row_minus_col = k_binary(k, KB_SUB, k_index(k, r), k_index(k, c));
  KExpr *keep = k_binary(k, KB_ADD, k_to_float(k, row_minus_col), k_const(k, 0.5));
  KExpr *scaled = k_binary(k, KB_MUL, k_load(k, n->in[0], idx, false), k_const(k, n->attr.f[0]));
  k_store(k, loop, n->id, idx, k_select(k, keep, scaled, k_const(k, above)), accumulates(n));
  return k;
}

Kernel *kernel_causal_mask(const Graph *g, const Node *n) { return causal_kernel(g, n, -INFINITY); }
Kernel *kernel_causal_mask_grad(const Graph *g, const Node *n) { return causal_kernel(g, n, 0); }

void bwd_causal_mask(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add_with(g, OP_CAUSAL_MASK_GRAD, dy, &g->nodes[n].attr);
}

RowLoop block_row_loop(const Node *n, int64_t blocks, int scaled) {
  Kernel *k = kernel_new(n->id);
  RowLoop rl = {.k = k, .cols = last_dim(&n->shape), .scaled = scaled, .key_mask = -1,
                .block_rows = rows_of(&n->shape) / blocks, .scale = n->attr.f[0]};
  KStmt *blocks_loop = k_for(k, NULL, blocks, &rl.block);
  rl.row = k_for(k, blocks_loop, rl.block_rows, &rl.r);
  return rl;
}

/* causal_softmax (attention's softmax(causal_mask(x, scale)) as one op):
 * row t of each [T, T] matrix is the softmax of scale * x over columns
 * c <= t and 0 above, and from T = CAUSAL_BOUNDED_FROM_T on only columns
 * c <= t are read or exp'd: the loops over the matrices and their rows,
 * with each column loop bounded by the row (k_for_bounded), and a last loop
 * that writes the zeros. Shorter rows run whole, the columns past the
 * diagonal masked (adding the reductions' identity, storing 0): a bounded
 * row ends in a tail of up to 15 columns that run scalar (libm's expf),
 * which on examples/gpt.nn (T = 64) cost more than the masked half's
 * vector work. Every float
 * is the operation causal_mask then softmax computed on the same operands
 * (the masked columns only added exp(-inf) = 0 to the sum, and a row's lane
 * of a column stays its index's), so with the same math functions the
 * result is bitwise theirs (where a compiler vectorizes a loop, libmvec's
 * expf is within 4 ulp of libm's, and which loops it vectorizes may
 * differ). */
enum { CAUSAL_BOUNDED_FROM_T = 128 };

static bool causal_rows_whole(const Node *n) { return last_dim(&n->shape) < CAUSAL_BOUNDED_FROM_T; }

static RowLoop causal_row_loop(const Node *n, int scaled) {
  int64_t t = last_dim(&n->shape);
  RowLoop rl = block_row_loop(n, shape_numel(&n->shape) / (t * t), scaled);
  rl.causal = !causal_rows_whole(n);
  rl.diagonal_mask = causal_rows_whole(n);
  return rl;
}

/* out[row, T - 1 - j] = 0 for j < T - 1 - r: the columns above the
 * diagonal, last first — so that each index term has its own range (j's
 * extent T - 1, r's T) and the parallel proof, which bounds them one by
 * one, sees the row's T columns (r + 1 + j would span r + T). */
static void store_zeros_above(RowLoop *rl, const Node *n) {
  Kernel *k = rl->k;
  int j;
  KExpr *count = k_binary(k, KB_SUB, k_iconst(k, rl->cols - 1), k_index(k, rl->r));
  KStmt *loop = k_for_bounded(k, rl->row, rl->cols - 1, count, &j);
  KExpr *col = k_binary(k, KB_SUB, k_iconst(k, rl->cols - 1), k_index(k, j));
  k_store(k, loop, n->id, k_iadd(k, k_imul(k, row_number(rl), rl->cols), col), k_const(k, 0),
          false);
}

/* The kept triangle's share of a [T, T] matrix, (T + 1) / 2T: the FLOPs of
 * the ops it replaces (causal_mask + softmax, softmax_grad +
 * causal_mask_grad) times that; whole rows do all of them. */
static double causal_share(const Node *n) {
  double t = (double)last_dim(&n->shape);
  return causal_rows_whole(n) ? 1 : (t + 1) / (2 * t);
}

/* A softmax of scaled scores and its gradient (the scale: one more FLOP
 * per element); the masked ones touch every column. */
double flops_masked_softmax(const Graph *g, const Node *n) {
  return flops_per_element(g, n, 21);
}

double flops_masked_softmax_grad(const Graph *g, const Node *n) {
  return flops_per_element(g, n, 5) + (double)shape_numel(&n->shape);
}

double flops_causal_softmax(const Graph *g, const Node *n) {
  return flops_masked_softmax(g, n) * causal_share(n);
}

double flops_causal_softmax_grad(const Graph *g, const Node *n) {
  return flops_masked_softmax_grad(g, n) * causal_share(n);
}

/* Softmax of the row's scaled scores (rl says which columns) into n. */
static Kernel *scaled_softmax_kernel(RowLoop rl, const Node *n) {
  SoftCtx s = {.x = n->in[0]};
  int m;
  row_logsumexp(&rl, s.x, &m, &s.lse);
  row_store(&rl, n, f_softmax, &s);
  return rl.k;
}

Kernel *kernel_causal_softmax(const Graph *g, const Node *n) {
  RowLoop rl = causal_row_loop(n, n->in[0]);
  scaled_softmax_kernel(rl, n);
  if (rl.causal && !accumulates(n)) store_zeros_above(&rl, n);
  return rl.k;
}

/* The gradient of causal_softmax or masked_softmax: (y, dy), the scale. */
void bwd_scaled_softmax(Graph *g, int n, int dy, const bool want[], int dx[]) {
  int in[2] = {n, dy};
  bool causal = g->nodes[n].op == OP_CAUSAL_SOFTMAX;
  OpKind grad = causal ? OP_CAUSAL_SOFTMAX_GRAD : OP_MASKED_SOFTMAX_GRAD;
  dx[0] = graph_add_op(g, grad, in, 2, &g->nodes[n].attr, no_loc, NULL);
}

/* dx = (y * (dy - sum y*dy)) * scale over the row's columns (c <= t in a
 * causal row). */
static KExpr *f_scaled_softmax_grad(RowLoop *rl, int c, const void *p) {
  return k_binary(rl->k, KB_MUL, f_softmax_grad(rl, c, p), k_const(rl->k, rl->scale));
}

static Kernel *scaled_softmax_grad_kernel(RowLoop rl, const Node *n) {
  SoftCtx s = {.y = n->in[0], .dy = n->in[1]};
  RowCtx dot = {.buf = s.y, .other_buf = s.dy};
  s.s = row_reduce(&rl, KB_ADD, 0, f_product, &dot);
  row_store(&rl, n, f_scaled_softmax_grad, &s);
  return rl.k;
}

Kernel *kernel_causal_softmax_grad(const Graph *g, const Node *n) {
  RowLoop rl = causal_row_loop(n, -1);
  scaled_softmax_grad_kernel(rl, n);
  if (rl.causal && !accumulates(n)) store_zeros_above(&rl, n);
  return rl.k;
}

/* masked_softmax(x, mask): x [N, ..., K] (attention's scores [B, H, T, T]),
 * mask [N, K] integer 0/1, optional. Row r of batch element b is the
 * softmax of scale * x over the columns (keys) c with mask[b, c] = 1, and 0
 * at the others: a masked key gets exactly zero weight (PyTorch's -inf fill
 * before the softmax). A row whose keys are all masked is 0 throughout (the
 * max is -inf, the sum 0, and every column stores the fill): no NaN, and
 * attention over no key outputs 0. */
bool infer_masked_softmax(const Graph *g, Node *n, Diag *diag) {
  if (!want_f32(g, n, 0, diag)) return false;
  const Shape *x = &in_node(g, n, 0)->shape;
  char sx[128], sm[128];
  if (x->rank < 2) {
    diag_error(diag, n->loc, "masked_softmax needs scores [N, ..., K], got %s", shape_str(x, sx));
    return false;
  }
  if (n->nin == 2) {
    const Shape *m = &in_node(g, n, 1)->shape;
    if (!want_int(g, n, 1, diag)) return false;
    if (m->rank != 2 || m->dim[0] != x->dim[0] || m->dim[1] != last_dim(x)) {
      diag_error(diag, n->loc, "the key mask %s does not fit scores %s (expected [%lld, %lld])",
                 shape_str(m, sm), shape_str(x, sx), (long long)x->dim[0], (long long)last_dim(x));
      return false;
    }
  }
  n->shape = *x;
  return true;
}

/* The rows in blocks of one batch element each, so that the mask's row is
 * the block's. */
Kernel *kernel_masked_softmax(const Graph *g, const Node *n) {
  RowLoop rl = block_row_loop(n, n->shape.dim[0], n->in[0]);
  rl.key_mask = n->nin == 2 ? n->in[1] : -1;
  return scaled_softmax_kernel(rl, n);
}

/* A masked column has y = 0, so its dx is 0 with no mask to read. */
Kernel *kernel_masked_softmax_grad(const Graph *g, const Node *n) {
  return scaled_softmax_grad_kernel(block_row_loop(n, n->shape.dim[0], -1), n);
}

bool infer_dropout(const Graph *g, Node *n, Diag *diag) {
  if (!want_f32(g, n, 0, diag)) return false;
  n->shape = in_node(g, n, 0)->shape;
  return true;
}

void print_dropout(FILE *out, const Node *n) {
  fprintf(out, " {p=%g, stream=%lld}", n->attr.f[0], (long long)n->attr.i[0]);
}

/* y = x * m, m = 1/(1-p) where the element's uniform number is above p, else
 * 0 — and m = 1 when not training. The numbers depend only on (key, stream,
 * element), so the backward pass (and any recompute) regenerates the mask. */
Kernel *kernel_dropout(const Graph *g, const Node *n) {
  Kernel *k = kernel_new(n->id);
  double p = n->attr.f[0];
  int v;
  KStmt *loop = k_for(k, NULL, shape_numel(&n->shape), &v);
  KExpr *u = k_random(k, n->in[1], n->attr.i[0], k_index(k, v));
  KExpr *keep = k_select(k, k_binary(k, KB_SUB, u, k_const(k, p)), k_const(k, 1.0 / (1.0 - p)), k_const(k, 0));
  KExpr *m = k_select(k, k_load(k, n->in[2], k_iconst(k, 0), false), keep, k_const(k, 1));
  k_store(k, loop, n->id, k_index(k, v), k_binary(k, KB_MUL, k_load(k, n->in[0], k_index(k, v), false), m),
          accumulates(n));
  return k;
}

/* The same mask (same key, stream and element counters) applied to dy. */
void bwd_dropout(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Node x = g->nodes[n];
  int in[3] = {dy, x.in[1], x.in[2]};
  dx[0] = graph_add_op(g, OP_DROPOUT, in, 3, &x.attr, no_loc, NULL);
}

/* ------------------------------------------------ fused causal attention */

/* causal_attention(q, k, v) → [B, T, C]: softmax(q k^T * scale), causal,
 * times v, per head; q, k, v [B, T, C] with the heads interleaved in each
 * row (C = heads * D). A runtime call (trc_causal_attention) that never
 * holds the [B, heads, T, T] probabilities, nor stores them: its backward
 * (causal_attention_grad, [3, B, T, C]: dq, dk, dv) remakes them a block of
 * rows at a time from q and k. passes/attention.c makes it from the bmm,
 * causal_softmax and bmm that lowering writes. */
void attention_dims(const Graph *g, const Node *n, AttentionDims *d) {
  const Shape *q = &in_node(g, n, 0)->shape;
  d->b = q->dim[0], d->t = q->dim[1], d->c = q->dim[2];
  d->heads = n->attr.i[0];
  d->scale = n->attr.f[0];
}

bool infer_causal_attention(const Graph *g, Node *n, Diag *diag) {
  (void)diag; /* only passes make it */
  const Shape *q = &in_node(g, n, 0)->shape;
  for (int k = 0; k < n->nin; k++) {
    const Node *x = in_node(g, n, k);
    if (x->dtype != DT_F32 || !shape_equal(&x->shape, q) || q->rank != 3 || q->dim[2] % n->attr.i[0])
      diag_internal_error("%s %d: its inputs are not [B, T, C] alike", op_info(n->op)->name, n->id);
  }
  n->shape = *q;
  if (n->op == OP_CAUSAL_ATTENTION_GRAD)
    n->shape = (Shape){.rank = 4, .dim = {3, q->dim[0], q->dim[1], q->dim[2]}};
  return true;
}

/* Per head, the causal half of its products: q k^T and p v forward (2
 * T^2 D in all), the softmax (about 5 an element); backward the scores
 * again, dp, dq, dk and dv (5 T^2 D) and the softmax's gradient. */
double attention_flops(const AttentionDims *d, bool grad) {
  double rows = (double)d->b * (double)d->t * (double)d->t;
  return grad ? rows * (5.0 * (double)d->c + 5.0 * (double)d->heads)
              : rows * (2.0 * (double)d->c + 2.5 * (double)d->heads);
}

int64_t attention_blocks(const AttentionDims *d) {
  int64_t rows = trc_attention_block_rows(d->t);
  return d->b * d->heads * ((d->t + rows - 1) / rows);
}

double flops_causal_attention(const Graph *g, const Node *n) {
  AttentionDims d;
  attention_dims(g, n, &d);
  return attention_flops(&d, false);
}

double flops_causal_attention_grad(const Graph *g, const Node *n) {
  AttentionDims d;
  attention_dims(g, n, &d);
  return attention_flops(&d, true);
}

/* One gradient node for all three inputs; each takes its slice. */
void bwd_causal_attention(Graph *g, int n, int dy, const bool want[], int dx[]) {
  const Node *a = &g->nodes[n];
  Shape each = g->nodes[a->in[0]].shape;
  int in[4] = {a->in[0], a->in[1], a->in[2], dy};
  Attr attr = a->attr;
  int grad = graph_add_op(g, OP_CAUSAL_ATTENTION_GRAD, in, 4, &attr, no_loc, NULL);
  for (int i = 0; i < 3; i++) {
    if (!want[i]) continue;
    Attr rows = {.i = {i}, .shape = {.rank = 4, .dim = {1, each.dim[0], each.dim[1], each.dim[2]}}};
    int slice = add_with(g, OP_SLICE, grad, &rows);
    dx[i] = add_with(g, OP_RESHAPE, slice, &(Attr){.shape = each});
  }
}

void print_attention(FILE *out, const Node *n) {
  fprintf(out, " {heads=%lld, scale=%g}", (long long)n->attr.i[0], n->attr.f[0]);
}
