/* plan_print.c — a plan as people and tools read it: a table, JSON (schema in
 * docs/planner.md), Graphviz DOT, and the budget sweep as a table or an SVG
 * plot. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef enum { VALUE_TRANSIENT, VALUE_STORE, VALUE_RECOMPUTE, VALUE_STORE_BF16 } ValueFate;
static const char *fate_name[] = {"transient", "STORE", "RECOMPUTE", "STORE bf16"};

/* STORE: forward() leaves it for backward(); RECOMPUTE: backward() rebuilds
 * it; STORE bf16: forward() leaves it rounded to bf16, backward() widens
 * it; transient: nothing after forward() reads it. */
static ValueFate *value_fates(const Plan *pl) {
  const Graph *w = pl->graph;
  ValueFate *fate = xcalloc((size_t)pl->n_forward, sizeof *fate);
  for (int b = w->n_forward; b < w->n; b++) {
    const Node *n = &w->nodes[b];
    if (n->recompute_of >= 0) fate[n->recompute_of] = VALUE_RECOMPUTE;
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] < pl->n_forward && fate[n->in[k]] == VALUE_TRANSIENT) fate[n->in[k]] = VALUE_STORE;
  }
  for (int v = pl->n_forward; v < w->n_forward; v++) /* the planner's to_bf16 nodes */
    if (w->nodes[v].op == OP_TO_BF16) fate[w->nodes[v].in[0]] = VALUE_STORE_BF16;
  if (w->loss >= 0) fate[w->loss] = VALUE_STORE;
  if (w->predict >= 0) fate[w->predict] = VALUE_STORE;
  return fate;
}

/* Why a value is recomputed: its stage is SELECT (a cheap value remade from
 * stored ones) or checkpointed (CKPT, DROP: its stage remade from a
 * boundary). */
static const char *mode_name[] = {
    [STAGE_KEEP] = "KEEP", [STAGE_SELECT] = "SELECT", [STAGE_CKPT] = "CKPT", [STAGE_DROP] = "DROP",
    [STAGE_BF16] = "BF16"};

static bool selective(const Plan *pl, const ValueFate *fate, int v) {
  return fate[v] == VALUE_RECOMPUTE && pl->modes && pl->modes[pl->stage[v]] == STAGE_SELECT;
}

/* What a value's decision saves and costs: the bytes it does not hold
 * after forward() (all of a recomputed value's, half of a bf16 one's) and
 * the predicted seconds backward() spends on it (its recompute node, or
 * rounding to bf16 and widening back; a fused kernel's time shared among
 * its members). */
typedef struct {
  uint64_t saved;
  double paid;
} ValueFigures;

static ValueFigures *value_figures(const Plan *pl, const ValueFate *fate) {
  const Graph *w = pl->graph;
  ValueFigures *f = xcalloc((size_t)pl->n_forward, sizeof *f);
  for (int v = 0; v < pl->n_forward; v++) {
    uint64_t bytes = node_bytes(&w->nodes[v]);
    f[v].saved = fate[v] == VALUE_RECOMPUTE ? bytes : fate[v] == VALUE_STORE_BF16 ? bytes / 2 : 0;
  }
  double *seconds = program_node_seconds(pl->program, &pl->profile, NULL);
  for (int i = pl->n_forward; i < w->n; i++) {
    const Node *n = &w->nodes[i];
    int of = n->op == OP_TO_BF16 ? n->in[0] : n->recompute_of;
    if (of >= 0) f[of].paid += seconds[i];
  }
  free(seconds);
  return f;
}

/* Per stage, why its values are where they are: its mode, the bytes it
 * stores (a value in bf16 at half its bytes), the bytes it remakes in
 * backward instead and what its values cost (value_figures). */
typedef struct {
  uint64_t stored, remade;
  double seconds;
} StageFigures;

static bool listed(const Plan *pl, int v);

/* What keeping value v back spares: the kernels remaking it would run, its
 * own and those of the values it reads that nothing stores (a bias add's
 * GEMM output), each counted once, as forward runs them alone. */
static double remake_seconds(const Plan *pl, const ValueFate *fate, int v, bool *seen) {
  const Node *n = &pl->graph->nodes[v];
  if (seen[v] || is_leaf(n)) return 0;
  seen[v] = true;
  double s = node_seconds(pl->graph, n, &pl->profile);
  for (int k = 0; k < n->nin; k++)
    if (n->in[k] < pl->n_forward && fate[n->in[k]] == VALUE_TRANSIENT) s += remake_seconds(pl, fate, n->in[k], seen);
  return s;
}

