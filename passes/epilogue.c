/* epilogue.c — the EPILOGUE pass: a library call's bias add inside the
 * call, where each block of the output gets it while it is in the cache
 * instead of an add kernel making a pass over the whole output from memory:
 *   - a convolution as lowering writes it for the library (ir/builtins.c's
 *     conv2d: conv2d, then add of the bias reshaped to [O, 1, 1]) becomes
 *     conv2d(x, w, bias), with the relu a model usually puts after it too,
 *     which trc_conv2d runs inside oneDNN's primitive (fashion_cnn: two
 *     passes over 12.8 MB after its first convolution);
 *   - a linear layer (matmul, then add of its bias [N] parameter) becomes
 *     matmul(x, w, bias), which trc_gemm_bias runs with the bias added to
 *     each GEMM part just computed: the add kernel's arithmetic, the same
 *     bits (the issue-10 GPT: a 4 MB pass after each MLP's first linear,
 *     the GELU's input). Not a relu after it: the planner's stages end at a
 *     GEMM's output, and with the relu separate an MLP's stage may keep that
 *     boundary and remake the relu, or store the relu's output in bf16
 *     (--compress), which a fused node's output, the boundary itself, could
 *     not be. Not under --no-fuse (the unfused program, which
 *     tests/e2e/fuse.sh compares bitwise), nor for the CUDA backends
 *     (CompileOptions.gemm_epilogue).
 * Only where nothing else reads the product's own output or the sum (relu's
 * gradient reads relu's output, which the fused convolution's output is).
 * The last node of the pattern becomes the fused one in place, so its
 * readers stay as they are; the others stay in the graph, dead. */
#include "internal.h"

#include <stdlib.h>

/* Whether b is the bias of library node c: [O, 1, 1] for a convolution,
 * a parameter [N] for a matmul with N columns (when gemm). */
static bool bias_fits(const Node *c, const Node *b, bool gemm) {
  if (b->dtype != DT_F32) return false;
  if (c->op == OP_CONV2D)
    return b->shape.rank == 3 && b->shape.dim[0] == c->shape.dim[1] && b->shape.dim[1] == 1 &&
           b->shape.dim[2] == 1;
  return gemm && c->op == OP_MATMUL && b->op == OP_PARAM && b->shape.rank == 1 &&
         b->shape.dim[0] == c->shape.dim[c->shape.rank - 1];
}

/* The add node a, when it is lib(x, w) + b with b lib's bias and the
 * library node read by a alone. */
static bool bias_pattern(const Graph *g, const Node *a, bool gemm) {
  if (a->op != OP_ADD) return false;
  const Node *c = &g->nodes[a->in[0]], *b = &g->nodes[a->in[1]];
  return c->nin == 2 && bias_fits(c, b, gemm) && graph_read_only_by(g, c->id, &a->id, 1) &&
         g->predict != c->id;
}

/* Node `at` becomes lib(x, w, b) of a's library node, a convolution with
 * relu after it (attr.i[2]) when at is a's relu. */
static void make_fused(Graph *g, Node *at, const Node *a, bool relu) {
  const Node *c = &g->nodes[a->in[0]];
  int x = c->in[0], w = c->in[1], b = a->in[1];
  Attr attr = c->attr;
  if (relu) attr.i[2] = 1;
  at->op = c->op;
  at->attr = attr;
  at->in[0] = x, at->in[1] = w, at->in[2] = b;
  at->nin = 3;
  op_info(at->op)->infer(g, at, NULL);
}

void fuse_library_epilogues(Graph *g, bool gemm) {
  bool *taken = xcalloc((size_t)g->n + 1, sizeof *taken); /* adds fused into their relu */
  for (int i = 0; i < g->n_forward; i++) {
    Node *r = &g->nodes[i];
    if (r->op != OP_RELU) continue;
    const Node *a = &g->nodes[r->in[0]];
    if (bias_pattern(g, a, false) && graph_read_only_by(g, a->id, &r->id, 1) && g->predict != a->id) {
      taken[a->id] = true;
      make_fused(g, r, a, true);
    }
  }
  for (int i = 0; i < g->n_forward; i++)
    if (!taken[i] && bias_pattern(g, &g->nodes[i], gemm)) make_fused(g, &g->nodes[i], &g->nodes[i], false);
  free(taken);
}
