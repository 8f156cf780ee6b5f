/* test_buckets.c — the step schedule's gradient buckets, on the examples and
 * test models given as arguments, planned without and with recompute, at
 * bucket sizes from one byte to more than the whole region:
 *   - the buckets cover the gradient region exactly, contiguous, from its end
 *     to its start, each made of whole parameters: the trained ones, which
 *     come first (examples/fashion_lora.nn freezes half of its tensors);
 *   - read from the arena offsets, not from grad_of_param: no backward kernel
 *     after a bucket's ready point writes or reads a byte of it (its
 *     all-reduce is then in flight), and the kernel at the ready point does
 *     write into it (the bucket is started as early as it can be). */
#include "test_passes.h"

#include <stdlib.h>

static bool overlaps(uint64_t a, uint64_t a_len, uint64_t b, uint64_t b_len) {
  return a < b + b_len && b < a + a_len;
}

/* Does backward kernel s write (its output) or read (an input) bytes
 * [lo, lo + len) of the arena? */
static bool writes(const Program *p, int s, uint64_t lo, uint64_t len) {
  int id = p->backward[s];
  return overlaps(p->offset[id], value_bytes(&p->g->nodes[id]), lo, len);
}
static bool reads(const Program *p, int s, uint64_t lo, uint64_t len) {
  const Node *n = &p->g->nodes[p->backward[s]];
  for (int k = 0; k < n->nin; k++)
    if (overlaps(p->offset[n->in[k]], value_bytes(&p->g->nodes[n->in[k]]), lo, len)) return true;
  return false;
}

static void check_buckets(const char *what, const Program *p) {
  const Graph *g = p->g;
  uint64_t end = p->trained_bytes / sizeof(float);
  int next_param = graph_trained_params(g) - 1;
  for (int b = 0; b < p->n_buckets; b++) {
    const GradBucket *bk = &p->buckets[b];
    CHECK(bk->first + bk->count == end, "%s: bucket %d ends at %llu, not %llu", what, b,
          (unsigned long long)(bk->first + bk->count), (unsigned long long)end);
    CHECK(bk->first_param + bk->n_params - 1 == next_param && bk->n_params >= 1,
          "%s: bucket %d's parameters", what, b);
    CHECK((p->offset[g->params[bk->first_param]] - p->param_offset) / 4 == bk->first,
          "%s: bucket %d starts inside a parameter", what, b);
    uint64_t lo = p->grad_offset + bk->first * 4, len = bk->count * 4;
    for (int s = bk->ready + 1; s < p->n_backward; s++)
      CHECK(!writes(p, s, lo, len) && !reads(p, s, lo, len),
            "%s: bucket %d is final after kernel %d, but kernel %d touches it", what, b, bk->ready, s);
    CHECK(bk->ready < 0 || writes(p, bk->ready, lo, len),
          "%s: bucket %d could start before kernel %d", what, b, bk->ready);
    end = bk->first;
    next_param = bk->first_param - 1;
  }
  CHECK(end == 0 && next_param == -1, "%s: the buckets leave the region's start uncovered", what);
}

int main(int argc, char **argv) {
  static const uint64_t sizes[] = {1, 4096, 1u << 20, UINT64_MAX};
  static const char *const policies[] = {"off", "every 2"};
  int programs = 0;
  Diag diag;
  diag_init(&diag, stderr);
  for (int a = 1; a < argc; a++) {
    Graph *g = compile_source(source_read(argv[a], &diag));
    CHECK(g != NULL, "%s does not compile", argv[a]);
    for (int i = 0; g && i < 2; i++) {
      CheckpointSpec spec;
      checkpoint_spec_parse(policies[i], &spec);
      MachineProfile m = profile_default();
      Plan *pl = plan_checkpoints(g, spec, &m, NULL, &diag);
      CHECK(pl != NULL, "%s: no plan", argv[a]);
      for (int k = 0; pl && k < 4; k++) {
        char what[600];
        snprintf(what, sizeof what, "%s, checkpoint %s, buckets of %llu bytes", argv[a], policies[i],
                 (unsigned long long)sizes[k]);
        program_bucket_gradients(pl->program, sizes[k]);
        check_buckets(what, pl->program);
        CHECK(k != 0 || pl->program->n_buckets == graph_trained_params(g),
              "%s: one bucket per trained parameter", what);
        CHECK(k != 3 || pl->program->n_buckets == 1, "%s: one bucket", what);
        programs++;
      }
      plan_free(pl);
    }
    graph_free(g);
  }
  printf("test_buckets: %d programs, %d failures\n", programs, failures);
  return failures != 0;
}
