/* train.c — trc_main: a trainer's whole life. Flags, arena, weights, data,
 * then optimizer steps (steps.c decides which examples each one trains on),
 * with synchronization across ranks (sync.c), evaluation, logging, progress
 * and resumable state (state.c) at their schedule points, the best
 * evaluation kept (best.c: --load-best, --early-stopping), and the weights
 * saved last.
 *
 * One optimizer step is the model's step(), generated with the model
 * (trainc.h): this file owns the loop over steps around it.
 *
 * Under MPI, rank 0 alone prints, logs and saves weights; every rank saves
 * its own resumable state. */
#include "rt_train.h"
#include "data/rt_data.h"
#include "kernels/rt_kernels.h"
#include "io/rt_io.h"

#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

typedef struct {
  const trc_model *m;
  trc_options opt;
  const char *prog;
  char *arena;
  trc_dataset data, eval_file; /* owners: --data, --eval-data */
  trc_dataset train, eval;     /* what is trained on; this rank's slice of the evaluation set */
  int has_eval;                /* the evaluation set (of all ranks) is not empty */
  int rank, ranks;
  trc_optimizer optim;
  trc_sync sync;
  trc_step_plan plan;
  trc_evaluator evaluator;
  trc_best best;               /* --load-best, --early-stopping */
  int stopped;                 /* early stopping ended training */
  int signal;                  /* the signal that stopped training (stop.c), or 0 */
  float stop_votes[TRC_STOP_SIGNALS]; /* the ranks' tally of signals (trc_stop_agreed) */
  trc_log log;
  trc_progress progress;
  trc_tokenizer *tok;          /* --tokenizer, loaded when --text, --eval-text or --sample
                                  need it */
  int64_t step;                /* optimizer steps done */
  int in_sync;                 /* every rank holds the same parameters */
  char fingerprint[2048];      /* see state.c */
  double start, train_seconds; /* wall clock at the start; time inside steps */
  double first_step_at;        /* seconds from the process's start to its first step's */
  double window_start;         /* train_seconds at the last log record */
  double window_examples;      /* examples trained on since then (all ranks) */
  int64_t window_faults;       /* page faults inside steps since then */
  int64_t steps_run;           /* steps done by this process (not before a resume) */
  double run_examples;         /* and their examples (all ranks) */
  trc_kernel_times kernel_times; /* --kernel-times (rank 0) */
  int timing_kernels;
} trainer;

enum { EXIT_USAGE = 2 }; /* EXIT_SUCCESS 0, EXIT_FAILURE 1 */

static void (*step_code_wait)(void);

void trc_set_step_code_wait(void (*wait)(void)) { step_code_wait = wait; }

static double epochs_done(const trainer *t) {
  if (!t->plan.perm) return 0.0; /* not training: --steps 0 */
  return trc_step_epochs(&t->plan, t->step);
}

static float *params(const trainer *t) { return (float *)(t->arena + t->m->param_offset); }

/* ---- data ---- */

static int load_tokenizer(trainer *t, trc_error *err) {
  return t->tok ? 0 : trc_tokenizer_load(t->opt.tokenizer, &t->tok, err);
}

/* Where a set of examples comes from: one of a folder of input files
 * (--data DIR), a text file (--text FILE) or sentence pairs (--pairs FILE). */
typedef struct {
  const char *dir, *text, *pairs;
} data_source;

static int load_set(trainer *t, data_source src, trc_dataset *ds, trc_error *err) {
  trc_pair_fields fields;
  if (src.dir) return trc_dataset_load(t->m, src.dir, ds, err);
  if (src.text)
    return load_tokenizer(t, err) || trc_text_check_model(t->m, t->tok, err) ||
                   trc_text_load(t->m, t->tok, src.text, ds, err)
               ? -1
               : 0;
  if (src.pairs)
    return load_tokenizer(t, err) || trc_pair_fields_parse(t->opt.pair_fields, &fields, err) ||
                   trc_pairs_load(t->m, t->tok, src.pairs, &fields, ds, err)
               ? -1
               : 0;
  return 0;
}

static data_source training_source(const trc_options *o) {
  return (data_source){o->data_dir, o->text_path, o->pairs_path};
}

static const char *source_name(data_source src) {
  return src.dir ? src.dir : src.text ? src.text : src.pairs;
}

/* Training rows: --data less its validation share when there is no
 * --eval-data (rows drawn by the seed, moved to the end of the set: see
 * holdout.c); evaluation rows: --eval-data, else those; this rank's share.
 * --text and --pairs (--eval-text, --eval-pairs) stand for --data
 * (--eval-data). */
