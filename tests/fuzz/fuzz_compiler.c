/* fuzz_compiler.c — libFuzzer harness for the whole compiler: any bytes that
 * parse go through lowering, autodiff, the checkpoint planner (with the
 * file's own `checkpoint` policy), the memory plan and the C backend (printed
 * to /dev/null). No input may crash, leak or trip a sanitizer. */
#include "codegen.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *sink;
  if (!sink) sink = fopen("/dev/null", "w");
  SourceFile file = {.path = "fuzz.nn", .text = malloc(size + 1), .len = size};
  memcpy(file.text, data, size);
  file.text[size] = '\0';
  Diag diag;
  diag_init(&diag, sink);
  Ast *ast = parse_source(&file, &diag);
  Graph *g = ast ? lower_ast(ast, NULL, &diag) : NULL;
  if (g) {
    autodiff(g);
    MachineProfile m = profile_default();
    CheckpointSpec spec = g->train.checkpoint;
    if (spec.policy == CKPT_AUTO) spec.budget = 1ull << 30; /* the memory the driver would hand down */
    Plan *pl = plan_checkpoints(g, spec, &m, &diag);
    if (pl) emit_c(sink, pl->program);
    plan_free(pl);
    graph_free(g);
  }
  ast_free(ast);
  free(file.text);
  return 0;
}
