/* test_memplan.c — the memory plan of the activations, on the examples and
 * test models given as arguments, under several checkpoint policies, read
 * back from the planned Program (offsets, live_until, scratch offsets):
 *   - two values alive at the same step never share a byte, and every value
 *     lies inside the activation region;
 *   - most_alive_bytes is the most bytes alive at one step, counted here
 *     step by step, and the region is no smaller than it;
 *   - fashion_cnn's sqrt plan, where first fit in order of definition left
 *     a 10 MiB hole under its recomputed 12.8 MB convolution output, is
 *     placed without gaps. */
#include "test_passes.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  int node, start, end;
  uint64_t lo, size;
} Placed;

static uint64_t aligned(uint64_t bytes) { return (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN; }

static int step_node(const Program *p, int s) {
  return s < p->n_forward ? p->forward[s] : p->backward[s - p->n_forward];
}

/* Every value and scratch with a place in the activation region: the
 * steps' own, and the values a step stores besides (Program.stored_by),
 * alive from that step. */
static Placed *placed_values(const Program *p, int *count) {
  const Graph *g = p->g;
  int steps = p->n_forward + p->n_backward, n = 0;
  Placed *v = xcalloc(2 * (size_t)steps + (size_t)g->n + 1, sizeof *v);
  for (int s = 0; s < steps; s++) {
    int id = step_node(p, s);
    const Node *nd = &g->nodes[id];
    for (int k = 0; k < nd->nin; k++) { /* a stored value is an input of the step that stores it */
      int in = nd->in[k];
      bool first_use = true;
      for (int j = 0; j < k; j++) first_use = first_use && nd->in[j] != in;
      if (p->stored_by[in] == id && first_use)
        v[n++] = (Placed){in, s, p->live_until[in], p->offset[in], aligned(value_bytes(&g->nodes[in]))};
    }
    if (nd->grad_of_param >= 0) continue;
    v[n++] = (Placed){id, s, p->live_until[id], p->offset[id], aligned(value_bytes(nd))};
    uint64_t scratch = node_scratch_bytes(g, nd);
    if (scratch) v[n++] = (Placed){id, s, s, p->scratch_offset[id], aligned(scratch)};
  }
  *count = n;
  return v;
}

static void check_plan(const char *what, const Program *p) {
  int n;
  Placed *v = placed_values(p, &n);
  uint64_t region_end = p->activation_offset + p->activation_bytes, most = 0;
  int last = 0;
  for (int i = 0; i < n; i++) {
    CHECK(v[i].lo >= p->activation_offset && v[i].lo + v[i].size <= region_end,
          "%s: %%%d outside the activation region", what, v[i].node);
    CHECK(v[i].end >= v[i].start, "%s: %%%d dies before it is made", what, v[i].node);
    if (v[i].end > last) last = v[i].end;
    for (int j = 0; j < i; j++) {
      bool same_time = v[i].start <= v[j].end && v[j].start <= v[i].end;
      bool same_bytes = v[i].lo < v[j].lo + v[j].size && v[j].lo < v[i].lo + v[i].size;
      CHECK(!(same_time && same_bytes), "%s: %%%d and %%%d are alive together in the same bytes", what,
            v[i].node, v[j].node);
    }
  }
  for (int s = 0; s <= last; s++) {
    uint64_t alive = 0;
    for (int i = 0; i < n; i++)
      if (v[i].start <= s && s <= v[i].end) alive += v[i].size;
    if (alive > most) most = alive;
  }
  CHECK(p->most_alive_bytes == most, "%s: most alive %llu, counted %llu", what,
        (unsigned long long)p->most_alive_bytes, (unsigned long long)most);
  CHECK(p->activation_bytes >= most, "%s: region %llu below the most alive", what,
        (unsigned long long)p->activation_bytes);
  printf("%-60s region %10llu, most alive %10llu (+%.1f%%)\n", what, (unsigned long long)p->activation_bytes,
         (unsigned long long)most, most ? 100.0 * (double)(p->activation_bytes - most) / (double)most : 0.0);
  free(v);
}

/* The model compiled and planned as `trainc plan FILE --policy POLICY`
 * does: every graph pass (conv, attention, head, pool) included. */
static Compilation *planned(const char *path, const char *policy, Diag *diag) {
  SourceFile *src = source_read(path, diag);
  if (!src) return NULL;
  Compilation *c = xcalloc(1, sizeof *c);
  CompileOptions co = {.conv = CONV_LIBRARY, .attention = ATTENTION_AUTO, .dump = PASS_NONE};
  CheckpointSpec spec;
  checkpoint_spec_parse(policy, &spec);
  MachineProfile m = profile_default();
  bool ok = compile_graph(c, src, &co, diag) && compile_program(c, spec, &m, &co, diag);
  source_free(src);
  if (ok) return c;
  compilation_free(c);
  free(c);
  return NULL;
}

int main(int argc, char **argv) {
  static const char *const policies[] = {"off", "all", "sqrt", "every 2"};
  int programs = 0;
  Diag diag;
  diag_init(&diag, stderr);
  for (int a = 1; a < argc; a++) {
    for (size_t i = 0; i < sizeof policies / sizeof *policies; i++) {
      Compilation *c = planned(argv[a], policies[i], &diag);
      CHECK(c != NULL, "%s, checkpoint %s: no plan", argv[a], policies[i]);
      if (!c) continue;
      char what[600];
      const char *base = strrchr(argv[a], '/');
      snprintf(what, sizeof what, "%s, checkpoint %s", base ? base + 1 : argv[a], policies[i]);
      const Program *p = c->plan->program;
      check_plan(what, p);
      if (strcmp(what, "fashion_cnn.nn, checkpoint sqrt") == 0)
        CHECK(p->activation_bytes == p->most_alive_bytes, "%s: gaps", what);
      programs++;
      compilation_free(c);
      free(c);
    }
  }
  printf("test_memplan: %d programs, %d failures\n", programs, failures);
  return failures != 0;
}
