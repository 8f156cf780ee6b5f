/* pointwise.c — pointwise ops: arithmetic, activations and their gradients (their
 * scalar formulas in POINTWISE's broadcasting loops), and sums and broadcasts. */
#include "ops_internal.h"

#include <math.h>
#include <stdlib.h>

/* ----------------------------------------------------- pointwise arithmetic */

bool infer_cast(const Graph *g, Node *n, Diag *diag) {
  const Node *x = in_node(g, n, 0);
  if (x->dtype == DT_F32) {
    diag_error(diag, n->loc, "f32() of a value that is already f32");
    return false;
  }
  n->shape = x->shape;
  return true;
}

static KExpr *s_cast(Kernel *k, const Node *n, KExpr **x) { return k_to_float(k, x[0]); }
POINTWISE(cast)

/* Numpy broadcasting: shapes align on the right; a dim of 1 stretches. */
bool infer_broadcast(const Graph *g, Node *n, Diag *diag) {
  if (!want_f32(g, n, 0, diag) || !want_f32(g, n, 1, diag)) return false;
  const Shape *a = &in_node(g, n, 0)->shape, *b = &in_node(g, n, 1)->shape;
  Shape out = {.rank = a->rank > b->rank ? a->rank : b->rank};
  for (int i = 0; i < out.rank; i++) {
    int ia = a->rank - out.rank + i, ib = b->rank - out.rank + i;
    int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      char sa[128], sb[128];
      diag_error(diag, n->loc, "cannot broadcast %s and %s for '%s' (dimension %d: %lld vs %lld)",
                 shape_str(a, sa), shape_str(b, sb), op_info(n->op)->name, i, (long long)da,
                 (long long)db);
      return false;
    }
    out.dim[i] = da == 1 ? db : da;
  }
  n->shape = out;
  return true;
}

void bwd_add(Graph *g, int n, int dy, const bool want[], int dx[]) {
  const Node *x = &g->nodes[n];
  int a = x->in[0], b = x->in[1];
  if (want[0]) dx[0] = graph_sum_to(g, dy, a);
  if (want[1]) dx[1] = graph_sum_to(g, dy, b);
}

static KExpr *s_add(Kernel *k, const Node *n, KExpr **x) { return k_binary(k, KB_ADD, x[0], x[1]); }
POINTWISE(add)

void bwd_sub(Graph *g, int n, int dy, const bool want[], int dx[]) {
  int a = g->nodes[n].in[0], b = g->nodes[n].in[1];
  if (want[0]) dx[0] = graph_sum_to(g, dy, a);
  if (want[1]) dx[1] = graph_sum_to(g, add1(g, OP_NEG, dy), b);
}

static KExpr *s_sub(Kernel *k, const Node *n, KExpr **x) { return k_binary(k, KB_SUB, x[0], x[1]); }
POINTWISE(sub)

void bwd_mul(Graph *g, int n, int dy, const bool want[], int dx[]) {
  int a = g->nodes[n].in[0], b = g->nodes[n].in[1];
  if (want[0]) dx[0] = graph_sum_to(g, add2(g, OP_MUL, dy, b), a);
  if (want[1]) dx[1] = graph_sum_to(g, add2(g, OP_MUL, dy, a), b);
}

static KExpr *s_mul(Kernel *k, const Node *n, KExpr **x) { return k_binary(k, KB_MUL, x[0], x[1]); }
POINTWISE(mul)

/* y = a / b: da = dy / b, db = -dy * y / b. */
void bwd_div(Graph *g, int n, int dy, const bool want[], int dx[]) {
  int a = g->nodes[n].in[0], b = g->nodes[n].in[1];
  if (want[0]) dx[0] = graph_sum_to(g, add2(g, OP_DIV, dy, b), a);
  if (want[1]) {
    int t = add2(g, OP_DIV, add2(g, OP_MUL, dy, n), b);
    dx[1] = graph_sum_to(g, add1(g, OP_NEG, t), b);
  }
}

