/* main.c — the trainc command line. A thin shell over the stages: every
 * decision lives in frontend/, ir/, passes/ and codegen/, so tests call those
 * directly; this file parses flags, runs the pipeline and does the I/O the
 * passes do not (the model file, a machine profile, the machine's free
 * memory, output files). Every error goes through one Diag. */
#include "codegen.h"
#include "trc_memory.h" /* the figure `checkpoint auto` plans for, shared with the runtime */

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef TRAINC_VERSION
#define TRAINC_VERSION "0.0.0"
#endif

static const char *usage_text =
    "usage: trainc <command> FILE.nn [options]\n"
    "\n"
    "Compiles a model file (network + training policy) into a training program.\n"
    "\n"
    "commands:\n"
    "  check FILE.nn            parse and type-check; print nothing but errors\n"
    "                           (and the --dump asked for)\n"
    "  plan  FILE.nn            show which activations are stored and which\n"
    "                           recomputed, the planned peak memory and step time\n"
    "  emit  FILE.nn -o OUT     write the trainer's C source (OUT: a .c file or a folder)\n"
    "  build FILE.nn -o BIN     compile a native trainer executable\n"
    "  run   FILE.nn [FLAGS]    compile the trainer in memory (LLVM) and train\n"
    "                           at once; FLAGS are the trainer's (--data, ...)\n"
    "                           and trainc's own options go before FILE.nn\n"
    "  calibrate [-o FILE]      measure this machine's GEMM, loop and memory speed\n"
    "                           and write a profile for --profile (default: stdout)\n"
    "\n"
    "options:\n"
    "  --model NAME             the model to compile when the file holds several\n"
    "  --policy P               checkpointing: off, all, sqrt, auto, 'every N',\n"
    "                           'budget SIZE' (overrides the train block)\n"
    "  --budget SIZE            the same as --policy 'budget SIZE' (e.g. 64MiB)\n"
    "  --profile FILE           machine profile from `trainc calibrate`\n"
    "  --memory SIZE            the memory `checkpoint auto` fits the plan in\n"
    "                           (default: what this machine has free now)\n"
    "  --format table|json|dot  plan: output format (default table)\n"
    "  --sweep                  plan: the budget -> peak -> overhead curve\n"
    "                           (a table, or --format json)\n"
    "  --svg FILE               plan --sweep: also draw the curve as SVG\n"
    "  --measured FILE          plan: also show what its trainer measured\n"
    "                           (the trainer's --kernel-times FILE)\n"
    "  --dump=PASS              also print the program after a pass (check,\n"
    "                           plan, emit, build), in pipeline order:\n"
#define DUMP_HELP(id, name, doc) "                           " name ": " doc "\n"
    TRAINC_PASSES(DUMP_HELP)
#undef DUMP_HELP
    "  -o, --output PATH        where emit/build write\n"
    "  --backend B              emit/build: c (default; the C compiler compiles\n"
    "                           it), llvm (emit writes a .ll file), cuda (nvcc,\n"
    "                           cuBLAS) or cuda-emulate (the same .cu run on the\n"
    "                           CPU; docs/cuda.md)\n"
    "  --mcpu CPU, --mattr F    LLVM: target CPU and features (default: this\n"
    "                           machine's; e.g. --mcpu znver4 --mattr=-avx512f)\n"
    "  --scalar-math            LLVM: libm's expf, logf, tanhf, erff in every\n"
    "                           loop, not libmvec's vector versions\n"
    "  --cc CC                  C compiler and linker of build (default: $CC, else " TRAINC_DEFAULT_CC ")\n"
    "  --cflags FLAGS           its flags (default: " TRAINC_DEFAULT_CFLAGS ")\n"
    "  --keep-c FILE.c          build: also keep the generated C source in FILE.c\n"
    "                           (FILE.cu for the CUDA backends)\n"

    "  --mpi                    build: link MPI (automatic when the train block\n"
    "                           asks for local_sgd > 1 or sync gradients)\n"
    "  --bucket SIZE            emit/build: gradient all-reduce buckets of at least\n"
    "                           SIZE (e.g. 256KiB; default 1MiB), started during\n"
    "                           backward when gradients are averaged\n"
    "  --time-phases            print the seconds each compiler phase took on\n"
    "                           stderr: parse, lower, autodiff, plan, schedule\n"
    "                           (the memory plans inside plan), emit; run: also\n"
    "                           LLVM's module, optimize and codegen\n"
    "  --no-fuse                fuse no pointwise kernel into its reader, nor\n"
    "                           a relu's gradient into a max-pool's (the\n"
    "                           unfused program: the same arithmetic)\n"
    "  --conv-im2col            convolutions as im2col + GEMM (the CUDA\n"
    "                           backend's form) instead of oneDNN's\n"
    "  --loss-head H            a loss cross_entropy(x @ w) over a parameter w:\n"
    "                           chunked (default: its logits made a few rows at\n"
    "                           a time, never stored), auto (chunked, the budget\n"
    "                           search weighs the chunk's size: trains to the\n"
    "                           weights of the chunk it picks), ROWS per chunk,\n"
    "                           or whole (the [rows, classes] logits stored; the\n"
    "                           CUDA backends' form)\n"
    "  --attention A            causal attention without dropout on its\n"
    "                           probabilities: fused (one runtime call that\n"
    "                           never stores the [B, heads, T, T] probabilities;\n"
    "                           its backward remakes them a few rows at a time),\n"
    "                           whole (the probabilities stored; the CUDA\n"
    "                           backends' form), or auto (default: the planner\n"
    "                           plans both and keeps the faster predicted step\n"
    "                           that fits; `trainc plan` shows both)\n"
    "  --compress C             bf16: the plan may store activations in bf16,\n"
    "                           half their bytes, where the backward pass reads\n"
    "                           them only as GEMM operands, signs or gradient\n"
    "                           scales, and recomputes GEMMs with bf16 operands\n"
    "                           (f32 sums): the weights differ from an f32\n"
    "                           plan's by that rounding; none (default). Not on\n"
    "                           the CUDA backends\n"
    "  -v, --verbose            show the compiler command (LLVM: its warnings)\n"
    "  -h, --help               this help\n"
    "      --version            the version\n"
    "\n"
    "The generated trainer has its own --help (data, epochs, saving, logs).\n"
    "Docs: docs/language.md (model files), docs/trainer.md (trainers).\n";

