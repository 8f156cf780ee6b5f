/* buckets.c — the step schedule's gradient buckets: where, in backward(),
 * each piece of the gradient region is final, so that a backend can start
 * its all-reduce there while backward goes on (PyTorch DDP's buckets, fixed
 * at compile time instead of found by hooks at run time).
 *
 * Backward visits layers roughly last to first, so buckets are cut from the
 * end of the region (the last parameters) towards its start, each holding
 * whole parameters of at least bucket_bytes together (the last one cut may
 * be smaller). A bucket is contiguous in the region and reaches up to where
 * the next one starts, alignment gaps included, so the buckets cover the
 * region exactly: reducing them all is reducing the whole region. */
#include "internal.h"

#include <stdlib.h>

/* Per parameter index: the last backward position that adds into its
 * gradient (-1: none does; its gradient stays zero). */
static int *final_positions(const Program *p) {
  const Graph *g = p->g;
  int *index_of = xmalloc((size_t)g->n * sizeof *index_of);
  int *final = xmalloc((size_t)(g->n_params ? g->n_params : 1) * sizeof *final);
  for (int i = 0; i < g->n_params; i++) index_of[g->params[i]] = i, final[i] = -1;
  for (int s = 0; s < p->n_backward; s++) {
    int param = g->nodes[p->backward[s]].grad_of_param;
    if (param >= 0) final[index_of[param]] = s;
  }
  free(index_of);
  return final;
}

static uint64_t param_first_float(const Program *p, int index) {
  return (p->offset[p->g->params[index]] - p->param_offset) / sizeof(float);
}

void program_bucket_gradients(Program *p, uint64_t bucket_bytes) {
  const Graph *g = p->g;
  int *final = final_positions(p);
  free(p->buckets);
  p->buckets = xmalloc((size_t)(g->n_params ? g->n_params : 1) * sizeof *p->buckets);
  p->n_buckets = 0;
  uint64_t end = p->trained_bytes / sizeof(float);
  for (int last = graph_trained_params(g) - 1; last >= 0;) {
    GradBucket b = {.ready = -1};
    int first = last;
    for (uint64_t bytes = 0;; first--) {
      bytes += node_bytes(&g->nodes[g->params[first]]);
      if (final[first] > b.ready) b.ready = final[first];
      if (bytes >= bucket_bytes || first == 0) break;
    }
    b.first_param = first;
    b.n_params = last - first + 1;
    b.first = param_first_float(p, first);
    b.count = end - b.first;
    p->buckets[p->n_buckets++] = b;
    end = b.first;
    last = first - 1;
  }
  free(final);
}
