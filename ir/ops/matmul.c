/* matmul.c — the ops a backend hands to a library: matrix products (GEMMs:
 * every backend calls its BLAS) and convolutions (trc_conv2d). */
#include "ops_internal.h"

#include <math.h>
#include <stdlib.h>

/* -------------------- matrix products (GEMMs: every backend calls its BLAS) */

/* attr.i[0], attr.i[1]: whether a and b are transposed; a bmm's heads and
 * which operands are head-interleaved (ops.def). */
void print_transpose(FILE *out, const Node *n) {
  fprintf(out, " {ta=%lld, tb=%lld", (long long)n->attr.i[0], (long long)n->attr.i[1]);
  if (n->op == OP_BMM && n->attr.i[2] > 0) {
    fprintf(out, ", heads=%lld, interleaved=", (long long)n->attr.i[2]);
    for (int which = 0; which < 3; which++)
      if (n->attr.i[3] >> which & 1) fputc("abc"[which], out);
    if (!n->attr.i[3]) fputs("none", out);
  }
  fputc('}', out);
}

/* Both operands are viewed as matrices [rows, last dim] (rows: the product of
 * the leading dims); op(x) transposes when attr.i[0] (a) / attr.i[1] (b).
 * The result keeps a's leading dims unless a is transposed. */
bool infer_matmul(const Graph *g, Node *n, Diag *diag) {
  if (!want_f32(g, n, 0, diag) || !want_f32(g, n, 1, diag)) return false;
  const Shape *a = &in_node(g, n, 0)->shape, *b = &in_node(g, n, 1)->shape;
  bool ta = n->attr.i[0], tb = n->attr.i[1];
  char sa[128], sb[128];
  if (a->rank < 1 || b->rank < 1) {
    diag_error(diag, n->loc, "matmul needs tensors with at least one axis: %s @ %s", shape_str(a, sa),
               shape_str(b, sb));
    return false;
  }
  int64_t k_a = ta ? rows_of(a) : last_dim(a);
  int64_t k_b = tb ? last_dim(b) : rows_of(b);
  if (k_a != k_b) {
    diag_error(diag, n->loc, "matmul shapes do not fit: %s @ %s (inner dimensions %lld and %lld)",
               shape_str(a, sa), shape_str(b, sb), (long long)k_a, (long long)k_b);
    return false;
  }
  int64_t cols = tb ? rows_of(b) : last_dim(b);
  if (ta) {
    n->shape = (Shape){.rank = 2, .dim = {last_dim(a), cols}};
  } else {
    n->shape = *a;
    n->shape.dim[a->rank - 1] = cols;
  }
  return true;
}

double flops_matmul(const Graph *g, const Node *n) {
  const Shape *b = &in_node(g, n, 1)->shape;
  int64_t k = n->attr.i[1] ? last_dim(b) : rows_of(b);
  return 2.0 * (double)shape_numel(&n->shape) * (double)k;
}

/* C = A op(B), A viewed as [M, K]. dA = dC op(B)^T; dB = A^T dC (or dC^T A
 * when B is stored transposed, as linear's [out, in] weight is). Forward
 * matmuls never transpose A, so this rule needs no other case. */
void bwd_matmul(Graph *g, int n, int dy, const bool want[], int dx[]) {
  int a = g->nodes[n].in[0], b = g->nodes[n].in[1];
  bool tb = g->nodes[n].attr.i[1];
  if (want[0]) {
    int in[2] = {dy, b};
    dx[0] = graph_add_attr(g, OP_MATMUL, in, 2, 0, 0, !tb, no_loc, NULL);
  }
  if (want[1]) {
    int in[2] = {tb ? dy : a, tb ? a : dy};
    dx[1] = graph_add_attr(g, OP_MATMUL, in, 2, 0, 1, 0, no_loc, NULL);
  }
}

/* One operand of a bmm as stored: a batch of rows x cols matrices after
 * lead_rank leading axes. Matrix (o, h) (o: the flat index over the leading
 * axes, h: the head) starts at o * stride + h * head_stride, row r at r * ld.
 * Without heads each matrix is one head (head_stride unused). */
typedef struct {
  int lead_rank;
  int64_t rows, cols, ld, stride, head_stride;
} BmmOperand;

/* Operand `which` (0: a, 1: b, 2: the output) of bmm node n stored as s
 * (ops.def: [lead..., H, rows, cols] or head-interleaved [lead..., rows,
 * H*cols]); false when s has not that layout. */
