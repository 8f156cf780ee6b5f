/* checkpoint.c — the checkpoint planner: which forward values the trainer
 * stores for the backward pass and which it recomputes there.
 *
 * 1. Stages. A forward value is a cut when no edge of the forward graph jumps
 *    over it (everything after it depends on what came before only through
 *    it). Cuts split the forward graph into pieces; a stage is a run of pieces
 *    closed by one holding a compute-heavy op (a GEMM), so a stage is
 *    "cheap tail of the previous layer + one heavy op" and its boundary is the
 *    heavy op's output. Recomputing a stage from a stored boundary then costs
 *    pointwise work plus at most one GEMM.
 * 2. Modes. Each stage is KEEP, SELECT, CKPT or DROP, or under `--compress
 *    bf16` BF16 (passes.h); policies pick modes
 *    (`all`: every stage CKPT; `every N`/`sqrt`: CKPT every N-th, DROP the
 *    rest; `budget`: a dynamic program over the stage model (exact up to
 *    size limits, see stage_model_solve), checked
 *    against the true arena peak). Modes become one STORE/RECOMPUTE bit per
 *    forward value; store()/recompute() pins in the model file override it.
 * 3. Weaving. The backward graph is rebuilt with a clone of every recomputed
 *    value placed right before its first backward reader (recursively
 *    cloning recomputed inputs). Clones run the very same kernels on the same
 *    values, so any plan trains to bitwise the same weights as `off` — but
 *    under --compress bf16, where values may be stored in bf16, rounded once
 *    in forward (to_bf16, placed right after the value) and widened where
 *    backward first reads them (from_bf16, woven as a recompute is), and
 *    recomputed GEMMs round their operands to bf16 (Node.rounded). The memory plan
 *    of the woven graph is the planned peak. */
#include "internal.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ stages */

/* A GEMM or convolution (handed to a library) or another op with many FLOPs per element it
 * touches: worth storing its output rather than recomputing it. */
static bool is_heavy(const Graph *g, const Node *n) {
  if (op_calls_library(n->op)) return true;
  double elements = (double)shape_numel(&n->shape);
  for (int k = 0; k < n->nin; k++) elements += (double)shape_numel(&g->nodes[n->in[k]].shape);
  return op_info(n->op)->flops(g, n) >= 64 * elements;
}

static bool computed(const Graph *g, const bool *live, int v) { return live[v] && !is_leaf(&g->nodes[v]); }

/* Whether a plan's copy of forward node n rounds its GEMM's operands to
 * bf16 (Node.rounded): every GEMM it recomputes, when the plan rounds. */
static bool recomputed_rounded(bool rounds, const Node *n) {
  return rounds && op_info(n->op)->op_class == OPC_GEMM;
}

/* Predicted seconds of recomputing forward node n. */
static double recompute_seconds(const Plan *pl, const Graph *g, const Node *n) {
  Node copy = *n;
  copy.rounded = recomputed_rounded(pl->rounded, n);
  return node_seconds_counted(g, &copy, pl->loop_work[n->id], &pl->profile);
}

/* cut[v]: no forward edge u -> w with u < v < w among computed values. */
static bool *find_cuts(const Graph *g, const bool *live) {
  int nf = g->n_forward;
  int *last_use = xmalloc((size_t)nf * sizeof *last_use);
  for (int v = 0; v < nf; v++) last_use[v] = v;
  for (int w = 0; w < nf; w++) {
    if (!computed(g, live, w)) continue;
    for (int k = 0; k < g->nodes[w].nin; k++) last_use[g->nodes[w].in[k]] = w;
  }
  bool *cut = xcalloc((size_t)nf, sizeof *cut);
  int reach = -1; /* the furthest forward reader of any computed value before v */
  for (int v = 0; v < nf; v++) {
    if (!computed(g, live, v)) continue;
    cut[v] = reach <= v;
    if (last_use[v] > reach) reach = last_use[v];
  }
  free(last_use);
  return cut;
}

/* Fills pl->stage and pl->boundary; returns the number of stages. */
static int assign_stages(Plan *pl, const Graph *g, const bool *live) {
  bool *cut = find_cuts(g, live);
  int closed = 0, last = -1;
  bool heavy = false;
  for (int v = 0; v < g->n_forward; v++) {
    if (!computed(g, live, v)) continue;
    last = v;
    pl->stage[v] = closed + 1;
    heavy |= is_heavy(g, &g->nodes[v]);
    if (cut[v] && heavy) { /* close the stage at this piece's end */
      pl->boundary[v] = true;
      closed++;
      heavy = false;
    }
  }
  free(cut);
  /* What follows the last heavy piece is the last stage; the last computed
   * value is always a cut. */
  if (last >= 0 && !pl->boundary[last]) pl->boundary[last] = true, closed++;
  return closed;
}

/* ----------------------------------------------------------- stage model */

static bool *read_by_backward(const Graph *g) {
  bool *read = xcalloc((size_t)g->n_forward, sizeof *read);
  for (int b = g->n_forward; b < g->n; b++)
    for (int k = 0; k < g->nodes[b].nin; k++)
      if (g->nodes[b].in[k] < g->n_forward) read[g->nodes[b].in[k]] = true;
  return read;
}

/* inner_bytes of every stage, from the liveness of the program without
 * recompute: at each backward step (numbered from 0), the bytes of the
 * stage's kept values still to be read plus every gradient alive then. A
 * stage's backward steps are contiguous (autodiff emits them together). */
static void measure_inner(Plan *pl, const Graph *g, const bool *live, const bool *kept) {
  int steps = 0, nf = g->n_forward;
  int *step_of = xmalloc((size_t)g->n * sizeof *step_of), *last = xmalloc((size_t)g->n * sizeof *last);
  for (int v = 0; v < g->n; v++) step_of[v] = -1, last[v] = -1;
  for (int b = nf; b < g->n; b++)
    if (live[b] && !is_leaf(&g->nodes[b])) step_of[b] = steps++;
  for (int b = nf; b < g->n; b++)
    for (int k = 0; step_of[b] >= 0 && k < g->nodes[b].nin; k++) last[g->nodes[b].in[k]] = step_of[b];
  int n = pl->model.n;
  int *first_step = xmalloc((size_t)(n + 1) * sizeof *first_step), *last_step = xcalloc((size_t)n + 1, sizeof(int));
  for (int s = 0; s <= n; s++) first_step[s] = steps;
  for (int b = nf; b < g->n; b++) {
    if (step_of[b] < 0 || g->nodes[b].origin < 0) continue;
    int s = pl->stage[g->nodes[b].origin];
    if (step_of[b] < first_step[s]) first_step[s] = step_of[b];
    if (step_of[b] > last_step[s]) last_step[s] = step_of[b];
  }
  int64_t *alive = xcalloc((size_t)steps + 1, sizeof *alive); /* a difference array */
  for (int b = nf; b < g->n; b++) /* gradients in flight */
    if (step_of[b] >= 0 && g->nodes[b].grad_of_param < 0) {
      int64_t bytes = (int64_t)align_up(node_bytes(&g->nodes[b]));
      alive[step_of[b]] += bytes;
      alive[(last[b] > step_of[b] ? last[b] : step_of[b]) + 1] -= bytes;
    }
  for (int v = 0; v < nf; v++) { /* kept values, over their own stage's steps */
    int s = pl->stage[v];
    if (!kept[v] || s == 0 || first_step[s] >= steps) continue;
    int end = last[v] < last_step[s] ? last[v] : last_step[s];
    if (end < first_step[s]) continue;
    int64_t bytes = (int64_t)align_up(node_bytes(&g->nodes[v]));
    alive[first_step[s]] += bytes;
    alive[end + 1] -= bytes;
  }
  int64_t now = 0;
  for (int t = 0, s = n; t < steps; t++) {
    now += alive[t];
    while (s > 1 && t > last_step[s] && first_step[s - 1] <= t) s--; /* stages run n..1 */
    if (t >= first_step[s] && t <= last_step[s] && (uint64_t)now > pl->model.inner_bytes[s])
      pl->model.inner_bytes[s] = (uint64_t)now;
  }
  free(alive), free(first_step), free(last_step), free(step_of), free(last);
}

/* The values a SELECT stage recomputes (selective recomputation, as
 * Megatron's, per value): each value its backward reads that costs no more
 * per byte to remake than checkpointing its stage does, where remaking it
 * takes its own kernel and those of the values of its stage that forward()
 * made and dropped on the way (a bias add's GEMM, attention's scores) —
 * what it reads otherwise stays stored or is remade so itself. Those
 * dropped values are remade too (marked cheap; they were never stored).
 * Never a boundary, a pinned value, a view, a runtime call (the loss head),
 * the loss or the prediction. */
static void find_cheap(Plan *pl, const Graph *g, const bool *live, const bool *kept) {
  const StageModel *sm = &pl->model;
  double *cost = xmalloc((size_t)g->n_forward * sizeof *cost); /* < 0: not remade */
  for (int v = 0; v < g->n_forward; v++) {
    const Node *n = &g->nodes[v];
    int s = pl->stage[v];
    OpClass cls = op_info(n->op)->op_class;
    cost[v] = -1;
    if (!computed(g, live, v) || pl->boundary[v] || n->pin != PIN_NONE || v == g->loss ||
        v == g->predict || cls == OPC_VIEW || cls == OPC_CALL)
      continue;
    double c = recompute_seconds(pl, g, n);
    for (int k = 0; k < n->nin && c >= 0; k++) {
      int u = n->in[k];
      if (is_leaf(&g->nodes[u]) || kept[u]) continue;
      c = pl->stage[u] == s && cost[u] >= 0 ? c + cost[u] : -1;
    }
    cost[v] = c;
  }
  int *stack = xmalloc((size_t)g->n_forward * sizeof *stack);
  for (int v = 0; v < g->n_forward; v++) {
    int s = pl->stage[v];
    if (!kept[v] || cost[v] < 0 || sm->keep_bytes[s] <= sm->boundary_bytes[s]) continue;
    double stage_per_byte =
        sm->interior_seconds[s] / (double)(sm->keep_bytes[s] - sm->boundary_bytes[s]);
    if (cost[v] / (double)align_up(node_bytes(&g->nodes[v])) > stage_per_byte) continue;
    int depth = 0; /* v and the dropped values it is remade from, each once */
    pl->cheap[v] = true;
    stack[depth++] = v;
    while (depth > 0) {
      const Node *n = &g->nodes[stack[--depth]];
      for (int k = 0; k < n->nin; k++) {
        int u = n->in[k];
        if (is_leaf(&g->nodes[u]) || kept[u] || pl->cheap[u]) continue;
        pl->cheap[u] = true;
        stack[depth++] = u;
      }
    }
  }
  free(stack);
  free(cost);
}

