/* args.c — the trainer's command line: one table of flags, each accepted as
 * `--flag VALUE` or `--flag=VALUE`, values checked strictly. */
#include "rt_internal.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef enum { FLAG_PATH, FLAG_TEXT, FLAG_COUNT, FLAG_SEED, FLAG_RATE, FLAG_SWITCH } flag_kind;

/* What a run does; a flag that the run's mode would ignore is refused. */
enum { TRAIN = 1, GRADCHECK = 2, DUMP = 4, ANY = TRAIN | GRADCHECK | DUMP };

typedef struct {
  const char *name;
  flag_kind kind;
  size_t field;   /* offsetof into trc_options */
  int64_t min;    /* FLAG_COUNT: smallest value allowed */
  unsigned modes; /* the modes that read it */
  const char *metavar, *help;
} flag;

#define OPT(member) offsetof(trc_options, member)

static const flag flags[] = {
    {"data", FLAG_PATH, OPT(data_dir), 0, TRAIN | DUMP, "DIR",
     "training data: one NAME.npy / NAME.idx[.gz] per input"},
    {"eval-data", FLAG_PATH, OPT(eval_dir), 0, TRAIN, "DIR",
     "evaluation data (default: the val_split tail of --data)"},
    {"epochs", FLAG_COUNT, OPT(cfg.epochs), 1, TRAIN, "N", "passes over the data"},
    {"steps", FLAG_COUNT, OPT(cfg.steps), 0, TRAIN, "N",
     "optimizer steps (overrides --epochs); 0: no training"},
    {"lr", FLAG_RATE, OPT(cfg.lr), 0, TRAIN, "X", "peak learning rate"},
    {"seed", FLAG_SEED, OPT(cfg.seed), 0, ANY, "N", "seed of init, shuffling and gradcheck data"},
    {"init", FLAG_PATH, OPT(init_path), 0, ANY, "FILE", "start from these weights (.safetensors)"},
    {"save", FLAG_PATH, OPT(save_path), 0, TRAIN, "FILE",
     "save the weights at the end (.safetensors)"},
    {"save-state", FLAG_PATH, OPT(state_dir), 0, TRAIN, "DIR",
     "save resumable training state in DIR (see --save-every)"},
    {"save-every", FLAG_COUNT, OPT(save_every), 1, TRAIN, "N",
     "optimizer steps between state saves (default 100; and the last step)"},
    {"resume", FLAG_PATH, OPT(resume_dir), 0, TRAIN, "DIR",
     "continue from the newest state in DIR"},
    {"log", FLAG_PATH, OPT(log_path), 0, TRAIN, "FILE", "JSON Lines log of steps and evaluations"},
    {"log-every", FLAG_COUNT, OPT(cfg.log_every), 1, TRAIN, "N",
     "optimizer steps between log lines"},
    {"sample", FLAG_COUNT, OPT(sample), 0, TRAIN, "N",
     "after training, generate N bytes (byte-level sequence models)"},
    {"prompt", FLAG_TEXT, OPT(prompt), 0, TRAIN, "TEXT",
     "the context --sample continues (default: a newline)"},
    {"temperature", FLAG_RATE, OPT(temperature), 0, TRAIN, "X",
     "--sample's temperature (0: greedy; default 1)"},
    {"comm-timeout", FLAG_RATE, OPT(comm_timeout), 0, ANY, "SECONDS",
     "under MPI: end the job when a rank waits this long for the others (default 300; 0: never)"},
    {"threads", FLAG_COUNT, OPT(threads), 1, ANY, "N",
     "threads for kernels, optimizer and BLAS (default: OMP_NUM_THREADS, else the cores)"},
    {"quiet", FLAG_SWITCH, OPT(quiet), 0, ANY, NULL, "no progress display"},
    {"no-overlap", FLAG_SWITCH, OPT(no_overlap), 0, TRAIN, NULL,
     "MPI: all-reduce averaged gradients after backward, not bucket by bucket during it"},
    {"gradcheck", FLAG_SWITCH, OPT(gradcheck), 0, GRADCHECK, NULL,
     "check backward against finite differences, then exit"},
    {"dump-step", FLAG_PATH, OPT(dump_path), 0, DUMP, "FILE",
     "write one step's loss, predictions and gradients on the first batch, then exit"},
    {"help", FLAG_SWITCH, OPT(help), 0, ANY, NULL, "this help"},
    {"version", FLAG_SWITCH, OPT(version), 0, ANY, NULL, "the runtime's version"},
};
enum { N_FLAGS = sizeof flags / sizeof flags[0] };