typedef struct {
  const char *command, *file, *model, *dump, *output, *cc, *cflags, *keep_c;
  const char *policy, *budget, *profile, *format, *svg, *memory, *bucket;
  const char *measured;  /* plan --measured: a trainer's --kernel-times file */
  const char *backend, *mcpu, *mattr, *loss_head, *compress, *attention;
  int trainer_argc;      /* run: the trainer's flags, after FILE.nn */
  char **trainer_argv;
  bool verbose, sweep, mpi, time_phases, no_fuse, conv_im2col, scalar_math;
  bool compress_bf16;    /* --compress bf16: CheckpointSpec.compress */
  uint64_t memory_bytes; /* --memory; 0: the machine's free memory */
  uint64_t bucket_bytes; /* --bucket; 0: GRAD_BUCKET_BYTES */
  int64_t head_chunk;    /* --loss-head: CompileOptions.head_chunk */
} Options;

static Diag diag; /* where every message of this run goes */

/* --time-phases: seconds per compiler phase, -1 for a phase not run (the
 * pipeline times its passes; emit is the driver's). */
typedef enum { PH_PARSE, PH_LOWER, PH_AUTODIFF, PH_PLAN, PH_SCHEDULE, PH_EMIT, PH_COUNT } Phase;
static const char *const phase_names[PH_COUNT] = {"parse", "lower", "autodiff",
                                                  "plan", "schedule", "emit"};
static double phase_seconds[PH_COUNT] = {-1, -1, -1, -1, -1, -1};
static double phase_started;

/* The phases from the pipeline's passes: plan is WEAVE less the program
 * builds of its candidates, which are schedule. */
static void phases_of(const Compilation *c) {
  phase_seconds[PH_PARSE] = c->seconds[PASS_AST];
  phase_seconds[PH_LOWER] = c->seconds[PASS_IR];
  phase_seconds[PH_AUTODIFF] = c->seconds[PASS_GRAD];
  if (!c->plan) return;
  phase_seconds[PH_PLAN] = c->seconds[PASS_WEAVE] - c->plan->schedule_seconds;
  phase_seconds[PH_SCHEDULE] = c->plan->schedule_seconds;
}

static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void phase_start(void) { phase_started = seconds_now(); }
static void phase_end(Phase ph) { phase_seconds[ph] = seconds_now() - phase_started; }

static void print_phases(void) {
  fputs("phase seconds:", stderr);
  for (int i = 0; i < PH_COUNT; i++)
    if (phase_seconds[i] >= 0) fprintf(stderr, " %s %.4f", phase_names[i], phase_seconds[i]);
  fputc('\n', stderr);
}

static int usage_error(const char *fmt, const char *arg) {
  diag_error(&diag, NO_LOC, fmt, arg);
  diag_note(&diag, NO_LOC, "see trainc --help");
  return 2;
}

static Pass dump_pass(const Options *o) { return o->dump ? pass_named(o->dump) : PASS_NONE; }

/* weave and the passes after it show a plan, so even `check` plans for them. */
static bool dump_needs_plan(const Options *o) { return dump_pass(o) >= PASS_WEAVE; }