/* Whether backward node n reads its input k without harm in bf16 (one
 * rounding, relative error 2^-9): as an operand of a product (a GEMM's, as
 * bf16 autocast rounds it; mul's), a sign (relu's gradient reads y > 0,
 * which rounding keeps), or the value a smooth activation's or a softmax's
 * gradient is scaled by (gelu, silu at x; tanh, sigmoid, softmax at y,
 * bounded). Never where rounding is amplified: layernorm's gradient
 * subtracts the mean, log-softmax's and cross-entropy's exponentiate,
 * maxpool's picks a maximum that rounding can tie. */
static bool reads_bf16(const Node *n, int k) {
  switch (n->op) {
  case OP_MATMUL: case OP_BMM: case OP_MUL:
    return true;
  case OP_RELU_GRAD: case OP_GELU_GRAD: case OP_SILU_GRAD: case OP_TANH_GRAD:
  case OP_SIGMOID_GRAD: case OP_SOFTMAX_GRAD: case OP_CAUSAL_SOFTMAX_GRAD:
  case OP_MASKED_SOFTMAX_GRAD:
    return k == 0; /* x or y; never dy */
  default:
    return false;
  }
}

/* The values a BF16 stage stores in bf16: f32 values its backward reads,
 * every backward reader reading them as reads_bf16 allows, read by no
 * view; never a boundary (later stages are recomputed from it exactly),
 * a pinned value, the loss or the prediction. */
static void find_packable(Plan *pl, const Graph *g, const bool *live, const bool *kept) {
  int nf = g->n_forward;
  bool *refused = xcalloc((size_t)nf, sizeof *refused);
  for (int b = 0; b < g->n; b++) {
    const Node *n = &g->nodes[b];
    bool view = b < nf && op_info(n->op)->op_class == OPC_VIEW;
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] < nf && (view || (b >= nf && !reads_bf16(n, k)))) refused[n->in[k]] = true;
  }
  for (int v = 0; v < nf; v++) {
    const Node *n = &g->nodes[v];
    pl->packable[v] = computed(g, live, v) && kept[v] && !refused[v] && !pl->boundary[v] &&
                      n->dtype == DT_F32 && n->pin == PIN_NONE && v != g->loss && v != g->predict &&
                      op_info(n->op)->op_class != OPC_VIEW && op_info(n->op)->op_class != OPC_CALL;
  }
  free(refused);
}

/* Rounding bytes of f32 to bf16 in forward and widening them back in
 * backward: each pass reads and writes 1.5x bytes in all. */
static double packing_seconds(uint64_t bytes, const MachineProfile *m) {
  return 2 * (memory_seconds(1.5 * (double)bytes, m) + m->kernel_overhead);
}

static void build_model(Plan *pl, const Graph *g, const bool *live, uint64_t fixed) {
  StageModel *sm = &pl->model;
  int n = sm->n;
  sm->keep_bytes = xcalloc((size_t)n + 1, sizeof(uint64_t));
  sm->boundary_bytes = xcalloc((size_t)n + 1, sizeof(uint64_t));
  sm->free_bytes = xcalloc((size_t)n + 1, sizeof(uint64_t));
  sm->select_bytes = xcalloc((size_t)n + 1, sizeof(uint64_t));
  sm->select_seconds = xcalloc((size_t)n + 1, sizeof(double));
  sm->packed_bytes = xcalloc((size_t)n + 1, sizeof(uint64_t));
  sm->packed_seconds = xcalloc((size_t)n + 1, sizeof(double));
  sm->inner_bytes = xcalloc((size_t)n + 1, sizeof(uint64_t));
  sm->transient_bytes = xcalloc((size_t)n + 1, sizeof(uint64_t));
  sm->interior_seconds = xcalloc((size_t)n + 1, sizeof(double));
  sm->boundary_seconds = xcalloc((size_t)n + 1, sizeof(double));
  sm->fixed_bytes = fixed;
  bool *kept = read_by_backward(g);
  for (int v = 0; v < g->n_forward; v++) {
    if (!computed(g, live, v)) continue;
    int s = pl->stage[v];
    uint64_t bytes = align_up(node_bytes(&g->nodes[v]));
    double secs = recompute_seconds(pl, g, &g->nodes[v]);
    if (pl->boundary[v] && !kept[v]) sm->free_bytes[s] = bytes;
    kept[v] |= pl->boundary[v];
    if (kept[v]) sm->keep_bytes[s] += bytes;
    else if (bytes > sm->transient_bytes[s]) sm->transient_bytes[s] = bytes;
    if (pl->boundary[v]) {
      sm->boundary_bytes[s] = bytes;
      sm->boundary_seconds[s] = secs;
    } else {
      sm->interior_seconds[s] += secs;
    }
  }
  measure_inner(pl, g, live, kept);
  for (int s = 1; s <= n; s++) /* at least its kept values, in case its backward reads none */
    if (sm->inner_bytes[s] < sm->keep_bytes[s]) sm->inner_bytes[s] = sm->keep_bytes[s];
  find_cheap(pl, g, live, kept);
  for (int s = 1; s <= n; s++) sm->select_bytes[s] = sm->keep_bytes[s];
  for (int v = 0; v < g->n_forward; v++)
    if (pl->cheap[v]) {
      if (kept[v]) sm->select_bytes[pl->stage[v]] -= align_up(node_bytes(&g->nodes[v]));
      sm->select_seconds[pl->stage[v]] += recompute_seconds(pl, g, &g->nodes[v]);
    }
  if (pl->spec.compress) find_packable(pl, g, live, kept);
  for (int s = 1; s <= n; s++) sm->packed_bytes[s] = sm->keep_bytes[s];
  for (int v = 0; v < g->n_forward; v++)
    if (pl->packable[v]) {
      uint64_t bytes = node_bytes(&g->nodes[v]);
      sm->packed_bytes[pl->stage[v]] -= align_up(bytes) - align_up(bytes / 2);
      sm->packed_seconds[pl->stage[v]] += packing_seconds(bytes, &pl->profile);
    }
  free(kept);
}

/* What stage s stores in mode m, its boundary left out where no backward
 * reads it (boundary_charge adds it when a recompute starts from it). */
static uint64_t stored_by(const StageModel *sm, int s, StageMode m) {
  switch (m) {
  case STAGE_KEEP: return sm->keep_bytes[s] - sm->free_bytes[s];
  case STAGE_SELECT: return sm->select_bytes[s] - sm->free_bytes[s];
  case STAGE_BF16: return sm->packed_bytes[s] - sm->free_bytes[s];
  case STAGE_CKPT: return sm->boundary_bytes[s];
  case STAGE_DROP: return 0;
  }
  return 0;
}

/* Whether segment (k, j] recomputes: it drops stages, or j is CKPT. */
static bool rebuilds(int k, int j, StageMode mj) { return j > k + 1 || mj == STAGE_CKPT; }

/* Whether segment (k, j] remakes values from stage k's boundary: when it
 * recomputes, and when j is SELECT (its cheap values may start there, as
 * an MLP's bias add and activation do from the previous GEMM's output). */
static bool reads_boundary(int k, int j, StageMode mj) { return rebuilds(k, j, mj) || mj == STAGE_SELECT; }

/* What stage k, in mode mk, stores besides stored_by when the segment after
 * it remakes values from its boundary: that boundary, unless it is stored
 * anyway (CKPT, or read by backward). Position 0, the inputs: nothing. */
static uint64_t boundary_charge(const StageModel *sm, int k, StageMode mk) {
  return k > 0 && mk != STAGE_CKPT ? sm->free_bytes[k] : 0;
}

/* Model peak of the backward of segment (k, j]: stages k+1..j-1 DROP, stage j
 * KEEP, SELECT, BF16 or CKPT, with `prefix` bytes stored by stages 1..k (a
 * SELECT or BF16 stage's backward peaks as a KEEP one's: its cheap values
 * are remade there, its packed ones widened, each just before its first
 * reader). During stage s's
 * backward the kept values of the dropped stages before it are alive (rebuilt,
 * waiting for their own backward) beside its own inner peak; when the segment
 * recomputes, all its kept values and a transient are alive at once as
 * stage j's backward starts. */
static uint64_t segment_peak(const StageModel *sm, int k, int j, StageMode mj, uint64_t prefix) {
  uint64_t peak = 0, before = 0, transient = 0;
  for (int s = k + 1; s <= j; s++) {
    if (before + sm->inner_bytes[s] > peak) peak = before + sm->inner_bytes[s];
    before += sm->keep_bytes[s];
    if (sm->transient_bytes[s] > transient) transient = sm->transient_bytes[s];
  }
  if (rebuilds(k, j, mj) && before + transient > peak) peak = before + transient;
  return sm->fixed_bytes + prefix + peak;
}

uint64_t stage_model_peak(const StageModel *sm, const StageMode *modes) {
  uint64_t prefix = 0, peak = 0;
  int k = 0;
  for (int j = 1; j <= sm->n; j++) {
    if (modes[j] == STAGE_DROP && j < sm->n) continue;
    StageMode mj = modes[j] == STAGE_DROP ? STAGE_CKPT : modes[j]; /* a dropped last stage is rebuilt at once */
    if (reads_boundary(k, j, mj)) prefix += boundary_charge(sm, k, modes[k]);
    uint64_t p = segment_peak(sm, k, j, mj, prefix);
    if (p > peak) peak = p;
    prefix += stored_by(sm, j, modes[j]);
    k = j;
  }
  if (sm->fixed_bytes + prefix > peak) peak = sm->fixed_bytes + prefix; /* the end of forward */
  return peak;
}

double stage_model_seconds(const StageModel *sm, const StageMode *modes) {
  double t = 0;
  for (int s = 1; s <= sm->n; s++) {
    if (modes[s] == STAGE_SELECT) t += sm->select_seconds[s];
    if (modes[s] == STAGE_BF16) t += sm->packed_seconds[s];
    if (modes[s] == STAGE_CKPT) t += sm->interior_seconds[s];
    if (modes[s] == STAGE_DROP) t += sm->interior_seconds[s] + sm->boundary_seconds[s];
  }
  return t;
}

