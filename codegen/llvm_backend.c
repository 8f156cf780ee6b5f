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
 * noalias parameters, as the C kernels' pointers are restrict. */
#include "llvm_internal.h"
#include "step.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <math.h>
#include <stddef.h>
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

bool llvm_optimize(LLVMModuleRef m, LLVMTargetMachineRef tm, Diag *diag) {
  LLVMPassBuilderOptionsRef opt = LLVMCreatePassBuilderOptions();
  LLVMPassBuilderOptionsSetLoopVectorization(opt, 1);
  LLVMPassBuilderOptionsSetSLPVectorization(opt, 1);
  bool ok = llvm_ok(LLVMRunPasses(m, "default<O3>", tm, opt), "default<O3>", diag);
  LLVMDisposePassBuilderOptions(opt);
  return ok;
}

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

static LLVMValueRef i64c(Gen *g, int64_t v) {
  return LLVMConstInt(g->i64, (unsigned long long)v, 1);
}
static LLVMValueRef u64c(Gen *g, uint64_t v) { return LLVMConstInt(g->i64, v, 0); }
static LLVMValueRef i32c(Gen *g, int64_t v) {
  return LLVMConstInt(g->i32, (unsigned long long)v, 1);
}

/* The float the C backend's literal reads back to: its "%.9g" text through
 * strtof, not a direct rounding of the double (which may differ). */
static LLVMValueRef float_const(Gen *g, double v) {
  char text[64];
  snprintf(text, sizeof text, "%.9g", v);
  return LLVMConstReal(g->f32, isinf(v) ? v : strtof(text, NULL));
}

/* A function of this module; internal unless it is main. */
static Callee define(Gen *g, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, int n) {
  LLVMTypeRef type = LLVMFunctionType(ret, params, (unsigned)n, 0);
  LLVMValueRef fn = LLVMAddFunction(g->mod, name, type);
  if (strcmp(name, "main")) LLVMSetLinkage(fn, LLVMInternalLinkage);
  LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
  return (Callee){type, fn};
}

/* Calls an external function (the runtime, BLAS, libm), declared at its
 * first call with the types of the arguments (at most MAX_EXT_ARGS:
 * trc_gemm's 20 are the most). */
enum { MAX_EXT_ARGS = 24 };
static LLVMValueRef call_ext(Gen *g, const char *name, LLVMTypeRef ret, LLVMValueRef *args, int n) {
  LLVMTypeRef params[MAX_EXT_ARGS];
  if (n > MAX_EXT_ARGS) diag_internal_error("%s: %d arguments, more than %d", name, n, MAX_EXT_ARGS);
  for (int i = 0; i < n; i++) params[i] = LLVMTypeOf(args[i]);
  LLVMTypeRef type = LLVMFunctionType(ret, params, (unsigned)n, 0);
  LLVMValueRef fn = LLVMGetNamedFunction(g->mod, name);
  if (!fn) fn = LLVMAddFunction(g->mod, name, type);
  return LLVMBuildCall2(g->b, type, fn, args, (unsigned)n, "");
}

static LLVMValueRef call(Gen *g, Callee c, LLVMValueRef *args, int n) {
  return LLVMBuildCall2(g->b, c.type, c.fn, args, (unsigned)n, "");
}

/* A byte pointer at offset bytes into the arena a. */
static LLVMValueRef at(Gen *g, LLVMValueRef a, uint64_t offset) {
  LLVMValueRef off = u64c(g, offset);
  return LLVMBuildInBoundsGEP2(g->b, g->i8, a, &off, 1, "");
}

/* ---- loops: `for (int64_t i = 0; i < bound; i++)` ---- */

typedef struct {
  LLVMBasicBlockRef pre, head, exit;
  LLVMValueRef i, bound;
} Loop;

/* Opens the loop and returns i; a bound not known to be positive is tested
 * first, as C's for does. */
static LLVMValueRef loop_begin(Gen *g, LLVMValueRef bound, Loop *l) {
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(g->b));
  l->pre = LLVMGetInsertBlock(g->b);
  l->head = LLVMAppendBasicBlockInContext(g->ctx, fn, "loop");
  l->exit = LLVMCreateBasicBlockInContext(g->ctx, "done");
  l->bound = bound;
  bool positive = LLVMIsAConstantInt(bound) && LLVMConstIntGetSExtValue(bound) > 0;
  if (positive)
    LLVMBuildBr(g->b, l->head);
  else
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, bound, i64c(g, 0), ""), l->head, l->exit);
  LLVMPositionBuilderAtEnd(g->b, l->head);
  l->i = LLVMBuildPhi(g->b, g->i64, "i");
  return l->i;
}

static void loop_end(Gen *g, Loop *l) {
  LLVMValueRef next = LLVMBuildNSWAdd(g->b, l->i, i64c(g, 1), "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
  LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, next, l->bound, ""), l->head, l->exit);
  LLVMValueRef values[2] = {i64c(g, 0), next};
  LLVMBasicBlockRef blocks[2] = {l->pre, latch};
  LLVMAddIncoming(l->i, values, blocks, 2);
  LLVMAppendExistingBasicBlock(LLVMGetBasicBlockParent(latch), l->exit);
  LLVMPositionBuilderAtEnd(g->b, l->exit);
}

/* ---- the helpers trainc.h gives generated C (trc_maxf, trc_kernel_uniform) ---- */

/* trc_maxf / trc_minf: a when a > b or b is NaN, else b (with < for min). */
static Callee define_max(Gen *g, const char *name, LLVMRealPredicate pred) {
  LLVMTypeRef params[2] = {g->f32, g->f32};
  Callee c = define(g, name, g->f32, params, 2);
  LLVMValueRef a = LLVMGetParam(c.fn, 0), b = LLVMGetParam(c.fn, 1);
  LLVMValueRef take_a = LLVMBuildOr(g->b, LLVMBuildFCmp(g->b, pred, a, b, ""),
                                    LLVMBuildFCmp(g->b, LLVMRealUNO, b, b, ""), "");
  LLVMBuildRet(g->b, LLVMBuildSelect(g->b, take_a, a, b, ""));
  return c;
}

/* splitmix64's output function, trc_mix64. */
static LLVMValueRef mix64(Gen *g, LLVMValueRef z) {
  static const struct {
    int shift;
    uint64_t mul;
  } rounds[] = {{30, 0xBF58476D1CE4E5B9ull}, {27, 0x94D049BB133111EBull}, {31, 0}};
  for (size_t r = 0; r < sizeof rounds / sizeof rounds[0]; r++) {
    z = LLVMBuildXor(g->b, z, LLVMBuildLShr(g->b, z, u64c(g, (uint64_t)rounds[r].shift), ""), "");
    if (rounds[r].mul) z = LLVMBuildMul(g->b, z, u64c(g, rounds[r].mul), "");
  }
  return z;
}

/* trc_kernel_uniform(key, stream, counter): (float)(z >> 40) * 2^-24. */
static Callee define_uniform(Gen *g) {
  LLVMTypeRef params[3] = {g->ptr, g->i64, g->i64};
  Callee c = define(g, "trc_kernel_uniform", g->f32, params, 3);
  LLVMValueRef key = LLVMGetParam(c.fn, 0), one = u64c(g, 1),
               golden = u64c(g, 0x9E3779B97F4A7C15ull);
  LLVMValueRef lo = LLVMBuildZExt(g->b, LLVMBuildLoad2(g->b, g->i32, key, ""), g->i64, "");
  LLVMValueRef hi_ptr = LLVMBuildInBoundsGEP2(g->b, g->i32, key, &one, 1, "");
  LLVMValueRef hi = LLVMBuildZExt(g->b, LLVMBuildLoad2(g->b, g->i32, hi_ptr, ""), g->i64, "");
  LLVMValueRef k = LLVMBuildOr(g->b, lo, LLVMBuildShl(g->b, hi, u64c(g, 32), ""), "");
  LLVMValueRef s =
      LLVMBuildMul(g->b, golden, LLVMBuildAdd(g->b, LLVMGetParam(c.fn, 1), one, ""), "");
  LLVMValueRef n =
      LLVMBuildMul(g->b, golden, LLVMBuildAdd(g->b, LLVMGetParam(c.fn, 2), one, ""), "");
  LLVMValueRef z = mix64(g, LLVMBuildAdd(g->b, mix64(g, LLVMBuildAdd(g->b, k, s, "")), n, ""));
  LLVMValueRef u = LLVMBuildUIToFP(g->b, LLVMBuildLShr(g->b, z, u64c(g, 40), ""), g->f32, "");
  LLVMBuildRet(g->b, LLVMBuildFMul(g->b, u, LLVMConstReal(g->f32, 0x1.0p-24), ""));
  return c;
}