static int load_data(trainer *t, trc_error *err) {
  const trc_options *o = &t->opt;
  const data_source train = training_source(o),
                    evaluation = {o->eval_dir, o->eval_text_path, o->eval_pairs_path};
  const char *data = source_name(train), *eval = source_name(evaluation);
  if (load_set(t, train, &t->data, err) || load_set(t, evaluation, &t->eval_file, err))
    return -1;
  int64_t n = t->data.n, n_val = eval ? 0 : (int64_t)((double)n * t->opt.cfg.validation);
  int64_t val_first = eval ? 0 : n - n_val, val_n = eval ? t->eval_file.n : n_val;
  if (trc_dataset_hold_out(&t->data, n_val, t->opt.cfg.seed, err)) return trc_set_where(err, data);
  int64_t lo = val_n * t->rank / t->ranks, hi = val_n * (t->rank + 1) / t->ranks;
  if (trc_dataset_view(&t->data, 0, n - n_val, &t->train, err) ||
      trc_dataset_view(eval ? &t->eval_file : &t->data, val_first + lo, hi - lo, &t->eval, err))
    return -1;
  t->has_eval = val_n > 0;
  return t->has_eval ? trc_check_labels(t->m, &t->eval, eval ? eval : data, err) : 0;
}

/* Every rank must train on the same rows and evaluate the same set, or they
 * would run different numbers of steps and wait on each other forever. */
static int check_ranks_agree(const trainer *t, trc_error *err) {
  const int64_t counts[2] = {t->train.n, t->data.n + t->eval_file.n};
  for (int i = 0; i < 2; i++) {
    int64_t lo, hi;
    if (trc_ranks_min_max(counts[i], &lo, &hi, err)) return -1;
    if (lo != hi)
      return trc_fail(err,
                      "the ranks read different data (%s: from %lld to %lld examples); every "
                      "rank must read the same --data and --eval-data",
                      i == 0 ? "training" : "all files", (long long)lo, (long long)hi);
  }
  return 0;
}

/* ---- synchronization ---- */

static void sync_parameters(trainer *t) {
  trc_device_host_current(t->m, t->arena, &t->optim);
  trc_sync_parameters(&t->sync, &t->opt.cfg, params(t), &t->optim);
  trc_device_host_changed(t->m);
  t->in_sync = 1;
}

/* Evaluation, the end of training and the saved weights see averaged
 * parameters. */
static void ensure_in_sync(trainer *t) {
  if (!t->in_sync) sync_parameters(t);
}

/* The mean over the ranks (for the logged loss). */
static double mean_over_ranks(double x, int ranks) {
  trc_comm_allreduce_f64(&x, 1);
  return x / ranks;
}

/* ---- evaluation and logging ---- */

static void print_eval(const trainer *t, const trc_eval_result *r) {
  static const char *const names[] = {TRC_EVAL_NAMES};
  printf("{'epoch': %.2f", epochs_done(t));
  for (int i = 0; i < TRC_EVAL_METRICS; i++)
    if (r->has >> i & 1) printf(", '%s': %.4f", names[i], r->value[i]);
  printf("}\n");
  fflush(stdout);
}

/* Prints and logs an evaluation, which may be the best so far. */
static void evaluate(trainer *t) {
  trc_eval_result r;
  trc_device_host_current(t->m, t->arena, &t->optim);
  ensure_in_sync(t);
  trc_evaluate(&t->evaluator, t->m, &t->opt.cfg, t->arena, &t->eval, &r);
  trc_best_update(&t->best, &r, t->step, params(t));
  if (t->rank != 0) return;
  trc_progress_break(&t->progress);
  print_eval(t, &r);
  trc_log_eval(&t->log, t->step, epochs_done(t), &r);
}

static trc_step_record step_record(const trainer *t, double loss, double lr, double per_s,
                                   double grad_norm) {
  return (trc_step_record){.step = t->step,
                           .epoch = epochs_done(t),
                           .loss = loss,
                           .lr = lr,
                           .examples_per_s = per_s,
                           .seconds = trc_now() - t->start,
                           .grad_norm = grad_norm,
                           .syncs = t->sync.syncs,
                           .comm_bytes = t->sync.bytes,
                           .comm_seconds = t->sync.seconds,
                           .page_faults = t->window_faults};
}

/* Page faults of the whole process so far (every thread's). */
static int64_t page_faults(void) {
  struct rusage u;
  return getrusage(RUSAGE_SELF, &u) == 0 ? (int64_t)(u.ru_minflt + u.ru_majflt) : 0;
}