static void modes_every(StageMode *modes, int n, int64_t every) {
  for (int s = 1; s <= n; s++) modes[s] = s % every == 0 ? STAGE_CKPT : STAGE_DROP;
  modes[n] = STAGE_KEEP;
}

/* Chen et al.: segments of about sqrt(n) stages, only their ends stored. */
static int64_t sqrt_period(int n) {
  int64_t k = (int64_t)llround(sqrt((double)n));
  return k < 1 ? 1 : k;
}

/* Pruning that keeps the dynamic program exact. `upper`: the model time of
 * the best simple plan that fits (off, every 1..4 stages, sqrt's period),
 * which the optimum cannot exceed. A lower bound on what the stages after
 * position j still cost, given the bytes stored so far: together they may
 * store no more than the budget leaves, and each byte a stage saves against
 * KEEP costs at least the least time per byte any later stage offers (SELECT:
 * its cheap values' seconds per byte; CKPT: interior seconds per keep -
 * boundary byte; DROP: interior + boundary per keep byte). A state whose time plus that bound exceeds `upper` lies on no
 * optimal path, so dropping it changes no optimum; it is what keeps the
 * search near-linear in practice (its worst case is not). */
typedef struct {
  double upper;        /* with a margin for rounding */
  StageMode *simple;   /* the simple plan behind upper (when finite) */
  double *rate;        /* rate[j]: least seconds per byte saved, stages after j */
  uint64_t *rest_keep; /* rest_keep[j]: keep bytes of the stages after j */
  uint64_t *max_keep;  /* max_keep[j]: the largest keep of a stage after j */
} Bound;

/* The simple plan of least model time that fits (its modes in *best), or
 * INFINITY when none does. */
static double least_simple_plan(const StageModel *sm, uint64_t budget, StageMode *best) {
  int n = sm->n;
  StageMode *modes = xmalloc((size_t)(n + 1) * sizeof *modes);
  double least = INFINITY;
  for (int64_t every = 0; every <= 5; every++) { /* 0: off; 5: sqrt's period */
    for (int s = 0; s <= n; s++) modes[s] = STAGE_KEEP;
    if (every > 0) modes_every(modes, n, every == 5 ? sqrt_period(n) : every);
    double t = stage_model_seconds(sm, modes);
    if (t < least && stage_model_peak(sm, modes) <= budget) {
      least = t;
      memcpy(best, modes, (size_t)(n + 1) * sizeof *modes);
    }
  }
  free(modes);
  return least;
}

static Bound bound_new(const StageModel *sm, uint64_t budget) {
  int n = sm->n;
  Bound b = {.simple = xmalloc((size_t)(n + 1) * sizeof(StageMode)),
             .rate = xmalloc((size_t)(n + 1) * sizeof(double)),
             .rest_keep = xmalloc((size_t)(n + 1) * sizeof(uint64_t)),
             .max_keep = xmalloc((size_t)(n + 1) * sizeof(uint64_t))};
  double u = least_simple_plan(sm, budget, b.simple);
  b.upper = u + 1e-9 * u + 1e-15;
  b.rate[n] = INFINITY, b.rest_keep[n] = 0, b.max_keep[n] = 0;
  for (int j = n - 1; j >= 0; j--) {
    int s = j + 1; /* the stage that joins "after j" */
    double r = INFINITY;
    if (sm->keep_bytes[s] > sm->boundary_bytes[s])
      r = sm->interior_seconds[s] / (double)(sm->keep_bytes[s] - sm->boundary_bytes[s]);
    if (sm->keep_bytes[s] > sm->select_bytes[s])
      r = fmin(r, sm->select_seconds[s] / (double)(sm->keep_bytes[s] - sm->select_bytes[s]));
    if (sm->keep_bytes[s] > sm->packed_bytes[s])
      r = fmin(r, sm->packed_seconds[s] / (double)(sm->keep_bytes[s] - sm->packed_bytes[s]));
    if (s < n && sm->keep_bytes[s] > 0) /* the last stage is never dropped */
      r = fmin(r, (sm->interior_seconds[s] + sm->boundary_seconds[s]) / (double)sm->keep_bytes[s]);
    b.rate[j] = fmin(b.rate[j + 1], r);
    b.rest_keep[j] = b.rest_keep[j + 1] + sm->keep_bytes[s];
    b.max_keep[j] = sm->keep_bytes[s] > b.max_keep[j + 1] ? sm->keep_bytes[s] : b.max_keep[j + 1];
  }
  return b;
}

static void bound_free(Bound *b) {
  free(b->simple), free(b->rate), free(b->rest_keep), free(b->max_keep);
}

/* The bytes past the budget if every stage after j kept all: what they must save. */
static double excess_bytes(const StageModel *sm, const Bound *b, int j, uint64_t prefix,
                           uint64_t budget) {
  return (double)b->rest_keep[j] + (double)prefix + (double)sm->fixed_bytes - (double)budget;
}

static double lower_bound(const StageModel *sm, const Bound *b, int j, uint64_t prefix,
                          uint64_t budget) {
  double excess = excess_bytes(sm, b, j, prefix, budget);
  return excess <= 0 ? 0 : b->rate[j] * excess;
}

/* One partial solution of the dynamic program: stages 1..at decided, `at`
 * KEEP, SELECT, BF16 or CKPT (or 0, the inputs), every segment so far within the budget. */
typedef struct {
  int at, parent;
  StageMode mode;
  uint64_t prefix; /* bytes stored by stages 1..at */
  double seconds;
} DPState;

/* Exact over the model. What is left to decide after `at` depends on the
 * past only through the stored prefix and whether a recompute after `at`
 * would store its boundary too (boundary_charge: not when it is CKPT), so
 * each position has two fronts, one per kind (front_of), and in each a
 * state that stores no less and costs no less than another is dropped (a
 * Pareto front, kept sorted by prefix with seconds strictly falling). */
/* front[] is sorted by prefix, seconds strictly falling: c is dominated when
 * the last state storing no more than c costs no more. */
