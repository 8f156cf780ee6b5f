/* sync.c — keeping the ranks together: gradient averaging (synchronous data
 * parallelism), parameter averaging every `local_sgd` steps (LocalSGD), the
 * optional Nesterov outer step on the averaged delta (DiLoCo), and the
 * counters the log reports.
 *
 * Every average is ONE all-reduce over one contiguous block: the arena's
 * parameter (or gradient) region itself, or, when the optimizer state is
 * averaged too, a staging buffer [parameters | state...] allocated once —
 * except gradients under overlap, which go as the compiler's buckets
 * (contiguous pieces of the region), each started when backward has
 * finished it. With two ranks every element is one sum a + b either way, so
 * the buckets give the very same bits. */
#include "rt_train.h"
#include "io/rt_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int alloc_floats(float **p, uint64_t n, trc_error *err) {
  *p = calloc((size_t)(n ? n : 1), sizeof(float));
  return *p ? 0 : trc_fail(err, "out of memory (synchronization buffers)");
}

/* The optimizer state arrays averaged with the parameters (m, then v). */
static int state_arrays(const trc_optimizer *opt, float **arrays) {
  int n = 0;
  if (opt->m) arrays[n++] = opt->m;
  if (opt->v) arrays[n++] = opt->v;
  return n;
}

int trc_sync_init(trc_sync *s, const trc_train_config *c, const trc_model *m, const char *arena,
                  const trc_optimizer *opt, trc_error *err) {
  memset(s, 0, sizeof *s);
  s->model = m;
  s->ranks = trc_comm_size();
  s->count = m->trained_count; /* frozen parameters never change: nothing to average */
  float *arrays[2];
  uint64_t staged =
      c->sync_optimizer_state && s->ranks > 1 ? (uint64_t)(1 + state_arrays(opt, arrays)) : 0;
  if ((c->outer_optimizer && (alloc_floats(&s->anchor, s->count, err) ||
                              alloc_floats(&s->momentum, s->count, err))) ||
      (staged > 1 && alloc_floats(&s->staging, staged * s->count, err)))
    return -1;
  if (s->anchor) memcpy(s->anchor, arena + m->param_offset, s->count * sizeof(float));
  return 0;
}

void trc_sync_free(trc_sync *s) {
  free(s->anchor);
  free(s->momentum);
  free(s->staging);
  s->anchor = s->momentum = s->staging = NULL;
}

int trc_sync_gradient_step(const trc_train_config *c, int64_t step) {
  return c->sync_gradients || step < c->local_sgd_warmup;
}

int trc_sync_due(const trc_train_config *c, int64_t done) {
  return !trc_sync_gradient_step(c, done - 1) && (done - c->local_sgd_warmup) % c->local_sgd == 0;
}

/* Sums `n` floats over the ranks, counting the traffic. */
static void allreduce_counted(trc_sync *s, float *buf, uint64_t n) {
  double t0 = trc_now();
  trc_comm_allreduce_f32(buf, n);
  s->seconds += trc_now() - t0;
  s->syncs++;
  s->bytes += n * sizeof(float);
}

static void divide(float *x, uint64_t n, int ranks) {
  const float r = (float)ranks;
  for (uint64_t i = 0; i < n; i++) x[i] /= r;
}

/* One rank's NaN or infinity would reach every rank through the all-reduce,
 * and rank 0's saved weights with it: the job ends before this sync (the
 * other ranks wait in it until MPI_Abort ends them too). values[0..count)
 * are the block's floats [first, first + count). */
static void stop_unless_finite_range(const trc_sync *s, const float *values, uint64_t first,
                                     uint64_t count, const char *what) {
  trc_error err;
  trc_error_clear(&err);
  if (trc_check_range_finite(s->model, values, first, count, what, &err) == 0) return;
  fprintf(stderr, "trainer: error: rank %d: %s before sync %lld; stopping every rank so that "
                  "it reaches none of them\n",
          trc_comm_rank(), err.msg, (long long)s->syncs + 1);
  trc_comm_abort(1);
}

static void stop_unless_finite(const trc_sync *s, const float *block, const char *what) {
  stop_unless_finite_range(s, block, 0, s->count, what);
}

