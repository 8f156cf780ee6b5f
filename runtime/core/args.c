/* args.c — the trainer's command line: one table of the run's own flags,
 * and one flag per train setting (TRC_TRAIN_CONFIG: --weight-decay X sets
 * weight_decay, config.c parses it), each accepted as `--flag VALUE` or
 * `--flag=VALUE`, values checked strictly. */
#include "rt_core.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
  FLAG_PATH,
  FLAG_TEXT,
  FLAG_COUNT,
  FLAG_RATE,
  FLAG_SWITCH,
  FLAG_PERIOD, /* N steps, or "epoch" (-1) */
  FLAG_METRIC, /* an eval metric's name: its TRC_EVAL_* index */
} flag_kind;

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
     "evaluation data (default: the --validation share of --data)"},
    {"text", FLAG_PATH, OPT(text_path), 0, TRAIN, "FILE",
     "training text instead of --data: .txt, or .jsonl with a \"text\" field (.gz too)"},
    {"eval-text", FLAG_PATH, OPT(eval_text_path), 0, TRAIN, "FILE",
     "evaluation text instead of --eval-data"},
    {"pairs", FLAG_PATH, OPT(pairs_path), 0, TRAIN, "FILE",
     "training sentence pairs instead of --data: .tsv or .jsonl (.gz too), BERT-encoded"},
    {"eval-pairs", FLAG_PATH, OPT(eval_pairs_path), 0, TRAIN, "FILE",
     "evaluation sentence pairs instead of --eval-data"},
    {"pair-fields", FLAG_TEXT, OPT(pair_fields), 0, TRAIN, "A,B,LABEL",
     "the pairs' field names (default text_a,text_b,label; B empty: single sentences)"},
    {"tokenizer", FLAG_PATH, OPT(tokenizer), 0, TRAIN, "DIR|bytes",
     "GPT-2 BPE (vocab.json, merges.txt), BERT WordPiece (vocab.txt) or bytes (default)"},
    {"tensorboard", FLAG_PATH, OPT(tensorboard_dir), 0, TRAIN, "DIR",
     "also write the logged numbers as a TensorBoard event file in DIR"},
    {"init", FLAG_PATH, OPT(init_path), 0, ANY, "FILE", "start from these weights (.safetensors)"},
    {"allow-missing", FLAG_TEXT, OPT(allow.missing), 0, ANY, "PATTERNS",
     "--init: parameters the file may lack (keep their init): a,b.* (model's: --help)"},
    {"allow-unexpected", FLAG_TEXT, OPT(allow.unexpected), 0, ANY, "PATTERNS",
     "--init: file tensors to ignore, as file names: pooler.*,cls.*"},
    {"save", FLAG_PATH, OPT(save_path), 0, TRAIN, "FILE",
     "save the weights at the end (.safetensors)"},
    {"save-state", FLAG_PATH, OPT(state_dir), 0, TRAIN, "DIR",
     "save resumable training state in DIR (see --save-every)"},
    {"save-every", FLAG_PERIOD, OPT(save_every), 1, TRAIN, "N|epoch",
     "steps between state saves, or every epoch (default 100); and the last step"},
    {"save-total-limit", FLAG_COUNT, OPT(save_total_limit), 0, TRAIN, "K",
     "keep the newest K states in --save-state DIR (default 1; 0: all)"},
    {"load-best", FLAG_SWITCH, OPT(load_best), 0, TRAIN, NULL,
     "end with the weights of the best evaluation (see --metric-for-best)"},
    {"metric-for-best", FLAG_METRIC, OPT(metric_for_best), 0, TRAIN, "METRIC",
     "eval_loss (default; lower is better), eval_accuracy, eval_f1[_macro|_binary]"},
    {"early-stopping", FLAG_COUNT, OPT(early_stopping), 1, TRAIN, "PATIENCE",
     "stop after PATIENCE evaluations without improvement of --metric-for-best"},
    {"early-stopping-threshold", FLAG_RATE, OPT(early_stopping_threshold), 0, TRAIN, "X",
     "an improvement must exceed X to count (default 0)"},
    {"resume", FLAG_PATH, OPT(resume_dir), 0, TRAIN, "DIR",
     "continue from the newest state in DIR"},
    {"log", FLAG_PATH, OPT(log_path), 0, TRAIN, "FILE", "JSON Lines log of steps and evaluations"},
    {"kernel-times", FLAG_PATH, OPT(kernel_times_path), 0, TRAIN, "FILE",
     "time every kernel after the first step; write each one's time beside the plan's prediction"},
    {"sample", FLAG_COUNT, OPT(sample), 0, TRAIN, "N",
     "after training, generate N tokens (sequence models; see --tokenizer)"},
    {"prompt", FLAG_TEXT, OPT(prompt), 0, TRAIN, "TEXT",
     "the context --sample continues (default: a newline)"},
    {"temperature", FLAG_RATE, OPT(temperature), 0, TRAIN, "X",
     "--sample's temperature (0: greedy; default 1)"},
    {"top-k", FLAG_COUNT, OPT(top_k), 0, TRAIN, "K",
     "--sample draws from the K most likely tokens only (0: all; default)"},
    {"top-p", FLAG_RATE, OPT(top_p), 0, TRAIN, "P",
     "--sample draws from the fewest most likely tokens that hold P of the mass (default 1)"},
    {"comm-timeout", FLAG_RATE, OPT(comm_timeout), 0, ANY, "SECONDS",
     "MPI: end the job when a rank waits this long for the others (default 300; 0: never)"},
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