/* Takes the value of --flag VALUE or --flag=VALUE; NULL when absent. */
static const char *flag_value(int argc, char **argv, int *i, const char *name) {
  size_t len = strlen(name);
  if (strncmp(argv[*i], name, len) != 0) return NULL;
  if (argv[*i][len] == '=') return argv[*i] + len + 1;
  if (argv[*i][len] != '\0') return NULL;
  if (*i + 1 >= argc) return "";
  return argv[++*i];
}

static bool use_llvm(const Options *o) {
  return !strcmp(o->command, "run") || (o->backend && !strcmp(o->backend, "llvm"));
}

/* --backend, --mcpu and --mattr, and what goes with which backend. Returns
 * -1 to go on, else the exit status. */
static int backend_options_ok(const Options *o) {
  bool run = !strcmp(o->command, "run");
  static const char *const backends[] = {"c", "llvm", "cuda", "cuda-emulate"};
  bool known = !o->backend;
  for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
    known |= o->backend && !strcmp(o->backend, backends[i]);
  if (!known)
    return usage_error("--backend takes c, llvm, cuda or cuda-emulate, not '%s'", o->backend);
  if (o->backend && strcmp(o->command, "emit") && strcmp(o->command, "build"))
    return usage_error("%s", run ? "run always uses LLVM: no --backend"
                                 : "--backend goes with emit and build");
  if (o->loss_head && o->head_chunk != HEAD_WHOLE && o->backend && !strncmp(o->backend, "cuda", 4))
    return usage_error("%s", "the CUDA backends have no chunked loss head: --loss-head whole");
  if (o->compress_bf16 && o->backend && !strncmp(o->backend, "cuda", 4))
    return usage_error("%s", "the CUDA backends store no activations in bf16: no --compress bf16");
  if (o->attention && !strcmp(o->attention, "fused") && o->backend && !strncmp(o->backend, "cuda", 4))
    return usage_error("%s", "the CUDA backends have no fused attention: --attention whole");
  if ((o->mcpu || o->mattr || o->scalar_math) && !use_llvm(o))
    return usage_error("%s", "--mcpu, --mattr and --scalar-math go with the LLVM backend");
  if (use_llvm(o) && o->keep_c) return usage_error("%s", "--keep-c goes with the C backend");
  if (run && o->output)
    return usage_error("%s", "run writes no trainer: no -o (use build for one)");
  return -1;
}

/* trainc's options that no trainer has: after `trainc run FILE.nn` they
 * would reach the trainer, which does not know them. */
static const char *const compiler_options[] = {
    "--model", "--policy", "--budget",  "--profile",     "--memory", "--format",
    "--sweep", "--svg",    "--measured", "--dump",    "-o",            "--output", "--backend",
    "--mcpu",  "--mattr",  "--cc",      "--scalar-math", "--cflags", "--keep-c",
    "--mpi",   "--bucket", "--no-fuse", "--time-phases", "-v",       "--verbose",
    "--conv-im2col", "--loss-head", "--compress", "--attention"};

/* run: one of trainc's options among the trainer's flags is an error that
 * says where it goes. Returns -1 to go on, else the exit status. */
static int trainer_flags_ok(const Options *o) {
  for (int i = 0; i < o->trainer_argc; i++) {
    const char *a = o->trainer_argv[i];
    size_t len = strcspn(a, "=");
    for (size_t k = 0; k < sizeof compiler_options / sizeof compiler_options[0]; k++) {
      const char *option = compiler_options[k];
      if (strlen(option) != len || strncmp(a, option, len)) continue;
      diag_error(&diag, NO_LOC,
                 "%s is an option of trainc, not of the trainer: it goes before the model file "
                 "(trainc run %s ... %s [trainer flags])",
                 option, option, o->file);
      return 2;
    }
  }
  return -1;
}

/* --loss-head: whole, chunked (the default chunk), auto or ROWS (> 0). */
static bool parse_loss_head(const char *text, int64_t *chunk) {
  if (!strcmp(text, "whole")) return *chunk = HEAD_WHOLE, true;
  if (!strcmp(text, "chunked")) return *chunk = HEAD_CHUNK_DEFAULT, true;
  if (!strcmp(text, "auto")) return *chunk = HEAD_CHUNK_AUTO, true;
  char *end;
  long long rows = strtoll(text, &end, 10);
  if (end == text || *end || rows < 1 || rows > (1LL << 40)) return false;
  *chunk = rows;
  return true;
}