static bool bmm_operand(const Node *n, int which, const Shape *s, BmmOperand *o) {
  int64_t heads = n->attr.i[2];
  bool interleaved = heads > 0 && (n->attr.i[3] >> which & 1);
  int matrix_rank = heads > 0 && !interleaved ? 3 : 2;
  if (s->rank < matrix_rank + (heads > 0 ? 0 : 1)) return false;
  int64_t last = s->dim[s->rank - 1];
  o->lead_rank = s->rank - matrix_rank;
  o->rows = s->dim[s->rank - 2];
  o->ld = last;
  if (interleaved) {
    o->cols = last / heads, o->head_stride = o->cols, o->stride = o->rows * last;
    return last % heads == 0;
  }
  o->cols = last, o->head_stride = o->rows * last;
  o->stride = o->head_stride * (heads > 0 ? heads : 1);
  return heads == 0 || s->dim[s->rank - 3] == heads;
}

/* The rows and columns of op(x) for a (maybe transposed) stored operand. */
static int64_t op_rows(const BmmOperand *x, bool t) { return t ? x->cols : x->rows; }
static int64_t op_cols(const BmmOperand *x, bool t) { return t ? x->rows : x->cols; }

bool infer_bmm(const Graph *g, Node *n, Diag *diag) {
  if (!want_f32(g, n, 0, diag) || !want_f32(g, n, 1, diag)) return false;
  const Shape *a = &in_node(g, n, 0)->shape, *b = &in_node(g, n, 1)->shape;
  bool ta = n->attr.i[0], tb = n->attr.i[1];
  int64_t heads = n->attr.i[2];
  BmmOperand oa, ob;
  bool c_interleaved = heads > 0 && (n->attr.i[3] & BMM_HEADS_C);
  bool fits = bmm_operand(n, 0, a, &oa) && bmm_operand(n, 1, b, &ob) &&
              oa.lead_rank == ob.lead_rank && op_cols(&oa, ta) == op_rows(&ob, tb) &&
              oa.lead_rank + (heads > 0 && !c_interleaved ? 3 : 2) <= IR_MAX_RANK;
  for (int d = 0; fits && d < oa.lead_rank; d++) fits = a->dim[d] == b->dim[d];
  if (!fits) {
    char sa[128], sb[128];
    diag_error(diag, n->loc,
               "batched matmul shapes do not fit: %s @ %s (expected [..., M, K] @ [..., K, N] "
               "with the same leading dimensions%s)",
               shape_str(a, sa), shape_str(b, sb), heads > 0 ? ", split into heads" : "");
    return false;
  }
  int64_t m = op_rows(&oa, ta), cols = op_cols(&ob, tb);
  n->shape = *a;
  n->shape.rank = oa.lead_rank;
  if (heads > 0 && !c_interleaved) n->shape.dim[n->shape.rank++] = heads;
  n->shape.dim[n->shape.rank++] = m;
  n->shape.dim[n->shape.rank++] = c_interleaved ? heads * cols : cols;
  return true;
}

double flops_bmm(const Graph *g, const Node *n) {
  BmmOperand a;
  if (!bmm_operand(n, 0, &in_node(g, n, 0)->shape, &a)) /* infer_bmm checked it */
    diag_internal_error("bmm %d: its first operand has not the bmm layout", n->id);
  return 2.0 * (double)shape_numel(&n->shape) * (double)op_cols(&a, n->attr.i[0]);
}

int graph_add_bmm(Graph *g, const int in[2], bool ta, bool tb, int64_t heads, int layout,
                  SrcLoc loc, Diag *diag) {
  Attr attr = {.i = {ta, tb, heads, layout}};
  return graph_add_op(g, OP_BMM, in, 2, &attr, loc, diag);
}

/* The BMM_HEADS_* bits of a bmm whose a, b, c are laid out as the operands
 * with bits `a`, `b`, `c` of `layout`. */
static int relayout(int64_t layout, int a, int b, int c) {
  return (int)((layout >> a & 1) | (layout >> b & 1) << 1 | (layout >> c & 1) << 2);
}

/* C = op_a(A) op_b(B) per batch: d op_a(A) = dC op_b(B)^T, d op_b(B) = op_a(A)^T dC,
 * each written so that the stored (maybe transposed) operand comes out. Each
 * operand keeps its head layout: the gradient of a head-interleaved operand
 * comes out head-interleaved, with no copy. */