static Callee intrinsic(Gen *g, const char *name, LLVMTypeRef type) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  return (Callee){LLVMIntrinsicGetType(g->ctx, id, &type, 1),
                  LLVMGetIntrinsicDeclaration(g->mod, id, &type, 1)};
}

/* ---- vector math: glibc's libmvec ----
 * The kernels call libm's expf, logf, tanhf and erff, declared as the C
 * trainers see them under -fno-math-errno: without memory effects. Each
 * call names libmvec's vector versions of its function for the target's
 * ISAs in the vector function ABI's "vector-function-abi-variant"
 * attribute, and the loop vectorizer widens a loop over the call into calls
 * of the version of its vector factor, as GCC does for the C trainers with
 * runtime/trainc.h's declarations. The call is nobuiltin: else LLVM knows
 * it as its llvm.exp intrinsic, which it widens into one scalar call per
 * element. Where the ISAs differ (AVX-512's 16 lanes, AVX2's 8, SSE's 4)
 * the versions may round differently in the last bits; all are within 4
 * ulp of libm (tests/codegen/vector_math.sh). */

struct MathIsa {
  char letter; /* the vector function ABI's: b SSE, c AVX, d AVX2, e AVX-512 */
  int lanes;   /* floats per call */
  const char *feature;
};

/* Widest first; one ISA per lane count (AVX2's d before AVX's c). */
static const struct MathIsa math_isas[] = {
    {'e', 16, "avx512f"}, {'d', 8, "avx2"}, {'c', 8, "avx"}, {'b', 4, "sse2"}};

/* Whether LLVM's feature list (+a,-b,...) turns on feature. */
static bool has_feature(const char *features, const char *feature) {
  size_t n = strlen(feature);
  for (const char *f = features; f && *f;) {
    size_t len = strcspn(f, ",");
    if (len == n + 1 && *f == '+' && !strncmp(f + 1, feature, n)) return true;
    f += len + (f[len] == ',');
  }
  return false;
}

/* The ISAs of tm's x86-64 target that libmvec serves: SSE2, which every
 * x86-64 CPU has, and the wider ones its features name (an --mcpu without
 * --mattr names none: its vectors are SSE's). None when o asks for scalar
 * math or the target is not x86-64. */
static void choose_math_isas(Gen *g, LLVMTargetMachineRef tm, const LlvmOptions *o) {
  char *triple = LLVMGetTargetMachineTriple(tm), *features = LLVMGetTargetMachineFeatureString(tm);
  int lanes_taken = 0;
  for (size_t i = 0; i < sizeof math_isas / sizeof math_isas[0]; i++) {
    const struct MathIsa *isa = &math_isas[i];
    bool usable = isa->lanes == 4 || has_feature(features, isa->feature);
    if (o->scalar_math || strncmp(triple, "x86_64", 6) || !usable || lanes_taken == isa->lanes)
      continue;
    g->math_isa[g->n_math_isa++] = isa;
    lanes_taken = isa->lanes;
  }
  LLVMDisposeMessage(triple);
  LLVMDisposeMessage(features);
}

static LLVMAttributeRef enum_attr(Gen *g, const char *name, uint64_t value) {
  return LLVMCreateEnumAttribute(g->ctx, LLVMGetEnumAttributeKindForName(name, strlen(name)),
                                 value);
}

/* A math function's attributes: nounwind, willreturn, memory(none). */
static void pure_function(Gen *g, LLVMValueRef fn) {
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, enum_attr(g, "nounwind", 0));
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, enum_attr(g, "willreturn", 0));
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, enum_attr(g, "memory", 0));
}

/* Declares libmvec's version of fn for isa (kept to the vectorizer by
 * llvm.compiler.used) and returns its mangled name. */
static char *declare_vector_version(Gen *g, const char *fn, const struct MathIsa *isa) {
  char *name = xsprintf("_ZGV%cN%dv_%s", isa->letter, isa->lanes, fn);
  if (!LLVMGetNamedFunction(g->mod, name)) {
    LLVMTypeRef v = LLVMVectorType(g->f32, (unsigned)isa->lanes);
    LLVMValueRef f = LLVMAddFunction(g->mod, name, LLVMFunctionType(v, &v, 1, 0));
    pure_function(g, f);
    g->math_used[g->n_math_used++] = f;
  }
  return name;
}

/* fn(a), a libm function of a float, with its vector versions named. */
static LLVMValueRef math_call(Gen *g, const char *fn, LLVMValueRef a) {
  bool declared = LLVMGetNamedFunction(g->mod, fn) != NULL;
  LLVMValueRef call = call_ext(g, fn, g->f32, &a, 1);
  if (!declared) pure_function(g, LLVMGetCalledValue(call));
  LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex, enum_attr(g, "nobuiltin", 0));
  StrBuf variants = {0};
  for (int i = 0; i < g->n_math_isa; i++) {
    char *name = declare_vector_version(g, fn, g->math_isa[i]);
    sb_printf(&variants, "%s%s(%s)", i ? "," : "", name, name);
    free(name);
  }
  if (g->n_math_isa) {
    static const char key[] = "vector-function-abi-variant";
    char *text = sb_take(&variants);
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex,
                             LLVMCreateStringAttribute(g->ctx, key, sizeof key - 1, text,
                                                       (unsigned)strlen(text)));
    free(text);
  }
  return call;
}

/* @llvm.compiler.used: the vector functions, which no call names until the
 * vectorizer writes one. */
static void keep_vector_versions(Gen *g) {
  if (!g->n_math_used) return;
  LLVMValueRef init = LLVMConstArray2(g->ptr, g->math_used, (uint64_t)g->n_math_used);
  LLVMValueRef used = LLVMAddGlobal(g->mod, LLVMTypeOf(init), "llvm.compiler.used");
  LLVMSetInitializer(used, init);
  LLVMSetLinkage(used, LLVMAppendingLinkage);
  LLVMSetSection(used, "llvm.metadata");
}

/* ---- kernel expressions: values are i64 (C's integers) or float ---- */

static bool is_int(LLVMValueRef v) { return LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMIntegerTypeKind; }

/* C's conversion of an integer operand to float. */
static LLVMValueRef as_float(Gen *g, LLVMValueRef v) {
  return is_int(v) ? LLVMBuildSIToFP(g->b, v, g->f32, "") : v;
}

static LLVMTypeRef elem_type(Gen *g, int buf) {
  DType t = g->p->g->nodes[buf].dtype;
  return t == DT_F32 ? g->f32 : t == DT_I32 ? g->i32 : g->i8;
}

static LLVMValueRef elem_ptr(Gen *g, int buf, LLVMValueRef index) {
  return LLVMBuildInBoundsGEP2(g->b, elem_type(g, buf), g->buf[buf], &index, 1, "");
}

/* buf[index]: a float, or an integer element widened to i64 (u8 unsigned). */
static LLVMValueRef load(Gen *g, int buf, LLVMValueRef index) {
  LLVMValueRef v = LLVMBuildLoad2(g->b, elem_type(g, buf), elem_ptr(g, buf, index), "");
  LLVMSetAlignment(v, (unsigned)dtype_size(g->p->g->nodes[buf].dtype));
  DType t = g->p->g->nodes[buf].dtype;
  if (t == DT_F32) return v;
  return t == DT_I32 ? LLVMBuildSExt(g->b, v, g->i64, "") : LLVMBuildZExt(g->b, v, g->i64, "");
}

static LLVMValueRef expr(Gen *g, const KExpr *e);

static LLVMValueRef unary(Gen *g, const KExpr *e) {
  static const char *libm[] = {
      [KU_EXP] = "expf", [KU_LOG] = "logf", [KU_TANH] = "tanhf", [KU_ERF] = "erff"};
  LLVMValueRef a = expr(g, e->a);
  if (e->op == KU_NEG) return is_int(a) ? LLVMBuildNSWNeg(g->b, a, "") : LLVMBuildFNeg(g->b, a, "");
  a = as_float(g, a);
  if (e->op == KU_SQRT) return call(g, g->sqrt, &a, 1);
  return math_call(g, libm[e->op], a);
}

