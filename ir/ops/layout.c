/* layout.c — leaves (what the runtime sets) and layout: reshape, slice,
 * permute. */
#include "ops_internal.h"

#include <math.h>
#include <stdlib.h>

/* ------------------------------------------------------------------- leaves */

void print_input(FILE *out, const Node *n) {
  fprintf(out, " %s", n->name);
  if (n->index_limit) fprintf(out, " {index < %lld}", (long long)n->index_limit);
  if (n->has_ignore) fprintf(out, " {or %lld: ignored}", (long long)n->ignore_label);
}

void print_param(FILE *out, const Node *n) {
  static const char *init_names[] = {"zeros", "ones", "normal", "uniform", "xavier", "he"};
  fprintf(out, " %s {%s(%g, %g)%s%s}", n->name, init_names[n->init.kind], n->init.a, n->init.b,
          n->decay ? ", decay" : "", n->frozen ? ", frozen" : "");
  if (n->file_name) fprintf(out, " <- %s%s", n->file_name, n->transposed ? " (transposed)" : "");
}

/* ------------------------------------------------------------------- layout */

bool infer_reshape(const Graph *g, Node *n, Diag *diag) {
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
Kernel *kernel_reshape(const Graph *g, const Node *n) {
  Kernel *k = kernel_new(n->id);
  int v;
  KStmt *loop = k_for(k, NULL, shape_numel(&n->shape), &v);
  k_store(k, loop, n->id, k_index(k, v), k_load(k, n->in[0], k_index(k, v), false), accumulates(n));
  return k;
}

void bwd_reshape(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Attr back = {.shape = g->nodes[g->nodes[n].in[0]].shape};
  dx[0] = add_with(g, OP_RESHAPE, dy, &back);
}

bool infer_slice(const Graph *g, Node *n, Diag *diag) {
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

void print_start(FILE *out, const Node *n) { fprintf(out, " {start=%lld}", (long long)n->attr.i[0]); }

void bwd_slice(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Attr back = {.i = {g->nodes[n].attr.i[0]}, .shape = g->nodes[g->nodes[n].in[0]].shape};
  dx[0] = add_with(g, OP_SLICE_GRAD, dy, &back);
}

/* Zeros with dy in rows attr.i[0]..; adding into a gradient slot, only the
 * rows. */
Kernel *kernel_slice_grad(const Graph *g, const Node *n) {
  Kernel *k = kernel_new(n->id);
  zero_output(k, n);
  int64_t row = shape_numel(&n->shape) / n->shape.dim[0];
  int v;
  KStmt *loop = k_for(k, NULL, shape_numel(&in_node(g, n, 0)->shape), &v);
  KExpr *dst = k_iadd(k, k_index(k, v), k_iconst(k, n->attr.i[0] * row));
  k_store(k, loop, n->id, dst, k_load(k, n->in[0], k_index(k, v), false), true);
  return k;
}

bool infer_permute(const Graph *g, Node *n, Diag *diag) {
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

void print_axes(FILE *out, const Node *n) {
  for (int d = 0; d < n->shape.rank; d++) fprintf(out, "%s%lld", d ? ", " : " {", (long long)n->attr.i[d]);
  fputc('}', out);
}

/* Row-major strides of a shape. */
static void strides_of(const Shape *s, int64_t *stride) {
  int64_t st = 1;
  for (int d = s->rank - 1; d >= 0; d--) stride[d] = st, st *= s->dim[d];
}

/* Loops over the output; the input is read at the permuted strides. */
Kernel *kernel_permute(const Graph *g, const Node *n) {
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

void bwd_permute(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Attr inverse = {0};
  for (int d = 0; d < g->nodes[n].shape.rank; d++) inverse.i[g->nodes[n].attr.i[d]] = d;
  dx[0] = add_with(g, OP_PERMUTE, dy, &inverse);
}
