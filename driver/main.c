/* main.c — the trainc command line. A thin shell over the stages: every
 * decision lives in frontend/, ir/, passes/ and codegen/, so tests call those
 * directly; this file only parses flags and runs the pipeline. */
#include "codegen.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
    "  plan  FILE.nn            show which activations are stored and which\n"
    "                           recomputed, the planned peak memory and step time\n"
    "  emit  FILE.nn -o OUT     write the trainer's C source (OUT: a .c file or a folder)\n"
    "  build FILE.nn -o BIN     compile a native trainer executable\n"
    "  calibrate [-o FILE]      measure this machine's GEMM, loop and memory speed\n"
    "                           and write a profile for --profile (default: stdout)\n"
    "\n"
    "options:\n"
    "  --model NAME             the model to compile when the file holds several\n"
    "  --policy P               checkpointing: off, all, sqrt, auto, 'every N',\n"
    "                           'budget SIZE' (overrides the train block)\n"
    "  --budget SIZE            the same as --policy 'budget SIZE' (e.g. 64MiB)\n"
    "  --profile FILE           machine profile from `trainc calibrate`\n"
    "  --format table|json|dot  plan: output format (default table)\n"
    "  --sweep                  plan: the budget -> peak -> overhead curve\n"
    "  --svg FILE               plan --sweep: also draw the curve as SVG\n"
    "  --dump=ast|ir|grad       print the parsed file, the forward graph, or the\n"
    "                           graph with its backward pass (check only)\n"
    "  -o, --output PATH        where emit/build write\n"
    "  --cc CC                  C compiler for build (default: $CC, else cc)\n"
    "  --cflags FLAGS           its flags (default: " TRAINC_DEFAULT_CFLAGS ")\n"
    "  --keep-c FILE            build: also keep the generated C source in FILE\n"
    "  --mpi                    build: link MPI (automatic when the train block\n"
    "                           asks for local_sgd > 1 or sync gradients)\n"
    "  --bucket SIZE            emit/build: gradient all-reduce buckets of at least\n"
    "                           SIZE (e.g. 256KiB; default 1MiB), started during\n"
    "                           backward when gradients are averaged\n"
    "  -v, --verbose            show the compiler command\n"
    "  -h, --help               this help\n"
    "      --version            the version\n"
    "\n"
    "The generated trainer has its own --help (data, epochs, saving, logs).\n"
    "Docs: docs/language.md (model files), docs/trainer.md (trainers).\n";

typedef struct {
  const char *command, *file, *model, *dump, *output, *cc, *cflags, *keep_c;
  const char *policy, *budget, *profile, *format, *svg, *bucket;
  bool verbose, sweep, mpi;
  uint64_t bucket_bytes; /* --bucket; 0: GRAD_BUCKET_BYTES */
} Options;

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "trainc: error: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(see trainc --help)\n");
  return 2;
}

/* Takes the value of --flag VALUE or --flag=VALUE; NULL when absent. */
static const char *flag_value(int argc, char **argv, int *i, const char *name) {
  size_t len = strlen(name);
  if (strncmp(argv[*i], name, len) != 0) return NULL;
  if (argv[*i][len] == '=') return argv[*i] + len + 1;
  if (argv[*i][len] != '\0') return NULL;
  if (*i + 1 >= argc) return "";
  return argv[++*i];
}

