/* fuzz_program.h — what the compiler harnesses share: any bytes through
 * the parser, lowering, autodiff and the checkpoint planner (with the
 * file's own `checkpoint` policy), to the Program a backend takes. */
#ifndef TRAINC_FUZZ_PROGRAM_H
#define TRAINC_FUZZ_PROGRAM_H

#include "passes.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  SourceFile file;
  Ast *ast;
  Graph *g;
  Plan *plan; /* NULL when the bytes are not a model the compiler accepts */
} FuzzProgram;

static void fuzz_program_build(FuzzProgram *f, const uint8_t *data, size_t size, Diag *diag) {
  *f = (FuzzProgram){.file = {.path = "fuzz.nn", .text = malloc(size + 1), .len = size}};
  memcpy(f->file.text, data, size);
  f->file.text[size] = '\0';
  f->ast = parse_source(&f->file, diag);
  f->g = f->ast ? lower_ast(f->ast, NULL, CONV_LIBRARY, diag) : NULL;
  if (!f->g) return;
  autodiff(f->g);
  MachineProfile m = profile_default();
  CheckpointSpec spec = f->g->train.checkpoint;
  if (spec.policy == CKPT_AUTO)
    spec.budget = 1ull << 30; /* the memory the driver would hand down */
  f->plan = plan_checkpoints(f->g, spec, &m, NULL, diag);
}

static void fuzz_program_free(FuzzProgram *f) {
  plan_free(f->plan);
  graph_free(f->g);
  ast_free(f->ast);
  free(f->file.text);
}

#endif