static int front_upper(const DPState *front, int n, uint64_t prefix) {
  int lo = 0, hi = n; /* first index with front[i].prefix > prefix */
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (front[mid].prefix <= prefix) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static bool dominated(const DPState *front, int n, const DPState *c) {
  int i = front_upper(front, n, c->prefix);
  return i > 0 && front[i - 1].seconds <= c->seconds;
}

/* Inserts c (not dominated) and drops the states it dominates: those after
 * it (more prefix) that cost no less. */
static void front_insert(DPState **front, int *n, int *cap, DPState c) {
  int at = front_upper(*front, *n, c.prefix);
  if (at > 0 && (*front)[at - 1].prefix == c.prefix) at--; /* same prefix, c is cheaper: replace */
  int end = at;
  while (end < *n && (*front)[end].seconds >= c.seconds) end++;
  VEC_PUSH(*front, *n, *cap, c); /* grow by one; the tail is rewritten below */
  (*n)--;
  memmove(*front + at + 1, *front + end, (size_t)(*n - end) * sizeof **front);
  (*front)[at] = c;
  *n = at + 1 + (*n - end);
}

typedef struct {
  DPState *s;
  int n, cap;
  int limit; /* thinned past 2 * limit states, to limit (see front_thin) */
} Front;

/* The limits that keep the search near-linear on large models: fronts of
 * DP_STATES / n states (at least MIN_FRONT; thinned when they pass twice
 * that), segments of at most max(MIN_SEGMENT, 2 sqrt(n)) stages (Chen's
 * segments are sqrt(n) long). A search that stays within them is exact
 * (every test chain does; a model of hundreds of identical blocks does not). */
enum { DP_STATES = 1 << 14, MIN_FRONT = 16, MIN_SEGMENT = 64 };

static int longest_segment(int n) {
  int two_roots = (int)ceil(2 * sqrt((double)n));
  return two_roots > MIN_SEGMENT ? two_roots : MIN_SEGMENT;
}

/* Thins a front to its `limit` states spread evenly over its stored bytes,
 * the least-stored (the most room for what follows) and the cheapest always
 * among them. Past this the search is no longer exact, only near-optimal:
 * the kept states span the trade-off. Should thinning and pruning together
 * lose every path, the best simple plan is the answer (search_stages).
 * Without it, a model of n identical blocks has fronts of about n states
 * (every count of stored blocks is another trade-off), so n^2 states: 1,000
 * blocks took minutes. */
static void front_thin(Front *f) {
  if (f->n <= 2 * f->limit) return;
  for (int i = 0; i < f->limit; i++)
    f->s[i] = f->s[(int)((int64_t)i * (f->n - 1) / (f->limit - 1))];
  f->n = f->limit;
}

/* The front of position j's states in mode m: those whose boundary a
 * recompute after j would still have to store, or the others. */
static Front *front_of(Front *fronts, const StageModel *sm, int j, StageMode m) {
  return &fronts[2 * j + (boundary_charge(sm, j, m) > 0)];
}

/* Offers the segment (k, j] after state `from` (index `parent` in all[]), with
 * stage j in mode m, to j's front; `extra`: k's boundary when the segment
 * recomputes from it (boundary_charge). */
static void offer(const StageModel *sm, uint64_t budget, const Bound *b, Front *fronts,
                  const DPState *from, int parent, int j, StageMode m, uint64_t seg_peak,
                  double seg_seconds, uint64_t extra) {
  if (seg_peak + from->prefix + extra > budget) return;
  Front *fj = front_of(fronts, sm, j, m);
  DPState c = {.at = j, .parent = parent, .mode = m, .prefix = from->prefix + extra + stored_by(sm, j, m),
               .seconds = from->seconds + seg_seconds};
  if (sm->fixed_bytes + c.prefix > budget ||
      c.seconds + lower_bound(sm, b, j, c.prefix, budget) > b->upper || dominated(fj->s, fj->n, &c))
    return;
  front_insert(&fj->s, &fj->n, &fj->cap, c);
  front_thin(fj);
}

/* Positions in increasing order: when position k is reached, its front is
 * final; each of its states is extended by segments (k, j] for growing j,
 * their sums built incrementally, until the dropped stages alone overflow
 * the budget (they only grow with j). */
static bool search_stages(const StageModel *sm, uint64_t budget, StageMode *modes) {
  int n = sm->n;
  Bound b = bound_new(sm, budget);
  Front *fronts = xcalloc(2 * ((size_t)n + 1), sizeof *fronts); /* two per position: front_of */
  for (int j = 0; j <= 2 * n + 1; j++)
    fronts[j].limit = n > 0 && DP_STATES / n > MIN_FRONT ? DP_STATES / n : MIN_FRONT;
  DPState *all = NULL; /* the states of positions already final; parents index it */
  int nall = 0, capall = 0;
  VEC_PUSH(fronts[0].s, fronts[0].n, fronts[0].cap, ((DPState){.at = 0, .parent = -1}));
  int longest = longest_segment(n);
  for (int k = 0; k < n; k++) {
    int base = nall;
    for (int f = 2 * k; f <= 2 * k + 1; f++)
      for (int i = 0; i < fronts[f].n; i++) VEC_PUSH(all, nall, capall, fronts[f].s[i]);
    for (int i = base; i < nall; i++) {
      DPState from = all[i];
      uint64_t charge = boundary_charge(sm, k, from.mode); /* stored if (k, j] recomputes */
      uint64_t before = 0, peak = 0, transient = 0; /* segment_peak's sums over stages k+1..j-1 */
      double dropped_seconds = 0;
      double excess = excess_bytes(sm, &b, k, from.prefix, budget);
      for (int j = k + 1; j <= n && j - k <= longest; j++) {
        if (sm->fixed_bytes + from.prefix + peak > budget) break; /* only grows with j */
        /* A bound below every state this segment can still make, which only
         * grows with j: a dropped stage costs at least rate[k] per keep byte. */
        double rest = excess - (double)before;
        if (isfinite(b.rate[k]) &&
            from.seconds + dropped_seconds + b.rate[k] * (fmax(rest, 0) - (double)b.max_keep[k]) >
                b.upper)
          break;
        uint64_t p = before + sm->inner_bytes[j] > peak ? before + sm->inner_bytes[j] : peak;
        uint64_t t = sm->transient_bytes[j] > transient ? sm->transient_bytes[j] : transient;
        uint64_t rebuilt = before + sm->keep_bytes[j] + t > p ? before + sm->keep_bytes[j] + t : p;
        uint64_t kept_peak = sm->fixed_bytes + (j > k + 1 ? rebuilt : p), extra = j > k + 1 ? charge : 0;
        offer(sm, budget, &b, fronts, &from, i, j, STAGE_KEEP, kept_peak, dropped_seconds, extra);
        if (sm->select_bytes[j] < sm->keep_bytes[j])
          offer(sm, budget, &b, fronts, &from, i, j, STAGE_SELECT, kept_peak,
                dropped_seconds + sm->select_seconds[j], charge);
        if (sm->packed_bytes[j] < sm->keep_bytes[j])
          offer(sm, budget, &b, fronts, &from, i, j, STAGE_BF16, kept_peak,
                dropped_seconds + sm->packed_seconds[j], extra);
        offer(sm, budget, &b, fronts, &from, i, j, STAGE_CKPT, sm->fixed_bytes + rebuilt,
              dropped_seconds + sm->interior_seconds[j], charge);
        before += sm->keep_bytes[j], peak = p, transient = t;
        dropped_seconds += sm->interior_seconds[j] + sm->boundary_seconds[j];
      }
    }
  }
  const DPState *best = NULL;
  for (int f = 2 * n; n > 0 && f <= 2 * n + 1; f++)
    for (int i = 0; i < fronts[f].n; i++)
      if (!best || fronts[f].s[i].seconds < best->seconds) best = &fronts[f].s[i];
  bool found = n == 0 || best;
  if (best) {
    for (int s = 1; s <= n; s++) modes[s] = STAGE_DROP;
    modes[n] = best->mode;
    for (int i = best->parent; i > 0; i = all[i].parent) modes[all[i].at] = all[i].mode;
  } else if (n > 0 && isfinite(b.upper)) { /* thinned fronts lost every path under it */
    memcpy(modes, b.simple, (size_t)(n + 1) * sizeof *modes);
    found = true;
  }
  for (int j = 0; j <= 2 * n + 1; j++) free(fronts[j].s);
  free(fronts);
  free(all);
  bound_free(&b);
  return found;
}

/* ---- long models: groups of stages ----
 * Past MAX_SEARCH_STAGES stages the search runs on groups of g consecutive
 * stages, each group one stage of a coarser model whose modes mean: KEEP,
 * all its stages KEEP; SELECT, all SELECT; BF16, all BF16; CKPT, its last
 * stage CKPT and the others DROP; DROP, all DROP. Its figures are those
 * segment_peak gives such runs (a group's inner peak is its stages' kept
 * values rebuilt in turn, as in a dropped run; every boundary counted as
 * stored: free_bytes 0), so a coarse plan's peak is never below the fine
 * plan it stands for: what fits there fits here. The search's cost then no
 * longer grows with n. */
enum { MAX_SEARCH_STAGES = 1024 };

static StageModel coarsen(const StageModel *sm, int g) {
  int n = (sm->n + g - 1) / g;
  StageModel c = {.n = n, .fixed_bytes = sm->fixed_bytes};
  c.keep_bytes = xcalloc((size_t)n + 1, sizeof(uint64_t));
  c.boundary_bytes = xcalloc((size_t)n + 1, sizeof(uint64_t));
  c.free_bytes = xcalloc((size_t)n + 1, sizeof(uint64_t)); /* 0: every boundary counted stored */
  c.select_bytes = xcalloc((size_t)n + 1, sizeof(uint64_t));
  c.select_seconds = xcalloc((size_t)n + 1, sizeof(double));
  c.packed_bytes = xcalloc((size_t)n + 1, sizeof(uint64_t));
  c.packed_seconds = xcalloc((size_t)n + 1, sizeof(double));
  c.inner_bytes = xcalloc((size_t)n + 1, sizeof(uint64_t));
  c.transient_bytes = xcalloc((size_t)n + 1, sizeof(uint64_t));
  c.interior_seconds = xcalloc((size_t)n + 1, sizeof(double));
  c.boundary_seconds = xcalloc((size_t)n + 1, sizeof(double));
  for (int s = 1; s <= sm->n; s++) {
    int G = (s - 1) / g + 1;
    bool last = s == sm->n || s % g == 0;
    if (c.keep_bytes[G] + sm->inner_bytes[s] > c.inner_bytes[G])
      c.inner_bytes[G] = c.keep_bytes[G] + sm->inner_bytes[s];
    c.keep_bytes[G] += sm->keep_bytes[s];
    c.select_bytes[G] += sm->select_bytes[s];
    c.select_seconds[G] += sm->select_seconds[s];
    c.packed_bytes[G] += sm->packed_bytes[s];
    c.packed_seconds[G] += sm->packed_seconds[s];
    if (sm->transient_bytes[s] > c.transient_bytes[G])
      c.transient_bytes[G] = sm->transient_bytes[s];
    c.interior_seconds[G] += sm->interior_seconds[s] + (last ? 0 : sm->boundary_seconds[s]);
    if (last)
      c.boundary_bytes[G] = sm->boundary_bytes[s], c.boundary_seconds[G] = sm->boundary_seconds[s];
  }
  return c;
}

static void free_stage_model(StageModel *sm) {
  free(sm->keep_bytes), free(sm->boundary_bytes), free(sm->free_bytes), free(sm->inner_bytes);
  free(sm->transient_bytes);
  free(sm->select_bytes), free(sm->select_seconds), free(sm->packed_bytes), free(sm->packed_seconds);
  free(sm->interior_seconds), free(sm->boundary_seconds);
}

/* The fine modes of coarse modes cm over groups of g stages. */
static void expand_groups(const StageMode *cm, int g, int n, StageMode *modes) {
  for (int s = 1; s <= n; s++) {
    StageMode m = cm[(s - 1) / g + 1];
    bool last = s == n || s % g == 0;
    modes[s] = m == STAGE_CKPT && !last ? STAGE_DROP : m;
  }
}

/* Long models: the search over groups, or the best simple plan of the fine
 * model when it fits and costs less. */
static bool search_groups(const StageModel *sm, uint64_t budget, StageMode *modes) {
  int n = sm->n, g = (n + MAX_SEARCH_STAGES - 1) / MAX_SEARCH_STAGES;
  StageModel c = coarsen(sm, g);
  StageMode *cm = xmalloc((size_t)(c.n + 1) * sizeof *cm),
            *simple = xmalloc((size_t)(n + 1) * sizeof *simple);
  bool found = search_stages(&c, budget, cm);
  if (found) expand_groups(cm, g, n, modes);
  double least = least_simple_plan(sm, budget, simple);
  if (isfinite(least) && (!found || least < stage_model_seconds(sm, modes))) {
    memcpy(modes, simple, (size_t)(n + 1) * sizeof *modes);
    found = true;
  }
  free(cm), free(simple);
  free_stage_model(&c);
  return found;
}

bool stage_model_solve(const StageModel *sm, uint64_t budget, StageMode *modes) {
  return sm->n <= MAX_SEARCH_STAGES ? search_stages(sm, budget, modes)
                                    : search_groups(sm, budget, modes);
}

/* --------------------------------------------------------------- policies */

/* ---------------------------------------------------------------- weaving */

typedef struct {
  const Graph *g;
  Graph *out;
  bool rounded; /* Plan.rounded */
  const bool *recompute, *packed;
  int *pack;  /* per forward id: its to_bf16 node in `out` when packed, -1 */
  int *clone; /* per forward id: its recomputed (or widened) copy in `out`, -1 */
  int *stack; /* forward_value's pending values (n_forward ids at most) */
} Weaver;

/* Whether backward reads a copy of forward value v rather than v. */
static bool remade(const Weaver *w, int v) { return w->recompute[v] || w->packed[v]; }

/* The first input of forward value v that is recomputed and has no clone
 * yet, or -1 (a packed value is widened from its bf16 copy: none). */
static int input_to_clone(const Weaver *w, int v) {
  const Node *n = &w->g->nodes[v];
  for (int k = 0; k < n->nin && !w->packed[v]; k++)
    if (remade(w, n->in[k]) && w->clone[n->in[k]] < 0) return n->in[k];
  return -1;
}

/* v's copy for backward: from_bf16 of its bf16 copy when packed, else its
 * op on its inputs' copies (a recompute). */
static int push_clone(Weaver *w, int v) {
  const Node *src = &w->g->nodes[v];
  int id;
  if (w->packed[v]) {
    id = graph_add_op(w->out, OP_FROM_BF16, &w->pack[v], 1, &(Attr){0}, src->loc, NULL);
  } else {
    Node c = *src;
    for (int k = 0; k < c.nin; k++)
      if (remade(w, c.in[k])) c.in[k] = w->clone[c.in[k]];
    c.pin = PIN_NONE;
    c.rounded = recomputed_rounded(w->rounded, src);
    id = graph_push(w->out, &c);
  }
  w->out->nodes[id].recompute_of = v;
  w->out->nodes[id].scope = src->scope;
  return id;
}

/* The id in `out` a backward node reads for forward value x: x when stored,
 * else its clone, made after the clones of its recomputed inputs, in input
 * order, depth first. A chain of recomputed values is as long as the model,
 * so the depth-first walk keeps its path on a stack of its own: each value
 * on it is an input of the one below (smaller ids upwards), so none is there
 * twice. */
static int forward_value(Weaver *w, int x) {
  if (!remade(w, x)) return x;
  if (w->clone[x] >= 0) return w->clone[x];
  int depth = 0;
  w->stack[depth++] = x;
  while (depth > 0) {
    int v = w->stack[depth - 1], next = input_to_clone(w, v);
    if (next >= 0) {
      w->stack[depth++] = next;
      continue;
    }
    w->clone[v] = push_clone(w, v);
    depth--;
  }
  return w->clone[x];
}

/* The forward graph as it was, then a to_bf16 of each packed value: still
 * forward (ids below n_forward), run right after the value it rounds
 * (program_steps), so that the value itself dies at its last forward
 * reader. Source forward ids keep their numbers. */
static void weave_forward(Weaver *w, int *map) {
  const Graph *g = w->g;
  for (int v = 0; v < g->n_forward; v++) {
    w->clone[v] = w->pack[v] = -1;
    map[v] = graph_push(w->out, &g->nodes[v]);
  }
  for (int v = 0; v < g->n_forward; v++)
    if (w->packed[v]) {
      w->pack[v] = graph_add_op(w->out, OP_TO_BF16, &v, 1, &(Attr){0}, g->nodes[v].loc, NULL);
      w->out->nodes[w->pack[v]].scope = g->nodes[v].scope;
    }
  w->out->n_forward = w->out->n;
}

static Graph *weave_recompute(const Graph *g, bool rounded, const bool *recompute,
                              const bool *packed) {
  Weaver w = {.g = g, .out = graph_copy_header(g), .rounded = rounded, .recompute = recompute, .packed = packed};
  w.clone = xmalloc((size_t)g->n_forward * sizeof *w.clone);
  w.pack = xmalloc((size_t)g->n_forward * sizeof *w.pack);
  w.stack = xmalloc((size_t)g->n_forward * sizeof *w.stack);
  int *map = xmalloc((size_t)g->n * sizeof *map);
  weave_forward(&w, map);
  for (int b = g->n_forward; b < g->n; b++) {
    Node nb = g->nodes[b];
    for (int k = 0; k < nb.nin; k++) nb.in[k] = nb.in[k] < g->n_forward ? forward_value(&w, nb.in[k]) : map[nb.in[k]];
    map[b] = graph_push(w.out, &nb);
  }
  if (g->loss_seed >= 0) w.out->loss_seed = map[g->loss_seed];
  free(map);
  free(w.clone);
  free(w.pack);
  free(w.stack);
  return w.out;
}

/* ------------------------------------------------------------------- plans */

static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A candidate is built to SCHEDULE: its peak and predicted time are known
 * there (parallel marks and buckets change neither). */
static const ProgramOptions candidate = {.last = PASS_SCHEDULE, .dump = PASS_NONE, .plain_fusion = true};

/* program_build with o, its time added to the plan's. */
static Program *timed_build(Plan *pl, const Graph *g, const ProgramOptions *o) {
  double start = seconds_now();
  Program *p = program_build(g, o);
  pl->schedule_seconds += seconds_now() - start;
  return p;
}

static uint64_t optimizer_state_bytes(const Graph *g, uint64_t param_bytes) {
  if (g->train.run.optimizer == TRC_ADAMW) return 2 * param_bytes;
  return g->train.run.momentum > 0 ? param_bytes : 0;
}

/* STORE/RECOMPUTE (and stored in bf16) per forward value from the stage
 * modes, the values kept back and the pins. */
static void decide(Plan *pl, const Graph *g, const bool *live) {
  for (int v = 0; v < g->n_forward; v++) {
    const Node *n = &g->nodes[v];
    bool rec = false;
    if (computed(g, live, v)) {
      StageMode m = pl->modes[pl->stage[v]];
      rec = m == STAGE_DROP || (m == STAGE_CKPT && !pl->boundary[v]) ||
            (m == STAGE_SELECT && pl->cheap[v]);
      rec = rec && !pl->kept_back[v];
      if (n->pin != PIN_NONE) rec = n->pin == PIN_RECOMPUTE;
      if (v == g->loss || v == g->predict) rec = false; /* the runtime reads them after forward() */
    }
    pl->recompute[v] = rec;
    pl->packed[v] = !rec && pl->packable[v] && pl->modes[pl->stage[v]] == STAGE_BF16;
  }
}

/* Adds node n's share of a step's predicted seconds, and its FLOPs, to its
 * phase's. */
static void add_time(Plan *pl, const Node *n, double seconds) {
  double flops = op_info(n->op)->flops(pl->graph, n);
  switch (node_phase(pl->graph, n)) {
  case PHASE_RECOMPUTE: pl->recompute_seconds += seconds, pl->recompute_flops += flops; break;
  case PHASE_FORWARD: pl->forward_seconds += seconds, pl->forward_flops += flops; break;
  case PHASE_BACKWARD: pl->backward_seconds += seconds, pl->backward_flops += flops; break;
  }
}

/* Every scheduled node's predicted seconds (program_node_seconds: a fused
 * kernel counted once, shared among its members) added to its phase. */
static void predict_times(Plan *pl) {
  const Program *p = pl->program;
  const Graph *w = pl->graph;
  pl->forward_seconds = pl->backward_seconds = pl->recompute_seconds = 0;
  pl->forward_flops = pl->backward_flops = pl->recompute_flops = 0;
  bool *scheduled = xcalloc((size_t)w->n, sizeof *scheduled);
  for (int i = 0; i < p->n_forward; i++) scheduled[p->forward[i]] = true;
  for (int i = 0; i < p->n_backward; i++) scheduled[p->backward[i]] = true;
  pl->update_seconds = update_seconds(p, &pl->profile);
  double *seconds = program_node_seconds(p, &pl->profile, &pl->cache_credit);
  for (int i = 0; i < w->n; i++)
    if (!is_leaf(&w->nodes[i]) && scheduled[fused_consumer(p, i)]) add_time(pl, &w->nodes[i], seconds[i]);
  free(seconds);
  free(scheduled);
}

/* Weaves the decisions into a graph and builds its program with o: kernels,
 * fusion and memory plan, so that every candidate's peak and time are those
 * of the program that would be built. */
static void realize(Plan *pl, const Graph *g, const ProgramOptions *o) {
  program_free(pl->program);
  graph_free(pl->graph);
  pl->graph = weave_recompute(g, pl->rounded, pl->recompute, pl->packed);
  pl->graph->train.checkpoint = pl->spec;
  if (pl->head_chunk) pl->graph->nodes[pl->graph->loss_head].attr.i[3] = pl->head_chunk;
  pl->program = timed_build(pl, pl->graph, o);
  pl->optimizer_bytes = optimizer_state_bytes(g, pl->program->trained_bytes);
  bool bf16 = g->train.run.precision == TRC_BF16;
  pl->bf16_bytes = bf16 ? pl->program->param_bytes / 2 : 0;
  pl->operand_bytes = bf16 ? pl->program->bf16_operand_bytes : pl->program->rounded_operand_bytes;
  pl->peak_bytes = pl->program->arena_bytes + pl->optimizer_bytes + pl->bf16_bytes + pl->operand_bytes;
  predict_times(pl);
}

/* The plan of these modes and values kept back (NULL: none), its program
 * built with o (a candidate's, or pl->build for the one chosen). */
static void apply_modes(Plan *pl, const Graph *g, const bool *live, const StageMode *modes,
                        const bool *kept_back, const ProgramOptions *o) {
  memcpy(pl->modes, modes, (size_t)(pl->model.n + 1) * sizeof *modes);
  if (kept_back) memcpy(pl->kept_back, kept_back, (size_t)pl->n_forward * sizeof *kept_back);
  else memset(pl->kept_back, 0, (size_t)pl->n_forward * sizeof *pl->kept_back);
  decide(pl, g, live);
  realize(pl, g, o);
}

/* The modes with their KEEP stages `to` (SELECT, or BF16 where a stage
 * has values to pack) in `out`. */
static void modes_kept_as(const Plan *pl, const StageMode *modes, StageMode to, StageMode *out) {
  for (int s = 1; s <= pl->model.n; s++) {
    bool changes = to == STAGE_SELECT || pl->model.packed_bytes[s] < pl->model.keep_bytes[s];
    out[s] = modes[s] == STAGE_KEEP && changes ? to : modes[s];
  }
}

static void modes_for_policy(const Plan *pl, CheckpointPolicy policy, int64_t every, StageMode *modes) {
  int n = pl->model.n;
  for (int s = 1; s <= n; s++) modes[s] = STAGE_KEEP;
  if (policy == CKPT_ALL) modes_every(modes, n, 1);
  if (policy == CKPT_EVERY) modes_every(modes, n, every);
  if (policy == CKPT_SQRT) modes_every(modes, n, sqrt_period(n));
}

/* A plan the budget search may pick: stage modes, values kept back (NULL:
 * none), whether its recomputed GEMMs round (Plan.rounded), the loss
 * head's chunk (0: the graph's), and their true figures: peak, recompute
 * seconds, and what the chunk adds to the head's predicted seconds against
 * the graph's chunk (less than 0 where it is faster). */
typedef struct {
  StageMode *modes;
  bool *kept_back;
  bool rounded;
  int64_t head_chunk;
  uint64_t peak;
  double seconds, head_seconds;
} Candidate;

/* What a candidate adds to the step: its recomputation and its head. */
static double candidate_cost(const Candidate *c) { return c->seconds + c->head_seconds; }

static void free_candidates(Candidate *c, int n) {
  for (int i = 0; i < n; i++) free(c[i].modes), free(c[i].kept_back);
  free(c);
}

/* The ladder: LADDER + 1 budgets from the least model peak of the fixed
 * policies to the largest, and BELOW more under the least, half a step
 * apart (SELECT stages may store less than any fixed policy). */
enum { LADDER = 12, BELOW = 4, RUNGS = LADDER + 1 + BELOW };

/* pl's decisions for these modes, no value kept back (no program built). */
static void decide_modes(Plan *pl, const Graph *g, const bool *live, const StageMode *modes) {
  memcpy(pl->modes, modes, (size_t)(pl->model.n + 1) * sizeof *modes);
  memset(pl->kept_back, 0, (size_t)pl->n_forward * sizeof *pl->kept_back);
  decide(pl, g, live);
}

/* Whether the plan of these modes recomputes a GEMM. */
static bool recomputes_gemm(Plan *pl, const Graph *g, const bool *live, const StageMode *modes) {
  decide_modes(pl, g, live, modes);
  for (int v = 0; v < g->n_forward; v++)
    if (pl->recompute[v] && op_info(g->nodes[v].op)->op_class == OPC_GEMM) return true;
  return false;
}

/* Adds the plan of these modes as a candidate, unless one has them already
 * (the ladder's optima often repeat a fixed policy or each other). Under
 * --compress bf16 its recomputed GEMMs round their operands, which is
 * faster but takes a buffer for them: in fp32 runs the same plan with fp32
 * GEMMs is a candidate too, so that a budget never gets a worse plan with
 * --compress bf16 than without. realize_candidates gives them figures. */
static void add_candidate(Plan *pl, const Graph *g, const bool *live, const StageMode *modes, Candidate *c, int *n) {
  size_t bytes = (size_t)(pl->model.n + 1) * sizeof *modes;
  for (int i = 0; i < *n; i++) /* stages count from 1 */
    if (memcmp(c[i].modes + 1, modes + 1, bytes - sizeof *modes) == 0) return;
  c[(*n)++] = (Candidate){.modes = memcpy(xmalloc(bytes), modes, bytes), .rounded = pl->spec.compress};
  if (pl->spec.compress && g->train.run.precision != TRC_BF16 && recomputes_gemm(pl, g, live, modes))
    c[(*n)++] = (Candidate){.modes = memcpy(xmalloc(bytes), modes, bytes), .rounded = false};
}

/* Runs fn(arg) on as many threads as the machine has cores, at most jobs,
 * this one among them; returns how many ran it, when all are done. */
static int run_on_cores(void *(*fn)(void *), void *arg, int jobs) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int helpers = cpus > jobs ? jobs - 1 : cpus > 1 ? (int)cpus - 1 : 0;
  pthread_t *thread = xmalloc((size_t)(helpers > 0 ? helpers : 1) * sizeof *thread);
  int started = 0;
  while (started < helpers && pthread_create(&thread[started], NULL, fn, arg) == 0) started++;
  fn(arg); /* with no helper this thread does all the work */
  for (int t = 0; t < started; t++) pthread_join(thread[t], NULL);
  free(thread);
  return started + 1;
}