static KExpr *s_div(Kernel *k, const Node *n, KExpr **x) { return k_binary(k, KB_DIV, x[0], x[1]); }
POINTWISE(div)

void bwd_neg(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add1(g, OP_NEG, dy);
}

static KExpr *s_neg(Kernel *k, const Node *n, KExpr **x) { return k_unary(k, KU_NEG, x[0]); }
POINTWISE(neg)

void bwd_identity(Graph *g, int n, int dy, const bool want[], int dx[]) { dx[0] = dy; }

static KExpr *s_add_scalar(Kernel *k, const Node *n, KExpr **x) {
  return k_binary(k, KB_ADD, x[0], k_const(k, n->attr.f[0]));
}
POINTWISE(add_scalar)

void bwd_mul_scalar(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = graph_add_attr(g, OP_MUL_SCALAR, &dy, 1, g->nodes[n].attr.f[0], 0, 0, no_loc, NULL);
}

static KExpr *s_mul_scalar(Kernel *k, const Node *n, KExpr **x) {
  return k_binary(k, KB_MUL, x[0], k_const(k, n->attr.f[0]));
}
POINTWISE(mul_scalar)

/* ------------------------------------------ activations and their gradients */

/* From the output (y > 0 exactly where x > 0), as PyTorch: the input need
 * not be kept for the backward pass, and the output usually is anyway. */
void bwd_relu(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add2(g, OP_RELU_GRAD, n, dy);
}

static KExpr *s_relu(Kernel *k, const Node *n, KExpr **x) {
  return k_binary(k, KB_MAX, x[0], k_const(k, 0));
}
POINTWISE(relu)

static KExpr *s_relu_grad(Kernel *k, const Node *n, KExpr **x) {
  return k_select(k, x[0], x[1], k_const(k, 0));
}
POINTWISE(relu_grad)

/* Phi(x) = 0.5 * (1 + erf(x / sqrt 2)), the normal CDF. */
static KExpr *normal_cdf(Kernel *k, KExpr *x) {
  KExpr *e = k_unary(k, KU_ERF, k_binary(k, KB_MUL, x, k_const(k, 0.70710678118654752440)));
  return k_binary(k, KB_MUL, k_const(k, 0.5), k_binary(k, KB_ADD, k_const(k, 1), e));
}

/* The exact (erf) GELU, as PyTorch's default: x * Phi(x). */
static KExpr *s_gelu(Kernel *k, const Node *n, KExpr **x) { return k_binary(k, KB_MUL, x[0], normal_cdf(k, x[0])); }
POINTWISE(gelu)

void bwd_gelu(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add2(g, OP_GELU_GRAD, g->nodes[n].in[0], dy);
}

/* d gelu/dx = Phi(x) + x * phi(x). */
static KExpr *s_gelu_grad(Kernel *k, const Node *n, KExpr **x) {
  KExpr *x2 = k_binary(k, KB_MUL, x[0], x[0]);
  KExpr *pdf = k_binary(k, KB_MUL, k_const(k, 0.3989422804014327),
                        k_unary(k, KU_EXP, k_binary(k, KB_MUL, x2, k_const(k, -0.5))));
  KExpr *d = k_binary(k, KB_ADD, normal_cdf(k, x[0]), k_binary(k, KB_MUL, x[0], pdf));
  return k_binary(k, KB_MUL, x[1], d);
}
POINTWISE(gelu_grad)

void bwd_tanh(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add2(g, OP_TANH_GRAD, n, dy);
}

static KExpr *s_tanh(Kernel *k, const Node *n, KExpr **x) { return k_unary(k, KU_TANH, x[0]); }
POINTWISE(tanh)

static KExpr *s_tanh_grad(Kernel *k, const Node *n, KExpr **x) {
  KExpr *one_minus = k_binary(k, KB_SUB, k_const(k, 1), k_binary(k, KB_MUL, x[0], x[0]));
  return k_binary(k, KB_MUL, x[1], one_minus);
}
POINTWISE(tanh_grad)

