/* config.c — a train config field by field, walked from the one table of its
 * fields (TRC_TRAIN_CONFIG in trainc.h): what --help lists as the compiled
 * defaults, what a resumable state's fingerprint records, and the trainer's
 * flag for each field (--weight-decay X sets weight_decay), parsed by the
 * field's kind and checked against its range. */
#include "rt_core.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const optimizer_words[] = {TRC_OPTIMIZERS(TRC_ENUM_WORD)};
static const char *const schedule_words[] = {TRC_SCHEDULES(TRC_ENUM_WORD)};
static const char *const precision_words[] = {TRC_PRECISIONS(TRC_ENUM_WORD)};
static const char *const metric_words[] = {TRC_METRIC_WORDS};
enum { N_METRIC_WORDS = sizeof metric_words / sizeof metric_words[0] };

/* Numbers in the shortest of %.15g and %.17g that reads back exactly: "0.9",
 * not "0.90000000000000002", and never a rounded value. */
static void text_F64(char *buf, size_t n, double v) {
  snprintf(buf, n, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, n, "%.17g", v);
}
static void text_I64(char *buf, size_t n, int64_t v) { snprintf(buf, n, "%lld", (long long)v); }
static void text_U64(char *buf, size_t n, uint64_t v) {
  snprintf(buf, n, "%llu", (unsigned long long)v);
}
static void text_BOOL(char *buf, size_t n, int v) { snprintf(buf, n, "%s", v ? "yes" : "no"); }
static void text_OPTIMIZER(char *buf, size_t n, trc_optimizer_kind v) {
  snprintf(buf, n, "%s", optimizer_words[v]);
}
static void text_SCHEDULE(char *buf, size_t n, trc_schedule_kind v) {
  snprintf(buf, n, "%s", schedule_words[v]);
}
const char *trc_precision_name(trc_precision p) { return precision_words[p]; }

static void text_PRECISION(char *buf, size_t n, trc_precision v) {
  snprintf(buf, n, "%s", precision_words[v]);
}
static void text_METRICS(char *buf, size_t n, unsigned v) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < N_METRIC_WORDS && len < n; i++)
    if (v >> i & 1)
      len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? "," : "", metric_words[i]);
}

/* What a flag's value looks like in --help, by kind. */
static const char *const metavar_I64 = "N", *const metavar_U64 = "N", *const metavar_F64 = "X",
                  *const metavar_BOOL = "yes|no", *const metavar_OPTIMIZER = "sgd|adamw",
                  *const metavar_SCHEDULE = "constant|linear|cosine",
                  *const metavar_PRECISION = "fp32|bf16",
                  *const metavar_METRICS = "LIST";

/* The flag of a field: its name with dashes for underscores. */
static void spell_flag(char *out, size_t n, const char *name) {
  snprintf(out, n, "%s", name);
  for (char *p = out; *p; p++)
    if (*p == '_') *p = '-';
}

