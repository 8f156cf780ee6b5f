/* llvm_off.c — the LLVM backend's entry points in a trainc configured
 * without LLVM (TRAINC_LLVM off): each says so. */
#include "codegen.h"

static bool no_llvm(Diag *diag) {
  diag_error(diag, NO_LOC,
             "this trainc was built without LLVM, which --backend llvm and `trainc run` need "
             "(install llvm-19-dev and reconfigure with -DTRAINC_LLVM=ON)");
  return false;
}

bool emit_llvm(FILE *out, const Program *p, const LlvmOptions *o, Diag *diag) {
  return no_llvm(diag);
}

bool build_llvm(const char *obj_path, const Program *p, const LlvmOptions *o, Diag *diag) {
  return no_llvm(diag);
}

int run_llvm(const Program *p, const LlvmOptions *o, int argc, char **argv, Diag *diag) {
  no_llvm(diag);
  return -1;
}