/* Returns -1 to go on, else the exit status. */
static int parse_options(int argc, char **argv, Options *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
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
    else if ((v = flag_value(argc, argv, &i, "--bucket"))) o->bucket = v;
    else if (!strcmp(a, "--sweep")) o->sweep = true;
    else if (a[0] == '-' && a[1] != '\0') return usage_error("unknown option '%s'", a);
    else if (!o->command) o->command = a;
    else if (!o->file) o->file = a;
    else return usage_error("unexpected argument '%s'", a);
  }
  if (!o->command) return usage_error("%s", "no command given");
  static const char *commands[] = {"check", "plan", "emit", "build", "calibrate"};
  bool known = false;
  for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) known |= !strcmp(o->command, commands[c]);
  if (!known) return usage_error("unknown command '%s'", o->command);
  if (!strcmp(o->command, "calibrate")) return o->file ? usage_error("unexpected argument '%s'", o->file) : -1;
  if (!o->file) return usage_error("%s: no model file given", o->command);
  if (o->format && strcmp(o->format, "table") && strcmp(o->format, "json") && strcmp(o->format, "dot"))
    return usage_error("--format takes table, json or dot, not '%s'", o->format);
  if (o->policy && o->budget) return usage_error("%s", "give --policy or --budget, not both");
  if ((o->format || o->sweep || o->svg) && strcmp(o->command, "plan"))
    return usage_error("%s", "--format, --sweep and --svg go with the plan command");
  if (o->svg && !o->sweep) return usage_error("%s", "--svg draws the --sweep curve: add --sweep");
  if (o->bucket && (!parse_size(o->bucket, &o->bucket_bytes) || o->bucket_bytes == 0))
    return usage_error("--bucket takes a size such as 256KiB or 4MiB, not '%s'", o->bucket);
  if (o->bucket && strcmp(o->command, "emit") && strcmp(o->command, "build"))
    return usage_error("%s", "--bucket goes with emit and build");
  if (o->dump && strcmp(o->dump, "ast") && strcmp(o->dump, "ir") && strcmp(o->dump, "grad"))
    return usage_error("--dump takes ast, ir or grad, not '%s'", o->dump);
  if ((!strcmp(o->command, "emit") || !strcmp(o->command, "build")) && (!o->output || !*o->output))
    return usage_error("%s needs -o PATH", o->command);
  return -1;
}

static bool is_directory(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool write_c(const Program *p, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "trainc: error: cannot write %s: %s\n", path, strerror(errno));
    return false;
  }
  emit_c(f, p);
  bool ok = fflush(f) == 0 && !ferror(f);
  ok = fclose(f) == 0 && ok;
  if (!ok) fprintf(stderr, "trainc: error: cannot write %s\n", path);
  return ok;
}

static int emit(const Program *p, const char *output) {
  char *path = is_directory(output) ? xsprintf("%s/%s.c", output, p->g->model_name) : xstrdup(output);
  bool ok = write_c(p, path);
  if (ok) printf("wrote %s\n", path);
  free(path);
  return ok ? 0 : 1;
}

static BuildOptions build_options(const Options *o) {
  return (BuildOptions){.cc = o->cc, .cflags = o->cflags ? o->cflags : TRAINC_DEFAULT_CFLAGS,
                        .rt_include = TRAINC_RT_INCLUDE, .rt_lib = TRAINC_RT_LIB, .blas_lib = TRAINC_BLAS_LIBS,
                        .verbose = o->verbose};
}

static int calibrate(const Options *o) {
  MachineProfile m;
  BuildOptions bo = build_options(o);
  if (!calibrate_machine(&bo, &m)) return 1;
  FILE *f = o->output ? fopen(o->output, "w") : stdout;
  if (f) profile_write(f, &m);
  if (!f || (f != stdout && fclose(f) != 0)) {
    fprintf(stderr, "trainc: error: cannot write %s\n", o->output);
    return 1;
  }
  if (o->output) printf("wrote %s\n", o->output);
  return 0;
}

static int build(const Program *p, const Options *o) {
  bool mpi = o->mpi || train_is_distributed(&p->g->train);
  if (mpi && !*TRAINC_RT_MPI_LIB) {
    fprintf(stderr, "trainc: error: %s needs MPI, and this trainc was built without it (install "
                    "libopenmpi-dev and rebuild trainc)\n", o->mpi ? "--mpi" : "the train block's distribution");
    return 1;
  }
  char tmp[] = "/tmp/trainc-XXXXXX";
  if (!mkdtemp(tmp)) {
    fprintf(stderr, "trainc: error: cannot make a temporary folder: %s\n", strerror(errno));
    return 1;
  }
  char *c_path = o->keep_c ? xstrdup(o->keep_c) : xsprintf("%s/%s.c", tmp, p->g->model_name);
  BuildOptions bo = build_options(o);
  if (mpi) bo.rt_lib = TRAINC_RT_MPI_LIB, bo.mpi_libs = TRAINC_MPI_LIBS;
  bool ok = write_c(p, c_path) && build_c(c_path, o->output, &bo);
  if (!o->keep_c) unlink(c_path);
  rmdir(tmp);
  free(c_path);
  if (ok) {
    char b[32];
    printf("built %s (model %s, arena %s%s)\n", o->output, p->g->model_name, format_bytes(p->arena_bytes, b),
           mpi ? ", MPI" : "");
  }
  return ok ? 0 : 1;
}

