/* cost.c — the cost model: an op's FLOPs (from the op table) and the bytes it
 * moves, turned into seconds by a machine profile. GEMMs run at the BLAS's
 * rate; loop nests at the slower of their arithmetic and their memory
 * traffic (pointwise chains are bandwidth-bound here). Reading a profile
 * file is the driver's job; this file parses its text. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

MachineProfile profile_default(void) {
  /* `trainc calibrate` on the 2-core AMD EPYC (Zen 5: AVX-512 with 512-bit
   * FMA units, AVX512_BF16, no AMX; L2 1 MiB a core, L3 32 MiB) this
   * project is developed on since 2026-12-07: the medians of nine runs 40 s
   * apart (ranges: GEMMs 3.8-5.0e11, bf16 GEMMs 7.6-9.8e11, loops
   * 1.9-2.1e11, 4.7-8.0e10 bytes/s from memory and 1.6-2.1e11 from the
   * cache, the optimizer's passes 7.2-11.9e10, 0.18-0.88 us a dispatch,
   * convolutions 3.9-5.9e11; bench/RESULTS.md). The machines before it
   * measured GEMMs at 2.0e11 (AMD Zen 4, whose 512-bit FMAs are two halves)
   * and 2.85e11 (an Intel Xeon with AMX, bf16 GEMMs 9.6e11); `trainc
   * calibrate` measures yours. */
  return (MachineProfile){.gemm_flops = 465e9, .gemm_bf16_flops = 934e9, .loop_flops = 201e9, .bandwidth = 49.0e9,
                          .kernel_overhead = 0.291e-6, .cache_bandwidth = 186e9, .cache_bytes = 16 << 20,
                          .attention_flops = 340e9, .attention_block_seconds = 3.84e-6, .conv_flops = 554e9,
                          .math_calls = 9.44e9, .window_accesses = 2.3e10, .update_bandwidth = 73.7e9,
                          .conv_bf16_flops = 1130e9, .conv_data_flops = 587e9, .conv_weight_flops = 539e9,
                          .gemm_matrix_seconds = 0.271e-6, .rng_draws = 1.07e10, .window_row_seconds = 2.84e-9,
                          .scratch_accesses = 6.45e10, .scratch_row_seconds = 0.165e-9};
}

static const struct {
  const char *key;
  size_t offset;
  bool optional; /* absent from profiles written before it was measured */
  bool zero_ok;  /* 0 is a value (a cost that may not exist), not an error */
} profile_keys[] = { /* gemm_bf16_flops second: GEMM_BF16_KEY */
    {"gemm_flops", offsetof(MachineProfile, gemm_flops), false, false},
    {"gemm_bf16_flops", offsetof(MachineProfile, gemm_bf16_flops), true, false},
    {"loop_flops", offsetof(MachineProfile, loop_flops), false, false},
    {"bandwidth", offsetof(MachineProfile, bandwidth), false, false},
    {"kernel_overhead", offsetof(MachineProfile, kernel_overhead), false, false},
    {"cache_bandwidth", offsetof(MachineProfile, cache_bandwidth), true, false},
    {"cache_bytes", offsetof(MachineProfile, cache_bytes), true, false},
    {"attention_flops", offsetof(MachineProfile, attention_flops), true, false},
    {"attention_block_seconds", offsetof(MachineProfile, attention_block_seconds), true, false},
    {"conv_flops", offsetof(MachineProfile, conv_flops), true, false},
    {"math_calls", offsetof(MachineProfile, math_calls), true, false},
    {"window_accesses", offsetof(MachineProfile, window_accesses), true, false},
    {"update_bandwidth", offsetof(MachineProfile, update_bandwidth), true, false},
    {"conv_bf16_flops", offsetof(MachineProfile, conv_bf16_flops), true, false},
    {"gemm_matrix_seconds", offsetof(MachineProfile, gemm_matrix_seconds), true, false},
    {"rng_draws", offsetof(MachineProfile, rng_draws), true, false},
    {"gemm_element_seconds", offsetof(MachineProfile, gemm_element_seconds), true, true},
    {"window_row_seconds", offsetof(MachineProfile, window_row_seconds), true, true},
    {"scratch_accesses", offsetof(MachineProfile, scratch_accesses), true, false},
    {"scratch_row_seconds", offsetof(MachineProfile, scratch_row_seconds), true, true},
    {"conv_data_flops", offsetof(MachineProfile, conv_data_flops), true, false},
    {"conv_weight_flops", offsetof(MachineProfile, conv_weight_flops), true, false},
};
enum { N_PROFILE_KEYS = sizeof profile_keys / sizeof profile_keys[0], GEMM_BF16_KEY = 1, CACHE_BANDWIDTH_KEY = 5,
       CACHE_BYTES_KEY = 6, ATTENTION_FLOPS_KEY = 7, ATTENTION_BLOCK_KEY = 8, CONV_FLOPS_KEY = 9,
       MATH_CALLS_KEY = 10, WINDOW_ACCESSES_KEY = 11, UPDATE_BANDWIDTH_KEY = 12,
       CONV_BF16_FLOPS_KEY = 13, GEMM_MATRIX_KEY = 14, RNG_DRAWS_KEY = 15,
       GEMM_ELEMENT_KEY = 16, WINDOW_ROW_KEY = 17, SCRATCH_ACCESSES_KEY = 18, SCRATCH_ROW_KEY = 19,
       CONV_DATA_KEY = 20, CONV_WEIGHT_KEY = 21 };

