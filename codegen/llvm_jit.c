/* llvm_jit.c — `trainc run`: the LLVM modules compiled by ORC LLJIT in
 * trainc's own process and their main() called, against the runtime linked
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
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainc_rt.h"

/* libmvec's vector versions of the math functions the module may call
 * (llvm_kernels.c's vector math): ISA letter and lanes of each, declared by
 * their mangled names (only their addresses are taken here). */
#define LIBMVEC_ISAS(X, fn) X(b, 4, fn) X(c, 8, fn) X(d, 8, fn) X(e, 16, fn)
#define LIBMVEC_FUNCTIONS(X)                                                                       \
  LIBMVEC_ISAS(X, expf) LIBMVEC_ISAS(X, logf) LIBMVEC_ISAS(X, tanhf) LIBMVEC_ISAS(X, erff)
#define LIBMVEC_NAME(isa, lanes, fn) "_ZGV" #isa "N" #lanes "v_" #fn
#define DECLARE_LIBMVEC(isa, lanes, fn)                                                            \
  void libmvec_##isa##_##fn(void) __asm__(LIBMVEC_NAME(isa, lanes, fn));
LIBMVEC_FUNCTIONS(DECLARE_LIBMVEC)

static void trc_jit_forward(char *arena);
static void trc_jit_backward(char *arena, trc_step *step);
static double trc_jit_step(trc_step *step);

/* Every external function the modules call (llvm_*.c). */
#define RUNTIME_SYMBOL(f) {#f, (void (*)(void))f},
#define LIBMVEC_SYMBOL(isa, lanes, fn) {LIBMVEC_NAME(isa, lanes, fn), libmvec_##isa##_##fn},
static const struct {
  const char *name;
  void (*fn)(void);
} runtime_symbols[] = {
    TRC_ENTRY_POINTS(RUNTIME_SYMBOL)
    RUNTIME_SYMBOL(trc_jit_forward)
    RUNTIME_SYMBOL(trc_jit_backward)
    RUNTIME_SYMBOL(trc_jit_step)
    RUNTIME_SYMBOL(expf)
    RUNTIME_SYMBOL(logf)
    RUNTIME_SYMBOL(tanhf)
    RUNTIME_SYMBOL(erff)
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

/* Builds part of the program as a module for tm's target, optimizes it and
 * hands it to the JIT; adds the seconds building and optimizing took to
 * seconds[0] and [1]. */
static bool add_module(LLVMOrcLLJITRef jit, const Program *p, LLVMTargetMachineRef tm,
                       const LlvmOptions *o, LlvmPart part, double *seconds, Diag *diag) {
  double t0 = seconds_now();
  LLVMOrcThreadSafeContextRef tsc = LLVMOrcCreateNewThreadSafeContext();
  LLVMModuleRef m =
      llvm_build_module(LLVMOrcThreadSafeContextGetContext(tsc), p, tm, o, part, diag);
  double t1 = seconds_now();
  bool ok = m && llvm_optimize(m, tm, o, diag);
  seconds[0] += t1 - t0, seconds[1] += seconds_now() - t1;
  if (m && !ok) LLVMDisposeModule(m);
  if (ok) {
    LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(m, tsc); /* owns m */
    ok = llvm_ok(LLVMOrcLLJITAddLLVMIRModule(jit, LLVMOrcLLJITGetMainJITDylib(jit), tsm), "JIT",
                 diag);
  }
  LLVMOrcDisposeThreadSafeContext(tsc);
  return ok;
}

/* The address of a function of the JIT's modules (compiled now if it is
 * not yet: the JIT's code generation, whose seconds go to *seconds), or 0
 * after reporting. */
static LLVMOrcExecutorAddress lookup(LLVMOrcLLJITRef jit, const char *name, double *seconds,
                                     Diag *diag) {
  double t0 = seconds_now();
  LLVMOrcExecutorAddress addr = 0;
  if (!llvm_ok(LLVMOrcLLJITLookup(jit, &addr, name), "JIT", diag)) addr = 0;
  *seconds += seconds_now() - t0;
  return addr;
}

/* The kernels' module compiles on its own thread, started once main's
 * module (the descriptor and main: milliseconds) is compiled, while the
 * trainer starts (its flags, the arena, the weights' initialization: about
 * as long as the kernels' compile for gpt124m). The descriptor's forward,
 * backward and step are these stubs, which wait for the kernels' versions.
 * The two modules are not compiled at once: LLJIT's code generator has one
 * target machine. */
typedef struct {
  LLVMOrcLLJITRef jit;
  const Program *p;
  LLVMTargetMachineRef tm;
  const LlvmOptions *o;
  Diag *diag;
  double seconds[3]; /* module, optimize, codegen */
} CompileJob;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t ready;
  bool done, ok;
  void (*forward)(char *arena);
  void (*backward)(char *arena, trc_step *step);
  double (*step)(trc_step *step);
} kernels = {.lock = PTHREAD_MUTEX_INITIALIZER, .ready = PTHREAD_COND_INITIALIZER};

