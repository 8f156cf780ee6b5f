/* conv.c — the CONV pass: a convolution as lowering writes it for the
 * library (ir/builtins.c's conv2d: conv2d, then add of the bias reshaped to
 * [O, 1, 1]), and the relu a model usually puts after it, become one conv2d
 * node that trc_conv2d runs with the bias and relu inside oneDNN's primitive
 * (ir/ops/matmul.c): each block of the output gets them while it is in the
 * cache, where the add and the relu each made a pass over the whole output
 * (fashion_cnn: two passes over 12.8 MB after its first convolution). Only
 * where nothing else reads the convolution's own output or the sum (relu's
 * gradient reads relu's output, which the fused node's output is). The last
 * node of the pattern becomes the fused one in place, so its readers stay as
 * they are; the others stay in the graph, dead. */
#include "internal.h"

#include <stdlib.h>

/* The add node a, when it is conv2d(x, w) + b with b of shape [O, 1, 1] and
 * the convolution read by a alone. */
static bool conv_bias_pattern(const Graph *g, const Node *a) {
  if (a->op != OP_ADD) return false;
  const Node *c = &g->nodes[a->in[0]], *b = &g->nodes[a->in[1]];
  return c->op == OP_CONV2D && c->nin == 2 && b->dtype == DT_F32 && b->shape.rank == 3 &&
         b->shape.dim[0] == c->shape.dim[1] && b->shape.dim[1] == 1 && b->shape.dim[2] == 1 &&
         graph_read_only_by(g, c->id, &a->id, 1) && g->predict != c->id;
}

/* Node `at` becomes conv2d(x, w, b) of a's convolution, relu after it when
 * at is a's relu. */
static void make_fused(Graph *g, Node *at, const Node *a, bool relu) {
  const Node *c = &g->nodes[a->in[0]];
  int x = c->in[0], w = c->in[1], b = a->in[1];
  Attr attr = c->attr;
  attr.i[2] = relu;
  at->op = OP_CONV2D;
  at->attr = attr;
  at->in[0] = x, at->in[1] = w, at->in[2] = b;
  at->nin = 3;
  op_info(at->op)->infer(g, at, NULL);
}

void fuse_conv_epilogue(Graph *g) {
  bool *taken = xcalloc((size_t)g->n + 1, sizeof *taken); /* adds fused into their relu */
  for (int i = 0; i < g->n_forward; i++) {
    Node *r = &g->nodes[i];
    if (r->op != OP_RELU) continue;
    const Node *a = &g->nodes[r->in[0]];
    if (conv_bias_pattern(g, a) && graph_read_only_by(g, a->id, &r->id, 1) && g->predict != a->id) {
      taken[a->id] = true;
      make_fused(g, r, a, true);
    }
  }
  for (int i = 0; i < g->n_forward; i++)
    if (!taken[i] && conv_bias_pattern(g, &g->nodes[i])) make_fused(g, &g->nodes[i], &g->nodes[i], false);
  free(taken);
}