/* Returns -1 to go on, else the exit status. */
static int parse_options(int argc, char **argv, Options *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    if (o->file && !strcmp(o->command, "run")) { /* the rest is the trainer's */
      o->trainer_argc = argc - i;
      o->trainer_argv = argv + i;
      break;
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage_text, stdout);
      return 0;
    }
    if (!strcmp(a, "--version")) {
      printf("trainc %s\n", TRAINC_VERSION);
      return 0;
    }
    if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o->verbose = true;
    else if (!strcmp(a, "--mpi")) o->mpi = true;
    else if (!strcmp(a, "--time-phases")) o->time_phases = true;
    else if (!strcmp(a, "--no-fuse")) o->no_fuse = true;
    else if (!strcmp(a, "--conv-im2col")) o->conv_im2col = true;
    else if (!strcmp(a, "--scalar-math")) o->scalar_math = true;
    else if ((v = flag_value(argc, argv, &i, "--model"))) o->model = v;
    else if ((v = flag_value(argc, argv, &i, "--dump"))) o->dump = v;
    else if ((v = flag_value(argc, argv, &i, "--output")) || (v = flag_value(argc, argv, &i, "-o"))) o->output = v;
    else if ((v = flag_value(argc, argv, &i, "--cc"))) o->cc = v;
    else if ((v = flag_value(argc, argv, &i, "--cflags"))) o->cflags = v;
    else if ((v = flag_value(argc, argv, &i, "--keep-c"))) o->keep_c = v;
    else if ((v = flag_value(argc, argv, &i, "--policy"))) o->policy = v;
    else if ((v = flag_value(argc, argv, &i, "--budget"))) o->budget = v;
    else if ((v = flag_value(argc, argv, &i, "--profile"))) o->profile = v;
    else if ((v = flag_value(argc, argv, &i, "--format"))) o->format = v;
    else if ((v = flag_value(argc, argv, &i, "--svg"))) o->svg = v;
    else if ((v = flag_value(argc, argv, &i, "--measured"))) o->measured = v;
    else if ((v = flag_value(argc, argv, &i, "--memory"))) o->memory = v;
    else if ((v = flag_value(argc, argv, &i, "--bucket"))) o->bucket = v;
    else if ((v = flag_value(argc, argv, &i, "--loss-head"))) o->loss_head = v;
    else if ((v = flag_value(argc, argv, &i, "--attention"))) o->attention = v;
    else if ((v = flag_value(argc, argv, &i, "--compress"))) o->compress = v;
    else if ((v = flag_value(argc, argv, &i, "--backend"))) o->backend = v;
    else if ((v = flag_value(argc, argv, &i, "--mcpu"))) o->mcpu = v;
    else if ((v = flag_value(argc, argv, &i, "--mattr"))) o->mattr = v;
    else if (!strcmp(a, "--sweep")) o->sweep = true;
    else if (a[0] == '-' && a[1] != '\0') return usage_error("unknown option '%s'", a);
    else if (!o->command) o->command = a;
    else if (!o->file) o->file = a;
    else return usage_error("unexpected argument '%s'", a);
  }
  if (!o->command) return usage_error("%s", "no command given");
  static const char *commands[] = {"check", "plan", "emit", "build", "run", "calibrate"};
  bool known = false;
  for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) known |= !strcmp(o->command, commands[c]);
  if (!known) return usage_error("unknown command '%s'", o->command);
  if (!strcmp(o->command, "calibrate")) return o->file ? usage_error("unexpected argument '%s'", o->file) : -1;
  if (!o->file) return usage_error("%s: no model file given", o->command);
  if (o->format && strcmp(o->format, "table") && strcmp(o->format, "json") && strcmp(o->format, "dot"))
    return usage_error("--format takes table, json or dot, not '%s'", o->format);
  if (o->policy && o->budget) return usage_error("%s", "give --policy or --budget, not both");
  if ((o->format || o->sweep || o->svg || o->measured) && strcmp(o->command, "plan"))
    return usage_error("%s", "--format, --sweep, --svg and --measured go with the plan command");
  if (o->measured && (o->sweep || (o->format && !strcmp(o->format, "dot"))))
    return usage_error("%s", "--measured shows one plan's table or json: not with --sweep or --format dot");
  if (o->svg && !o->sweep) return usage_error("%s", "--svg draws the --sweep curve: add --sweep");
  if (o->sweep && o->format && !strcmp(o->format, "dot"))
    return usage_error("%s", "--sweep prints a table or json, not dot");
  if (o->dump && pass_named(o->dump) == PASS_NONE) {
    char *takes = xsprintf("--dump takes %s, not '%%s'", pass_names_listed());
    int rc = usage_error(takes, o->dump);
    free(takes);
    return rc;
  }
  if (o->sweep && dump_needs_plan(o)) return usage_error("--dump=%s shows one plan, not a --sweep", o->dump);
  if (o->memory && (!parse_size(o->memory, &o->memory_bytes) || o->memory_bytes == 0))
    return usage_error("--memory takes a whole number of bytes such as 16GiB or 512MiB, not '%s'", o->memory);
  if (o->bucket && (!parse_size(o->bucket, &o->bucket_bytes) || o->bucket_bytes == 0))
    return usage_error("--bucket takes a whole number of bytes such as 256KiB or 4MiB, not '%s'", o->bucket);
  if (o->bucket && strcmp(o->command, "emit") && strcmp(o->command, "build"))
    return usage_error("%s", "--bucket goes with emit and build");
  if (o->loss_head && !parse_loss_head(o->loss_head, &o->head_chunk))
    return usage_error("--loss-head takes whole, chunked, auto or a number of rows, not '%s'",
                       o->loss_head);
  if (o->attention && strcmp(o->attention, "fused") && strcmp(o->attention, "whole") &&
      strcmp(o->attention, "auto"))
    return usage_error("--attention takes auto, fused or whole, not '%s'", o->attention);
  if (o->compress && strcmp(o->compress, "bf16") && strcmp(o->compress, "none"))
    return usage_error("--compress takes bf16 or none, not '%s'", o->compress);
  o->compress_bf16 = o->compress && !strcmp(o->compress, "bf16");
  if ((!strcmp(o->command, "emit") || !strcmp(o->command, "build")) && (!o->output || !*o->output))
    return usage_error("%s needs -o PATH", o->command);
  int status = trainer_flags_ok(o);
  return status >= 0 ? status : backend_options_ok(o);
}