/* Whether the log records the state after `done` steps whatever happens
 * (a stop or a signal makes more such points). */
static int scheduled_log_point(const trainer *t, int64_t done) {
  return done % t->opt.cfg.log_every == 0 || done == t->plan.total_steps;
}

static void report_step(trainer *t, double loss, double lr, double grad_norm) {
  const int64_t done = t->step;
  int log_point = scheduled_log_point(t, done) || t->stopped || t->signal;
  if (log_point && t->ranks > 1) {
    loss = mean_over_ranks(loss, t->ranks);
    grad_norm = mean_over_ranks(grad_norm, t->ranks);
  }
  if (t->rank != 0) return;
  double rate = t->train_seconds > 0 ? t->run_examples / t->train_seconds : 0.0;
  double eta = (double)(t->plan.total_steps - done) * t->train_seconds / (double)t->steps_run;
  trc_progress_update(&t->progress, done, loss, rate, eta, log_point);
  if (!log_point) return;
  double window = t->train_seconds - t->window_start;
  trc_step_record rec =
      step_record(t, loss, lr, window > 0 ? t->window_examples / window : 0.0, grad_norm);
  trc_log_step(&t->log, &rec);
  t->window_start = t->train_seconds;
  t->window_examples = 0;
  t->window_faults = 0;
}

/* ---- training ---- */

/* With ignored labels, the labels of the step's window that count, before
 * the step runs (its loss seed divides by them; labels.c). */
static void count_window_labels(trainer *t, trc_step *s) {
  s->labels = s->labels_all = -1;
  if (trc_ignore_input(t->m) < 0) return;
  s->labels = 0;
  for (int64_t k = 0; k < trc_step_window(&t->plan, t->step); k++)
    s->labels +=
        trc_count_labels(t->m, &t->train, trc_step_rows(&t->plan, t->step, k), t->m->batch);
  double all = (double)s->labels;
  if (t->ranks > 1 && trc_step_averages_gradients(s)) trc_comm_allreduce_f64(&all, 1);
  s->labels_all = (int64_t)all;
}

/* One optimizer step: the model's own step() (generated code: the window's
 * forward and backward passes, the gradient sync, clipping, the optimizer
 * and the LocalSGD average), then which ranks now agree. Returns the mean of
 * its micro-batch losses (with ignored labels: the mean over the labels that
 * count, 0 when none does), and the gradient norm before clipping. */
static double train_step(trainer *t, double lr, double *grad_norm) {
  trc_step s = {.model = t->m,         .arena = t->arena,    .cfg = &t->opt.cfg,
                .plan = &t->plan,      .train = &t->train,   .optim = &t->optim,
                .sync = &t->sync,      .step = t->step,      .rank = t->rank,
                .ranks = t->ranks,     .lr = lr,             .overlap = !t->opt.no_overlap,
                .grad_norm = NAN,      .grad_scale = 1.0f,
                .wants_norm = t->opt.cfg.clip_norm > 0 || scheduled_log_point(t, t->step + 1)};
  count_window_labels(t, &s);
  double loss = t->m->step(&s);
  *grad_norm = s.grad_norm;
  if (s.labels >= 0 && isfinite(loss)) { /* step() returns the mean of per-micro-batch sums */
    double sum = loss * (double)trc_step_window(&t->plan, t->step);
    loss = s.labels > 0 ? sum / (double)s.labels : 0;
  }
  if (!isfinite(loss)) return loss; /* the caller stops before the update */
  t->step++;
  if (trc_step_averages_gradients(&s)) { /* the ranks took the same step */
    t->in_sync = 1;
    if (t->sync.anchor) trc_device_host_current(t->m, t->arena, &t->optim);
    trc_sync_restart_outer(&t->sync, params(t));
    if (t->sync.anchor) trc_device_host_changed(t->m); /* a device takes the new anchor */
  } else {
    t->in_sync = s.params_averaged;
  }
  return loss;
}

/* Everything a saved state must agree with to continue this run exactly:
 * the model, the ranks, the training rows, the step count, every setting
 * that shapes the weights (the RUN rows of TRC_TRAIN_CONFIG) and, when
 * evaluations choose the final weights or the last step (--load-best,
 * --early-stopping), what decides that. */
