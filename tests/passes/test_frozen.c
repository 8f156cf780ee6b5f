/* test_frozen.c — what `freeze` saves, on one model compiled twice, as is
 * and with its first two layers frozen:
 *   - the frozen parameters sit after every trained one, and the gradient
 *     region holds the trained ones only (so does the optimizer's state,
 *     sized from it);
 *   - no backward node adds into a frozen parameter's gradient, and the
 *     backward pass has fewer steps (no input gradient of the first trained
 *     layer: only frozen weights would read it);
 *   - the gradient buckets cover exactly the trained prefix;
 *   - the arena is smaller by at least the frozen parameters' gradients. */
#include "test_passes.h"

#include <string.h>

static const char *model_text(bool frozen) {
  static char text[1024];
  snprintf(text, sizeof text,
           "model m {\n"
           "  input x : f32[B, 16]\n"
           "  input y : i32[B]\n"
           "  a = relu(linear(x, 32))\n"
           "  b = relu(linear(a, 32))\n"
           "  c = relu(linear(b, 32))\n"
           "  logits = linear(c, 4)\n"
           "  loss = cross_entropy(logits, y)\n"
           "}\n"
           "train { batch 8%s }\n",
           frozen ? "; freeze \"a.*\" \"b.weight\" \"b.bias\"" : "");
  return text;
}

static Program *build(bool frozen) {
  Graph *g = compile_source(source_from_string("frozen.nn", model_text(frozen)));
  if (!g) return NULL;
  return program_build(g, NULL);
}

static uint64_t frozen_bytes(const Program *p) {
  uint64_t bytes = 0;
  for (int i = 0; i < p->g->n_params; i++) {
    const Node *n = &p->g->nodes[p->g->params[i]];
    if (n->frozen) bytes += (uint64_t)shape_numel(&n->shape) * sizeof(float);
  }
  return bytes;
}

static void check_layout(const Program *p) {
  const Graph *g = p->g;
  CHECK(graph_trained_params(g) == 4, "%d trained", graph_trained_params(g));
  for (int i = 0; i < g->n_params; i++) {
    const Node *n = &g->nodes[g->params[i]];
    uint64_t at = p->offset[n->id] - p->param_offset;
    CHECK(n->frozen == (at >= p->trained_bytes), "%s at %llu, trained prefix %llu", n->name,
          (unsigned long long)at, (unsigned long long)p->trained_bytes);
  }
  CHECK(p->trained_bytes + frozen_bytes(p) <= p->param_bytes, "regions");
  CHECK(p->input_offset == p->grad_offset + p->trained_bytes, "gradients end where inputs start");
}

static void check_no_frozen_gradient(const Program *p) {
  const Graph *g = p->g;
  for (int i = g->n_forward; i < g->n; i++) {
    int param = g->nodes[i].grad_of_param;
    CHECK(param < 0 || !g->nodes[param].frozen, "%%%d adds into frozen %s", i,
          g->nodes[param].name);
  }
}

static void check_buckets(const Program *p) {
  uint64_t covered = 0;
  for (int i = 0; i < p->n_buckets; i++) covered += p->buckets[i].count;
  CHECK(covered == p->trained_bytes / 4, "buckets cover %llu floats of %llu",
        (unsigned long long)covered, (unsigned long long)(p->trained_bytes / 4));
}

int main(void) {
  Program *full = build(false), *frozen = build(true);
  if (!full || !frozen) return 1;
  CHECK(full->trained_bytes == full->param_bytes, "nothing frozen: all train");
  CHECK(frozen->param_bytes == full->param_bytes, "the same parameters");
  check_layout(frozen);
  check_no_frozen_gradient(frozen);
  check_buckets(frozen);
  check_buckets(full);
  CHECK(frozen->n_backward < full->n_backward, "backward steps %d, unfrozen %d",
        frozen->n_backward, full->n_backward);
  uint64_t saved = frozen_bytes(frozen);
  CHECK(saved > 0 && frozen->arena_bytes + saved <= full->arena_bytes,
        "arena %llu frozen, %llu not, frozen parameters %llu bytes",
        (unsigned long long)frozen->arena_bytes, (unsigned long long)full->arena_bytes,
        (unsigned long long)saved);
  printf("arena %llu bytes, unfrozen %llu; backward steps %d, unfrozen %d\n",
         (unsigned long long)frozen->arena_bytes, (unsigned long long)full->arena_bytes,
         frozen->n_backward, full->n_backward);
  const Graph *g1 = full->g, *g2 = frozen->g;
  program_free(full), program_free(frozen);
  graph_free((Graph *)g1), graph_free((Graph *)g2);
  return failures ? 1 : 0;
}