static LLVMValueRef binary(Gen *g, const KExpr *e) {
  LLVMValueRef a = expr(g, e->a), b = expr(g, e->b);
  if (e->op == KB_MAX || e->op == KB_MIN) {
    LLVMValueRef args[2] = {as_float(g, a), as_float(g, b)};
    return call(g, e->op == KB_MAX ? g->maxf : g->minf, args, 2);
  }
  static const LLVMOpcode int_op[] = {[KB_ADD] = LLVMAdd, [KB_SUB] = LLVMSub, [KB_MUL] = LLVMMul,
                                      [KB_DIV] = LLVMSDiv};
  static const LLVMOpcode float_op[] = {[KB_ADD] = LLVMFAdd, [KB_SUB] = LLVMFSub,
                                        [KB_MUL] = LLVMFMul, [KB_DIV] = LLVMFDiv};
  if (is_int(a) && is_int(b)) { /* C's int64_t arithmetic: overflow is undefined */
    LLVMValueRef v = LLVMBuildBinOp(g->b, int_op[e->op], a, b, "");
    if (e->op != KB_DIV && LLVMIsABinaryOperator(v)) LLVMSetNSW(v, 1);
    return v;
  }
  return LLVMBuildBinOp(g->b, float_op[e->op], as_float(g, a), as_float(g, b), "");
}

/* `a > 0.0f ? b : c`, and `a == b ? 1.0f : 0.0f`. */
static LLVMValueRef select_expr(Gen *g, const KExpr *e) {
  LLVMValueRef cond =
      LLVMBuildFCmp(g->b, LLVMRealOGT, as_float(g, expr(g, e->a)), LLVMConstReal(g->f32, 0), "");
  LLVMValueRef b = expr(g, e->b), c = expr(g, e->c);
  if (!is_int(b) || !is_int(c)) b = as_float(g, b), c = as_float(g, c);
  return LLVMBuildSelect(g->b, cond, b, c, "");
}

static LLVMValueRef equal_expr(Gen *g, const KExpr *e) {
  LLVMValueRef a = expr(g, e->a), b = expr(g, e->b), eq;
  if (is_int(a) && is_int(b))
    eq = LLVMBuildICmp(g->b, LLVMIntEQ, a, b, "");
  else
    eq = LLVMBuildFCmp(g->b, LLVMRealOEQ, as_float(g, a), as_float(g, b), "");
  return LLVMBuildSelect(g->b, eq, LLVMConstReal(g->f32, 1), LLVMConstReal(g->f32, 0), "");
}

static LLVMValueRef expr(Gen *g, const KExpr *e) {
  switch (e->kind) {
  case KE_CONST:
    return float_const(g, e->f);
  case KE_ICONST:
    return i64c(g, e->i);
  case KE_INDEX:
    return g->index[e->var];
  case KE_LOCAL:
    return LLVMBuildLoad2(g->b, g->f32, g->local[e->var], "");
  case KE_LOAD:
    return load(g, e->buf, expr(g, e->a));
  case KE_UNARY:
    return unary(g, e);
  case KE_BINARY:
    return binary(g, e);
  case KE_SELECT:
    return select_expr(g, e);
  case KE_EQ:
    return equal_expr(g, e);
  case KE_TO_FLOAT:
    return as_float(g, expr(g, e->a));
  case KE_RANDOM: {
    LLVMValueRef args[3] = {g->buf[e->buf], g->stream[kernel_form_stream(g->form, e->i)],
                            expr(g, e->a)};
    return call(g, g->uniform, args, 3);
  }
  }
  return NULL;
}

/* ---- kernel statements ---- */

/* v converted as C's assignment to an element of buf converts it. */
static LLVMValueRef to_elem(Gen *g, int buf, LLVMValueRef v) {
  LLVMTypeRef t = elem_type(g, buf);
  if (t == g->f32) return as_float(g, v);
  if (is_int(v)) return LLVMBuildTrunc(g->b, v, t, "");
  return t == g->i8 ? LLVMBuildFPToUI(g->b, v, t, "")
                    : LLVMBuildFPToSI(g->b, v, t, ""); /* u8, i32 */
}

static void store(Gen *g, const KStmt *s) {
  LLVMValueRef index = expr(g, s->index), v = expr(g, s->value);
  if (s->accumulate) { /* b[i] += v: b[i] = b[i] + v */
    LLVMValueRef old = load(g, s->buf, index);
    v = is_int(old) && is_int(v) ? LLVMBuildAdd(g->b, old, v, "")
                                 : LLVMBuildFAdd(g->b, as_float(g, old), as_float(g, v), "");
  }
  LLVMValueRef st = LLVMBuildStore(g->b, to_elem(g, s->buf, v), elem_ptr(g, s->buf, index));
  LLVMSetAlignment(st, (unsigned)dtype_size(g->p->g->nodes[s->buf].dtype));
}

/* `a op b` for a reduction's op. */
static LLVMValueRef combine(Gen *g, KBinaryOp op, LLVMValueRef a, LLVMValueRef b) {
  if (op == KB_ADD) return LLVMBuildFAdd(g->b, a, b, "");
  LLVMValueRef args[2] = {a, b};
  return call(g, op == KB_MAX ? g->maxf : g->minf, args, 2);
}

/* An alloca in the entry block of the function being built (not in a loop). */
static LLVMValueRef entry_alloca(Gen *g, LLVMTypeRef type) {
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(g->b));
  LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(fn);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(g->ctx);
  LLVMValueRef first = LLVMGetFirstInstruction(entry);
  if (first)
    LLVMPositionBuilderBefore(b, first);
  else
    LLVMPositionBuilderAtEnd(b, entry);
  LLVMValueRef v = LLVMBuildAlloca(b, type, "");
  LLVMDisposeBuilder(b);
  return v;
}

static LLVMValueRef lane_ptr(Gen *g, LLVMValueRef lanes, LLVMValueRef l) {
  return LLVMBuildInBoundsGEP2(g->b, g->f32, lanes, &l, 1, "");
}

/* Iterations first + l, l in [0, count), of reduction loop s, each into
 * lane l: lane[l] = lane[l] op e. */
static void lanes_take(Gen *g, const KStmt *s, KBinaryOp op, LLVMValueRef lanes,
                       LLVMValueRef first, LLVMValueRef count) {
  Loop l;
  LLVMValueRef lane = loop_begin(g, count, &l);
  g->index[s->var] = LLVMBuildNSWAdd(g->b, first, lane, "");
  LLVMValueRef p = lane_ptr(g, lanes, lane);
  LLVMValueRef e = as_float(g, expr(g, s->body[0]->value->b));
  LLVMBuildStore(g->b, combine(g, op, LLVMBuildLoad2(g->b, g->f32, p, ""), e), p);
  loop_end(g, &l);
}

/* Reduction loop s as ir.h's lanes define it and c_backend.c's
 * print_reduction prints it: full groups of K_LANES, the remainder, then
 * the lanes folded in halves into the local. */
