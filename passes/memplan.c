/* memplan.c — liveness and placement: which nodes are live, the fixed
 * regions' layout, and the memory plan of the activations (SCHEDULE).
 *
 * Memory: each computed value lives from the step that writes it to the last
 * step that reads it (loss and prediction until the end, since the runtime
 * reads them). Values whose lifetimes overlap get disjoint byte ranges; others
 * may share. Placement is greedy (the better of first fit in order of
 * definition and largest first), so the workspace peak is known exactly at
 * compile time, and so is how far it is above the most bytes alive at once.
 * A view (reshape, slice) has no step and no storage: it reads its
 * source's, which lives as long as the view's readers. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

bool *live_nodes(const Graph *g) {
  bool *live = xcalloc((size_t)g->n, sizeof *live);
  live[g->loss] = true;
  if (g->predict >= 0) live[g->predict] = true;
  for (int i = g->n - 1; i >= 0; i--) {
    const Node *n = &g->nodes[i];
    if (n->grad_of_param >= 0) live[i] = true;
    if (!live[i]) continue;
    for (int k = 0; k < n->nin; k++) live[n->in[k]] = true;
  }
  return live;
}

/* The fixed regions: parameters, their gradients, inputs, the scalars. */
void place_leaves(Program *p) {
  const Graph *g = p->g;
  uint64_t at = 0;
  p->param_offset = 0;
  int trained = graph_trained_params(g);
  for (int i = 0; i < g->n_params; i++) {
    if (i == trained) p->trained_bytes = at;
    p->offset[g->params[i]] = at;
    at += align_up(node_bytes(&g->nodes[g->params[i]]));
  }
  if (trained == g->n_params) p->trained_bytes = at;
  p->param_bytes = at;
  p->grad_offset = at; /* the trained prefix's gradients: frozen ones have none */
  at += p->trained_bytes;
  p->input_offset = at;
  for (int i = 0; i < g->n_inputs; i++) {
    p->offset[g->inputs[i]] = at;
    at += align_up(node_bytes(&g->nodes[g->inputs[i]]));
  }
  p->input_bytes = at - p->input_offset;
  p->seed_offset = at;
  if (g->loss_seed >= 0) p->offset[g->loss_seed] = at;
  p->rng_key_offset = at + 8; /* the same 64-byte block: u64 key, f32 flag */
  p->training_offset = at + 16;
  if (g->rng_key >= 0) p->offset[g->rng_key] = p->rng_key_offset;
  if (g->training >= 0) p->offset[g->training] = p->training_offset;
  p->activation_offset = at + ARENA_ALIGN;
}

typedef struct {
  int node;
  bool scratch;          /* the node's scratch (node_scratch_bytes), not its value */
  int start, end;        /* first and last step (inclusive) */
  uint64_t offset, size; /* relative to the activation region */
} Interval;

/* The node of step s of forward ++ backward. */
static int step_node(const Program *p, int s) {
  return s < p->n_forward ? p->forward[s] : p->backward[s - p->n_forward];
}

/* Lifetimes over the step sequence forward ++ backward. */
static Interval *lifetimes(const Program *p, int *count) {
  const Graph *g = p->g;
  int steps = p->n_forward + p->n_backward;
  int *pos = xmalloc((size_t)g->n * sizeof *pos);
  for (int i = 0; i < g->n; i++) pos[i] = -1;
  for (int s = 0; s < steps; s++) pos[step_node(p, s)] = s;
  /* the values a reader's step stores (stored_by), listed per step: each
   * written at that step */
  int *first_stored = xmalloc((size_t)g->n * sizeof *first_stored), *next_stored = xmalloc((size_t)g->n * sizeof *next_stored);
  int stored = 0;
  for (int i = 0; i < g->n; i++) first_stored[i] = -1;
  for (int i = g->n - 1; i >= 0; i--) {
    if (p->stored_by[i] < 0) continue;
    int at = fused_consumer(p, i);
    pos[i] = pos[at], next_stored[i] = first_stored[at], first_stored[at] = i, stored++;
  }
  /* a value and a scratch a step, and the stored values */
  Interval *iv = xcalloc(2 * (size_t)steps + (size_t)stored + 1, sizeof *iv);
  int *slot = xmalloc((size_t)g->n * sizeof *slot);
  int n = 0;
  for (int s = 0; s < steps; s++) {
    int id = step_node(p, s);
    slot[id] = -1;
    for (int i = first_stored[id]; i >= 0; i = next_stored[i]) {
      slot[i] = n;
      iv[n++] = (Interval){.node = i, .start = s, .end = s, .size = align_up(node_bytes(&g->nodes[i]))};
    }
    if (g->nodes[id].grad_of_param >= 0) continue; /* lives in its gradient slot */
    slot[id] = n;
    iv[n++] = (Interval){.node = id, .start = s, .end = s, .size = align_up(node_bytes(&g->nodes[id]))};
    uint64_t scratch = node_scratch_bytes(g, &g->nodes[id]);
    if (scratch)
      iv[n++] = (Interval){.node = id, .scratch = true, .start = s, .end = s, .size = align_up(scratch)};
  }
  free(first_stored);
  free(next_stored);
  for (int s = 0; s < steps; s++) {
    const Node *nd = &g->nodes[step_node(p, s)];
    for (int k = 0; k < nd->nin; k++) {
      int src = p->storage_root[nd->in[k]]; /* a view keeps its source alive */
      if (pos[src] >= 0 && slot[src] >= 0) iv[slot[src]].end = s;
    }
  }
  for (int i = 0; i < g->n; i++) { /* a fused value's inputs: read where it is computed */
    if (fused_consumer(p, i) == i) continue;
    int at = pos[fused_consumer(p, i)];
    for (int k = 0; k < g->nodes[i].nin; k++) {
      int src = p->storage_root[g->nodes[i].in[k]];
      if (pos[src] >= 0 && slot[src] >= 0 && iv[slot[src]].end < at) iv[slot[src]].end = at;
    }
  }
  int outputs[2] = {g->loss, g->predict};
  for (int k = 0; k < 2; k++) {
    int src = outputs[k] >= 0 ? p->storage_root[outputs[k]] : -1;
    if (src >= 0 && pos[src] >= 0 && slot[src] >= 0) iv[slot[src]].end = steps;
  }
  free(pos);
  free(slot);
  *count = n;
  return iv;
}

