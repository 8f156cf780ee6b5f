/* agree.c — what every rank of a job must share before it starts: the model,
 * the training settings, the run's mode and files it reads or writes, and
 * the initial weights. Ranks started with different --lr or --seed would
 * train silently apart; different --steps or --log-every would enter
 * different collectives and fail far from the cause (MPI_ERR_TRUNCATE). Each
 * setting is hashed, the hashes compared across ranks in one all-reduce, and
 * the settings that differ are named. */
#include "rt_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct {
  const char *name;
  char value[40];
} setting;

enum { MAX_SETTINGS = 48 };

static int put(setting *s, int n, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int put(setting *s, int n, const char *name, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  s[n].name = name;
  vsnprintf(s[n].value, sizeof s[n].value, fmt, ap);
  va_end(ap);
  return n + 1;
}

static const char *yes_no(const void *p) { return p ? "yes" : "no"; }

/* The shortest text that reads back as x: 0.1, not 0.10000000000000001. */
static int put_number(setting *s, int n, const char *name, double x) {
  for (int digits = 1; digits < 17; digits++) {
    put(s, n, name, "%.*g", digits, x);
    if (strtod(s[n].value, NULL) == x) return n + 1;
  }
  return put(s, n, name, "%.17g", x);
}

static int run_settings(const trc_model *m, const trc_options *o, const char *arena, setting *s) {
  const trc_train_config *c = &o->cfg;
  int n = 0;
  n = put(s, n, "model", "%.30s", m->name);
  n = put(s, n, "parameters", "%" PRIu64, m->param_count);
  n = put(s, n, "batch", "%" PRId64, m->batch);
  n = put(s, n, "--gradcheck", "%s", o->gradcheck ? "yes" : "no");
  n = put(s, n, "--dump-step", "%s", yes_no(o->dump_path));
  n = put(s, n, "--eval-data", "%s", yes_no(o->eval_dir));
  n = put(s, n, "--text", "%s", yes_no(o->text_path));
  n = put(s, n, "--eval-text", "%s", yes_no(o->eval_text_path));
  n = put(s, n, "--tokenizer", "%s", strcmp(o->tokenizer, "bytes") ? "a BPE folder" : "bytes");
  n = put(s, n, "--init", "%s", yes_no(o->init_path));
  n = put(s, n, "--save-state", "%s", yes_no(o->state_dir));
  n = put(s, n, "--resume", "%s", yes_no(o->resume_dir));
  n = put(s, n, "--steps", "%" PRId64 "%s", c->steps, o->steps_given ? " (given)" : "");
  n = put(s, n, "--epochs", "%" PRId64, c->epochs);
  n = put_number(s, n, "--lr", c->lr);
  n = put(s, n, "--seed", "%" PRIu64, c->seed);
  n = put(s, n, "--save-every", "%" PRId64, o->save_every);
  n = put(s, n, "--log-every", "%" PRId64, c->log_every);
  n = put(s, n, "accumulate", "%" PRId64, c->accumulate);
  n = put(s, n, "optimizer", "%d", (int)c->optimizer);
  n = put_number(s, n, "momentum", c->momentum);
  n = put(s, n, "nesterov", "%d", c->nesterov);
  n = put_number(s, n, "weight_decay", c->weight_decay);
  n = put_number(s, n, "beta1", c->beta1);
  n = put_number(s, n, "beta2", c->beta2);
  n = put_number(s, n, "eps", c->eps);
  n = put(s, n, "schedule", "%d warmup %" PRId64, (int)c->schedule, c->warmup);
  n = put_number(s, n, "min_lr", c->min_lr);
  n = put_number(s, n, "clip", c->clip_norm);
  n = put(s, n, "eval", "%d every %" PRId64 " metrics %u", c->eval_every_epoch,
          c->eval_every_steps, c->metrics);
  n = put_number(s, n, "validation", c->val_split);
  n = put(s, n, "local_sgd", "%" PRId64 " warmup %" PRId64, c->local_sgd, c->local_sgd_warmup);
  n = put(s, n, "sync", "gradients %d optimizer_state %d", c->sync_gradients,
          c->sync_optimizer_state);
  n = put(s, n, "outer_optimizer", "%d", c->outer_optimizer);
  n = put_number(s, n, "outer_lr", c->outer_lr);
  n = put_number(s, n, "outer_momentum", c->outer_momentum);
  uLong crc = crc32_z(0, (const unsigned char *)(arena + m->param_offset),
                      m->param_count * sizeof(float));
  n = put(s, n, "initial weights", "crc32:%08lx", crc);
  return n;
}

/* FNV-1a of name and value, in 52 bits: exact as the double it travels as. */
static int64_t hash_setting(const setting *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char *p = s->name; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
  for (const char *p = s->value; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
  return (int64_t)(h & ((1ull << 52) - 1));
}

int trc_ranks_agree(const trc_model *m, const trc_options *o, const char *arena, trc_error *err) {
  setting s[MAX_SETTINGS];
  int64_t mine[MAX_SETTINGS], lo[MAX_SETTINGS], hi[MAX_SETTINGS];
  int n = run_settings(m, o, arena, s);
  for (int i = 0; i < n; i++) mine[i] = hash_setting(&s[i]);
  if (trc_ranks_min_max_n(mine, n, lo, hi, err)) return -1;
  char names[400] = "", values[600] = "";
  size_t a = 0, b = 0;
  for (int i = 0; i < n; i++)
    if (lo[i] != hi[i] && a < sizeof names && b < sizeof values) {
      a += (size_t)snprintf(names + a, sizeof names - a, "%s%s", a ? ", " : "", s[i].name);
      b += (size_t)snprintf(values + b, sizeof values - b, "%s%s %s", b ? ", " : "", s[i].name,
                            s[i].value);
    }
  if (!names[0]) return 0;
  return trc_fail(err,
                  "the ranks were started with different settings: %s (rank %d has %s); start "
                  "every rank with the same flags and files",
                  names, trc_comm_rank(), values);
}