static StageFigures *stage_figures(const Plan *pl, const ValueFate *fate) {
  const Graph *w = pl->graph;
  StageFigures *f = xcalloc((size_t)pl->model.n + 1, sizeof *f);
  ValueFigures *vf = value_figures(pl, fate);
  for (int v = 0; v < pl->n_forward; v++) {
    f[pl->stage[v]].seconds += vf[v].paid;
    if (!listed(pl, v)) continue;
    if (fate[v] == VALUE_STORE) f[pl->stage[v]].stored += node_bytes(&w->nodes[v]);
    if (fate[v] == VALUE_STORE_BF16) f[pl->stage[v]].stored += node_bytes(&w->nodes[v]) / 2;
    if (fate[v] == VALUE_RECOMPUTE) f[pl->stage[v]].remade += node_bytes(&w->nodes[v]);
  }
  free(vf);
  return f;
}

static void print_stages(FILE *out, const Plan *pl, const ValueFate *fate) {
  StageFigures *f = stage_figures(pl, fate);
  char b1[32], b2[32];
  fprintf(out, "\n%-5s %-6s %11s %11s %12s\n", "stage", "mode", "stored", "recomputed", "recompute ms");
  for (int s = 1; s <= pl->model.n; s++)
    fprintf(out, "%-5d %-6s %11s %11s %12.3f\n", s, mode_name[pl->modes[s]], format_bytes(f[s].stored, b1),
            format_bytes(f[s].remade, b2), 1e3 * f[s].seconds);
  free(f);
}

static bool listed(const Plan *pl, int v) {
  const Node *n = &pl->graph->nodes[v];
  return !is_leaf(n) && pl->stage[v] > 0;
}

typedef struct {
  uint64_t params, grads, inputs, stored, workspace, most_alive, optimizer, bf16, operands, arena, total;
} PeakParts;

static PeakParts peak_parts(const Plan *pl) {
  const Program *p = pl->program;
  return (PeakParts){
      .params = p->param_bytes,
      .grads = p->trained_bytes,
      .inputs = p->activation_offset - p->input_offset, /* inputs and the loss-seed slot */
      .stored = p->stored_bytes,
      .workspace = p->activation_bytes - p->stored_bytes,
      .most_alive = p->most_alive_bytes,
      .optimizer = pl->optimizer_bytes,
      .bf16 = pl->bf16_bytes,
      .operands = pl->operand_bytes,
      .arena = p->arena_bytes,
      .total = pl->peak_bytes,
  };
}

static double step_flops(const Plan *pl) { return pl->forward_flops + pl->backward_flops + pl->recompute_flops; }
/* The overhead is recompute over what the step takes without it, as a
 * trainer's measured step time compares. */
double plan_step_seconds(const Plan *pl) {
  return pl->forward_seconds + pl->backward_seconds + pl->recompute_seconds + pl->update_seconds;
}
/* `off`'s step is this one less its recompute kernels, with the values
 * they made read from memory, stored (Plan.cache_credit). */
/* The step without recomputation: what forward and backward would take
 * reading every value from where `off` stores it, and the update. */
static double base_seconds(const Plan *pl) {
  return pl->forward_seconds + pl->backward_seconds + pl->update_seconds + pl->cache_credit;
}

double plan_overhead(const Plan *pl) {
  double base = base_seconds(pl);
  return base > 0 ? recompute_cost(pl->recompute_seconds, pl->cache_credit) / base : 0;
}

/* What the loss head's chunk adds to the step against the graph's chunk
 * (less than 0 where the plan's chunk is faster). */
static double head_chunk_seconds(const Plan *pl) {
  const Graph *g = pl->graph;
  if (g->loss_head < 0) return 0;
  return head_seconds_at(g, &pl->profile, g->nodes[g->loss_head].attr.i[3]) -
         head_seconds_at(g, &pl->profile, pl->graph_chunk);
}

/* The sweep's figure: what the budget search minimizes, over the base. */
static double added(const Plan *pl) {
  double base = base_seconds(pl);
  return base > 0 ? (recompute_cost(pl->recompute_seconds, pl->cache_credit) + head_chunk_seconds(pl)) / base : 0;
}

