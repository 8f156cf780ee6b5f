/* program_print.c — the Program after a program pass as text
 * (`--dump=steps|kernels|fuse|schedule|parallel|buckets`), one line per leaf,
 * step and view, in graph order; after SCHEDULE:
 *
 *     f2    %6 = relu %5 : f32[128, 512]  @803200 +262144  live f2..b9  stored
 *
 * Before SCHEDULE a step has its bytes but no offset or lifetime yet; the
 * KERNELS, FUSE and PARALLEL dumps add each step's top-level loops
 * (`loops [128x512] [128]`, `parallel` on those proved so; `library` for a
 * GEMM or convolution), and BUCKETS the gradient buckets.
 * f<i> / b<i> is the i-th call of forward() / backward(); a step that
 * computes fused values inline says `fuses %5`, and each of those is a line
 * `fused %5 = ... in %6` with no storage (passes/fuse.c); `live` runs from
 * that step to the last one reading the value (`end`: the runtime reads it
 * after backward); `stored` marks what forward() leaves for backward(). */
#include "internal.h"

#include <stdlib.h>

static const char *step_name(const Program *p, int step, char buf[16]) {
  if (step < p->n_forward) snprintf(buf, 16, "f%d", step);
  else if (step < p->n_forward + p->n_backward) snprintf(buf, 16, "b%d", step - p->n_forward);
  else snprintf(buf, 16, "end");
  return buf;
}

static void print_regions(FILE *out, const Program *p, Pass after) {
  bool planned = after >= PASS_SCHEDULE;
  fprintf(out, "%s %s: %d forward steps, %d backward steps", pass_name(after), p->g->model_name,
          p->n_forward, p->n_backward);
  if (planned) fprintf(out, ", arena %llu bytes", (unsigned long long)p->arena_bytes);
  fputc('\n', out);
  char scalars[96];
  snprintf(scalars, sizeof scalars, "  (loss seed; dropout key @%llu, training flag @%llu)",
           (unsigned long long)p->rng_key_offset, (unsigned long long)p->training_offset);
  const struct { const char *what; uint64_t at, bytes; const char *note; } regions[] = {
      {"parameters", p->param_offset, p->param_bytes, ""},
      {"gradients", p->grad_offset, p->trained_bytes, ""},
      {"inputs", p->input_offset, p->input_bytes, ""},
      {"scalars", p->seed_offset, p->activation_offset - p->seed_offset, scalars},
      {"activations", p->activation_offset, p->activation_bytes, ""},
  };
  for (size_t i = 0; i < sizeof regions / sizeof regions[0] - !planned; i++)
    fprintf(out, "  %-12s @%-10llu +%llu%s\n", regions[i].what, (unsigned long long)regions[i].at,
            (unsigned long long)regions[i].bytes, regions[i].note);
}

/* "fuses %i" for each value fused into step id, "stores %i" for each it
 * computes and stores, in id order: they are its inputs (a value fuses
 * only into a reader). */
static void print_fused_inputs(FILE *out, const Program *p, const Node *n, int id) {
  int last = -1;
  for (;;) {
    int next = -1;
    for (int k = 0; k < n->nin; k++)
      if ((p->fused_into[n->in[k]] == id || p->stored_by[n->in[k]] == id) && n->in[k] > last &&
          (next < 0 || n->in[k] < next))
        next = n->in[k];
    if (next < 0) return;
    fprintf(out, "  %s %%%d", p->fused_into[next] == id ? "fuses" : "stores", next);
    last = next;
  }
}

/* A step's top-level loops, each with its nest's extents down the first
 * inner loop (`[128x512]`), `parallel` where PARALLEL proved it. */
static void print_loops(FILE *out, const Program *p, int id, Pass after) {
  const Kernel *k = p->kernels[id];
  if (!k) {
    fputs(op_calls_library(p->g->nodes[id].op) ? "  library" : "", out);
    return;
  }
  fputs("  loops", out);
  for (int i = 0; i < k->nbody; i++) {
    const KStmt *s = k->body[i];
    if (s->kind != KS_FOR) continue;
    fprintf(out, " [%lld", (long long)s->extent);
    for (const KStmt *in = s; in->nbody > 0 && in->body[0]->kind == KS_FOR;) {
      in = in->body[0];
      fprintf(out, "x%lld", (long long)in->extent);
    }
    fprintf(out, "%s]", after == PASS_PARALLEL && s->parallel ? " parallel" : "");
  }
}

static bool shows_loops(Pass after) {
  return after == PASS_KERNELS || after == PASS_FUSE || after == PASS_PARALLEL;
}

