/* pool.c — the POOL pass: a max-pool of a relu's output has two gradient
 * kernels in a row, maxpool_grad (dy to each window's first maximum) and
 * relu_grad (kept where the relu's output is positive), each a pass over
 * the pre-pool image (fashion_cnn's first: 12.8 MB written and read again).
 * relu_grad(y, maxpool_grad(y, dy)), the max-pool's gradient read by
 * nothing else, becomes one maxpool_grad that selects the relu's mask as it
 * stores (attr.i[2], ir/ops/images.c): the same two selects on the same
 * operands, so the same bits. The relu_grad node becomes the fused one in
 * place (its readers stay as they are); the old maxpool_grad stays, dead.
 * Runs on the graph after autodiff. */
#include "internal.h"

#include <stdlib.h>

/* How many times each node is read, over the whole graph. */
static int *count_reads(const Graph *g) {
  int *reads = xcalloc((size_t)g->n + 1, sizeof *reads);
  for (int i = 0; i < g->n; i++)
    for (int k = 0; k < g->nodes[i].nin; k++) reads[g->nodes[i].in[k]]++;
  return reads;
}

/* Whether r is relu_grad(y, maxpool_grad(y, dy)) with the max-pool's
 * gradient read by r alone. */
static bool masked_pool_grad(const Graph *g, const Node *r, const int *reads) {
  if (r->op != OP_RELU_GRAD) return false;
  const Node *p = &g->nodes[r->in[1]];
  return p->op == OP_MAXPOOL_GRAD && !p->attr.i[2] && p->in[0] == r->in[0] && reads[p->id] == 1 &&
         p->grad_of_param < 0 && r->grad_of_param < 0;
}

void fuse_pool_relu_grad(Graph *g) {
  if (g->train.no_fuse) return; /* the unfused program, as fuse.c's */
  int *reads = count_reads(g);
  for (int i = g->n_forward; i < g->n; i++) {
    Node *r = &g->nodes[i];
    if (!masked_pool_grad(g, r, reads)) continue;
    const Node *p = &g->nodes[r->in[1]];
    r->op = OP_MAXPOOL_GRAD;
    r->attr = p->attr;
    r->attr.i[2] = 1;
    r->in[0] = p->in[0], r->in[1] = p->in[1];
    op_info(r->op)->infer(g, r, NULL);
  }
  free(reads);
}