static void reduction(Gen *g, const KStmt *s, const KLaneSplit *ls) {
  double identity = ls->op == KB_ADD ? 0.0 : ls->op == KB_MAX ? -INFINITY : INFINITY;
  LLVMValueRef lanes = entry_alloca(g, LLVMArrayType2(g->f32, K_LANES));
  LLVMValueRef t = g->local[ls->local], v[K_LANES];
  for (int l = 0; l < K_LANES; l++)
    LLVMBuildStore(g->b, l ? LLVMConstReal(g->f32, identity) : LLVMBuildLoad2(g->b, g->f32, t, ""),
                   lane_ptr(g, lanes, i64c(g, l)));
  /* the bounds: constants, or a bounded loop's at run time (limit >= 0) */
  LLVMValueRef end = ls->limit ? expr(g, ls->limit) : i64c(g, ls->extent);
  LLVMValueRef n_groups = ls->limit ? LLVMBuildSDiv(g->b, end, i64c(g, K_LANES), "")
                                    : i64c(g, ls->full / K_LANES);
  LLVMValueRef full = ls->limit ? LLVMBuildNSWMul(g->b, n_groups, i64c(g, K_LANES), "")
                                : i64c(g, ls->full);
  Loop groups;
  LLVMValueRef c = loop_begin(g, n_groups, &groups);
  lanes_take(g, s, ls->op, lanes, LLVMBuildNSWMul(g->b, c, i64c(g, K_LANES), ""),
             i64c(g, K_LANES));
  loop_end(g, &groups);
  if (ls->limit || ls->full < ls->extent)
    lanes_take(g, s, ls->op, lanes, full, LLVMBuildNSWSub(g->b, end, full, ""));
  for (int l = 0; l < K_LANES; l++)
    v[l] = LLVMBuildLoad2(g->b, g->f32, lane_ptr(g, lanes, i64c(g, l)), "");
  for (int w = K_LANES / 2; w > 0; w /= 2)
    for (int l = 0; l < w; l++) v[l] = combine(g, ls->op, v[l], v[l + w]);
  LLVMBuildStore(g->b, v[0], t);
}

static void stmts(Gen *g, KStmt **body, int n) {
  for (int i = 0; i < n; i++) {
    const KStmt *s = body[i];
    Loop l;
    KLaneSplit ls;
    if (kstmt_lane_split(s, &ls)) {
      reduction(g, s, &ls);
      continue;
    }
    switch (s->kind) {
    case KS_FOR:
      g->index[s->var] = loop_begin(g, s->limit ? expr(g, s->limit) : i64c(g, s->extent), &l);
      stmts(g, s->body, s->nbody);
      loop_end(g, &l);
      break;
    case KS_LOCAL:
    case KS_SET:
      LLVMBuildStore(g->b, as_float(g, expr(g, s->value)), g->local[s->var]);
      break;
    case KS_STORE:
      store(g, s);
      break;
    }
  }
}

/* ---- kernels: k<id>(buffers...), each buffer a noalias pointer ---- */

/* C = op(A) op(B), the batch gemm_dims describes: the runtime's trc_gemm
 * with the arguments c_backend.c's print_gemm prints (bitwise the same on
 * any number of threads). */
static void gemm_body(Gen *g, int id, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
  GemmDims d;
  gemm_dims(g->p->g, &g->p->g->nodes[id], &d);
  LLVMValueRef args[] = {i64c(g, d.batch), i64c(g, d.heads), i32c(g, d.trans_a),
                         i32c(g, d.trans_b), i64c(g, d.m), i64c(g, d.n), i64c(g, d.k),
                         a, i64c(g, d.lda), i64c(g, d.stride_a), i64c(g, d.head_stride_a),
                         b, i64c(g, d.ldb), i64c(g, d.stride_b), i64c(g, d.head_stride_b),
                         LLVMConstReal(g->f32, d.accumulate ? 1 : 0),
                         c, i64c(g, d.ldc), i64c(g, d.stride_c), i64c(g, d.head_stride_c)};
  call_ext(g, "trc_gemm", g->void_t, args, (int)(sizeof args / sizeof args[0]));
}

/* ---- kernels with the same form are one function ----
 * A kernel's buffers and dropout streams are its parameters (kernel_form,
 * as the C backend's functions), so the kernels of gpt124m's twelve
 * identical layers differ only in the pointers and stream numbers they are
 * called with: one function serves them all, which cuts the module (and
 * LLVM's time on it) by about as much. */

/* A convolution pass: the runtime's trc_conv2d with the arguments
 * c_backend.c's print_conv prints. */
static void conv_body(Gen *g, int id, LLVMValueRef a, LLVMValueRef b, LLVMValueRef out) {
  ConvDims d;
  conv_dims(g->p->g, &g->p->g->nodes[id], &d);
  LLVMValueRef args[] = {i32c(g, d.pass), i64c(g, d.n), i64c(g, d.c), i64c(g, d.h),
                         i64c(g, d.w), i64c(g, d.o), i64c(g, d.k), i64c(g, d.stride),
                         i64c(g, d.pad), a, b, out, i32c(g, d.accumulate)};
  call_ext(g, "trc_conv2d", g->void_t, args, (int)(sizeof args / sizeof args[0]));
}

static bool is_conv(const Gen *g, int id) {
  return op_info(g->p->g->nodes[id].op)->op_class == OPC_CONV;
}

/* The function already built for this code, or NULL. */
static LLVMValueRef same_code(const Gen *g, const char *code) {
  for (int i = 0; i < g->n_codes; i++)
    if (!strcmp(g->codes[i].code, code)) return g->codes[i].fn;
  return NULL;
}

/* A function of buffers (noalias pointers, their node ids), the i64
 * random streams of g->form and `extra` i64 parameters, with allocas for
 * kernel k's locals; g->buf and g->stream map the buffers and streams to
 * its parameters. */
static Callee define_with_buffers(Gen *g, const char *name, const int *ids, int n, int extra,
                                  const Kernel *k) {
  int streams = g->form->n_streams, all = n + streams + extra;
  LLVMTypeRef *params = xmalloc((size_t)(all + 1) * sizeof *params);
  for (int i = 0; i < all; i++) params[i] = i < n ? g->ptr : g->i64;
  Callee c = define(g, name, g->void_t, params, all);
  free(params);
  unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
  for (int i = 0; i < n; i++) {
    g->buf[ids[i]] = LLVMGetParam(c.fn, (unsigned)i);
    LLVMAddAttributeAtIndex(c.fn, (unsigned)i + 1, LLVMCreateEnumAttribute(g->ctx, noalias, 0));
  }
  for (int i = 0; i < streams; i++) g->stream[i] = LLVMGetParam(c.fn, (unsigned)(n + i));
  for (int v = 0; k && v < k->n_locals; v++) g->local[v] = LLVMBuildAlloca(g->b, g->f32, "t");
  return c;
}

/* Iterations [lo, hi) of the parallel loop s: chunks of pl->chunk, as
 * c_backend.c's print_loop_body writes them, in a function of s's buffers,
 * the kernel's streams, lo and hi. */
static LLVMValueRef define_loop_range(Gen *g, const char *name, const Kernel *k, KStmt *s,
                                      const KParallelLoop *pl) {
  int *ids, n = kernel_stmt_buffers(&s, 1, &ids);
  Callee c = define_with_buffers(g, name, ids, n, 2, k);
  free(ids);
  unsigned first = (unsigned)(n + g->form->n_streams);
  LLVMValueRef lo = LLVMGetParam(c.fn, first), hi = LLVMGetParam(c.fn, first + 1);
  Loop chunks, in_chunk;
  LLVMValueRef r = loop_begin(g, LLVMBuildNSWSub(g->b, hi, lo, ""), &chunks);
  LLVMValueRef i = LLVMBuildNSWAdd(g->b, lo, r, "");
  if (pl->chunk > 1) {
    LLVMValueRef j = loop_begin(g, i64c(g, pl->chunk), &in_chunk);
    i = LLVMBuildNSWAdd(g->b, LLVMBuildNSWMul(g->b, i, i64c(g, pl->chunk), ""), j, "");
  }
  g->index[s->var] = i;
  stmts(g, s->body, s->nbody);
  if (pl->chunk > 1) loop_end(g, &in_chunk);
  loop_end(g, &chunks);
  LLVMBuildRetVoid(g->b);
  return c.fn;
}

/* The trc_loop_body of parallel loop s: body(ctx, lo, hi) with ctx an
 * array of s's buffer pointers and the kernel's streams (8 bytes each),
 * calling the range function with them. */
static LLVMValueRef define_loop_body(Gen *g, const char *name, const Kernel *k, KStmt *s,
                                     const KParallelLoop *pl) {
  char range_name[64];
  snprintf(range_name, sizeof range_name, "%s_range", name);
  LLVMValueRef range = define_loop_range(g, range_name, k, s, pl);
  int *ids, n = kernel_stmt_buffers(&s, 1, &ids), all = n + g->form->n_streams;
  free(ids);
  LLVMTypeRef params[3] = {g->ptr, g->i64, g->i64};
  Callee c = define(g, name, g->void_t, params, 3);
  LLVMValueRef *args = xmalloc((size_t)(all + 2) * sizeof *args);
  for (int i = 0; i < all; i++) {
    LLVMValueRef slot = LLVMBuildInBoundsGEP2(g->b, g->ptr, LLVMGetParam(c.fn, 0),
                                              (LLVMValueRef[]){i64c(g, i)}, 1, "");
    args[i] = LLVMBuildLoad2(g->b, i < n ? g->ptr : g->i64, slot, "");
  }
  args[all] = LLVMGetParam(c.fn, 1), args[all + 1] = LLVMGetParam(c.fn, 2);
  LLVMBuildCall2(g->b, LLVMGlobalGetValueType(range), range, args, (unsigned)all + 2, "");
  LLVMBuildRetVoid(g->b);
  free(args);
  return c.fn;
}