void profile_write(FILE *out, const MachineProfile *p) {
  fputs("# trainc machine profile (trainc calibrate); units: FLOP/s, bytes/s, seconds\n", out);
  for (int i = 0; i < N_PROFILE_KEYS; i++)
    fprintf(out, "%s = %.8g\n", profile_keys[i].key, *(const double *)((const char *)p + profile_keys[i].offset));
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
    if (!((v > 0 || (v == 0 && profile_keys[i].zero_ok)) && v < 1e30) || seen[i]) return false;
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
                 "bandwidth, kernel_overhead, cache_bandwidth, cache_bytes, attention_flops, "
                 "attention_block_seconds, conv_flops, math_calls, window_accesses, update_bandwidth, "
                 "conv_bf16_flops, gemm_matrix_seconds, rng_draws, gemm_element_seconds, window_row_seconds, scratch_accesses, scratch_row_seconds, "
                 "conv_data_flops, conv_weight_flops "
                 "(each once; gemm_element_seconds and the row seconds may be 0)");
    free(line);
    at += len + (at + len < end);
  }
  bool lines_ok = diag_count(diag) == errors;
  for (int i = 0; lines_ok && i < N_PROFILE_KEYS; i++)
    if (!seen[i] && !profile_keys[i].optional) diag_file_error(diag, f->path, "missing `%s = ...`", profile_keys[i].key);
  /* keys profiles written before they were measured lack: the default
   * profile's ratios, and its cache size */
  MachineProfile d = profile_default();
  if (!seen[GEMM_BF16_KEY]) p->gemm_bf16_flops = p->gemm_flops * d.gemm_bf16_flops / d.gemm_flops;
  if (!seen[CACHE_BANDWIDTH_KEY]) p->cache_bandwidth = p->bandwidth * d.cache_bandwidth / d.bandwidth;
  if (!seen[CACHE_BYTES_KEY]) p->cache_bytes = d.cache_bytes;
  if (!seen[ATTENTION_FLOPS_KEY]) p->attention_flops = p->gemm_flops * d.attention_flops / d.gemm_flops;
  if (!seen[ATTENTION_BLOCK_KEY]) p->attention_block_seconds = d.attention_block_seconds;
  if (!seen[CONV_FLOPS_KEY]) p->conv_flops = p->gemm_flops * d.conv_flops / d.gemm_flops;
  if (!seen[MATH_CALLS_KEY]) p->math_calls = p->loop_flops * d.math_calls / d.loop_flops;
  if (!seen[WINDOW_ACCESSES_KEY]) p->window_accesses = p->loop_flops * d.window_accesses / d.loop_flops;
  if (!seen[UPDATE_BANDWIDTH_KEY]) p->update_bandwidth = p->bandwidth * d.update_bandwidth / d.bandwidth;
  if (!seen[CONV_BF16_FLOPS_KEY]) p->conv_bf16_flops = p->conv_flops * d.conv_bf16_flops / d.conv_flops;
  if (!seen[CONV_DATA_KEY]) p->conv_data_flops = p->conv_flops; /* one rate for the three passes, as before */
  if (!seen[CONV_WEIGHT_KEY]) p->conv_weight_flops = p->conv_flops;
  if (!seen[GEMM_MATRIX_KEY]) p->gemm_matrix_seconds = d.gemm_matrix_seconds;
  if (!seen[RNG_DRAWS_KEY]) p->rng_draws = p->math_calls * d.rng_draws / d.math_calls;
  if (!seen[WINDOW_ROW_KEY]) p->window_row_seconds = d.window_row_seconds;
  if (!seen[SCRATCH_ACCESSES_KEY]) p->scratch_accesses = p->window_accesses * d.scratch_accesses / d.window_accesses;
  if (!seen[SCRATCH_ROW_KEY]) p->scratch_row_seconds = d.scratch_row_seconds;
  /* 0, as the default's: GEMMs by their FLOPs alone, as profiles before it
   * priced them (the defaults' machine never measured it) */
  if (!seen[GEMM_ELEMENT_KEY]) p->gemm_element_seconds = d.gemm_element_seconds;
  return diag_count(diag) == errors;
}