/* How close the placement of the activations (stored and workspace) came
 * to the most bytes alive at one step, which no placement can go below. */
static void print_placement(FILE *out, const PeakParts *pp) {
  char b1[32], b2[32];
  uint64_t placed = pp->stored + pp->workspace;
  if (placed == pp->most_alive)
    fprintf(out, "  (activations placed in %s: the most alive at one step, no gaps)\n", format_bytes(placed, b1));
  else
    fprintf(out, "  (activations placed in %s; the most alive at one step is %s)\n", format_bytes(placed, b1),
            format_bytes(pp->most_alive, b2));
}

/* What `freeze` saves: the frozen parameters have no gradients and no
 * optimizer state (both count the trained parameters only above). */
static void print_frozen(FILE *out, const Plan *pl) {
  const Graph *g = pl->graph;
  const Program *p = pl->program;
  int frozen = g->n_params - graph_trained_params(g);
  if (frozen == 0) return;
  uint64_t bytes = p->param_bytes - p->trained_bytes;
  uint64_t saved = bytes + (p->trained_bytes ? pl->optimizer_bytes / p->trained_bytes : 0) * bytes;
  char b[32];
  fprintf(out, "  frozen: %d of %d parameter tensors, %llu bytes: saves %s of gradients and "
          "optimizer state\n", frozen, g->n_params, (unsigned long long)bytes,
          format_bytes(saved, b));
}

/* The chunked loss head (passes/head.c): the logits it never stores, the
 * scratch its chunk takes instead, and under --loss-head auto what the
 * budget search chose. */
static void print_head(FILE *out, const Plan *pl) {
  const Graph *g = pl->graph;
  if (g->loss_head < 0) return;
  HeadDims h;
  head_dims(g, &g->nodes[g->loss_head], &h);
  char b1[32], b2[32], b3[32];
  fprintf(out, "  loss head: chunked, %lld of %lld rows at a time: the [%lld, %lld] logits (%s) "
          "are never stored; a chunk's are a %s scratch (--loss-head whole stores them all)\n",
          (long long)h.chunk, (long long)h.n, (long long)h.n, (long long)h.v,
          format_bytes((uint64_t)h.n * (uint64_t)h.v * sizeof(float), b1),
          format_bytes(h.scratch_bytes, b2));
  if (!h.planner_chooses) return;
  if (pl->spec.policy != CKPT_BUDGET && pl->spec.policy != CKPT_AUTO) {
    fputs("  loss head chunk: the default (--loss-head auto chooses it under a budget only)\n", out);
    return;
  }
  fprintf(out, "  loss head chunk chosen by the budget search (--loss-head auto): %lld rows, predicted %.3f ms "
          "a micro-batch; the default, %lld rows: %.3f ms with a scratch of %s\n", (long long)h.chunk,
          1e3 * head_seconds_at(g, &pl->profile, h.chunk), (long long)pl->graph_chunk,
          1e3 * head_seconds_at(g, &pl->profile, pl->graph_chunk),
          format_bytes((uint64_t)pl->graph_chunk * (uint64_t)h.v * sizeof(float), b3));
}

/* What --attention made of the graph's causal attention: fused (no stored
 * probabilities) or whole, and under auto what the other form's plan took. */
static void print_attention(FILE *out, const Plan *pl) {
  if (!pl->attention.chosen) {
    if (pl->attention.fused)
      fprintf(out, "  attention: fused in %d places (--attention fused): no probabilities stored\n",
              pl->attention.fused);
    return;
  }
  char b1[32], b2[32];
  fprintf(out, "  attention chosen by the planner (--attention auto): %s, predicted %.3f ms a micro-batch, peak %s; ",
          pl->attention.fused ? "fused (no probabilities stored)" : "whole (probabilities stored)",
          1e3 * plan_step_seconds(pl), format_bytes(pl->peak_bytes, b1));
  const char *other = pl->attention.fused ? "whole" : "fused";
  if (pl->attention.other_fits)
    fprintf(out, "%s: %.3f ms, peak %s\n", other, 1e3 * pl->attention.other_seconds,
            format_bytes(pl->attention.other_peak, b2));
  else
    fprintf(out, "%s: no plan within the budget (its least peak %s)\n", other,
            format_bytes(pl->attention.other_peak, b2));
}