static void make_fingerprint(trainer *t) {
  static const char *const metrics[] = {TRC_EVAL_NAMES};
  trc_config_field fields[TRC_CONFIG_FIELDS];
  trc_config_fields(&t->opt.cfg, fields);
  size_t len = (size_t)snprintf(t->fingerprint, sizeof t->fingerprint,
                                "model %s params %" PRIu64 " ranks %d rank %d batch %" PRId64
                                " examples %" PRId64 " steps %" PRId64,
                                t->m->name, t->m->param_count, t->ranks, t->rank, t->m->batch,
                                t->train.n, t->plan.total_steps);
  for (int i = 0; i < TRC_CONFIG_FIELDS && len < sizeof t->fingerprint; i++)
    if (fields[i].shapes_run)
      len += (size_t)snprintf(t->fingerprint + len, sizeof t->fingerprint - len, " %s %s",
                              fields[i].name, fields[i].value);
  const trc_options *o = &t->opt;
  if ((o->load_best || o->early_stopping) && len < sizeof t->fingerprint)
    snprintf(t->fingerprint + len, sizeof t->fingerprint - len,
             " load_best %d early_stopping %" PRId64 " threshold %.17g metric %s eval_examples %"
             PRId64 " eval_every_epoch %d eval_every_steps %" PRId64,
             o->load_best, o->early_stopping, o->early_stopping_threshold,
             metrics[o->metric_for_best], t->eval.n, o->cfg.eval_every_epoch,
             o->cfg.eval_every_steps);
}

static trc_run_state run_state(trainer *t) {
  return (trc_run_state){.model = t->m,
                         .arena = t->arena,
                         .opt = &t->optim,
                         .sync = &t->sync,
                         .best = &t->best,
                         .step = t->step,
                         .in_sync = t->in_sync,
                         .keep = t->opt.save_total_limit,
                         .fingerprint = t->fingerprint};
}

static int resume(trainer *t, trc_error *err) {
  trc_run_state st = run_state(t);
  if (trc_state_load(t->opt.resume_dir, &st, err)) return -1;
  t->step = st.step;
  t->in_sync = st.in_sync;
  t->stopped = trc_best_stops(&t->best); /* saved when early stopping ended the run */
  if (t->rank == 0 && !t->opt.quiet)
    fprintf(stderr, "resumed from %s at step %" PRId64 "\n", t->opt.resume_dir, t->step);
  return 0;
}

/* Every --save-every steps or epoch, and at the end (the last step, or the
 * step early stopping or a signal stopped at). */
static int save_state_if_due(trainer *t, trc_error *err) {
  int64_t every = t->opt.save_every;
  int due = every < 0 ? trc_step_ends_epoch(&t->plan, t->step) : t->step % every == 0;
  int last = t->step == t->plan.total_steps || t->stopped || t->signal;
  if (!t->opt.state_dir || !(due || last)) return 0;
  trc_device_host_current(t->m, t->arena, &t->optim);
  trc_run_state st = run_state(t);
  return trc_state_save(t->opt.state_dir, &st, err);
}

static int setup_training(trainer *t, trc_error *err) {
  const trc_train_config *c = &t->opt.cfg;
  trc_step_plan_spec spec = {t->train.n, t->m->batch, c->accumulate, t->rank, t->ranks,
                             c->seed,    c->steps,    c->epochs};
  if (trc_step_plan_init(&t->plan, &spec, err))
    return trc_set_where(err, source_name(training_source(&t->opt)));
  if (trc_optimizer_init(&t->optim, c, t->m->trained_count, err) ||
      trc_sync_init(&t->sync, c, t->m, t->arena, &t->optim, err) ||
      trc_best_init(&t->best, &t->opt, t->m->param_count, err))
    return -1;
  make_fingerprint(t);
  if (t->opt.resume_dir && resume(t, err)) return -1;
  trc_progress_init(&t->progress, t->plan.total_steps, t->opt.quiet || t->rank != 0);
  t->start = trc_now();
  return 0;
}

static int stop_on_bad_loss(trainer *t, double loss, double lr, double grad_norm,
                            trc_error *err) {
  trc_step_record rec = step_record(t, loss, lr, 0.0, grad_norm);
  rec.step = t->step + 1; /* the step that failed, never counted as done */
  trc_log_step(&t->log, &rec);
  trc_progress_break(&t->progress);
  return trc_fail(err,
                  "the training loss is %s at step %lld (epoch %.2f); stopping without "
                  "saving. A lower --lr or gradient clipping may help",
                  isnan(loss) ? "nan" : "infinite", (long long)t->step + 1, epochs_done(t));
}

/* Evaluations due after the step just done: at the end of every epoch, every
 * eval_every_steps. Returns 1 when one ran; early stopping may then stop. */