/* ---- candidates realized before ---- */

/* A candidate's true figures depend, for one graph and profile, on its
 * modes, its values kept back, whether it rounds and whether the plan
 * compresses (which values are cheap and packable): that is its key. */
typedef struct {
  uint64_t hash;
  unsigned char *key;
  size_t bytes;
  uint64_t peak;
  double seconds;
} MemoEntry;

struct PlanMemo {
  MemoEntry *entry;
  int n, cap;
};

PlanMemo *plan_memo_new(void) { return xcalloc(1, sizeof(PlanMemo)); }

void plan_memo_free(PlanMemo *memo) {
  if (!memo) return;
  for (int i = 0; i < memo->n; i++) free(memo->entry[i].key);
  free(memo->entry);
  free(memo);
}

static unsigned char *memo_key(const Plan *pl, const Candidate *c, size_t *bytes) {
  size_t modes = (size_t)pl->model.n * sizeof *c->modes, nf = (size_t)pl->n_forward;
  size_t head = 2 + sizeof c->head_chunk;
  unsigned char *key = xcalloc(head + modes + nf, 1);
  key[0] = pl->spec.compress, key[1] = c->rounded;
  memcpy(key + 2, &c->head_chunk, sizeof c->head_chunk);
  memcpy(key + head, c->modes + 1, modes); /* stages count from 1 */
  for (size_t v = 0; c->kept_back && v < nf; v++) key[head + modes + v] = c->kept_back[v];
  *bytes = head + modes + nf;
  return key;
}

