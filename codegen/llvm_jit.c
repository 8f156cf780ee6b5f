/* llvm_jit.c — `trainc run`: the LLVM module compiled by ORC LLJIT in
 * trainc's own process and its main() called, against the runtime linked
 * into trainc. The module's calls into the runtime and libm resolve
 * to this process's functions, registered by address (the runtime is a
 * static library: its functions are not in the dynamic symbol table; trainc
 * links libmvec for the vector versions of the math functions); what
 * LLVM's code generator may add (memset, memcpy) resolves through the
 * process's loaded libraries. */
#include "llvm_internal.h"

#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "trainc.h"

/* libmvec's vector versions of the math functions the module may call
 * (llvm_backend.c's vector math): ISA letter and lanes of each, declared by
 * their mangled names (only their addresses are taken here). */
#define LIBMVEC_ISAS(X, fn) X(b, 4, fn) X(c, 8, fn) X(d, 8, fn) X(e, 16, fn)
#define LIBMVEC_FUNCTIONS(X)                                                                       \
  LIBMVEC_ISAS(X, expf) LIBMVEC_ISAS(X, logf) LIBMVEC_ISAS(X, tanhf) LIBMVEC_ISAS(X, erff)
#define LIBMVEC_NAME(isa, lanes, fn) "_ZGV" #isa "N" #lanes "v_" #fn
#define DECLARE_LIBMVEC(isa, lanes, fn)                                                            \
  void libmvec_##isa##_##fn(void) __asm__(LIBMVEC_NAME(isa, lanes, fn));
LIBMVEC_FUNCTIONS(DECLARE_LIBMVEC)

/* Every external function the module calls (llvm_backend.c). */
#define RUNTIME_SYMBOL(f)                                                                          \
  { #f, (void (*)(void))f }
#define LIBMVEC_SYMBOL(isa, lanes, fn) {LIBMVEC_NAME(isa, lanes, fn), libmvec_##isa##_##fn},
static const struct {
  const char *name;
  void (*fn)(void);
} runtime_symbols[] = {
    RUNTIME_SYMBOL(trc_main),
    RUNTIME_SYMBOL(trc_step_arena),
    RUNTIME_SYMBOL(trc_step_micro_batches),
    RUNTIME_SYMBOL(trc_step_averages_gradients),
    RUNTIME_SYMBOL(trc_step_overlaps),
    RUNTIME_SYMBOL(trc_step_loss_seed),
    RUNTIME_SYMBOL(trc_step_micro_batch),
    RUNTIME_SYMBOL(trc_step_bucket_ready),
    RUNTIME_SYMBOL(trc_step_wait_gradients),
    RUNTIME_SYMBOL(trc_step_allreduce_gradients),
    RUNTIME_SYMBOL(trc_step_clip_gradients),
    RUNTIME_SYMBOL(trc_step_update),
    RUNTIME_SYMBOL(trc_step_ends_round),
    RUNTIME_SYMBOL(trc_step_average_parameters),
    RUNTIME_SYMBOL(trc_gemm),
    RUNTIME_SYMBOL(trc_parallel_for),
    RUNTIME_SYMBOL(expf),
    RUNTIME_SYMBOL(logf),
    RUNTIME_SYMBOL(tanhf),
    RUNTIME_SYMBOL(erff),
    LIBMVEC_FUNCTIONS(LIBMVEC_SYMBOL)
};

static void report_session_error(void *ctx, LLVMErrorRef err) { llvm_ok(err, "JIT", ctx); }

static bool define_runtime_symbols(LLVMOrcLLJITRef jit, Diag *diag) {
  enum { N = sizeof runtime_symbols / sizeof runtime_symbols[0] };
  LLVMOrcCSymbolMapPair pairs[N];
  for (int i = 0; i < N; i++) {
    pairs[i].Name = LLVMOrcLLJITMangleAndIntern(jit, runtime_symbols[i].name);
    pairs[i].Sym.Address = (LLVMOrcExecutorAddress)(uintptr_t)runtime_symbols[i].fn;
    pairs[i].Sym.Flags = (LLVMJITSymbolFlags){
        LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable, 0};
  }
  LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(jit);
  LLVMOrcDefinitionGeneratorRef process;
  return llvm_ok(LLVMOrcJITDylibDefine(jd, LLVMOrcAbsoluteSymbols(pairs, N)), "runtime symbols",
                 diag) &&
         llvm_ok(LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
                     &process, LLVMOrcLLJITGetGlobalPrefix(jit), NULL, NULL),
                 "process symbols", diag) &&
         (LLVMOrcJITDylibAddGenerator(jd, process), true);
}

