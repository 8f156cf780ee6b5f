/* build.c — compiles an emitted C file into a trainer executable, and builds
 * and runs the calibration program behind `trainc calibrate`.
 * Programs run through posix_spawnp with an argument vector (no shell), so
 * nothing in a path or in --cflags is ever interpreted as a command; trainc's
 * messages about them go through the Diag, their own output is theirs. */
#include "codegen.h"
#include "c_family.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct {
  char **items;
  int n, cap;
} Argv;

static void push(Argv *a, const char *s) { VEC_PUSH(a->items, a->n, a->cap, xstrdup(s)); }

/* Splits a flag string on blanks (no quoting: flags are words). */
static void push_words(Argv *a, const char *flags) {
  const char *p = flags;
  while (*p) {
    while (*p == ' ' || *p == '\t') p++;
    const char *start = p;
    while (*p && *p != ' ' && *p != '\t') p++;
    if (p > start) VEC_PUSH(a->items, a->n, a->cap, xstrndup(start, (size_t)(p - start)));
  }
}

/* Frees the words; a is then empty, ready for another command. */
static void free_argv(Argv *a) {
  for (int i = 0; i < a->n; i++) free(a->items[i]);
  free(a->items);
  *a = (Argv){0};
}

/* Runs argv (`what` names it in messages); its stdout goes to out_path when
 * given. Returns its exit status, or -1 after reporting why it could not
 * start or did not exit. */