static uint64_t fnv1a(const unsigned char *p, size_t n) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* Fills c's figures from the memo; false when it has none. */
static bool memo_find(const PlanMemo *memo, const Plan *pl, Candidate *c) {
  if (!memo) return false;
  size_t bytes;
  unsigned char *key = memo_key(pl, c, &bytes);
  uint64_t hash = fnv1a(key, bytes);
  bool found = false;
  for (int i = 0; i < memo->n && !found; i++) {
    const MemoEntry *e = &memo->entry[i];
    found = e->hash == hash && e->bytes == bytes && memcmp(e->key, key, bytes) == 0;
    if (found) c->peak = e->peak, c->seconds = e->seconds;
  }
  free(key);
  return found;
}

static void memo_add(PlanMemo *memo, const Plan *pl, const Candidate *c) {
  if (!memo) return;
  MemoEntry e = {.peak = c->peak, .seconds = c->seconds};
  e.key = memo_key(pl, c, &e.bytes);
  e.hash = fnv1a(e.key, e.bytes);
  VEC_PUSH(memo->entry, memo->n, memo->cap, e);
}

/* The candidates' true figures: each woven and built to SCHEDULE by one of
 * the machine's cores, each core with a plan of its own (its decisions,
 * graph and program; the stages and the stage model shared, read only).
 * The figures, kept by index, do not depend on how many run at once.
 * Candidates the memo has are not built again. */
typedef struct {
  const Plan *pl;
  const Graph *g;
  const bool *live;
  Candidate *c;
  const int *todo; /* the indices of the candidates to realize */
  int n;
  atomic_int next;
  pthread_mutex_t lock;
  double build_seconds; /* summed over the cores */
} Realizing;

static void *candidate_realizer(void *arg) {
  Realizing *r = arg;
  Plan w = *r->pl;
  w.modes = xmalloc((size_t)(w.model.n + 1) * sizeof *w.modes);
  w.recompute = xmalloc((size_t)w.n_forward * sizeof *w.recompute);
  w.packed = xmalloc((size_t)w.n_forward * sizeof *w.packed);
  w.kept_back = xmalloc((size_t)w.n_forward * sizeof *w.kept_back);
  w.graph = NULL, w.program = NULL, w.schedule_seconds = 0;
  for (int t; (t = atomic_fetch_add(&r->next, 1)) < r->n;) {
    Candidate *c = &r->c[r->todo[t]];
    w.rounded = c->rounded;
    w.head_chunk = c->head_chunk;
    apply_modes(&w, r->g, r->live, c->modes, c->kept_back, &candidate);
    c->peak = w.peak_bytes, c->seconds = recompute_cost(w.recompute_seconds, w.cache_credit);
  }
  pthread_mutex_lock(&r->lock);
  r->build_seconds += w.schedule_seconds;
  pthread_mutex_unlock(&r->lock);
  program_free(w.program);
  graph_free(w.graph);
  free(w.modes);
  free(w.recompute);
  free(w.packed);
  free(w.kept_back);
  return NULL;
}

static void realize_candidates(Plan *pl, const Graph *g, const bool *live, Candidate *c, int n) {
  int *todo = xmalloc((size_t)(n > 0 ? n : 1) * sizeof *todo), count = 0;
  for (int i = 0; i < n; i++)
    if (!memo_find(pl->memo, pl, &c[i])) todo[count++] = i;
  Realizing r = {.pl = pl, .g = g, .live = live, .c = c, .todo = todo, .n = count};
  atomic_init(&r.next, 0);
  pthread_mutex_init(&r.lock, NULL);
  int cores = count > 0 ? run_on_cores(candidate_realizer, &r, count) : 1;
  pthread_mutex_destroy(&r.lock);
  pl->schedule_seconds += r.build_seconds / cores; /* the share of the wall time, roughly */
  for (int i = 0; i < count; i++) memo_add(pl->memo, pl, &c[todo[i]]);
  free(todo);
}

/* The stage model's optima at the RUNGS budgets of ladder_budget: each
 * solve is independent of the others, so they run on the machine's cores
 * (the largest part of planning a long model); the results, kept by index,
 * do not depend on how many run at once. */
typedef struct {
  const StageModel *sm;
  uint64_t lo, hi;
  StageMode *modes[RUNGS];
  bool found[RUNGS];
  atomic_int next; /* the next budget a solver takes */
} Ladder;

/* Budget i of the ladder: lo + i step for i <= LADDER (step = (hi - lo) /
 * LADDER), then lo - (i - LADDER) step / 2 (none below 0). */
static uint64_t ladder_budget(const Ladder *l, int i) {
  uint64_t step = (l->hi - l->lo) / LADDER, under = (uint64_t)(i - LADDER) * step / 2;
  if (i <= LADDER) return l->lo + step * (uint64_t)i;
  return l->lo > under ? l->lo - under : 0;
}

static void *ladder_solver(void *arg) {
  Ladder *l = arg;
  for (int i; (i = atomic_fetch_add(&l->next, 1)) < RUNGS;) {
    l->modes[i] = xmalloc((size_t)(l->sm->n + 1) * sizeof *l->modes[i]);
    l->found[i] = stage_model_solve(l->sm, ladder_budget(l, i), l->modes[i]);
  }
  return NULL;
}

static void solve_ladder(Ladder *l) {
  atomic_init(&l->next, 0);
  run_on_cores(ladder_solver, l, RUNGS);
}

/* The candidates do not depend on the budget, so a larger budget never gets
 * a worse plan: the fixed policies, every stage SELECT, and the model's
 * optima along a ladder of model budgets (each also with its KEEP stages
 * SELECT: the model prices a SELECT stage's backward as a KEEP one's, so
 * a plan it thinks too large may fit; under `--compress bf16` the fixed
 * policies and the optima also with their KEEP stages BF16), each woven
 * and memory-planned for real. */
/* The plan of these modes as a candidate, and under `--compress bf16` the
 * same with its KEEP stages BF16. */
static void add_candidates(Plan *pl, const Graph *g, const bool *live, const StageMode *modes,
                           Candidate *c, int *n) {
  add_candidate(pl, g, live, modes, c, n);
  if (!pl->spec.compress) return;
  StageMode *packed = xmalloc((size_t)(pl->model.n + 1) * sizeof *packed);
  modes_kept_as(pl, modes, STAGE_BF16, packed);
  add_candidate(pl, g, live, packed, c, n);
  free(packed);
}