/* Bytes a kernel reads and writes: its output and inputs whole, but for an
 * embedding (a gather: it reads the table's rows it makes) and its gradient
 * (which adds into those rows of the table's gradient only). */
static double bytes_moved(const Graph *g, const Node *n) {
  const Node *in0 = &g->nodes[n->in[0]], *in1 = n->nin > 1 ? &g->nodes[n->in[1]] : NULL;
  if (n->op == OP_EMBEDDING) return 2.0 * (double)node_bytes(n) + (double)node_bytes(in1);
  if (n->op == OP_EMBEDDING_GRAD) return (double)node_bytes(in0) + 3.0 * (double)node_bytes(in1);
  double bytes = (double)node_bytes(n);
  for (int k = 0; k < n->nin; k++) bytes += (double)node_bytes(&g->nodes[n->in[k]]);
  return bytes;
}

/* The rate bytes move at when `in_play` of them must stay in the cache. */
static double bandwidth_for(double in_play, const MachineProfile *m) {
  return in_play <= m->cache_bytes ? m->cache_bandwidth : m->bandwidth;
}

double memory_seconds(double bytes, const MachineProfile *m) { return bytes / bandwidth_for(bytes, m); }

/* GEMMs with bf16 operands: --compress bf16's recomputed ones, and under
 * the train block's precision bf16 those the runtime rounds
 * (gemm_rounds_under_bf16: not bmm) */
static bool multiplies_bf16(const Graph *g, const Node *n) {
  return n->rounded || (g->train.run.precision == TRC_BF16 && gemm_rounds_under_bf16(n));
}

/* A convolution pass the runtime runs as GEMMs (conv_weights_by_gemm). */
static bool conv_by_gemm(const Graph *g, const Node *n) {
  if (op_info(n->op)->op_class != OPC_CONV) return false;
  ConvDims d;
  conv_dims(g, n, &d);
  return conv_weights_by_gemm(&d);
}

/* A convolution pass's rate on the library: each pass its own; under bf16
 * the forward's bf16 rate times the pass's fp32 ratio to the forward. */
static double conv_rate(const Graph *g, const Node *n, const MachineProfile *m) {
  ConvDims d;
  conv_dims(g, n, &d);
  double fp32 = d.pass == TRC_CONV_BACKWARD_DATA      ? m->conv_data_flops
                : d.pass == TRC_CONV_BACKWARD_WEIGHTS ? m->conv_weight_flops
                                                      : m->conv_flops;
  return g->train.run.precision == TRC_BF16 ? m->conv_bf16_flops * fp32 / m->conv_flops : fp32;
}

/* Fused attention runs a block of rows of one head at a time: its small
 * GEMMs reach a fraction of the BLAS's rate, and each block costs a few
 * microseconds besides (measured: bench/RESULTS.md). */
static double compute_seconds(const Graph *g, const Node *n, const MachineProfile *m) {
  double flops = op_info(n->op)->flops(g, n);
  if (n->op == OP_CAUSAL_ATTENTION || n->op == OP_CAUSAL_ATTENTION_GRAD) {
    AttentionDims d;
    attention_dims(g, n, &d);
    return flops / m->attention_flops + (double)attention_blocks(&d) * m->attention_block_seconds;
  }
  bool conv = op_info(n->op)->op_class == OPC_CONV && !conv_by_gemm(g, n);
  double rate = conv                        ? conv_rate(g, n, m)
                 : multiplies_bf16(g, n)    ? m->gemm_bf16_flops
                 : op_calls_library(n->op)  ? m->gemm_flops
                                            : m->loop_flops;
  /* a batched call's matrices (bmm) cost each beyond their FLOPs; one
   * matrix's call is in gemm_flops, measured on one large call; and every
   * GEMM's operands and result, element by element (gemm_elements) */
  int64_t matrices = gemm_matrices(g, n);
  return flops / rate + (matrices > 1 ? (double)matrices * m->gemm_matrix_seconds : 0) +
         gemm_elements(g, n) * m->gemm_element_seconds;
}