/* ---- first fit ----
 * Intervals are placed in order of their first step, so the ones a new
 * interval must avoid are exactly those still alive at its first step: the
 * active set, whose byte ranges are disjoint. First fit is the lowest gap
 * between active ranges (from offset 0) that the new one fits in. The active
 * set is a treap ordered by offset, each node knowing its subtree's first
 * start, last end and widest inner gap, so finding the gap, adding and
 * removing a range are O(log n) (a scan of every placed interval was O(n^2):
 * 18 s for 100k steps). */

typedef struct {
  uint64_t lo, hi;                  /* the range [lo, hi) */
  uint64_t first, last, widest_gap; /* of its subtree */
  uint32_t priority;
  int left, right; /* -1: none */
} FitNode;

static void fit_update(FitNode *t, int x) {
  FitNode *n = &t[x];
  const FitNode *l = n->left >= 0 ? &t[n->left] : NULL, *r = n->right >= 0 ? &t[n->right] : NULL;
  n->first = l ? l->first : n->lo;
  n->last = r ? r->last : n->hi;
  n->widest_gap = 0;
  uint64_t gaps[4] = {l ? l->widest_gap : 0, r ? r->widest_gap : 0, l ? n->lo - l->last : 0,
                      r ? r->first - n->hi : 0};
  for (int i = 0; i < 4; i++)
    if (gaps[i] > n->widest_gap) n->widest_gap = gaps[i];
}

/* Splits subtree x into ranges starting below key (*below) and the rest. */
static void fit_split(FitNode *t, int x, uint64_t key, int *below, int *rest) {
  if (x < 0) {
    *below = *rest = -1;
  } else if (t[x].lo < key) {
    fit_split(t, t[x].right, key, &t[x].right, rest);
    *below = x;
    fit_update(t, x);
  } else {
    fit_split(t, t[x].left, key, below, &t[x].left);
    *rest = x;
    fit_update(t, x);
  }
}

/* Joins two subtrees, every range of a before every range of b. */
static int fit_merge(FitNode *t, int a, int b) {
  if (a < 0 || b < 0) return a < 0 ? b : a;
  if (t[a].priority > t[b].priority) {
    t[a].right = fit_merge(t, t[a].right, b);
    fit_update(t, a);
    return a;
  }
  t[b].left = fit_merge(t, a, t[b].left);
  fit_update(t, b);
  return b;
}

/* The lowest offset where `size` bytes overlap no range of the tree. Goes
 * down one path: into a subtree only when the gap is known to be there. */
static uint64_t fit_find(const FitNode *t, int root, uint64_t size) {
  uint64_t end = 0; /* where the ranges before the current subtree end */
  for (int x = root; x >= 0;) {
    const FitNode *n = &t[x];
    const FitNode *l = n->left >= 0 ? &t[n->left] : NULL, *r = n->right >= 0 ? &t[n->right] : NULL;
    if (l && (l->first - end >= size || l->widest_gap >= size)) {
      x = n->left;
      continue;
    }
    if (l) end = l->last;
    if (n->lo - end >= size) return end;
    end = n->hi;
    if (r && (r->first - end >= size || r->widest_gap >= size)) x = n->right;
    else return r ? r->last : end;
  }
  return end;
}