/* Whether candidate a beats b at this budget: fitting beats not; among
 * fitting ones, less predicted time, then less peak; else less peak. */
static bool beats(const Candidate *a, const Candidate *b, uint64_t budget) {
  bool fits = a->peak <= budget, b_fits = b->peak <= budget;
  if (fits != b_fits) return fits;
  if (!fits) return a->peak < b->peak;
  double ca = candidate_cost(a), cb = candidate_cost(b);
  return ca < cb || (ca == cb && a->peak < b->peak);
}

static int best_candidate(const Candidate *c, int n, uint64_t budget) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (beats(&c[i], &c[best], budget)) best = i;
  return best;
}

/* ---- values kept back: the per-value choice ---- */

/* What keeping back each value pl recomputes would save: its own
 * recompute, and that of the recomputed values remade only on the way to
 * it (read by no backward node: a bias add's GEMM output, the scores of
 * attention's probabilities). */
static double *keep_back_savings(const Plan *pl, const Graph *g, const bool *read) {
  double *saves = xcalloc((size_t)g->n_forward, sizeof *saves);
  for (int v = 0; v < g->n_forward; v++) {
    if (!pl->recompute[v]) continue;
    const Node *n = &g->nodes[v];
    saves[v] = recompute_seconds(pl, g, n);
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] < g->n_forward && pl->recompute[n->in[k]] && !read[n->in[k]]) saves[v] += saves[n->in[k]];
  }
  return saves;
}

typedef struct {
  double per_byte;
  int v;
} KeepOrder;

static int by_saving_per_byte(const void *a, const void *b) {
  const KeepOrder *x = a, *y = b;
  if (x->per_byte != y->per_byte) return x->per_byte > y->per_byte ? -1 : 1;
  return x->v - y->v;
}

/* The values pl recomputes that could be kept back instead — read by
 * backward or a boundary; not pinned, a view, a runtime call, the loss or
 * the prediction — most seconds saved per byte first; returns how many. */
static int keep_back_order(const Plan *pl, const Graph *g, int *order) {
  bool *read = read_by_backward(g);
  double *saves = keep_back_savings(pl, g, read);
  KeepOrder *o = xmalloc((size_t)g->n_forward * sizeof *o);
  int m = 0;
  for (int v = 0; v < g->n_forward; v++) {
    const Node *n = &g->nodes[v];
    OpClass cls = op_info(n->op)->op_class;
    if (pl->recompute[v] && (read[v] || pl->boundary[v]) && n->pin == PIN_NONE && cls != OPC_VIEW &&
        cls != OPC_CALL && v != g->loss && v != g->predict)
      o[m++] = (KeepOrder){saves[v] / (double)align_up(node_bytes(n)), v};
  }
  qsort(o, (size_t)m, sizeof *o, by_saving_per_byte);
  for (int i = 0; i < m; i++) order[i] = o[i].v;
  free(o), free(saves), free(read);
  return m;
}

/* Whether candidate i is beaten in both peak and time by another with the
 * same loss head chunk (ties go to the first). Within one chunk: the
 * candidates of the graph's chunk then get the variants they get without
 * the chunk's choice, so offering it never makes a plan worse. */
static bool dominated_candidate(const Candidate *c, int n, int i) {
  for (int j = 0; j < n; j++) {
    if (c[j].head_chunk != c[i].head_chunk) continue;
    double cj = candidate_cost(&c[j]), ci = candidate_cost(&c[i]);
    bool no_worse = c[j].peak <= c[i].peak && cj <= ci;
    bool better = c[j].peak < c[i].peak || cj < ci;
    if (j != i && no_worse && (better || j < i)) return true;
  }
  return false;
}

/* Whether candidate b recomputes nothing and no candidate's head is
 * cheaper than its: no variant that keeps values back could beat it (a
 * variant keeps its candidate's head). */
static bool unbeatable(const Candidate *c, int n, int b) {
  if (c[b].seconds > 0) return false;
  for (int i = 0; i < n; i++)
    if (c[i].head_seconds < c[b].head_seconds) return false;
  return true;
}

/* How many values the variants of a candidate recomputing m keepable ones
 * keep back: 1, 2, 4, ... below m, then a quarter, half and three quarters
 * of m where not among those (a count below m that is not a power of two
 * is not listed yet, and the three differ when they are not); returns how
 * many counts. */
static int keep_back_counts(int m, int *k) {
  int n = 0;
  for (int i = 1; i < m; i *= 2) k[n++] = i;
  for (int q = 1; q <= 3; q++) {
    int i = (int)((int64_t)m * q / 4);
    if (i > 1 && (i & (i - 1))) k[n++] = i;
  }
  return n;
}

/* The per-value choice: each candidate on the front of (true peak, time)
 * that fits the budget and recomputes anything gets variants that keep
 * back the values whose remaking costs the most per byte (keep_back_order),
 * 1, 2, 4, ... of them and a quarter, half and three quarters, so that a
 * budget between two plans of stage modes gets one that spends the room
 * between them on storing what is dearest to remake. Nothing when a plan
 * that recomputes nothing, with the cheapest head, fits. A larger budget
 * offers every variant a smaller one does (the front members that fit it,
 * and more), so it still never gets a worse plan. Up to MAX_SEARCH_STAGES
 * stages (past them the stage search itself is coarse); the new candidates
 * are realized here. */
static void add_kept_back_variants(Plan *pl, const Graph *g, const bool *live, uint64_t budget,
                                   Candidate **c, int *count) {
  int base = *count, nf = g->n_forward, cap = *count;
  if (pl->model.n > MAX_SEARCH_STAGES || unbeatable(*c, base, best_candidate(*c, base, budget))) return;
  int *order = xmalloc((size_t)nf * sizeof *order), *k = xmalloc(64 * sizeof *k);
  size_t mode_bytes = (size_t)(pl->model.n + 1) * sizeof *pl->modes;
  for (int i = 0; i < base; i++) {
    if ((*c)[i].seconds <= 0 || (*c)[i].peak > budget || dominated_candidate(*c, base, i)) continue;
    decide_modes(pl, g, live, (*c)[i].modes);
    int m = keep_back_order(pl, g, order), counts = keep_back_counts(m, k);
    if (*count + counts > cap) *c = xrealloc(*c, (size_t)(cap = 2 * (*count + counts)) * sizeof **c);
    for (int j = 0; j < counts; j++) {
      bool *kept = xcalloc((size_t)nf, sizeof *kept);
      for (int t = 0; t < k[j]; t++) kept[order[t]] = true;
      (*c)[(*count)++] = (Candidate){.modes = memcpy(xmalloc(mode_bytes), (*c)[i].modes, mode_bytes),
                                     .kept_back = kept, .rounded = (*c)[i].rounded,
                                     .head_chunk = (*c)[i].head_chunk, .head_seconds = (*c)[i].head_seconds};
    }
  }
  free(order), free(k);
  realize_candidates(pl, g, live, *c + base, *count - base);
}

/* ---- the loss head's chunk: a time-memory trade ---- */

/* Chunks thinner than this are not offered: their GEMMs fall off in a way
 * the cost model does not price (GPT-2 124M's head in chunks of 32 rows
 * took 1.5 times its time in one chunk of 256, bench/RESULTS.md);
 * `--loss-head ROWS` still sets any. */
enum { OFFERED_CHUNK_LEAST = 64 };

/* The chunks the search offers besides the graph's: all rows at once, then
 * half as many, a quarter, ... down to OFFERED_CHUNK_LEAST; none unless the
 * head's chunk is the planner's to choose (--loss-head auto). Returns how
 * many. */
static int head_chunk_ladder(const Graph *g, int64_t *chunks) {
  if (g->loss_head < 0) return 0;
  HeadDims h;
  head_dims(g, &g->nodes[g->loss_head], &h);
  int n = 0;
  for (int64_t c = h.n; h.planner_chooses && n < 32; c = (c + 1) / 2) {
    if (c != h.chunk) chunks[n++] = c;
    if (c <= OFFERED_CHUNK_LEAST) break;
  }
  return n;
}

/* Each candidate on the front of (true peak, cost) again with every chunk
 * of the ladder: a smaller chunk leaves room for stored values, a larger
 * one makes fewer passes over the head's weights (pass_seconds in
 * passes/cost.c). The front does not depend on the budget, so neither do
 * these; they are realized here. */
static void add_chunk_variants(Plan *pl, const Graph *g, const bool *live, Candidate **c, int *count) {
  int64_t chunks[32];
  int ladder = head_chunk_ladder(g, chunks), base = *count;
  if (!ladder || pl->model.n > MAX_SEARCH_STAGES) return;
  double own = head_seconds_at(g, &pl->profile, pl->graph_chunk);
  size_t mode_bytes = (size_t)(pl->model.n + 1) * sizeof *pl->modes;
  for (int i = 0; i < base; i++) {
    if (dominated_candidate(*c, base, i)) continue;
    *c = xrealloc(*c, (size_t)(*count + ladder) * sizeof **c);
    for (int k = 0; k < ladder; k++)
      (*c)[(*count)++] = (Candidate){.modes = memcpy(xmalloc(mode_bytes), (*c)[i].modes, mode_bytes),
                                     .rounded = (*c)[i].rounded, .head_chunk = chunks[k],
                                     .head_seconds = head_seconds_at(g, &pl->profile, chunks[k]) - own};
  }
  realize_candidates(pl, g, live, *c + base, *count - base);
}

static Candidate *budget_candidates(Plan *pl, const Graph *g, const bool *live, int *count) {
  int n = pl->model.n;
  /* 12 fixed, all-SELECT, 3 per rung; each twice under --compress bf16 */
  Candidate *c = xcalloc(2 * (3 * RUNGS + 14), sizeof *c);
  StageMode *modes = xmalloc((size_t)(n + 1) * sizeof *modes);
  CheckpointPolicy fixed[] = {CKPT_OFF, CKPT_ALL, CKPT_SQRT};
  *count = 0;
  for (int i = 0; i < 3; i++) {
    modes_for_policy(pl, fixed[i], 0, modes);
    add_candidates(pl, g, live, modes, c, count);
  }
  for (int64_t every = 2; every <= 4; every++) {
    modes_for_policy(pl, CKPT_EVERY, every, modes);
    add_candidates(pl, g, live, modes, c, count);
  }
  for (int s = 1; s <= n; s++) modes[s] = STAGE_SELECT;
  add_candidate(pl, g, live, modes, c, count);
  /* The model's optimum at the ladder's budgets. */
  uint64_t lo = UINT64_MAX, hi = 0;
  for (int i = 0; i < *count; i++) {
    uint64_t p = stage_model_peak(&pl->model, c[i].modes);
    if (p < lo) lo = p;
    if (p > hi) hi = p;
  }
  Ladder ladder = {.sm = &pl->model, .lo = lo, .hi = hi};
  solve_ladder(&ladder);
  for (int i = 0; i < RUNGS; i++)
    if (ladder.found[i]) {
      add_candidates(pl, g, live, ladder.modes[i], c, count);
      modes_kept_as(pl, ladder.modes[i], STAGE_SELECT, modes);
      add_candidate(pl, g, live, modes, c, count);
    }
  for (int i = 0; i < RUNGS; i++) free(ladder.modes[i]);
  free(modes);
  realize_candidates(pl, g, live, c, *count);
  add_chunk_variants(pl, g, live, &c, count);
  return c;
}