/* Passes a library call makes over memory besides its arithmetic, which
 * its GEMMs do not hide: a convolution's layout reorders
 * (conv_reorder_bytes), which oneDNN runs as passes of their own, at
 * memory bandwidth, or a weight gradient's shifted copies where the runtime
 * runs it as GEMMs (conv_weights_by_gemm); the loss head's passes over w and its gradient, chunk
 * by chunk (head_passes), which make its chunk a trade of time for memory
 * the budget search weighs (--loss-head auto), and its rows' passes over
 * the logits and their expf, the same whatever the chunk; and the rounding
 * of a bf16 GEMM's operands (gemm_bf16.c), which precedes its arithmetic. */
static double pass_seconds(const Graph *g, const Node *n, const MachineProfile *m) {
  if (n->op == OP_LINEAR_CROSS_ENTROPY) {
    HeadDims h;
    head_dims(g, n, &h);
    HeadPasses p = head_passes(&h);
    return p.bytes / bandwidth_for(p.in_play, m) + p.row_bytes / bandwidth_for(p.row_in_play, m) +
           p.math_calls / m->math_calls;
  }
  if (op_info(n->op)->op_class == OPC_GEMM && multiplies_bf16(g, n)) {
    /* each operand not read from the parameters' bf16 copy is rounded
     * first, in a pass of its own: 4 bytes read and 2 written a value */
    bool weights_copied = g->train.run.precision == TRC_BF16;
    return memory_seconds(3.0 * (double)node_bf16_operand_bytes(g, n, weights_copied), m);
  }
  if (op_info(n->op)->op_class != OPC_CONV) return 0;
  ConvDims d;
  conv_dims(g, n, &d);
  if (conv_weights_by_gemm(&d)) /* its shifted copies (rounded under bf16), an image's in the cache */
    return conv_im2col_bytes(&d, g->train.run.precision == TRC_BF16) / m->cache_bandwidth;
  return conv_reorder_bytes(&d) / m->bandwidth;
}

LoopWork kernel_loop_work(const Kernel *k) {
  ShortRowWork rows = kernel_short_row_work(k);
  LoopWork w = {.math_calls = kernel_math_calls(k), .random_draws = kernel_random_draws(k)};
  if (rows.scratch) w.scratch_accesses = rows.accesses, w.scratch_rows = rows.runs;
  else w.window_accesses = rows.accesses, w.window_rows = rows.runs;
  return w;
}

LoopWork node_loop_work(const Graph *g, const Node *n) {
  if (op_info(n->op)->op_class != OPC_LOOP || !op_info(n->op)->kernel) return (LoopWork){0};
  Kernel *k = op_info(n->op)->kernel(g, n);
  LoopWork w = kernel_loop_work(k);
  kernel_free(k);
  return w;
}

static double loop_work_seconds(LoopWork w, const MachineProfile *m) {
  return w.math_calls / m->math_calls + w.random_draws / m->rng_draws + w.window_accesses / m->window_accesses +
         w.window_rows * m->window_row_seconds + w.scratch_accesses / m->scratch_accesses +
         w.scratch_rows * m->scratch_row_seconds;
}

/* A kernel's arithmetic and its memory traffic: overlapped, but in a
 * batched product (bmm: attention's), whose small matrices are each a call
 * of its own that brings its operands in and then multiplies them. Alone on
 * two threads attention's products took 1.3-1.6x as long on operands just
 * evicted from the cache as on operands in it; priced as their FLOPs plus
 * their bytes, the three GPTs' bmm came within 10% of what their trainers
 * measured, from 20-23% short (bench/RESULTS.md). */
static double arithmetic_and_traffic(const Graph *g, const Node *n, double compute, double memory) {
  if (gemm_matrices(g, n) > 1) return compute + memory;
  return compute > memory ? compute : memory;
}

/* Leaves and views run no code. */
double node_seconds_counted(const Graph *g, const Node *n, LoopWork w, const MachineProfile *m) {
  if (is_leaf(n) || node_is_view(n)) return 0;
  double compute = compute_seconds(g, n, m) + loop_work_seconds(w, m);
  double memory = memory_seconds(bytes_moved(g, n), m);
  return arithmetic_and_traffic(g, n, compute, memory) + pass_seconds(g, n, m) + m->kernel_overhead;
}

double node_seconds(const Graph *g, const Node *n, const MachineProfile *m) {
  return is_leaf(n) || node_is_view(n) ? 0 : node_seconds_counted(g, n, node_loop_work(g, n), m);
}

double head_seconds_at(const Graph *g, const MachineProfile *m, int64_t chunk) {
  Node head = g->nodes[g->loss_head];
  head.attr.i[3] = chunk;
  return node_seconds(g, &head, m);
}