static const char *precision_word(const Plan *pl) {
  static const char *const words[] = {TRC_PRECISIONS(TRC_ENUM_WORD)};
  return words[pl->graph->train.run.precision];
}

/* Whether the trainer ran under --precision other than the train block's:
 * the plan's prediction is then not the one to set beside its times. */
static bool measured_in_other_precision(const Plan *pl, const MeasuredTimes *measured) {
  return measured->precision && strcmp(measured->precision, precision_word(pl)) != 0;
}

/* Where the prices come from: times priced with another machine's figures
 * can be off by half or twice (docs/planner.md, *The cost model*). */
static void print_profile_source(FILE *out, const MachineProfile *m) {
  if (m->source)
    fprintf(out, "  (priced with the machine profile %s)\n", m->source);
  else
    fputs("  (priced with the built-in machine profile, measured on a 2-core AMD EPYC (Zen 4);\n"
          "   `trainc calibrate -o FILE` measures this machine, and --profile FILE prices with it)\n", out);
}

static void print_table(FILE *out, const Plan *pl, const MeasuredTimes *measured) {
  const Graph *w = pl->graph;
  ValueFate *fate = value_fates(pl);
  char spec[64], sb[128], b[32];
  fprintf(out, "model %s, batch %lld, checkpoint %s", w->model_name, (long long)w->train.batch,
          checkpoint_spec_str(&pl->spec, spec));
  if (pl->spec.policy == CKPT_AUTO) fprintf(out, " (memory %s)", format_bytes(pl->spec.budget, b));
  if (pl->spec.compress) fputs(", compress bf16", out);
  if (pl->spec.compress && !pl->rounded)
    fputs(" (recomputed GEMMs in fp32: no room for their bf16 operands)", out);
  fprintf(out, ": %d stages\n\n", pl->model.n);
  ValueFigures *vf = value_figures(pl, fate);
  fprintf(out, "%-5s %-24s %-18s %5s %-20s %11s %11s %8s  %s\n", "stage", "value", "op", "line", "shape", "bytes",
          "saves", "costs us", "decision");
  for (int v = 0; v < pl->n_forward; v++) {
    if (!listed(pl, v)) continue;
    const Node *n = &w->nodes[v];
    char name[32], saves[32] = "-", costs[32] = "-", why[64] = "";
    snprintf(name, sizeof name, "%%%d%s%.20s", v, n->name ? " " : "", n->name ? n->name : "");
    if (vf[v].saved) snprintf(saves, sizeof saves, "%llu", (unsigned long long)vf[v].saved);
    if (vf[v].paid > 0) snprintf(costs, sizeof costs, "%.1f", 1e6 * vf[v].paid);
    if (selective(pl, fate, v)) snprintf(why, sizeof why, " (selective)");
    else if (pl->kept_back[v]) {
      bool *seen = xcalloc((size_t)pl->n_forward, sizeof *seen);
      snprintf(why, sizeof why, " (kept back: spares %.1f us)", 1e6 * remake_seconds(pl, fate, v, seen));
      free(seen);
    }
    fprintf(out, "%-5d %-24s %-18s %5d %-20s %11llu %11s %8s  %s%s%s\n", pl->stage[v], name, op_info(n->op)->name,
            n->loc.line, shape_str(&n->shape, sb), (unsigned long long)node_bytes(n), saves, costs, fate_name[fate[v]],
            pl->boundary[v] ? " (boundary)" : "", why);
  }
  free(vf);
  print_stages(out, pl, fate);
  free(fate);
  PeakParts pp = peak_parts(pl);
  fprintf(out, "\npeak memory (planned; the trainer reports its measured high-water mark):\n");
  const struct { const char *what; uint64_t bytes; bool only_if_any; } rows[] = {
      {"parameters", pp.params, false},       {"gradients", pp.grads, false},
      {"inputs", pp.inputs, false},           {"stored activations", pp.stored, false},
      {"backward workspace", pp.workspace, false}, {"arena (high-water mark)", pp.arena, false},
      {"optimizer state", pp.optimizer, false}, {"bf16 copy of parameters", pp.bf16, true},
      {"bf16 GEMM operands", pp.operands, true},
      {"total peak", pp.total, false},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    if (rows[i].bytes || !rows[i].only_if_any)
      fprintf(out, "  %-24s %12llu  %s\n", rows[i].what, (unsigned long long)rows[i].bytes, format_bytes(rows[i].bytes, b));
  print_placement(out, &pp);
  print_frozen(out, pl);
  print_head(out, pl);
  print_attention(out, pl);
  double total = step_flops(pl);
  fprintf(out, "\nrecompute: %.4g FLOPs, %.1f%% of the step's %.4g FLOPs\n", pl->recompute_flops,
          total > 0 ? 100 * pl->recompute_flops / total : 0, total);
  fprintf(out, "predicted micro-batch time: %.3f ms (forward %.3f, backward %.3f, recompute %.3f, update %.3f; "
          "+%.1f%%)\n", 1e3 * plan_step_seconds(pl), 1e3 * pl->forward_seconds, 1e3 * pl->backward_seconds,
          1e3 * pl->recompute_seconds, 1e3 * pl->update_seconds, 100 * plan_overhead(pl));
  if (pl->cache_credit > 0)
    fprintf(out, "  (backward reads the recomputed values from the cache: %.3f ms less than stored ones)\n",
            1e3 * pl->cache_credit);
  print_profile_source(out, &pl->profile);
  if (!measured) return;
  const MeasuredPhases *m = &measured->measured;
  fprintf(out, "measured micro-batch time (%s, %lld steps%s%s): %.3f ms (forward %.3f, backward %.3f, recompute "
          "%.3f, the rest %.3f; +%.1f%%)\n", measured->path, (long long)measured->steps,
          measured->precision ? ", precision " : "", measured->precision ? measured->precision : "",
          1e3 * m->step, 1e3 * m->forward, 1e3 * m->backward, 1e3 * m->recompute, 1e3 * m->rest,
          100 * m->overhead);
  if (measured_in_other_precision(pl, measured))
    fprintf(out, "  (the prediction above is for precision %s; the trainer's for its %s run: %.3f ms, +%.1f%%)\n",
            precision_word(pl), measured->precision, 1e3 * measured->predicted.step,
            100 * measured->predicted.overhead);
}

static void json_string(FILE *out, const char *s) {
  fputc('"', out);
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\') fprintf(out, "\\%c", *s);
    else if ((unsigned char)*s < 0x20) fprintf(out, "\\u%04x", *s);
    else fputc(*s, out);
  }
  fputc('"', out);
}