static Plan *plan_prepare(const Graph *g, CheckpointSpec spec, const MachineProfile *m,
                          const ProgramOptions *o, bool **live);

/* Under --compress bf16, the best plan of the search without it, when it
 * beats c: its stage model prices recomputed GEMMs in fp32 and offers no
 * BF16 stage, so its candidates differ, and offering bf16 storage must
 * never get a slower plan. Taken over into pl (its cheap values too);
 * returns whether it was. */
static bool take_fp32_plan(Plan *pl, const Graph *g, const bool *live, const Candidate *c, uint64_t budget) {
  CheckpointSpec spec = pl->spec;
  spec.compress = false;
  bool *plain_live;
  Plan *plain = plan_prepare(g, spec, &pl->profile, NULL, &plain_live);
  plain->memo = pl->memo;
  int n;
  Candidate *c32 = budget_candidates(plain, g, plain_live, &n);
  add_kept_back_variants(plain, g, plain_live, budget, &c32, &n);
  int best = best_candidate(c32, n, budget);
  bool take = beats(&c32[best], c, budget);
  if (take) {
    memcpy(pl->cheap, plain->cheap, (size_t)pl->n_forward * sizeof *pl->cheap);
    pl->rounded = false;
    pl->head_chunk = c32[best].head_chunk;
    apply_modes(pl, g, live, c32[best].modes, c32[best].kept_back,
                c32[best].peak <= budget ? &pl->build : &candidate);
  }
  pl->schedule_seconds += plain->schedule_seconds;
  free_candidates(c32, n);
  free(plain_live);
  plan_free(plain);
  return take;
}

/* What the search minimizes, for the plan pl has built of candidate c. */
static double built_cost(const Plan *pl, const Candidate *c) {
  return recompute_cost(pl->recompute_seconds, pl->cache_credit) + c->head_seconds;
}

/* The candidates are priced built without stored fusions (`candidate`),
 * the plan with them, which can change a cost by more than a chunk of the
 * loss head wins by. So where another chunk than the graph's won
 * (--loss-head auto), the graph's chunk's best is built in full too and
 * taken where it is cheaper: offering chunks never gives a slower plan. */
static void keep_graph_chunk_if_cheaper(Plan *pl, const Graph *g, const bool *live, const Candidate *c,
                                        int n, int best, uint64_t budget) {
  int own = -1;
  for (int i = 0; i < n; i++)
    if (!c[i].head_chunk && (own < 0 || beats(&c[i], &c[own], budget))) own = i;
  const Candidate *w = &c[best];
  if (own >= 0 && c[own].peak <= budget) {
    ProgramOptions quiet = pl->build; /* a --dump-after prints the plan taken only */
    quiet.dump = PASS_NONE;
    const Candidate *pick[2] = {&c[own], &c[best]};
    double cost[2];
    for (int k = 0; k < 2; k++) {
      pl->head_chunk = pick[k]->head_chunk;
      apply_modes(pl, g, live, pick[k]->modes, pick[k]->kept_back, &quiet);
      cost[k] = pl->peak_bytes <= budget ? built_cost(pl, pick[k]) : INFINITY;
    }
    if (cost[0] < cost[1]) w = pick[0];
    else if (pl->build.dump == PASS_NONE) return; /* pl is c[best], built as it would be */
  }
  pl->head_chunk = w->head_chunk;
  apply_modes(pl, g, live, w->modes, w->kept_back, &pl->build);
}

/* The candidate of least predicted recompute time whose true peak fits;
 * when none fits, the one of least peak (for the error message). Leaves it
 * planned in pl and returns whether it fits. */
static bool search_budget(Plan *pl, const Graph *g, const bool *live, uint64_t budget) {
  int n;
  Candidate *c = budget_candidates(pl, g, live, &n);
  add_kept_back_variants(pl, g, live, budget, &c, &n);
  int best = best_candidate(c, n, budget);
  bool ok = c[best].peak <= budget;
  if (!pl->spec.compress || !take_fp32_plan(pl, g, live, &c[best], budget)) {
    pl->rounded = c[best].rounded;
    pl->head_chunk = c[best].head_chunk;
    if (ok && c[best].head_chunk)
      keep_graph_chunk_if_cheaper(pl, g, live, c, n, best, budget);
    else
      apply_modes(pl, g, live, c[best].modes, c[best].kept_back, ok ? &pl->build : &candidate);
  }
  ok = pl->peak_bytes <= budget;
  free_candidates(c, n);
  return ok;
}

static Plan *plan_new(const Graph *g, CheckpointSpec spec, const MachineProfile *m,
                      const ProgramOptions *o) {
  Plan *pl = xcalloc(1, sizeof *pl);
  pl->spec = spec;
  pl->rounded = spec.compress;
  pl->build = o ? *o : (ProgramOptions){.last = PASS_BUCKETS, .dump = PASS_NONE};
  pl->profile = *m;
  pl->n_forward = g->n_forward;
  pl->graph_chunk = g->loss_head >= 0 ? g->nodes[g->loss_head].attr.i[3] : 0;
  pl->recompute = xcalloc((size_t)g->n_forward, sizeof *pl->recompute);
  pl->stage = xcalloc((size_t)g->n_forward, sizeof *pl->stage);
  pl->boundary = xcalloc((size_t)g->n_forward, sizeof *pl->boundary);
  pl->cheap = xcalloc((size_t)g->n_forward, sizeof *pl->cheap);
  pl->packable = xcalloc((size_t)g->n_forward, sizeof *pl->packable);
  pl->packed = xcalloc((size_t)g->n_forward, sizeof *pl->packed);
  pl->kept_back = xcalloc((size_t)g->n_forward, sizeof *pl->kept_back);
  pl->loop_work = xmalloc((size_t)g->n_forward * sizeof *pl->loop_work + 1);
  for (int v = 0; v < g->n_forward; v++) pl->loop_work[v] = node_loop_work(g, &g->nodes[v]);
  return pl;
}

/* Stages and the stage model of g; modes not chosen yet. */
static Plan *plan_prepare(const Graph *g, CheckpointSpec spec, const MachineProfile *m,
                          const ProgramOptions *o, bool **live) {
  Plan *pl = plan_new(g, spec, m, o);
  *live = live_nodes(g);
  pl->model.n = assign_stages(pl, g, *live);
  pl->modes = xmalloc((size_t)(pl->model.n + 1) * sizeof *pl->modes);
  /* The fixed part of the peak: everything but the activations. */
  Program *bare = timed_build(pl, g, &(ProgramOptions){.last = PASS_STEPS, .dump = PASS_NONE});
  uint64_t optimizer = optimizer_state_bytes(g, bare->trained_bytes);
  build_model(pl, g, *live, bare->activation_offset + optimizer);
  program_free(bare);
  return pl;
}

/* The chosen plan: its program carries the prediction to the trainer. */
static Plan *plan_finish(Plan *pl, bool *live) {
  free(live);
  program_predict(pl->program, &pl->profile);
  return pl;
}

Plan *plan_fitting(const Graph *g, CheckpointSpec spec, const MachineProfile *m,
                   const ProgramOptions *o, uint64_t *least_peak, PlanMemo *memo) {
  bool *live;
  Plan *pl = plan_prepare(g, spec, m, o, &live);
  pl->memo = memo;
  if (spec.policy == CKPT_BUDGET || spec.policy == CKPT_AUTO) {
    if (!search_budget(pl, g, live, spec.budget)) {
      *least_peak = pl->peak_bytes;
      free(live);
      plan_free(pl);
      return NULL;
    }
  } else {
    StageMode *modes = xmalloc((size_t)(pl->model.n + 1) * sizeof *modes);
    modes_for_policy(pl, spec.policy, spec.every, modes);
    if (spec.compress) /* a fixed policy stores what it keeps in bf16 where it may */
      modes_kept_as(pl, modes, STAGE_BF16, modes);
    apply_modes(pl, g, live, modes, NULL, &pl->build);
    free(modes);
  }
  return plan_finish(pl, live);
}

Plan *plan_checkpoints(const Graph *g, CheckpointSpec spec, const MachineProfile *m,
                       const ProgramOptions *o, Diag *diag) {
  uint64_t least;
  Plan *pl = plan_fitting(g, spec, m, o, &least, NULL);
  if (!pl) {
    char b1[32], b2[32];
    diag_file_error(diag, g->source_path,
                    "%s %s (%llu bytes) is below the smallest peak trainc can plan for this model: %s (%llu bytes)",
                    spec.policy == CKPT_AUTO ? "checkpoint auto: memory" : "budget", format_bytes(spec.budget, b1),
                    (unsigned long long)spec.budget, format_bytes(least, b2), (unsigned long long)least);
  }
  return pl;
}

Plan *plan_with_modes(const Graph *g, const StageMode *modes, const bool *kept_back,
                      const MachineProfile *m) {
  bool *live;
  Plan *pl = plan_prepare(g, (CheckpointSpec){.policy = CKPT_OFF}, m, NULL, &live);
  apply_modes(pl, g, live, modes, kept_back, &pl->build);
  return plan_finish(pl, live);
}

void plan_free(Plan *pl) {
  if (!pl) return;
  program_free(pl->program);
  graph_free(pl->graph);
  free_stage_model(&pl->model);
  free(pl->modes);
  free(pl->recompute);
  free(pl->stage);
  free(pl->boundary);
  free(pl->cheap);
  free(pl->packable);
  free(pl->packed);
  free(pl->kept_back);
  free(pl->loop_work);
  free(pl);
}