static int run(Argv *a, const char *what, const char *out_path, bool verbose, Diag *diag) {
  if (verbose) {
    for (int i = 0; i < a->n; i++) fprintf(diag->out, "%s%s", i ? " " : "", a->items[i]);
    fputc('\n', diag->out);
  }
  VEC_PUSH(a->items, a->n, a->cap, NULL);
  a->n--; /* the terminator is not an argument */
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (out_path) posix_spawn_file_actions_addopen(&actions, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  int err = posix_spawnp(&pid, a->items[0], &actions, NULL, a->items, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err) {
    diag_error(diag, NO_LOC, "cannot run %s '%s': %s", what, a->items[0], strerror(err));
    return -1;
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      diag_error(diag, NO_LOC, "lost %s '%s': %s", what, a->items[0], strerror(errno));
      return -1;
    }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  diag_error(diag, NO_LOC, "%s '%s' was killed by signal %d", what, a->items[0], WTERMSIG(status));
  return -1;
}

/* The runtime and the libraries every trainer links, after its source. */
static void push_libraries(Argv *a, const BuildOptions *opt) {
  push(a, opt->rt_lib);
  push_words(a, opt->link_libs);
  if (opt->mpi_libs) push_words(a, opt->mpi_libs);
  push(a, "-lz");
  push(a, "-lmvec"); /* glibc's vector math (trainc.h) */
  push(a, "-lm");
}

/* Runs the compiler whose words are in `a` on a generated source:
 * COMPILER CFLAGS LANGUAGE -I RUNTIME SOURCE AFTER -o OUT, then the libraries
 * when `link`. */
static bool compile_trainer(Argv *a, const char *language, const char *source_path,
                            const char *after, const char *out_path, const BuildOptions *opt,
                            bool link, const char *what, Diag *diag) {
  push_words(a, opt->cflags);
  push_words(a, language);
  push(a, "-I");
  push(a, opt->rt_include);
  char *source =
      xsprintf("%s%s", source_path[0] == '-' ? "./" : "", source_path); /* never an option */
  push(a, source);
  free(source);
  push_words(a, after);
  push(a, "-o");
  push(a, out_path);
  if (link) push_libraries(a, opt);
  int rc = run(a, what, NULL, opt->verbose, diag);
  free_argv(a);
  if (rc > 0) diag_error(diag, NO_LOC, "%s failed (exit %d) on %s", what, rc, source_path);
  return rc == 0;
}

/* The C compiler driver on one input: a C file (compiled as C11 against the
 * runtime's header) or, with language "", an object, linked as a trainer. */
static bool cc_trainer(const char *language, const char *input, const char *exe_path,
                       const BuildOptions *opt, Diag *diag) {
  Argv a = {0};
  const char *cc = opt->cc ? opt->cc : getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
  if (cc[strspn(cc, " \t")] == '\0') {
    diag_error(diag, NO_LOC, "no C compiler: --cc is blank");
    return false;
  }
  push_words(&a, cc);
  return compile_trainer(&a, language, input, "", exe_path, opt, true, "the C compiler", diag);
}

bool build_c(const char *c_path, const char *exe_path, const BuildOptions *opt, Diag *diag) {
  return cc_trainer("-std=c11", c_path, exe_path, opt, diag);
}

bool link_object(const char *obj_path, const char *exe_path, const BuildOptions *opt, Diag *diag) {
  return cc_trainer("", obj_path, exe_path, opt, diag);
}

/* nvcc compiles the .cu to an object; the C++ compiler links it as a C
 * trainer is linked (host linker flags as they are), with cudart and cuBLAS.
 * --fmad=false whatever the --cflags: a contraction of a * b + c into an FMA
 * depends on whether the product stays in a register, which fusion decides,
 * so fused and unfused trainers (and the optimizer's update against the
 * host's) would differ in the last bits (docs/cuda.md). --ftz=true: subnormal
 * floats flushed to zero, as on the host's threads (trc_set_threads). */
static bool build_nvcc(const char *cu_path, const char *exe_path, const char *cxx,
                       const BuildOptions *opt, Diag *diag) {
  char *obj = xsprintf("%s.o", exe_path);
  Argv a = {0};
  push_words(&a, opt->nvcc);
  bool ok = compile_trainer(&a, "-std=c++20 --fmad=false --ftz=true -c", cu_path, "", obj, opt, false, "nvcc",
                            diag);
  if (ok) {
    push_words(&a, cxx);
    push(&a, obj);
    push(&a, "-o");
    push(&a, exe_path);
    push_libraries(&a, opt);
    push_words(&a, opt->cuda_libs);
    int rc = run(&a, "the linker", NULL, opt->verbose, diag);
    free_argv(&a);
    if (rc > 0) diag_error(diag, NO_LOC, "the linker failed (exit %d) on %s", rc, obj);
    ok = rc == 0;
  }
  unlink(obj);
  free(obj);
  return ok;
}

/* The emulation is compiled like a C trainer (the same optimizer flags, no
 * contraction into FMAs, as -std=c11 gives C), so that its kernels compute
 * the C trainer's bits. */
bool build_cuda(const char *cu_path, const char *exe_path, const BuildOptions *opt, bool emulate,
                Diag *diag) {
  const char *cxx = opt->cxx ? opt->cxx : getenv("CXX") && *getenv("CXX") ? getenv("CXX") : "c++";
  if (!emulate) return build_nvcc(cu_path, exe_path, cxx, opt, diag);
  Argv a = {0};
  push_words(&a, cxx);
  return compile_trainer(&a, "-x c++ -std=c++20 -ffp-contract=off -DTRC_CUDA_EMULATE", cu_path,
                         "-x none", exe_path, opt, true, "the C++ compiler", diag);
}

/* The calibration program: each figure is the best of several timed runs,
 * printed as a profile (passes.h). It times what a trainer runs, on the
 * trainer's default threads: GEMMs through trc_gemm, loop kernels as the C
 * backend prints a parallel flat loop (chunks of a constant count, each a
 * float loop the compiler may vectorize) on trc_parallel_for, and a kernel's
 * fixed cost as one dispatch to the threads. */
static const char calibration_source[] =
    "#define _POSIX_C_SOURCE 199309L\n"
    "#define TRC_VECTOR_MATH 1 /* as generated trainers: vector expf from libmvec */\n"
    "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n#include \"trainc_rt.h\"\n"
    "static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }\n"
    "static void touch(float *x, long n) { for (long i = 0; i < n; i++) x[i] = (float)(i % 7) * 0.25f; }\n"
    "/* Loop kernels as trainers have them: buffers at constant offsets of an\n"
    " * arena, a parallel loop's chunks of a constant count (kstmt_parallel_loop). */\n"
    "enum { CHUNK = 64, BIG = 1 << 24, SMALL = 1 << 20, REPEAT = 16 };\n"
    "static void poly(void *ctx, int64_t lo, int64_t hi) {\n"
    "  char *restrict A = ctx;\n"
    "  const float *restrict x = (const float *)(A + 0); float *restrict y = (float *)(A + 4L * BIG);\n"
    "  for (int64_t c = lo; c < hi; c++)\n"
    "    for (int64_t j = 0; j < CHUNK; j++) { const int64_t i = c * CHUNK + j; float v = x[i], r = 0.5f;\n"
    "      for (int k = 0; k < 16; k++) r = r * v + 0.25f; y[i] = r; } }\n"
    "static void add(void *ctx, int64_t lo, int64_t hi) {\n"
    "  char *restrict A = ctx;\n"
    "  const float *restrict x = (const float *)(A + 0), *restrict y = (const float *)(A + 4L * BIG);\n"
    "  float *restrict z = (float *)(A + 8L * BIG);\n"
    "  for (int64_t c = lo; c < hi; c++)\n"
    "    for (int64_t j = 0; j < CHUNK; j++) z[c * CHUNK + j] = x[c * CHUNK + j] + y[c * CHUNK + j]; }\n"
    "/* expf over x (values from touch, where libmvec takes no slow path) into y;\n"
    " * restrict parameters, as a trainer's loop functions have, let GCC vectorize it */\n"
    "static void exp_chunks(const float *restrict x, float *restrict y, int64_t lo, int64_t hi) {\n"
    "  for (int64_t c = lo; c < hi; c++)\n"
    "    for (int64_t j = 0; j < CHUNK; j++) y[c * CHUNK + j] = expf(x[c * CHUNK + j]); }\n"
    "static void exps(void *ctx, int64_t lo, int64_t hi) { float *const *io = ctx; exp_chunks(io[0], io[1], lo, hi); }\n"
    "/* dropout as a trainer's loops print it (kernel_dropout), its random\n"
    " * numbers and the selects that use them: the key and the training flag\n"
    " * read from memory (the arena's rng_key and training slots in a trainer).\n"
    " * Without AVX-512 neither the draw's 64-bit multiplies nor the selects\n"
    " * vectorize, and on such a CPU the selects took as long as the draws */\n"
    "static void draw_chunks(const int32_t *restrict key, const float *restrict training, const float *restrict x,\n"
    "                        float *restrict y, int64_t lo, int64_t hi) {\n"
    "  for (int64_t c = lo; c < hi; c++)\n"
    "    for (int64_t j = 0; j < CHUNK; j++)\n"
    "      y[c * CHUNK + j] = x[c * CHUNK + j] * trc_selectf(training[0],\n"
    "          trc_selectf(trc_kernel_uniform(key, 1, c * CHUNK + j) - 0.1f, 1.11111111f, 0.0f), 1.0f); }\n"
    "static void draws(void *ctx, int64_t lo, int64_t hi) { void *const *io = ctx; draw_chunks(io[0], io[1], io[2], io[3], lo, hi); }\n"
    "static void nothing(void *ctx, int64_t lo, int64_t hi) { (void)ctx, (void)lo, (void)hi; }\n"
    "/* 2x2 max-pools by rows over planes of 28x28 (wide) and 14x14 (narrow),\n"
    " * 802,816 floats each, and their gradients: write_window_kernels prints\n"
    " * them after this text, as the C backend prints kernel_maxpool and\n"
    " * kernel_maxpool_grad */\n"
    "static void rows_wide(void *ctx, int64_t lo, int64_t hi);\n"
    "static void rows_narrow(void *ctx, int64_t lo, int64_t hi);\n"
    "static void grads_wide(void *ctx, int64_t lo, int64_t hi);\n"
    "static void grads_narrow(void *ctx, int64_t lo, int64_t hi);\n"
    "enum { WINDOW_FLOATS = 802816 };\n"
    "/* Seconds of kernel k (WINDOW_WORK's order) on its planes: x, its pool, dy\n"
    " * and dx one after the other in the arena */\n"
    "static double windows(int k, float *x) {\n"
    "  static void (*const fn[4])(void *, int64_t, int64_t) = {rows_wide, rows_narrow, grads_wide, grads_narrow};\n"
    "  float *pooled = x + WINDOW_FLOATS, *dy = pooled + WINDOW_FLOATS / 4, *dx = dy + WINDOW_FLOATS / 4;\n"
    "  int64_t planes = k % 2 == 0 ? 32 * 32 : 32 * 64;\n"
    "  double t = now();\n"
    "  trc_parallel_for(planes, fn[k], k < 2 ? (void *)(float *[2]){pooled, x} : (void *)(float *[3]){dx, x, dy});\n"
    "  return now() - t;\n}\n"
    "/* A rate and a cost a row, from two kernels' seconds t (WINDOW_WORK rows\n"
    " * k and k + 1: the same code on rows of 14 and 7 windows): seconds =\n"
    " * accesses / rate + rows * per_row */\n"
    "static void fit_rows(int k, const double *t, double *rate, double *per_row) {\n"
    "  const double *w = WINDOW_WORK[k], *n = WINDOW_WORK[k + 1];\n"
    "  *per_row = (t[1] * w[0] - t[0] * n[0]) / (n[1] * w[0] - w[1] * n[0]);\n"
    "  if (!(*per_row > 0) || t[0] - *per_row * w[1] < 0.5 * t[0]) *per_row = 0;\n"
    "  *rate = w[0] / (t[0] - *per_row * w[1]);\n}\n"
    "/* Fused attention forward and backward on shape s (ATT_*: calibrate_machine's). */\n"
    "static double attention(const long long *s, float *x) {\n"
    "  const int64_t n = s[0] * s[1] * s[2];\n"
    "  double t = now();\n"
    "  trc_causal_attention(s[0], s[1], s[2], s[3], 0.125f, x, x + n, x + 2 * n, x + 3 * n);\n"
    "  trc_causal_attention_grad(s[0], s[1], s[2], s[3], 0.125f, x, x + n, x + 2 * n, x + 3 * n, x + 4 * n);\n"
    "  return now() - t;\n}\n"
    "/* One pass (trc_conv_pass) of a convolution on shape CONV (calibrate_machine's). */\n"
    "static double conv(float *x, int pass) {\n"
    "  const long long *s = CONV;\n"
    "  float *w = x + s[0] * s[1] * s[2] * s[3], *y = w + s[4] * s[1] * s[5] * s[5];\n"
    "  float *a = pass == TRC_CONV_BACKWARD_DATA ? y : x, *b = pass == TRC_CONV_BACKWARD_WEIGHTS ? y : w;\n"
    "  float *out = pass == TRC_CONV_FORWARD ? y : pass == TRC_CONV_BACKWARD_DATA ? x : w;\n"
    "  double t = now();\n"
    "  trc_conv2d((trc_conv_pass)pass, s[0], s[1], s[2], s[3], s[4], s[5], 1, s[5] / 2, a, b, NULL, 0, out, 0);\n"
    "  return now() - t;\n}\n"
    "/* The optimizer step's passes as trainers make them (trc_grad_norm,\n"
    " * trc_optimizer_step): the gradients' norm, then AdamW block by block, each\n"
    " * block's gradient zeroed after it; UPDATE_BYTES a float, as the cost model\n"
    " * counts them (update_bytes_per_float). */\n"
    "enum { UPDATE_FLOATS = 1 << 24, UPDATE_BLOCK = 4096 };\n"
    "static void adamw_blocks(void *ctx, int64_t lo, int64_t hi) {\n"
    "  float *const *pgmv = ctx;\n"
    "  const trc_adamw_hparams h = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01, .step = 1};\n"
    "  for (int64_t b = lo; b < hi; b++) {\n"
    "    const int64_t at = b * UPDATE_BLOCK;\n"
    "    trc_adamw_update(pgmv[0] + at, pgmv[1] + at, 1.0f, pgmv[2] + at, pgmv[3] + at, UPDATE_BLOCK, &h);\n"
    "    memset(pgmv[1] + at, 0, UPDATE_BLOCK * sizeof(float)); } }\n"
    "static double update(float *const *pgmv) {\n"
    "  double t = now();\n"
    "  volatile double norm = trc_grad_norm(pgmv[1], UPDATE_FLOATS);\n"
    "  (void)norm;\n"
    "  trc_parallel_for(UPDATE_FLOATS / UPDATE_BLOCK, adamw_blocks, (void *)pgmv);\n"
    "  return now() - t;\n}\n"
    "/* A pass's arithmetic: its time less its reorders at the bandwidth (bw:\n"
    " * the copy loop's time over 12 * BIG bytes). */\n"
    "static double conv_flops_rate(int pass, double seconds, double bw) {\n"
    "  double rate = CONV_FLOPS[pass] / (seconds - CONV_REORDER_BYTES[pass] * bw / (12.0 * BIG));\n"
    "  return rate > 0 ? rate : CONV_FLOPS[pass] / seconds;\n}\n"
    "/* Attention's products as bmm makes them (examples/gpt.nn's: MATRICES\n"
    " * heads of 64 x 64 x 32 scores, B transposed, and 64 x 32 x 64 outputs):\n"
    " * their time less their FLOPs at the large GEMM's rate is what each matrix\n"
    " * costs beyond them. */\n"
    "enum { MATRICES = 128 };\n"
    "/* A GEMM with two short sides (examples/gpt.nn's 2048 x 128 x 128): beside\n"
    " * the large one, what each element of A, B and C costs beyond the FLOPs */\n"
    "enum { THIN_M = 2048, THIN_K = 128, THIN_CALLS = 8 };\n"
    "static double elements(double m, double n, double k) { return m * k + k * n + m * n; }\n"
    "static double small_gemms(const float *a, float *b, float *c) {\n"
    "  double t = now();\n"
    "  trc_gemm_f32(MATRICES, 1, 0, 1, 64, 64, 32, a, 32, 64 * 32, 0, a, 32, 64 * 32, 0, 0.0f, c, 64, 64 * 64, 0);\n"
    "  trc_gemm_f32(MATRICES, 1, 0, 0, 64, 32, 64, c, 64, 64 * 64, 0, a, 32, 64 * 32, 0, 0.0f, b, 32, 64 * 32, 0);\n"
    "  return now() - t;\n}\n"
    "static void release(float *a, float *b, float *c, char *arena, float *state) {\n"
    "  free(a), free(b), free(c), trc_arena_free(arena), trc_arena_free((char *)state);\n}\n"
    "int main(void) {\n"
    "  const int n = 1024, calls = 10000;\n"
    "  float *a = malloc(4L * n * n), *b = malloc(4L * n * n), *c = malloc(4L * n * n);\n"
    "  /* the loops' buffers in an arena as trainers map theirs (huge pages: from\n"
    "   * memory a trainer's loops ran 1.3-1.8x as fast as in 4 KiB pages) */\n"
    "  trc_error err = {0};\n"
    "  char *arena = trc_arena_alloc(12L * BIG, &err);\n"
    "  float *state = (float *)trc_arena_alloc(16L * UPDATE_FLOATS, &err);\n"
    "  if (!a || !b || !c || !arena || !state) { release(a, b, c, arena, state); return 1; }\n"
    "  float *const pgmv[4] = {state, state + UPDATE_FLOATS, state + 2L * UPDATE_FLOATS, state + 3L * UPDATE_FLOATS};\n"
    "  touch(a, (long)n * n); touch(b, (long)n * n); touch(c, (long)n * n); touch((float *)arena, 3L * BIG);\n"
    "  trc_set_threads(0);\n"
    "  double gemm = 1e30, gemm16 = 1e30, loop = 1e30, bw = 1e30, cache = 1e30, call = 1e30;\n"
    "  double att_a = 1e30, att_b = 1e30, convs[3] = {1e30, 1e30, 1e30}, convs16 = 1e30, math = 1e30, upd = 1e30;\n"
    "  double window[4] = {1e30, 1e30, 1e30, 1e30};\n"
    "  double small = 1e30, rng = 1e30, thin = 1e30;\n"
    "  float training = 1.0f; /* dropout's flag, as a trainer's training slot holds it */\n"
    "  for (int r = 0; r < 5; r++) {\n"
    "    double t = now();\n"
    "    trc_gemm(1, 1, 0, 0, n, n, n, a, n, 0, 0, b, n, 0, 0, 0.0f, c, n, 0, 0);\n"
    "    t = now() - t; if (t < gemm) gemm = t;\n"
    "    t = now(); for (int k = 0; k < THIN_CALLS; k++)\n"
    "      trc_gemm(1, 1, 0, 0, THIN_M, THIN_K, THIN_K, a, THIN_K, 0, 0, b, THIN_K, 0, 0, 0.0f, c, THIN_K, 0, 0);\n"
    "    t = (now() - t) / THIN_CALLS; if (t < thin) thin = t;\n"
    "    t = now();\n"
    "    trc_gemm_rounded(1, 1, 0, 0, n, n, n, a, n, 0, 0, b, n, 0, 0, 0.0f, c, n, 0, 0);\n"
    "    t = now() - t; if (t < gemm16) gemm16 = t;\n"
    "    t = now(); trc_parallel_for(SMALL / CHUNK, poly, arena); t = now() - t; if (t < loop) loop = t;\n"
    "    t = now(); trc_parallel_for(BIG / CHUNK, add, arena); t = now() - t; if (t < bw) bw = t;\n"
    "    /* the same loop over 12 MiB, again and again: from the cache */\n"
    "    t = now(); for (int k = 0; k < REPEAT; k++) trc_parallel_for(SMALL / CHUNK, add, arena);\n"
    "    t = now() - t; if (t < cache) cache = t;\n"
    "    t = now(); for (int k = 0; k < calls; k++) trc_parallel_for(trc_threads(), nothing, NULL);\n"
    "    t = now() - t; if (t < call) call = t;\n"
    "    t = attention(ATT_A, (float *)arena); if (t < att_a) att_a = t;\n"
    "    t = attention(ATT_B, (float *)arena); if (t < att_b) att_b = t;\n"
    "    for (int p = 0; p < 3; p++) { t = conv((float *)arena, p); if (t < convs[p]) convs[p] = t; }\n"
    "    trc_set_precision(TRC_BF16); t = conv((float *)arena, TRC_CONV_FORWARD); trc_set_precision(TRC_FP32);\n"
    "    if (t < convs16) convs16 = t;\n"
    "    /* from a, which only GEMMs read: small_gemms writes b, whose products\n"
    "     * (thousands) overflow expf, libmvec's slow path, 10x slower. Timed on\n"
    "     * a second call: the first after the convolutions ran 1.4-6 times as long\n"
    "     * on the Xeon of 2026-12-06 (the rate is the math's; the bytes are\n"
    "     * priced apart) */\n"
    "    trc_parallel_for(SMALL / CHUNK, exps, (float *[2]){a, c});\n"
    "    t = now(); trc_parallel_for(SMALL / CHUNK, exps, (float *[2]){a, c}); t = now() - t; if (t < math) math = t;\n"
    "    t = now(); trc_parallel_for(SMALL / CHUNK, draws, (void *[4]){arena, &training, a, c}); t = now() - t; if (t < rng) rng = t;\n"
    "    for (int k = 0; k < 4; k++) { t = windows(k, (float *)arena); if (t < window[k]) window[k] = t; }\n"
    "    t = update(pgmv); if (t < upd) upd = t;\n"
    "    /* again, on operands in the cache: what each matrix costs alone (a\n"
    "     * step's products wait for their bytes too, priced apart) */\n"
    "    small_gemms(a, b, c);\n"
    "    t = small_gemms(a, b, c); if (t < small) small = t;\n"
    "  }\n"
    "  double conv_rate[3], conv16_rate = conv_flops_rate(TRC_CONV_FORWARD, convs16, bw);\n"
    "  for (int p = 0; p < 3; p++) conv_rate[p] = conv_flops_rate(p, convs[p], bw);\n"
    "  /* seconds = flops / rate + elements * per_element, from the two GEMMs */\n"
    "  double big_flops = 2.0 * n * n * n, thin_flops = 2.0 * THIN_M * THIN_K * THIN_K;\n"
    "  double big_elements = elements(n, n, n), thin_elements = elements(THIN_M, THIN_K, THIN_K);\n"
    "  double per_element = (thin * big_flops - gemm * thin_flops) / (thin_elements * big_flops - big_elements * thin_flops);\n"
    "  if (!(per_element > 0) || gemm - per_element * big_elements < 0.5 * gemm) per_element = 0;\n"
    "  double gemm_rate = big_flops / (gemm - per_element * big_elements);\n"
    "  /* the bf16 GEMM's rate less the rounding of its two operands, which the\n"
    "   * cost model prices apart (3 bytes moved a byte of copy, from the cache) */\n"
    "  double rounding = 3.0 * 2 * n * n * sizeof(uint16_t) / (12.0 * SMALL * REPEAT / cache);\n"
    "  double gemm16_rest = gemm16 - rounding - per_element * big_elements;\n"
    "  double gemm16_rate = big_flops / (gemm16_rest > 0.5 * gemm16 ? gemm16_rest : gemm16);\n"
    "  /* attention's seconds = flops / rate + blocks * per_block, from its two shapes */\n"
    "  double per_block = (att_b * ATT_FLOPS[0] - att_a * ATT_FLOPS[1]) /\n"
    "                     (ATT_BLOCKS[1] * ATT_FLOPS[0] - ATT_BLOCKS[0] * ATT_FLOPS[1]);\n"
    "  if (!(per_block > 1e-9)) per_block = 1e-9;\n"
    "  double att_rate = ATT_FLOPS[0] / (att_a - ATT_BLOCKS[0] * per_block);\n"
    "  if (!(att_rate > 0)) att_rate = ATT_FLOPS[0] / att_a;\n"
    "  double per_matrix = (small - 2.0 * MATRICES * (2 * 64 * 64 * 32 / gemm_rate + elements(64, 64, 32) * per_element)) /\n"
    "                      (2 * MATRICES);\n"
    "  if (!(per_matrix > 1e-9)) per_matrix = 1e-9;\n"
    "  double scratch_rate, scratch_row, window_rate, window_row;\n"
    "  fit_rows(0, window, &scratch_rate, &scratch_row);\n"
    "  fit_rows(2, window + 2, &window_rate, &window_row);\n"
    "  printf(\"# %d threads\\ngemm_flops = %g\\ngemm_bf16_flops = %g\\nloop_flops = %g\\nbandwidth = %g\\n\"\n"
    "         \"kernel_overhead = %g\\ncache_bandwidth = %g\\ncache_bytes = %d\\nattention_flops = %g\\n\"\n"
    "         \"attention_block_seconds = %g\\nconv_flops = %g\\nmath_calls = %g\\nwindow_accesses = %g\\n\"\n"
    "         \"update_bandwidth = %g\\nconv_bf16_flops = %g\\ngemm_matrix_seconds = %g\\nrng_draws = %g\\n\"\n"
    "         \"gemm_element_seconds = %g\\nwindow_row_seconds = %g\\nscratch_accesses = %g\\n\"\n"
    "         \"scratch_row_seconds = %g\\nconv_data_flops = %g\\nconv_weight_flops = %g\\n\",\n"
    "         trc_threads(),\n"
    "         gemm_rate, gemm16_rate, 32.0 * SMALL / loop, 12.0 * BIG / bw,\n"
    "         call / calls + 1e-9, 12.0 * SMALL * REPEAT / cache, 16 << 20, att_rate, per_block, conv_rate[0],\n"
    "         SMALL / math, window_rate, UPDATE_BYTES * UPDATE_FLOATS / upd, conv16_rate, per_matrix,\n"
    "         SMALL / rng, per_element, window_row, scratch_rate, scratch_row, conv_rate[1], conv_rate[2]);\n"
    "  release(a, b, c, arena, state);\n"
    "  return 0;\n}\n";

/* The calibration program's two attention shapes (GPT-2's one sequence of
 * 1024, many blocks of 64 keys), with their FLOPs and tasks as the cost
 * model counts them (ir.h), from which it fits attention's rate and cost
 * per task. */
static bool write_attention_shapes(FILE *f) {
  const AttentionDims shapes[2] = {{.b = 1, .t = 1024, .c = 768, .heads = 12}, {.b = 32, .t = 64, .c = 128, .heads = 4}};
  for (int i = 0; i < 2; i++)
    fprintf(f, "static const long long ATT_%c[4] = {%lld, %lld, %lld, %lld};\n", "AB"[i], (long long)shapes[i].b,
            (long long)shapes[i].t, (long long)shapes[i].c, (long long)shapes[i].heads);
  double flops[2], blocks[2];
  for (int i = 0; i < 2; i++) {
    flops[i] = attention_flops(&shapes[i], false) + attention_flops(&shapes[i], true);
    blocks[i] = 2.0 * (double)attention_blocks(&shapes[i]);
  }
  return fprintf(f, "static const double ATT_FLOPS[2] = {%.17g, %.17g}, ATT_BLOCKS[2] = {%.17g, %.17g};\n",
                 flops[0], flops[1], blocks[0], blocks[1]) > 0;
}

/* The calibration program's convolution (fashion_cnn's second, at 32
 * images: [32, 32, 14, 14] by 64 3x3 filters, padding 1), with the FLOPs of
 * each pass (trc_conv_pass's order) and the bytes its reorders move, as the
 * cost model counts them (ir.h). */
static bool write_conv_shape(FILE *f) {
  ConvDims d = {.n = 32, .c = 32, .h = 14, .w = 14, .o = 64, .k = 3, .stride = 1, .pad = 1};
  double flops[3], reorders[3];
  for (int pass = 0; pass < 3; pass++) {
    d.pass = pass;
    flops[pass] = conv_flops(&d);
    reorders[pass] = conv_reorder_bytes(&d);
  }
  return fprintf(f, "static const long long CONV[6] = {%lld, %lld, %lld, %lld, %lld, %lld};\n", (long long)d.n,
                 (long long)d.c, (long long)d.h, (long long)d.w, (long long)d.o, (long long)d.k) > 0 &&
         fprintf(f, "static const double CONV_FLOPS[3] = {%.17g, %.17g, %.17g}, CONV_REORDER_BYTES[3] = {%.17g, %.17g, %.17g};\n",
                 flops[0], flops[1], flops[2], reorders[0], reorders[1], reorders[2]) > 0;
}

/* The calibration program's max-pools, by rows, and their gradients
 * (windows one by one, with the relu's mask the POOL pass folds in), built
 * and prepared as a trainer's kernels are (kernel_prepare: its selects
 * eager, its conversions from 32 bits), on two images of 802,816 floats: fashion_cnn's
 * first pool at 32 images ([32, 32, 28, 28], rows of 14 windows: `wide`)
 * and its second at 32 ([32, 64, 14, 14], rows of 7). x is b0, the pool
 * b1, dy b2, dx b3. */
static Kernel *window_kernel(Graph *g, bool gradient, bool wide) {
  Shape img = {.rank = 4, .dim = {32, wide ? 32 : 64, wide ? 28 : 14, wide ? 28 : 14}}, cells = img;
  cells.dim[2] /= 2, cells.dim[3] /= 2;
  int x = graph_add(g, OP_INPUT, NULL, 0, NO_LOC, NULL);
  g->nodes[x].dtype = DT_F32;
  g->nodes[x].shape = img;
  int id = graph_add_attr(g, OP_MAXPOOL, &x, 1, 0, 2, 2, NO_LOC, NULL);
  if (gradient) {
    int dy = graph_add(g, OP_INPUT, NULL, 0, NO_LOC, NULL);
    g->nodes[dy].dtype = DT_F32;
    g->nodes[dy].shape = cells;
    Attr relu = {.i = {2, 2, 1}, .shape = img};
    id = graph_add_op(g, OP_MAXPOOL_GRAD, (int[2]){x, dy}, 2, &relu, NO_LOC, NULL);
  }
  Kernel *k = op_info(g->nodes[id].op)->kernel(g, &g->nodes[id]);
  kernel_prepare(g, k);
  return k;
}

/* Each kernel's rows of windows as the cost model counts them
 * (kernel_short_row_work): its accesses and how many rows start, in the
 * order the program times them: rows wide, rows narrow, gradient wide,
 * gradient narrow. Before the program's text. */
static bool write_window_work(FILE *f) {
  fputs("static const double WINDOW_WORK[4][2] = {", f);
  for (int i = 0; i < 4; i++) {
    Graph *g = graph_new();
    Kernel *k = window_kernel(g, i >= 2, i % 2 == 0);
    ShortRowWork w = kernel_short_row_work(k);
    fprintf(f, "%s{%.17g, %.17g}", i ? ", " : "", w.accesses, w.runs);
    kernel_free(k);
    graph_free(g);
  }
  return fputs("};\n", f) >= 0;
}

/* One kernel's code after the program's text, as the C backend prints it:
 * `name_chunks(params..., lo, hi)` runs its planes (its one parallel loop,
 * chunks of one) from lo to hi, `name(ctx, lo, hi)` calls it with the
 * buffers in ctx, in the order of params. */
static bool write_window_chunks(FILE *f, const char *name, bool gradient, bool wide) {
  Graph *g = graph_new();
  Kernel *k = window_kernel(g, gradient, wide);
  bool one_loop = k->nbody == 1 && k->body[0]->kind == KS_FOR;
  if (!one_loop) diag_internal_error("the calibration's %s kernel is no single loop over planes", name);
  const KStmt *planes = k->body[0];
  const char *params = gradient ? "float *restrict b3, const float *restrict b0, const float *restrict b2"
                                : "float *restrict b1, const float *restrict b0";
  fprintf(f, "%sstatic void %s_chunks(%s, int64_t lo, int64_t hi) {\n  for (int64_t i%d = lo; i%d < hi; i%d++) {\n",
          k->short_rows ? "TRC_SHORT_ROWS " : "", name, params, planes->var, planes->var, planes->var);
  print_stmts(f, planes->body, planes->nbody, 2);
  bool ok = fprintf(f, "  }\n}\nstatic void %s(void *ctx, int64_t lo, int64_t hi) {\n  float *const *io = ctx;\n"
                       "  %s_chunks(io[0], io[1], %slo, hi);\n}\n",
                    name, name, gradient ? "io[2], " : "") > 0;
  kernel_free(k);
  graph_free(g);
  return ok;
}

static bool write_window_kernels(FILE *f) {
  return write_window_chunks(f, "rows_wide", false, true) && write_window_chunks(f, "rows_narrow", false, false) &&
         write_window_chunks(f, "grads_wide", true, true) && write_window_chunks(f, "grads_narrow", true, false);
}

/* The bytes an AdamW step in fp32 with clipping (the calibration program
 * sums the norm too) moves a float, as the cost model counts them: the
 * calibration program's update pass divided by its time is the rate
 * update_seconds prices at. */
static bool write_update_bytes(FILE *f) {
  trc_train_config adamw = {.optimizer = TRC_ADAMW, .precision = TRC_FP32, .clip_norm = 1.0};
  return fprintf(f, "static const double UPDATE_BYTES = %.17g;\n", update_bytes_per_float(&adamw)) > 0;
}

/* Runs the built calibration program and parses the profile it prints. */
static bool measure(const char *exe, const char *out, const BuildOptions *opt, MachineProfile *profile, Diag *diag) {
  Argv a = {0};
  push(&a, exe);
  int rc = run(&a, "the calibration program", out, opt->verbose, diag);
  free_argv(&a);
  if (rc > 0) diag_error(diag, NO_LOC, "the calibration program failed (exit %d)", rc);
  if (rc != 0) return false;
  SourceFile *f = source_read(out, diag);
  bool ok = f && profile_parse(f, profile, diag);
  source_free(f);
  return ok;
}

bool calibrate_machine(const BuildOptions *opt, MachineProfile *profile, Diag *diag) {
  char dir[] = "/tmp/trainc-calibrate-XXXXXX";
  if (!mkdtemp(dir)) {
    diag_error(diag, NO_LOC, "cannot make a temporary folder: %s", strerror(errno));
    return false;
  }
  char *src = xsprintf("%s/calibrate.c", dir), *exe = xsprintf("%s/calibrate", dir), *out = xsprintf("%s/profile", dir);
  FILE *f = fopen(src, "w");
  bool ok = f && write_attention_shapes(f) && write_conv_shape(f) && write_window_work(f) && write_update_bytes(f) &&
            fputs(calibration_source, f) >= 0 && write_window_kernels(f);
  ok = f && fclose(f) == 0 && ok;
  if (!ok) diag_file_error(diag, src, "cannot write the calibration program");
  ok = ok && build_c(src, exe, opt, diag) && measure(exe, out, opt, profile, diag);
  unlink(src), unlink(exe), unlink(out), rmdir(dir);
  free(src), free(exe), free(out);
  return ok;
}