void trc_config_fields(const trc_train_config *c, trc_config_field out[TRC_CONFIG_FIELDS]) {
  trc_config_field *f = out;
#define FIELD(kind, field, run, text)                                                              \
  *f = (trc_config_field){.name = #field, .help = text, .metavar = metavar_##kind,                \
                          .shapes_run = run};                                                      \
  spell_flag(f->flag, sizeof f->flag, #field);                                                     \
  text_##kind(f->value, sizeof f->value, c->field);                                               \
  f++;
  TRC_TRAIN_CONFIG(FIELD)
#undef FIELD
}

/* ---- a field from a flag's text ---- */

/* The numeric fields' ranges where the train block has one (as the
 * compiler checks them, ir/train_block.c), else a least value; a field not
 * listed takes any value >= 0. */
typedef struct {
  const char *name;
  double min, max;
} range;
static const range ranges[] = {
    {"accumulate", 1, 1 << 20}, {"epochs", 1, INFINITY},   {"momentum", 0, 1},
    {"weight_decay", 0, 1},     {"beta1", 0, 1},           {"beta2", 0, 1},
    {"eps", 0, 1},              {"log_every", 1, INFINITY}, {"validation", 0, 0.9},
    {"local_sgd", 1, INFINITY}, {"outer_lr", 0, 10},       {"outer_momentum", 0, 0.999},
};

static range range_of(const char *name) {
  for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
    if (strcmp(ranges[i].name, name) == 0) return ranges[i];
  return (range){name, 0, INFINITY};
}

/* "--beta1: expected a number from 0 to 1, got '2'" */
static int out_of_range(const char *flag, range r, const char *what, const char *text,
                        trc_error *err) {
  if (isinf(r.max))
    return trc_fail(err, "--%s: expected %s >= %.15g, got '%s'", flag, what, r.min, text);
  return trc_fail(err, "--%s: expected %s from %.15g to %.15g, got '%s'", flag, what, r.min,
                  r.max, text);
}

static int set_F64(const char *flag, const char *name, const char *text, double *out,
                   trc_error *err) {
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  range r = range_of(name);
  if (errno || end == text || *end || !isfinite(v) || v < r.min || v > r.max)
    return out_of_range(flag, r, "a finite number", text, err);
  *out = v;
  return 0;
}

static int set_I64(const char *flag, const char *name, const char *text, int64_t *out,
                   trc_error *err) {
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  range r = range_of(name);
  if (errno || end == text || *end || (double)v < r.min || (double)v > r.max)
    return out_of_range(flag, r, "an integer", text, err);
  *out = v;
  return 0;
}

static int set_U64(const char *flag, const char *name, const char *text, uint64_t *out,
                   trc_error *err) {
  (void)name;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (text[0] == '-')
    return trc_fail(err, "--%s: expected a non-negative integer, got '%s'", flag, text);
  if (errno || end == text || *end)
    return trc_fail(err, "--%s: expected an integer below 2^64, got '%s'", flag, text);
  *out = v;
  return 0;
}

/* The index of text in words[0..n), or -1. */
static int word_index(const char *const *words, int n, const char *text, size_t len) {
  for (int i = 0; i < n; i++)
    if (strlen(words[i]) == len && strncmp(words[i], text, len) == 0) return i;
  return -1;
}

/* The index of text among n words, or -1 after a message naming them. */
static int one_of(const char *flag, const char *text, const char *const *words, int n,
                  const char *expected, trc_error *err) {
  int i = word_index(words, n, text, strlen(text));
  return i >= 0 ? i : trc_fail(err, "--%s: expected %s, got '%s'", flag, expected, text);
}

static int set_BOOL(const char *flag, const char *name, const char *text, int *out,
                    trc_error *err) {
  (void)name;
  static const char *const words[] = {"no", "yes", "false", "true", "0", "1"};
  int i = one_of(flag, text, words, 6, "yes or no", err);
  if (i >= 0) *out = i % 2;
  return i < 0 ? -1 : 0;
}

static int set_OPTIMIZER(const char *flag, const char *name, const char *text,
                         trc_optimizer_kind *out, trc_error *err) {
  (void)name;
  int i = one_of(flag, text, optimizer_words, TRC_ADAMW + 1, "sgd or adamw", err);
  if (i >= 0) *out = (trc_optimizer_kind)i;
  return i < 0 ? -1 : 0;
}

static int set_SCHEDULE(const char *flag, const char *name, const char *text,
                        trc_schedule_kind *out, trc_error *err) {
  (void)name;
  int i = one_of(flag, text, schedule_words, TRC_SCHED_COSINE + 1, "constant, linear or cosine",
                 err);
  if (i >= 0) *out = (trc_schedule_kind)i;
  return i < 0 ? -1 : 0;
}

static int set_PRECISION(const char *flag, const char *name, const char *text, trc_precision *out,
                         trc_error *err) {
  (void)name;
  int i = one_of(flag, text, precision_words, TRC_PRECISION_COUNT, "fp32 or bf16", err);
  if (i >= 0) *out = (trc_precision)i;
  return i < 0 ? -1 : 0;
}

/* A comma-separated list of metric words; loss is always evaluated. */
static int set_METRICS(const char *flag, const char *name, const char *text, unsigned *out,
                       trc_error *err) {
  (void)name;
  unsigned bits = TRC_METRIC_LOSS;
  for (const char *p = text;; p++) {
    size_t len = strcspn(p, ",");
    int i = word_index(metric_words, N_METRIC_WORDS, p, len);
    if (i < 0)
      return trc_fail(err, "--%s: expected a comma-separated list of loss, accuracy, f1, "
                           "f1_macro, f1_binary; got '%s'", flag, text);
    bits |= 1u << i;
    p += len;
    if (!*p) break;
  }
  *out = bits;
  return 0;
}

int trc_config_set(trc_train_config *c, int field, const char *flag, const char *text,
                   trc_error *err) {
  int i = 0;
#define SET(kind, name, run, help)                                                                 \
  if (i++ == field) return set_##kind(flag, #name, text, &c->name, err);
  TRC_TRAIN_CONFIG(SET)
#undef SET
  return trc_fail(err, "no train setting %d", field);
}