/* The checkpoint policy: --policy / --budget, else the train block's. */
static bool checkpoint_spec(const Options *o, const Graph *g, CheckpointSpec *spec) {
  *spec = g->train.checkpoint;
  if (o->budget) {
    spec->policy = CKPT_BUDGET;
    if (parse_size(o->budget, &spec->budget) && spec->budget > 0) return true;
    usage_error("--budget takes a size such as 64MiB or 1.5GB, not '%s'", o->budget);
    return false;
  }
  if (o->policy && !checkpoint_spec_parse(o->policy, spec)) {
    usage_error("--policy takes off, all, sqrt, auto, 'every N' or 'budget SIZE', not '%s'", o->policy);
    return false;
  }
  return true;
}

static bool machine_profile(const Options *o, MachineProfile *m) {
  *m = profile_default();
  char err[256];
  if (!o->profile || profile_read(o->profile, m, err)) return true;
  fprintf(stderr, "trainc: error: %s\n", err);
  return false;
}

static PlanFormat plan_format(const Options *o) {
  if (o->format && !strcmp(o->format, "json")) return PLAN_JSON;
  if (o->format && !strcmp(o->format, "dot")) return PLAN_DOT;
  return PLAN_TABLE;
}

static int sweep(const Graph *g, const MachineProfile *m, const Options *o) {
  int n;
  SweepPoint *pts = plan_sweep(g, m, &n);
  sweep_print(stdout, pts, n);
  int rc = 0;
  if (o->svg) {
    FILE *f = fopen(o->svg, "w");
    if (f) sweep_svg(f, pts, n, g->model_name);
    if (!f || fclose(f) != 0) {
      fprintf(stderr, "trainc: error: cannot write %s\n", o->svg);
      rc = 1;
    } else {
      printf("wrote %s\n", o->svg);
    }
  }
  free(pts);
  return rc;
}

/* plan, emit or build, from the graph with its backward pass. */
static int plan_and_generate(const Graph *g, const Options *o) {
  CheckpointSpec spec;
  MachineProfile m;
  if (!checkpoint_spec(o, g, &spec)) return 2;
  if (!machine_profile(o, &m)) return 1;
  if (o->sweep) return sweep(g, &m, o);
  char err[512];
  Plan *pl = plan_checkpoints(g, spec, &m, err);
  if (!pl) {
    fprintf(stderr, "%s: error: %s\n", o->file, err);
    return 1;
  }
  if (o->bucket_bytes) program_bucket_gradients(pl->program, o->bucket_bytes);
  int rc = 0;
  if (!strcmp(o->command, "plan")) plan_print(stdout, pl, plan_format(o));
  else rc = !strcmp(o->command, "emit") ? emit(pl->program, o->output) : build(pl->program, o);
  plan_free(pl);
  return rc;
}

/* Runs the pipeline up to the stage the command needs. */
static int compile(const Options *o) {
  SourceFile *src = source_read(o->file);
  if (!src) return 1;
  Diag diag;
  diag_init(&diag, stderr);
  int rc = 1;
  Ast *ast = parse_source(src, &diag);
  Graph *g = ast ? lower_ast(ast, o->model, &diag) : NULL;
  if (o->dump && !strcmp(o->dump, "ast") && ast) ast_print(stdout, ast);
  if (g) {
    if (!o->dump || strcmp(o->dump, "ir")) autodiff(g);
    if (o->dump && strcmp(o->dump, "ast")) graph_print(stdout, g);
    rc = !strcmp(o->command, "check") ? 0 : plan_and_generate(g, o);
  }
  graph_free(g);
  ast_free(ast);
  source_free(src);
  return rc;
}

int main(int argc, char **argv) {
  Options o = {0};
  int rc = parse_options(argc, argv, &o);
  if (rc >= 0) return rc;
  return !strcmp(o.command, "calibrate") ? calibrate(&o) : compile(&o);
}
