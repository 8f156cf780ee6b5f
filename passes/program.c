/* program.c — a Program's steps and kernels (the STEPS, KERNELS and
 * PARALLEL passes) and its lifetime.
 *
 * forward() computes, in graph order, every forward node that the loss, the
 * prediction or a gradient needs (a bf16 rounding right after its value); backward() then computes the backward
 * nodes in graph order (autodiff built them in reverse topological order of
 * the forward graph, so graph order is a valid schedule). */
#include "internal.h"

#include <stdlib.h>

/* A value stored in bf16 is rounded (to_bf16, which the planner appends to
 * the forward graph) right after it is made, so that the f32 value dies at
 * its last forward reader. */
static void order_steps(Program *p, const bool *live) {
  const Graph *g = p->g;
  int *pack = xmalloc((size_t)g->n * sizeof *pack); /* per value: its to_bf16, -1 */
  for (int i = 0; i < g->n; i++) pack[i] = -1;
  for (int i = 0; i < g->n_forward; i++)
    if (g->nodes[i].op == OP_TO_BF16 && live[i]) pack[g->nodes[i].in[0]] = i;
  for (int i = 0; i < g->n; i++) {
    const Node *n = &g->nodes[i];
    if (!live[i] || is_leaf(n) || node_is_view(n) || n->op == OP_TO_BF16) continue;
    if (i >= g->n_forward) {
      p->backward[p->n_backward++] = i;
      continue;
    }
    p->forward[p->n_forward++] = i;
    if (pack[i] >= 0) p->forward[p->n_forward++] = pack[i];
  }
  free(pack);
}

Program *program_steps(const Graph *g) {
  Program *p = xcalloc(1, sizeof *p);
  p->g = g;
  p->forward = xmalloc((size_t)g->n * sizeof(int));
  p->backward = xmalloc((size_t)g->n * sizeof(int));
  p->offset = xcalloc((size_t)g->n, sizeof(uint64_t));
  p->scratch_offset = xcalloc((size_t)g->n, sizeof(uint64_t));
  p->fused_into = xmalloc((size_t)g->n * sizeof *p->fused_into);
  p->stored_by = xmalloc((size_t)g->n * sizeof *p->stored_by);
  p->storage_root = graph_storage_roots(g);
  for (int i = 0; i < g->n; i++) p->fused_into[i] = p->stored_by[i] = -1;
  bool *live = live_nodes(g);
  order_steps(p, live);
  free(live);
  place_leaves(p);
  return p;
}

void program_lower_kernels(Program *p) {
  const Graph *g = p->g;
  p->kernels = xcalloc((size_t)g->n, sizeof(Kernel *));
  p->loop_work = xcalloc((size_t)g->n, sizeof *p->loop_work);
  for (int s = 0; s < p->n_forward + p->n_backward; s++) {
    int id = s < p->n_forward ? p->forward[s] : p->backward[s - p->n_forward];
    if (op_calls_library(g->nodes[id].op)) continue;
    p->kernels[id] = op_info(g->nodes[id].op)->kernel(g, &g->nodes[id]); /* a loop, or a view's copy */
    p->loop_work[id] = kernel_loop_work(p->kernels[id]);
  }
}

void program_mark_kernels(Program *p) {
  for (int i = 0; i < p->g->n; i++)
    if (p->kernels[i]) kernel_prepare(p->g, p->kernels[i]);
}

PredictLayout program_predict_layout(const Program *p) {
  const Graph *g = p->g;
  PredictLayout l = {.has = g->predict >= 0};
  if (!l.has) return l;
  const Shape *s = &g->nodes[g->predict].shape;
  l.offset = p->offset[g->predict];
  l.classes = s->dim[s->rank - 1];
  l.rows = s->rank == 3 ? s->dim[1] : 1;
  if (g->loss_head >= 0) {
    const Node *head = &g->nodes[g->loss_head];
    HeadDims h;
    head_dims(g, head, &h);
    l.head = true;
    l.classes = h.v;
    l.dim = h.d;
    l.w_vd = h.w_vd;
    l.weight_offset = p->offset[head->in[1]];
    l.stats_offset = p->offset[head->id] + (uint64_t)h.stats_at * sizeof(float);
  }
  return l;
}

uint64_t program_grad_offset(const Program *p, int param) {
  return p->offset[param] - p->param_offset + p->grad_offset;
}

void program_free(Program *p) {
  if (!p) return;
  for (int i = 0; p->kernels && i < p->g->n; i++) kernel_free(p->kernels[i]);
  free(p->kernels);
  free(p->loop_work);
  free(p->offset);
  free(p->scratch_offset);
  free(p->live_until);
  free(p->fused_into);
  free(p->stored_by);
  free(p->storage_root);
  free(p->forward);
  free(p->backward);
  free(p->buckets);
  for (int precision = 0; precision < TRC_PRECISION_COUNT; precision++) free(p->kernel_seconds[precision]);
  free(p);
}