static void print_json(FILE *out, const Plan *pl, const MeasuredTimes *measured) {
  const Graph *w = pl->graph;
  ValueFate *fate = value_fates(pl);
  ValueFigures *vf = value_figures(pl, fate);
  char spec[64];
  fputs("{\"schema\": \"trainc-plan/1\", \"model\": ", out);
  json_string(out, w->model_name);
  fprintf(out, ", \"batch\": %lld, \"policy\": ", (long long)w->train.batch);
  json_string(out, checkpoint_spec_str(&pl->spec, spec));
  if (pl->spec.policy == CKPT_AUTO) fprintf(out, ", \"memory\": %llu", (unsigned long long)pl->spec.budget);
  else fputs(", \"memory\": null", out);
  fprintf(out, ", \"compress\": %s", pl->spec.compress ? "\"bf16\"" : "null");
  fprintf(out, ", \"stages\": %d,\n \"values\": [", pl->model.n);
  bool first = true;
  for (int v = 0; v < pl->n_forward; v++) {
    if (!listed(pl, v)) continue;
    const Node *n = &w->nodes[v];
    fprintf(out, "%s\n  {\"id\": %d, \"name\": ", first ? "" : ",", v);
    json_string(out, n->name);
    fputs(", \"op\": ", out);
    json_string(out, op_info(n->op)->name);
    fprintf(out, ", \"line\": %d, \"shape\": [", n->loc.line);
    for (int i = 0; i < n->shape.rank; i++) fprintf(out, "%s%lld", i ? ", " : "", (long long)n->shape.dim[i]);
    fprintf(out, "], \"bytes\": %llu, \"stage\": %d, \"stage_mode\": \"%s\", \"boundary\": %s, "
            "\"decision\": \"%s\", \"kept_back\": %s, \"saved_bytes\": %llu, \"paid_seconds\": %.6g}",
            (unsigned long long)node_bytes(n), pl->stage[v], mode_name[pl->modes[pl->stage[v]]],
            pl->boundary[v] ? "true" : "false", fate_name[fate[v]], pl->kept_back[v] ? "true" : "false",
            (unsigned long long)vf[v].saved, vf[v].paid);
    first = false;
  }
  fputs("\n ],\n \"stage_plan\": [", out);
  StageFigures *f = stage_figures(pl, fate);
  for (int st = 1; st <= pl->model.n; st++)
    fprintf(out, "%s\n  {\"stage\": %d, \"mode\": \"%s\", \"stored\": %llu, \"recomputed\": %llu, "
            "\"recompute_seconds\": %.6g}", st > 1 ? "," : "", st, mode_name[pl->modes[st]],
            (unsigned long long)f[st].stored, (unsigned long long)f[st].remade, f[st].seconds);
  free(f);
  free(vf);
  free(fate);
  PeakParts pp = peak_parts(pl);
  fprintf(out, "\n ],\n \"peak\": {\"parameters\": %llu, \"gradients\": %llu, \"inputs\": %llu, \"stored_activations\": %llu, "
          "\"backward_workspace\": %llu, \"most_alive_activations\": %llu, \"arena\": %llu, \"optimizer_state\": %llu, \"bf16_parameters\": %llu, "
          "\"bf16_operands\": %llu, \"total\": %llu},\n",
          (unsigned long long)pp.params, (unsigned long long)pp.grads, (unsigned long long)pp.inputs,
          (unsigned long long)pp.stored, (unsigned long long)pp.workspace, (unsigned long long)pp.most_alive,
          (unsigned long long)pp.arena,
          (unsigned long long)pp.optimizer, (unsigned long long)pp.bf16, (unsigned long long)pp.operands,
          (unsigned long long)pp.total);
  if (w->loss_head >= 0) {
    HeadDims h;
    head_dims(w, &w->nodes[w->loss_head], &h);
    fprintf(out, " \"loss_head\": {\"chunk\": %lld, \"rows\": %lld, \"classes\": %lld, "
            "\"scratch\": %llu, \"planner_chooses\": %s, \"default_chunk\": %lld, \"seconds\": %.6g},\n",
            (long long)h.chunk, (long long)h.n, (long long)h.v, (unsigned long long)h.scratch_bytes,
            h.planner_chooses ? "true" : "false", (long long)pl->graph_chunk,
            head_seconds_at(w, &pl->profile, h.chunk));
  } else {
    fputs(" \"loss_head\": null,\n", out);
  }
  fprintf(out, " \"attention\": {\"form\": \"%s\", \"fused\": %d, \"chosen\": %s, \"other\": ",
          pl->attention.fused ? "fused" : "whole", pl->attention.fused, pl->attention.chosen ? "true" : "false");
  if (pl->attention.chosen)
    fprintf(out, "{\"fits\": %s, \"step\": %.6g, \"peak\": %llu}},\n", pl->attention.other_fits ? "true" : "false",
            pl->attention.other_fits ? pl->attention.other_seconds : 0.0, (unsigned long long)pl->attention.other_peak);
  else
    fputs("null},\n", out);
  fprintf(out, " \"flops\": {\"forward\": %.17g, \"backward\": %.17g, \"recompute\": %.17g},\n", pl->forward_flops,
          pl->backward_flops, pl->recompute_flops);
  /* nine digits: a trainer's --kernel-times carries these in full */
  fprintf(out, " \"seconds\": {\"forward\": %.9g, \"backward\": %.9g, \"recompute\": %.9g, \"update\": %.9g, "
          "\"step\": %.9g, \"cache_credit\": %.9g},\n \"overhead\": %.6g,\n \"added\": %.6g,\n \"profile\": ",
          pl->forward_seconds, pl->backward_seconds, pl->recompute_seconds, pl->update_seconds, plan_step_seconds(pl),
          pl->cache_credit, plan_overhead(pl), added(pl));
  if (pl->profile.source) json_string(out, pl->profile.source);
  else fputs("null", out);
  fputs(",\n \"measured\": ", out);
  if (!measured) {
    fputs("null}\n", out);
    return;
  }
  const MeasuredPhases *m = &measured->measured, *p = &measured->predicted;
  fputs("{\"file\": ", out);
  json_string(out, measured->path);
  fputs(", \"precision\": ", out);
  if (measured->precision) json_string(out, measured->precision);
  else fputs("null", out);
  fprintf(out, ", \"steps\": %lld, \"forward\": %.6g, \"backward\": %.6g, \"recompute\": %.6g, \"rest\": %.6g, "
          "\"step\": %.6g, \"overhead\": %.6g, \"predicted_step\": %.6g, \"predicted_overhead\": %.6g}}\n",
          (long long)measured->steps, m->forward, m->backward, m->recompute, m->rest, m->step, m->overhead,
          p->step, p->overhead);
}

