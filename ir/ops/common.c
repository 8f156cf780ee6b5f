/* common.c — the helpers the op families share (declared in ops_internal.h)
 * and the op table, which ties ir/ops.def's records to their functions. */
#include "ops_internal.h"

#include <math.h>
#include <stdlib.h>

/* ----------------------------------------------------------- shared helpers */

const Node *in_node(const Graph *g, const Node *n, int i) { return &g->nodes[n->in[i]]; }

bool want_f32(const Graph *g, const Node *n, int i, Diag *diag) {
  const Node *x = in_node(g, n, i);
  if (x->dtype == DT_F32) return true;
  char sb[128];
  diag_error(diag, n->loc, "%s expects an f32 tensor, got %s%s (convert it with f32(...))",
             op_info(n->op)->name, dtype_name(x->dtype), shape_str(&x->shape, sb));
  return false;
}

bool want_int(const Graph *g, const Node *n, int i, Diag *diag) {
  const Node *x = in_node(g, n, i);
  if (x->dtype != DT_F32) return true;
  char sb[128];
  diag_error(diag, n->loc, "%s expects integer indices, got f32%s", op_info(n->op)->name,
             shape_str(&x->shape, sb));
  return false;
}

int64_t last_dim(const Shape *s) { return s->rank ? s->dim[s->rank - 1] : 1; }
int64_t rows_of(const Shape *s) { return shape_numel(s) / (last_dim(s) ? last_dim(s) : 1); }
bool accumulates(const Node *n) { return n->grad_of_param >= 0; }

int add1(Graph *g, OpKind op, int a) { return graph_add(g, op, &a, 1, no_loc, NULL); }

int add2(Graph *g, OpKind op, int a, int b) {
  int in[2] = {a, b};
  return graph_add(g, op, in, 2, no_loc, NULL);
}

int add3(Graph *g, OpKind op, int a, int b, int c, double f0) {
  int in[3] = {a, b, c};
  return graph_add_attr(g, op, in, 3, f0, 0, 0, no_loc, NULL);
}

int add_with(Graph *g, OpKind op, int x, const Attr *attr) {
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

double flops_per_element(const Graph *g, const Node *n, double k) {
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

void zero_output(Kernel *k, const Node *n) {
  if (accumulates(n)) return;
  int v;
  KStmt *loop = k_for(k, NULL, shape_numel(&n->shape), &v);
  k_store(k, loop, n->id, k_index(k, v), k_const(k, 0), false);
}

KExpr *broadcast_index(Kernel *k, const Shape *out, const Shape *in, const int *vars) {
  KExpr *idx = k_iconst(k, 0);
  int64_t stride = 1;
  for (int d = in->rank - 1; d >= 0; d--) {
    int od = out->rank - in->rank + d;
    if (in->dim[d] != 1) idx = k_iadd(k, idx, k_imul(k, k_index(k, vars[od]), stride));
    stride *= in->dim[d];
  }
  return idx;
}

Kernel *pointwise_kernel(const Graph *g, const Node *n, ScalarFn fn) {
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
  return c == OPC_GEMM || c == OPC_CONV || c == OPC_CALL;
}