void bwd_sigmoid(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add2(g, OP_SIGMOID_GRAD, n, dy);
}

static KExpr *s_sigmoid(Kernel *k, const Node *n, KExpr **x) {
  KExpr *e = k_unary(k, KU_EXP, k_unary(k, KU_NEG, x[0]));
  return k_binary(k, KB_DIV, k_const(k, 1), k_binary(k, KB_ADD, k_const(k, 1), e));
}
POINTWISE(sigmoid)

static KExpr *s_sigmoid_grad(Kernel *k, const Node *n, KExpr **x) {
  KExpr *d = k_binary(k, KB_MUL, x[0], k_binary(k, KB_SUB, k_const(k, 1), x[0]));
  return k_binary(k, KB_MUL, x[1], d);
}
POINTWISE(sigmoid_grad)

/* SiLU (swish): x * sigmoid(x). */
static KExpr *s_silu(Kernel *k, const Node *n, KExpr **x) { return k_binary(k, KB_MUL, x[0], s_sigmoid(k, n, x)); }
POINTWISE(silu)

void bwd_silu(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add2(g, OP_SILU_GRAD, g->nodes[n].in[0], dy);
}

/* d silu/dx = s * (1 + x * (1 - s)), s = sigmoid(x) (as PyTorch). */
static KExpr *s_silu_grad(Kernel *k, const Node *n, KExpr **x) {
  KExpr *s = s_sigmoid(k, n, x);
  KExpr *t = k_binary(k, KB_ADD, k_const(k, 1), k_binary(k, KB_MUL, x[0], k_binary(k, KB_SUB, k_const(k, 1), s)));
  return k_binary(k, KB_MUL, x[1], k_binary(k, KB_MUL, s, t));
}
POINTWISE(silu_grad)

void bwd_exp(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add2(g, OP_MUL, dy, n);
}

static KExpr *s_exp(Kernel *k, const Node *n, KExpr **x) { return k_unary(k, KU_EXP, x[0]); }
POINTWISE(exp)

void bwd_log(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add2(g, OP_DIV, dy, g->nodes[n].in[0]);
}

static KExpr *s_log(Kernel *k, const Node *n, KExpr **x) { return k_unary(k, KU_LOG, x[0]); }
POINTWISE(log)

/* ------------------------------------------------------ sums and broadcasts */

bool infer_scalar_out(const Graph *g, Node *n, Diag *diag) {
  if (!want_f32(g, n, 0, diag)) return false;
  n->shape = (Shape){.rank = 0};
  return true;
}

Kernel *kernel_sum(const Graph *g, const Node *n) {
  Kernel *k = kernel_new(n->id);
  int acc, v;
  k_local(k, NULL, k_const(k, 0), &acc);
  KStmt *loop = k_for(k, NULL, shape_numel(&in_node(g, n, 0)->shape), &v);
  k_set(k, loop, acc, k_binary(k, KB_ADD, k_localv(k, acc), k_load(k, n->in[0], k_index(k, v), false)));
  k_store(k, NULL, n->id, k_iconst(k, 0), k_localv(k, acc), accumulates(n));
  return k;
}

void bwd_sum(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = graph_expand_to(g, dy, g->nodes[n].in[0]);
}

int64_t sum_to_block(int64_t cols) {
  for (int64_t w = 64; w >= 16; w /= 2)
    if (cols % w == 0 && cols / w >= 2) return w;
  return 0;
}

/* s with its last axis split into [dim / w, w]. */
static Shape split_last(const Shape *s, int64_t w) {
  Shape t = *s;
  t.dim[t.rank - 1] = s->dim[s->rank - 1] / w;
  t.dim[t.rank++] = w;
  return t;
}

/* Whether sum_to keeps axis d of its input (the output, aligned to the
 * right, has it at full size). */
static bool keeps_axis(const Shape *in, const Shape *out, int d) {
  int od = out->rank - in->rank + d;
  return od >= 0 && out->dim[od] != 1;
}

/* How many trailing axes of `in` sum_to reduces away, and the elements
 * they hold (*tail). */
