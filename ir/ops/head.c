/* head.c — the chunked loss head: cross_entropy(x @ op(w), labels) as one
 * runtime call that never holds the [rows, classes] logits
 * (trc_linear_cross_entropy, runtime/trainc.h), and the loss it ends in.
 *
 * The loss is the end of the graph and its seed dl is set before forward(),
 * so linear_cross_entropy makes the gradients right where it makes each
 * chunk's logits: dx into its own output, w's gradient added into w's slot.
 * Its output, [rows + stat rows, D], holds dx, then each row's loss and
 * argmax; one chunk's logits go to a scratch of its own, alive for its step
 * alone (head_dims, node_scratch_bytes). head_loss
 * reduces the row losses to the loss; its gradient is the seed, which it
 * passes to linear_cross_entropy, whose rule hands x its dx, a view of the
 * output. passes/head.c makes the pair from cross_entropy over a matmul. */
#include "ops_internal.h"

#include <stdlib.h>

/* Rows of d floats that hold each row's loss and argmax. */
static int64_t stat_rows(int64_t rows, int64_t d) { return (2 * rows + d - 1) / d; }

void head_dims(const Graph *g, const Node *n, HeadDims *h) {
  const Shape *x = &in_node(g, n, 0)->shape, *w = &in_node(g, n, 1)->shape;
  h->w_vd = !n->attr.i[2];
  h->n = rows_of(x);
  h->d = last_dim(x);
  h->v = h->w_vd ? w->dim[0] : w->dim[1];
  h->chunk = n->attr.i[3];
  h->has_ignore = n->attr.i[0];
  h->ignore_label = n->attr.i[1];
  h->adds_dw = n->attr.i[4];
  h->stats_at = h->n * h->d;
  h->scratch_bytes = (uint64_t)h->chunk * (uint64_t)h->v * sizeof(float);
  h->planner_chooses = n->attr.i[5];
}

HeadPasses head_passes(const HeadDims *h) {
  double w = (double)h->v * (double)h->d * sizeof(float);
  double chunks = (double)((h->n + h->chunk - 1) / h->chunk);
  double per_chunk = (h->adds_dw ? 4 : 2) * w;
  double logits = (double)h->n * (double)h->v;
  return (HeadPasses){.bytes = chunks * per_chunk - w,
                      .in_play = (h->adds_dw ? 2 : 1) * w,
                      .row_bytes = 2 * logits * sizeof(float),
                      .row_in_play = (double)h->scratch_bytes,
                      .math_calls = 2 * logits};
}

/* Per chunk of r rows: the logits [r, v] from x [r, d] and w, dx [r, d]
 * from them and w, and (when w trains) w's gradient [v, d] from them and
 * x: r v + r d + v d elements each. */
double head_gemm_elements(const HeadDims *h) {
  double chunks = (double)((h->n + h->chunk - 1) / h->chunk), gemms = h->adds_dw ? 3 : 2;
  double n = (double)h->n, d = (double)h->d, v = (double)h->v;
  return gemms * (n * v + n * d + chunks * v * d);
}

uint64_t node_scratch_bytes(const Graph *g, const Node *n) {
  if (n->op != OP_LINEAR_CROSS_ENTROPY) return 0;
  HeadDims h;
  head_dims(g, n, &h);
  return h.scratch_bytes;
}

/* Its calls' operand copies (trc_linear_cross_entropy): the logits' (a
 * chunk of x, and w); dx and w's gradient read the logit gradients as the
 * head rounded them where it made them (trc_gemm_bf16_given), beside w or
 * the chunk of x. */
uint64_t head_bf16_operand_bytes(const Graph *g, const Node *n, bool weights_copied) {
  HeadDims h;
  head_dims(g, n, &h);
  int64_t rows = h.chunk < h.n ? h.chunk : h.n;
  bool w_copied = weights_copied && in_node(g, n, 1)->op == OP_PARAM;
  return bf16_copy_bytes(rows * h.d) + (w_copied ? 0 : bf16_copy_bytes(h.v * h.d));
}