/* trc_kernel_loop(n_chunks, work, body, ctx) of runtime/trainc.h, decided
 * here (work is a constant): trc_parallel_for on the trainer's threads when
 * work is at least TRC_PARALLEL_MIN_WORK, else body(ctx, 0, n_chunks). ctx:
 * the pointers of s's buffers. */
static void call_parallel_loop(Gen *g, KStmt *s, const KParallelLoop *pl, LLVMValueRef body) {
  int *ids, n = kernel_stmt_buffers(&s, 1, &ids), all = n + g->form->n_streams;
  LLVMValueRef ctx = entry_alloca(g, LLVMArrayType2(g->ptr, (uint64_t)(all ? all : 1)));
  for (int i = 0; i < all; i++)
    LLVMBuildStore(g->b, i < n ? g->buf[ids[i]] : g->stream[i - n],
                   LLVMBuildInBoundsGEP2(g->b, g->ptr, ctx, (LLVMValueRef[]){i64c(g, i)}, 1, ""));
  free(ids);
  if (pl->work >= TRC_PARALLEL_MIN_WORK) {
    LLVMValueRef args[3] = {i64c(g, pl->n_chunks), body, ctx};
    call_ext(g, "trc_parallel_for", g->void_t, args, 3);
  } else {
    LLVMValueRef args[3] = {ctx, i64c(g, 0), i64c(g, pl->n_chunks)};
    LLVMBuildCall2(g->b, LLVMGlobalGetValueType(body), body, args, 3, "");
  }
}

/* Kernel k's function: its parallel loops' functions first, then k<id>
 * running its statements, the parallel ones through call_parallel_loop. */
static LLVMValueRef define_loop_kernel(Gen *g, const char *name, const Kernel *k, const int *ids,
                                       int n) {
  g->index = xcalloc((size_t)k->n_vars + 1, sizeof *g->index);
  g->local = xcalloc((size_t)k->n_locals + 1, sizeof *g->local);
  LLVMValueRef *body = xcalloc((size_t)k->nbody, sizeof *body);
  KParallelLoop pl;
  for (int i = 0; i < k->nbody; i++) {
    char loop_name[48];
    snprintf(loop_name, sizeof loop_name, "%s_loop%d", name, i);
    if (kstmt_parallel_loop(k->body[i], &pl))
      body[i] = define_loop_body(g, loop_name, k, k->body[i], &pl);
  }
  Callee c = define_with_buffers(g, name, ids, n, 0, k);
  for (int i = 0; i < k->nbody; i++) {
    if (kstmt_parallel_loop(k->body[i], &pl))
      call_parallel_loop(g, k->body[i], &pl, body[i]);
    else
      stmts(g, &k->body[i], 1);
  }
  LLVMBuildRetVoid(g->b);
  free(body);
  free(g->index), free(g->local);
  return c.fn;
}

static void define_kernel(Gen *g, int id) {
  const Kernel *k = g->p->kernels[id];
  g->forms[id] = kernel_form(g->p->g, id, k);
  const KernelForm *f = g->form = &g->forms[id];
  if ((g->kernel[id] = same_code(g, f->code))) return;
  char name[32];
  snprintf(name, sizeof name, "k%d", id);
  g->stream = xcalloc((size_t)f->n_streams + 1, sizeof *g->stream);
  LLVMValueRef fn;
  if (k) {
    fn = define_loop_kernel(g, name, k, f->params, f->n_params);
  } else {
    const Node *n = &g->p->g->nodes[id];
    fn = define_with_buffers(g, name, f->params, f->n_params, 0, NULL).fn;
    (is_conv(g, id) ? conv_body : gemm_body)(g, id, g->buf[n->in[0]], g->buf[n->in[1]],
                                              g->buf[id]);
    LLVMBuildRetVoid(g->b);
  }
  free(g->stream);
  VEC_PUSH(g->codes, g->n_codes, g->cap_codes, ((KernelCode){f->code, fn}));
  /* Each kernel is optimized on its own: inlined into forward() and
   * backward(), gpt124m's hundreds of kernels made functions whose LICM
   * (over the inlined noalias scopes) took minutes. */
  unsigned noinline = LLVMGetEnumAttributeKindForName("noinline", 8);
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateEnumAttribute(g->ctx, noinline, 0));
  g->kernel[id] = fn;
}

/* k<id>(its buffers in the arena a, its streams). */
static void call_kernel(Gen *g, LLVMValueRef a, int id) {
  const KernelForm *f = &g->forms[id];
  int n = f->n_params + f->n_streams;
  LLVMValueRef *args = xmalloc((size_t)(n ? n : 1) * sizeof *args);
  for (int i = 0; i < f->n_params; i++) args[i] = at(g, a, g->p->offset[f->params[i]]);
  for (int i = 0; i < f->n_streams; i++) args[f->n_params + i] = u64c(g, (uint64_t)f->streams[i]);
  LLVMBuildCall2(g->b, LLVMGlobalGetValueType(g->kernel[id]), g->kernel[id], args, (unsigned)n, "");
  free(args);
}

/* ---- forward, backward, step ---- */

static Callee define_forward(Gen *g) {
  Callee c = define(g, "forward", g->void_t, &g->ptr, 1);
  for (int i = 0; i < g->p->n_forward; i++) call_kernel(g, LLVMGetParam(c.fn, 0), g->p->forward[i]);
  LLVMBuildRetVoid(g->b);
  return c;
}

/* `if (s) trc_step_bucket_ready(s, first, count)` for the buckets final
 * after backward kernel `at` (-1: before the first). */
static void buckets_ready(Gen *g, LLVMValueRef s, int at) {
  for (int b = 0; b < g->p->n_buckets; b++) {
    const GradBucket *bk = &g->p->buckets[b];
    if (bk->ready != at) continue;
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(g->b));
    LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(g->ctx, fn, "bucket_ready");
    LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(g->ctx, fn, "");
    LLVMBuildCondBr(g->b, LLVMBuildIsNotNull(g->b, s, ""), then, next);
    LLVMPositionBuilderAtEnd(g->b, then);
    LLVMValueRef args[3] = {s, u64c(g, bk->first), u64c(g, bk->count)};
    call_ext(g, "trc_step_bucket_ready", g->void_t, args, 3);
    LLVMBuildBr(g->b, next);
    LLVMPositionBuilderAtEnd(g->b, next);
  }
}

static Callee define_backward(Gen *g) {
  LLVMTypeRef params[2] = {g->ptr, g->ptr};
  Callee c = define(g, "backward", g->void_t, params, 2);
  LLVMValueRef a = LLVMGetParam(c.fn, 0), s = LLVMGetParam(c.fn, 1);
  buckets_ready(g, s, -1);
  for (int i = 0; i < g->p->n_backward; i++) {
    call_kernel(g, a, g->p->backward[i]);
    buckets_ready(g, s, i);
  }
  LLVMBuildRetVoid(g->b);
  return c;
}

/* trc_step_NAME(s): the runtime's answer, of type ret. */
static LLVMValueRef ask(Gen *g, const char *name, LLVMTypeRef ret, LLVMValueRef s) {
  char full[64];
  snprintf(full, sizeof full, "trc_step_%s", name);
  return call_ext(g, full, ret, &s, 1);
}

/* `if (cond) trc_step_NAME(s);` and goes on after it. */
static void do_if(Gen *g, LLVMValueRef cond, const char *name, LLVMValueRef s) {
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(g->b));
  LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(g->ctx, fn, name);
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(g->ctx, fn, "");
  LLVMBuildCondBr(g->b, cond, then, next);
  LLVMPositionBuilderAtEnd(g->b, then);
  ask(g, name, g->void_t, s);
  LLVMBuildBr(g->b, next);
  LLVMPositionBuilderAtEnd(g->b, next);
}