static const flag *find_flag(const char *name, size_t len) {
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
    if (strlen(flags[i].name) == len && strncmp(flags[i].name, name, len) == 0) return &flags[i];
  return NULL;
}

static int parse_integer(const flag *f, const char *text, trc_options *o, trc_error *err) {
  char *end;
  errno = 0;
  if (f->kind == FLAG_SEED) {
    if (text[0] == '-')
      return trc_fail(err, "--%s: expected a non-negative integer, got '%s'", f->name, text);
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || *end)
      return trc_fail(err, "--%s: expected an integer, got '%s'", f->name, text);
    *(uint64_t *)((char *)o + f->field) = v;
    return 0;
  }
  long long v = strtoll(text, &end, 10);
  if (errno || end == text || *end || v < f->min)
    return trc_fail(err, "--%s: expected an integer >= %lld, got '%s'", f->name, (long long)f->min,
                    text);
  *(int64_t *)((char *)o + f->field) = v;
  return 0;
}

static int parse_value(const flag *f, const char *text, trc_options *o, trc_error *err) {
  char *end;
  switch (f->kind) {
  case FLAG_PATH:
    if (!text[0])
      return trc_fail(err, "--%s: expected %s, got an empty value", f->name, f->metavar);
    *(const char **)((char *)o + f->field) = text;
    return 0;
  case FLAG_TEXT: *(const char **)((char *)o + f->field) = text; return 0;
  case FLAG_COUNT:
  case FLAG_SEED: return parse_integer(f, text, o, err);
  case FLAG_RATE: {
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v) || v < 0)
      return trc_fail(err, "--%s: expected a finite number >= 0, got '%s'", f->name, text);
    *(double *)((char *)o + f->field) = v;
    return 0;
  }
  case FLAG_SWITCH: *(int *)((char *)o + f->field) = 1; return 0;
  }
  return 0;
}

/* argv[*i] is "--name" or "--name=value"; consumes the value argument and
 * marks the flag in *given. */
static int parse_flag(int argc, char **argv, int *i, trc_options *o, uint32_t *given,
                      trc_error *err) {
  const char *arg = argv[*i];
  if (strcmp(arg, "-h") == 0) arg = "--help";
  if (strncmp(arg, "--", 2) != 0 || !arg[2]) return trc_fail(err, "unexpected argument '%s'", arg);
  const char *name = arg + 2, *eq = strchr(name, '=');
  const flag *f = find_flag(name, eq ? (size_t)(eq - name) : strlen(name));
  if (!f) return trc_fail(err, "unknown flag '%.*s'", eq ? (int)(eq - arg) : (int)strlen(arg), arg);
  *given |= 1u << (f - flags);
  if (f->kind == FLAG_SWITCH) {
    if (eq) return trc_fail(err, "--%s takes no value", f->name);
    return parse_value(f, "", o, err);
  }
  if (eq) return parse_value(f, eq + 1, o, err);
  if (*i + 1 >= argc) return trc_fail(err, "--%s needs a value (%s)", f->name, f->metavar);
  return parse_value(f, argv[++*i], o, err);
}

static int was_given(uint32_t given, const char *name) {
  return (given >> (find_flag(name, strlen(name)) - flags)) & 1;
}

/* A flag the run would ignore is a mistake to point out, not to pass over:
 * --save with --gradcheck saves nothing, --init with --resume loads nothing. */
static int check_combinations(const trc_options *o, uint32_t given, trc_error *err) {
  unsigned mode = o->gradcheck ? GRADCHECK : o->dump_path ? DUMP : TRAIN;
  const char *what = o->gradcheck ? "--gradcheck" : "--dump-step";
  for (int i = 0; i < N_FLAGS; i++)
    if ((given >> i & 1) && !(flags[i].modes & mode))
      return trc_fail(err, "--%s does nothing with %s", flags[i].name, what);
  if (o->init_path && o->resume_dir)
    return trc_fail(err, "--init does nothing with --resume (the saved state holds the weights)");
  if ((was_given(given, "prompt") || was_given(given, "temperature")) && o->sample == 0)
    return trc_fail(err, "--prompt and --temperature need --sample N");
  if (was_given(given, "save-every") && !o->state_dir)
    return trc_fail(err, "--save-every needs --save-state DIR");
  if (o->threads > TRC_MAX_THREADS)
    return trc_fail(err, "--threads: at most %d, got %lld", TRC_MAX_THREADS, (long long)o->threads);
  return 0;
}