void bwd_bmm(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Node x = g->nodes[n];
  int a = x.in[0], b = x.in[1];
  bool ta = x.attr.i[0], tb = x.attr.i[1];
  int64_t heads = x.attr.i[2], layout = x.attr.i[3];
  if (want[0]) {
    int in[2] = {ta ? b : dy, ta ? dy : b};
    dx[0] = graph_add_bmm(g, in, ta ? tb : 0, ta ? 1 : !tb, heads,
                          ta ? relayout(layout, 1, 2, 0) : relayout(layout, 2, 1, 0), no_loc, NULL);
  }
  if (want[1]) {
    int in[2] = {tb ? dy : a, tb ? a : dy};
    dx[1] = graph_add_bmm(g, in, tb ? 1 : !ta, tb ? ta : 0, heads,
                          tb ? relayout(layout, 2, 0, 1) : relayout(layout, 0, 2, 1), no_loc, NULL);
  }
}

/* A matmul operand: one matrix [rows, last dim]. */
static BmmOperand matmul_operand(const Shape *s) {
  int64_t cols = last_dim(s), rows = shape_numel(s) / cols;
  return (BmmOperand){.rows = rows, .cols = cols, .ld = cols, .stride = rows * cols};
}

/* The BLAS call of a GEMM node (ir.h): each operand one matrix [rows, last
 * dim] for matmul, a batch of matrices (the last two dims, maybe split into
 * heads) for bmm. */
void gemm_dims(const Graph *g, const Node *n, GemmDims *d) {
  const Shape *sa = &in_node(g, n, 0)->shape, *sb = &in_node(g, n, 1)->shape;
  BmmOperand a = matmul_operand(sa), b = matmul_operand(sb), c;
  d->heads = 1;
  if (n->op == OP_BMM) {
    bmm_operand(n, 0, sa, &a), bmm_operand(n, 1, sb, &b), bmm_operand(n, 2, &n->shape, &c);
    if (n->attr.i[2] > 0) d->heads = n->attr.i[2];
  }
  d->trans_a = n->attr.i[0], d->trans_b = n->attr.i[1];
  d->m = op_rows(&a, d->trans_a), d->k = op_cols(&a, d->trans_a), d->n = op_cols(&b, d->trans_b);
  if (n->op != OP_BMM)
    c = (BmmOperand){.rows = d->m, .cols = d->n, .ld = d->n, .stride = d->m * d->n};
  d->batch = shape_numel(&n->shape) / (d->m * d->n * d->heads);
  d->lda = a.ld, d->ldb = b.ld, d->ldc = c.ld;
  d->stride_a = a.stride, d->stride_b = b.stride, d->stride_c = c.stride;
  /* one head: no head strides, the same call as before heads existed */
  bool split = d->heads > 1;
  d->head_stride_a = split ? a.head_stride : 0, d->head_stride_b = split ? b.head_stride : 0;
  d->head_stride_c = split ? c.head_stride : 0;
  d->accumulate = n->grad_of_param >= 0;
  d->rounded = n->rounded;
  d->f32 = !n->rounded && !gemm_rounds_under_bf16(n);
}

int64_t gemm_matrices(const Graph *g, const Node *n) {
  if (op_info(n->op)->op_class != OPC_GEMM) return 0;
  GemmDims d;
  gemm_dims(g, n, &d);
  return d.batch * d.heads;
}

static double conv_out_pixels(const ConvDims *d);

/* One GEMM an image: dy [o, oh ow], the shifted copies [k k, oh ow], dw
 * [o, k k]. */
static double conv_gemm_elements(const ConvDims *d) {
  double o = (double)d->o, taps = (double)(d->k * d->k), pixels = conv_out_pixels(d);
  return (double)d->n * (o * pixels + taps * pixels + o * taps);
}

double gemm_elements(const Graph *g, const Node *n) {
  if (n->op == OP_LINEAR_CROSS_ENTROPY) {
    HeadDims h;
    head_dims(g, n, &h);
    return head_gemm_elements(&h);
  }
  if (n->op == OP_CONV2D_GRAD_WEIGHT) {
    ConvDims d;
    conv_dims(g, n, &d);
    return conv_weights_by_gemm(&d) ? conv_gemm_elements(&d) : 0;
  }
  if (op_info(n->op)->op_class != OPC_GEMM) return 0;
  GemmDims d;
  gemm_dims(g, n, &d);
  double m = (double)d.m, k = (double)d.k, cols = (double)d.n;
  return (double)(d.batch * d.heads) * (m * k + k * cols + m * cols);
}

