/* attention.c — the ATTENTION pass: causal attention as lowering writes it
 * (ir/builtins.c's attend: bmm(q, k^T) over heads, causal_softmax, bmm(p,
 * v)) becomes one causal_attention node (ir/ops/attention.c), a runtime call
 * that makes the probabilities a block of rows at a time and never stores
 * them; its gradient remakes them from q and k (docs/planner.md, *Attention
 * without stored probabilities*). Only where nothing else reads the scores
 * or the probabilities: dropout on the probabilities (their own mask, read
 * by backward) keeps the unfused form. The final bmm's node becomes the
 * fused one in place, so its readers stay as they are; the scores and
 * probabilities stay in the graph, dead. Whether to fuse is the user's
 * (--attention fused or whole) or the planner's: under auto the pipeline
 * keeps the graph without this pass too and prices both (pipeline.c). */
#include "internal.h"

/* bmm's head layout and transposes as attend writes them. */
static bool is_bmm(const Node *n, bool tb, int layout) {
  return n->op == OP_BMM && n->attr.i[0] == 0 && n->attr.i[1] == tb && n->attr.i[2] > 0 &&
         n->attr.i[3] == layout;
}

/* Whether forward node x is p v of p = causal_softmax(q k^T) with q, k, v
 * alike and the scores and probabilities read by nothing else. */
static bool attention_pattern(const Graph *g, const Node *x) {
  if (!is_bmm(x, false, BMM_HEADS_B | BMM_HEADS_C)) return false;
  const Node *p = &g->nodes[x->in[0]];
  if (p->op != OP_CAUSAL_SOFTMAX) return false;
  const Node *s = &g->nodes[p->in[0]];
  if (!is_bmm(s, true, BMM_HEADS_A | BMM_HEADS_B) || s->attr.i[2] != x->attr.i[2]) return false;
  const Shape *q = &g->nodes[s->in[0]].shape;
  for (int k = 1; k < 3; k++) {
    const Shape *other = &g->nodes[k == 1 ? s->in[1] : x->in[1]].shape;
    if (!shape_equal(other, q)) return false;
  }
  return q->rank == 3 && graph_read_only_by(g, p->id, &x->id, 1) &&
         graph_read_only_by(g, s->id, &p->id, 1) && g->predict != p->id && g->predict != s->id;
}

int fuse_attention(Graph *g) {
  int fused = 0;
  for (int i = 0; i < g->n_forward; i++) {
    Node *x = &g->nodes[i];
    if (!attention_pattern(g, x)) continue;
    const Node *p = &g->nodes[x->in[0]], *s = &g->nodes[p->in[0]];
    int q = s->in[0], k = s->in[1], v = x->in[1];
    x->op = OP_CAUSAL_ATTENTION;
    x->attr = (Attr){.i = {s->attr.i[2]}, .f = {p->attr.f[0]}};
    x->in[0] = q, x->in[1] = k, x->in[2] = v;
    x->nin = 3;
    op_info(x->op)->infer(g, x, NULL);
    fused++;
  }
  return fused;
}
