/* rt_train.h — the pieces of the training loop (train.c's trc_main):
 * the step schedule, synchronization across ranks, the runtime's side of
 * the generated step(), evaluation, the best evaluation, agreement between
 * ranks, the memory check, stopping on a signal. Not installed. */
#ifndef TRAINC_RT_TRAIN_H
#define TRAINC_RT_TRAIN_H

#include "core/rt_core.h"

/* ---- the step schedule (steps.c) ---- */

typedef struct {
  int64_t examples, batch, accumulate; /* training rows (the same on every rank) */
  int rank, ranks;
  uint64_t seed;
  int64_t steps, epochs; /* steps > 0 wins; else epochs */
} trc_step_plan_spec;

typedef struct {
  int64_t batch, n, accumulate;
  int rank, ranks;
  uint64_t seed;
  int64_t batches_per_epoch; /* micro-batches of each rank: floor(n / (ranks * batch)) */
  int64_t steps_per_epoch;   /* ceil(batches_per_epoch / accumulate) */
  int64_t total_steps;
  int64_t *perm, perm_epoch; /* the order of epoch perm_epoch, computed on demand */
} trc_step_plan;

int trc_step_plan_init(trc_step_plan *p, const trc_step_plan_spec *s, trc_error *err);
void trc_step_plan_free(trc_step_plan *p);
/* Micro-batches of optimizer step `step` (0-based): accumulate, or fewer in
 * the last window of an epoch. */
int64_t trc_step_window(const trc_step_plan *p, int64_t step);
/* This rank's `batch` rows of micro-batch k of step `step`. */
const int64_t *trc_step_rows(trc_step_plan *p, int64_t step, int64_t k);
double trc_step_epochs(const trc_step_plan *p, int64_t steps_done);
int trc_step_ends_epoch(const trc_step_plan *p, int64_t steps_done);

/* ---- --kernel-times (kernel_times.c) ---- */

typedef struct {
  double *seconds;              /* per kernel site (trc_model.kernel_sites): measured */
  int64_t *calls;
  double step_seconds, started; /* the timed steps' wall time */
  int64_t steps, micro_batches; /* timed */
} trc_kernel_times;

/* Fails for a CUDA trainer (its kernels run asynchronously). */
int trc_kernel_times_init(trc_kernel_times *k, const trc_model *m, trc_error *err);
/* Around one optimizer step of `micro_batches`: trc_kernel_done marks count
 * between the two. */
void trc_kernel_times_begin(trc_kernel_times *k);
void trc_kernel_times_end(trc_kernel_times *k, int64_t micro_batches);
/* Writes path (JSON Lines: the run's phases, measured and predicted, then
 * one line per site) and prints the phases on stderr. */
int trc_kernel_times_report(const trc_kernel_times *k, const trc_model *m, const char *path,
                            trc_error *err);
void trc_kernel_times_free(trc_kernel_times *k);

/* ---- synchronization across ranks (sync.c) ---- */

typedef struct {
  const trc_model *model;
  int ranks;
  uint64_t count;           /* parameters (f32) */
  float *anchor, *momentum; /* outer optimizer: parameters after the last sync, Nesterov buffer */
  float *staging;           /* [parameters | optimizer state] when the state is averaged */
  int64_t syncs;            /* all-reduces of parameters or gradients (none with one rank) */
  uint64_t bytes;           /* their payload */
  double seconds;           /* time inside them */
} trc_sync;

int trc_sync_init(trc_sync *s, const trc_train_config *c, const trc_model *m, const char *arena,
                  const trc_optimizer *opt, trc_error *err);
void trc_sync_free(trc_sync *s);
/* 1 when step `step` (0-based) averages gradients (sync gradients, or within
 * local_sgd_warmup); its loss seed is then divided by the number of ranks. */
int trc_sync_gradient_step(const trc_train_config *c, int64_t step);
/* 1 when the parameters are averaged after `done` steps (every local_sgd
 * steps after the warm-up). */
int trc_sync_due(const trc_train_config *c, int64_t done);
/* Both end the job (trc_comm_abort) when this rank's gradients or parameters
 * are not finite, before the all-reduce would spread them. */
void trc_sync_gradients(trc_sync *s, float *grad);
/* The same in buckets: each (floats [first, first + n) of the gradients)
 * checked and started (non-blocking) as backward finishes it, then all
 * waited for; counted as one sync of every bucket's bytes. */
void trc_sync_gradients_start(trc_sync *s, float *bucket, uint64_t first, uint64_t n);
/* The check itself, for a device's values[0..count), floats [first, first +
 * count) of what it is about to sync. */
void trc_sync_stop_unless_finite(const trc_sync *s, const float *values, uint64_t first,
                                 uint64_t count, trc_check_what what);
void trc_sync_gradients_wait(trc_sync *s);
void trc_sync_parameters(trc_sync *s, const trc_train_config *c, float *params,
                         trc_optimizer *opt);
/* The smallest and largest of every rank's `mine` (exact below 2^53), by
 * one all-reduce. Collective. */
int trc_ranks_min_max(int64_t mine, int64_t *min, int64_t *max, trc_error *err);
/* The same for n values at once (one all-reduce of ranks x n numbers). */
int trc_ranks_min_max_n(const int64_t *mine, int n, int64_t *min, int64_t *max, trc_error *err);
/* 1 when trc_sync_parameters reads or writes anything (more than one rank,
 * or the outer optimizer's anchor). */