bool gemm_rounds_under_bf16(const Node *n) { return n->op == OP_MATMUL || n->op == OP_LINEAR_CROSS_ENTROPY; }

/* ----------------------------------------------------- bf16 operand copies */

uint64_t bf16_copy_bytes(int64_t values) {
  uint64_t bytes = (uint64_t)values * 2;
  return (bytes + BF16_COPY_ALIGN - 1) / BF16_COPY_ALIGN * BF16_COPY_ALIGN;
}

/* Operand i's copy: none when it is a parameter that the parameters' bf16
 * copy serves (the runtime reads it there for a one-matrix call only). */
static uint64_t operand_copy_bytes(const Graph *g, const Node *n, int i, int64_t values,
                                   bool one_matrix, bool weights_copied) {
  if (weights_copied && one_matrix && in_node(g, n, i)->op == OP_PARAM) return 0;
  return bf16_copy_bytes(values);
}

uint64_t node_bf16_operand_bytes(const Graph *g, const Node *n, bool weights_copied) {
  if (n->op == OP_LINEAR_CROSS_ENTROPY) return head_bf16_operand_bytes(g, n, weights_copied);
  if (op_info(n->op)->op_class != OPC_GEMM) return 0;
  GemmDims d;
  gemm_dims(g, n, &d);
  int64_t matrices = d.batch * d.heads;
  return operand_copy_bytes(g, n, 0, matrices * d.m * d.k, matrices == 1, weights_copied) +
         operand_copy_bytes(g, n, 1, matrices * d.k * d.n, matrices == 1, weights_copied);
}

/* ------------------------------------------------------------ convolutions */

/* conv2d(x [N, C, H, W], w [O, C, k, k]) → [N, O, OH, OW] with attr.i[0] =
 * stride, attr.i[1] = padding: a library call (trc_conv2d), as are its two
 * gradients, which take the shape they produce in attr.shape. The CONV pass
 * (passes/conv.c) gives it its bias add and relu as a third input (the bias
 * as [O, 1, 1]) and attr.i[2] = 1, which trc_conv2d applies while each block
 * of the output is in the cache. */
static void want_conv_bias(const Graph *g, const Node *n) {
  const Shape *b = &in_node(g, n, 2)->shape;
  if (b->rank != 3 || b->dim[0] != n->shape.dim[1] || b->dim[1] != 1 || b->dim[2] != 1 ||
      in_node(g, n, 2)->dtype != DT_F32)
    diag_internal_error("conv2d %d: its bias is not f32[O, 1, 1]", n->id); /* only a pass adds one */
}

bool infer_conv2d(const Graph *g, Node *n, Diag *diag) {
  const Shape *w = &in_node(g, n, 1)->shape;
  int64_t stride = n->attr.i[0], pad = n->attr.i[1];
  if (!want_f32(g, n, 1, diag) || !want_image(g, n, 1, stride, diag)) return false;
  const Shape *x = &in_node(g, n, 0)->shape;
  char sx[128], sw[128];
  int64_t k = w->dim[2];
  if (w->rank != 4 || w->dim[1] != x->dim[1] || w->dim[3] != k || k > x->dim[2] + 2 * pad ||
      k > x->dim[3] + 2 * pad) {
    diag_error(diag, n->loc, "conv2d: weights %s do not fit images %s (padding %lld)",
               shape_str(w, sw), shape_str(x, sx), (long long)pad);
    return false;
  }
  n->shape = (Shape){.rank = 4,
                     .dim = {x->dim[0], w->dim[0], windows(x->dim[2] + 2 * pad, k, stride),
                             windows(x->dim[3] + 2 * pad, k, stride)}};
  if (n->nin == 3) want_conv_bias(g, n);
  return true;
}