static void wait_for_kernels(void) {
  pthread_mutex_lock(&kernels.lock);
  while (!kernels.done) pthread_cond_wait(&kernels.ready, &kernels.lock);
  pthread_mutex_unlock(&kernels.lock);
  if (!kernels.ok) exit(1); /* the compile thread reported why */
}

static void trc_jit_forward(char *arena) {
  wait_for_kernels();
  kernels.forward(arena);
}
static void trc_jit_backward(char *arena, trc_step *step) {
  wait_for_kernels();
  kernels.backward(arena, step);
}
static double trc_jit_step(trc_step *step) {
  wait_for_kernels();
  return kernels.step(step);
}

static void *compile_kernels(void *arg) {
  CompileJob *job = arg;
  bool ok = add_module(job->jit, job->p, job->tm, job->o, LLVM_KERNELS, job->seconds, job->diag);
  LLVMOrcExecutorAddress addr[3] = {0};
  static const char *const names[3] = {"forward", "backward", "step"};
  for (int i = 0; i < 3 && ok; i++)
    ok = (addr[i] = lookup(job->jit, names[i], &job->seconds[2], job->diag)) != 0;
  pthread_mutex_lock(&kernels.lock);
  kernels.forward = (void (*)(char *))(uintptr_t)addr[0];
  kernels.backward = (void (*)(char *, trc_step *))(uintptr_t)addr[1];
  kernels.step = (double (*)(trc_step *))(uintptr_t)addr[2];
  kernels.ok = ok, kernels.done = true;
  pthread_cond_broadcast(&kernels.ready);
  pthread_mutex_unlock(&kernels.lock);
  return NULL;
}

/* Runs the trainer's main while the kernels compile; its exit status, or
 * -1 when the kernels did not compile. */
static int train(CompileJob *job, LLVMOrcExecutorAddress main_addr, int argc, char **argv) {
  kernels.done = kernels.ok = false;
  pthread_t thread;
  if (pthread_create(&thread, NULL, compile_kernels, job)) {
    diag_error(job->diag, NO_LOC, "cannot start the JIT's compile thread");
    return -1;
  }
  int (*trainer_main)(int, char **) = (int (*)(int, char **))(uintptr_t)main_addr;
  fflush(stdout);
  trc_set_step_code_wait(wait_for_kernels);
  int status = trainer_main(argc, argv);
  trc_set_step_code_wait(NULL);
  pthread_join(thread, NULL);
  return kernels.ok ? status : -1;
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
  CompileJob job = {.jit = jit, .p = p, .tm = tm, .o = o, .diag = diag};
  LLVMOrcExecutorAddress main_addr = 0;
  if (jit && add_module(jit, p, tm, o, LLVM_MAIN, job.seconds, diag))
    main_addr = lookup(jit, "main", &job.seconds[2], diag);
  int status = main_addr ? train(&job, main_addr, argc, argv) : -1;
  LLVMDisposeTargetMachine(tm);
  if (o->time_phases)
    fprintf(stderr, "LLVM seconds: module %.4f optimize %.4f codegen %.4f\n", job.seconds[0],
            job.seconds[1], job.seconds[2]);
  if (jit && !llvm_ok(LLVMOrcDisposeLLJIT(jit), "JIT", diag) && status == 0) status = -1;
  return status;
}
