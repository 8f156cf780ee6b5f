/* llvm_kernels.c — kernels as LLVM functions: loop nests, GEMM and
 * convolution calls, parallel loops, and the libm/libmvec vector math. */
#include "llvm_gen.h"

#include <llvm-c/DebugInfo.h> /* LLVMTemporaryMDNode: a loop ID that names itself */

/* ---- loops: `for (int64_t i = 0; i < bound; i++)` ---- */

LLVMValueRef llvm_loop_begin(Gen *g, LLVMValueRef bound, Loop *l) {
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

void llvm_loop_end(Gen *g, Loop *l) {
  LLVMValueRef next = LLVMBuildNSWAdd(g->b, l->i, i64c(g, 1), "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
  l->latch = LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, next, l->bound, ""), l->head, l->exit);
  LLVMValueRef values[2] = {i64c(g, 0), next};
  LLVMBasicBlockRef blocks[2] = {l->pre, latch};
  LLVMAddIncoming(l->i, values, blocks, 2);
  LLVMAppendExistingBasicBlock(LLVMGetBasicBlockParent(latch), l->exit);
  LLVMPositionBuilderAtEnd(g->b, l->exit);
}


/* ---- the helpers trainc.h gives generated C (trc_maxf, trc_kernel_uniform) ---- */

