/* fuzz_llvm.c — libFuzzer harness for the LLVM backend: any bytes the
 * compiler accepts (fuzz_program.h) become an LLVM module, built and
 * verified; the backend must never crash, trip a sanitizer or build a
 * module that does not verify (which llvm_build_module reports). */
#include "fuzz_program.h"
#include "llvm_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *sink;
  static LLVMTargetMachineRef tm;
  if (!sink) sink = fopen("/dev/null", "w");
  Diag diag;
  diag_init(&diag, sink);
  if (!tm && !llvm_target_machine(&(LlvmOptions){0}, &tm, &diag)) abort();
  FuzzProgram f;
  fuzz_program_build(&f, data, size, &diag);
  if (f.plan) {
    LLVMContextRef ctx = LLVMContextCreate();
    int errors = diag.errors;
    LLVMModuleRef mod =
        llvm_build_module(ctx, f.plan->program, tm, &(LlvmOptions){0}, LLVM_WHOLE, &diag);
    if (!mod || diag.errors != errors) abort(); /* a planned program always builds and verifies */
    LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
  }
  fuzz_program_free(&f);
  return 0;
}