/* What step(s) has built so far: its settings and named places (step.h). */
typedef struct {
  LLVMValueRef fn, s, a, window, average, overlap, seed, loss_sum, mean;
  LLVMValueRef gradients, loss_seed, loss, k;
  Loop window_loop;
} StepState;

static void build_settings(Gen *g, StepState *st) {
  StepPlaces places = step_places(g->p);
  LLVMValueRef zero32 = i32c(g, 0);
  st->loss_sum = LLVMBuildAlloca(g->b, g->f64, "loss_sum");
  LLVMBuildStore(g->b, LLVMConstReal(g->f64, 0), st->loss_sum);
  st->a = ask(g, "arena", g->ptr, st->s);
  LLVMSetValueName2(st->gradients = at(g, st->a, places.gradients), "gradients", 9);
  LLVMSetValueName2(st->loss_seed = at(g, st->a, places.loss_seed), "loss_seed", 9);
  LLVMSetValueName2(st->loss = at(g, st->a, places.loss), "loss", 4);
  st->window = ask(g, "micro_batches", g->i64, st->s);
  st->average =
      LLVMBuildICmp(g->b, LLVMIntNE, ask(g, "averages_gradients", g->i32, st->s), zero32, "");
  LLVMValueRef overlaps = LLVMBuildICmp(g->b, LLVMIntNE, ask(g, "overlaps", g->i32, st->s), zero32, "");
  st->overlap = LLVMBuildAnd(g->b, st->average, overlaps, "overlap");
  st->seed = ask(g, "loss_seed", g->f32, st->s);
}

static void build_add_loss(Gen *g, StepState *st) {
  LLVMValueRef loss = LLVMBuildFPExt(g->b, LLVMBuildLoad2(g->b, g->f32, st->loss, ""), g->f64, "");
  LLVMBuildStore(g->b, LLVMBuildFAdd(g->b, LLVMBuildLoad2(g->b, g->f64, st->loss_sum, ""), loss, ""),
                 st->loss_sum);
}

/* backward(A, k == window - 1 && overlap ? s : NULL) */
static void build_backward(Gen *g, StepState *st, Callee backward) {
  LLVMValueRef last = LLVMBuildICmp(g->b, LLVMIntEQ, st->k,
                                    LLVMBuildSub(g->b, st->window, i64c(g, 1), ""), "");
  LLVMValueRef hand = LLVMBuildSelect(g->b, LLVMBuildAnd(g->b, last, st->overlap, ""), st->s,
                                      LLVMConstNull(g->ptr), "");
  call(g, backward, (LLVMValueRef[]){st->a, hand}, 2);
}

/* The mean loss; returns it at once when it is not finite (no update: the
 * runtime stops). */
static void build_mean_loss(Gen *g, StepState *st) {
  st->mean = LLVMBuildFDiv(g->b, LLVMBuildLoad2(g->b, g->f64, st->loss_sum, ""),
                           LLVMBuildSIToFP(g->b, st->window, g->f64, ""), "mean");
  Callee fabs64 = intrinsic(g, "llvm.fabs", g->f64);
  LLVMValueRef finite = LLVMBuildFCmp(g->b, LLVMRealONE, call(g, fabs64, &st->mean, 1),
                                      LLVMConstReal(g->f64, INFINITY), "");
  LLVMBasicBlockRef update = LLVMAppendBasicBlockInContext(g->ctx, st->fn, "update");
  LLVMBasicBlockRef stop = LLVMAppendBasicBlockInContext(g->ctx, st->fn, "not_finite");
  LLVMBuildCondBr(g->b, finite, update, stop);
  LLVMPositionBuilderAtEnd(g->b, stop);
  LLVMBuildRet(g->b, st->mean);
  LLVMPositionBuilderAtEnd(g->b, update);
}

/* One operation of the step (step.h) as c_step.c prints it for the host. */
static void build_op(Gen *g, StepState *st, StepOp op, Callee forward, Callee backward) {
  switch (op) {
  case STEP_SETTINGS: build_settings(g, st); break;
  case STEP_ZERO_GRADIENTS:
    LLVMBuildMemSet(g->b, st->gradients, LLVMConstInt(g->i8, 0, 0),
                    u64c(g, step_places(g->p).gradient_bytes), 1);
    break;
  case STEP_WINDOW_BEGIN: st->k = loop_begin(g, st->window, &st->window_loop); break;
  case STEP_LOAD_MICRO_BATCH:
    call_ext(g, "trc_step_micro_batch", g->void_t, (LLVMValueRef[]){st->s, st->k}, 2);
    break;
  case STEP_STORE_LOSS_SEED: LLVMBuildStore(g->b, st->seed, st->loss_seed); break;
  case STEP_INPUTS_TO_DEVICE: break;
  case STEP_FORWARD: call(g, forward, &st->a, 1); break;
  case STEP_ADD_LOSS: build_add_loss(g, st); break;
  case STEP_BACKWARD: build_backward(g, st, backward); break;
  case STEP_WINDOW_END: loop_end(g, &st->window_loop); break;
  case STEP_LOSS_FROM_DEVICE: break;
  case STEP_SYNC_GRADIENTS:
    do_if(g, st->overlap, "wait_gradients", st->s);
    do_if(g, LLVMBuildAnd(g->b, st->average, LLVMBuildNot(g->b, st->overlap, ""), ""),
          "allreduce_gradients", st->s);
    break;
  case STEP_MEAN_LOSS: build_mean_loss(g, st); break;
  case STEP_UPDATE:
    ask(g, "clip_gradients", g->void_t, st->s);
    ask(g, "update", g->void_t, st->s);
    break;
  case STEP_END_ROUND:
    do_if(g, LLVMBuildICmp(g->b, LLVMIntNE, ask(g, "ends_round", g->i32, st->s), i32c(g, 0), ""),
          "average_parameters", st->s);
    break;
  case STEP_OPS: break;
  }
}

/* step(s): the step's operations (step.h) in order, returning the mean loss. */
static Callee define_step(Gen *g, Callee forward, Callee backward) {
  Callee c = define(g, "step", g->f64, &g->ptr, 1);
  StepState st = {.fn = c.fn, .s = LLVMGetParam(c.fn, 0)};
  for (int op = 0; op < STEP_OPS; op++) build_op(g, &st, (StepOp)op, forward, backward);
  LLVMBuildRet(g->b, st.mean);
  return c;
}

/* ---- the runtime's tables: trc_param, trc_input, trc_model (trainc.h) ----
 * Each struct is a list of (field, kind) from which both its LLVM type and
 * the check of that type's layout against the C compiler's are made. */

typedef enum { FK_PTR, FK_I32, FK_I64, FK_F32, FK_F64, FK_DIMS, FK_CONFIG } FieldKind;

#define PARAM_FIELDS(X)                                                                            \
  X(name, PTR)                                                                                     \
  X(rank, I32) X(dims, DIMS) X(offset, I64) X(count, I64) X(init, I32) X(a, F32) X(b, F32)         \
      X(fan_in, I64) X(fan_out, I64) X(decay, I32) X(frozen, I32) X(file_name, PTR)               \
          X(transposed, I32)
#define INPUT_FIELDS(X)                                                                            \
  X(name, PTR)                                                                                     \
  X(dtype, I32) X(rank, I32) X(dims, DIMS) X(offset, I64) X(example_bytes, I64)                    \
      X(index_limit, I64)
#define MODEL_FIELDS(X)                                                                            \
  X(name, PTR)                                                                                     \
  X(source, PTR) X(batch, I64) X(arena_bytes, I64) X(param_offset, I64) X(param_count, I64)        \
      X(grad_offset, I64) X(trained_count, I64) X(allow_missing, PTR) X(allow_unexpected, PTR)    \
          X(n_params, I32) X(params, PTR) X(n_inputs, I32) X(inputs, PTR)          \
          X(loss_offset, I64) X(loss_seed_offset, I64) X(loss_kind, I32) X(has_predict, I32)       \
              X(predict_offset, I64) X(predict_classes, I64) X(predict_rows, I64)                  \
                  X(label_input, I32) X(token_input, I32) X(has_ignore, I32)                       \
                      X(ignore_input, I32) X(ignore_label, I64) X(rng_key_offset, I64)             \
                      X(training_offset, I64) X(forward, PTR) X(backward, PTR) X(step, PTR)        \
                          X(checkpoint, PTR) X(defaults, CONFIG) X(device, PTR)
