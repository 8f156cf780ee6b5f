/* llvm_target.c — the target machine, the verifier, the O3 pipeline and
 * LLVM errors as diagnostics. */
#include "llvm_internal.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool llvm_ok(LLVMErrorRef err, const char *what, Diag *diag) {
  if (!err) return true;
  char *msg = LLVMGetErrorMessage(err);
  diag_error(diag, NO_LOC, "LLVM: %s: %s", what, msg);
  LLVMDisposeErrorMessage(msg);
  return false;
}

/* ---- the target ---- */

/* LLVM prints "'x' is not a recognized processor for this target (ignoring
 * processor)" and goes on; its warnings while the target machine is made
 * are caught from stderr and reported as errors of the flag. */
static LLVMTargetMachineRef create_machine(LLVMTargetRef target, const char *triple,
                                           const char *cpu, const char *features, Diag *diag) {
  fflush(stderr);
  FILE *caught = tmpfile();
  int saved = caught ? dup(2) : -1;
  if (saved >= 0) dup2(fileno(caught), 2);
  LLVMTargetMachineRef tm =
      LLVMCreateTargetMachine(target, triple, cpu, features, LLVMCodeGenLevelAggressive,
                              LLVMRelocPIC, LLVMCodeModelDefault);
  if (saved >= 0) {
    dup2(saved, 2);
    close(saved);
  }
  char line[512], last[512] = "";
  bool warned = false;
  if (caught) rewind(caught);
  while (caught && fgets(line, sizeof line, caught)) {
    line[strcspn(line, "\n")] = '\0';
    char *ignoring = strstr(line, " (ignoring "); /* trainc does not ignore it */
    if (ignoring) *ignoring = '\0';
    if (!strcmp(line, last)) continue; /* said once per subtarget */
    bool cpu_line = strstr(line, "processor") != NULL;
    diag_error(diag, NO_LOC, "%s %s: LLVM: %s", cpu_line ? "--mcpu" : "--mattr",
               cpu_line ? cpu : features, line);
    snprintf(last, sizeof last, "%s", line);
    warned = true;
  }
  if (caught) fclose(caught);
  if (warned && tm) LLVMDisposeTargetMachine(tm);
  return warned ? NULL : tm;
}

bool llvm_target_machine(const LlvmOptions *o, LLVMTargetMachineRef *tm, Diag *diag) {
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  char *triple = LLVMGetDefaultTargetTriple(), *err = NULL;
  char *host_cpu = LLVMGetHostCPUName(), *host_features = LLVMGetHostCPUFeatures();
  LLVMTargetRef target;
  int errors = diag->errors;
  *tm = NULL;
  if (LLVMGetTargetFromTriple(triple, &target, &err)) {
    diag_error(diag, NO_LOC, "LLVM: no target for %s: %s", triple, err);
  } else {
    const char *cpu = o->mcpu ? o->mcpu : host_cpu, *features = o->mattr ? o->mattr : host_features;
    /* another CPU than this one: its own features, not this machine's */
    if (o->mcpu && !o->mattr) features = "";
    *tm = create_machine(target, triple, cpu, features, diag);
    if (!*tm && diag->errors == errors)
      diag_error(diag, NO_LOC, "LLVM: no target machine for %s, CPU %s", triple, cpu);
  }
  LLVMDisposeMessage(err);
  LLVMDisposeMessage(triple);
  LLVMDisposeMessage(host_cpu);
  LLVMDisposeMessage(host_features);
  return *tm != NULL;
}

bool llvm_verify(LLVMModuleRef m, Diag *diag) {
  char *msg = NULL;
  bool bad = LLVMVerifyModule(m, LLVMReturnStatusAction, &msg);
  if (bad) {
    msg[strcspn(msg, "\n")] = '\0'; /* the first problem */
    diag_error(diag, NO_LOC, "LLVM: the module trainc built does not verify (a trainc bug): %s",
               msg);
  }
  LLVMDisposeMessage(msg);
  return !bad;
}

/* What LLVM says while it optimizes and compiles the module: a loop hint of
 * the backend's it could not honour ("loop not vectorized", a warning of
 * LLVM's by default) speaks of trainc's code, not the user's, and changes
 * no result: such warnings are shown under --verbose only, remarks (what
 * each pass did) never. An error ends trainc, as LLVM's own handler would
 * (a handler of ours takes that over). */
static void optimization_diagnostic(LLVMDiagnosticInfoRef info, void *verbose) {
  LLVMDiagnosticSeverity severity = LLVMGetDiagInfoSeverity(info);
  if (severity != LLVMDSError && !(severity == LLVMDSWarning && verbose)) return;
  char *text = LLVMGetDiagInfoDescription(info);
  const char *unplaced = "<unknown>:0:0: "; /* the module has no debug locations */
  const char *shown = strncmp(text, unplaced, strlen(unplaced)) ? text : text + strlen(unplaced);
  fprintf(stderr, "trainc: %s: LLVM: %s\n", severity == LLVMDSError ? "error" : "note", shown);
  LLVMDisposeMessage(text);
  if (severity == LLVMDSError) exit(EXIT_FAILURE);
}

bool llvm_optimize(LLVMModuleRef m, LLVMTargetMachineRef tm, const LlvmOptions *o, Diag *diag) {
  static char shown; /* any non-NULL pointer: --verbose */
  LLVMContextSetDiagnosticHandler(LLVMGetModuleContext(m), optimization_diagnostic,
                                  o->verbose ? &shown : NULL);
  LLVMPassBuilderOptionsRef opt = LLVMCreatePassBuilderOptions();
  LLVMPassBuilderOptionsSetLoopVectorization(opt, 1);
  LLVMPassBuilderOptionsSetSLPVectorization(opt, 1);
  bool ok = llvm_ok(LLVMRunPasses(m, "default<O3>", tm, opt), "default<O3>", diag);
  LLVMDisposePassBuilderOptions(opt);
  return ok;
}