static bool is_directory(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_cuda(const Options *o) { return o->backend && strncmp(o->backend, "cuda", 4) == 0; }

/* The generated source's suffix: the compilers pick the language by it. */
static const char *source_suffix(const Options *o) {
  return use_llvm(o) ? ".ll" : is_cuda(o) ? ".cu" : ".c";
}

static LlvmOptions llvm_options(const Options *o) {
  return (LlvmOptions){.mcpu = o->mcpu,
                       .mattr = o->mattr,
                       .scalar_math = o->scalar_math,
                       .time_phases = o->time_phases,
                       .verbose = o->verbose};
}

/* The generated program as text: C, CUDA, or LLVM IR (`emit --backend llvm`). */
static bool write_source(const Program *p, const Options *o, const char *path) {
  FILE *f = output_open(path, &diag);
  if (!f) return false;
  phase_start();
  bool emitted = true;
  if (use_llvm(o)) {
    LlvmOptions lo = llvm_options(o);
    emitted = emit_llvm(f, p, &lo, &diag);
  } else {
    (is_cuda(o) ? emit_cuda : emit_c)(f, p);
  }
  bool ok = fflush(f) == 0 && !ferror(f);
  ok = fclose(f) == 0 && ok;
  phase_end(PH_EMIT);
  if (!ok) diag_file_error(&diag, path, "cannot write: %s", strerror(errno));
  return emitted && ok;
}

/* Refuses to write `path` over an input (the model file, --profile): by
 * device and inode, so links count. */
static bool not_an_input(const Options *o, const char *flag, const char *path) {
  const char *inputs[] = {o->file, o->profile};
  for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
    if (inputs[i] && same_file(path, inputs[i])) {
      diag_file_error(&diag, path, "%s names the input file %s; refusing to overwrite it", flag, inputs[i]);
      return false;
    }
  return true;
}

/* Every output checked before any work, as gcc does: writable (a directory,
 * device node or socket is never written over; a stream output may be a
 * character device or FIFO), not an input, -o and --keep-c distinct, and
 * --keep-c a .c name (.cu for the CUDA backends), read by its suffix. */
static bool outputs_ok(const Options *o) {
  bool build = !strcmp(o->command, "build");
  const struct {
    const char *flag, *path;
    bool stream;
  } outs[] = {{"-o", o->output, !build}, {"--keep-c", o->keep_c, false}, {"--svg", o->svg, true}};
  for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
    const char *path = outs[i].path;
    bool emit_folder = i == 0 && !strcmp(o->command, "emit") && is_directory(path);
    if (path && !emit_folder &&
        (!output_path_ok(path, outs[i].stream, &diag) || !not_an_input(o, outs[i].flag, path)))
      return false;
  }
  if (o->keep_c && o->output && same_file(o->keep_c, o->output)) {
    diag_file_error(&diag, o->output, "-o and --keep-c name the same file");
    return false;
  }
  size_t n = o->keep_c ? strlen(o->keep_c) : 0, sn = strlen(source_suffix(o));
  if (o->keep_c && (n <= sn || strcmp(o->keep_c + n - sn, source_suffix(o)))) {
    diag_file_error(&diag, o->keep_c,
                    "--keep-c: the name must end in %s (the compiler picks the language by it)",
                    source_suffix(o));
    return false;
  }
  return true;
}

/* run: the trainer's outputs, checked against trainc's inputs as -o is (the
 * trainer checks them against its own: the data, --init, its binary). */