/* trc_train_config's kinds (TRC_TRAIN_CONFIG) as field kinds */
#define CFG_FK_I64 FK_I64
#define CFG_FK_U64 FK_I64
#define CFG_FK_F64 FK_F64
#define CFG_FK_BOOL FK_I32
#define CFG_FK_OPTIMIZER FK_I32
#define CFG_FK_SCHEDULE FK_I32
#define CFG_FK_PRECISION FK_I32
#define CFG_FK_METRICS FK_I32

#define FIELD_KIND(field, kind) FK_##kind,
#define CFG_KIND(kind, name, run, help) CFG_FK_##kind,
#define PARAM_INDEX(field, kind) PARAM_##field,
#define INPUT_INDEX(field, kind) INPUT_##field,
#define MODEL_INDEX(field, kind) MODEL_##field,
enum { PARAM_FIELDS(PARAM_INDEX) N_PARAM_FIELDS };
enum { INPUT_FIELDS(INPUT_INDEX) N_INPUT_FIELDS };
enum { MODEL_FIELDS(MODEL_INDEX) N_MODEL_FIELDS };

typedef struct {
  const char *name;
  const FieldKind *kinds;
  const size_t *offsets; /* offsetof each field in the C struct */
  size_t size, n;
} StructInfo;

#define PARAM_OFFSET(field, kind) offsetof(trc_param, field),
#define INPUT_OFFSET(field, kind) offsetof(trc_input, field),
#define MODEL_OFFSET(field, kind) offsetof(trc_model, field),
#define CFG_OFFSET(kind, name, run, help) offsetof(trc_train_config, name),
static const FieldKind param_kinds[] = {PARAM_FIELDS(FIELD_KIND)},
                       input_kinds[] = {INPUT_FIELDS(FIELD_KIND)},
                       model_kinds[] = {MODEL_FIELDS(FIELD_KIND)},
                       config_kinds[] = {TRC_TRAIN_CONFIG(CFG_KIND)};
static const size_t param_offsets[] = {PARAM_FIELDS(PARAM_OFFSET)},
                    input_offsets[] = {INPUT_FIELDS(INPUT_OFFSET)},
                    model_offsets[] = {MODEL_FIELDS(MODEL_OFFSET)},
                    config_offsets[] = {TRC_TRAIN_CONFIG(CFG_OFFSET)};
#define STRUCT_INFO(c_type, prefix)                                                                \
  {                                                                                                \
#c_type, prefix##_kinds, prefix##_offsets, sizeof(c_type),                                     \
        sizeof prefix##_kinds / sizeof prefix##_kinds[0]                                           \
  }
static const StructInfo param_info = STRUCT_INFO(trc_param, param),
                        input_info = STRUCT_INFO(trc_input, input),
                        model_info = STRUCT_INFO(trc_model, model),
                        config_info = STRUCT_INFO(trc_train_config, config);

static LLVMTypeRef struct_type(Gen *g, const StructInfo *s, Diag *diag);

static LLVMTypeRef field_type(Gen *g, FieldKind k, Diag *diag) {
  switch (k) {
  case FK_PTR:
    return g->ptr;
  case FK_I32:
    return g->i32;
  case FK_I64:
    return g->i64;
  case FK_F32:
    return g->f32;
  case FK_F64:
    return g->f64;
  case FK_DIMS:
    return LLVMArrayType2(g->i64, TRC_MAX_RANK);
  case FK_CONFIG:
    return struct_type(g, &config_info, diag);
  }
  return NULL;
}

/* The struct's LLVM type, checked field by field against the C layout of
 * trainc.h (a mismatch is a trainc bug: this table lags the header). */
static LLVMTypeRef struct_type(Gen *g, const StructInfo *s, Diag *diag) {
  LLVMTypeRef t = LLVMGetTypeByName2(g->ctx, s->name);
  if (t) return t;
  LLVMTypeRef fields[64];
  for (size_t i = 0; i < s->n; i++) fields[i] = field_type(g, s->kinds[i], diag);
  t = LLVMStructCreateNamed(g->ctx, s->name);
  LLVMStructSetBody(t, fields, (unsigned)s->n, 0);
  bool same = LLVMABISizeOfType(g->td, t) == s->size;
  for (size_t i = 0; i < s->n; i++)
    same = same && LLVMOffsetOfElement(g->td, t, (unsigned)i) == s->offsets[i];
  if (!same)
    diag_error(diag, NO_LOC, "LLVM: %s's layout differs from runtime/trainc.h's (a trainc bug)",
               s->name);
  return t;
}

/* A private constant C string. */
static LLVMValueRef cstring(Gen *g, const char *text) {
  LLVMValueRef init = LLVMConstStringInContext(g->ctx, text, (unsigned)strlen(text), 0);
  LLVMValueRef v = LLVMAddGlobal(g->mod, LLVMTypeOf(init), ".str");
  LLVMSetInitializer(v, init);
  LLVMSetGlobalConstant(v, 1);
  LLVMSetLinkage(v, LLVMPrivateLinkage);
  LLVMSetUnnamedAddress(v, LLVMGlobalUnnamedAddr);
  return v;
}

static LLVMValueRef cstring_or_null(Gen *g, const char *text) {
  return text ? cstring(g, text) : LLVMConstNull(g->ptr);
}

/* A pattern list in the runtime's "a,b" form (namelist_join). */
static LLVMValueRef patterns(Gen *g, const NameList *list) {
  char *joined = namelist_join(list);
  LLVMValueRef v = cstring_or_null(g, joined);
  free(joined);
  return v;
}

static LLVMValueRef dims(Gen *g, const Shape *s) {
  LLVMValueRef d[TRC_MAX_RANK];
  for (int i = 0; i < TRC_MAX_RANK; i++) d[i] = i64c(g, i < s->rank ? s->dim[i] : 0);
  return LLVMConstArray2(g->i64, d, TRC_MAX_RANK);
}

static LLVMValueRef named_struct(Gen *g, const StructInfo *s, LLVMValueRef *v, Diag *diag) {
  return LLVMConstNamedStruct(struct_type(g, s, diag), v, (unsigned)s->n);
}

/* A private constant array of structs (NULL when empty). */
static LLVMValueRef table(Gen *g, const StructInfo *s, LLVMValueRef *rows, int n, const char *name,
                          Diag *diag) {
  if (n == 0) return LLVMConstNull(g->ptr);
  LLVMValueRef init = LLVMConstArray2(struct_type(g, s, diag), rows, (uint64_t)n);
  LLVMValueRef v = LLVMAddGlobal(g->mod, LLVMTypeOf(init), name);
  LLVMSetInitializer(v, init);
  LLVMSetGlobalConstant(v, 1);
  LLVMSetLinkage(v, LLVMInternalLinkage);
  return v;
}

static LLVMValueRef params_table(Gen *g, Diag *diag) {
  const Graph *gr = g->p->g;
  LLVMValueRef *rows = xcalloc((size_t)gr->n_params + 1, sizeof *rows);
  int *declared = graph_params_declared(gr);
  for (int i = 0; i < gr->n_params; i++) {
    const Node *n = &gr->nodes[declared[i]];
    LLVMValueRef v[N_PARAM_FIELDS] = {[PARAM_name] = cstring(g, n->name),
                                      [PARAM_rank] = i32c(g, n->shape.rank),
                                      [PARAM_dims] = dims(g, &n->shape),
                                      [PARAM_offset] = u64c(g, g->p->offset[n->id]),
                                      [PARAM_count] = i64c(g, shape_numel(&n->shape)),
                                      [PARAM_init] = i32c(g, n->init.kind),
                                      [PARAM_a] = float_const(g, n->init.a),
                                      [PARAM_b] = float_const(g, n->init.b),
                                      [PARAM_fan_in] = i64c(g, n->init.fan_in),
                                      [PARAM_fan_out] = i64c(g, n->init.fan_out),
                                      [PARAM_decay] = i32c(g, n->decay),
                                      [PARAM_frozen] = i32c(g, n->frozen),
                                      [PARAM_file_name] = cstring_or_null(g, n->file_name),
                                      [PARAM_transposed] = i32c(g, n->transposed)};
    rows[i] = named_struct(g, &param_info, v, diag);
  }
  free(declared);
  LLVMValueRef t = table(g, &param_info, rows, gr->n_params, "params", diag);
  free(rows);
  return t;
}

