/* test_planner.c — the checkpoint planner against exhaustive search.
 *
 * 1. Stage models: on hundreds of random chains, stage_model_solve (a dynamic
 *    program) finds exactly the least model time of all 5^n mode vectors whose
 *    model peak fits (boundaries stored only when a recompute starts from
 *    them, in half the chains), and says "none" exactly when none fits.
 * 2. Random small models (chains with residual blocks, parsed and lowered like
 *    any model file): for a random budget, the budget policy's true planned
 *    peak never exceeds it, and it finds a plan whenever some stage-mode
 *    vector's true peak fits (exhaustive search); it is never worse than sqrt
 *    at sqrt's own peak; sqrt is Chen's rule; off recomputes nothing. How
 *    often its recompute time is at or below the exhaustive true optimum
 *    over stage modes (below: values kept back, part 3) is printed,
 *    not asserted: the model it optimizes is an estimate of the true peak
 *    (docs/planner.md).
 * 3. Per value: on the random models with at most PER_VALUE_LIMIT values the
 *    planner may recompute, every STORE/RECOMPUTE vector of them (stages
 *    dropped, the stored values kept back) is planned for real; the budget
 *    plan's figure (recompute less cache credit, what its search minimizes)
 *    is never below the least that fits (it is one of those vectors), and
 *    how often it equals it is printed. */
#include "test_passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static int64_t rand_in(int64_t lo, int64_t hi) { return lo + (int64_t)(next_u64() % (uint64_t)(hi - lo + 1)); }

/* The next mode vector (false after the last): stages 1..n-1 any mode,
 * stage n KEEP, SELECT, BF16 or CKPT; BF16 only when `bf16`. */
static bool next_modes(StageMode *modes, int n, bool bf16) {
  for (int s = 1; s <= n; s++) {
    int limit = s == n ? STAGE_CKPT : STAGE_DROP;
    if ((int)modes[s] < limit) {
      modes[s]++;
      if (modes[s] == STAGE_BF16 && !bf16) modes[s]++;
      return true;
    }
    modes[s] = STAGE_KEEP;
  }
  return false;
}

static bool close_enough(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b)) + 1e-15; }

/* ---- 1. the dynamic program is exact over its model ---- */

static void random_model(StageModel *sm, int n) {
  sm->n = n;
  sm->keep_bytes = calloc((size_t)n + 1, sizeof(uint64_t));
  sm->boundary_bytes = calloc((size_t)n + 1, sizeof(uint64_t));
  sm->free_bytes = calloc((size_t)n + 1, sizeof(uint64_t));
  sm->select_bytes = calloc((size_t)n + 1, sizeof(uint64_t));
  sm->select_seconds = calloc((size_t)n + 1, sizeof(double));
  sm->packed_bytes = calloc((size_t)n + 1, sizeof(uint64_t));
  sm->packed_seconds = calloc((size_t)n + 1, sizeof(double));
  sm->inner_bytes = calloc((size_t)n + 1, sizeof(uint64_t));
  sm->transient_bytes = calloc((size_t)n + 1, sizeof(uint64_t));
  sm->interior_seconds = calloc((size_t)n + 1, sizeof(double));
  sm->boundary_seconds = calloc((size_t)n + 1, sizeof(double));
  sm->fixed_bytes = (uint64_t)rand_in(0, 1000);
  bool free_boundaries = rand_in(0, 1);
  for (int s = 1; s <= n; s++) {
    sm->boundary_bytes[s] = (uint64_t)rand_in(1, 100);
    sm->keep_bytes[s] = sm->boundary_bytes[s] + (uint64_t)rand_in(0, 300);
    sm->select_bytes[s] = (uint64_t)rand_in((int64_t)sm->boundary_bytes[s], (int64_t)sm->keep_bytes[s]);
    sm->select_seconds[s] = (double)rand_in(0, 300) / 7.0;
    sm->packed_bytes[s] = (uint64_t)rand_in((int64_t)sm->boundary_bytes[s], (int64_t)sm->keep_bytes[s]);
    sm->packed_seconds[s] = (double)rand_in(0, 300) / 7.0;
    sm->free_bytes[s] = free_boundaries && rand_in(0, 1) ? sm->boundary_bytes[s] : 0;
    sm->inner_bytes[s] = sm->keep_bytes[s] + (uint64_t)rand_in(0, 300);
    sm->transient_bytes[s] = (uint64_t)rand_in(0, 200);
    sm->interior_seconds[s] = (double)rand_in(0, 1000) / 7.0;
    sm->boundary_seconds[s] = (double)rand_in(0, 1000) / 7.0;
  }
}