static bool trainer_outputs_ok(const Options *o) {
  static const char *const outputs[] = {"--save", "--log", "--dump-step", "--save-state",
                                        "--tensorboard"};
  for (int i = 0; i < o->trainer_argc; i++)
    for (size_t k = 0; k < sizeof outputs / sizeof outputs[0]; k++) {
      int at = i;
      const char *path = flag_value(o->trainer_argc, o->trainer_argv, &at, outputs[k]);
      if (path && *path && !not_an_input(o, outputs[k], path)) return false;
    }
  return true;
}

static int emit(const Program *p, const Options *o) {
  bool folder = is_directory(o->output);
  char *path = folder ? xsprintf("%s/%s%s", o->output, p->g->model_name, source_suffix(o))
                      : xstrdup(o->output);
  /* the name of a file in the -o folder is known only now: checked now */
  bool ok = (!folder || (output_path_ok(path, true, &diag) && not_an_input(o, "-o", path))) &&
            write_source(p, o, path);
  if (ok) printf("wrote %s\n", path);
  free(path);
  return ok ? 0 : 1;
}

/* Under --loss-head auto, the chunk the budget search chose. */
static void print_chosen_chunk(const Graph *g) {
  if (g->loss_head < 0) return;
  HeadDims h;
  head_dims(g, &g->nodes[g->loss_head], &h);
  if (h.planner_chooses) printf(", loss head %lld rows a chunk", (long long)h.chunk);
}

/* The C compiler: --cc, else $CC, else the one trainc was configured with. */
static BuildOptions build_options(const Options *o) {
  bool nvcc = o->backend && !strcmp(o->backend, "cuda");
  const char *cflags = nvcc ? TRAINC_NVCC_FLAGS : TRAINC_DEFAULT_CFLAGS;
  const char *env_cc = getenv("CC");
  const char *cc = o->cc ? o->cc : env_cc && *env_cc ? env_cc : TRAINC_DEFAULT_CC;
  return (BuildOptions){.cc = cc, .cflags = o->cflags ? o->cflags : cflags,
                        .rt_include = TRAINC_RT_INCLUDE, .rt_lib = TRAINC_RT_LIB,
                        .link_libs = TRAINC_LINK_LIBS,
                        .verbose = o->verbose, .nvcc = TRAINC_NVCC, .cuda_libs = TRAINC_CUDA_LIBS};
}

static int calibrate(const Options *o) {
  MachineProfile m;
  BuildOptions bo = build_options(o);
  if (!calibrate_machine(&bo, &m, &diag)) return 1;
  FILE *f = o->output ? output_open(o->output, &diag) : stdout;
  if (!f) return 1;
  profile_write(f, &m);
  if (f != stdout && fclose(f) != 0) {
    diag_file_error(&diag, o->output, "cannot write: %s", strerror(errno));
    return 1;
  }
  if (o->output) printf("wrote %s\n", o->output);
  return 0;
}

static int build(const Program *p, const Options *o) {
  bool mpi = o->mpi || train_is_distributed(&p->g->train);
  if (mpi && !*TRAINC_RT_MPI_LIB) {
    diag_error(&diag, NO_LOC, "%s needs MPI, and this trainc was built without it (install libopenmpi-dev and "
               "rebuild trainc)", o->mpi ? "--mpi" : "the train block's distribution");
    return 1;
  }
  bool nvcc = o->backend && !strcmp(o->backend, "cuda");
  if (nvcc && !*TRAINC_NVCC) {
    diag_error(&diag, NO_LOC,
               "the CUDA backend is off: this trainc was configured without the CUDA toolkit (no "
               "nvcc); --backend cuda-emulate runs the same .cu on the CPU");
    return 1;
  }
  char tmp[] = "/tmp/trainc-XXXXXX";
  if (!mkdtemp(tmp)) {
    diag_error(&diag, NO_LOC, "cannot make a temporary folder: %s", strerror(errno));
    return 1;
  }
  bool llvm = use_llvm(o);
  char *c_path = o->keep_c ? xstrdup(o->keep_c)
                           : xsprintf("%s/%s%s", tmp, p->g->model_name, llvm ? ".o" : source_suffix(o));
  BuildOptions bo = build_options(o);
  LlvmOptions lo = llvm_options(o);
  if (mpi) bo.rt_lib = TRAINC_RT_MPI_LIB, bo.mpi_libs = TRAINC_MPI_LIBS;
  bool ok = llvm ? build_llvm(c_path, p, &lo, &diag) && link_object(c_path, o->output, &bo, &diag)
                 : write_source(p, o, c_path) &&
                       (is_cuda(o) ? build_cuda(c_path, o->output, &bo, !nvcc, &diag)
                                   : build_c(c_path, o->output, &bo, &diag));
  if (!o->keep_c) unlink(c_path);
  rmdir(tmp);
  free(c_path);
  if (ok) {
    char b[32], m[32];
    const CheckpointSpec *ck = &p->g->train.checkpoint; /* as planned */
    printf("built %s (model %s, arena %s", o->output, p->g->model_name, format_bytes(p->arena_bytes, b));
    if (ck->policy == CKPT_AUTO) printf(", checkpoint auto for memory %s", format_bytes(ck->budget, m));
    print_chosen_chunk(p->g);
    printf("%s%s%s)\n", mpi ? ", MPI" : "", o->backend ? ", backend " : "",
           o->backend ? o->backend : "");
  }
  return ok ? 0 : 1;
}