/* A JIT for tm's target (tm is consumed). */
static LLVMOrcLLJITRef create_jit(LLVMTargetMachineRef tm, Diag *diag) {
  LLVMOrcLLJITBuilderRef builder = LLVMOrcCreateLLJITBuilder();
  LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
      builder, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm));
  LLVMOrcLLJITRef jit = NULL;
  if (!llvm_ok(LLVMOrcCreateLLJIT(&jit, builder), "cannot make the JIT", diag)) return NULL;
  LLVMOrcExecutionSessionSetErrorReporter(LLVMOrcLLJITGetExecutionSession(jit),
                                          report_session_error, diag);
  if (define_runtime_symbols(jit, diag)) return jit;
  llvm_ok(LLVMOrcDisposeLLJIT(jit), "JIT", diag);
  return NULL;
}

static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Builds and optimizes the module for tm's target and hands it to the JIT;
 * the address of its main(), or 0 after reporting. With o->time_phases,
 * says how long building, optimizing and the JIT's code generation (the
 * lookup of main) took. */
static LLVMOrcExecutorAddress compile(LLVMOrcLLJITRef jit, const Program *p,
                                      LLVMTargetMachineRef tm, const LlvmOptions *o, Diag *diag) {
  double t0 = seconds_now();
  LLVMOrcThreadSafeContextRef tsc = LLVMOrcCreateNewThreadSafeContext();
  LLVMModuleRef m = llvm_build_module(LLVMOrcThreadSafeContextGetContext(tsc), p, tm, o, diag);
  double t1 = seconds_now();
  bool ok = m && llvm_optimize(m, tm, diag);
  double t2 = seconds_now();
  if (m && !ok) LLVMDisposeModule(m);
  if (ok) {
    LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(m, tsc); /* owns m */
    ok = llvm_ok(LLVMOrcLLJITAddLLVMIRModule(jit, LLVMOrcLLJITGetMainJITDylib(jit), tsm), "JIT",
                 diag);
  }
  LLVMOrcDisposeThreadSafeContext(tsc);
  LLVMOrcExecutorAddress main_addr = 0;
  if (ok && !llvm_ok(LLVMOrcLLJITLookup(jit, &main_addr, "main"), "JIT", diag)) main_addr = 0;
  if (o->time_phases)
    fprintf(stderr, "LLVM seconds: module %.4f optimize %.4f codegen %.4f\n", t1 - t0, t2 - t1,
            seconds_now() - t2);
  return main_addr;
}

int run_llvm(const Program *p, const LlvmOptions *o, int argc, char **argv, Diag *diag) {
  LLVMTargetMachineRef tm, jit_tm;
  /* one target machine for the passes, one the JIT's builder consumes */
  if (!llvm_target_machine(o, &tm, diag)) return -1;
  if (!llvm_target_machine(o, &jit_tm, diag)) {
    LLVMDisposeTargetMachine(tm);
    return -1;
  }
  LLVMOrcLLJITRef jit = create_jit(jit_tm, diag);
  LLVMOrcExecutorAddress main_addr = jit ? compile(jit, p, tm, o, diag) : 0;
  LLVMDisposeTargetMachine(tm);
  int status = -1;
  if (main_addr) {
    int (*trainer_main)(int, char **) = (int (*)(int, char **))(uintptr_t)main_addr;
    fflush(stdout);
    status = trainer_main(argc, argv);
  }
  if (jit && !llvm_ok(LLVMOrcDisposeLLJIT(jit), "JIT", diag) && status == 0) status = -1;
  return status;
}
