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
  PROGRAM_PASS(PASS_FUSE, program_fuse_widest(p));
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

bool compile_graph(Compilation *c, SourceFile *src, const CompileOptions *o, Diag *diag) {
  for (int i = 0; i < PASS_COUNT; i++) c->seconds[i] = -1;
  PASS(PASS_AST, c->ast = parse_source(src, diag), c->ast);
  PASS(PASS_IR, c->graph = lower(c->ast, o, diag), c->graph);
  PASS(PASS_CONV, fuse_conv_epilogue(c->graph), true);
  PASS(PASS_ATTENTION, fuse_attention(c->graph, o->attention), true);
  PASS(PASS_HEAD, fuse_loss_head(c->graph, o->head_chunk), true);
  PASS(PASS_GRAD, autodiff(c->graph), true);
  PASS(PASS_POOL, fuse_pool_relu_grad(c->graph), true);
  return true;
}

bool compile_program(Compilation *c, CheckpointSpec spec, const MachineProfile *m,
                     const CompileOptions *o, Diag *diag) {
  ProgramOptions program = {.bucket_bytes = o->bucket_bytes, .last = PASS_BUCKETS,
                            .dump = o->dump, .dump_out = o->dump_out};
  PASS(PASS_WEAVE, c->plan = plan_checkpoints(c->graph, spec, m, &program, diag), c->plan);
  return true; /* the plan's program went through STEPS .. BUCKETS */
}

void compilation_free(Compilation *c) {
  plan_free(c->plan);
  graph_free(c->graph);
  ast_free(c->ast);
}