/* trc_maxf / trc_minf: a when a > b or b is NaN, else b (with < for min). */
Callee llvm_define_max(Gen *g, const char *name, LLVMRealPredicate pred) {
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
Callee llvm_define_uniform(Gen *g) {
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

Callee llvm_intrinsic(Gen *g, const char *name, LLVMTypeRef type) {
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
 * it as its llvm.exp llvm_intrinsic, which it widens into one scalar call per
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
void llvm_choose_math_isas(Gen *g, LLVMTargetMachineRef tm, const LlvmOptions *o) {
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
void llvm_keep_vector_versions(Gen *g) {
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

/* Where local `var` is: its alloca, or a row's element `index` (non-NULL). */
static LLVMValueRef local_ptr(Gen *g, int var, const KExpr *index) {
  if (!index) return g->local[var];
  LLVMValueRef i = expr(g, index);
  return LLVMBuildInBoundsGEP2(g->b, g->f32, g->local[var], &i, 1, "");
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
    return LLVMBuildLoad2(g->b, g->f32, local_ptr(g, e->var, e->a), "");
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
  case KE_TO_FLOAT: /* from 32 bits where it fits (ir.h: kernel_mark_by_ranges) */
    return as_float(g, e->narrow ? LLVMBuildTrunc(g->b, expr(g, e->a), g->i32, "") : expr(g, e->a));
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

/* A short row (KStmt.short_row: 7 or 14 pooling windows, or a row that
 * ends at run time) and a reduction's loop over its lanes: left to O3, the
 * full unroller unrolls a row of 14 (or the 16 lanes) first and the
 * vectorizer then widens the loop around it with gathers (slow on Zen 4:
 * fashion_cnn's max-pool 1.4 ms against GCC's 0.4) or not at all (a
 * causal softmax's sums: 5.2 ms against 2.7), and a row under 16 is never
 * vectorized (the "tiny trip count" rule). The loop's metadata asks for it
 * unrolled never and vectorized whatever its trip count, as TRC_SHORT_ROWS
 * asks GCC in the C backend. A loop of a constant count below FEW_TRIPS (a
 * lane split's remainder of 1-3, a row of 2 or 3 windows) is only kept from
 * unrolling: LLVM finds no vector width worth it there and, asked to
 * vectorize it, says it could not. */
enum { FEW_TRIPS = 4 };

static void hint_short_row(Gen *g, const Loop *l, bool few_trips) {
  LLVMMetadataRef self = LLVMTemporaryMDNode(g->ctx, NULL, 0);
  LLVMMetadataRef enable[2] = {LLVMMDStringInContext2(g->ctx, "llvm.loop.vectorize.enable", 26),
                               LLVMValueAsMetadata(LLVMConstInt(LLVMInt1TypeInContext(g->ctx), 1, 0))};
  LLVMMetadataRef no_unroll = LLVMMDStringInContext2(g->ctx, "llvm.loop.unroll.disable", 24);
  LLVMMetadataRef hints[3];
  unsigned n = 0;
  hints[n++] = self;
  if (!few_trips) hints[n++] = LLVMMDNodeInContext2(g->ctx, enable, 2);
  hints[n++] = LLVMMDNodeInContext2(g->ctx, &no_unroll, 1);
  LLVMMetadataRef loop = LLVMMDNodeInContext2(g->ctx, hints, n);
  LLVMMetadataReplaceAllUsesWith(self, loop); /* a loop's ID names itself */
  LLVMSetMetadata(l->latch, LLVMGetMDKindIDInContext(g->ctx, "llvm.loop", 9), LLVMMetadataAsValue(g->ctx, loop));
}

static bool constant_below(LLVMValueRef count, int64_t limit) {
  return LLVMIsAConstantInt(count) && LLVMConstIntGetSExtValue(count) < limit;
}

/* Iterations first + l, l in [0, count), of reduction loop s, each into
 * lane l: lane[l] = lane[l] op e. */
static void lanes_take(Gen *g, const KStmt *s, KBinaryOp op, LLVMValueRef lanes,
                       LLVMValueRef first, LLVMValueRef count) {
  Loop l;
  LLVMValueRef lane = llvm_loop_begin(g, count, &l);
  g->index[s->var] = LLVMBuildNSWAdd(g->b, first, lane, "");
  LLVMValueRef p = lane_ptr(g, lanes, lane);
  LLVMValueRef e = as_float(g, expr(g, s->body[0]->value->b));
  LLVMBuildStore(g->b, combine(g, op, LLVMBuildLoad2(g->b, g->f32, p, ""), e), p);
  llvm_loop_end(g, &l);
  hint_short_row(g, &l, constant_below(count, FEW_TRIPS));
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
  LLVMValueRef c = llvm_loop_begin(g, n_groups, &groups);
  lanes_take(g, s, ls->op, lanes, LLVMBuildNSWMul(g->b, c, i64c(g, K_LANES), ""),
             i64c(g, K_LANES));
  llvm_loop_end(g, &groups);
  if (ls->limit || ls->full < ls->extent)
    lanes_take(g, s, ls->op, lanes, full, LLVMBuildNSWSub(g->b, end, full, ""));
  for (int l = 0; l < K_LANES; l++)
    v[l] = LLVMBuildLoad2(g->b, g->f32, lane_ptr(g, lanes, i64c(g, l)), "");
  for (int w = K_LANES / 2; w > 0; w /= 2)
    for (int l = 0; l < w; l++) v[l] = combine(g, ls->op, v[l], v[l + w]);
  LLVMBuildStore(g->b, v[0], t);
}

/* Whether loop s only stores constants: LLVM turns it into a memset, and
 * the hint of a loop it then deletes lands on the loop around it (the
 * emptied latch merges into the outer one's), which the vectorizer cannot
 * widen and warns about (a causal softmax's zeros above the diagonal). */
static bool fills_constants(const KStmt *s) {
  for (int i = 0; i < s->nbody; i++) {
    const KStmt *b = s->body[i];
    if (b->kind != KS_STORE || b->accumulate || b->value->kind != KE_CONST) return false;
  }
  return true;
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
      g->index[s->var] = llvm_loop_begin(g, s->limit ? expr(g, s->limit) : i64c(g, s->extent), &l);
      stmts(g, s->body, s->nbody);
      llvm_loop_end(g, &l);
      if (s->short_row && !fills_constants(s))
        hint_short_row(g, &l, !s->limit && s->extent < FEW_TRIPS);
      break;
    case KS_LOCAL:
      if (s->extent) { /* a row: its own alloca, in the entry block as the scalars' */
        g->local[s->var] = entry_alloca(g, LLVMArrayType2(g->f32, (uint64_t)s->extent));
        break;
      }
      LLVMBuildStore(g->b, as_float(g, expr(g, s->value)), g->local[s->var]);
      break;
    case KS_SET:
      LLVMBuildStore(g->b, as_float(g, expr(g, s->value)), local_ptr(g, s->var, s->index));
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
  call_ext(g, d.rounded ? "trc_gemm_rounded" : d.f32 ? "trc_gemm_f32" : "trc_gemm", g->void_t, args,
           (int)(sizeof args / sizeof args[0]));
}

/* ---- kernels with the same form are one function ----
 * A kernel's buffers and dropout streams are its parameters (kernel_form,
 * as the C backend's functions), so the kernels of gpt124m's twelve
 * identical layers differ only in the pointers and stream numbers they are
 * called with: one function serves them all, which cuts the module (and
 * LLVM's time on it) by about as much. */

/* A convolution pass: the runtime's trc_conv2d with the arguments
 * c_backend.c's print_conv prints. */
static void conv_body(Gen *g, int id) {
  const Node *n = &g->p->g->nodes[id];
  ConvDims d;
  conv_dims(g->p->g, n, &d);
  LLVMValueRef bias = d.bias ? g->buf[n->in[2]] : LLVMConstPointerNull(g->ptr);
  LLVMValueRef args[] = {i32c(g, d.pass), i64c(g, d.n), i64c(g, d.c), i64c(g, d.h),
                         i64c(g, d.w), i64c(g, d.o), i64c(g, d.k), i64c(g, d.stride),
                         i64c(g, d.pad), g->buf[n->in[0]], g->buf[n->in[1]], bias,
                         i32c(g, d.relu), g->buf[id], i32c(g, d.accumulate)};
  call_ext(g, "trc_conv2d", g->void_t, args, (int)(sizeof args / sizeof args[0]));
}

/* The chunked loss head: the runtime's trc_linear_cross_entropy with the
 * arguments c_backend.c's print_head_function prints (w's gradient at w
 * plus the distance from the parameters to their gradients). */
static void head_body(Gen *g, int id) {
  const Node *n = &g->p->g->nodes[id];
  HeadDims h;
  head_dims(g->p->g, n, &h);
  LLVMValueRef w = g->buf[n->in[1]], out = g->buf[id];
  LLVMValueRef dw = LLVMConstPointerNull(g->ptr);
  if (h.adds_dw) dw = at(g, w, g->p->grad_offset - g->p->param_offset);
  LLVMValueRef distance = i64c(g, (int64_t)g->p->scratch_offset[id] - (int64_t)g->p->offset[id]);
  LLVMValueRef scratch = LLVMBuildInBoundsGEP2(g->b, g->i8, out, &distance, 1, ""); /* same arena */
  LLVMValueRef args[] = {i64c(g, h.n), i64c(g, h.d), i64c(g, h.v), i64c(g, h.chunk),
                         i32c(g, h.w_vd), i32c(g, h.has_ignore), i64c(g, h.ignore_label),
                         g->buf[n->in[0]], w, g->buf[n->in[2]], g->buf[n->in[3]], out, dw, scratch};
  call_ext(g, "trc_linear_cross_entropy", g->void_t, args, (int)(sizeof args / sizeof args[0]));
}

/* A value stored in bf16: trc_bf16_pack or trc_bf16_unpack, as
 * c_backend.c's print_bf16_function prints them. */
static void bf16_body(Gen *g, int id) {
  const Node *n = &g->p->g->nodes[id];
  LLVMValueRef args[] = {i64c(g, shape_numel(&n->shape)), g->buf[n->in[0]], g->buf[id]};
  call_ext(g, n->op == OP_TO_BF16 ? "trc_bf16_pack" : "trc_bf16_unpack", g->void_t, args, 3);
}

/* Fused causal attention: trc_causal_attention or its gradient, as
 * c_backend.c's print_attention_function prints them. */
static void attention_body(Gen *g, int id) {
  const Node *n = &g->p->g->nodes[id];
  AttentionDims d;
  attention_dims(g->p->g, n, &d);
  bool grad = n->op == OP_CAUSAL_ATTENTION_GRAD;
  LLVMValueRef args[10] = {i64c(g, d.b), i64c(g, d.t), i64c(g, d.c), i64c(g, d.heads),
                           LLVMConstReal(g->f32, d.scale)};
  int nargs = 5;
  for (int k = 0; k < n->nin; k++) args[nargs++] = g->buf[n->in[k]];
  args[nargs++] = g->buf[id];
  call_ext(g, grad ? "trc_causal_attention_grad" : "trc_causal_attention", g->void_t, args, nargs);
}

/* A library call's body: trc_gemm, trc_conv2d, the loss head's call,
 * attention's or a bf16 store's. */
static void library_body(Gen *g, int id) {
  const Node *n = &g->p->g->nodes[id];
  OpClass cls = op_info(n->op)->op_class;
  if (n->op == OP_LINEAR_CROSS_ENTROPY) head_body(g, id);
  else if (n->op == OP_CAUSAL_ATTENTION || n->op == OP_CAUSAL_ATTENTION_GRAD) attention_body(g, id);
  else if (cls == OPC_CALL) bf16_body(g, id);
  else if (cls == OPC_CONV) conv_body(g, id);
  else gemm_body(g, id, g->buf[n->in[0]], g->buf[n->in[1]], g->buf[id]);
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
  LLVMValueRef r = llvm_loop_begin(g, LLVMBuildNSWSub(g->b, hi, lo, ""), &chunks);
  LLVMValueRef i = LLVMBuildNSWAdd(g->b, lo, r, "");
  if (pl->chunk > 1) {
    LLVMValueRef j = llvm_loop_begin(g, i64c(g, pl->chunk), &in_chunk);
    i = LLVMBuildNSWAdd(g->b, LLVMBuildNSWMul(g->b, i, i64c(g, pl->chunk), ""), j, "");
  }
  g->index[s->var] = i;
  stmts(g, s->body, s->nbody);
  if (pl->chunk > 1) llvm_loop_end(g, &in_chunk);
  llvm_loop_end(g, &chunks);
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

void llvm_define_kernel(Gen *g, int id) {
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
    fn = define_with_buffers(g, name, f->params, f->n_params, 0, NULL).fn;
    library_body(g, id);
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
void llvm_call_kernel(Gen *g, LLVMValueRef a, int id) {
  const KernelForm *f = &g->forms[id];
  int n = f->n_params + f->n_streams;
  LLVMValueRef *args = xmalloc((size_t)(n ? n : 1) * sizeof *args);
  for (int i = 0; i < f->n_params; i++) args[i] = at(g, a, g->p->offset[f->params[i]]);
  for (int i = 0; i < f->n_streams; i++) args[f->n_params + i] = u64c(g, (uint64_t)f->streams[i]);
  LLVMBuildCall2(g->b, LLVMGlobalGetValueType(g->kernel[id]), g->kernel[id], args, (unsigned)n, "");
  free(args);
}

