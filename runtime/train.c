/* train.c — trc_main: a trainer's whole life. Flags, arena, weights, data,
 * then optimizer steps of `accumulate` micro-batches each, with evaluation,
 * logging and progress at their schedule points, and the weights saved last.
 *
 * Batching: each epoch visits the training examples in a fresh order that
 * depends only on (seed, epoch); an epoch is floor(N / batch) micro-batches
 * (the last partial batch is dropped); an optimizer step's window of
 * micro-batches may run across an epoch boundary. With --epochs, the run is
 * floor(epochs * batches_per_epoch / accumulate) steps (at least 1). */
#include "rt_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const trc_model *m;
  trc_options opt;
  const char *prog;
  char *arena;
  trc_dataset data, eval_file; /* owners: --data, --eval-data */
  trc_dataset train, eval;     /* what is trained on and evaluated on */
  int has_eval;
  trc_optimizer optim;
  trc_evaluator evaluator;
  trc_log log;
  trc_progress progress;
  int64_t *perm; /* this epoch's order of the training rows */
  int64_t batches_per_epoch, total_steps;
  int64_t epoch, batch_in_epoch; /* where the next micro-batch comes from */
  double start, train_seconds;   /* wall clock at the start; time inside steps */
  double window_start;           /* train_seconds at the last log record */
  int64_t window_steps;          /* steps since then */
} trainer;

enum { EXIT_USAGE = 2 }; /* EXIT_SUCCESS 0, EXIT_FAILURE 1 */

static double epochs_done(const trainer *t) {
  if (t->batches_per_epoch == 0) return 0.0; /* not training: --steps 0 */
  return (double)t->epoch + (double)t->batch_in_epoch / (double)t->batches_per_epoch;
}

/* ---- data ---- */

/* Training rows: --data less its val_split tail when there is no --eval-data;
 * evaluation rows: --eval-data, else that tail. */
static int load_data(trainer *t, trc_error *err) {
  const char *data = t->opt.data_dir, *eval = t->opt.eval_dir;
  if ((data && trc_dataset_load(t->m, data, &t->data, err)) ||
      (eval && trc_dataset_load(t->m, eval, &t->eval_file, err)))
    return -1;
  int64_t n = t->data.n, n_val = eval ? 0 : (int64_t)((double)n * t->opt.cfg.val_split);
  if (trc_dataset_view(&t->data, 0, n - n_val, &t->train, err) ||
      trc_dataset_view(eval ? &t->eval_file : &t->data, eval ? 0 : n - n_val,
                       eval ? t->eval_file.n : n_val, &t->eval, err))
    return -1;
  t->has_eval = t->eval.n > 0;
  return t->has_eval ? trc_check_labels(t->m, &t->eval, eval ? eval : data, err) : 0;
}

/* ---- evaluation and logging ---- */

static void print_eval(const trainer *t, const trc_eval_result *r) {
  printf("{'epoch': %.2f", epochs_done(t));
  if (r->has_loss) printf(", 'eval_loss': %.4f", r->loss);
  if (r->has_accuracy) printf(", 'eval_accuracy': %.4f", r->accuracy);
  if (r->has_f1) printf(", 'eval_f1': %.4f", r->f1);
  printf("}\n");
  fflush(stdout);
}

static void evaluate(trainer *t, int64_t step) {
  trc_eval_result r;
  trc_evaluate(&t->evaluator, t->m, &t->opt.cfg, t->arena, &t->eval, &r);
  trc_progress_break(&t->progress);
  print_eval(t, &r);
  trc_log_eval(&t->log, step, epochs_done(t), &r);
}

static void report_step(trainer *t, int64_t done, double loss, double lr) {
  const trc_train_config *c = &t->opt.cfg;
  const double step_examples = (double)t->m->batch * (double)c->accumulate;
  int log_point = done % c->log_every == 0 || done == t->total_steps;
  double rate = t->train_seconds > 0 ? done * step_examples / t->train_seconds : 0.0;
  double eta = rate > 0 ? (double)(t->total_steps - done) * step_examples / rate : 0.0;
  trc_progress_update(&t->progress, done, loss, rate, eta, log_point);
  if (!log_point) return;
  double window = t->train_seconds - t->window_start;
  trc_step_record rec = {done,
                         epochs_done(t),
                         loss,
                         lr,
                         window > 0 ? (double)t->window_steps * step_examples / window : 0.0,
                         trc_now() - t->start};
  trc_log_step(&t->log, &rec);
  t->window_start = t->train_seconds;
  t->window_steps = 0;
}

/* ---- training ---- */

/* Rows of the next micro-batch, starting a new shuffled epoch when needed. */
static const int64_t *next_batch(trainer *t) {
  if (t->batch_in_epoch == t->batches_per_epoch) {
    t->epoch++;
    t->batch_in_epoch = 0;
    trc_shuffle(t->perm, t->train.n, t->opt.cfg.seed, (uint64_t)t->epoch);
  }
  return t->perm + t->batch_in_epoch++ * t->m->batch;
}