static LLVMValueRef inputs_table(Gen *g, Diag *diag) {
  const Graph *gr = g->p->g;
  LLVMValueRef *rows = xcalloc((size_t)gr->n_inputs + 1, sizeof *rows);
  for (int i = 0; i < gr->n_inputs; i++) {
    const Node *n = &gr->nodes[gr->inputs[i]];
    uint64_t example =
        (uint64_t)(shape_numel(&n->shape) / n->shape.dim[0]) * (uint64_t)dtype_size(n->dtype);
    LLVMValueRef v[N_INPUT_FIELDS] = {[INPUT_name] = cstring(g, n->name),
                                      [INPUT_dtype] = i32c(g, dtype_abi(n->dtype)),
                                      [INPUT_rank] = i32c(g, n->shape.rank),
                                      [INPUT_dims] = dims(g, &n->shape),
                                      [INPUT_offset] = u64c(g, g->p->offset[n->id]),
                                      [INPUT_example_bytes] = u64c(g, example),
                                      [INPUT_index_limit] = i64c(g, n->index_limit)};
    rows[i] = named_struct(g, &input_info, v, diag);
  }
  LLVMValueRef t = table(g, &input_info, rows, gr->n_inputs, "inputs", diag);
  free(rows);
  return t;
}

/* trc_train_config values by kind, as their field types hold them. */
#define CFG_CONST_I64(g, v) i64c(g, v)
#define CFG_CONST_U64(g, v) u64c(g, v)
#define CFG_CONST_F64(g, v) LLVMConstReal((g)->f64, v)
#define CFG_CONST_BOOL(g, v) i32c(g, v)
#define CFG_CONST_OPTIMIZER(g, v) i32c(g, v)
#define CFG_CONST_SCHEDULE(g, v) i32c(g, v)
#define CFG_CONST_PRECISION(g, v) i32c(g, v)
#define CFG_CONST_METRICS(g, v) i32c(g, (int64_t)(v))

static LLVMValueRef defaults(Gen *g, const trc_train_config *c, Diag *diag) {
#define CFG_VALUE(kind, name, run, help) CFG_CONST_##kind(g, c->name),
  LLVMValueRef v[] = {TRC_TRAIN_CONFIG(CFG_VALUE)};
#undef CFG_VALUE
  return named_struct(g, &config_info, v, diag);
}

static int input_index(const Graph *g, int node) {
  for (int i = 0; i < g->n_inputs; i++)
    if (g->inputs[i] == node) return i;
  return -1;
}

/* The input whose labels cross_entropy(..., ignore = L) reads, -1 if none. */
static int ignore_input(const Graph *g) {
  for (int i = 0; i < g->n_inputs; i++)
    if (g->nodes[g->inputs[i]].has_ignore) return i;
  return -1;
}

/* The descriptor `model`, as c_backend.c's print_model fills it. */
static LLVMValueRef define_model(Gen *g, Callee forward, Callee backward, Callee step, Diag *diag) {
  const Program *p = g->p;
  const Graph *gr = p->g;
  char spec[64];
  const Shape *ps = gr->predict >= 0 ? &gr->nodes[gr->predict].shape : NULL;
  const int ignore = ignore_input(gr);
  LLVMValueRef v[N_MODEL_FIELDS] = {
      [MODEL_name] = cstring(g, gr->model_name),
      [MODEL_source] = cstring(g, gr->source_path),
      [MODEL_batch] = i64c(g, gr->train.batch),
      [MODEL_arena_bytes] = u64c(g, p->arena_bytes),
      [MODEL_param_offset] = u64c(g, p->param_offset),
      [MODEL_param_count] = u64c(g, p->param_bytes / 4),
      [MODEL_grad_offset] = u64c(g, p->grad_offset),
      [MODEL_trained_count] = u64c(g, p->trained_bytes / 4),
      [MODEL_allow_missing] = patterns(g, &gr->allow_missing),
      [MODEL_allow_unexpected] = patterns(g, &gr->allow_unexpected),
      [MODEL_n_params] = i32c(g, gr->n_params),
      [MODEL_params] = params_table(g, diag),
      [MODEL_n_inputs] = i32c(g, gr->n_inputs),
      [MODEL_inputs] = inputs_table(g, diag),
      [MODEL_loss_offset] = u64c(g, p->offset[gr->loss]),
      [MODEL_loss_seed_offset] = u64c(g, p->seed_offset),
      [MODEL_loss_kind] = i32c(g, gr->loss_kind),
      [MODEL_has_predict] = i32c(g, ps != NULL),
      [MODEL_predict_offset] = u64c(g, ps ? p->offset[gr->predict] : 0),
      [MODEL_predict_classes] = i64c(g, ps ? ps->dim[ps->rank - 1] : 0),
      [MODEL_predict_rows] = i64c(g, ps ? (ps->rank == 3 ? ps->dim[1] : 1) : 0),
      [MODEL_label_input] = i32c(g, gr->labels >= 0 ? input_index(gr, gr->labels) : -1),
      [MODEL_token_input] = i32c(g, gr->tokens >= 0 ? input_index(gr, gr->tokens) : -1),
      [MODEL_has_ignore] = i32c(g, ignore >= 0),
      [MODEL_ignore_input] = i32c(g, ignore >= 0 ? ignore : 0),
      [MODEL_ignore_label] = i64c(g, ignore >= 0 ? gr->nodes[gr->inputs[ignore]].ignore_label : 0),
      [MODEL_rng_key_offset] = u64c(g, p->rng_key_offset),
      [MODEL_training_offset] = u64c(g, p->training_offset),
      [MODEL_forward] = forward.fn,
      [MODEL_backward] = backward.fn,
      [MODEL_step] = step.fn,
      [MODEL_checkpoint] = cstring(g, checkpoint_spec_str(&gr->train.checkpoint, spec)),
      [MODEL_defaults] = defaults(g, &gr->train.run, diag),
      [MODEL_device] = LLVMConstNull(g->ptr)}; /* the host arena only */
  LLVMValueRef init = named_struct(g, &model_info, v, diag);
  LLVMValueRef model = LLVMAddGlobal(g->mod, LLVMTypeOf(init), "model");
  LLVMSetInitializer(model, init);
  LLVMSetGlobalConstant(model, 1);
  LLVMSetLinkage(model, LLVMInternalLinkage);
  return model;
}

/* int main(int argc, char **argv) { return trc_main(&model, argc, argv); } */
static void define_main(Gen *g, LLVMValueRef model) {
  LLVMTypeRef params[2] = {g->i32, g->ptr};
  Callee c = define(g, "main", g->i32, params, 2);
  LLVMValueRef args[3] = {model, LLVMGetParam(c.fn, 0), LLVMGetParam(c.fn, 1)};
  LLVMBuildRet(g->b, call_ext(g, "trc_main", g->i32, args, 3));
}

static void kernels(Gen *g, const int *ids, int n) {
  for (int i = 0; i < n; i++) define_kernel(g, ids[i]);
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
    forward = define_forward(g), backward = define_backward(g);
    step = define_step(g, forward, backward);
  }
  if (part == LLVM_KERNELS) {
    LLVMSetLinkage(forward.fn, LLVMExternalLinkage);
    LLVMSetLinkage(backward.fn, LLVMExternalLinkage);
    LLVMSetLinkage(step.fn, LLVMExternalLinkage);
  } else {
    define_main(g, define_model(g, forward, backward, step, diag));
  }
  keep_vector_versions(g); /* none in LLVM_MAIN */
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
  g.maxf = define_max(&g, "trc_maxf", LLVMRealOGT);
  g.minf = define_max(&g, "trc_minf", LLVMRealOLT);
  g.uniform = define_uniform(&g);
  g.sqrt = intrinsic(&g, "llvm.sqrt", g.f32);
  choose_math_isas(&g, tm, o);
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
  bool ok = m && llvm_optimize(m, tm, diag);
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
