/* pipeline.c — the compiler's passes in order, one line each (as Halide's
 * Lower.cpp reads): the model file to its graph, the graph to its planned
 * Program. Each pass is one function with its contract in passes.h (the
 * frontend's and ir's in theirs); `--dump=<pass>` prints the program after
 * any of them. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const names[PASS_COUNT] = {
#define PASS_NAME(id, name, doc) name,
    TRAINC_PASSES(PASS_NAME)
#undef PASS_NAME
};

const char *pass_name(Pass pass) { return pass >= 0 && pass < PASS_COUNT ? names[pass] : "none"; }

Pass pass_named(const char *name) {
  for (int i = 0; i < PASS_COUNT; i++)
    if (!strcmp(name, names[i])) return (Pass)i;
  return PASS_NONE;
}

const char *pass_names_listed(void) {
  static char list[256];
  if (list[0]) return list;
  for (int i = 0; i < PASS_COUNT; i++)
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
             i == 0 ? "" : i == PASS_COUNT - 1 ? " or " : ", ", names[i]);
  return list;
}

/* ---------------------------------------------------------- program passes */

static const ProgramOptions defaults = {.last = PASS_BUCKETS, .dump = PASS_NONE};

/* Whether the program is done after `pass`: dumps it when asked. */
static bool program_done(const ProgramOptions *o, Pass pass, const Program *p) {
  if (o->dump == pass) program_print(o->dump_out, p, pass);
  return o->last == pass;
}

#define PROGRAM_PASS(pass, call) \
  do {                           \
    call;                        \
    if (program_done(o, pass, p)) return p; \
  } while (0)

Program *program_build(const Graph *g, const ProgramOptions *o) {
  if (!o) o = &defaults;
  Program *p;
  PROGRAM_PASS(PASS_STEPS, p = program_steps(g));
  PROGRAM_PASS(PASS_KERNELS, program_lower_kernels(p));
  PROGRAM_PASS(PASS_FUSE, program_fuse_widest(p, o->plain_fusion));
  PROGRAM_PASS(PASS_SCHEDULE, program_plan_memory(p));
  PROGRAM_PASS(PASS_PARALLEL, program_mark_kernels(p));
  PROGRAM_PASS(PASS_BUCKETS, program_bucket_gradients(p, o->bucket_bytes ? o->bucket_bytes : GRAD_BUCKET_BYTES));
  return p;
}

/* ------------------------------------------------------- the whole pipeline */

static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The graph or program after `pass`, to o->dump_out when it is o->dump. */
static void dump_after(const Compilation *c, const CompileOptions *o, Pass pass) {
  if (o->dump != pass) return;
  if (pass == PASS_AST) ast_print(o->dump_out, c->ast);
  else if (pass == PASS_WEAVE) graph_print(o->dump_out, c->plan->graph);
  else graph_print(o->dump_out, c->graph);
}

/* Runs `call` as `pass`, timed; stops the pipeline when it made nothing. */
#define PASS(pass, call, made)                       \
  do {                                               \
    double start_ = seconds_now();                   \
    call;                                            \
    c->seconds[pass] = seconds_now() - start_;       \
    if (!(made)) return false;                       \
    dump_after(c, o, pass);                          \
  } while (0)

static Graph *lower(const Ast *ast, const CompileOptions *o, Diag *diag) {
  Graph *g = lower_ast(ast, o->model, o->conv, diag);
  if (g) g->train.no_fuse = o->no_fuse;
  return g;
}

/* IR .. POOL on c->graph, attention fused or not. */
static bool graph_passes(Compilation *c, const CompileOptions *o, bool fuse, Diag *diag) {
  PASS(PASS_IR, c->graph = lower(c->ast, o, diag), c->graph);
  PASS(PASS_CONV, fuse_conv_epilogue(c->graph), true);
  PASS(PASS_ATTENTION, c->fused_attention = fuse ? fuse_attention(c->graph) : 0, true);
  PASS(PASS_HEAD, fuse_loss_head(c->graph, o->head_chunk), true);
  PASS(PASS_GRAD, autodiff(c->graph), true);
  PASS(PASS_POOL, fuse_pool_relu_grad(c->graph), true);
  return true;
}

