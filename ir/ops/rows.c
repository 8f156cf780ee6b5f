/* ops.c — what every op is: its shape rule, cost, backward rule and kernel,
 * side by side, one op or op family at a time (as llm.c keeps
 * layernorm_forward beside layernorm_backward). ir/ops.def lists the ops with
 * their class, model-file name and these functions; the table at the bottom
 * ties the two together. Helpers that several families share come first.
 *
 * Kernels are loop nests (ir.h). Pointwise ops only give their scalar formula;
 * pointwise_kernel() wraps it in loops with broadcasting. Row ops (softmax,
 * layernorm, cross-entropy) work on the last axis: R rows of C columns. A
 * kernel whose node has grad_of_param >= 0 adds into that parameter's gradient
 * instead of overwriting its output. */
#include "ir.h"

#include <math.h>
#include <stdlib.h>

/* ----------------------------------------------------------- shared helpers */

static const Node *in_node(const Graph *g, const Node *n, int i) { return &g->nodes[n->in[i]]; }

static bool want_f32(const Graph *g, const Node *n, int i, Diag *diag) {
  const Node *x = in_node(g, n, i);
  if (x->dtype == DT_F32) return true;
  char sb[128];
  diag_error(diag, n->loc, "%s expects an f32 tensor, got %s%s (convert it with f32(...))",
             op_info(n->op)->name, dtype_name(x->dtype), shape_str(&x->shape, sb));
  return false;
}

static bool want_int(const Graph *g, const Node *n, int i, Diag *diag) {
  const Node *x = in_node(g, n, i);
  if (x->dtype != DT_F32) return true;
  char sb[128];
  diag_error(diag, n->loc, "%s expects integer indices, got f32%s", op_info(n->op)->name,
             shape_str(&x->shape, sb));
  return false;
}

static int64_t last_dim(const Shape *s) { return s->rank ? s->dim[s->rank - 1] : 1; }
static int64_t rows_of(const Shape *s) { return shape_numel(s) / (last_dim(s) ? last_dim(s) : 1); }
static bool accumulates(const Node *n) { return n->grad_of_param >= 0; }

/* Backward rules build their nodes with these (shapes cannot fail). Their
 * location is left empty: autodiff gives every node a rule makes the
 * location (and origin) of the forward node whose rule it is. */

static const SrcLoc no_loc;

static int add1(Graph *g, OpKind op, int a) { return graph_add(g, op, &a, 1, no_loc, NULL); }

static int add2(Graph *g, OpKind op, int a, int b) {
  int in[2] = {a, b};
  return graph_add(g, op, in, 2, no_loc, NULL);
}

static int add3(Graph *g, OpKind op, int a, int b, int c, double f0) {
  int in[3] = {a, b, c};
  return graph_add_attr(g, op, in, 3, f0, 0, 0, no_loc, NULL);
}

/* An op on one input with the attributes `attr`. */
static int add_with(Graph *g, OpKind op, int x, const Attr *attr) {
  return graph_add_op(g, op, &x, 1, attr, no_loc, NULL);
}

/* Shape rules of many ops. */

static bool infer_same_f32(const Graph *g, Node *n, Diag *diag) {
  for (int i = 0; i < n->nin; i++)
    if (!want_f32(g, n, i, diag)) return false;
  n->shape = in_node(g, n, n->nin - 1)->shape; /* x, or dy for (y, dy) grads */
  return true;
}

static bool infer_like_attr(const Graph *g, Node *n, Diag *diag) {
  n->shape = g->nodes[n->attr.i[0]].shape;
  return true;
}

static bool infer_like_input0(const Graph *g, Node *n, Diag *diag) {
  n->shape = in_node(g, n, 0)->shape;
  return true;
}

static bool infer_attr_shape(const Graph *g, Node *n, Diag *diag) {
  n->shape = n->attr.shape;
  return true;
}

/* FLOP counts of loop kernels: k per element touched. */

static double flops_per_element(const Graph *g, const Node *n, double k) {
  double total = 0;
  for (int i = 0; i < n->nin; i++) total += (double)shape_numel(&in_node(g, n, i)->shape);
  double out = (double)shape_numel(&n->shape);
  return k * (total > out ? total : out);
}

static double flops_1(const Graph *g, const Node *n) { return flops_per_element(g, n, 1); }
static double flops_5(const Graph *g, const Node *n) { return flops_per_element(g, n, 5); }
static double flops_20(const Graph *g, const Node *n) { return flops_per_element(g, n, 20); }
static double flops_0(const Graph *g, const Node *n) { return 0; }

/* The attribute of ops with one number (a scalar operand, an epsilon). */
static void print_f0(FILE *out, const Node *n) { fprintf(out, " {%g}", n->attr.f[0]); }

/* out[...] = 0 over the whole output — unless the kernel accumulates into a
 * gradient slot, which the runtime zeroes once per optimizer step. */
static void zero_output(Kernel *k, const Node *n) {
  if (accumulates(n)) return;
  int v;
  KStmt *loop = k_for(k, NULL, shape_numel(&n->shape), &v);
  k_store(k, loop, n->id, k_index(k, v), k_const(k, 0), false);
}

typedef KExpr *(*ScalarFn)(Kernel *k, const Node *n, KExpr **x);

/* Index of element (vars) of `out` in an input broadcast to it. */
static KExpr *broadcast_index(Kernel *k, const Shape *out, const Shape *in, const int *vars) {
  KExpr *idx = k_iconst(k, 0);
  int64_t stride = 1;
  for (int d = in->rank - 1; d >= 0; d--) {
    int od = out->rank - in->rank + d;
    if (in->dim[d] != 1) idx = k_iadd(k, idx, k_imul(k, k_index(k, vars[od]), stride));
    stride *= in->dim[d];
  }
  return idx;
}

/* Loops over every element of n's output (one flat loop when no input is
 * broadcast, so the innermost loop is long and contiguous). */
static Kernel *pointwise_kernel(const Graph *g, const Node *n, ScalarFn fn) {
  Kernel *k = kernel_new(n->id);
  bool flat = true;
  for (int i = 0; i < n->nin; i++)
    if (!shape_equal(&in_node(g, n, i)->shape, &n->shape)) flat = false;
  Shape loop = flat ? (Shape){.rank = 1, .dim = {shape_numel(&n->shape)}} : n->shape;
  int vars[IR_MAX_RANK];
  KStmt *parent = NULL;
  for (int d = 0; d < loop.rank; d++) parent = k_for(k, parent, loop.dim[d], &vars[d]);
  KExpr *x[IR_MAX_IN];
  for (int i = 0; i < n->nin; i++) {
    const Node *in = in_node(g, n, i);
    const Shape *in_shape = flat ? &loop : &in->shape;
    x[i] = k_load(k, in->id, broadcast_index(k, &loop, in_shape, vars), in->dtype != DT_F32);
  }
  KExpr *out_idx = broadcast_index(k, &loop, &loop, vars);
  k_store(k, parent, n->id, out_idx, fn(k, n, x), accumulates(n));
  return k;
}

#define POINTWISE(fn)                                                          \
  static Kernel *kernel_##fn(const Graph *g, const Node *n) { return pointwise_kernel(g, n, s_##fn); }

/* ------------------------------------------------------------------- leaves */

