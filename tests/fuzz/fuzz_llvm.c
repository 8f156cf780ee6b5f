/* fuzz_llvm.c — libFuzzer harness for the LLVM backend: any bytes the
 * compiler accepts (as in fuzz_compiler.c) become an LLVM module, built and
 * verified; the backend must never crash, trip a sanitizer or build a
 * module that does not verify (which llvm_build_module reports). */
#include "llvm_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *sink;
  static LLVMTargetMachineRef tm;
  if (!sink) sink = fopen("/dev/null", "w");
  Diag diag;
  diag_init(&diag, sink);
  if (!tm && !llvm_target_machine(&(LlvmOptions){0}, &tm, &diag)) abort();
  SourceFile file = {.path = "fuzz.nn", .text = malloc(size + 1), .len = size};
  memcpy(file.text, data, size);
  file.text[size] = '\0';
  Ast *ast = parse_source(&file, &diag);
  Graph *g = ast ? lower_ast(ast, NULL, &diag) : NULL;
  if (g) {
    autodiff(g);
    MachineProfile m = profile_default();
    CheckpointSpec spec = g->train.checkpoint;
    if (spec.policy == CKPT_AUTO) spec.budget = 1ull << 30; /* the memory the driver would hand down */
    Plan *pl = plan_checkpoints(g, spec, &m, &diag);
    if (pl) {
      LLVMContextRef ctx = LLVMContextCreate();
      int errors = diag.errors;
      LLVMModuleRef mod = llvm_build_module(ctx, pl->program, tm, &diag);
      if (!mod || diag.errors != errors) abort(); /* a planned program always builds and verifies */
      LLVMDisposeModule(mod);
      LLVMContextDispose(ctx);
    }
    plan_free(pl);
    graph_free(g);
  }
  ast_free(ast);
  free(file.text);
  return 0;
}