static int scheduled_eval(trainer *t) {
  const trc_train_config *c = &t->opt.cfg;
  int due = (c->eval_every_epoch && trc_step_ends_epoch(&t->plan, t->step)) ||
            (c->eval_every_steps > 0 && t->step % c->eval_every_steps == 0);
  if (!due || !t->has_eval) return 0;
  evaluate(t);
  t->stopped = trc_best_stops(&t->best);
  return 1;
}

static void print_summary(const trainer *t) {
  static const char *const metrics[] = {TRC_EVAL_NAMES};
  if (t->opt.quiet || t->rank != 0) return;
  double seconds = trc_now() - t->start;
  if (t->stopped)
    fprintf(stderr, "stopped early at step %lld: %s has not improved by more than %g for %lld "
                    "evaluations (best %.4f at step %lld)\n",
            (long long)t->step, metrics[t->best.metric], t->best.threshold,
            (long long)t->best.patience, t->best.value, (long long)t->best.step);
  fprintf(stderr, "trained %lld steps (%.2f epochs) in %.1f s, %.0f examples/s",
          (long long)t->step, epochs_done(t), seconds,
          t->train_seconds > 0 ? t->run_examples / t->train_seconds : 0.0);
  if (t->ranks > 1)
    fprintf(stderr, " on %d ranks, %lld syncs, %.1f MB in %.2f s", t->ranks,
            (long long)t->sync.syncs, (double)t->sync.bytes / 1e6, t->sync.seconds);
  fputc('\n', stderr);
  if (t->steps_run > 0)
    fprintf(stderr, "time to first step: %.2f s (from the process's start)\n", t->first_step_at);
}

/* Where a signal stopped training (the state's files: state.c). */
static void report_signal(trainer *t) {
  if (t->rank != 0) return;
  trc_progress_break(&t->progress);
  fprintf(stderr, "%s: stopped by %s after step %" PRId64, t->prog,
          trc_stop_signal_name(t->signal), t->step);
  if (t->opt.state_dir)
    fprintf(stderr, "; state saved in %s/state-%" PRId64 ".rank-%s.safetensors; resume with "
                    "--resume %s\n",
            t->opt.state_dir, t->step, t->ranks > 1 ? "*" : "0", t->opt.state_dir);
  else
    fputs("; no state saved (no --save-state)\n", stderr);
}

static int train(trainer *t, trc_error *err) {
  const trc_train_config *c = &t->opt.cfg;
  const int64_t total = t->plan.total_steps;
  int evaluated_last = t->stopped; /* a resumed run that had stopped early */
  while (t->step < total && !t->stopped) {
    double lr = trc_schedule_lr(c, t->step, total), grad_norm;
    double examples = (double)(trc_step_window(&t->plan, t->step) * t->m->batch * t->ranks);
    int64_t faults = page_faults();
    if (t->steps_run == 0) {
      if (step_code_wait) step_code_wait();
      t->first_step_at = trc_process_seconds();
    }
    int timed = t->timing_kernels && t->steps_run > 0; /* the first step warms up */
    int64_t window = trc_step_window(&t->plan, t->step);
    if (timed) trc_kernel_times_begin(&t->kernel_times);
    double t0 = trc_now(), loss = train_step(t, lr, &grad_norm);
    t->train_seconds += trc_now() - t0;
    if (timed) trc_kernel_times_end(&t->kernel_times, window);
    t->window_faults += page_faults() - faults;
    t->window_examples += examples;
    t->run_examples += examples;
    t->steps_run++;
    if (!isfinite(loss)) return stop_on_bad_loss(t, loss, lr, grad_norm, err);
    t->signal = trc_stop_agreed(t->stop_votes, t->ranks);
    evaluated_last = scheduled_eval(t);
    report_step(t, loss, lr, grad_norm);
    if (save_state_if_due(t, err)) return -1;
    if (t->signal) return report_signal(t), 0;
  }
  trc_comm_wait_all(); /* the last step's votes (trc_stop_agreed) */
  trc_device_host_current(t->m, t->arena, &t->optim); /* what is saved and sampled */
  ensure_in_sync(t);
  if (t->has_eval && !evaluated_last) evaluate(t);
  trc_progress_break(&t->progress);
  print_summary(t);
  return 0;
}

/* --load-best: the parameters become the best evaluation's, said on stderr
 * and in the log, and are evaluated again for the per-class report. */