/* One optimizer step; returns the mean of its micro-batch losses. */
static double train_step(trainer *t, double lr) {
  const trc_model *m = t->m;
  const trc_train_config *c = &t->opt.cfg;
  const float seed = 1.0f / (float)c->accumulate;
  float *grad = (float *)(t->arena + m->grad_offset);
  double loss_sum = 0.0;
  memset(grad, 0, m->param_count * sizeof(float));
  for (int64_t k = 0; k < c->accumulate; k++) {
    uint64_t micro_batch = (uint64_t)t->optim.step * (uint64_t)c->accumulate + (uint64_t)k;
    trc_set_mode(m, t->arena, trc_rng_key(c->seed, TRC_STREAM_DROPOUT, micro_batch), 1);
    trc_dataset_gather(&t->train, m, next_batch(t), m->batch, t->arena);
    memcpy(t->arena + m->loss_seed_offset, &seed, sizeof seed);
    float loss;
    m->forward(t->arena);
    memcpy(&loss, t->arena + m->loss_offset, sizeof loss);
    loss_sum += loss;
    m->backward(t->arena);
  }
  double loss = loss_sum / (double)c->accumulate;
  if (!isfinite(loss)) return loss; /* the caller stops before the update */
  if (c->clip_norm > 0) trc_clip_grad_norm(grad, m->param_count, c->clip_norm);
  trc_optimizer_step(&t->optim, m, c, t->arena, lr);
  return loss;
}

static int plan_steps(trainer *t, trc_error *err) {
  const trc_train_config *c = &t->opt.cfg;
  if (t->train.n < t->m->batch)
    return trc_fail_at(err, t->opt.data_dir, "%lld training examples, fewer than one batch of %lld",
                       (long long)t->train.n, (long long)t->m->batch);
  t->batches_per_epoch = t->train.n / t->m->batch;
  if (c->steps > 0) {
    t->total_steps = c->steps;
  } else {
    uint64_t batches;
    if (!trc_mul_ok((uint64_t)c->epochs, (uint64_t)t->batches_per_epoch, &batches) ||
        batches / (uint64_t)c->accumulate > INT64_MAX)
      return trc_fail(err, "--epochs %lld is too many", (long long)c->epochs);
    t->total_steps = (int64_t)(batches / (uint64_t)c->accumulate);
    if (t->total_steps < 1) t->total_steps = 1;
  }
  return 0;
}

static int setup_training(trainer *t, trc_error *err) {
  if (plan_steps(t, err) || trc_optimizer_init(&t->optim, &t->opt.cfg, t->m->param_count, err))
    return -1;
  t->perm = malloc((size_t)t->train.n * sizeof *t->perm);
  if (!t->perm) return trc_fail(err, "out of memory (%lld examples)", (long long)t->train.n);
  trc_shuffle(t->perm, t->train.n, t->opt.cfg.seed, 0);
  trc_progress_init(&t->progress, t->total_steps, t->opt.quiet);
  t->start = trc_now();
  return 0;
}

static int stop_on_bad_loss(trainer *t, int64_t step, double loss, trc_error *err) {
  trc_progress_break(&t->progress);
  return trc_fail(err,
                  "the training loss is %s at step %lld (epoch %.2f); stopping without "
                  "saving. A lower --lr or gradient clipping may help",
                  isnan(loss) ? "nan" : "infinite", (long long)step, epochs_done(t));
}

/* Evaluations due after step `done`: every epoch finished during it, every
 * eval_every_steps. Returns 1 when one ran. */
static int scheduled_eval(trainer *t, int64_t done, int64_t *epochs_seen) {
  const trc_train_config *c = &t->opt.cfg;
  int64_t finished = t->epoch + (t->batch_in_epoch == t->batches_per_epoch);
  int due = (c->eval_every_epoch && finished > *epochs_seen) ||
            (c->eval_every_steps > 0 && done % c->eval_every_steps == 0);
  *epochs_seen = finished;
  if (due && t->has_eval) evaluate(t, done);
  return due && t->has_eval;
}

