/* llvm_gen.h — the LLVM backend's module-building state and the small
 * helpers its builders share (llvm_kernels.c, llvm_step.c, llvm_abi.c,
 * llvm_backend.c); internal to them, as llvm_internal.h is to the backend
 * and its JIT. */
#ifndef TRAINC_LLVM_GEN_H
#define TRAINC_LLVM_GEN_H

#include "llvm_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct MathIsa; /* a libmvec vector ISA (llvm_kernels.c) */

/* ---- module building state ---- */

typedef struct {
  LLVMTypeRef type;
  LLVMValueRef fn;
} Callee;

typedef struct {
  const char *code; /* its kernel_form's */
  LLVMValueRef fn;
} KernelCode;

typedef struct {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMTargetDataRef td;
  const Program *p;
  LLVMTypeRef ptr, i8, i32, i64, f32, f64, void_t;
  Callee maxf, minf, uniform, sqrt;
  LLVMValueRef *kernel; /* per node id: its function, or NULL */
  KernelForm *forms;    /* per node id: its kernel_form (a kernel's) */
  KernelCode *codes;    /* the kernel functions built so far */
  int n_codes, cap_codes;
  /* the kernel being built */
  const KernelForm *form;
  LLVMValueRef *stream; /* per random stream of form: its value in this function */
  LLVMValueRef *buf;   /* per node id: its pointer in this kernel */
  LLVMValueRef *index; /* per loop variable: its value */
  LLVMValueRef *local; /* per local: its stack slot */
  /* libmvec's vector ISAs for this target (vector math), widest first */
  const struct MathIsa *math_isa[4];
  int n_math_isa;
  LLVMValueRef math_used[16]; /* the vector functions declared (llvm.compiler.used) */
  int n_math_used;
} Gen;

static inline LLVMValueRef i64c(Gen *g, int64_t v) {
  return LLVMConstInt(g->i64, (unsigned long long)v, 1);
}
static inline LLVMValueRef u64c(Gen *g, uint64_t v) { return LLVMConstInt(g->i64, v, 0); }
static inline LLVMValueRef i32c(Gen *g, int64_t v) {
  return LLVMConstInt(g->i32, (unsigned long long)v, 1);
}

/* The float the C backend's literal reads back to: its "%.9g" text through
 * strtof, not a direct rounding of the double (which may differ). */
static inline LLVMValueRef float_const(Gen *g, double v) {
  char text[64];
  snprintf(text, sizeof text, "%.9g", v);
  return LLVMConstReal(g->f32, isinf(v) ? v : strtof(text, NULL));
}

/* A function of this module; internal unless it is main. Its loops are
 * vectorized up to 512 bits, as the C backend's -mprefer-vector-width=512
 * asks GCC (driver/CMakeLists.txt): LLVM tunes Intel's AVX-512 cores for
 * 256 (no effect on a target without AVX-512). */
static inline Callee define(Gen *g, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, int n) {
  static const char width_key[] = "prefer-vector-width", width[] = "512";
  LLVMTypeRef type = LLVMFunctionType(ret, params, (unsigned)n, 0);
  LLVMValueRef fn = LLVMAddFunction(g->mod, name, type);
  if (strcmp(name, "main")) LLVMSetLinkage(fn, LLVMInternalLinkage);
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateStringAttribute(g->ctx, width_key, sizeof width_key - 1, width,
                                                    sizeof width - 1));
  LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
  return (Callee){type, fn};
}

/* Calls an external function (the runtime, BLAS, libm), declared at its
 * first call with the types of the arguments (at most MAX_EXT_ARGS:
 * trc_gemm's 20 are the most). */
enum { MAX_EXT_ARGS = 24 };
static inline LLVMValueRef call_ext(Gen *g, const char *name, LLVMTypeRef ret, LLVMValueRef *args, int n) {
  LLVMTypeRef params[MAX_EXT_ARGS];
  if (n > MAX_EXT_ARGS) diag_internal_error("%s: %d arguments, more than %d", name, n, MAX_EXT_ARGS);
  for (int i = 0; i < n; i++) params[i] = LLVMTypeOf(args[i]);
  LLVMTypeRef type = LLVMFunctionType(ret, params, (unsigned)n, 0);
  LLVMValueRef fn = LLVMGetNamedFunction(g->mod, name);
  if (!fn) fn = LLVMAddFunction(g->mod, name, type);
  return LLVMBuildCall2(g->b, type, fn, args, (unsigned)n, "");
}

static inline LLVMValueRef call(Gen *g, Callee c, LLVMValueRef *args, int n) {
  return LLVMBuildCall2(g->b, c.type, c.fn, args, (unsigned)n, "");
}

/* A byte pointer at offset bytes into the arena a. */
static inline LLVMValueRef at(Gen *g, LLVMValueRef a, uint64_t offset) {
  LLVMValueRef off = u64c(g, offset);
  return LLVMBuildInBoundsGEP2(g->b, g->i8, a, &off, 1, "");
}

/* ---- loops: `for (int64_t i = 0; i < bound; i++)` ---- */

typedef struct {
  LLVMBasicBlockRef pre, head, exit;
  LLVMValueRef i, bound;
  LLVMValueRef latch; /* the branch back to head, set by llvm_loop_end */
} Loop;

/* Opens the loop and returns i; a bound not known to be positive is tested
 * first, as C's for does (llvm_kernels.c). */
LLVMValueRef llvm_loop_begin(Gen *g, LLVMValueRef bound, Loop *l);
void llvm_loop_end(Gen *g, Loop *l);


/* ---- llvm_kernels.c: kernels, their expressions, vector math ---- */
/* trc_maxf / trc_minf: a when a > b or b is NaN, else b (with < for min). */
Callee llvm_define_max(Gen *g, const char *name, LLVMRealPredicate pred);
/* trc_kernel_uniform(key, stream, counter): (float)(z >> 40) * 2^-24. */
Callee llvm_define_uniform(Gen *g);
Callee llvm_intrinsic(Gen *g, const char *name, LLVMTypeRef type);
/* The ISAs of tm's x86-64 target that libmvec serves: SSE2, which every
 * x86-64 CPU has, and the wider ones its features name (an --mcpu without
 * --mattr names none: its vectors are SSE's). None when o asks for scalar
 * math or the target is not x86-64. */
void llvm_choose_math_isas(Gen *g, LLVMTargetMachineRef tm, const LlvmOptions *o);
/* @llvm.compiler.used: the vector functions, which no call names until the
 * vectorizer writes one. */
void llvm_keep_vector_versions(Gen *g);
void llvm_define_kernel(Gen *g, int id);
/* k<id>(its buffers in the arena a, its streams). */
void llvm_call_kernel(Gen *g, LLVMValueRef a, int id);

/* ---- llvm_step.c: forward(), backward(), step() ---- */
Callee llvm_define_forward(Gen *g);
Callee llvm_define_backward(Gen *g);
/* step(s): the step's operations (step.h) in order, returning the mean loss. */
Callee llvm_define_step(Gen *g, Callee forward, Callee backward);

/* ---- llvm_abi.c: the runtime's tables and main ---- */
/* The descriptor `model`, as c_backend.c's print_model fills it. */
LLVMValueRef llvm_define_model(Gen *g, Callee forward, Callee backward, Callee step, Diag *diag);
/* int main(int argc, char **argv) { return trc_main(&model, argc, argv); } */
void llvm_define_main(Gen *g, LLVMValueRef model);

#endif
