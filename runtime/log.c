/* log.c — the JSON Lines log: one object per logged step or evaluation,
 * numbers with 9 significant digits, null for NaN and infinities. Each line is
 * flushed so `tail -f` and crashed runs see everything logged so far. */
#include "rt_internal.h"

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
}

static void field(FILE *f, const char *key, double value) {
  fprintf(f, ",\"%s\":", key);
  trc_json_write_number(f, value);
}

static void begin(FILE *f, int64_t step, double epoch) {
  fprintf(f, "{\"step\":%lld", (long long)step);
  field(f, "epoch", epoch);
}

/* A log that cannot be written (disk full, file too large) is said once;
 * training goes on: the weights matter more than the log. */
static void end(trc_log *log) {
  fputs("}\n", log->f);
  if (fflush(log->f) == 0 || log->failed) return;
  log->failed = 1;
  fprintf(stderr, "%s: warning: cannot write the log: %s; training goes on without it\n",
          log->path, strerror(errno));
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
  fprintf(log->f, ",\"page_faults\":%lld", (long long)r->page_faults);
  end(log);
}

void trc_log_eval(trc_log *log, int64_t step, double epoch, const trc_eval_result *r) {
  if (!log->f) return;
  begin(log->f, step, epoch);
  if (r->has_loss) field(log->f, "eval_loss", r->loss);
  if (r->has_accuracy) field(log->f, "eval_accuracy", r->accuracy);
  if (r->has_f1) field(log->f, "eval_f1", r->f1);
  end(log);
}

void trc_log_memory(trc_log *log, int64_t step, uint64_t planned, uint64_t high_water) {
  if (!log->f) return;
  fprintf(log->f, "{\"step\":%lld,\"arena_planned\":%llu,\"arena_high_water\":%llu", (long long)step,
          (unsigned long long)planned, (unsigned long long)high_water);
  end(log);
}