static void free_model(StageModel *sm) {
  free(sm->keep_bytes), free(sm->boundary_bytes), free(sm->free_bytes), free(sm->inner_bytes);
  free(sm->transient_bytes), free(sm->select_bytes), free(sm->select_seconds);
  free(sm->packed_bytes), free(sm->packed_seconds);
  free(sm->interior_seconds), free(sm->boundary_seconds);
}

static void test_dp_is_exact(void) {
  int cases = 0, infeasible = 0;
  for (int t = 0; t < 600; t++) {
    StageModel sm;
    int n = (int)rand_in(1, 7);
    random_model(&sm, n);
    StageMode modes[9] = {0}, best[9] = {0}, got[9] = {0};
    uint64_t lo = UINT64_MAX, hi = 0;
    do { /* the range of peaks, to draw a budget from */
      uint64_t p = stage_model_peak(&sm, modes);
      if (p < lo) lo = p;
      if (p > hi) hi = p;
    } while (next_modes(modes, n, true));
    uint64_t budget = (uint64_t)rand_in((int64_t)lo - 50, (int64_t)hi + 10);
    double best_seconds = INFINITY;
    memset(modes, 0, sizeof modes);
    do {
      double secs = stage_model_seconds(&sm, modes);
      if (stage_model_peak(&sm, modes) <= budget && secs < best_seconds) {
        best_seconds = secs;
        memcpy(best, modes, sizeof modes);
      }
    } while (next_modes(modes, n, true));
    bool found = stage_model_solve(&sm, budget, got);
    CHECK(found == isfinite(best_seconds), "case %d: solver found=%d, exhaustive=%g", t, found, best_seconds);
    if (found && isfinite(best_seconds)) {
      CHECK(stage_model_peak(&sm, got) <= budget, "case %d: solution peaks over the budget", t);
      CHECK(close_enough(stage_model_seconds(&sm, got), best_seconds), "case %d: solver %g, exhaustive optimum %g", t,
            stage_model_seconds(&sm, got), best_seconds);
    }
    infeasible += !isfinite(best_seconds);
    cases++;
    free_model(&sm);
  }
  printf("dynamic program vs exhaustive search: %d random chains (%d with no feasible plan)\n", cases, infeasible);
}

/* ---- 1b. long chains: fast, feasible, never worse than the simple plans ----
 * Past a few hundred stages the search thins its fronts and bounds its
 * segments (checkpoint.c): no longer provably optimal, but it must find a
 * plan that fits whenever sqrt's does, no slower than sqrt, in near-linear
 * time (a search of 3000 stages took minutes when it was quadratic). */
static void test_long_chains(void) {
  for (int t = 0; t < 2; t++) {
    StageModel sm;
    int n = 3000;
    random_model(&sm, n);
    StageMode *sq = calloc((size_t)n + 1, sizeof *sq), *got = calloc((size_t)n + 1, sizeof *got);
    int64_t k = llround(sqrt((double)n));
    for (int s = 1; s <= n; s++) sq[s] = s % k == 0 ? STAGE_CKPT : STAGE_DROP;
    sq[n] = STAGE_KEEP;
    uint64_t budget = stage_model_peak(&sm, sq);
    CHECK(stage_model_solve(&sm, budget, got), "long chain %d: no plan at sqrt's own peak", t);
    CHECK(stage_model_peak(&sm, got) <= budget, "long chain %d: the plan peaks over the budget", t);
    CHECK(stage_model_seconds(&sm, got) <= stage_model_seconds(&sm, sq) * (1 + 1e-9),
          "long chain %d: %g s, sqrt %g s", t, stage_model_seconds(&sm, got),
          stage_model_seconds(&sm, sq));
    free(sq), free(got);
    free_model(&sm);
  }
  printf(
      "long chains: 2 random chains of 3000 stages planned at sqrt's peak, none worse than sqrt\n");
}

/* ---- 2. whole plans of random small models ---- */