static void print_dot(FILE *out, const Plan *pl) {
  const Graph *w = pl->graph;
  ValueFate *fate = value_fates(pl);
  static const char *color[] = {"white", "palegreen", "lightsalmon", "lightblue"};
  char sb[128];
  fputs("digraph plan {\n  rankdir=TB;\n  node [shape=box, style=filled, fontname=\"monospace\"];\n", out);
  for (int v = 0; v < pl->n_forward; v++) {
    if (!listed(pl, v)) continue;
    const Node *n = &w->nodes[v];
    fprintf(out, "  n%d [label=\"%%%d %s%s%s\\n%s %s\", fillcolor=%s%s];\n", v, v, op_info(n->op)->name,
            n->name ? " " : "", n->name ? n->name : "", shape_str(&n->shape, sb), fate_name[fate[v]], color[fate[v]],
            pl->boundary[v] ? ", penwidth=3" : "");
    for (int k = 0; k < n->nin; k++)
      if (listed(pl, n->in[k])) fprintf(out, "  n%d -> n%d;\n", n->in[k], v);
  }
  fputs("}\n", out);
  free(fate);
}

void plan_print(FILE *out, const Plan *pl, PlanFormat format, const MeasuredTimes *measured) {
  switch (format) {
  case PLAN_TABLE: print_table(out, pl, measured); break;
  case PLAN_JSON: print_json(out, pl, measured); break;
  case PLAN_DOT: print_dot(out, pl); break;
  }
}

