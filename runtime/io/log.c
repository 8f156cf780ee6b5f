/* log.c — the JSON Lines log: one object per logged step or evaluation,
 * numbers with 9 significant digits, null for NaN and infinities. Each line is
 * flushed so `tail -f` and crashed runs see everything logged so far. */
#include "rt_io.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

int trc_log_open(trc_log *log, const char *path, int append, trc_error *err) {
  log->f = NULL;
  log->path = path;
  log->failed = 0;
  if (!path) return 0;
  int fd = trc_open_stream(path, append, err);
  if (fd < 0) return -1;
  if (!(log->f = fdopen(fd, append ? "a" : "w"))) {
    close(fd);
    return trc_fail_at(err, path, "cannot open the log: %s", strerror(errno));
  }
  return 0;
}

void trc_log_close(trc_log *log) {
  if (log->f) fclose(log->f);
  log->f = NULL;
  trc_tensorboard_close(&log->tb);
}

/* One number of a record: a JSON member, and a TensorBoard scalar tagged
 * GROUP/NAME ("train/loss", "eval/accuracy": an eval_ prefix becomes the
 * group) at the record's step. */
static void field(trc_log *log, const char *key, double value) {
  if (log->f) {
    fprintf(log->f, ",\"%s\":", key);
    trc_json_write_number(log->f, value);
  }
  char tag[128];
  if (strncmp(key, "eval_", 5) == 0)
    snprintf(tag, sizeof tag, "eval/%s", key + 5);
  else
    snprintf(tag, sizeof tag, "%s/%s", log->group, key);
  trc_tensorboard_scalar(&log->tb, tag, log->step, value);
}

static void begin(trc_log *log, const char *group, int64_t step, double epoch) {
  log->group = group;
  log->step = step;
  if (log->f) fprintf(log->f, "{\"step\":%lld", (long long)step);
  field(log, "epoch", epoch);
}

/* A log that cannot be written (disk full, file too large) is said once;
 * training goes on: the weights matter more than the log. */
static void end(trc_log *log) {
  if (!log->f) return;
  fputs("}\n", log->f);
  if (fflush(log->f) == 0 || log->failed) return;
  log->failed = 1;
  fprintf(stderr, "%s: warning: cannot write the log: %s; training goes on without it\n",
          log->path, strerror(errno));
}

static int logging(const trc_log *log) { return log->f || log->tb.f; }

void trc_log_step(trc_log *log, const trc_step_record *r) {
  if (!logging(log)) return;
  begin(log, "train", r->step, r->epoch);
  field(log, "loss", r->loss);
  field(log, "lr", r->lr);
  field(log, "grad_norm", r->grad_norm);
  field(log, "examples_per_s", r->examples_per_s);
  field(log, "seconds", r->seconds);
  if (log->f)
    fprintf(log->f, ",\"syncs\":%lld,\"comm_bytes\":%llu", (long long)r->syncs,
            (unsigned long long)r->comm_bytes);
  field(log, "comm_seconds", r->comm_seconds);
  field(log, "page_faults", (double)r->page_faults);
  end(log);
}

void trc_log_eval(trc_log *log, int64_t step, double epoch, const trc_eval_result *r) {
  if (!logging(log)) return;
  static const char *const names[] = {TRC_EVAL_NAMES};
  begin(log, "eval", step, epoch);
  for (int i = 0; i < TRC_EVAL_METRICS; i++)
    if (r->has >> i & 1) field(log, names[i], r->value[i]);
  end(log);
}

/* ,"key":[f(mt, 0), f(mt, 1), ...] */
static void per_class(FILE *f, const char *key, const trc_metrics *mt,
                      double (*fn)(const trc_metrics *, int64_t)) {
  fprintf(f, ",\"%s\":[", key);
  for (int64_t c = 0; c < mt->classes; c++) {
    if (c) fputc(',', f);
    trc_json_write_number(f, fn(mt, c));
  }
  fputc(']', f);
}

static double support(const trc_metrics *mt, int64_t c) {
  return (double)trc_metrics_support(mt, c);
}

void trc_log_classes(trc_log *log, int64_t step, const trc_metrics *mt) {
  if (!log->f || !mt->confusion || mt->examples == 0) return;
  const int64_t k = mt->classes;
  fprintf(log->f, "{\"step\":%lld", (long long)step);
  per_class(log->f, "precision", mt, trc_metrics_precision);
  per_class(log->f, "recall", mt, trc_metrics_recall);
  per_class(log->f, "f1", mt, trc_metrics_f1);
  per_class(log->f, "support", mt, support);
  fputs(",\"confusion_matrix\":[", log->f);
  for (int64_t t = 0; t < k; t++)
    for (int64_t c = 0; c < k; c++)
      fprintf(log->f, "%s%lld%s", c ? "," : t ? ",[" : "[", (long long)mt->confusion[t * k + c],
              c == k - 1 ? "]" : "");
  fputc(']', log->f);
  end(log);
}

void trc_log_best(trc_log *log, int64_t step, const trc_best *best) {
  static const char *const names[] = {TRC_EVAL_NAMES};
  if (!logging(log)) return;
  log->group = "best";
  log->step = step;
  if (log->f)
    fprintf(log->f, "{\"step\":%lld,\"best_step\":%lld,\"best_metric\":\"%s\"", (long long)step,
            (long long)best->step, names[best->metric]);
  field(log, "best_value", best->value);
  end(log);
}

void trc_log_memory(trc_log *log, int64_t step, const trc_memory_marks *m) {
  if (!logging(log)) return;
  log->group = "memory";
  log->step = step;
  if (log->f) fprintf(log->f, "{\"step\":%lld", (long long)step);
  field(log, "arena_planned", (double)m->arena_planned);
  field(log, "arena_high_water", (double)m->arena_high_water);
  if (m->operands_planned) {
    field(log, "bf16_operands_planned", (double)m->operands_planned);
    field(log, "bf16_operands_high_water", (double)m->operands_high_water);
  }
  end(log);
}