static char *random_model_text(void) {
  char *text = malloc(8192);
  int len = 0, width = (int)(8 << rand_in(0, 2)), layers = (int)rand_in(1, 5);
  len += snprintf(text + len, 8192 - len, "model r {\n  input x : f32[B, %d]\n  input y : i32[B]\n  h = x\n", width);
  static const char *acts[] = {"relu", "gelu", "tanh", "sigmoid"};
  for (int i = 0; i < layers; i++) {
    const char *act = acts[rand_in(0, 3)];
    if (rand_in(0, 1))
      len += snprintf(text + len, 8192 - len, "  h = h + linear(%s(linear(layernorm(h), %d)), %d)\n", act,
                      2 * width, width);
    else
      len += snprintf(text + len, 8192 - len, "  h = %s(linear(h, %d))\n", act, width);
  }
  snprintf(text + len, 8192 - len,
           "  logits = linear(h, 4)\n  loss = cross_entropy(logits, y)\n  predict logits\n}\ntrain { batch %d }\n",
           (int)rand_in(2, 16));
  return text;
}

static Graph *compile_text(const char *text) { return compile_source(source_from_string("random.nn", text)); }

/* A random budget may be infeasible, an outcome the tests check: the
 * planner's message about it is not shown. */
static Plan *plan_policy(const Graph *g, CheckpointSpec spec) {
  static FILE *sink;
  if (!sink) sink = fopen("/dev/null", "w");
  MachineProfile m = profile_default();
  Diag quiet;
  diag_init(&quiet, sink);
  return plan_checkpoints(g, spec, &m, NULL, &quiet);
}

/* The least recompute time over all stage-mode vectors whose true peak fits. */
static double exhaustive_true_optimum(const Graph *g, int n, uint64_t budget) {
  MachineProfile m = profile_default();
  StageMode modes[16] = {0};
  double best = INFINITY;
  do {
    Plan *pl = plan_with_modes(g, modes, NULL, &m);
    if (pl->peak_bytes <= budget && pl->recompute_seconds < best) best = pl->recompute_seconds;
    plan_free(pl);
  } while (next_modes(modes, n, false)); /* BF16 is KEEP without --compress */
  return best;
}

enum { PER_VALUE_LIMIT = 10 };

/* What the budget search minimizes. */
static double plan_figure(const Plan *pl) { return pl->recompute_seconds - pl->cache_credit; }

/* The values a plan of g may recompute, as the all-DROP plan recomputes
 * them, less views and runtime calls (no kernel of their own to rerun);
 * returns how many, or -1 past PER_VALUE_LIMIT. */
static int recomputable_values(const Graph *g, int n, int *values) {
  MachineProfile m = profile_default();
  StageMode modes[16];
  for (int s = 1; s <= n; s++) modes[s] = STAGE_DROP;
  Plan *pl = plan_with_modes(g, modes, NULL, &m);
  int count = 0;
  for (int v = 0; v < g->n_forward && count >= 0; v++) {
    OpClass cls = op_info(g->nodes[v].op)->op_class;
    if (!pl->recompute[v] || cls == OPC_VIEW || cls == OPC_CALL) continue;
    if (count == PER_VALUE_LIMIT) count = -1;
    else values[count++] = v;
  }
  plan_free(pl);
  return count;
}

/* The least plan_figure over every subset of `values` kept (every stage
 * DROP, so each of them is recomputed unless kept back) whose true peak
 * fits; INFINITY when none does. */
static double exhaustive_per_value(const Graph *g, int n, const int *values, int count, uint64_t budget) {
  MachineProfile m = profile_default();
  StageMode modes[16];
  for (int s = 1; s <= n; s++) modes[s] = STAGE_DROP;
  bool *kept = calloc((size_t)g->n_forward, sizeof *kept);
  double best = INFINITY;
  for (uint32_t set = 0; set < (1u << count); set++) {
    for (int i = 0; i < count; i++) kept[values[i]] = set >> i & 1;
    Plan *pl = plan_with_modes(g, modes, kept, &m);
    if (pl->peak_bytes <= budget && plan_figure(pl) < best) best = plan_figure(pl);
    plan_free(pl);
  }
  free(kept);
  return best;
}