/* `trainc run`: the trainer compiled in this process, its flags after
 * FILE.nn, argv[0] the model's name. Returns the trainer's exit status. */
static int run(const Program *p, const Options *o) {
  if (train_is_distributed(&p->g->train)) {
    diag_error(&diag, NO_LOC,
               "model %s trains on several processes (MPI), which `trainc run` does not start: "
               "build a trainer with `trainc build %s -o BIN` and run it under mpirun",
               p->g->model_name, o->file);
    return 1;
  }
  char **argv = xcalloc((size_t)o->trainer_argc + 2, sizeof *argv);
  argv[0] = (char *)p->g->model_name;
  for (int i = 0; i < o->trainer_argc; i++) argv[i + 1] = o->trainer_argv[i];
  LlvmOptions lo = llvm_options(o);
  fflush(stdout);
  int status = run_llvm(p, &lo, o->trainer_argc + 1, argv, &diag);
  free(argv);
  return status < 0 ? 1 : status;
}

/* The memory `checkpoint auto` fits the plan in: --memory, else what this
 * machine lets a process use now (trc_memory.h: the figure a trainer checks
 * its plan against). */
static bool auto_memory(const Options *o, uint64_t *bytes) {
  if (o->memory_bytes) {
    *bytes = o->memory_bytes;
    return true;
  }
  trc_memory_room room = trc_memory_available();
  *bytes = room.bytes;
  if (room.bytes > 0) return true;
  diag_error(&diag, NO_LOC, "%s: give --memory SIZE for checkpoint auto",
             room.source ? "no memory is free" : "cannot read the free memory (/proc/meminfo)");
  return false;
}

/* The checkpoint policy: --policy / --budget, else the train block's; and
 * --compress, else the train block's. */
static bool checkpoint_spec(const Options *o, const Graph *g, CheckpointSpec *spec) {
  *spec = g->train.checkpoint;
  if (o->budget) {
    spec->policy = CKPT_BUDGET;
    if (!parse_size(o->budget, &spec->budget) || spec->budget == 0) {
      usage_error("--budget takes a whole number of bytes such as 64MiB or 1.5GB, not '%s'", o->budget);
      return false;
    }
  }
  if (o->policy && !checkpoint_spec_parse(o->policy, spec)) {
    usage_error("--policy takes " CHECKPOINT_FORMS ", not '%s'", o->policy);
    return false;
  }
  spec->compress = o->compress ? o->compress_bf16 : g->train.checkpoint.compress;
  if (spec->compress && is_cuda(o)) {
    usage_error("%s", "the CUDA backends store no activations in bf16: the train block's `compress bf16` "
                      "needs --compress none there");
    return false;
  }
  return true;
}

static bool machine_profile(const Options *o, MachineProfile *m) {
  *m = profile_default();
  if (!o->profile) return true;
  SourceFile *f = source_read(o->profile, &diag);
  bool ok = f && profile_parse(f, m, &diag);
  m->source = o->profile;
  source_free(f);
  return ok;
}

static PlanFormat plan_format(const Options *o) {
  if (o->format && !strcmp(o->format, "json")) return PLAN_JSON;
  if (o->format && !strcmp(o->format, "dot")) return PLAN_DOT;
  return PLAN_TABLE;
}

/* The sweep plans c->graph: under --attention auto, the fused form where
 * there is a choice (a plan at one budget chooses; the sweep says so). */
static int sweep(const Compilation *c, const MachineProfile *m, bool compress, const Options *o) {
  const Graph *g = c->graph;
  int n;
  SweepPoint *pts = plan_sweep(g, m, compress, &n);
  if (plan_format(o) == PLAN_JSON) sweep_json(stdout, pts, n, g->model_name, compress);
  else sweep_print(stdout, pts, n);
  if (plan_format(o) != PLAN_JSON && c->unfused)
    printf("(attention fused in every plan above; a plan at one budget prices it against whole attention,\n"
           " and --attention whole sweeps that form)\n");
  int rc = 0;
  if (o->svg) {
    FILE *f = output_open(o->svg, &diag);
    if (f) sweep_svg(f, pts, n, g->model_name);
    if (!f || fclose(f) != 0) {
      if (f) diag_file_error(&diag, o->svg, "cannot write: %s", strerror(errno));
      rc = 1;
    } else {
      printf("wrote %s\n", o->svg);
    }
  }
  free(pts);
  return rc;
}