/* Flags are numbered: flags[] first, then one per train setting. */
enum { N_ALL_FLAGS = N_FLAGS + TRC_CONFIG_FIELDS };
typedef unsigned char given_set[N_ALL_FLAGS];

/* The number of flag `name` (len bytes), or -1. */
static int find_flag(const trc_config_field *settings, const char *name, size_t len) {
  for (int i = 0; i < N_FLAGS; i++)
    if (strlen(flags[i].name) == len && strncmp(flags[i].name, name, len) == 0) return i;
  for (int i = 0; i < TRC_CONFIG_FIELDS; i++)
    if (strlen(settings[i].flag) == len && strncmp(settings[i].flag, name, len) == 0)
      return N_FLAGS + i;
  return -1;
}

static int parse_count(const flag *f, const char *text, int64_t *out, trc_error *err) {
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || end == text || *end || v < f->min)
    return trc_fail(err, "--%s: expected an integer >= %lld, got '%s'", f->name, (long long)f->min,
                    text);
  *out = v;
  return 0;
}

static int parse_metric(const flag *f, const char *text, int *out, trc_error *err) {
  static const char *const names[] = {TRC_EVAL_NAMES};
  for (int i = 0; i < TRC_EVAL_METRICS; i++)
    if (strcmp(text, names[i]) == 0 || strcmp(text, names[i] + 5) == 0) { /* "eval_" optional */
      *out = i;
      return 0;
    }
  return trc_fail(err, "--%s: expected eval_loss, eval_accuracy, eval_f1, eval_f1_macro or "
                       "eval_f1_binary, got '%s'", f->name, text);
}

static int parse_value(const flag *f, const char *text, trc_options *o, trc_error *err) {
  void *field = (char *)o + f->field;
  switch (f->kind) {
  case FLAG_PATH:
    if (!text[0])
      return trc_fail(err, "--%s: expected %s, got an empty value", f->name, f->metavar);
    *(const char **)field = text;
    return 0;
  case FLAG_TEXT: *(const char **)field = text; return 0;
  case FLAG_COUNT: return parse_count(f, text, field, err);
  case FLAG_PERIOD:
    if (strcmp(text, "epoch") == 0) {
      *(int64_t *)field = -1;
      return 0;
    }
    if (parse_count(f, text, field, err))
      return trc_fail(err, "--%s: expected an integer >= %lld or 'epoch', got '%s'", f->name,
                      (long long)f->min, text);
    return 0;
  case FLAG_METRIC: return parse_metric(f, text, field, err);
  case FLAG_RATE: {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v) || v < 0)
      return trc_fail(err, "--%s: expected a finite number >= 0, got '%s'", f->name, text);
    *(double *)field = v;
    return 0;
  }
  case FLAG_SWITCH: *(int *)field = 1; return 0;
  }
  return 0;
}