/* The step whose kernel computes each node: the node itself unless it was
 * fused (or is stored by a reader), else its reader's kernel step (a fused
 * value comes before its reader, so one backward sweep resolves chains). */
static int *kernel_steps(const Program *p) {
  int n = p->g->n, *step = xmalloc((size_t)n * sizeof *step);
  for (int i = n - 1; i >= 0; i--)
    step[i] = p->fused_into[i] >= 0 ? step[p->fused_into[i]] : p->stored_by[i] >= 0 ? step[p->stored_by[i]] : i;
  return step;
}

/* The bytes a member's fusion saves: a fused value's store and load, a
 * stored one's load. */
static double fusion_saves(const Program *p, int i) {
  double bytes = (double)node_bytes(&p->g->nodes[i]);
  return p->fused_into[i] >= 0 ? 2.0 * bytes : p->stored_by[i] >= 0 ? bytes : 0;
}

/* Per kernel step: its members' FLOPs, bytes (less what fusion saves:
 * fusion_saves), unfused seconds, how many there are, and the loop work of
 * its kernel (the members' statements are in it). */
typedef struct {
  double flops, bytes, plain;
  LoopWork work;
  int members;
} StepSums;

/* Node i's loop work: counted when its kernel was lowered, not lowered again. */
static LoopWork loop_work_of(const Program *p, int i) {
  return p->loop_work ? p->loop_work[i] : node_loop_work(p->g, &p->g->nodes[i]);
}

static StepSums *step_sums(const Program *p, const int *step, const MachineProfile *m) {
  const Graph *g = p->g;
  StepSums *sum = xcalloc((size_t)g->n, sizeof *sum);
  for (int i = 0; i < g->n; i++) {
    const Node *n = &g->nodes[i];
    StepSums *s = &sum[step[i]];
    if (is_leaf(n)) continue; /* no kernel, no FLOPs */
    s->flops += op_info(n->op)->flops(g, n);
    s->bytes += bytes_moved(g, n) - fusion_saves(p, i);
    LoopWork w = loop_work_of(p, i);
    s->plain += node_seconds_counted(g, n, w, m);
    s->work.math_calls += w.math_calls;
    s->work.random_draws += w.random_draws;
    s->work.window_accesses += w.window_accesses;
    s->work.window_rows += w.window_rows;
    s->work.scratch_accesses += w.scratch_accesses;
    s->work.scratch_rows += w.scratch_rows;
    s->members++;
  }
  return sum;
}

/* A kernel step's seconds when `cold` of its bytes come from memory, the
 * rest moving as memory_seconds prices the kernel's whole traffic. A loop
 * overlaps its arithmetic with all its traffic; a library call (a GEMM,
 * fused attention, the loss head) computes at the rate measured on
 * operands in the cache, and first brings the others from memory (oneDNN
 * packs its operands before it multiplies them). */
static double kernel_seconds(const Graph *g, int step, const StepSums *s, double cold,
                             const MachineProfile *m) {
  const Node *n = &g->nodes[step];
  if (is_leaf(n) || node_is_view(n)) return 0;
  double compute =
      (s->members == 1 ? compute_seconds(g, n, m) : s->flops / m->loop_flops) + loop_work_seconds(s->work, m);
  cold = cold < s->bytes ? cold : s->bytes;
  double warm = s->bytes > 0 ? memory_seconds(s->bytes, m) * (s->bytes - cold) / s->bytes : 0;
  if (s->members == 1 && op_calls_library(n->op))
    return arithmetic_and_traffic(g, n, compute, warm) + cold / m->bandwidth + pass_seconds(g, n, m) +
           m->kernel_overhead;
  double memory = warm + cold / m->bandwidth;
  return (compute > memory ? compute : memory) + m->kernel_overhead;
}

/* Where the step's kernels find their inputs. A kernel reads an input from
 * the cache when the distinct bytes that moved since it last moved, and its
 * own, fit in cache_bytes (its reuse distance in an LRU cache), else from
 * memory: the weights, and what forward stored for backward, unless the
 * whole step fits in the cache. Kernels count in the order they run,
 * forward then backward, kernel t at time t + 1; a Fenwick tree over the
 * times holds the bytes of each storage last touched then, so a distance
 * is a range sum (Bennett and Kruskal's stack distances). */
