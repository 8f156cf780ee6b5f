/* agree.c — what every rank of a job must share before it starts: the model,
 * the training settings, the run's mode and files it reads or writes, and
 * the initial weights. Ranks started with different --lr or --seed would
 * train silently apart; different --steps or --log-every would enter
 * different collectives and fail far from the cause (MPI_ERR_TRUNCATE). Each
 * setting is hashed, the hashes compared across ranks in one all-reduce, and
 * the settings that differ are named. */
#include "rt_train.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct {
  char name[40];
  char value[40];
} setting;

enum { MAX_SETTINGS = 64 };

static int put(setting *s, int n, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int put(setting *s, int n, const char *name, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  snprintf(s[n].name, sizeof s[n].name, "%s", name);
  vsnprintf(s[n].value, sizeof s[n].value, fmt, ap);
  va_end(ap);
  return n + 1;
}

static const char *yes_no(const void *p) { return p ? "yes" : "no"; }

/* Every train setting, named by its flag (--weight-decay), exact. */
static int put_train_settings(setting *s, int n, const trc_train_config *c) {
  trc_config_field fields[TRC_CONFIG_FIELDS];
  trc_config_fields(c, fields);
  for (int i = 0; i < TRC_CONFIG_FIELDS; i++) {
    char flag[48];
    snprintf(flag, sizeof flag, "--%s", fields[i].flag);
    n = put(s, n, flag, "%s", fields[i].value);
  }
  return n;
}

static int run_settings(const trc_model *m, const trc_options *o, const char *arena, setting *s) {
  int n = 0;
  n = put(s, n, "model", "%.30s", m->name);
  n = put(s, n, "parameters", "%" PRIu64, m->param_count);
  n = put(s, n, "batch", "%" PRId64, m->batch);
  n = put(s, n, "--gradcheck", "%s", o->gradcheck ? "yes" : "no");
  n = put(s, n, "--dump-step", "%s", yes_no(o->dump_path));
  n = put(s, n, "--eval-data", "%s", yes_no(o->eval_dir));
  n = put(s, n, "--text", "%s", yes_no(o->text_path));
  n = put(s, n, "--eval-text", "%s", yes_no(o->eval_text_path));
  n = put(s, n, "--pairs", "%s", yes_no(o->pairs_path));
  n = put(s, n, "--eval-pairs", "%s", yes_no(o->eval_pairs_path));
  n = put(s, n, "--pair-fields", "%.40s", o->pair_fields);
  n = put(s, n, "--tokenizer", "%s", strcmp(o->tokenizer, "bytes") ? "a folder" : "bytes");
  n = put(s, n, "--init", "%s", yes_no(o->init_path));
  n = put(s, n, "--save-state", "%s", yes_no(o->state_dir));
  n = put(s, n, "--resume", "%s", yes_no(o->resume_dir));
  n = put(s, n, "--steps 0 (evaluation only)", "%s",
          o->steps_given && o->cfg.steps == 0 ? "yes" : "no");
  n = put_train_settings(s, n, &o->cfg);
  n = put(s, n, "--save-every", "%" PRId64, o->save_every);
  n = put(s, n, "--save-total-limit", "%" PRId64, o->save_total_limit);
  n = put(s, n, "--load-best", "%s", o->load_best ? "yes" : "no");
  n = put(s, n, "--metric-for-best", "%d", o->metric_for_best);
  n = put(s, n, "--early-stopping", "%" PRId64, o->early_stopping);
  n = put(s, n, "--early-stopping-threshold", "%.17g", o->early_stopping_threshold);
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
  char names[600] = "", values[800] = "";
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
