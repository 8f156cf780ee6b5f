/* storage.c — how the planner stores an activation in half its bytes
 * (`--compress bf16`, docs/planner.md): to_bf16 rounds a forward value to
 * bf16 as forward() makes it, from_bf16 widens it back to f32 where the
 * backward pass reads it. Both are runtime calls (trc_bf16_pack and
 * trc_bf16_unpack, runtime/trainc.h); only the checkpoint planner's weaving
 * makes them, after autodiff, so neither has a backward rule. */
#include "ops_internal.h"

bool infer_to_bf16(const Graph *g, Node *n, Diag *diag) {
  if (!want_f32(g, n, 0, diag)) return false;
  n->shape = in_node(g, n, 0)->shape;
  n->dtype = DT_BF16;
  return true;
}

bool infer_from_bf16(const Graph *g, Node *n, Diag *diag) {
  const Node *x = in_node(g, n, 0);
  if (x->dtype != DT_BF16) diag_internal_error("from_bf16 %d: its input is not bf16", n->id); /* only the planner makes it */
  n->shape = x->shape;
  n->dtype = DT_F32;
  return true;
}