/* label: the step, "leaf" or "view"; the value; where it lives and why. */
static void print_line(FILE *out, const Program *p, int id, const int *steps, Pass after) {
  int step = steps[id];
  const Graph *g = p->g;
  const Node *n = &g->nodes[id];
  char b1[16], b2[16], sb[128];
  const char *label = is_leaf(n) ? "leaf" : fused_consumer(p, id) != id ? "fused" : "view";
  if (step >= 0) label = step_name(p, step, b1);
  fprintf(out, "  %-5s %%%d = %s", label, id, op_info(n->op)->name);
  if (is_leaf(n) && n->name) fprintf(out, " %s", n->name);
  for (int k = 0; k < n->nin; k++) fprintf(out, "%s%%%d", k ? ", " : " ", n->in[k]);
  fprintf(out, " : %s%s", dtype_name(n->dtype), shape_str(&n->shape, sb));
  if (p->fused_into[id] >= 0) fprintf(out, "  in %%%d", p->fused_into[id]);
  else if (after >= PASS_SCHEDULE || (step < 0 && p->stored_by[id] < 0))
    fprintf(out, "  @%llu +%llu", (unsigned long long)p->offset[id],
            (unsigned long long)node_bytes(n));
  else fprintf(out, "  +%llu", (unsigned long long)node_bytes(n));
  if (p->stored_by[id] >= 0) fprintf(out, "  in %%%d, stored there", p->stored_by[id]);
  print_fused_inputs(out, p, n, id);
  if (node_is_view(n)) fprintf(out, "  view of %%%d", p->storage_root[id]);
  if (n->grad_of_param >= 0) fprintf(out, "  +=> grad(%s)", g->nodes[n->grad_of_param].name);
  if (n->recompute_of >= 0) fprintf(out, "  recompute of %%%d", n->recompute_of);
  if (step >= 0 && shows_loops(after)) print_loops(out, p, id, after);
  int from = p->stored_by[id] >= 0 ? steps[fused_consumer(p, id)] : step; /* written there */
  if (from >= 0 && after >= PASS_SCHEDULE && p->live_until[id] >= 0)
    fprintf(out, "  live %s..%s%s", step_name(p, from, b1), step_name(p, p->live_until[id], b2),
            from < p->n_forward && p->live_until[id] >= p->n_forward ? "  stored" : "");
  fputc('\n', out);
}

/* The values forward leaves for backward: the steps' own, and those a step
 * stores for later readers (stored_by: among its inputs). */
static void print_stored(FILE *out, const Program *p) {
  fprintf(out, "stored (%llu bytes):", (unsigned long long)p->stored_bytes);
  for (int s = 0; s < p->n_forward; s++) {
    int id = p->forward[s];
    const Node *n = &p->g->nodes[id];
    for (int k = 0; k < n->nin; k++)
      if (p->stored_by[n->in[k]] == id && p->live_until[n->in[k]] >= p->n_forward) fprintf(out, " %%%d", n->in[k]);
    if (p->live_until[id] >= p->n_forward) fprintf(out, " %%%d", id);
  }
  fputc('\n', out);
}

/* One line a bucket: its floats of the gradient region, its parameters,
 * the backward step after which it is final. */
static void print_buckets(FILE *out, const Program *p) {
  char b[16];
  for (int i = 0; i < p->n_buckets; i++) {
    const GradBucket *k = &p->buckets[i];
    fprintf(out, "bucket %d: floats %llu +%llu, parameters %d..%d, ready after %s\n", i,
            (unsigned long long)k->first, (unsigned long long)k->count, k->first_param,
            k->first_param + k->n_params - 1,
            k->ready < 0 ? "none" : step_name(p, p->n_forward + k->ready, b));
  }
}

void program_print(FILE *out, const Program *p, Pass after) {
  const Graph *g = p->g;
  int *step = xmalloc((size_t)g->n * sizeof *step);
  for (int i = 0; i < g->n; i++) step[i] = -1;
  for (int s = 0; s < p->n_forward; s++) step[p->forward[s]] = s;
  for (int s = 0; s < p->n_backward; s++) step[p->backward[s]] = p->n_forward + s;
  bool *live = live_nodes(g);
  print_regions(out, p, after);
  fputs("forward:\n", out);
  for (int i = 0; i < g->n; i++) {
    if (i == g->n_forward) fputs("backward:\n", out);
    bool shown = step[i] >= 0 || is_leaf(&g->nodes[i]) || node_is_view(&g->nodes[i]) ||
                 fused_consumer(p, i) != i;
    if (live[i] && shown)
      print_line(out, p, i, step, after);
  }
  if (after >= PASS_SCHEDULE) print_stored(out, p);
  if (after == PASS_BUCKETS) print_buckets(out, p);
  free(live);
  free(step);
}
