/* llvm_internal.h — what the LLVM backend's builders (llvm_*.c) share with
 * llvm_jit.c and the tests of the LLVM backend (not part of the codegen stage's interface,
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
/* What a module holds: the whole program (kernels, forward, backward, step,
 * the descriptor `model` and main), or one of the two parts `trainc run`
 * compiles apart: the kernels with forward, backward and step (external,
 * by those names), and the descriptor with main, whose forward, backward
 * and step are the external trc_jit_forward, trc_jit_backward and
 * trc_jit_step. */
typedef enum { LLVM_WHOLE, LLVM_KERNELS, LLVM_MAIN } LlvmPart;
/* part of the Program as a module of ctx for tm's target (its vector math
 * as o says), verified; NULL after reporting through diag. */
LLVMModuleRef llvm_build_module(LLVMContextRef ctx, const Program *p, LLVMTargetMachineRef tm,
                                const LlvmOptions *o, LlvmPart part, Diag *diag);
/* LLVMVerifyModule, its message a diagnostic. */
bool llvm_verify(LLVMModuleRef m, Diag *diag);
/* The new pass manager's default<O3> pipeline for tm; LLVM's warnings on
 * stderr under o->verbose only, its remarks never. */
bool llvm_optimize(LLVMModuleRef m, LLVMTargetMachineRef tm, const LlvmOptions *o, Diag *diag);
/* Reports err (consumed) as "LLVM: WHAT: message"; false when there was one. */
bool llvm_ok(LLVMErrorRef err, const char *what, Diag *diag);

#endif