static void restore_best(trainer *t) {
  static const char *const metrics[] = {TRC_EVAL_NAMES};
  trc_best *b = &t->best;
  if (!b->weights || b->step == 0) return;
  memcpy(params(t), b->weights, t->m->param_count * sizeof(float));
  trc_bf16_weights_changed();
  if (t->rank == 0) {
    trc_log_best(&t->log, t->step, b);
    if (!t->opt.quiet)
      fprintf(stderr, "loaded the best weights: step %lld, %s %.4f\n", (long long)b->step,
              metrics[b->metric], b->value);
  }
  if (b->step == t->step) return; /* the last evaluation's counts are these weights' */
  trc_eval_result r;
  trc_evaluate(&t->evaluator, t->m, &t->opt.cfg, t->arena, &t->eval, &r);
}

/* The per-class report of the last evaluation, on stderr and in the log. */
static void report_classes(trainer *t) {
  if (!t->has_eval || !t->evaluator.classify || t->rank != 0) return;
  if (!t->opt.quiet) trc_report_classes(&t->evaluator.metrics, stderr);
  trc_log_classes(&t->log, t->step, &t->evaluator.metrics);
}

/* ---- the whole run ---- */

static int prepare_weights(trainer *t, trc_error *err) {
  trc_init_params(t->m, t->arena, t->opt.cfg.seed); /* kept where --init allows a gap */
  if (!t->opt.init_path) return 0;
  return trc_load_weights_allowing(t->m, t->arena, t->opt.init_path, &t->opt.allow, err);
}

static int save_weights(trainer *t, trc_error *err) {
  if (!t->opt.save_path) return 0;
  if (trc_save_weights(t->m, t->arena, t->opt.save_path, err)) return -1;
  if (!t->opt.quiet) fprintf(stderr, "saved weights to %s\n", t->opt.save_path);
  return 0;
}

/* The planned size of the bf16 GEMMs' operand buffer in this run. */
static uint64_t bf16_operand_bytes(const trc_model *m, const trc_train_config *c) {
  return c->precision == TRC_BF16 ? m->bf16_operand_bytes : m->rounded_operand_bytes;
}

static void report_planned_memory(const trc_model *m, const trc_train_config *c) {
  fprintf(stderr, "memory: arena %.1f MiB planned (%llu bytes, checkpoint %s)\n", (double)m->arena_bytes / 1048576.0,
          (unsigned long long)m->arena_bytes, m->checkpoint ? m->checkpoint : "off");
  int state_arrays = (c->optimizer == TRC_ADAMW) + (c->optimizer == TRC_ADAMW || c->momentum != 0);
  uint64_t frozen_floats, all = 0;
  int frozen = trc_frozen_params(m, &frozen_floats);
  for (int i = 0; i < m->n_params; i++) all += m->params[i].count;
  fprintf(stderr,
          "parameters: %d trained (%llu floats), %d frozen (%llu floats); gradients %llu bytes, "
          "optimizer state %llu bytes\n",
          m->n_params - frozen, (unsigned long long)(all - frozen_floats), frozen,
          (unsigned long long)frozen_floats,
          (unsigned long long)(4 * m->trained_count),
          (unsigned long long)(4 * m->trained_count * (uint64_t)state_arrays));
  if (c->precision == TRC_BF16 && !m->device)
    fprintf(stderr, "precision bf16: the GEMMs read the parameters from a bf16 copy of %llu "
                    "bytes\n", (unsigned long long)(2 * m->param_count));
  if (c->precision == TRC_BF16 && !m->device && trc_bf16_emulated())
    fprintf(stderr, "precision bf16: emulated, oneDNN has no bf16 kernels on this CPU (they need "
                    "AVX-512): the GEMMs and convolutions round their inputs to bf16 and compute "
                    "in f32, slower than fp32\n");
  uint64_t operands = bf16_operand_bytes(m, c);
  if (operands && !m->device)
    fprintf(stderr, "bf16 GEMMs: their operands rounded into one buffer of %llu bytes\n",
            (unsigned long long)operands);
}

/* The GEMMs' bf16 buffers outside the arena (host trainers): the
 * parameters' copy under precision bf16, and the operands' buffer at the
 * size the plan gave it. */
static int reserve_bf16_buffers(trainer *t, trc_error *err) {
  const trc_model *m = t->m;
  int bf16 = t->opt.cfg.precision == TRC_BF16;
  if (bf16 && trc_bf16_weights_attach(params(t), m->param_count, err)) return -1;
  uint64_t operands = bf16_operand_bytes(m, &t->opt.cfg);
  return operands ? trc_bf16_operands_reserve(operands, err) : 0;
}