/* Flag number k (a train setting's when k >= N_FLAGS) set from text. */
static int set_flag(int k, const trc_config_field *settings, const char *text, trc_options *o,
                    trc_error *err) {
  if (k < N_FLAGS) return parse_value(&flags[k], text, o, err);
  return trc_config_set(&o->cfg, k - N_FLAGS, settings[k - N_FLAGS].flag, text, err);
}

/* argv[*i] is "--name" or "--name=value"; consumes the value argument and
 * marks the flag in given. */
static int parse_flag(int argc, char **argv, int *i, const trc_config_field *settings,
                      trc_options *o, given_set given, trc_error *err) {
  const char *arg = argv[*i];
  if (strcmp(arg, "-h") == 0) arg = "--help";
  if (strncmp(arg, "--", 2) != 0 || !arg[2]) return trc_fail(err, "unexpected argument '%s'", arg);
  const char *name = arg + 2, *eq = strchr(name, '=');
  size_t len = eq ? (size_t)(eq - name) : strlen(name);
  int k = find_flag(settings, name, len);
  if (k < 0) return trc_fail(err, "unknown flag '%.*s'", (int)len + 2, arg);
  if (given[k]) /* as a train block setting: a second one would silently win */
    return trc_fail(err, "--%.*s is given twice; give it once", (int)len, name);
  given[k] = 1;
  if (k < N_FLAGS && flags[k].kind == FLAG_SWITCH) {
    if (eq) return trc_fail(err, "--%s takes no value", flags[k].name);
    return parse_value(&flags[k], "", o, err);
  }
  if (eq) return set_flag(k, settings, eq + 1, o, err);
  if (*i + 1 >= argc)
    return trc_fail(err, "--%.*s needs a value (%s)", (int)len, name,
                    k < N_FLAGS ? flags[k].metavar : settings[k - N_FLAGS].metavar);
  return set_flag(k, settings, argv[++*i], o, err);
}

static int was_given(const trc_config_field *settings, const given_set given, const char *name) {
  return given[find_flag(settings, name, strlen(name))];
}

/* The modes that read flag k: every train setting is training's, but the
 * seed also keys --gradcheck's data and --dump-step's dropout. */
static unsigned modes_of(int k, const trc_config_field *settings) {
  if (k < N_FLAGS) return flags[k].modes;
  const char *name = settings[k - N_FLAGS].name;
  /* --dump-step's one step follows the run's precision */
  return strcmp(name, "seed") == 0 ? ANY : strcmp(name, "precision") == 0 ? TRAIN | DUMP : TRAIN;
}

/* A flag the run would ignore is a mistake to point out, not to pass over:
 * --save with --gradcheck saves nothing, --init with --resume loads nothing. */
