/* log.c — the JSON Lines log: one object per logged step or evaluation,
 * numbers with 9 significant digits, null for NaN and infinities. Each line is
 * flushed so `tail -f` and crashed runs see everything logged so far. */
#include "rt_internal.h"

#include <errno.h>
#include <string.h>

int trc_log_open(trc_log *log, const char *path, int append, trc_error *err) {
  log->f = NULL;
  if (!path) return 0;
  log->f = fopen(path, append ? "a" : "w");
  return log->f ? 0 : trc_fail_at(err, path, "cannot create the log: %s", strerror(errno));
}

void trc_log_close(trc_log *log) {
  if (log->f) fclose(log->f);
  log->f = NULL;
}

static void field(FILE *f, const char *key, double value) {
  fprintf(f, ",\"%s\":", key);
  trc_json_write_number(f, value);
}

static void begin(FILE *f, int64_t step, double epoch) {
  fprintf(f, "{\"step\":%lld", (long long)step);
  field(f, "epoch", epoch);
}

static void end(FILE *f) {
  fputs("}\n", f);
  fflush(f);
}

void trc_log_step(trc_log *log, const trc_step_record *r) {
  if (!log->f) return;
  begin(log->f, r->step, r->epoch);
  field(log->f, "loss", r->loss);
  field(log->f, "lr", r->lr);
  field(log->f, "examples_per_s", r->examples_per_s);
  field(log->f, "seconds", r->seconds);
  fprintf(log->f, ",\"syncs\":%lld,\"comm_bytes\":%llu", (long long)r->syncs,
          (unsigned long long)r->comm_bytes);
  field(log->f, "comm_seconds", r->comm_seconds);
  end(log->f);
}

void trc_log_eval(trc_log *log, int64_t step, double epoch, const trc_eval_result *r) {
  if (!log->f) return;
  begin(log->f, step, epoch);
  if (r->has_loss) field(log->f, "eval_loss", r->loss);
  if (r->has_accuracy) field(log->f, "eval_accuracy", r->accuracy);
  if (r->has_f1) field(log->f, "eval_f1", r->f1);
  end(log->f);
}

void trc_log_memory(trc_log *log, int64_t step, uint64_t planned, uint64_t high_water) {
  if (!log->f) return;
  fprintf(log->f, "{\"step\":%lld,\"arena_planned\":%llu,\"arena_high_water\":%llu", (long long)step,
          (unsigned long long)planned, (unsigned long long)high_water);
  end(log->f);
}
