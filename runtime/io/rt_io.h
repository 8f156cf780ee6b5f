/* rt_io.h — what a run writes and shows: resumable state, the checked
 * output paths, the per-class report, the log, progress and its clocks.
 * Not installed. */
#ifndef TRAINC_RT_IO_H
#define TRAINC_RT_IO_H

#include "train/rt_train.h" /* trc_sync, trc_best, trc_eval_result */

/* Seconds on a monotonic clock. */
double trc_now(void);
/* Seconds since the process started (to the 10 ms of Linux's /proc; without
 * /proc, since the runtime was loaded). */
double trc_process_seconds(void);

typedef struct {
  const trc_model *model;
  char *arena;
  trc_optimizer *opt;
  trc_sync *sync;
  trc_best *best;          /* its counters and weights are saved too */
  int64_t step;            /* optimizer steps done */
  int in_sync;             /* the ranks hold the same parameters */
  int64_t keep;            /* --save-total-limit: states kept, 0: all */
  const char *fingerprint; /* what shapes the run; a state saved by another run is refused */
} trc_run_state;

/* Makes DIR if missing (its parent must exist) and checks it is writable:
 * before training, not at the first save. */
int trc_state_prepare(const char *dir, trc_error *err);
/* Writes DIR/state-STEP.rank-R.safetensors atomically, then (after every
 * rank has) removes this rank's older ones beyond the newest st->keep.
 * Collective: every rank calls it. */
int trc_state_save(const char *dir, const trc_run_state *st, trc_error *err);
/* Loads the newest step saved by every rank. Collective. */
int trc_state_load(const char *dir, trc_run_state *st, trc_error *err);

/* Checks every output path of the run (this rank's: --save and --log on
 * rank 0, --dump-step) before any work: writable, none an input, no two the
 * same file; then removes the temp files interrupted saves left (outputs.c). */
int trc_check_outputs(const trc_model *m, const trc_options *o, int rank, trc_error *err);

/* The per-class precision, recall, F1, support and the confusion matrix of
 * the metrics (report.c); nothing without a confusion matrix. */
void trc_report_classes(const trc_metrics *mt, FILE *out);

typedef struct {
  int64_t step; /* optimizer steps done */
  double epoch, loss, lr, examples_per_s, seconds;
  double grad_norm;   /* before clipping (under MPI, the mean over the ranks) */
  int64_t syncs;      /* cumulative, see trc_sync */
  uint64_t comm_bytes;
  double comm_seconds;
  int64_t page_faults; /* inside the steps since the last record (whole process) */
} trc_step_record;

typedef struct {
  FILE *f; /* NULL: no log */
  const char *path;
  int failed; /* a write failed (said once on stderr) */
  trc_tensorboard tb;  /* --tensorboard: the same numbers as scalars (opened by the
                          caller, before or after trc_log_open; closed with the log) */
  const char *group;   /* the record being written: "train", "eval", "memory" */
  int64_t step;
} trc_log;

/* append: continue a resumed run's log instead of truncating it. A regular
 * file, a character device or a FIFO with a reader (see trc_open_stream). */
int trc_log_open(trc_log *log, const char *path, int append, trc_error *err);
void trc_log_close(trc_log *log);
void trc_log_step(trc_log *log, const trc_step_record *r);
void trc_log_eval(trc_log *log, int64_t step, double epoch, const trc_eval_result *r);
/* What was planned against the highest measured: the arena, and the bf16
 * GEMMs' operand buffer (left out of the record when none was planned). */
typedef struct {
  uint64_t arena_planned, arena_high_water, operands_planned, operands_high_water;
} trc_memory_marks;
void trc_log_memory(trc_log *log, int64_t step, const trc_memory_marks *m);
/* The per-class report of the last evaluation (nothing without a confusion
 * matrix), and which evaluation --load-best restored. */
void trc_log_classes(trc_log *log, int64_t step, const trc_metrics *mt);
void trc_log_best(trc_log *log, int64_t step, const trc_best *best);

typedef struct {
  int64_t total;
  int quiet, tty, drawn;
  double last_draw;
} trc_progress;

void trc_progress_init(trc_progress *p, int64_t total, int quiet);
/* `done` steps of total; log_point: this step is logged (non-terminal output
 * prints only then). */
void trc_progress_update(trc_progress *p, int64_t done, double loss, double per_s, double eta,
                         int log_point);
/* Ends a redrawn line before other output. */
void trc_progress_break(trc_progress *p);

#endif