static uint32_t fit_priority(uint32_t i) { /* a fixed hash: the same plan every run */
  i = (i ^ 61) ^ (i >> 16);
  i *= 9;
  i ^= i >> 4;
  i *= 0x27d4eb2d;
  return i ^ (i >> 15);
}

/* Interval indices in order of last step (a counting sort: steps are small). */
static int *order_by_end(const Interval *iv, int n) {
  int max_end = 0;
  for (int i = 0; i < n; i++)
    if (iv[i].end > max_end) max_end = iv[i].end;
  int *count = xcalloc((size_t)max_end + 2, sizeof *count),
      *order = xmalloc((size_t)(n + 1) * sizeof *order);
  for (int i = 0; i < n; i++) count[iv[i].end + 1]++;
  for (int e = 0; e <= max_end; e++) count[e + 1] += count[e];
  for (int i = 0; i < n; i++) order[count[iv[i].end]++] = i;
  free(count);
  return order;
}

/* First fit of every interval (in order of first step) against the
 * intervals alive at its first step; returns the peak. */
static uint64_t place_first_fit(Interval *iv, int n) {
  FitNode *t = xmalloc((size_t)(n + 1) * sizeof *t);
  int *by_end = order_by_end(iv, n), root = -1, expired = 0;
  uint64_t peak = 0;
  for (int i = 0; i < n; i++) {
    for (; expired < n && iv[by_end[expired]].end < iv[i].start; expired++) { /* no longer alive */
      int a, gone, b;
      fit_split(t, root, iv[by_end[expired]].offset, &a, &b);
      fit_split(t, b, iv[by_end[expired]].offset + 1, &gone, &b);
      root = fit_merge(t, a, b);
    }
    uint64_t at = fit_find(t, root, iv[i].size);
    iv[i].offset = at;
    t[i] = (FitNode){.lo = at,
                     .hi = at + iv[i].size,
                     .priority = fit_priority((uint32_t)i),
                     .left = -1,
                     .right = -1};
    fit_update(t, i);
    int a, b;
    fit_split(t, root, at, &a, &b);
    root = fit_merge(t, fit_merge(t, a, i), b);
    if (at + iv[i].size > peak) peak = at + iv[i].size;
  }
  free(by_end);
  free(t);
  return peak;
}

/* ---- largest first ----
 * First fit in order of definition leaves holes: a 12.8 MB value freed
 * between two smaller ones that outlive it is no use to the next 12.8 MB
 * value. Placing the largest values first, each at the smallest gap among
 * the values already placed that it overlaps in time (best fit), packs
 * closer to the most bytes alive at any step (Pisarchyk and Lee's greedy
 * by size). It compares every pair, so it runs only on programs of up to
 * BY_SIZE_LIMIT intervals; program_plan_memory keeps the smaller plan. */
enum { BY_SIZE_LIMIT = 1024 };

static int larger_first(const void *a, const void *b) {
  const Interval *x = *(Interval *const *)a, *y = *(Interval *const *)b;
  if (x->size != y->size) return x->size > y->size ? -1 : 1;
  return x->start != y->start ? x->start - y->start : (x < y ? -1 : x > y);
}

static bool overlap_in_time(const Interval *a, const Interval *b) { return a->start <= b->end && b->start <= a->end; }

/* Where `x` goes among `placed` (sorted by offset): the smallest gap
 * between the ones it overlaps in time that it fits in, else above them. */
static uint64_t best_gap(Interval *const *placed, int n, const Interval *x) {
  uint64_t end = 0, best = UINT64_MAX, best_width = UINT64_MAX;
  for (int i = 0; i < n; i++) {
    if (!overlap_in_time(placed[i], x)) continue;
    uint64_t width = placed[i]->offset > end ? placed[i]->offset - end : 0;
    if (width >= x->size && width < best_width) best = end, best_width = width;
    if (placed[i]->offset + placed[i]->size > end) end = placed[i]->offset + placed[i]->size;
  }
  return best != UINT64_MAX ? best : end;
}

static uint64_t place_by_size(Interval *iv, int n) {
  Interval **order = xmalloc((size_t)(n + 1) * sizeof *order), **placed = xmalloc((size_t)(n + 1) * sizeof *placed);
  for (int i = 0; i < n; i++) order[i] = &iv[i];
  qsort(order, (size_t)n, sizeof *order, larger_first);
  uint64_t peak = 0;
  for (int i = 0; i < n; i++) {
    Interval *x = order[i];
    x->offset = best_gap(placed, i, x);
    if (x->offset + x->size > peak) peak = x->offset + x->size;
    int at = i; /* keep `placed` sorted by offset */
    while (at > 0 && placed[at - 1]->offset > x->offset) at--;
    memmove(placed + at + 1, placed + at, (size_t)(i - at) * sizeof *placed);
    placed[at] = x;
  }
  free(order);
  free(placed);
  return peak;
}