static void test_random_models(void) {
  int models = 0, optimal = 0, compared = 0, value_optimal = 0, value_compared = 0;
  double worst = 0, value_worst = 0;
  for (int t = 0; t < 80; t++) {
    char *text = random_model_text();
    Graph *g = compile_text(text);
    CHECK(g != NULL, "random model %d does not compile:\n%s", t, text);
    if (!g) {
      free(text);
      continue;
    }
    Plan *off = plan_policy(g, (CheckpointSpec){.policy = CKPT_OFF});
    Plan *all = plan_policy(g, (CheckpointSpec){.policy = CKPT_ALL});
    Plan *sq = plan_policy(g, (CheckpointSpec){.policy = CKPT_SQRT});
    int n = off->model.n;
    CHECK(off->recompute_seconds == 0 && off->recompute_flops == 0, "off recomputes");
    /* Chen et al.: a boundary stored every round(sqrt(n)) stages. */
    int64_t k = llround(sqrt((double)n)) < 1 ? 1 : llround(sqrt((double)n));
    for (int s = 1; s < n; s++)
      CHECK(sq->modes[s] == (s % k == 0 ? STAGE_CKPT : STAGE_DROP), "sqrt stage %d of %d", s, n);
    CHECK(sq->modes[n] == STAGE_KEEP, "sqrt keeps the last stage");
    /* Never worse than sqrt at sqrt's peak. */
    Plan *at_sqrt = plan_policy(g, (CheckpointSpec){.policy = CKPT_BUDGET, .budget = sq->peak_bytes});
    CHECK(at_sqrt && at_sqrt->recompute_seconds <= sq->recompute_seconds + 1e-15 &&
              at_sqrt->peak_bytes <= sq->peak_bytes,
          "budget at sqrt's peak is worse than sqrt");
    /* A random budget between the least and the largest peak. */
    uint64_t lo = all->peak_bytes < off->peak_bytes ? all->peak_bytes : off->peak_bytes;
    uint64_t budget = lo + (uint64_t)rand_in(0, (int64_t)(off->peak_bytes - lo));
    Plan *b = plan_policy(g, (CheckpointSpec){.policy = CKPT_BUDGET, .budget = budget});
    if (b) CHECK(b->peak_bytes <= budget, "budget plan peaks at %llu over %llu", (unsigned long long)b->peak_bytes,
                 (unsigned long long)budget);
    if (n <= 5) {
      double opt = exhaustive_true_optimum(g, n, budget);
      CHECK(b != NULL || !isfinite(opt), "model %d: the planner found no plan, exhaustive search found one", t);
      if (b && isfinite(opt)) {
        compared++;
        if (b->recompute_seconds <= opt || close_enough(b->recompute_seconds, opt)) optimal++;
        else if (opt > 0 && b->recompute_seconds / opt - 1 > worst) worst = b->recompute_seconds / opt - 1;
        else if (opt == 0) worst = INFINITY;
      }
      int values[PER_VALUE_LIMIT];
      int count = recomputable_values(g, n, values);
      double vopt = count >= 0 ? exhaustive_per_value(g, n, values, count, budget) : INFINITY;
      if (b && isfinite(vopt)) {
        double got = plan_figure(b);
        CHECK(got >= vopt - 1e-12, "model %d: budget plan %g below the least of all per-value vectors %g", t, got, vopt);
        value_compared++;
        if (close_enough(got, vopt)) value_optimal++;
        else if (vopt > 0 && got / vopt - 1 > value_worst) value_worst = got / vopt - 1;
        else if (vopt <= 0) value_worst = INFINITY;
      }
    }
    plan_free(b);
    plan_free(at_sqrt);
    plan_free(sq);
    plan_free(all);
    plan_free(off);
    graph_free(g);
    free(text);
    models++;
  }
  printf("random models: %d planned; budget plan at or below the exhaustive stage-mode optimum in %d of %d (worst excess %.1f%%)\n",
         models, optimal, compared, 100 * worst);
  printf("per value: budget plan equals the least of all STORE/RECOMPUTE vectors in %d of %d (worst excess %.1f%%)\n",
         value_optimal, value_compared, 100 * value_worst);
}

int main(void) {
  test_dp_is_exact();
  test_random_models();
  test_long_chains();
  if (failures) fprintf(stderr, "test_planner: %d failure(s)\n", failures);
  return failures ? 1 : 0;
}