static int check_combinations(const trc_options *o, const trc_config_field *settings,
                              const given_set given, trc_error *err) {
  unsigned mode = o->gradcheck ? GRADCHECK : o->dump_path ? DUMP : TRAIN;
  const char *what = o->gradcheck ? "--gradcheck" : "--dump-step";
  for (int k = 0; k < N_ALL_FLAGS; k++)
    if (given[k] && !(modes_of(k, settings) & mode))
      return trc_fail(err, "--%s does nothing with %s",
                      k < N_FLAGS ? flags[k].name : settings[k - N_FLAGS].flag, what);
  if (o->init_path && o->resume_dir)
    return trc_fail(err, "--init does nothing with --resume (the saved state holds the weights)");
  if ((o->allow.missing || o->allow.unexpected) && !o->init_path)
    return trc_fail(err, "--allow-missing and --allow-unexpected need --init FILE");
  if ((was_given(settings, given, "prompt") || was_given(settings, given, "temperature") ||
       was_given(settings, given, "top-k") || was_given(settings, given, "top-p")) &&
      o->sample == 0)
    return trc_fail(err, "--prompt, --temperature, --top-k and --top-p need --sample N");
  if (o->top_p <= 0 || o->top_p > 1)
    return trc_fail(err, "--top-p: expected a number in (0, 1], got %g", o->top_p);
  if (!!o->data_dir + !!o->text_path + !!o->pairs_path > 1)
    return trc_fail(err, "--data, --text and --pairs each give the training data: give one");
  if (!!o->eval_dir + !!o->eval_text_path + !!o->eval_pairs_path > 1)
    return trc_fail(err, "--eval-data, --eval-text and --eval-pairs each give the evaluation "
                         "data: give one");
  if (was_given(settings, given, "tokenizer") && !o->text_path && !o->eval_text_path &&
      !o->pairs_path && !o->eval_pairs_path && o->sample == 0)
    return trc_fail(err, "--tokenizer is for --text, --eval-text, --pairs, --eval-pairs and "
                         "--sample");
  if (was_given(settings, given, "pair-fields") && !o->pairs_path && !o->eval_pairs_path)
    return trc_fail(err, "--pair-fields is for --pairs and --eval-pairs");
  trc_pair_fields fields;
  if (trc_pair_fields_parse(o->pair_fields, &fields, err)) return -1;
  static const char *const state_flags[] = {"save-every", "save-total-limit"};
  for (int i = 0; i < 2; i++)
    if (was_given(settings, given, state_flags[i]) && !o->state_dir)
      return trc_fail(err, "--%s needs --save-state DIR", state_flags[i]);
  if (was_given(settings, given, "metric-for-best") && !o->load_best && !o->early_stopping)
    return trc_fail(err, "--metric-for-best needs --load-best or --early-stopping PATIENCE");
  if (was_given(settings, given, "early-stopping-threshold") && !o->early_stopping)
    return trc_fail(err, "--early-stopping-threshold needs --early-stopping PATIENCE");
  /* the watchdog's deadline, now + timeout, must fit the timed wait's time_t
   * seconds; a billion seconds (31 years) is far inside that */
  static const double max_comm_timeout = 1e9;
  if (o->comm_timeout > max_comm_timeout)
    return trc_fail(err, "--comm-timeout: at most %g seconds (0: no limit), got %g",
                    max_comm_timeout, o->comm_timeout);
  if (o->threads > TRC_MAX_THREADS)
    return trc_fail(err, "--threads: at most %d, got %lld", TRC_MAX_THREADS, (long long)o->threads);
  return 0;
}

/* --load-best and --early-stopping compare evaluations during training, of
 * a metric the run computes. */
static int check_best(const trc_model *m, const trc_options *o, trc_error *err) {
  static const char *const names[] = {TRC_EVAL_NAMES};
  const trc_train_config *c = &o->cfg;
  const char *what = o->load_best ? "--load-best" : "--early-stopping";
  if (!o->load_best && !o->early_stopping) return 0;
  if (!o->eval_dir && !o->eval_text_path && !o->eval_pairs_path && c->validation == 0)
    return trc_fail(err, "%s needs evaluation data: --eval-data DIR (--eval-text, --eval-pairs) "
                         "or --validation X", what);
  if (!c->eval_every_epoch && c->eval_every_steps == 0)
    return trc_fail(err, "%s needs evaluations during training: --eval-every-epoch yes or "
                         "--eval-every-steps N", what);
  int metric = o->metric_for_best;
  int classify = m->has_predict && m->label_input >= 0;
  if (metric != TRC_EVAL_LOSS && (!classify || !(c->metrics >> metric & 1)))
    return trc_fail(err, "--metric-for-best %s: the run does not compute it (%s); %s",
                    names[metric], classify ? "see --metrics" : "the model has no predict and labels",
                    classify ? "add it with --metrics" : "use eval_loss");
  return 0;
}

