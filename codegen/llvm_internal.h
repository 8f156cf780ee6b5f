/* llvm_internal.h — what llvm_backend.c shares with llvm_jit.c and the
 * tests of the LLVM backend (not part of the codegen stage's interface,
 * which is codegen.h). */
#ifndef TRAINC_LLVM_INTERNAL_H
#define TRAINC_LLVM_INTERNAL_H

#include "codegen.h"

#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/TargetMachine.h>

/* The target machine for o (this machine's CPU and features unless o names
 * others), optimizing at the highest level, position-independent code. An
 * unknown CPU or feature, which LLVM only warns about, is an error. */
bool llvm_target_machine(const LlvmOptions *o, LLVMTargetMachineRef *tm, Diag *diag);
/* The Program as a module of ctx for tm's target (its vector math as o
 * says), verified; NULL after reporting through diag. */
LLVMModuleRef llvm_build_module(LLVMContextRef ctx, const Program *p, LLVMTargetMachineRef tm,
                                const LlvmOptions *o, Diag *diag);
/* LLVMVerifyModule, its message a diagnostic. */
bool llvm_verify(LLVMModuleRef m, Diag *diag);
/* The new pass manager's default<O3> pipeline for tm. */
bool llvm_optimize(LLVMModuleRef m, LLVMTargetMachineRef tm, Diag *diag);
/* Reports err (consumed) as "LLVM: WHAT: message"; false when there was one. */
bool llvm_ok(LLVMErrorRef err, const char *what, Diag *diag);

#endif