void trc_sync_stop_unless_finite(const trc_sync *s, const float *values, uint64_t first,
                                 uint64_t count, trc_check_what what) {
  static const char *const names[] = {[TRC_CHECK_PARAMETERS] = "parameter",
                                      [TRC_CHECK_GRADIENTS] = "the gradient of parameter",
                                      [TRC_CHECK_STATE] = "the optimizer state of parameter"};
  stop_unless_finite_range(s, values, first, count, names[what]);
}

void trc_sync_gradients(trc_sync *s, float *grad) {
  if (s->ranks == 1) return;
  stop_unless_finite(s, grad, "the gradient of parameter");
  allreduce_counted(s, grad, s->count);
}

void trc_sync_gradients_start(trc_sync *s, float *bucket, uint64_t first, uint64_t n) {
  stop_unless_finite_range(s, bucket, first, n, "the gradient of parameter");
  double t0 = trc_now();
  trc_comm_iallreduce_f32(bucket, n);
  s->seconds += trc_now() - t0;
  s->bytes += n * sizeof(float);
}

void trc_sync_gradients_wait(trc_sync *s) {
  double t0 = trc_now();
  trc_comm_wait_all();
  s->seconds += trc_now() - t0;
  s->syncs++;
}

trc_outer_scalars trc_sync_outer_scalars(const trc_train_config *c) {
  return (trc_outer_scalars){.mu = (float)c->outer_momentum,
                             .keep = (float)(1.0 - c->outer_lr),
                             .push = (float)(c->outer_lr * c->outer_momentum)};
}

/* DiLoCo's outer step on the average x (trc_outer_element, trainc.h). */
static void outer_step(trc_sync *s, const trc_train_config *c, float *x) {
  const trc_outer_scalars o = trc_sync_outer_scalars(c);
  for (uint64_t i = 0; i < s->count; i++)
    trc_outer_element(&x[i], &s->anchor[i], &s->momentum[i], o);
}

static void average_with_state(trc_sync *s, float *params, trc_optimizer *opt) {
  float *arrays[3] = {params};
  int n = 1 + state_arrays(opt, arrays + 1);
  for (int a = 1; a < n; a++) stop_unless_finite(s, arrays[a], "the optimizer state of parameter");
  for (int a = 0; a < n; a++) memcpy(s->staging + a * s->count, arrays[a], s->count * sizeof(float));
  allreduce_counted(s, s->staging, (uint64_t)n * s->count);
  divide(s->staging, (uint64_t)n * s->count, s->ranks);
  for (int a = 0; a < n; a++) memcpy(arrays[a], s->staging + a * s->count, s->count * sizeof(float));
}

int trc_sync_changes_parameters(const trc_sync *s) {
  return s->ranks > 1 || s->staging || s->anchor;
}

/* With one rank the average is the rank's own values: only the outer step
 * remains. */

void trc_sync_parameters(trc_sync *s, const trc_train_config *c, float *params,
                         trc_optimizer *opt) {
  if (s->ranks > 1) stop_unless_finite(s, params, "parameter");
  if (s->staging) {
    average_with_state(s, params, opt);
  } else if (s->ranks > 1) {
    allreduce_counted(s, params, s->count);
    divide(params, s->count, s->ranks);
  }
  if (s->anchor) outer_step(s, c, params);
  if (trc_sync_changes_parameters(s)) trc_bf16_weights_changed();
}

int trc_ranks_min_max_n(const int64_t *mine, int n, int64_t *min, int64_t *max, trc_error *err) {
  int ranks = trc_comm_size(), rank = trc_comm_rank();
  double *all = calloc((size_t)ranks * (size_t)n, sizeof *all); /* one-hot: the sum gathers */
  if (!all) return trc_fail(err, "out of memory");
  for (int i = 0; i < n; i++) all[(size_t)rank * n + i] = (double)mine[i];
  trc_comm_allreduce_f64(all, (uint64_t)ranks * (uint64_t)n);
  for (int i = 0; i < n; i++) {
    min[i] = max[i] = mine[i];
    for (int r = 0; r < ranks; r++) {
      int64_t v = (int64_t)all[(size_t)r * n + i];
      if (v < min[i]) min[i] = v;
      if (v > max[i]) max[i] = v;
    }
  }
  free(all);
  return 0;
}

int trc_ranks_min_max(int64_t mine, int64_t *min, int64_t *max, trc_error *err) {
  return trc_ranks_min_max_n(&mine, 1, min, max, err);
}

void trc_sync_restart_outer(trc_sync *s, const float *params) {
  if (s->anchor) memcpy(s->anchor, params, s->count * sizeof(float));
}