/* x [..., D], w [V, D] (or [D, V] when attr.i[2]), labels one per row, the
 * loss seed → [rows + stat rows, D]. */
bool infer_linear_cross_entropy(const Graph *g, Node *n, Diag *diag) {
  const Shape *w = &in_node(g, n, 1)->shape;
  int64_t d = last_dim(&in_node(g, n, 0)->shape);
  if (w->rank != 2 || (n->attr.i[2] ? w->dim[0] : w->dim[1]) != d || n->attr.i[3] < 1)
    diag_internal_error("linear_cross_entropy %d: w does not fit x", n->id); /* only passes make it */
  int64_t rows = rows_of(&in_node(g, n, 0)->shape);
  n->shape = (Shape){.rank = 2, .dim = {rows + stat_rows(rows, d), d}};
  return true;
}

/* Its GEMMs: the logits, dx, and w's gradient when w trains (a frozen w's
 * is never made); the rows' FLOPs are few beside them, though not their
 * time (head_passes prices it). */
double flops_linear_cross_entropy(const Graph *g, const Node *n) {
  HeadDims h;
  head_dims(g, n, &h);
  return (h.adds_dw ? 3 : 2) * 2.0 * (double)h.n * (double)h.d * (double)h.v;
}

/* The gradients were made in forward with the seed: x's is a view of the
 * output's first rows; w's is in its slot already. */
void bwd_linear_cross_entropy(Graph *g, int n, int dy, const bool want[], int dx[]) {
  if (!want[0]) return;
  const Node *x = &g->nodes[g->nodes[n].in[0]];
  Attr rows = {.i = {0}, .shape = {.rank = 2, .dim = {rows_of(&x->shape), last_dim(&x->shape)}}};
  int dx_rows = add_with(g, OP_SLICE, n, &rows);
  dx[0] = add_with(g, OP_RESHAPE, dx_rows, &(Attr){.shape = x->shape});
}

void print_head(FILE *out, const Node *n) {
  fprintf(out, " {chunk %lld%s%s", (long long)n->attr.i[3], n->attr.i[2] ? ", w [D, V]" : "",
          n->attr.i[4] ? ", adds grad(w)" : "");
  if (n->attr.i[0]) fprintf(out, ", ignore %lld", (long long)n->attr.i[1]);
  fputs("}", out);
}

double flops_head_loss(const Graph *g, const Node *n) {
  HeadDims h;
  head_dims(g, in_node(g, n, 0), &h);
  return (double)h.n;
}

bool infer_head_loss(const Graph *g, Node *n, Diag *diag) {
  n->shape = (Shape){.rank = 0};
  return true;
}

/* The mean of the row losses (the sum with ignore, where an ignored row's
 * loss is 0), in row order as cross_entropy adds them. */
Kernel *kernel_head_loss(const Graph *g, const Node *n) {
  HeadDims h;
  head_dims(g, in_node(g, n, 0), &h);
  Kernel *k = kernel_new(n->id);
  int total, r;
  k_local(k, NULL, k_const(k, 0), &total);
  KStmt *rows = k_for(k, NULL, h.n, &r);
  KExpr *row_loss = k_load(k, n->in[0], k_iadd(k, k_iconst(k, h.stats_at), k_index(k, r)), false);
  k_set(k, rows, total, k_binary(k, KB_ADD, k_localv(k, total), row_loss));
  double scale = h.has_ignore ? 1.0 : 1.0 / (double)h.n;
  k_store(k, NULL, n->id, k_iconst(k, 0), k_binary(k, KB_MUL, k_localv(k, total), k_const(k, scale)),
          accumulates(n));
  return k;
}

/* The seed, unchanged: linear_cross_entropy made its gradients with it. */
void bwd_head_loss(Graph *g, int n, int dy, const bool want[], int dx[]) {
  if (want[0]) dx[0] = dy;
}