typedef struct {
  const Program *p;
  const int *step;
  int *first, *next; /* each kernel step's members: itself and the values fused into it */
  int times;         /* kernels in the step */
  double *tree;      /* Fenwick tree over times 1..times: bytes last touched then */
  int *last;         /* per storage root: when it last moved; 0: not yet */
  int *seen;         /* per storage root: the kernel that counted it last */
  bool *credited;    /* per recomputed root: a reader counted what it saves */
  /* The activation region in pages, each with the time it last moved (0:
   * not yet): where a kernel writes matters as much as what it reads (see
   * output_bytes). Only for a program with its memory planned. */
  uint64_t page_base, page_bytes;
  int n_pages, *page_time;
  bool step_fits; /* the arena fits in the cache: nothing leaves it between steps */
} Reuse;

static void tree_add(Reuse *r, int t, double bytes) {
  for (; t <= r->times; t += t & -t) r->tree[t] += bytes;
}

static double tree_sum(const Reuse *r, int t) { /* times 1..t */
  double sum = 0;
  for (; t > 0; t -= t & -t) sum += r->tree[t];
  return sum;
}

static int root_of(const Program *p, int id) { return p->storage_root ? p->storage_root[id] : id; }

static double root_bytes(const Reuse *r, int root) { return (double)node_bytes(&r->p->g->nodes[root]); }

/* An input that moves as itself: not a value fused into the kernel, nor
 * an embedding's table (bytes_moved counts the rows it touches). */
static bool moves_alone(const Reuse *r, int at, const Node *n, int k) {
  return r->step[n->in[k]] != at && n->op != OP_EMBEDDING && n->op != OP_EMBEDDING_GRAD;
}

/* Whether a storage root is still in the cache at time `now`. */
static bool cached(const Reuse *r, int root, int now, const MachineProfile *m) {
  if (!r->last[root]) return false;
  double since = tree_sum(r, now - 1) - tree_sum(r, r->last[root]);
  return since + root_bytes(r, root) <= m->cache_bytes;
}

/* Kernel `at`'s (at time `now`) input bytes from memory, and of those in
 * the cache the ones a recompute node made where the forward value it
 * remakes has left the cache (stored, as `off` does, its first reader
 * would read it from memory; the next ones from the cache). Each storage
 * root counts once. */
static void input_bytes(Reuse *r, int at, int now, const MachineProfile *m, double *cold, double *remade) {
  const Graph *g = r->p->g;
  *cold = *remade = 0;
  for (int i = r->first[at]; i >= 0; i = r->next[i]) {
    const Node *n = &g->nodes[i];
    for (int k = 0; k < n->nin; k++) {
      int root = root_of(r->p, n->in[k]);
      if (!moves_alone(r, at, n, k) || r->seen[root] == at) continue;
      r->seen[root] = at;
      double bytes = (double)node_bytes(&g->nodes[n->in[k]]);
      int of = g->nodes[root].recompute_of;
      if (!cached(r, root, now, m)) {
        *cold += bytes;
      } else if (of >= 0 && !r->credited[root] && !cached(r, root_of(r->p, of), now, m)) {
        *remade += bytes;
        r->credited[root] = true; /* stored, it would be in the cache for the next reader */
      }
    }
  }
}

/* The pages [*lo, *hi) of root's storage in the activation region; none
 * for the parameters, gradients and inputs. */
static void root_pages(const Reuse *r, int root, int *lo, int *hi) {
  *lo = *hi = 0;
  uint64_t at = r->p->offset[root], bytes = node_bytes(&r->p->g->nodes[root]);
  if (!r->n_pages || at < r->page_base || bytes == 0) return;
  uint64_t first = (at - r->page_base) / r->page_bytes, end = (at - r->page_base + bytes - 1) / r->page_bytes + 1;
  if (end > (uint64_t)r->n_pages) return;
  *lo = (int)first, *hi = (int)end;
}

/* Of the bytes a kernel at time `now` writes to root, those whose lines
 * are no longer in the cache: a store to such a line first reads it from
 * memory (write-allocate), so the write costs what a cold read does. A
 * page counts as in the cache when what moved since it last did, and the
 * root, fit in cache_bytes; a page not touched yet this step last moved in
 * the previous one, which left the cache unless the whole arena fits. */
static double cold_write_bytes(const Reuse *r, int root, int now, const MachineProfile *m) {
  int lo, hi;
  root_pages(r, root, &lo, &hi);
  if (lo == hi) return 0;
  double moved = tree_sum(r, now - 1), bytes = root_bytes(r, root);
  int cold = 0;
  for (int pg = lo; pg < hi; pg++) {
    int t = r->page_time[pg];
    bool in_cache = t ? moved - tree_sum(r, t) + bytes <= m->cache_bytes : r->step_fits;
    cold += !in_cache;
  }
  return bytes * cold / (hi - lo);
}

