/* cost.c — the cost model: an op's FLOPs (from the op table) and the bytes it
 * moves, turned into seconds by a machine profile. GEMMs run at the BLAS's
 * rate; loop nests at the slower of their arithmetic and their memory
 * traffic (pointwise chains are bandwidth-bound here). Reading a profile
 * file is the driver's job; this file parses its text. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

MachineProfile profile_default(void) {
  /* `trainc calibrate` on the 2-core Intel Xeon (AMX, AVX-512) machine this
   * project is developed on, three runs on a quiet machine (2026-12-04:
   * GEMMs 2.32-2.39e11, loops 5.8-6.0e10, 2.57-2.61e10 bytes/s, 0.62-0.72 us
   * a dispatch; docs/planner.md); bf16 GEMMs 1.05-1.15e12, two runs that
   * evening; `trainc calibrate` measures yours. */
  return (MachineProfile){.gemm_flops = 235e9, .gemm_bf16_flops = 1.05e12, .loop_flops = 59e9,
                          .bandwidth = 26e9, .kernel_overhead = 0.7e-6};
}

static const struct {
  const char *key;
  size_t offset;
  bool optional; /* absent from profiles written before it was measured */
} profile_keys[] = { /* gemm_bf16_flops second: GEMM_BF16_KEY */
    {"gemm_flops", offsetof(MachineProfile, gemm_flops), false},
    {"gemm_bf16_flops", offsetof(MachineProfile, gemm_bf16_flops), true},
    {"loop_flops", offsetof(MachineProfile, loop_flops), false},
    {"bandwidth", offsetof(MachineProfile, bandwidth), false},
    {"kernel_overhead", offsetof(MachineProfile, kernel_overhead), false},
};
enum { N_PROFILE_KEYS = sizeof profile_keys / sizeof profile_keys[0], GEMM_BF16_KEY = 1 };

void profile_write(FILE *out, const MachineProfile *p) {
  fputs("# trainc machine profile (trainc calibrate); units: FLOP/s, bytes/s, seconds\n", out);
  for (int i = 0; i < N_PROFILE_KEYS; i++)
    fprintf(out, "%s = %.6g\n", profile_keys[i].key, *(const double *)((const char *)p + profile_keys[i].offset));
}

/* One `key = value` line (a NUL-terminated copy); false when it is not one
 * of the keys, given a positive value for the first time. */
static bool profile_line(const char *line, MachineProfile *p, bool *seen) {
  char key[64];
  double v;
  int used = 0;
  if (sscanf(line, " %63[a-z0-9_] = %lf %n", key, &v, &used) != 2 || line[used] != '\0') return false;
  for (int i = 0; i < N_PROFILE_KEYS; i++) {
    if (strcmp(key, profile_keys[i].key) != 0) continue;
    if (!(v > 0 && v < 1e30) || seen[i]) return false;
    *(double *)((char *)p + profile_keys[i].offset) = v;
    seen[i] = true;
    return true;
  }
  return false;
}

bool profile_parse(const SourceFile *f, MachineProfile *p, Diag *diag) {
  bool seen[N_PROFILE_KEYS] = {false};
  int errors = diag_count(diag);
  const char *at = f->text, *end = f->text + f->len;
  for (int lineno = 1; at < end; lineno++) {
    size_t len = strcspn(at, "\n");
    char *line = xstrndup(at, len);
    line[strcspn(line, "\r")] = '\0';
    const char *first = line + strspn(line, " \t");
    if (*first != '#' && *first != '\0' && !profile_line(line, p, seen))
      diag_error(diag, (SrcLoc){f, lineno, (int)(first - line) + 1},
                 "expected `key = positive number` with a key of gemm_flops, gemm_bf16_flops, loop_flops, "
                 "bandwidth, kernel_overhead (each once)");
    free(line);
    at += len + (at + len < end);
  }
  bool lines_ok = diag_count(diag) == errors;
  for (int i = 0; lines_ok && i < N_PROFILE_KEYS; i++)
    if (!seen[i] && !profile_keys[i].optional) diag_file_error(diag, f->path, "missing `%s = ...`", profile_keys[i].key);
  if (!seen[GEMM_BF16_KEY]) { /* the default profile's ratio to gemm_flops */
    MachineProfile d = profile_default();
    p->gemm_bf16_flops = p->gemm_flops * d.gemm_bf16_flops / d.gemm_flops;
  }
  return diag_count(diag) == errors;
}

/* Bytes a kernel reads and writes. */
static double bytes_moved(const Graph *g, const Node *n) {
  double bytes = (double)node_bytes(n);
  for (int k = 0; k < n->nin; k++) bytes += (double)node_bytes(&g->nodes[n->in[k]]);
  return bytes;
}

/* Leaves and views run no code. */
double node_seconds(const Graph *g, const Node *n, const MachineProfile *m) {
  if (is_leaf(n) || node_is_view(n)) return 0;
  double flops = op_info(n->op)->flops(g, n);
  double rate = n->rounded ? m->gemm_bf16_flops : op_calls_library(n->op) ? m->gemm_flops : m->loop_flops;
  double compute = flops / rate;
  double memory = bytes_moved(g, n) / m->bandwidth;
  return (compute > memory ? compute : memory) + m->kernel_overhead;
}

/* The step whose kernel computes each node: the node itself unless it was
 * fused, else its reader's kernel step (a fused value comes before its
 * reader, so one backward sweep resolves chains). */
static int *kernel_steps(const Program *p) {
  int n = p->g->n, *step = xmalloc((size_t)n * sizeof *step);
  for (int i = n - 1; i >= 0; i--) step[i] = p->fused_into[i] < 0 ? i : step[p->fused_into[i]];
  return step;
}

/* Per kernel step: its members' FLOPs, bytes (less each fused value's store
 * and load), unfused seconds, and how many there are. */
typedef struct {
  double flops, bytes, plain;
  int members;
} StepSums;

static double step_kernel_seconds(const Graph *g, int step, const StepSums *s, const MachineProfile *m) {
  if (s->members == 1) return node_seconds(g, &g->nodes[step], m);
  double compute = s->flops / m->loop_flops, memory = s->bytes / m->bandwidth;
  return (compute > memory ? compute : memory) + m->kernel_overhead;
}

double *program_node_seconds(const Program *p, const MachineProfile *m) {
  const Graph *g = p->g;
  int *step = kernel_steps(p);
  StepSums *sum = xcalloc((size_t)g->n, sizeof *sum);
  double *share = xmalloc((size_t)g->n * sizeof *share);
  for (int i = 0; i < g->n; i++) {
    const Node *n = &g->nodes[i];
    StepSums *s = &sum[step[i]];
    share[i] = node_seconds(g, n, m);
    if (is_leaf(n)) continue; /* no kernel, no FLOPs */
    s->flops += op_info(n->op)->flops(g, n);
    s->bytes += bytes_moved(g, n) - (step[i] != i ? 2.0 * (double)node_bytes(n) : 0);
    s->plain += share[i];
    s->members++;
  }
  for (int i = 0; i < g->n; i++) {
    const StepSums *s = &sum[step[i]];
    if (s->members == 1) continue;
    double secs = step_kernel_seconds(g, step[i], s, m);
    share[i] = s->plain > 0 ? secs * share[i] / s->plain : 0;
  }
  free(step);
  free(sum);
  return share;
}