int trc_sync_changes_parameters(const trc_sync *s);
/* The outer optimizer's anchor becomes `params` (after synchronous steps). */
void trc_sync_restart_outer(trc_sync *s, const float *params);
/* The outer step's floats, as the run's config gives them. */
trc_outer_scalars trc_sync_outer_scalars(const trc_train_config *c);

/* ---- the runtime's side of the generated step() (step.c) ---- */

struct trc_step {
  const trc_model *model;
  char *arena;
  const trc_train_config *cfg;
  trc_step_plan *plan;
  const trc_dataset *train;
  trc_optimizer *optim;
  trc_sync *sync;
  int64_t step;        /* this optimizer step, 0-based */
  int rank, ranks;
  double lr;           /* this step's learning rate */
  int overlap;         /* bucketed all-reduces allowed (not --no-overlap) */
  int params_averaged; /* set by trc_step_average_parameters */
  int64_t labels;      /* with ignored labels: the window's labels that count, this */
  int64_t labels_all;  /* rank's and those the gradient averages over; -1 otherwise */
  int wants_norm;      /* the norm is clipped to or logged this step */
  double grad_norm;    /* the gradients' L2 norm before clipping (NaN until clipped, or
                          when not wanted) */
  float grad_scale;    /* what the update multiplies the gradients by (clipping; else 1) */
};

/* A device that updates the parameters itself (trc_device): the host's
 * parameters and optimizer state made current before the runtime reads them,
 * and the device told after the runtime wrote them. Nothing without one. */
void trc_device_host_current(const trc_model *m, char *arena, const trc_optimizer *o);
void trc_device_host_changed(const trc_model *m);

/* What one evaluation found (eval.c). */
typedef struct {
  double value[TRC_EVAL_METRICS]; /* by TRC_EVAL_* */
  unsigned has;                   /* bit i: value[i] was computed */
  int64_t examples;
} trc_eval_result;

/* The best evaluation so far (best.c), for --load-best and --early-stopping. */
typedef struct {
  int metric;          /* TRC_EVAL_*: lower is better for eval_loss, higher otherwise */
  int64_t patience;    /* --early-stopping (0: never stop) */
  double threshold;    /* --early-stopping-threshold */
  float *weights;      /* --load-best: the best evaluation's parameters; else NULL */
  uint64_t count;      /* parameters (f32) */
  int64_t step;        /* the step of the best evaluation; 0: none yet */
  double value;        /* its metric */
  int64_t bad_evals;   /* evaluations since the last improvement beyond the threshold */
} trc_best;

int trc_best_init(trc_best *b, const trc_options *o, uint64_t count, trc_error *err);
void trc_best_free(trc_best *b);
/* After an evaluation at `step` of the parameters `params`. */
void trc_best_update(trc_best *b, const trc_eval_result *r, int64_t step, const float *params);
/* 1 when --early-stopping's patience has run out. */
int trc_best_stops(const trc_best *b);

/* ---- pieces of trc_main (train.c) ---- */

/* Fails, naming what differs, unless every rank has the same model,
 * settings, mode, kinds of files and initial weights (agree.c). Collective. */
int trc_ranks_agree(const trc_model *m, const trc_options *o, const char *arena, trc_error *err);

/* Evaluation state, allocated once: a row list for one batch, metrics, and
 * the sums reduced across ranks (EVAL_SUMS scalars, then 3 per class, then
 * the confusion matrix when the metrics keep one). */
enum { EVAL_SUMS = 6 };
typedef struct {
  int64_t *rows;
  double *sums;
  int classify; /* predict + labels exist: accuracy, F1, CE loss */
  trc_metrics metrics;
} trc_evaluator;

int trc_evaluator_init(trc_evaluator *ev, const trc_model *model, trc_error *err);
void trc_evaluator_free(trc_evaluator *ev);
/* forward() over ds in batches (the last one padded), the counts summed
 * over all ranks (each passes its own slice); labels must be in
 * [0, predict_classes) (see trc_check_labels). */
void trc_evaluate(trc_evaluator *ev, const trc_model *model, const trc_train_config *cfg,
                  char *arena, const trc_dataset *ds, trc_eval_result *out);
int trc_check_labels(const trc_model *model, const trc_dataset *ds, const char *what,
                     trc_error *err);

/* ---- memory checked before it is touched (memory.c) ---- */

/* Whether cfg's optimizer keeps moment arrays m and v (optim.c). */
int trc_optimizer_needs_m(const trc_train_config *cfg);
int trc_optimizer_needs_v(const trc_train_config *cfg);
/* What the run maps that is known before it starts (the arena, the
 * optimizer's moments, --load-best's copy, the outer optimizer's arrays)
 * against the memory this process may use (trc_memory.h); fails naming
 * both. No check when that memory cannot be read, or under
 * TRAINC_NO_MEMORY_CHECK=1. */
int trc_check_memory(const trc_model *m, const trc_options *o, trc_error *err);

/* ---- stopping on a signal (stop.c) ---- */

/* From now on SIGTERM, SIGINT and SIGUSR1 (unless ignored) are recorded,
 * not fatal, once: the first asks the training loop to stop after the step
 * in flight; the handler gives them back their actions from before (the
 * default: the end of the process), so a second one ends it at once. */
enum { TRC_STOP_SIGNALS = 3 };
void trc_stop_catch(void);
/* Their actions from before again (after the training loop). */
void trc_stop_release(void);
/* At a step boundary: the signal every rank stops on now, or 0. `votes` is
 * the ranks' tally, zeroed before the first call and left to these calls. */
int trc_stop_agreed(float votes[TRC_STOP_SIGNALS], int ranks);
/* "SIGTERM", ... */
const char *trc_stop_signal_name(int signo);

#endif
