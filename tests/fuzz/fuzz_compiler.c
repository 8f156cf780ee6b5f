/* fuzz_compiler.c — libFuzzer harness for the whole compiler: any bytes that
 * parse go through lowering, autodiff, the checkpoint planner (with the
 * file's own `checkpoint` policy), the memory plan and the C backend (printed
 * to /dev/null). No input may crash, leak or trip a sanitizer. */
#include "codegen.h"
#include "fuzz_program.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *sink;
  if (!sink) sink = fopen("/dev/null", "w");
  Diag diag;
  diag_init(&diag, sink);
  FuzzProgram f;
  fuzz_program_build(&f, data, size, &diag);
  if (f.plan) emit_c(sink, f.plan->program);
  fuzz_program_free(&f);
  return 0;
}