/* ------------------------------------------------------------------ sweep */

/* From the least peak the budget search reaches (its candidates include
 * all, sqrt and off; a budget of 0 bytes fits none of them, and the search
 * reports the least) to off's without bf16 storage (with it, off itself
 * may be the least). The budgets' searches share their candidates' figures
 * (a PlanMemo): each is realized once. */
SweepPoint *plan_sweep(const Graph *g, const MachineProfile *m, bool compress, int *count) {
  uint64_t min, least;
  PlanMemo *memo = plan_memo_new();
  plan_free(plan_fitting(g, (CheckpointSpec){.policy = CKPT_BUDGET, .budget = 0, .compress = compress}, m, NULL,
                         &min, memo));
  Plan *off = plan_fitting(g, (CheckpointSpec){.policy = CKPT_OFF}, m, NULL, &least, NULL);
  uint64_t max = off->peak_bytes > min ? off->peak_bytes : min;
  plan_free(off);
  enum { STEPS = 16 };
  SweepPoint *pts = xcalloc(STEPS + 1, sizeof *pts);
  int n = 0;
  for (int i = 0; i <= STEPS; i++) {
    uint64_t budget = min + (max - min) * (uint64_t)i / STEPS;
    Plan *pl = plan_fitting(g, (CheckpointSpec){.policy = CKPT_BUDGET, .budget = budget, .compress = compress},
                            m, NULL, &least, memo);
    pts[n] = (SweepPoint){.budget = budget, .fits = pl != NULL};
    if (pl) {
      const Graph *w = pl->graph;
      pts[n].peak = pl->peak_bytes, pts[n].overhead = plan_overhead(pl), pts[n].added = added(pl);
      pts[n].head_chunk = w->loss_head >= 0 ? w->nodes[w->loss_head].attr.i[3] : 0;
    }
    n++;
    plan_free(pl);
  }
  plan_memo_free(memo);
  *count = n;
  return pts;
}