/* Under --attention auto a graph that fuses attention has a twin that does
 * not, made by the same passes (not dumped; their time added to the
 * first's), for WEAVE to price against it. */
static bool unfused_twin(Compilation *c, const CompileOptions *o, Diag *diag) {
  CompileOptions quiet = *o;
  quiet.dump = PASS_NONE;
  Compilation twin = {.ast = c->ast};
  bool ok = graph_passes(&twin, &quiet, false, diag);
  c->unfused = twin.graph;
  for (int i = 0; i < PASS_COUNT; i++)
    if (twin.seconds[i] > 0) c->seconds[i] += twin.seconds[i];
  return ok;
}

bool compile_graph(Compilation *c, SourceFile *src, const CompileOptions *o, Diag *diag) {
  for (int i = 0; i < PASS_COUNT; i++) c->seconds[i] = -1;
  PASS(PASS_AST, c->ast = parse_source(src, diag), c->ast);
  if (!graph_passes(c, o, o->attention != ATTENTION_WHOLE, diag)) return false;
  return o->attention != ATTENTION_AUTO || !c->fused_attention || unfused_twin(c, o, diag);
}

/* --attention auto: c->graph (attention fused) and c->unfused planned
 * alike; the faster predicted step of those that fit is kept (the fused
 * one on a tie: it stores less) and c->graph becomes its graph. A dump of
 * a program pass prints the kept plan's (planned again with it). */
static Plan *plan_choosing_attention(Compilation *c, CheckpointSpec spec, const MachineProfile *m,
                                     const ProgramOptions *program, Diag *diag) {
  ProgramOptions quiet = *program;
  quiet.dump = PASS_NONE;
  uint64_t least[2] = {0, 0};
  Plan *plans[2] = {plan_fitting(c->graph, spec, m, &quiet, &least[0], NULL),
                    plan_fitting(c->unfused, spec, m, &quiet, &least[1], NULL)};
  if (!plans[0] && !plans[1]) /* says so, naming the smaller of the least peaks */
    return plan_checkpoints(least[0] <= least[1] ? c->graph : c->unfused, spec, m, program, diag);
  int unfused = !plans[0] || (plans[1] && plan_step_seconds(plans[1]) < plan_step_seconds(plans[0]));
  Plan *kept = plans[unfused], *other = plans[!unfused];
  kept->attention.chosen = true;
  kept->attention.fused = unfused ? 0 : c->fused_attention;
  kept->attention.other_fits = other != NULL;
  kept->attention.other_seconds = other ? plan_step_seconds(other) : 0;
  kept->attention.other_peak = other ? other->peak_bytes : least[!unfused];
  plan_free(other);
  if (unfused) {
    Graph *g = c->graph;
    c->graph = c->unfused, c->unfused = g;
  }
  if (program->dump == PASS_NONE) return kept;
  Plan *dumped = plan_checkpoints(c->graph, spec, m, program, diag);
  dumped->attention = kept->attention;
  plan_free(kept);
  return dumped;
}

static Plan *plan(Compilation *c, CheckpointSpec spec, const MachineProfile *m,
                  const ProgramOptions *program, Diag *diag) {
  if (c->unfused) return plan_choosing_attention(c, spec, m, program, diag);
  Plan *pl = plan_checkpoints(c->graph, spec, m, program, diag);
  if (pl) pl->attention.fused = c->fused_attention;
  return pl;
}

bool compile_program(Compilation *c, CheckpointSpec spec, const MachineProfile *m,
                     const CompileOptions *o, Diag *diag) {
  ProgramOptions program = {.bucket_bytes = o->bucket_bytes, .last = PASS_BUCKETS,
                            .dump = o->dump, .dump_out = o->dump_out};
  PASS(PASS_WEAVE, c->plan = plan(c, spec, m, &program, diag), c->plan);
  return true; /* the plan's program went through STEPS .. BUCKETS */
}

void compilation_free(Compilation *c) {
  plan_free(c->plan);
  graph_free(c->unfused);
  graph_free(c->graph);
  ast_free(c->ast);
}