static void touch(Reuse *r, int root, int now) {
  if (r->last[root] == now) return;
  if (r->last[root]) tree_add(r, r->last[root], -root_bytes(r, root));
  tree_add(r, now, root_bytes(r, root));
  r->last[root] = now;
  int lo, hi;
  root_pages(r, root, &lo, &hi);
  for (int pg = lo; pg < hi; pg++) r->page_time[pg] = now;
}

/* The kernel's inputs and outputs (its own, and the values it stores for
 * later readers) have just moved, at time `now`. */
static void kernel_moved(Reuse *r, int at, int now) {
  const Graph *g = r->p->g;
  for (int i = r->first[at]; i >= 0; i = r->next[i]) {
    for (int k = 0; k < g->nodes[i].nin; k++) touch(r, root_of(r->p, g->nodes[i].in[k]), now);
    if (r->p->stored_by[i] >= 0) touch(r, root_of(r->p, i), now);
  }
  touch(r, root_of(r->p, at), now);
}

/* Pages of at least 64 KiB, at most ~4096 of them: the cost stays linear
 * in the bytes the step moves, for any arena. */
enum { MIN_PAGE_BYTES = 64 << 10, MOST_PAGES = 4096 };

static void pages_start(Reuse *r, const MachineProfile *m) {
  const Program *p = r->p;
  if (!p->memory_planned || !p->activation_bytes) return;
  uint64_t page = (p->activation_bytes + MOST_PAGES - 1) / MOST_PAGES;
  r->page_bytes = page > MIN_PAGE_BYTES ? page : MIN_PAGE_BYTES;
  r->page_base = p->activation_offset;
  r->n_pages = (int)((p->activation_bytes + r->page_bytes - 1) / r->page_bytes);
  r->page_time = xcalloc((size_t)r->n_pages, sizeof *r->page_time);
  r->step_fits = (double)p->arena_bytes <= m->cache_bytes;
}

static Reuse reuse_start(const Program *p, const int *step, const MachineProfile *m) {
  int n = p->g->n;
  Reuse r = {.p = p, .step = step, .first = xmalloc((size_t)n * sizeof(int)),
             .next = xmalloc((size_t)n * sizeof(int)), .times = p->n_forward + p->n_backward,
             .last = xcalloc((size_t)n, sizeof(int)), .seen = xmalloc((size_t)n * sizeof(int)),
             .credited = xcalloc((size_t)n, sizeof(bool))};
  r.tree = xcalloc((size_t)r.times + 1, sizeof *r.tree);
  pages_start(&r, m);
  for (int i = 0; i < n; i++) r.first[i] = r.next[i] = r.seen[i] = -1;
  for (int i = n - 1; i >= 0; i--) r.next[i] = r.first[step[i]], r.first[step[i]] = i;
  return r;
}

static void reuse_free(Reuse *r) {
  free(r->first);
  free(r->next);
  free(r->tree);
  free(r->last);
  free(r->seen);
  free(r->credited);
  free(r->page_time);
}

/* Whether a kernel step's writes overlap its arithmetic: a library call
 * that computes (a GEMM, a convolution) writes its output as it goes, and
 * its rate was measured doing so (fashion_cnn's first convolution writes
 * 12.8 MB no step had touched since the last, and took what its FLOPs
 * predict). */
static bool writes_behind_arithmetic(const Graph *g, int at, const StepSums *s) {
  return s->members == 1 && op_calls_library(g->nodes[at].op) && s->flops > 0;
}

/* Kernel `at`'s output bytes (its own, and the values it stores for later
 * readers) written to lines no longer in the cache (cold_write_bytes); a
 * root it also reads counted once, as an input. */
static double output_bytes(const Reuse *r, int at, int now, const StepSums *s, const MachineProfile *m) {
  const Graph *g = r->p->g;
  if (writes_behind_arithmetic(g, at, s)) return 0;
  double cold = 0;
  for (int i = r->first[at]; i >= 0; i = r->next[i]) {
    if (i != at && r->p->stored_by[i] < 0) continue;
    int root = root_of(r->p, i);
    if (r->seen[root] != at) cold += cold_write_bytes(r, root, now, m);
  }
  return cold;
}

/* Kernel `at`'s seconds at time `now`, its inputs found where they are;
 * adds to *credit what it would take longer, outside recomputation, had
 * the recomputed values it reads been stored. */