void sweep_print(FILE *out, const SweepPoint *pts, int n) {
  char b1[32], b2[32];
  bool head = n > 0 && pts[n - 1].head_chunk > 0; /* off's plan fits the last budget */
  fprintf(out, "%-14s %-14s %s\n", "budget", "planned peak",
          head ? "predicted recompute overhead   added to the step   loss head chunk"
               : "predicted recompute overhead");
  for (int i = 0; i < n; i++) {
    if (!pts[i].fits) {
      fprintf(out, "%-14s %-14s infeasible\n", format_bytes(pts[i].budget, b1), "-");
      continue;
    }
    char over[32], add[32];
    snprintf(over, sizeof over, "+%.1f%%", 100 * pts[i].overhead);
    snprintf(add, sizeof add, "%+.1f%%", 100 * pts[i].added);
    fprintf(out, "%-14s %-14s ", format_bytes(pts[i].budget, b1), format_bytes(pts[i].peak, b2));
    if (head) fprintf(out, "%-30s %-19s %lld rows\n", over, add, (long long)pts[i].head_chunk);
    else fprintf(out, "%s\n", over);
  }
}

/* The sweep as JSON (schema in docs/planner.md). */
void sweep_json(FILE *out, const SweepPoint *pts, int n, const char *model, bool compress) {
  fputs("{\"schema\": \"trainc-sweep/1\", \"model\": ", out);
  json_string(out, model);
  fprintf(out, ", \"compress\": %s, \"points\": [", compress ? "\"bf16\"" : "null");
  for (int i = 0; i < n; i++) {
    fprintf(out, "%s\n  {\"budget\": %llu, \"fits\": %s", i ? "," : "", (unsigned long long)pts[i].budget,
            pts[i].fits ? "true" : "false");
    if (pts[i].fits)
      fprintf(out, ", \"peak\": %llu, \"overhead\": %.6g, \"added\": %.6g, \"head_chunk\": %lld}",
              (unsigned long long)pts[i].peak, pts[i].overhead, pts[i].added, (long long)pts[i].head_chunk);
    else
      fputs(", \"peak\": null, \"overhead\": null, \"added\": null, \"head_chunk\": null}", out);
  }
  fputs("\n]}\n", out);
}

/* Planned peak (x, MiB) against predicted overhead (y, %), one dot a budget. */
void sweep_svg(FILE *out, const SweepPoint *pts, int n, const char *title) {
  const double W = 640, H = 400, L = 70, R = 20, T = 40, B = 50;
  double xmax = 0, ymax = 0;
  for (int i = 0; i < n; i++)
    if (pts[i].fits) {
      if (pts[i].peak / 1048576.0 > xmax) xmax = pts[i].peak / 1048576.0;
      if (100 * pts[i].overhead > ymax) ymax = 100 * pts[i].overhead;
    }
  if (xmax <= 0) xmax = 1;
  if (ymax <= 0) ymax = 1;
  fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" font-family=\"sans-serif\" "
          "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
  fputs("<text x=\"70\" y=\"24\" font-size=\"14\">", out);
  for (const char *c = title; *c; c++) /* identifiers only reach here, but escape anyway */
    if (*c == '<' || *c == '>' || *c == '&') fputc('?', out);
    else fputc(*c, out);
  fputs(": planned peak vs predicted recompute overhead</text>\n", out);
  fprintf(out, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", L, H - B, W - R, H - B);
  fprintf(out, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", L, T, L, H - B);
  fprintf(out, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">planned peak (MiB; 0 to %.1f)</text>\n", (L + W - R) / 2,
          H - 15, xmax);
  fprintf(out, "<text x=\"15\" y=\"%g\" transform=\"rotate(-90 15 %g)\" text-anchor=\"middle\">recompute overhead "
          "(%%; 0 to %.1f)</text>\n", (T + H - B) / 2, (T + H - B) / 2, ymax);
  fputs("<polyline fill=\"none\" stroke=\"steelblue\" stroke-width=\"2\" points=\"", out);
  for (int i = 0; i < n; i++)
    if (pts[i].fits)
      fprintf(out, "%.1f,%.1f ", L + (W - L - R) * pts[i].peak / 1048576.0 / xmax,
              H - B - (H - T - B) * 100 * pts[i].overhead / ymax);
  fputs("\"/>\n", out);
  for (int i = 0; i < n; i++)
    if (pts[i].fits)
      fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"steelblue\"/>\n",
              L + (W - L - R) * pts[i].peak / 1048576.0 / xmax, H - B - (H - T - B) * 100 * pts[i].overhead / ymax);
  fputs("</svg>\n", out);
}