/* AdamW divides by sqrt(v) + eps and by 1 - beta^t: as the train block does,
 * eps 0 and beta 1 are refused (after every flag, whichever set them). */
static int check_adamw(const trc_train_config *c, trc_error *err) {
  if (c->optimizer != TRC_ADAMW) return 0;
  if (c->eps <= 0)
    return trc_fail(err, "--eps: AdamW's eps must be above 0 (it divides by sqrt(v) + eps)");
  const double betas[2] = {c->beta1, c->beta2};
  for (int i = 0; i < 2; i++)
    if (betas[i] >= 1)
      return trc_fail(err, "--beta%d: AdamW's beta%d must be below 1 (it divides by 1 - "
                           "beta%d^t)", i + 1, i + 1, i + 1);
  return 0;
}

/* Settings that the train block refuses together are refused as flags too,
 * whether the flags or the compiled values set them. */
static int check_settings(const trc_model *m, const trc_train_config *c, trc_error *err) {
  if (c->schedule != TRC_SCHED_CONSTANT && c->min_lr > c->lr) /* the decay would climb */
    return trc_fail(err, "--min-lr: min_lr %g is above lr %g (--lr); the %s schedule decays "
                         "from lr to min_lr", c->min_lr, c->lr,
                    c->schedule == TRC_SCHED_LINEAR ? "linear" : "cosine");
  if (check_adamw(c, err)) return -1;
  if ((c->metrics & TRC_METRIC_F1_BINARY) && m->has_predict && m->predict_classes != 2)
    return trc_fail(err, "metric f1_binary: the model predicts %lld classes; binary F1 needs 2 "
                         "(f1_macro averages over classes)", (long long)m->predict_classes);
  if (c->sync_gradients && (c->local_sgd > 1 || c->local_sgd_warmup > 0 || c->outer_optimizer))
    return trc_fail(err, "--sync-gradients averages every step: it needs --local-sgd 1, no "
                         "--local-sgd-warmup and no --outer-optimizer");
  return 0;
}

