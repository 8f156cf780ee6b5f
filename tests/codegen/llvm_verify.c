/* llvm_verify.c — the verifier's verdict on a module is a trainc error
 * through the Diag, never an LLVM abort: a function whose block has no
 * terminator fails llvm_verify with one `trainc: error: LLVM: ...` line
 * (printed here for the golden file), and the same function completed
 * passes. */
#include "llvm_internal.h"

int main(void) {
  Diag diag;
  diag_init(&diag, stdout);
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = LLVMModuleCreateWithNameInContext("broken", ctx);
  LLVMValueRef f =
      LLVMAddFunction(m, "f", LLVMFunctionType(LLVMVoidTypeInContext(ctx), NULL, 0, 0));
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(ctx, f, "entry");
  bool broken_passed = llvm_verify(m, &diag);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMPositionBuilderAtEnd(b, entry);
  LLVMBuildRetVoid(b);
  bool fixed_passed = llvm_verify(m, &diag);
  printf("without a terminator: %s; with one: %s; errors: %d\n",
         broken_passed ? "passed" : "refused", fixed_passed ? "passed" : "refused", diag.errors);
  LLVMDisposeBuilder(b);
  LLVMDisposeModule(m);
  LLVMContextDispose(ctx);
  return !broken_passed && fixed_passed && diag.errors == 1 ? 0 : 1;
}