static int train(trainer *t, trc_error *err) {
  const trc_train_config *c = &t->opt.cfg;
  int64_t epochs_seen = 0, last_eval = -1;
  for (int64_t step = 0; step < t->total_steps; step++) {
    double lr = trc_schedule_lr(c, step, t->total_steps);
    double t0 = trc_now(), loss = train_step(t, lr);
    t->train_seconds += trc_now() - t0;
    t->window_steps++;
    if (!isfinite(loss)) {
      trc_step_record rec = {step + 1, epochs_done(t), loss, lr, 0.0, trc_now() - t->start};
      trc_log_step(&t->log, &rec);
      return stop_on_bad_loss(t, step + 1, loss, err);
    }
    report_step(t, step + 1, loss, lr);
    if (scheduled_eval(t, step + 1, &epochs_seen)) last_eval = step + 1;
  }
  if (t->has_eval && last_eval != t->total_steps) evaluate(t, t->total_steps);
  trc_progress_break(&t->progress);
  if (!t->opt.quiet)
    fprintf(stderr, "trained %lld steps (%.2f epochs) in %.1f s, %.0f examples/s\n",
            (long long)t->total_steps, epochs_done(t), trc_now() - t->start,
            t->train_seconds > 0 ? (double)t->total_steps * (double)t->m->batch *
                                       (double)c->accumulate / t->train_seconds
                                 : 0.0);
  return 0;
}

/* ---- the whole run ---- */

static int prepare_weights(trainer *t, trc_error *err) {
  if (t->opt.init_path) return trc_load_weights(t->m, t->arena, t->opt.init_path, err);
  trc_init_params(t->m, t->arena, t->opt.cfg.seed);
  return 0;
}

static int save_weights(trainer *t, trc_error *err) {
  if (!t->opt.save_path) return 0;
  if (trc_save_weights(t->m, t->arena, t->opt.save_path, err)) return -1;
  if (!t->opt.quiet) fprintf(stderr, "saved weights to %s\n", t->opt.save_path);
  return 0;
}

/* --sample: generated text on stdout, after the prompt. */
static int sample(trainer *t, trc_error *err) {
  if (t->opt.sample == 0) return 0;
  const char *prompt = t->opt.prompt && t->opt.prompt[0] ? t->opt.prompt : "\n";
  return trc_sample(t->m, t->arena, (const unsigned char *)prompt, strlen(prompt), t->opt.sample,
                    t->opt.temperature, t->opt.cfg.seed, stdout, err);
}

/* Everything after the flags; returns an exit status. */
static int run(trainer *t, trc_error *err) {
  const trc_model *m = t->m;
  if (trc_model_check(m, err)) return EXIT_FAILURE;
  if (!(t->arena = trc_arena_alloc(m->arena_bytes, err)) || prepare_weights(t, err))
    return EXIT_FAILURE;
  if (t->opt.gradcheck) {
    int rc = trc_gradcheck(m, t->arena, t->opt.cfg.seed, stdout, err);
    return rc < 0 ? EXIT_FAILURE : rc;
  }
  if (t->opt.dump_path)
    return trc_dump_step(m, t->arena, t->opt.data_dir, t->opt.cfg.seed, t->opt.dump_path, err)
               ? EXIT_FAILURE
               : EXIT_SUCCESS;
  if ((t->opt.save_path && trc_check_can_create(t->opt.save_path, err)) || load_data(t, err) ||
      trc_evaluator_init(&t->evaluator, m, err) || trc_log_open(&t->log, t->opt.log_path, err))
    return EXIT_FAILURE;
  int training = !(t->opt.steps_given && t->opt.cfg.steps == 0);
  if (training && (setup_training(t, err) || train(t, err))) return EXIT_FAILURE;
  if (!training && t->has_eval) evaluate(t, 0);
  if (save_weights(t, err)) return EXIT_FAILURE;
  return sample(t, err) ? EXIT_FAILURE : EXIT_SUCCESS;
}

static void teardown(trainer *t) {
  free(t->perm);
  trc_log_close(&t->log);
  trc_evaluator_free(&t->evaluator);
  trc_optimizer_free(&t->optim);
  trc_dataset_free(&t->train);
  trc_dataset_free(&t->eval);
  trc_dataset_free(&t->eval_file);
  trc_dataset_free(&t->data);
  trc_arena_free(t->arena);
}

static const char *program_name(const char *argv0) {
  const char *slash = argv0 ? strrchr(argv0, '/') : NULL;
  return slash ? slash + 1 : argv0 ? argv0 : "trainer";
}

int trc_main(const trc_model *m, int argc, char **argv) {
  trainer t;
  trc_error err;
  memset(&t, 0, sizeof t);
  trc_error_clear(&err);
  t.m = m;
  t.prog = program_name(argc > 0 ? argv[0] : NULL);
  if (trc_parse_args(m, argc, argv, &t.opt, &err)) {
    trc_report(&err);
    fprintf(stderr, "try '%s --help'\n", t.prog);
    return EXIT_USAGE;
  }
  if (t.opt.help) {
    trc_print_usage(m, t.prog, stdout);
    return EXIT_SUCCESS;
  }
  if (t.opt.version) {
    printf("%s: trainer for model '%s', trainc runtime %s\n", t.prog, m->name, TRC_RUNTIME_VERSION);
    return EXIT_SUCCESS;
  }
  int rc = run(&t, &err);
  if (rc != EXIT_SUCCESS && err.msg[0]) trc_report(&err);
  teardown(&t);
  return rc;
}
