/* autodiff.c — reverse-mode differentiation from the op table's per-op rules.
 *
 * Walks the forward graph from the loss back to the parameters. A value used
 * several times sums its gradient contributions (add nodes); a parameter's
 * contributions are not summed but each added into its gradient slot, so no
 * gradient ever needs a buffer of its own besides the slot. */
#include "passes.h"

#include <stdlib.h>

/* needs[i]: some trained parameter reaches node i, so its gradient matters.
 * A frozen parameter's does not, so no backward work feeds it alone. */
static bool *gradient_needed(const Graph *g) {
  bool *needs = xcalloc((size_t)g->n, sizeof *needs);
  for (int i = 0; i < g->n_forward; i++) {
    const Node *n = &g->nodes[i];
    needs[i] = n->op == OP_PARAM && !n->frozen;
    for (int k = 0; k < n->nin; k++) needs[i] |= needs[n->in[k]];
  }
  return needs;
}

/* Routes contribution d into parameter p's slot. `fresh` says d was made by
 * the rule just applied for this input alone; anything else (dy passed
 * through, a shared node) is copied first, since a node marked grad_of_param
 * owns no buffer other nodes could read. */
static void add_to_param(Graph *g, int p, int d, bool fresh) {
  if (!fresh || g->nodes[d].grad_of_param >= 0)
    d = graph_add_attr(g, OP_MUL_SCALAR, &d, 1, 1.0, 0, 0, g->nodes[d].loc, NULL);
  g->nodes[d].grad_of_param = p;
}

static bool used_twice(const int *dx, int n, int d) {
  int uses = 0;
  for (int k = 0; k < n; k++) uses += dx[k] == d;
  return uses > 1;
}

void autodiff(Graph *g) {
  bool *needs = gradient_needed(g);
  int *grad = xmalloc((size_t)g->n_forward * sizeof *grad);
  for (int i = 0; i < g->n_forward; i++) grad[i] = -1;
  if (g->loss_seed < 0) { /* the loss head reads it, and made it */
    g->loss_seed = graph_add(g, OP_LOSS_SEED, NULL, 0, g->nodes[g->loss].loc, NULL);
    g->nodes[g->loss_seed].shape = (Shape){.rank = 0};
  }
  grad[g->loss] = g->loss_seed;

  for (int i = g->n_forward - 1; i >= 0; i--) {
    const Node *n = &g->nodes[i]; /* valid while nodes are added (ir.h) */
    if (!needs[i] || grad[i] < 0 || n->op == OP_PARAM) continue;
    bool want[IR_MAX_IN] = {false};
    int dx[IR_MAX_IN];
    for (int k = 0; k < IR_MAX_IN; k++) dx[k] = -1;
    for (int k = 0; k < n->nin; k++) want[k] = needs[n->in[k]];
    int first_new = g->n;
    op_info(n->op)->backward(g, i, grad[i], want, dx);
    for (int k = 0; k < n->nin; k++) {
      int x = n->in[k], d = dx[k];
      if (d < 0) continue;
      if (g->nodes[x].op == OP_PARAM)
        add_to_param(g, x, d, d >= first_new && !used_twice(dx, n->nin, d));
      else if (grad[x] < 0)
        grad[x] = d;
      else {
        int in[2] = {grad[x], d};
        grad[x] = graph_add(g, OP_ADD, in, 2, n->loc, NULL);
      }
    }
    for (int b = first_new; b < g->n; b++) { /* all made for node i: its rule's nodes, sums, copies */
      g->nodes[b].origin = i;
      g->nodes[b].loc = n->loc;
    }
  }
  free(grad);
  free(needs);
}