/* trc_conv2d's arguments for a node of the three conv ops (ir.h). */
void conv_dims(const Graph *g, const Node *n, ConvDims *d) {
  const Shape *x = n->op == OP_CONV2D_GRAD_INPUT ? &n->shape : &in_node(g, n, 0)->shape;
  const Shape *w = n->op == OP_CONV2D_GRAD_WEIGHT ? &n->shape : &in_node(g, n, 1)->shape;
  d->pass = n->op == OP_CONV2D              ? TRC_CONV_FORWARD
            : n->op == OP_CONV2D_GRAD_INPUT ? TRC_CONV_BACKWARD_DATA
                                            : TRC_CONV_BACKWARD_WEIGHTS;
  d->n = x->dim[0], d->c = x->dim[1], d->h = x->dim[2], d->w = x->dim[3];
  d->o = w->dim[0], d->k = w->dim[2], d->stride = n->attr.i[0], d->pad = n->attr.i[1];
  d->bias = n->op == OP_CONV2D && n->nin == 3;
  d->relu = n->op == OP_CONV2D && n->attr.i[2];
  d->accumulate = n->grad_of_param >= 0;
  if (d->accumulate && d->pass != TRC_CONV_BACKWARD_WEIGHTS) /* a parameter is no image */
    diag_internal_error("convolution %d accumulates into a parameter's gradient, not as the "
                        "weights' gradient", n->id);
}

static double conv_out_pixels(const ConvDims *d) {
  return (double)windows(d->h + 2 * d->pad, d->k, d->stride) * (double)windows(d->w + 2 * d->pad, d->k, d->stride);
}

/* Multiply-adds of the convolution (each pass has as many), and the
 * forward pass's bias and relu, one each an output element. */
double conv_flops(const ConvDims *d) {
  double out = (double)d->n * (double)d->o * conv_out_pixels(d);
  return out * (2.0 * (double)(d->c * d->k * d->k) + d->bias + d->relu);
}

double flops_conv2d(const Graph *g, const Node *n) {
  ConvDims d;
  conv_dims(g, n, &d);
  return conv_flops(&d);
}

enum { CONV_BLOCKED_FROM_CHANNELS = 16 };

double conv_reorder_bytes(const ConvDims *d) {
  double bytes = 0;
  if (d->c >= CONV_BLOCKED_FROM_CHANNELS) bytes += 2.0 * 4.0 * (double)d->n * (double)d->c * (double)(d->h * d->w);
  if (d->o >= CONV_BLOCKED_FROM_CHANNELS) bytes += 2.0 * 4.0 * (double)d->n * (double)d->o * conv_out_pixels(d);
  return bytes;
}

bool conv_weights_by_gemm(const ConvDims *d) { return d->pass == TRC_CONV_BACKWARD_WEIGHTS && d->c == 1; }

double conv_im2col_bytes(const ConvDims *d, bool bf16) {
  double copies = (double)d->n * (double)(d->k * d->k) * conv_out_pixels(d);
  if (!bf16) return 4.0 * copies;
  /* the copies rounded in place (read and written again), dy copied and
   * rounded in place */
  double dy = (double)d->n * (double)d->o * conv_out_pixels(d);
  return 12.0 * copies + 16.0 * dy;
}

/* With a relu, the gradient first goes through it (relu_grad reads the
 * node's output); the bias's is that gradient summed to [O, 1, 1]. */
void bwd_conv2d(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Attr a = g->nodes[n].attr;
  int x = g->nodes[n].in[0], w = g->nodes[n].in[1];
  if (g->nodes[n].attr.i[2]) dy = graph_add_op(g, OP_RELU_GRAD, (int[2]){n, dy}, 2, &(Attr){0}, no_loc, NULL);
  if (g->nodes[n].nin == 3 && want[2]) dx[2] = graph_sum_to(g, dy, g->nodes[n].in[2]);
  a.i[2] = 0; /* the gradients' attr: stride and padding */
  if (want[0]) {
    int in[2] = {dy, w};
    a.shape = g->nodes[x].shape;
    dx[0] = graph_add_op(g, OP_CONV2D_GRAD_INPUT, in, 2, &a, no_loc, NULL);
  }
  if (want[1]) {
    int in[2] = {x, dy};
    a.shape = g->nodes[w].shape;
    dx[1] = graph_add_op(g, OP_CONV2D_GRAD_WEIGHT, in, 2, &a, no_loc, NULL);
  }
}

void print_conv(FILE *out, const Node *n) {
  fprintf(out, " {stride=%lld, padding=%lld%s}", (long long)n->attr.i[0], (long long)n->attr.i[1],
          n->op == OP_CONV2D && n->attr.i[2] ? ", relu" : "");
}
