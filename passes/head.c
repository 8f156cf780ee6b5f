/* head.c — the HEAD pass: a loss that is cross_entropy over a linear layer
 * without bias (logits = x @ w or x @ w^T, w a parameter) becomes the
 * chunked loss head, linear_cross_entropy then head_loss (ir/ops/head.c):
 * the logits are made a chunk of rows at a time and the gradients right
 * there, so neither forward nor backward holds the [rows, classes] logits
 * or their gradient (docs/planner.md, *The loss head*). The logits, the
 * logsumexp and the cross_entropy stay in the graph, dead. A `predict` of
 * those logits becomes x: the runtime makes the rows it needs from x and w
 * (trc_model.predict_head). */
#include "internal.h"

#include <stdlib.h>

/* The default chunk: as many rows as 4 MiB of logits hold, but at least
 * 256, and no more than there are. Fewer rows make thin GEMMs, and w's
 * gradient is re-read whole per chunk: GPT-2 124M's head in chunks of 64
 * rows made its step 11% slower than the whole logits, 128 as fast, 256
 * faster (bench/RESULTS.md, issue 24). */
#define HEAD_CHUNK_BYTES (4u << 20)
#define HEAD_CHUNK_LEAST 256

static int64_t default_chunk(int64_t rows, int64_t classes) {
  int64_t chunk = (int64_t)HEAD_CHUNK_BYTES / (classes * (int64_t)sizeof(float));
  if (chunk < HEAD_CHUNK_LEAST) chunk = HEAD_CHUNK_LEAST;
  return chunk < rows ? chunk : rows;
}

/* The cross_entropy loss over a bias-free linear layer that nothing else
 * reads (but predict), or -1. */
static int head_pattern(const Graph *g) {
  const Node *loss = &g->nodes[g->loss];
  if (loss->op != OP_CROSS_ENTROPY) return -1;
  const Node *logits = &g->nodes[loss->in[0]], *labels = &g->nodes[loss->in[1]];
  if (logits->op != OP_MATMUL || logits->attr.i[0] || labels->dtype != DT_I32) return -1;
  const Node *w = &g->nodes[logits->in[1]];
  if (w->op != OP_PARAM || w->shape.rank != 2) return -1;
  if (g->predict >= 0 && g->predict != logits->id) return -1;
  const int lse_readers[2] = {loss->id, loss->id}, logit_readers[2] = {loss->id, loss->in[2]};
  if (!graph_read_only_by(g, logits->id, logit_readers, 2) || !graph_read_only_by(g, loss->in[2], lse_readers, 2))
    return -1;
  return loss->id;
}

void fuse_loss_head(Graph *g, int64_t chunk) {
  int ce = chunk != HEAD_WHOLE ? head_pattern(g) : -1;
  if (ce < 0) return;
  const Node loss = g->nodes[ce], logits = g->nodes[loss.in[0]];
  const Node *w = &g->nodes[logits.in[1]];
  const Shape *x = &g->nodes[logits.in[0]].shape;
  int64_t rows = shape_numel(x) / x->dim[x->rank - 1];
  bool planner_chooses = chunk == HEAD_CHUNK_AUTO;
  if (chunk <= 0) chunk = default_chunk(rows, logits.shape.dim[logits.shape.rank - 1]);
  g->loss_seed = graph_add(g, OP_LOSS_SEED, NULL, 0, loss.loc, NULL);
  g->nodes[g->loss_seed].shape = (Shape){.rank = 0};
  Attr attr = {.i = {loss.attr.i[0], loss.attr.i[1], !logits.attr.i[1], chunk < rows ? chunk : rows,
                     !w->frozen, planner_chooses}};
  int in[4] = {logits.in[0], logits.in[1], loss.in[1], g->loss_seed};
  int head = graph_add_op(g, OP_LINEAR_CROSS_ENTROPY, in, 4, &attr, loss.loc, NULL);
  g->nodes[head].pin = PIN_STORE; /* it adds w's gradient: never run twice */
  int total = graph_add(g, OP_HEAD_LOSS, &head, 1, loss.loc, NULL);
  g->nodes[total].name = loss.name ? xstrdup(loss.name) : NULL;
  if (g->predict == logits.id) g->predict = logits.in[0];
  g->loss = total;
  g->loss_head = head;
  g->n_forward = g->n;
}