int trc_parse_args(const trc_model *m, int argc, char **argv, trc_options *o, trc_error *err) {
  trc_config_field settings[TRC_CONFIG_FIELDS];
  given_set given = {0};
  memset(o, 0, sizeof *o);
  o->cfg = m->defaults;
  o->save_every = 100;
  o->save_total_limit = 1;
  o->temperature = 1.0;
  o->top_p = 1.0;
  o->tokenizer = "bytes";
  o->pair_fields = "text_a,text_b,label";
  o->comm_timeout = 300;
  trc_config_fields(&m->defaults, settings);
  for (int i = 1; i < argc; i++)
    if (parse_flag(argc, argv, &i, settings, o, given, err)) return -1;
  o->steps_given = was_given(settings, given, "steps");
  if (was_given(settings, given, "epochs") && !o->steps_given)
    o->cfg.steps = 0; /* --epochs beats a compiled-in step count */
  if (o->help || o->version) return 0;
  if (check_combinations(o, settings, given, err)) return -1;
  if (o->gradcheck) return 0;
  if (o->dump_path && !o->data_dir) return trc_fail(err, "--dump-step needs --data DIR");
  if (o->sample > 0 && !trc_can_sample(m))
    return trc_fail(err, "--sample: model '%s' is not a sequence model (predict [B, T, vocab] "
                         "over an embedded token input)", m->name);
  if (!o->data_dir && !o->text_path && !o->pairs_path && !(o->steps_given && o->cfg.steps == 0))
    return trc_fail(err, "--data DIR (or --text FILE, or --pairs FILE) is required");
  return check_settings(m, &o->cfg, err) || check_best(m, o, err) ? -1 : 0;
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

/* The train block's settings: one flag each, with the value compiled in. */
/* What --init and --save call the parameters, when the model file maps any. */
static void print_weight_names(const trc_model *m, FILE *out) {
  int mapped = 0;
  for (int i = 0; i < m->n_params; i++) mapped += m->params[i].file_name != NULL;
  if (!mapped && !m->allow_missing && !m->allow_unexpected) return;
  fprintf(out, "weight files (--init, --save): %d parameters under mapped names:\n", mapped);
  for (int i = 0; i < m->n_params; i++)
    if (m->params[i].file_name)
      fprintf(out, "  %-28s <- %s%s\n", m->params[i].name, m->params[i].file_name,
              m->params[i].transposed ? " (transposed)" : "");
  if (m->allow_missing) fprintf(out, "  allowed missing: %s\n", m->allow_missing);
  if (m->allow_unexpected) fprintf(out, "  allowed unexpected: %s\n", m->allow_unexpected);
}

static void print_settings(const trc_model *m, FILE *out) {
  trc_config_field fields[TRC_CONFIG_FIELDS];
  trc_config_fields(&m->defaults, fields);
  fprintf(out, "\ntraining settings (each flag overrides the train block's value shown; batch "
               "%lld is compiled into every shape):\n", (long long)m->batch);
  for (int i = 0; i < TRC_CONFIG_FIELDS; i++) {
    char left[96];
    snprintf(left, sizeof left, "--%s %s", fields[i].flag, fields[i].metavar);
    fprintf(out, "  %-30s %-10s %s\n", left, fields[i].value, fields[i].help);
  }
}

void trc_print_usage(const trc_model *m, const char *prog, FILE *out) {
  fprintf(out, "usage: %s --data DIR [options]\n", prog);
  if (m->token_input >= 0 && m->label_input >= 0)
    fprintf(out, "       %s --text FILE [--tokenizer DIR] [options]\n", prog);
  for (int i = 0; i < m->n_inputs; i++)
    if (strcmp(m->inputs[i].name, "input_ids") == 0)
      fprintf(out, "       %s --pairs FILE --tokenizer DIR [options]\n", prog);
  fputc('\n', out);
  fprintf(out, "Trains model '%s'%s%s.\n", m->name, m->source ? " compiled from " : "",
          m->source ? m->source : "");
  fprintf(out, "\ninputs (one file each in DIR: NAME.npy, NAME.idx or NAME.idx.gz; B = %lld):\n",
          (long long)m->batch);
  for (int i = 0; i < m->n_inputs; i++) print_input(&m->inputs[i], out);
  uint64_t block = m->trained_count * sizeof(float);
  uint64_t frozen_floats;
  int frozen = trc_frozen_params(m, &frozen_floats);
  fprintf(out, "\nparameters: %d tensors, %d trained in one block of %llu bytes (what one sync "
          "sends), %d frozen (%llu floats)\n", m->n_params, m->n_params - frozen,
          (unsigned long long)block, frozen, (unsigned long long)frozen_floats);
  if (!m->device) /* gemm_bf16.c */
    fprintf(out, "  precision bf16 adds a bf16 copy of them for the GEMMs: %llu bytes\n",
            (unsigned long long)(m->param_count * 2));
  print_weight_names(m, out);
  fprintf(out, "\noptions (--flag VALUE or --flag=VALUE):\n");
  for (int i = 0; i < N_FLAGS; i++) {
    char left[48];
    snprintf(left, sizeof left, "--%s%s%s", flags[i].name, flags[i].metavar ? " " : "",
             flags[i].metavar ? flags[i].metavar : "");
    fprintf(out, "  %-30s %s\n", left, flags[i].help);
  }
  print_settings(m, out);
}