static CompileOptions compile_options(const Options *o) {
  return (CompileOptions){.model = o->model,
                          .conv = is_cuda(o) || o->conv_im2col ? CONV_IM2COL : CONV_LIBRARY,
                          .no_fuse = o->no_fuse,
                          .head_chunk = is_cuda(o) ? HEAD_WHOLE : o->head_chunk,
                          .attention = is_cuda(o) || (o->attention && !strcmp(o->attention, "whole"))
                                           ? ATTENTION_WHOLE
                                       : o->attention && !strcmp(o->attention, "fused") ? ATTENTION_FUSED
                                                                                         : ATTENTION_AUTO,
                          .dump = dump_pass(o),
                          .dump_out = stdout,
                          .bucket_bytes = o->bucket_bytes};
}

/* plan: the plan, and what a run of its trainer measured (--measured). */
static int print_plan(const Plan *pl, const Options *o) {
  if (!o->measured) return plan_print(stdout, pl, plan_format(o), NULL), 0;
  MeasuredTimes m = {0};
  SourceFile *f = source_read(o->measured, &diag);
  bool ok = f && measured_parse(f, &m, &diag) && measured_matches(&m, pl, &diag);
  if (ok) plan_print(stdout, pl, plan_format(o), &m);
  measured_free(&m);
  source_free(f);
  return ok ? 0 : 1;
}

/* `trainc plan --budget` that recomputes, on the CPU, without bf16
 * storage: the same budget planned again with --compress bf16, and said
 * when that plan's predicted overhead is lower (the trade is the user's to
 * make: the weights then differ by bf16's rounding). */
static void compare_compressed(SourceFile *src, const Options *o, CheckpointSpec spec,
                               const MachineProfile *m, const Plan *pl) {
  if (spec.policy != CKPT_BUDGET || spec.compress || is_cuda(o) || plan_format(o) != PLAN_TABLE ||
      o->measured || pl->recompute_seconds <= 0)
    return;
  Compilation c = {0};
  CompileOptions co = compile_options(o);
  co.dump = PASS_NONE;
  spec.compress = true;
  if (compile_graph(&c, src, &co, &diag) && compile_program(&c, spec, m, &co, &diag) &&
      plan_overhead(c.plan) < plan_overhead(pl))
    printf("(with --compress bf16 the same budget stores %.1f MiB at +%.1f%% predicted: activations "
           "that backward\n reads only as GEMM operands, signs or scales kept in bf16, and the weights "
           "differ by that rounding)\n",
           (double)c.plan->program->stored_bytes / (1 << 20), 100 * plan_overhead(c.plan));
  compilation_free(&c);
}

/* The pipeline's planned half (WEAVE .. BUCKETS), then what the command
 * does with the program. */
static int plan_and_generate(Compilation *c, SourceFile *src, const Options *o) {
  CheckpointSpec spec;
  MachineProfile m;
  if (!checkpoint_spec(o, c->graph, &spec)) return 2;
  if (spec.policy == CKPT_AUTO && !auto_memory(o, &spec.budget)) return 1;
  if (!machine_profile(o, &m)) return 1;
  if (o->sweep) return sweep(c, &m, spec.compress, o);
  CompileOptions co = compile_options(o);
  if (!compile_program(c, spec, &m, &co, &diag)) return 1;
  const Program *p = c->plan->program;
  if (!strcmp(o->command, "plan")) {
    int rc = print_plan(c->plan, o);
    if (rc == 0) compare_compressed(src, o, spec, &m, c->plan);
    return rc;
  }
  else if (!strcmp(o->command, "emit")) return emit(p, o);
  else if (!strcmp(o->command, "build")) return build(p, o);
  else if (!strcmp(o->command, "run")) return run(p, o);
  return 0;
}

/* Runs the pipeline up to the pass the command (or the dump) needs. */
static int compile(const Options *o) {
  SourceFile *src = source_read(o->file, &diag);
  if (!src) return 1;
  Compilation c = {0};
  CompileOptions co = compile_options(o);
  int rc = 1;
  if (compile_graph(&c, src, &co, &diag))
    rc = !strcmp(o->command, "check") && !dump_needs_plan(o) ? 0 : plan_and_generate(&c, src, o);
  phases_of(&c);
  compilation_free(&c);
  source_free(src);
  return rc;
}

int main(int argc, char **argv) {
  diag_init(&diag, stderr);
  signal(SIGXFSZ, SIG_IGN); /* past a file size limit, a write fails with EFBIG and is reported */
  Options o = {0};
  int rc = parse_options(argc, argv, &o);
  if (rc >= 0) return rc;
  if (!outputs_ok(&o) || !trainer_outputs_ok(&o)) return 1;
  if (!strcmp(o.command, "calibrate")) return calibrate(&o);
  rc = compile(&o);
  if (o.time_phases) print_phases();
  return rc;
}