static int reduced_tail(const Shape *in, const Shape *out, int64_t *tail) {
  int axes = 0;
  *tail = 1;
  for (int d = in->rank - 1; d >= 0 && !keeps_axis(in, out, d); d--) axes++, *tail *= in->dim[d];
  return axes;
}

/* sum_to where the input's trailing axes are all reduced and hold at least
 * K_LANES elements (a convolution's bias gradient, [C, 1, 1] of [N, C, H,
 * W]): a loop over the kept axes outside, whose iterations write disjoint
 * elements (on the threads: kernel_mark_parallel proves it), each summing
 * into a local its reduced leading axes in order and, inside them, the
 * contiguous tail as one reduction loop in lanes (ir.h: it vectorizes). */
static Kernel *sum_to_tail(const Graph *g, const Node *n, const Shape *in, int tail_axes, int64_t tail) {
  Kernel *k = kernel_new(n->id);
  int lead = in->rank - tail_axes, vars[IR_MAX_RANK] = {0};
  KStmt *parent = NULL;
  for (int d = 0; d < lead; d++)
    if (keeps_axis(in, &n->shape, d)) parent = k_for(k, parent, in->dim[d], &vars[d]);
  int t, j;
  k_local(k, parent, k_const(k, 0), &t);
  KStmt *body = parent;
  for (int d = 0; d < lead; d++)
    if (!keeps_axis(in, &n->shape, d)) body = k_for(k, body, in->dim[d], &vars[d]);
  KStmt *row = k_for(k, body, tail, &j);
  KExpr *at = k_index(k, j);
  int64_t stride = tail;
  for (int d = lead - 1; d >= 0; d--) {
    at = k_iadd(k, at, k_imul(k, k_index(k, vars[d]), stride));
    stride *= in->dim[d];
  }
  k_set(k, row, t, k_binary(k, KB_ADD, k_localv(k, t), k_load(k, n->in[0], at, false)));
  k_store(k, parent, n->id, broadcast_index(k, in, &n->shape, vars), k_localv(k, t), accumulates(n));
  return k;
}

/* Scatter-adds every input element into the output element it was broadcast
 * from; the loops run over the input, so the innermost loop is contiguous.
 * When the output keeps the input's last axis (a bias gradient [C] of
 * [..., C]), that axis is cut into blocks of w columns and the loop over
 * blocks goes outside: its iterations add into disjoint columns, so it
 * runs on the threads (kernel_mark_parallel proves it), and each output
 * element still takes the input's rows in order — the same sums as one
 * loop over the rows. When it reduces the trailing axes away, sum_to_tail. */
Kernel *kernel_sum_to(const Graph *g, const Node *n) {
  Shape in = in_node(g, n, 0)->shape, out = n->shape;
  int64_t tail;
  int tail_axes = reduced_tail(&in, &out, &tail);
  if (tail_axes > 0 && tail >= K_LANES) return sum_to_tail(g, n, &in, tail_axes, tail);
  Kernel *k = kernel_new(n->id);
  zero_output(k, n);
  int64_t w = in.rank < IR_MAX_RANK && out.rank >= 1 && last_dim(&out) == last_dim(&in)
                  ? sum_to_block(last_dim(&in)) : 0;
  if (w) in = split_last(&in, w), out = split_last(&out, w);
  int vars[IR_MAX_RANK];
  KStmt *parent = w ? k_for(k, NULL, in.dim[in.rank - 2], &vars[in.rank - 2]) : NULL;
  for (int d = 0; d < in.rank; d++)
    if (!w || d != in.rank - 2) parent = k_for(k, parent, in.dim[d], &vars[d]);
  KExpr *x = k_load(k, n->in[0], broadcast_index(k, &in, &in, vars), false);
  k_store(k, parent, n->id, broadcast_index(k, &in, &out, vars), x, true);
  return k;
}

static KExpr *s_copy(Kernel *k, const Node *n, KExpr **x) { return x[0]; }
POINTWISE(copy)