int trc_parse_args(const trc_model *m, int argc, char **argv, trc_options *o, trc_error *err) {
  _Static_assert(N_FLAGS <= 32, "flags are marked in a 32-bit set");
  memset(o, 0, sizeof *o);
  o->cfg = m->defaults;
  o->save_every = 100;
  o->temperature = 1.0;
  o->comm_timeout = 300;
  uint32_t given = 0;
  for (int i = 1; i < argc; i++)
    if (parse_flag(argc, argv, &i, o, &given, err)) return -1;
  o->steps_given = was_given(given, "steps");
  if (was_given(given, "epochs") && !o->steps_given)
    o->cfg.steps = 0; /* --epochs beats a compiled-in step count */
  if (o->help || o->version) return 0;
  if (check_combinations(o, given, err)) return -1;
  if (o->gradcheck) return 0;
  if (o->dump_path && !o->data_dir) return trc_fail(err, "--dump-step needs --data DIR");
  if (o->sample > 0 && !trc_can_sample(m))
    return trc_fail(err, "--sample: model '%s' is not a byte-level sequence model (predict [B, T, "
                         "vocab <= 256] over an embedded token input)", m->name);
  if (!o->data_dir && !(o->steps_given && o->cfg.steps == 0))
    return trc_fail(err, "--data DIR is required");
  return 0;
}

static void print_input(const trc_input *in, FILE *out) {
  char shape[256];
  size_t n = (size_t)snprintf(shape, sizeof shape, "%s[B", trc_dtype_name(in->dtype));
  for (int d = 1; d < in->rank && n < sizeof shape; d++)
    n += (size_t)snprintf(shape + n, sizeof shape - n, ", %lld", (long long)in->dims[d]);
  if (n < sizeof shape) snprintf(shape + n, sizeof shape - n, "]");
  if (in->index_limit > 0)
    fprintf(out, "  %-16s %-20s values in [0, %lld)\n", in->name, shape,
            (long long)in->index_limit);
  else
    fprintf(out, "  %-16s %s\n", in->name, shape);
}

/* The train block's settings as compiled in, from the config table. */
static void print_defaults(const trc_model *m, FILE *out) {
  trc_config_field fields[TRC_CONFIG_FIELDS];
  trc_config_fields(&m->defaults, fields);
  fprintf(out, "\ncompiled defaults (the train block; batch %lld is compiled into every shape):\n",
          (long long)m->batch);
  for (int i = 0; i < TRC_CONFIG_FIELDS; i++)
    fprintf(out, "  %-20s %-14s %s\n", fields[i].name, fields[i].value, fields[i].help);
}

void trc_print_usage(const trc_model *m, const char *prog, FILE *out) {
  fprintf(out, "usage: %s --data DIR [options]\n\n", prog);
  fprintf(out, "Trains model '%s'%s%s.\n", m->name, m->source ? " compiled from " : "",
          m->source ? m->source : "");
  fprintf(out, "\ninputs (one file each in DIR: NAME.npy, NAME.idx or NAME.idx.gz; B = %lld):\n",
          (long long)m->batch);
  for (int i = 0; i < m->n_inputs; i++) print_input(&m->inputs[i], out);
  uint64_t block = m->param_count * sizeof(float);
  fprintf(out, "\nparameters: %d tensors in one block of %llu bytes (what one sync sends)\n",
          m->n_params, (unsigned long long)block);
  fprintf(out, "\noptions (--flag VALUE or --flag=VALUE):\n");
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    char left[48];
    snprintf(left, sizeof left, "--%s%s%s", flags[i].name, flags[i].metavar ? " " : "",
             flags[i].metavar ? flags[i].metavar : "");
    fprintf(out, "  %-20s %s\n", left, flags[i].help);
  }
  print_defaults(m, out);
}