static double kernel_in_order(Reuse *r, int at, int now, const StepSums *s, const MachineProfile *m,
                              double *credit) {
  const Graph *g = r->p->g;
  if (is_leaf(&g->nodes[at]) || node_is_view(&g->nodes[at])) return 0; /* no code, nothing moves */
  double cold, remade;
  input_bytes(r, at, now, m, &cold, &remade);
  cold += output_bytes(r, at, now, s, m);
  double secs = kernel_seconds(g, at, s, cold, m);
  if (remade > 0 && node_phase(g, &g->nodes[at]) != PHASE_RECOMPUTE)
    *credit += kernel_seconds(g, at, s, cold + remade, m) - secs;
  kernel_moved(r, at, now);
  return secs;
}

double *program_node_seconds(const Program *p, const MachineProfile *m, double *cache_credit) {
  const Graph *g = p->g;
  int *step = kernel_steps(p);
  StepSums *sum = step_sums(p, step, m);
  double *kernel = xmalloc((size_t)g->n * sizeof *kernel), credit = 0;
  for (int i = 0; i < g->n; i++) kernel[i] = kernel_seconds(g, i, &sum[i], 0, m);
  Reuse r = reuse_start(p, step, m);
  for (int t = 0; t < r.times; t++) {
    int at = t < p->n_forward ? p->forward[t] : p->backward[t - p->n_forward];
    kernel[at] = kernel_in_order(&r, at, t + 1, &sum[at], m, &credit);
  }
  reuse_free(&r);
  double *share = xmalloc((size_t)g->n * sizeof *share);
  for (int i = 0; i < g->n; i++) {
    const StepSums *s = &sum[step[i]];
    if (s->members <= 1 || !(s->plain > 0)) {
      share[i] = s->members <= 1 ? kernel[i] : 0;
      continue;
    }
    double own = node_seconds_counted(g, &g->nodes[i], loop_work_of(p, i), m);
    share[i] = kernel[step[i]] * own / s->plain;
  }
  if (cache_credit) *cache_credit = credit;
  free(kernel);
  free(step);
  free(sum);
  return share;
}

/* Bytes each trained float moves in one optimizer step: its gradient
 * zeroed as the update reads it (4, written back), the gradient norm that
 * clipping computes (4; without clipping only the steps the log records
 * sum it, which the price of a step leaves out), the optimizer (AdamW reads
 * the weight, gradient and two moments and writes three: 28; SGD 12, 20
 * with momentum) and, under precision bf16, the copy rounded from the
 * cache and streamed to memory (2: non-temporal stores, which read no line
 * first). */
double update_bytes_per_float(const trc_train_config *run) {
  double optimizer = run->optimizer == TRC_ADAMW ? 28 : run->momentum > 0 ? 20 : 12;
  return 4 + (run->clip_norm > 0 ? 4 : 0) + optimizer + (run->precision == TRC_BF16 ? 2 : 0);
}

double update_seconds(const Program *p, const MachineProfile *m) {
  const trc_train_config *run = &p->g->train.run;
  double floats = (double)(p->trained_bytes / sizeof(float));
  double window = run->accumulate > 1 ? (double)run->accumulate : 1;
  double bytes = floats * update_bytes_per_float(run);
  return bytes / (bytes <= m->cache_bytes ? m->cache_bandwidth : m->update_bandwidth) / window;
}

StepPhase node_phase(const Graph *g, const Node *n) {
  if (n->recompute_of >= 0 || n->op == OP_TO_BF16) return PHASE_RECOMPUTE;
  return n->id < g->n_forward ? PHASE_FORWARD : PHASE_BACKWARD;
}

/* The program priced as run under `precision`: the same nodes and steps,
 * read through a copy of the graph whose run says that precision. */
static void predict_under(Program *p, const MachineProfile *m, trc_precision precision, const int *step) {
  Graph run = *p->g;
  run.train.run.precision = precision;
  Program priced = *p;
  priced.g = &run;
  double *share = program_node_seconds(&priced, m, NULL);
  free(p->kernel_seconds[precision]);
  double(*seconds)[3] = xcalloc((size_t)run.n, sizeof *seconds);
  for (int i = 0; i < run.n; i++)
    if (!is_leaf(&run.nodes[i])) seconds[step[i]][node_phase(&run, &run.nodes[i])] += share[i];
  p->kernel_seconds[precision] = seconds;
  p->update_seconds[precision] = update_seconds(&priced, m);
  free(share);
}

void program_predict(Program *p, const MachineProfile *m) {
  p->priced_calibrated = m->source != NULL;
  int *step = kernel_steps(p);
  for (int precision = 0; precision < TRC_PRECISION_COUNT; precision++)
    predict_under(p, m, (trc_precision)precision, step);
  free(step);
}