/* The smaller of the two placements (first fit on a tie: it is the one
 * larger programs get); largest first is not tried where first fit already
 * needs no more than the most bytes alive at one step. */
static uint64_t place(Interval *iv, int n, uint64_t most_alive) {
  uint64_t first_fit = place_first_fit(iv, n);
  if (n > BY_SIZE_LIMIT || first_fit == most_alive) return first_fit;
  Interval *by_size = xmalloc((size_t)(n + 1) * sizeof *by_size);
  memcpy(by_size, iv, (size_t)n * sizeof *iv);
  uint64_t sized = place_by_size(by_size, n);
  if (sized < first_fit) memcpy(iv, by_size, (size_t)n * sizeof *iv);
  free(by_size);
  return sized < first_fit ? sized : first_fit;
}

/* The most bytes alive at one step: no placement needs fewer. */
static uint64_t most_alive(const Interval *iv, int n) {
  int steps = 0;
  for (int i = 0; i < n; i++)
    if (iv[i].end + 1 > steps) steps = iv[i].end + 1;
  int64_t *change = xcalloc((size_t)steps + 1, sizeof *change); /* bytes born less bytes dead, per step */
  for (int i = 0; i < n; i++) change[iv[i].start] += (int64_t)iv[i].size, change[iv[i].end + 1] -= (int64_t)iv[i].size;
  uint64_t alive = 0, most = 0;
  for (int s = 0; s < steps; s++) {
    alive += (uint64_t)change[s];
    if (alive > most) most = alive;
  }
  free(change);
  return most;
}

/* Forward values still alive when backward() starts: what forward stores. */
static uint64_t stored_bytes(const Interval *iv, int n, int n_forward) {
  uint64_t bytes = 0;
  for (int i = 0; i < n; i++)
    if (iv[i].start < n_forward && iv[i].end >= n_forward) bytes += iv[i].size;
  return bytes;
}

/* Program.bf16_operand_bytes and rounded_operand_bytes: the largest of its
 * steps' GEMMs. */
static void plan_operand_copies(Program *p) {
  const Graph *g = p->g;
  p->bf16_operand_bytes = p->rounded_operand_bytes = 0;
  for (int s = 0; s < p->n_forward + p->n_backward; s++) {
    const Node *n = &g->nodes[step_node(p, s)];
    /* under precision bf16 every GEMM rounds but bmm (gemm_rounds_under_bf16) */
    bool keeps_f32 = op_info(n->op)->op_class == OPC_GEMM && !n->rounded && !gemm_rounds_under_bf16(n);
    uint64_t all = keeps_f32 ? 0 : node_bf16_operand_bytes(g, n, true);
    if (all > p->bf16_operand_bytes) p->bf16_operand_bytes = all;
    uint64_t rounded = n->rounded ? node_bf16_operand_bytes(g, n, false) : 0;
    if (rounded > p->rounded_operand_bytes) p->rounded_operand_bytes = rounded;
  }
}

void program_plan_memory(Program *p) {
  if (p->memory_planned) return;
  p->memory_planned = true;
  const Graph *g = p->g;
  int n;
  Interval *iv = lifetimes(p, &n);
  p->most_alive_bytes = most_alive(iv, n);
  p->activation_bytes = place(iv, n, p->most_alive_bytes);
  p->stored_bytes = stored_bytes(iv, n, p->n_forward);
  free(p->live_until); /* a program is planned again after FUSE's trial */
  p->live_until = xmalloc((size_t)g->n * sizeof *p->live_until);
  for (int i = 0; i < g->n; i++) p->live_until[i] = -1;
  for (int i = 0; i < n; i++) {
    if (iv[i].scratch) {
      p->scratch_offset[iv[i].node] = p->activation_offset + iv[i].offset;
      continue;
    }
    p->offset[iv[i].node] = p->activation_offset + iv[i].offset;
    p->live_until[iv[i].node] = iv[i].end;
  }
  free(iv);
  for (int i = 0; i < g->n; i++) {
    if (g->nodes[i].grad_of_param >= 0) p->offset[i] = program_grad_offset(p, g->nodes[i].grad_of_param);
    if (node_is_view(&g->nodes[i])) /* sources come first */
      p->offset[i] = p->offset[g->nodes[i].in[0]] + view_offset(g, &g->nodes[i]);
  }
  p->arena_bytes = p->activation_offset + p->activation_bytes;
  plan_operand_copies(p);
}