static void report_high_water(trainer *t) {
  const int host = !t->m->device;
  trc_memory_marks marks = {
      .arena_planned = t->m->arena_bytes,
      .arena_high_water = trc_arena_high_water(t->m, t->arena),
      .operands_planned = host ? bf16_operand_bytes(t->m, &t->opt.cfg) : 0,
      .operands_high_water = host ? trc_bf16_operands_high_water() : 0};
  trc_log_memory(&t->log, t->step, &marks);
  if (t->opt.quiet) return;
  fprintf(stderr, "memory: arena high-water mark %llu bytes, planned %llu%s\n",
          (unsigned long long)marks.arena_high_water, (unsigned long long)marks.arena_planned,
          marks.arena_high_water == marks.arena_planned ? "" : " (differs from the plan!)");
  if (marks.operands_planned)
    fprintf(stderr, "memory: bf16 GEMM operands high-water mark %llu bytes, planned %llu%s\n",
            (unsigned long long)marks.operands_high_water,
            (unsigned long long)marks.operands_planned,
            marks.operands_high_water == marks.operands_planned ? "" : " (differs from the plan!)");
  uint64_t conv = trc_conv_workspace_bytes(), scratchpads = trc_bf16_scratchpad_bytes();
  if (conv)
    fprintf(stderr, "memory: plus %llu bytes of convolution workspace outside the arena\n",
            (unsigned long long)conv);
  if (scratchpads)
    fprintf(stderr, "memory: plus %llu bytes of oneDNN scratchpads of the bf16 GEMMs, outside "
                    "the plan\n",
            (unsigned long long)scratchpads);
}

/* --sample: generated text on stdout, after the prompt. */
static int sample(trainer *t, trc_error *err) {
  if (t->opt.sample == 0) return 0;
  const char *prompt = t->opt.prompt && t->opt.prompt[0] ? t->opt.prompt : "\n";
  trc_sample_settings s = {t->opt.temperature, t->opt.top_k, t->opt.top_p, t->opt.cfg.seed};
  return load_tokenizer(t, err) ||
         trc_sample(t->m, t->arena, t->tok, prompt, t->opt.sample, &s, stdout, err);
}

/* oneDNN's sgemm (trc_gemm) and convolutions malloc their packing buffers
 * on every call. glibc would give large freed blocks back to the kernel
 * (mmap above a moving threshold, heap trimming) and each thread allocates
 * from an arena of its own, so steps after the first faulted fresh pages in
 * again. One heap for every thread, nothing given back, and its free top
 * touched before step 1: no page faults after step 1 (docs/trainer.md). */
static void keep_heap_touched(void) {
  enum { MIB = 1 << 20, TOUCHED = 24 * MIB };
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_THRESHOLD, 32 * MIB); /* glibc's largest */
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  volatile char *p = malloc(TOUCHED); /* volatile: the writes must happen */
  for (int64_t i = 0; p && i < TOUCHED; i += 4096) p[i] = 0;
  free((void *)p);
}

