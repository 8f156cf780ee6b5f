/* memplan.c — the schedule and the memory plan.
 *
 * Schedule: forward() computes, in graph order, every forward node that the
 * loss, the prediction or a gradient needs; backward() then computes the
 * backward nodes in graph order (autodiff built them in reverse topological
 * order of the forward graph, so graph order is a valid schedule).
 *
 * Memory: each computed value lives from the step that writes it to the last
 * step that reads it (loss and prediction until the end, since the runtime
 * reads them). Values whose lifetimes overlap get disjoint byte ranges; others
 * may share. Placement is greedy first-fit in order of definition, so the
 * workspace peak is known exactly at compile time. A view (reshape, slice)
 * has no step and no storage: it reads its source's, which lives as long as
 * the view's readers. */
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

static void order_steps(Program *p, const bool *live) {
  const Graph *g = p->g;
  for (int i = 0; i < g->n; i++) {
    if (!live[i] || is_leaf(&g->nodes[i]) || node_is_view(&g->nodes[i])) continue;
    if (i < g->n_forward) p->forward[p->n_forward++] = i;
    else p->backward[p->n_backward++] = i;
  }
}

static void place_leaves(Program *p) {
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
  int start, end;        /* first and last step (inclusive) */
  uint64_t offset, size; /* relative to the activation region */
} Interval;

/* Lifetimes over the step sequence forward ++ backward. */
static Interval *lifetimes(const Program *p, int *count) {
  const Graph *g = p->g;
  int steps = p->n_forward + p->n_backward;
  int *pos = xmalloc((size_t)g->n * sizeof *pos);
  for (int i = 0; i < g->n; i++) pos[i] = -1;
  for (int s = 0; s < steps; s++) pos[s < p->n_forward ? p->forward[s] : p->backward[s - p->n_forward]] = s;
  Interval *iv = xcalloc((size_t)steps + 1, sizeof *iv);
  int *slot = xmalloc((size_t)g->n * sizeof *slot);
  int n = 0;
  for (int s = 0; s < steps; s++) {
    int id = s < p->n_forward ? p->forward[s] : p->backward[s - p->n_forward];
    slot[id] = -1;
    if (g->nodes[id].grad_of_param >= 0) continue; /* lives in its gradient slot */
    slot[id] = n;
    iv[n++] = (Interval){.node = id, .start = s, .end = s, .size = align_up(node_bytes(&g->nodes[id]))};
  }
  for (int s = 0; s < steps; s++) {
    const Node *nd = &g->nodes[s < p->n_forward ? p->forward[s] : p->backward[s - p->n_forward]];
    for (int k = 0; k < nd->nin; k++) {
      int src = p->storage_root[nd->in[k]]; /* a view keeps its source alive */
      if (pos[src] >= 0 && slot[src] >= 0) iv[slot[src]].end = s;
    }
  }
  for (int i = 0; i < g->n; i++) { /* a fused value's inputs: read where it is computed */
    if (p->fused_into[i] < 0) continue;
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
static uint64_t place_intervals(Interval *iv, int n) {
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

static void lower_kernels(Program *p) {
  const Graph *g = p->g;
  p->kernels = xcalloc((size_t)g->n, sizeof(Kernel *));
  for (int s = 0; s < p->n_forward + p->n_backward; s++) {
    int id = s < p->n_forward ? p->forward[s] : p->backward[s - p->n_forward];
    const OpInfo *info = op_info(g->nodes[id].op);
    if (op_calls_library(g->nodes[id].op)) continue;
    p->kernels[id] = info->kernel(g, &g->nodes[id]); /* a loop, or a view's copy */
  }
}

/* What the backends read from the final kernels: parallel loops, eager selects. */
static void mark_kernels(Program *p) {
  for (int i = 0; i < p->g->n; i++)
    if (p->kernels[i]) {
      kernel_mark_parallel(p->kernels[i]);
      kernel_mark_eager_selects(p->g, p->kernels[i]);
    }
}

/* Forward values still alive when backward() starts: what forward stores. */
static uint64_t stored_bytes(const Interval *iv, int n, int n_forward) {
  uint64_t bytes = 0;
  for (int i = 0; i < n; i++)
    if (iv[i].start < n_forward && iv[i].end >= n_forward) bytes += iv[i].size;
  return bytes;
}

/* The steps, in order, and the leaves' places. */
static Program *schedule_steps(const Graph *g) {
  Program *p = xcalloc(1, sizeof *p);
  p->g = g;
  p->forward = xmalloc((size_t)g->n * sizeof(int));
  p->backward = xmalloc((size_t)g->n * sizeof(int));
  p->offset = xcalloc((size_t)g->n, sizeof(uint64_t));
  p->fused_into = xmalloc((size_t)g->n * sizeof *p->fused_into);
  p->storage_root = graph_storage_roots(g);
  for (int i = 0; i < g->n; i++) p->fused_into[i] = -1;
  bool *live = live_nodes(g);
  order_steps(p, live);
  free(live);
  place_leaves(p);
  return p;
}

/* Every computed value's place in the activation region, from liveness. */
static void plan_memory(Program *p) {
  const Graph *g = p->g;
  int n;
  Interval *iv = lifetimes(p, &n);
  p->activation_bytes = place_intervals(iv, n);
  p->stored_bytes = stored_bytes(iv, n, p->n_forward);
  p->live_until = xmalloc((size_t)g->n * sizeof *p->live_until);
  for (int i = 0; i < g->n; i++) p->live_until[i] = -1;
  for (int i = 0; i < n; i++) {
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
  program_bucket_gradients(p, GRAD_BUCKET_BYTES);
}

Program *program_schedule(const Graph *g) {
  Program *p = schedule_steps(g);
  plan_memory(p);
  return p;
}

static Program *build(const Graph *g, FuseScope scope) {
  Program *p = schedule_steps(g);
  lower_kernels(p);
  program_fuse(p, scope);
  mark_kernels(p);
  plan_memory(p);
  return p;
}

/* Fusion keeps a fused value's inputs alive until its reader runs, and
 * first-fit placement is sensitive to what it places, so a fused program's
 * arena may come out larger (fashion_mlp: by 2%). The planner's peak must
 * hold for what is built, so the program keeps the widest fusion of all,
 * forward-only, backward-only, none, whose arena is no larger than the
 * unfused one. */
Program *program_build(const Graph *g) {
  Program *plain = build(g, FUSE_NONE);
  if (g->train.no_fuse) return plain;
  FuseScope scopes[] = {FUSE_ALL, FUSE_FORWARD, FUSE_BACKWARD};
  for (size_t i = 0; i < sizeof scopes / sizeof scopes[0]; i++) {
    Program *fused = build(g, scopes[i]);
    if (fused->n_fused > 0 && fused->arena_bytes <= plain->arena_bytes) {
      program_free(plain);
      return fused;
    }
    program_free(fused);
  }
  return plain;
}

uint64_t program_grad_offset(const Program *p, int param) {
  return p->offset[param] - p->param_offset + p->grad_offset;
}

void program_free(Program *p) {
  if (!p) return;
  for (int i = 0; p->kernels && i < p->g->n; i++) kernel_free(p->kernels[i]);
  free(p->kernels);
  free(p->offset);
  free(p->live_until);
  free(p->fused_into);
  free(p->storage_root);
  free(p->forward);
  free(p->backward);
  free(p->buckets);
  free(p);
}
