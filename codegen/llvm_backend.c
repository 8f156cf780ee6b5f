/* llvm_backend.c — builds a Program as an LLVM module through LLVM's C API.
 *
 * The module holds what emit_c prints, function for function: an internal
 * function per kernel (k<id>, the op table's loop nest; a GEMM as a
 * trc_gemm call; kernels with the same code share one; a loop the IR
 * marked parallel as a function of a range of its chunks, run through the
 * runtime's trc_parallel_for as trc_kernel_loop decides; a reduction loop
 * in K_LANES lanes, as ir.h defines it), forward(),
 * backward() with the gradient buckets' trc_step_bucket_ready calls,
 * step(), the parameter and input tables, the trc_model descriptor `model`
 * with its compiled defaults, and main().
 *
 * Float semantics are C's under -std=c11 (as build.c compiles the C
 * trainers): every operation is the one the C expression names, in the
 * same order, with no fast-math flags and no fmuladd (so nothing is
 * contracted into an FMA), float constants read back from the same decimal
 * text the C backend prints, and the same libm calls (expf, logf, tanhf,
 * erff), which the vectorizer widens into glibc's libmvec vector functions
 * as GCC does for the C trainers (see "vector math" below). sqrt is
 * llvm.sqrt, which like sqrtf is correctly rounded. Kernel buffers are
 * noalias parameters, as the C kernels' pointers are restrict.
 *
 * This file puts a module together (build_part) and holds the commands;
 * the parts are built by llvm_kernels.c (kernels, vector math), llvm_step.c
 * (forward, backward, step), llvm_abi.c (the tables, main) and
 * llvm_target.c (target machine, verifier, pipeline), sharing llvm_gen.h. */
#include "llvm_gen.h"

static void kernels(Gen *g, const int *ids, int n) {
  for (int i = 0; i < n; i++) llvm_define_kernel(g, ids[i]);
}

/* The entry points of part LLVM_MAIN's descriptor: declarations of the
 * functions `trainc run` puts in their place. */
static void declare_entry_points(Gen *g, Callee *forward, Callee *backward, Callee *step) {
  LLVMTypeRef two[2] = {g->ptr, g->ptr};
  Callee *c[3] = {forward, backward, step};
  LLVMTypeRef types[3] = {LLVMFunctionType(g->void_t, &g->ptr, 1, 0),
                          LLVMFunctionType(g->void_t, two, 2, 0),
                          LLVMFunctionType(g->f64, &g->ptr, 1, 0)};
  static const char *const names[3] = {"trc_jit_forward", "trc_jit_backward", "trc_jit_step"};
  for (int i = 0; i < 3; i++)
    *c[i] = (Callee){types[i], LLVMAddFunction(g->mod, names[i], types[i])};
}

/* The module's functions and data as part says (llvm_internal.h). */
static void build_part(Gen *g, LlvmPart part, Diag *diag) {
  Callee forward, backward, step;
  if (part == LLVM_MAIN) {
    declare_entry_points(g, &forward, &backward, &step);
  } else {
    kernels(g, g->p->forward, g->p->n_forward);
    kernels(g, g->p->backward, g->p->n_backward);
    forward = llvm_define_forward(g), backward = llvm_define_backward(g);
    step = llvm_define_step(g, forward, backward);
  }
  if (part == LLVM_KERNELS) {
    LLVMSetLinkage(forward.fn, LLVMExternalLinkage);
    LLVMSetLinkage(backward.fn, LLVMExternalLinkage);
    LLVMSetLinkage(step.fn, LLVMExternalLinkage);
  } else {
    llvm_define_main(g, llvm_define_model(g, forward, backward, step, diag));
  }
  llvm_keep_vector_versions(g); /* none in LLVM_MAIN */
}

LLVMModuleRef llvm_build_module(LLVMContextRef ctx, const Program *p, LLVMTargetMachineRef tm,
                                const LlvmOptions *o, LlvmPart part, Diag *diag) {
  int errors = diag->errors;
  Gen g = {.ctx = ctx,
           .p = p,
           .b = LLVMCreateBuilderInContext(ctx),
           .td = LLVMCreateTargetDataLayout(tm)};
  g.mod = LLVMModuleCreateWithNameInContext(p->g->model_name, ctx);
  LLVMSetSourceFileName(g.mod, p->g->source_path, strlen(p->g->source_path));
  char *triple = LLVMGetTargetMachineTriple(tm);
  LLVMSetTarget(g.mod, triple);
  LLVMDisposeMessage(triple);
  LLVMSetModuleDataLayout(g.mod, g.td);
  g.ptr = LLVMPointerTypeInContext(ctx, 0), g.i8 = LLVMInt8TypeInContext(ctx);
  g.i32 = LLVMInt32TypeInContext(ctx), g.i64 = LLVMInt64TypeInContext(ctx);
  g.f32 = LLVMFloatTypeInContext(ctx), g.f64 = LLVMDoubleTypeInContext(ctx);
  g.void_t = LLVMVoidTypeInContext(ctx);
  g.kernel = xcalloc((size_t)p->g->n, sizeof *g.kernel);
  g.forms = xcalloc((size_t)p->g->n, sizeof *g.forms);
  g.buf = xcalloc((size_t)p->g->n, sizeof *g.buf);
  g.maxf = llvm_define_max(&g, "trc_maxf", LLVMRealOGT);
  g.minf = llvm_define_max(&g, "trc_minf", LLVMRealOLT);
  g.uniform = llvm_define_uniform(&g);
  g.sqrt = llvm_intrinsic(&g, "llvm.sqrt", g.f32);
  llvm_choose_math_isas(&g, tm, o);
  build_part(&g, part, diag);
  free(g.kernel);
  free(g.buf);
  for (int i = 0; i < p->g->n; i++) kernel_form_free(&g.forms[i]);
  free(g.forms);
  free(g.codes);
  LLVMDisposeBuilder(g.b);
  LLVMDisposeTargetData(g.td);
  if (diag->errors == errors && llvm_verify(g.mod, diag)) return g.mod;
  LLVMDisposeModule(g.mod);
  return NULL;
}

/* ---- the commands ---- */

bool emit_llvm(FILE *out, const Program *p, const LlvmOptions *o, Diag *diag) {
  LLVMTargetMachineRef tm;
  if (!llvm_target_machine(o, &tm, diag)) return false;
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = llvm_build_module(ctx, p, tm, o, LLVM_WHOLE, diag);
  if (m) {
    char *text = LLVMPrintModuleToString(m);
    fputs(text, out);
    LLVMDisposeMessage(text);
    LLVMDisposeModule(m);
  }
  LLVMContextDispose(ctx);
  LLVMDisposeTargetMachine(tm);
  return m != NULL;
}

bool build_llvm(const char *obj_path, const Program *p, const LlvmOptions *o, Diag *diag) {
  LLVMTargetMachineRef tm;
  if (!llvm_target_machine(o, &tm, diag)) return false;
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = llvm_build_module(ctx, p, tm, o, LLVM_WHOLE, diag);
  bool ok = m && llvm_optimize(m, tm, o, diag);
  char *err = NULL;
  if (ok && LLVMTargetMachineEmitToFile(tm, m, obj_path, LLVMObjectFile, &err)) {
    diag_file_error(diag, obj_path, "LLVM: cannot write the object file: %s", err);
    ok = false;
  }
  LLVMDisposeMessage(err);
  if (m) LLVMDisposeModule(m);
  LLVMContextDispose(ctx);
  LLVMDisposeTargetMachine(tm);
  return ok;
}