/* Everything after the flags; returns an exit status. */
static int run(trainer *t, trc_error *err) {
  const trc_model *m = t->m;
  if (trc_model_check(m, err) || trc_check_outputs(m, &t->opt, t->rank, err)) return EXIT_FAILURE;
  if (m->device && m->device->start() != 0) return EXIT_FAILURE; /* it said why */
  if (trc_check_memory(m, &t->opt, err) || !(t->arena = trc_arena_alloc(m->arena_bytes, err)) ||
      prepare_weights(t, err) ||
      (t->ranks > 1 && trc_ranks_agree(m, &t->opt, t->arena, err)))
    return EXIT_FAILURE;
  if (t->opt.gradcheck) {
    if (m->defaults.precision == TRC_BF16 && !t->opt.quiet)
      fprintf(stderr, "note: --gradcheck runs in fp32 (finite differences of bf16 GEMMs measure "
                      "rounding, not the gradient)\n");
    int rc = trc_gradcheck(m, t->arena, t->opt.cfg.seed, stdout, err);
    return rc < 0 ? EXIT_FAILURE : rc;
  }
  trc_set_precision(t->opt.cfg.precision);
  if (t->opt.dump_path)
    return trc_dump_step(m, t->arena, t->opt.data_dir, t->opt.cfg.seed, t->opt.dump_path, err)
               ? EXIT_FAILURE
               : EXIT_SUCCESS;
  const char *log_path = t->rank == 0 ? t->opt.log_path : NULL;
  const char *tensorboard = t->rank == 0 ? t->opt.tensorboard_dir : NULL;
  if ((t->opt.state_dir && trc_state_prepare(t->opt.state_dir, err)) ||
      trc_tensorboard_open(&t->log.tb, tensorboard, err) || load_data(t, err) ||
      check_ranks_agree(t, err) || trc_evaluator_init(&t->evaluator, m, err) ||
      trc_log_open(&t->log, log_path, t->opt.resume_dir != NULL, err))
    return EXIT_FAILURE;
  int training = !(t->opt.steps_given && t->opt.cfg.steps == 0);
  t->timing_kernels = training && t->rank == 0 && t->opt.kernel_times_path;
  if (t->timing_kernels && trc_kernel_times_init(&t->kernel_times, m, err)) return EXIT_FAILURE;
  trc_arena_poison(m, t->arena);
  if (!t->opt.quiet && t->rank == 0) report_planned_memory(m, &t->opt.cfg);
  if (training && setup_training(t, err)) return EXIT_FAILURE;
  if (!m->device && reserve_bf16_buffers(t, err)) return EXIT_FAILURE;
  keep_heap_touched();
  if (training) {
    trc_stop_catch();
    int failed = train(t, err);
    trc_stop_release();
    if (failed) return EXIT_FAILURE;
  }
  if (t->signal) return 128 + t->signal; /* the shell's status for a process a signal ended */
  if (training && t->rank == 0) report_high_water(t);
  if (t->timing_kernels &&
      trc_kernel_times_report(&t->kernel_times, m, t->opt.kernel_times_path, err))
    return EXIT_FAILURE;
  if (!training && t->has_eval) evaluate(t);
  restore_best(t);
  report_classes(t);
  if (t->rank == 0 && save_weights(t, err)) return EXIT_FAILURE;
  return t->rank == 0 && sample(t, err) ? EXIT_FAILURE : EXIT_SUCCESS;
}

static void teardown(trainer *t) {
  trc_step_plan_free(&t->plan);
  trc_log_close(&t->log);
  trc_evaluator_free(&t->evaluator);
  trc_best_free(&t->best);
  trc_sync_free(&t->sync);
  trc_optimizer_free(&t->optim);
  trc_dataset_free(&t->train);
  trc_dataset_free(&t->eval);
  trc_dataset_free(&t->eval_file);
  trc_dataset_free(&t->data);
  trc_arena_free(t->arena);
  trc_bf16_weights_detach();
  trc_bf16_operands_release();
  trc_tokenizer_free(t->tok);
  trc_kernel_times_free(&t->kernel_times);
}

static const char *program_name(const char *argv0) {
  const char *slash = argv0 ? strrchr(argv0, '/') : NULL;
  return slash ? slash + 1 : argv0 ? argv0 : "trainer";
}

/* After the communication is up; returns an exit status. */
static int trainer_main(trainer *t, int argc, char **argv, trc_error *err) {
  if (trc_parse_args(t->m, argc, argv, &t->opt, err)) {
    trc_report(err);
    fprintf(stderr, "try '%s --help'\n", t->prog);
    return EXIT_USAGE;
  }
  if (t->opt.help) {
    trc_print_usage(t->m, t->prog, stdout);
    return EXIT_SUCCESS;
  }
  if (t->opt.version) {
    printf("%s: trainer for model '%s', trainc runtime %s\n", t->prog, t->m->name,
           TRC_RUNTIME_VERSION);
    return EXIT_SUCCESS;
  }
  trc_set_threads((int)t->opt.threads);
  if (t->rank != 0) t->opt.quiet = 1;
  trc_comm_set_timeout(t->opt.comm_timeout);
  int rc = run(t, err);
  if (rc != EXIT_SUCCESS && err->msg[0]) trc_report(err);
  teardown(t);
  return rc;
}

int trc_main(const trc_model *m, int argc, char **argv) {
  trainer t;
  trc_error err;
  memset(&t, 0, sizeof t);
  trc_error_clear(&err);
  t.m = m;
  t.prog = program_name(argc > 0 ? argv[0] : NULL);
  signal(SIGXFSZ, SIG_IGN); /* past `ulimit -f`, a write fails with EFBIG and says so */
  if (trc_comm_init(&argc, &argv, &err)) {
    trc_report(&err);
    return EXIT_FAILURE;
  }
  t.rank = trc_comm_rank();
  t.ranks = trc_comm_size();
  t.in_sync = 1; /* every rank starts from the same seed or --init file */
  int rc = trainer_main(&t, argc, argv, &err);
  trc_comm_finalize(t.signal ? 0 : rc); /* every rank stopped at the same step: no abort */
  return rc;
}