static void print_input(FILE *out, const Node *n) {
  fprintf(out, " %s", n->name);
  if (n->index_limit) fprintf(out, " {index < %lld}", (long long)n->index_limit);
  if (n->has_ignore) fprintf(out, " {or %lld: ignored}", (long long)n->ignore_label);
}

static void print_param(FILE *out, const Node *n) {
  static const char *init_names[] = {"zeros", "ones", "normal", "uniform", "xavier", "he"};
  fprintf(out, " %s {%s(%g, %g)%s%s}", n->name, init_names[n->init.kind], n->init.a, n->init.b,
          n->decay ? ", decay" : "", n->frozen ? ", frozen" : "");
  if (n->file_name) fprintf(out, " <- %s%s", n->file_name, n->transposed ? " (transposed)" : "");
}

/* ----------------------------------------------------- pointwise arithmetic */

static bool infer_cast(const Graph *g, Node *n, Diag *diag) {
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
static bool infer_broadcast(const Graph *g, Node *n, Diag *diag) {
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

static void bwd_add(Graph *g, int n, int dy, const bool want[], int dx[]) {
  const Node *x = &g->nodes[n];
  int a = x->in[0], b = x->in[1];
  if (want[0]) dx[0] = graph_sum_to(g, dy, a);
  if (want[1]) dx[1] = graph_sum_to(g, dy, b);
}

static KExpr *s_add(Kernel *k, const Node *n, KExpr **x) { return k_binary(k, KB_ADD, x[0], x[1]); }
POINTWISE(add)

static void bwd_sub(Graph *g, int n, int dy, const bool want[], int dx[]) {
  int a = g->nodes[n].in[0], b = g->nodes[n].in[1];
  if (want[0]) dx[0] = graph_sum_to(g, dy, a);
  if (want[1]) dx[1] = graph_sum_to(g, add1(g, OP_NEG, dy), b);
}

static KExpr *s_sub(Kernel *k, const Node *n, KExpr **x) { return k_binary(k, KB_SUB, x[0], x[1]); }
POINTWISE(sub)

static void bwd_mul(Graph *g, int n, int dy, const bool want[], int dx[]) {
  int a = g->nodes[n].in[0], b = g->nodes[n].in[1];
  if (want[0]) dx[0] = graph_sum_to(g, add2(g, OP_MUL, dy, b), a);
  if (want[1]) dx[1] = graph_sum_to(g, add2(g, OP_MUL, dy, a), b);
}

static KExpr *s_mul(Kernel *k, const Node *n, KExpr **x) { return k_binary(k, KB_MUL, x[0], x[1]); }
POINTWISE(mul)

/* y = a / b: da = dy / b, db = -dy * y / b. */
static void bwd_div(Graph *g, int n, int dy, const bool want[], int dx[]) {
  int a = g->nodes[n].in[0], b = g->nodes[n].in[1];
  if (want[0]) dx[0] = graph_sum_to(g, add2(g, OP_DIV, dy, b), a);
  if (want[1]) {
    int t = add2(g, OP_DIV, add2(g, OP_MUL, dy, n), b);
    dx[1] = graph_sum_to(g, add1(g, OP_NEG, t), b);
  }
}

static KExpr *s_div(Kernel *k, const Node *n, KExpr **x) { return k_binary(k, KB_DIV, x[0], x[1]); }
POINTWISE(div)

static void bwd_neg(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add1(g, OP_NEG, dy);
}

static KExpr *s_neg(Kernel *k, const Node *n, KExpr **x) { return k_unary(k, KU_NEG, x[0]); }
POINTWISE(neg)

static void bwd_identity(Graph *g, int n, int dy, const bool want[], int dx[]) { dx[0] = dy; }

static KExpr *s_add_scalar(Kernel *k, const Node *n, KExpr **x) {
  return k_binary(k, KB_ADD, x[0], k_const(k, n->attr.f[0]));
}
POINTWISE(add_scalar)

static void bwd_mul_scalar(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = graph_add_attr(g, OP_MUL_SCALAR, &dy, 1, g->nodes[n].attr.f[0], 0, 0, no_loc, NULL);
}

static KExpr *s_mul_scalar(Kernel *k, const Node *n, KExpr **x) {
  return k_binary(k, KB_MUL, x[0], k_const(k, n->attr.f[0]));
}
POINTWISE(mul_scalar)

/* ------------------------------------------ activations and their gradients */

/* From the output (y > 0 exactly where x > 0), as PyTorch: the input need
 * not be kept for the backward pass, and the output usually is anyway. */
static void bwd_relu(Graph *g, int n, int dy, const bool want[], int dx[]) {
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

static void bwd_gelu(Graph *g, int n, int dy, const bool want[], int dx[]) {
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

static void bwd_tanh(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add2(g, OP_TANH_GRAD, n, dy);
}

static KExpr *s_tanh(Kernel *k, const Node *n, KExpr **x) { return k_unary(k, KU_TANH, x[0]); }
POINTWISE(tanh)

static KExpr *s_tanh_grad(Kernel *k, const Node *n, KExpr **x) {
  KExpr *one_minus = k_binary(k, KB_SUB, k_const(k, 1), k_binary(k, KB_MUL, x[0], x[0]));
  return k_binary(k, KB_MUL, x[1], one_minus);
}
POINTWISE(tanh_grad)

static void bwd_sigmoid(Graph *g, int n, int dy, const bool want[], int dx[]) {
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

static void bwd_silu(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add2(g, OP_SILU_GRAD, g->nodes[n].in[0], dy);
}

/* d silu/dx = s * (1 + x * (1 - s)), s = sigmoid(x) (as PyTorch). */
static KExpr *s_silu_grad(Kernel *k, const Node *n, KExpr **x) {
  KExpr *s = s_sigmoid(k, n, x);
  KExpr *t = k_binary(k, KB_ADD, k_const(k, 1), k_binary(k, KB_MUL, x[0], k_binary(k, KB_SUB, k_const(k, 1), s)));
  return k_binary(k, KB_MUL, x[1], k_binary(k, KB_MUL, s, t));
}
POINTWISE(silu_grad)

static void bwd_exp(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add2(g, OP_MUL, dy, n);
}

static KExpr *s_exp(Kernel *k, const Node *n, KExpr **x) { return k_unary(k, KU_EXP, x[0]); }
POINTWISE(exp)

static void bwd_log(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add2(g, OP_DIV, dy, g->nodes[n].in[0]);
}

static KExpr *s_log(Kernel *k, const Node *n, KExpr **x) { return k_unary(k, KU_LOG, x[0]); }
POINTWISE(log)

/* ------------------------------------------------------ sums and broadcasts */

static bool infer_scalar_out(const Graph *g, Node *n, Diag *diag) {
  if (!want_f32(g, n, 0, diag)) return false;
  n->shape = (Shape){.rank = 0};
  return true;
}

static Kernel *kernel_sum(const Graph *g, const Node *n) {
  Kernel *k = kernel_new(n->id);
  int acc, v;
  k_local(k, NULL, k_const(k, 0), &acc);
  KStmt *loop = k_for(k, NULL, shape_numel(&in_node(g, n, 0)->shape), &v);
  k_set(k, loop, acc, k_binary(k, KB_ADD, k_localv(k, acc), k_load(k, n->in[0], k_index(k, v), false)));
  k_store(k, NULL, n->id, k_iconst(k, 0), k_localv(k, acc), accumulates(n));
  return k;
}

static void bwd_sum(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = graph_expand_to(g, dy, g->nodes[n].in[0]);
}

/* The width of the column blocks sum_to splits a kept last axis of `cols`
 * columns into (at least two blocks); 0: none fits. */
static int64_t sum_to_block(int64_t cols) {
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

/* Scatter-adds every input element into the output element it was broadcast
 * from; the loops run over the input, so the innermost loop is contiguous.
 * When the output keeps the input's last axis (a bias gradient [C] of
 * [..., C]), that axis is cut into blocks of w columns and the loop over
 * blocks goes outside: its iterations add into disjoint columns, so it
 * runs on the threads (kernel_mark_parallel proves it), and each output
 * element still takes the input's rows in order — the same sums as one
 * loop over the rows. */
static Kernel *kernel_sum_to(const Graph *g, const Node *n) {
  Kernel *k = kernel_new(n->id);
  zero_output(k, n);
  Shape in = in_node(g, n, 0)->shape, out = n->shape;
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

/* -------------------- matrix products (GEMMs: every backend calls its BLAS) */

/* attr.i[0], attr.i[1]: whether a and b are transposed; a bmm's heads and
 * which operands are head-interleaved (ops.def). */
static void print_transpose(FILE *out, const Node *n) {
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
static bool infer_matmul(const Graph *g, Node *n, Diag *diag) {
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

static double flops_matmul(const Graph *g, const Node *n) {
  const Shape *b = &in_node(g, n, 1)->shape;
  int64_t k = n->attr.i[1] ? last_dim(b) : rows_of(b);
  return 2.0 * (double)shape_numel(&n->shape) * (double)k;
}

/* C = A op(B), A viewed as [M, K]. dA = dC op(B)^T; dB = A^T dC (or dC^T A
 * when B is stored transposed, as linear's [out, in] weight is). Forward
 * matmuls never transpose A, so this rule needs no other case. */
static void bwd_matmul(Graph *g, int n, int dy, const bool want[], int dx[]) {
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

static bool infer_bmm(const Graph *g, Node *n, Diag *diag) {
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

static double flops_bmm(const Graph *g, const Node *n) {
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
static void bwd_bmm(Graph *g, int n, int dy, const bool want[], int dx[]) {
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
}

/* ------------------------------------------------------------------ row ops */

/* A row kernel: for each of R rows, `body` fills in the loops over C columns.
 * row_base(r) = r * C is the index of the row's first element. */
typedef struct {
  Kernel *k;
  KStmt *row;   /* the loop over rows */
  int r;        /* its variable */
  int64_t cols;
  /* Attention's row kernels (block_row_loop): the rows come in blocks of
   * `block_rows`, row r of block `block` (a loop around the row loop; -1:
   * none) — a causal kernel's [T, T] matrices, a masked softmax's batch
   * elements. Loads of buffer `scaled` are multiplied by `scale` (-1:
   * none). A causal kernel's column loops run over c <= r only. With a
   * `key_mask` (a [blocks, cols] 0/1 buffer; -1: none) a column whose mask
   * is 0 adds a reduction's identity and stores 0. */
  int block, scaled, key_mask;
  int64_t block_rows;
  bool causal;
  double scale;
} RowLoop;

/* Appends to k a loop over the rows of `shape`. */
static RowLoop row_loop_in(Kernel *k, const Shape *shape) {
  RowLoop rl = {.k = k, .cols = last_dim(shape), .block = -1, .scaled = -1, .key_mask = -1};
  rl.row = k_for(k, NULL, rows_of(shape), &rl.r);
  return rl;
}

/* The row number: r, or block * block_rows + r. */
static KExpr *row_number(RowLoop *rl) {
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

static RowLoop row_loop(const Graph *g, const Node *n, const Shape *shape) {
  return row_loop_in(kernel_new(n->id), shape);
}

static KExpr *row_index(RowLoop *rl, int c) {
  Kernel *k = rl->k;
  return k_iadd(k, k_imul(k, row_number(rl), rl->cols), k_index(k, c));
}

static KExpr *row_elem(RowLoop *rl, int buf, int c) {
  Kernel *k = rl->k;
  KExpr *x = k_load(k, buf, row_index(rl, c), false);
  return buf == rl->scaled ? k_binary(k, KB_MUL, x, k_const(k, rl->scale)) : x;
}

/* v at column c, or `fill` where the row's key mask is 0 (no mask: v). */
static KExpr *unless_masked(RowLoop *rl, int c, KExpr *v, double fill) {
  Kernel *k = rl->k;
  if (rl->key_mask < 0) return v;
  KExpr *at = k_iadd(k, k_imul(k, k_index(k, rl->block), rl->cols), k_index(k, c));
  KExpr *keep = k_to_float(k, k_load(k, rl->key_mask, at, true));
  return k_select(k, keep, v, k_const(k, fill));
}

/* Declares a local holding a reduction of f(column c) over the row (masked
 * columns add init, op's identity). */
static int row_reduce(RowLoop *rl, KBinaryOp op, double init, KExpr *(*f)(RowLoop *, int c, const void *),
                      const void *ctx) {
  int acc, c;
  Kernel *k = rl->k;
  k_local(k, rl->row, k_const(k, init), &acc);
  KStmt *loop = column_loop(rl, &c);
  KExpr *v = unless_masked(rl, c, f(rl, c, ctx), init);
  k_set(k, loop, acc, k_binary(k, op, k_localv(k, acc), v));
  return acc;
}

typedef struct {
  int buf, shift_local, other_buf;
} RowCtx;

static KExpr *f_elem(RowLoop *rl, int c, const void *ctx) {
  return row_elem(rl, ((const RowCtx *)ctx)->buf, c);
}

static KExpr *f_exp_shifted(RowLoop *rl, int c, const void *ctx) {
  const RowCtx *x = ctx;
  Kernel *k = rl->k;
  return k_unary(k, KU_EXP, k_binary(k, KB_SUB, row_elem(rl, x->buf, c), k_localv(k, x->shift_local)));
}

static KExpr *f_product(RowLoop *rl, int c, const void *ctx) {
  const RowCtx *x = ctx;
  return k_binary(rl->k, KB_MUL, row_elem(rl, x->buf, c), row_elem(rl, x->other_buf, c));
}

static KExpr *f_square_shifted(RowLoop *rl, int c, const void *ctx) {
  const RowCtx *x = ctx;
  Kernel *k = rl->k;
  KExpr *d = k_binary(k, KB_SUB, row_elem(rl, x->buf, c), k_localv(k, x->shift_local));
  return k_binary(k, KB_MUL, d, d);
}

/* max and log-sum-exp of row `buf`: locals m and lse = m + log(sum exp(x-m)). */
static void row_logsumexp(RowLoop *rl, int buf, int *m, int *lse) {
  Kernel *k = rl->k;
  RowCtx ctx = {.buf = buf};
  *m = row_reduce(rl, KB_MAX, -INFINITY, f_elem, &ctx);
  ctx.shift_local = *m;
  int s = row_reduce(rl, KB_ADD, 0, f_exp_shifted, &ctx);
  k_local(k, rl->row, k_binary(k, KB_ADD, k_localv(k, *m), k_unary(k, KU_LOG, k_localv(k, s))), lse);
}

/* Stores f(c) over the row into n's output (0 in masked columns). */
static void row_store(RowLoop *rl, const Node *n, KExpr *(*f)(RowLoop *, int c, const void *), const void *ctx) {
  int c;
  KStmt *loop = column_loop(rl, &c);
  KExpr *v = unless_masked(rl, c, f(rl, c, ctx), 0);
  k_store(rl->k, loop, n->id, row_index(rl, c), v, accumulates(n));
}

static bool infer_rows(const Graph *g, Node *n, Diag *diag) {
  if (!want_f32(g, n, 0, diag)) return false;
  if (in_node(g, n, 0)->shape.rank < 1) {
    diag_error(diag, n->loc, "%s needs at least one axis, got a scalar", op_info(n->op)->name);
    return false;
  }
  n->shape = in_node(g, n, 0)->shape;
  return true;
}

typedef struct {
  int x, lse, dy, s, y, label;
  int row_scale, row_label; /* cross_entropy_grad's locals (row_label: -1, none) */
} SoftCtx;

static KExpr *f_softmax(RowLoop *rl, int c, const void *p) {
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

static Kernel *kernel_softmax(const Graph *g, const Node *n) { return kernel_softmax_like(g, n, false); }
static Kernel *kernel_log_softmax(const Graph *g, const Node *n) { return kernel_softmax_like(g, n, true); }

static void bwd_softmax(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add2(g, OP_SOFTMAX_GRAD, n, dy);
}

static void bwd_log_softmax(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add2(g, OP_LOG_SOFTMAX_GRAD, n, dy);
}

/* softmax: dx = y * (dy - sum(dy * y)). */
static KExpr *f_softmax_grad(RowLoop *rl, int c, const void *p) {
  const SoftCtx *s = p;
  Kernel *k = rl->k;
  KExpr *d = k_binary(k, KB_SUB, row_elem(rl, s->dy, c), k_localv(k, s->s));
  return k_binary(k, KB_MUL, row_elem(rl, s->y, c), d);
}

static Kernel *kernel_softmax_grad(const Graph *g, const Node *n) {
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

static Kernel *kernel_log_softmax_grad(const Graph *g, const Node *n) {
  RowLoop rl = row_loop(g, n, &n->shape);
  SoftCtx s = {.y = n->in[0], .dy = n->in[1]};
  RowCtx sum = {.buf = s.dy};
  s.s = row_reduce(&rl, KB_ADD, 0, f_elem, &sum);
  row_store(&rl, n, f_log_softmax_grad, &s);
  return rl.k;
}

/* [..., C] → [...]: one value per row. */
static bool infer_row_values(const Graph *g, Node *n, Diag *diag) {
  if (!infer_rows(g, n, diag)) return false;
  n->shape.rank--;
  return true;
}

/* Each row's log-sum-exp, which cross_entropy's loss and gradient both read
 * (computed once, in parallel rows, instead of once in each). */
static Kernel *kernel_logsumexp(const Graph *g, const Node *n) {
  RowLoop rl = row_loop(g, n, &in_node(g, n, 0)->shape);
  int m, lse;
  row_logsumexp(&rl, n->in[0], &m, &lse);
  k_store(rl.k, rl.row, n->id, k_index(rl.k, rl.r), k_localv(rl.k, lse), accumulates(n));
  return rl.k;
}

static bool infer_cross_entropy(const Graph *g, Node *n, Diag *diag) {
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
static double flops_cross_entropy(const Graph *g, const Node *n) {
  return 3.0 * (double)shape_numel(&in_node(g, n, 1)->shape);
}

/* The label of the current row, as an integer index expression. */
static KExpr *row_label(RowLoop *rl, int labels) {
  return k_load(rl->k, labels, k_index(rl->k, rl->r), true);
}

/* cross_entropy(..., ignore = L): attr.i[0] = 1, attr.i[1] = L. */
static void print_ignore(FILE *out, const Node *n) {
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
static Kernel *kernel_cross_entropy(const Graph *g, const Node *n) {
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

static void bwd_cross_entropy(Graph *g, int n, int dy, const bool want[], int dx[]) {
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

static Kernel *kernel_cross_entropy_grad(const Graph *g, const Node *n) {
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

static bool infer_layernorm(const Graph *g, Node *n, Diag *diag) {
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
static bool infer_layernorm_stats(const Graph *g, Node *n, Diag *diag) {
  if (!infer_rows(g, n, diag)) return false;
  n->shape.dim[n->shape.rank - 1] = 2;
  return true;
}

static Kernel *kernel_layernorm_stats(const Graph *g, const Node *n) {
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

static Kernel *kernel_layernorm(const Graph *g, const Node *n) {
  RowLoop rl = row_loop(g, n, &n->shape);
  NormCtx s = {.x = n->in[0], .gamma = n->in[1], .beta = n->in[2]};
  load_moments(rl.k, rl.row, rl.r, n->in[3], &s);
  row_store(&rl, n, f_layernorm, &s);
  return rl.k;
}

/* The stats input gets no gradient: layernorm_grad's formula is the whole
 * derivative through the mean and variance. */
static void bwd_layernorm(Graph *g, int n, int dy, const bool want[], int dx[]) {
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

static Kernel *kernel_layernorm_grad(const Graph *g, const Node *n) {
  RowLoop rl = row_loop(g, n, &n->shape);
  NormCtx s = {.x = n->in[0], .gamma = n->in[1], .dy = n->in[2]};
  load_moments(rl.k, rl.row, rl.r, n->in[3], &s);
  s.a = row_reduce(&rl, KB_ADD, 0, f_norm_g, &s);
  s.b = row_reduce(&rl, KB_ADD, 0, f_norm_g_xhat, &s);
  row_store(&rl, n, f_layernorm_grad, &s);
  return rl.k;
}

static bool infer_layernorm_grad_gamma(const Graph *g, Node *n, Diag *diag) {
  n->shape = (Shape){.rank = 1, .dim = {last_dim(&in_node(g, n, 0)->shape)}};
  return true;
}

/* Column c of block b of w columns (w = 0: no blocks, column c). */
static KExpr *block_col(Kernel *k, int b, int64_t w, int c) {
  return w ? k_iadd(k, k_imul(k, k_index(k, b), w), k_index(k, c)) : k_index(k, c);
}

/* d gamma[c] = sum over rows of dy * xhat, the rows in order. In blocks of w
 * columns when C splits into them (as sum_to's), with the loop over blocks
 * outside, so that it runs on the threads. */
static Kernel *kernel_layernorm_grad_gamma(const Graph *g, const Node *n) {
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

static bool infer_embedding(const Graph *g, Node *n, Diag *diag) {
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
static Kernel *kernel_embedding(const Graph *g, const Node *n) {
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
static void print_padding_idx(FILE *out, const Node *n) {
  if (n->attr.i[1]) fprintf(out, " {padding_idx=%lld}", (long long)n->attr.i[2]);
}

/* The gradient keeps the padding row (attr.i[1], [2]); attr.i[0] = the table. */
static void bwd_embedding(Graph *g, int n, int dy, const bool want[], int dx[]) {
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
static Kernel *kernel_embedding_grad(const Graph *g, const Node *n) {
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
static bool infer_position_pool(const Graph *g, Node *n, Diag *diag) {
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
static Kernel *kernel_cls_pool(const Graph *g, const Node *n) {
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

static void bwd_cls_pool(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Attr a = pooled_from(g, n);
  dx[0] = add_with(g, OP_CLS_POOL_GRAD, dy, &a);
}

/* dx = dy at the first position, 0 at the others: one pass over dx (no
 * zeroing pass and scatter). */
static Kernel *kernel_cls_pool_grad(const Graph *g, const Node *n) {
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
static Kernel *kernel_mean_pool(const Graph *g, const Node *n) {
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

static void bwd_mean_pool(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Attr a = pooled_from(g, n);
  int in[2] = {dy, g->nodes[n].in[1]};
  if (want[0]) dx[0] = graph_add_op(g, OP_MEAN_POOL_GRAD, in, g->nodes[n].nin, &a, no_loc, NULL);
}

/* dx[b, t] = dy[b] / count * mask[b, t], as PyTorch differentiates the
 * division, then the product. */
static Kernel *kernel_mean_pool_grad(const Graph *g, const Node *n) {
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

/* ------------------------------------------------------------------- layout */

static bool infer_reshape(const Graph *g, Node *n, Diag *diag) {
  const Node *x = in_node(g, n, 0);
  if (shape_numel(&x->shape) != shape_numel(&n->attr.shape)) {
    char sx[128], sy[128];
    diag_error(diag, n->loc, "reshape: %s has %lld elements, %s has %lld", shape_str(&x->shape, sx),
               (long long)shape_numel(&x->shape), shape_str(&n->attr.shape, sy),
               (long long)shape_numel(&n->attr.shape));
    return false;
  }
  n->dtype = x->dtype;
  n->shape = n->attr.shape;
  return true;
}

/* out[i] = x[i] over the flat buffer (a reshape that adds into a gradient
 * slot; every other reshape is a view and has no kernel). */
static Kernel *kernel_reshape(const Graph *g, const Node *n) {
  Kernel *k = kernel_new(n->id);
  int v;
  KStmt *loop = k_for(k, NULL, shape_numel(&n->shape), &v);
  k_store(k, loop, n->id, k_index(k, v), k_load(k, n->in[0], k_index(k, v), false), accumulates(n));
  return k;
}

static void bwd_reshape(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Attr back = {.shape = g->nodes[g->nodes[n].in[0]].shape};
  dx[0] = add_with(g, OP_RESHAPE, dy, &back);
}

static bool infer_slice(const Graph *g, Node *n, Diag *diag) {
  const Shape *x = &in_node(g, n, 0)->shape;
  if (n->attr.i[0] + n->attr.shape.dim[0] > x->dim[0]) {
    char sx[128];
    diag_error(diag, n->loc, "narrow: rows %lld..%lld are not all inside the %lld rows of %s", (long long)n->attr.i[0],
               (long long)(n->attr.i[0] + n->attr.shape.dim[0] - 1), (long long)x->dim[0], shape_str(x, sx));
    return false;
  }
  n->dtype = in_node(g, n, 0)->dtype;
  n->shape = n->attr.shape;
  return true;
}

static void print_start(FILE *out, const Node *n) { fprintf(out, " {start=%lld}", (long long)n->attr.i[0]); }

static void bwd_slice(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Attr back = {.i = {g->nodes[n].attr.i[0]}, .shape = g->nodes[g->nodes[n].in[0]].shape};
  dx[0] = add_with(g, OP_SLICE_GRAD, dy, &back);
}

/* Zeros with dy in rows attr.i[0]..; adding into a gradient slot, only the
 * rows. */
static Kernel *kernel_slice_grad(const Graph *g, const Node *n) {
  Kernel *k = kernel_new(n->id);
  zero_output(k, n);
  int64_t row = shape_numel(&n->shape) / n->shape.dim[0];
  int v;
  KStmt *loop = k_for(k, NULL, shape_numel(&in_node(g, n, 0)->shape), &v);
  KExpr *dst = k_iadd(k, k_index(k, v), k_iconst(k, n->attr.i[0] * row));
  k_store(k, loop, n->id, dst, k_load(k, n->in[0], k_index(k, v), false), true);
  return k;
}

static bool infer_permute(const Graph *g, Node *n, Diag *diag) {
  const Shape *x = &in_node(g, n, 0)->shape;
  bool seen[IR_MAX_RANK] = {false};
  for (int d = 0; d < x->rank; d++) {
    int64_t a = n->attr.i[d];
    if (a < 0 || a >= x->rank || seen[a]) {
      char sx[128];
      diag_error(diag, n->loc, "permute: the axes are not a permutation of the %d axes of %s", x->rank,
                 shape_str(x, sx));
      return false;
    }
    seen[a] = true;
    n->shape.dim[d] = x->dim[a];
  }
  n->shape.rank = x->rank;
  n->dtype = in_node(g, n, 0)->dtype;
  return true;
}

static void print_axes(FILE *out, const Node *n) {
  for (int d = 0; d < n->shape.rank; d++) fprintf(out, "%s%lld", d ? ", " : " {", (long long)n->attr.i[d]);
  fputc('}', out);
}

/* Row-major strides of a shape. */
static void strides_of(const Shape *s, int64_t *stride) {
  int64_t st = 1;
  for (int d = s->rank - 1; d >= 0; d--) stride[d] = st, st *= s->dim[d];
}

/* Loops over the output; the input is read at the permuted strides. */
static Kernel *kernel_permute(const Graph *g, const Node *n) {
  Kernel *k = kernel_new(n->id);
  const Shape *x = &in_node(g, n, 0)->shape;
  int64_t in_stride[IR_MAX_RANK];
  strides_of(x, in_stride);
  int vars[IR_MAX_RANK];
  KStmt *parent = NULL;
  KExpr *src = k_iconst(k, 0);
  for (int d = 0; d < n->shape.rank; d++) {
    parent = k_for(k, parent, n->shape.dim[d], &vars[d]);
    src = k_iadd(k, src, k_imul(k, k_index(k, vars[d]), in_stride[n->attr.i[d]]));
  }
  KExpr *dst = broadcast_index(k, &n->shape, &n->shape, vars);
  k_store(k, parent, n->id, dst, k_load(k, n->in[0], src, in_node(g, n, 0)->dtype != DT_F32), accumulates(n));
  return k;
}

static void bwd_permute(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Attr inverse = {0};
  for (int d = 0; d < g->nodes[n].shape.rank; d++) inverse.i[g->nodes[n].attr.i[d]] = d;
  dx[0] = add_with(g, OP_PERMUTE, dy, &inverse);
}

/* -------------------------------------------------- causal mask and dropout */

static bool infer_causal_mask(const Graph *g, Node *n, Diag *diag) {
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

static void print_scale(FILE *out, const Node *n) { fprintf(out, " {scale=%g}", n->attr.f[0]); }

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

static Kernel *kernel_causal_mask(const Graph *g, const Node *n) { return causal_kernel(g, n, -INFINITY); }
static Kernel *kernel_causal_mask_grad(const Graph *g, const Node *n) { return causal_kernel(g, n, 0); }

static void bwd_causal_mask(Graph *g, int n, int dy, const bool want[], int dx[]) {
  dx[0] = add_with(g, OP_CAUSAL_MASK_GRAD, dy, &g->nodes[n].attr);
}

/* The rows of n's output in `blocks` blocks (a loop over the blocks around
 * the loop over their rows), loads of `scaled` multiplied by n's scale. */
static RowLoop block_row_loop(const Node *n, int64_t blocks, int scaled) {
  Kernel *k = kernel_new(n->id);
  RowLoop rl = {.k = k, .cols = last_dim(&n->shape), .scaled = scaled, .key_mask = -1,
                .block_rows = rows_of(&n->shape) / blocks, .scale = n->attr.f[0]};
  KStmt *blocks_loop = k_for(k, NULL, blocks, &rl.block);
  rl.row = k_for(k, blocks_loop, rl.block_rows, &rl.r);
  return rl;
}

/* causal_softmax (attention's softmax(causal_mask(x, scale)) as one op):
 * row t of each [T, T] matrix is the softmax of scale * x over columns
 * c <= t and 0 above, and only columns c <= t are read or exp'd. The loops
 * over the matrices and their rows, with each column loop bounded by the
 * row (k_for_bounded), and a last loop that writes the zeros. Every float
 * is the operation causal_mask then softmax computed on the same operands
 * (the masked columns only added exp(-inf) = 0 to the sum, and a row's lane
 * of a column stays its index's), so with the same math functions the
 * result is bitwise theirs (where a compiler vectorizes a loop, libmvec's
 * expf is within 4 ulp of libm's, and which loops it vectorizes may
 * differ). */
static RowLoop causal_row_loop(const Node *n, int scaled) {
  int64_t t = last_dim(&n->shape);
  RowLoop rl = block_row_loop(n, shape_numel(&n->shape) / (t * t), scaled);
  rl.causal = true;
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
 * causal_mask_grad) times that. */
static double causal_share(const Node *n) {
  double t = (double)last_dim(&n->shape);
  return (t + 1) / (2 * t);
}

/* A softmax of scaled scores and its gradient (the scale: one more FLOP
 * per element); the masked ones touch every column. */
static double flops_masked_softmax(const Graph *g, const Node *n) {
  return flops_per_element(g, n, 21);
}

static double flops_masked_softmax_grad(const Graph *g, const Node *n) {
  return flops_per_element(g, n, 5) + (double)shape_numel(&n->shape);
}

static double flops_causal_softmax(const Graph *g, const Node *n) {
  return flops_masked_softmax(g, n) * causal_share(n);
}

static double flops_causal_softmax_grad(const Graph *g, const Node *n) {
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

static Kernel *kernel_causal_softmax(const Graph *g, const Node *n) {
  RowLoop rl = causal_row_loop(n, n->in[0]);
  scaled_softmax_kernel(rl, n);
  if (!accumulates(n)) store_zeros_above(&rl, n);
  return rl.k;
}

/* The gradient of causal_softmax or masked_softmax: (y, dy), the scale. */
static void bwd_scaled_softmax(Graph *g, int n, int dy, const bool want[], int dx[]) {
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

static Kernel *kernel_causal_softmax_grad(const Graph *g, const Node *n) {
  RowLoop rl = causal_row_loop(n, -1);
  scaled_softmax_grad_kernel(rl, n);
  if (!accumulates(n)) store_zeros_above(&rl, n);
  return rl.k;
}

/* masked_softmax(x, mask): x [N, ..., K] (attention's scores [B, H, T, T]),
 * mask [N, K] integer 0/1, optional. Row r of batch element b is the
 * softmax of scale * x over the columns (keys) c with mask[b, c] = 1, and 0
 * at the others: a masked key gets exactly zero weight (PyTorch's -inf fill
 * before the softmax). A row whose keys are all masked is 0 throughout (the
 * max is -inf, the sum 0, and every column stores the fill): no NaN, and
 * attention over no key outputs 0. */
static bool infer_masked_softmax(const Graph *g, Node *n, Diag *diag) {
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
static Kernel *kernel_masked_softmax(const Graph *g, const Node *n) {
  RowLoop rl = block_row_loop(n, n->shape.dim[0], n->in[0]);
  rl.key_mask = n->nin == 2 ? n->in[1] : -1;
  return scaled_softmax_kernel(rl, n);
}

/* A masked column has y = 0, so its dx is 0 with no mask to read. */
static Kernel *kernel_masked_softmax_grad(const Graph *g, const Node *n) {
  return scaled_softmax_grad_kernel(block_row_loop(n, n->shape.dim[0], -1), n);
}

static bool infer_dropout(const Graph *g, Node *n, Diag *diag) {
  if (!want_f32(g, n, 0, diag)) return false;
  n->shape = in_node(g, n, 0)->shape;
  return true;
}

static void print_dropout(FILE *out, const Node *n) {
  fprintf(out, " {p=%g, stream=%lld}", n->attr.f[0], (long long)n->attr.i[0]);
}

/* y = x * m, m = 1/(1-p) where the element's uniform number is above p, else
 * 0 — and m = 1 when not training. The numbers depend only on (key, stream,
 * element), so the backward pass (and any recompute) regenerates the mask. */
static Kernel *kernel_dropout(const Graph *g, const Node *n) {
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
static void bwd_dropout(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Node x = g->nodes[n];
  int in[3] = {dy, x.in[1], x.in[2]};
  dx[0] = graph_add_op(g, OP_DROPOUT, in, 3, &x.attr, no_loc, NULL);
}

/* ------------------------------------------------------------------- images */

/* Images are [N, C, H, W]; a window of `size` at `stride` fits H and W. */
static bool want_image(const Graph *g, Node *n, int64_t size, int64_t stride, Diag *diag) {
  if (!want_f32(g, n, 0, diag)) return false;
  const Shape *x = &in_node(g, n, 0)->shape;
  char sx[128];
  if (x->rank != 4) {
    diag_error(diag, n->loc, "%s needs an image batch [N, C, H, W], got %s", op_info(n->op)->name,
               shape_str(x, sx));
    return false;
  }
  if (size < 1 || stride < 1 || size > x->dim[2] || size > x->dim[3]) {
    diag_error(diag, n->loc, "%s: a %lldx%lld window does not fit the %lldx%lld image of %s", op_info(n->op)->name,
               (long long)size, (long long)size, (long long)x->dim[2], (long long)x->dim[3], shape_str(x, sx));
    return false;
  }
  return true;
}

static int64_t windows(int64_t extent, int64_t size, int64_t stride) { return (extent - size) / stride + 1; }

/* Index of [n, c, h, w] in a [N, C, H, W] buffer, with n*C + c given as nc. */
static KExpr *image_index(Kernel *k, const Shape *s, KExpr *nc, KExpr *h, KExpr *w) {
  return k_iadd(k, k_imul(k, k_iadd(k, k_imul(k, nc, s->dim[2]), h), s->dim[3]), w);
}

static bool infer_pad(const Graph *g, Node *n, Diag *diag) {
  if (!want_image(g, n, 1, 1, diag)) return false;
  n->shape = in_node(g, n, 0)->shape;
  n->shape.dim[2] += 2 * n->attr.i[0];
  n->shape.dim[3] += 2 * n->attr.i[0];
  return true;
}

static void print_pad(FILE *out, const Node *n) { fprintf(out, " {pad=%lld}", (long long)n->attr.i[0]); }

/* out = x with attr.i[0] zeros around H and W (pad), or the interior of a
 * padded buffer (crop, its inverse). Loops over the smaller image. */
static Kernel *pad_kernel(const Graph *g, const Node *n, bool pad) {
  Kernel *k = kernel_new(n->id);
  if (pad) zero_output(k, n);
  const Shape *big = pad ? &n->shape : &in_node(g, n, 0)->shape, *small = pad ? &in_node(g, n, 0)->shape : &n->shape;
  int64_t p = n->attr.i[0];
  int nc, h, w;
  KStmt *loop = k_for(k, NULL, small->dim[0] * small->dim[1], &nc);
  loop = k_for(k, loop, small->dim[2], &h);
  loop = k_for(k, loop, small->dim[3], &w);
  KExpr *in_small = image_index(k, small, k_index(k, nc), k_index(k, h), k_index(k, w));
  KExpr *in_big = image_index(k, big, k_index(k, nc), k_iadd(k, k_index(k, h), k_iconst(k, p)),
                              k_iadd(k, k_index(k, w), k_iconst(k, p)));
  KExpr *src = pad ? in_small : in_big, *dst = pad ? in_big : in_small;
  k_store(k, loop, n->id, dst, k_load(k, n->in[0], src, false), accumulates(n));
  return k;
}

static Kernel *kernel_pad(const Graph *g, const Node *n) { return pad_kernel(g, n, true); }
static Kernel *kernel_crop(const Graph *g, const Node *n) { return pad_kernel(g, n, false); }

static void bwd_pad(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Attr crop = {.i = {g->nodes[n].attr.i[0]}, .shape = g->nodes[g->nodes[n].in[0]].shape};
  dx[0] = add_with(g, OP_CROP, dy, &crop);
}

/* Loops over the windows of an [N, C, H, W] image (`img`) that give the
 * cells of `out` [N, C, OH, OW] (or, for im2col, its rows): nc, oh, ow. */
typedef struct {
  Kernel *k;
  const Shape *img;
  int64_t size, stride, oh_n, ow_n;
  KStmt *cell;       /* the innermost loop over windows */
  int nc, oh, ow;
  int i, j;          /* set by window_elem: the loops over one window */
} Windows;

static Windows windows_open(Kernel *k, const Shape *img, const Attr *a, bool channels_inside, int *c) {
  Windows wd = {.k = k, .img = img, .size = a->i[0], .stride = a->i[1]};
  wd.oh_n = windows(img->dim[2], wd.size, wd.stride);
  wd.ow_n = windows(img->dim[3], wd.size, wd.stride);
  if (channels_inside) { /* im2col: n, oh, ow, c so that a row of columns is contiguous */
    KStmt *l = k_for(k, NULL, img->dim[0], &wd.nc);
    l = k_for(k, l, wd.oh_n, &wd.oh);
    l = k_for(k, l, wd.ow_n, &wd.ow);
    wd.cell = k_for(k, l, img->dim[1], c);
  } else {
    KStmt *l = k_for(k, NULL, img->dim[0] * img->dim[1], &wd.nc);
    l = k_for(k, l, wd.oh_n, &wd.oh);
    wd.cell = k_for(k, l, wd.ow_n, &wd.ow);
  }
  return wd;
}

/* Index of the cell in [N*C, OH, OW]. */
static KExpr *window_cell(Windows *wd) {
  Kernel *k = wd->k;
  return k_iadd(k, k_imul(k, k_iadd(k, k_imul(k, k_index(k, wd->nc), wd->oh_n), k_index(k, wd->oh)), wd->ow_n),
                k_index(k, wd->ow));
}

/* Opens loops i, j over the window under `parent`; returns the image index
 * of element (i, j), with nc the image's n*C + c. */
static KExpr *window_elem(Windows *wd, KStmt *parent, KExpr *nc, KStmt **inner) {
  Kernel *k = wd->k;
  KStmt *l = k_for(k, parent, wd->size, &wd->i);
  *inner = k_for(k, l, wd->size, &wd->j);
  KExpr *h = k_iadd(k, k_imul(k, k_index(k, wd->oh), wd->stride), k_index(k, wd->i));
  KExpr *w = k_iadd(k, k_imul(k, k_index(k, wd->ow), wd->stride), k_index(k, wd->j));
  return image_index(k, wd->img, nc, h, w);
}

/* The element (i, j) of the window, numbered i*size + j, as a float. */
static KExpr *window_pos(Windows *wd) {
  Kernel *k = wd->k;
  return k_to_float(k, k_iadd(k, k_imul(k, k_index(k, wd->i), wd->size), k_index(k, wd->j)));
}

/* Window ops' gradients have the input's shape and the op's window. */
static Attr window_back(const Graph *g, int n) {
  Attr a = g->nodes[n].attr;
  a.shape = g->nodes[g->nodes[n].in[0]].shape;
  return a;
}

/* attr.i[0], attr.i[1]: the window's size and stride. */
static void print_window(FILE *out, const Node *n) {
  fprintf(out, " {size=%lld, stride=%lld}", (long long)n->attr.i[0], (long long)n->attr.i[1]);
}

static bool infer_pool(const Graph *g, Node *n, Diag *diag) {
  int64_t size = n->attr.i[0], stride = n->attr.i[1];
  if (!want_image(g, n, size, stride, diag)) return false;
  const Shape *x = &in_node(g, n, 0)->shape;
  n->shape = (Shape){.rank = 4,
                     .dim = {x->dim[0], x->dim[1], windows(x->dim[2], size, stride), windows(x->dim[3], size, stride)}};
  return true;
}

/* Max- or average-pool: out[nc, oh, ow] = max or mean of the window. */
static Kernel *pool_kernel(const Graph *g, const Node *n, bool max) {
  Kernel *k = kernel_new(n->id);
  int unused;
  Windows wd = windows_open(k, &in_node(g, n, 0)->shape, &n->attr, false, &unused);
  int acc;
  k_local(k, wd.cell, k_const(k, max ? -INFINITY : 0), &acc);
  KStmt *inner;
  KExpr *x = k_load(k, n->in[0], window_elem(&wd, wd.cell, k_index(k, wd.nc), &inner), false);
  k_set(k, inner, acc, k_binary(k, max ? KB_MAX : KB_ADD, k_localv(k, acc), x));
  KExpr *v = max ? k_localv(k, acc)
                 : k_binary(k, KB_MUL, k_localv(k, acc), k_const(k, 1.0 / (double)(wd.size * wd.size)));
  k_store(k, wd.cell, n->id, window_cell(&wd), v, accumulates(n));
  return k;
}

static Kernel *kernel_maxpool(const Graph *g, const Node *n) { return pool_kernel(g, n, true); }
static Kernel *kernel_avgpool(const Graph *g, const Node *n) { return pool_kernel(g, n, false); }

static void bwd_maxpool(Graph *g, int n, int dy, const bool want[], int dx[]) {
  int in[2] = {g->nodes[n].in[0], dy};
  dx[0] = graph_add_op(g, OP_MAXPOOL_GRAD, in, 2, &g->nodes[n].attr, no_loc, NULL);
}

/* Whether a pooling gradient's windows (attr) cover its image [N, C, H, W]
 * exactly once: stride = size, H and W multiples of it. Each element of dx
 * then gets one window's value, stored, with no zeroing pass before and no
 * read of dx (on fashion_cnn's first pool 6x faster than zero and add). */
static bool windows_tile(const Shape *img, const Attr *a) {
  int64_t size = a->i[0];
  return a->i[1] == size && img->dim[2] % size == 0 && img->dim[3] % size == 0;
}

/* The store of a window element of a pooling gradient: an add where windows
 * overlap or leave elements out (after zero_output) or where the node adds
 * into a parameter's gradient slot. */
static bool pool_grad_adds(const Node *n) { return accumulates(n) || !windows_tile(&n->shape, &n->attr); }

static void zero_uncovered(Kernel *k, const Node *n) {
  if (!windows_tile(&n->shape, &n->attr)) zero_output(k, n);
}

/* dx gets each window's dy at its first maximum (PyTorch's choice on ties):
 * one pass finds the position, a second gives dy where the position matches. */
static Kernel *kernel_maxpool_grad(const Graph *g, const Node *n) {
  Kernel *k = kernel_new(n->id);
  zero_uncovered(k, n);
  int unused, best, at;
  Windows wd = windows_open(k, &n->shape, &n->attr, false, &unused);
  k_local(k, wd.cell, k_const(k, -INFINITY), &best);
  k_local(k, wd.cell, k_const(k, 0), &at);
  KStmt *inner;
  KExpr *x = k_load(k, n->in[0], window_elem(&wd, wd.cell, k_index(k, wd.nc), &inner), false);
  k_set(k, inner, at, k_select(k, k_binary(k, KB_SUB, x, k_localv(k, best)), window_pos(&wd), k_localv(k, at)));
  k_set(k, inner, best, k_binary(k, KB_MAX, k_localv(k, best), x));
  KExpr *dy = k_load(k, n->in[1], window_cell(&wd), false);
  KExpr *pixel = window_elem(&wd, wd.cell, k_index(k, wd.nc), &inner);
  KExpr *d = k_binary(k, KB_SUB, k_localv(k, at), window_pos(&wd)); /* an integer: 0 at the maximum */
  KExpr *here = k_binary(k, KB_SUB, k_const(k, 0.5), k_binary(k, KB_MUL, d, d));
  k_store(k, inner, n->id, pixel, k_select(k, here, dy, k_const(k, 0)), pool_grad_adds(n));
  return k;
}

static void bwd_avgpool(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Attr a = window_back(g, n);
  dx[0] = add_with(g, OP_AVGPOOL_GRAD, dy, &a);
}

/* dx[window elements] += dy / size^2 (= where the windows tile dx). */
static Kernel *kernel_avgpool_grad(const Graph *g, const Node *n) {
  Kernel *k = kernel_new(n->id);
  zero_uncovered(k, n);
  int unused;
  Windows wd = windows_open(k, &n->shape, &n->attr, false, &unused);
  KExpr *dy = k_binary(k, KB_MUL, k_load(k, n->in[0], window_cell(&wd), false),
                       k_const(k, 1.0 / (double)(wd.size * wd.size)));
  KStmt *inner;
  KExpr *pixel = window_elem(&wd, wd.cell, k_index(k, wd.nc), &inner);
  k_store(k, inner, n->id, pixel, dy, pool_grad_adds(n));
  return k;
}

static bool infer_im2col(const Graph *g, Node *n, Diag *diag) {
  if (!infer_pool(g, n, diag)) return false;
  const Shape *x = &in_node(g, n, 0)->shape;
  int64_t k = n->attr.i[0];
  n->shape = (Shape){.rank = 3, .dim = {x->dim[0], n->shape.dim[2] * n->shape.dim[3], x->dim[1] * k * k}};
  return true;
}

/* col[n, oh*OW + ow, (c*k + i)*k + j] = x[n, c, oh*s + i, ow*s + j] (im2col),
 * or dx[...] += dcol[...] (col2im). */
static Kernel *im2col_kernel(const Graph *g, const Node *n, bool forward) {
  Kernel *k = kernel_new(n->id);
  if (!forward) zero_output(k, n);
  const Shape *img = forward ? &in_node(g, n, 0)->shape : &n->shape;
  int c;
  Windows wd = windows_open(k, img, &n->attr, true, &c);
  int64_t ksz = wd.size, channels = img->dim[1];
  KExpr *nc = k_iadd(k, k_imul(k, k_index(k, wd.nc), channels), k_index(k, c));
  KStmt *inner;
  KExpr *pixel = window_elem(&wd, wd.cell, nc, &inner);
  KExpr *row = k_iadd(k, k_imul(k, k_index(k, wd.nc), wd.oh_n * wd.ow_n),
                      k_iadd(k, k_imul(k, k_index(k, wd.oh), wd.ow_n), k_index(k, wd.ow)));
  KExpr *col = k_iadd(k, k_imul(k, k_iadd(k, k_imul(k, k_index(k, c), ksz), k_index(k, wd.i)), ksz),
                      k_index(k, wd.j));
  KExpr *cell = k_iadd(k, k_imul(k, row, channels * ksz * ksz), col);
  KExpr *src = forward ? pixel : cell, *dst = forward ? cell : pixel;
  k_store(k, inner, n->id, dst, k_load(k, n->in[0], src, false), forward ? accumulates(n) : true);
  return k;
}

static Kernel *kernel_im2col(const Graph *g, const Node *n) { return im2col_kernel(g, n, true); }
static Kernel *kernel_col2im(const Graph *g, const Node *n) { return im2col_kernel(g, n, false); }

static void bwd_im2col(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Attr a = window_back(g, n);
  dx[0] = add_with(g, OP_COL2IM, dy, &a);
}

/* ------------------------------------------------------------ convolutions */

/* conv2d(x [N, C, H, W], w [O, C, k, k]) → [N, O, OH, OW] with attr.i[0] =
 * stride, attr.i[1] = padding: a library call (trc_conv2d), as are its two
 * gradients, which take the shape they produce in attr.shape. */
static bool infer_conv2d(const Graph *g, Node *n, Diag *diag) {
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
  d->accumulate = n->grad_of_param >= 0;
  if (d->accumulate && d->pass != TRC_CONV_BACKWARD_WEIGHTS) /* a parameter is no image */
    diag_internal_error("convolution %d accumulates into a parameter's gradient, not as the "
                        "weights' gradient", n->id);
}

/* Multiply-adds of the convolution (each pass has as many). */
static double flops_conv2d(const Graph *g, const Node *n) {
  ConvDims d;
  conv_dims(g, n, &d);
  double out = (double)d.n * (double)d.o * (double)windows(d.h + 2 * d.pad, d.k, d.stride) *
               (double)windows(d.w + 2 * d.pad, d.k, d.stride);
  return 2.0 * out * (double)(d.c * d.k * d.k);
}

static void bwd_conv2d(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Attr a = g->nodes[n].attr;
  int x = g->nodes[n].in[0], w = g->nodes[n].in[1];
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

static void print_conv(FILE *out, const Node *n) {
  fprintf(out, " {stride=%lld, padding=%lld}", (long long)n->attr.i[0], (long long)n->attr.i[1]);
}

/* -------------------------------------------------------------------- table */

static const OpInfo table[OP_COUNT] = {
#define OP(e, name, class, builtin, arity, infer, flops, backward, kernel, attrs) \
  [e] = {name, OPC_##class, arity, infer, flops, backward, kernel, attrs},
#include "ops.def"
#undef OP
};

const OpInfo *op_info(OpKind op) { return &table[op]; }

bool op_calls_library(OpKind op) {
  OpClass c = table[op].op_class;
  return c == OPC_GEMM || c == OPC_CONV;
}
