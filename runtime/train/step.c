/* step.c — what the generated step() calls (trainc.h): the data of each
 * micro-batch, the optimizer math and the communication, with the run-time
 * settings (window, clip, sync mode) behind them. The structure of the step
 * is the generated code's; train.c's loop over steps builds a trc_step and
 * calls it. */
#include "rt_train.h"


static float *gradients(trc_step *s) { return (float *)(s->arena + s->model->grad_offset); }

char *trc_step_arena(trc_step *s) { return s->arena; }

int64_t trc_step_micro_batches(const trc_step *s) { return trc_step_window(s->plan, s->step); }

int trc_step_averages_gradients(const trc_step *s) {
  return trc_sync_gradient_step(s->cfg, s->step);
}

int trc_step_overlaps(const trc_step *s) { return s->overlap && s->ranks > 1; }

float trc_step_loss_seed(const trc_step *s) {
  if (s->labels_all >= 0) return s->labels_all > 0 ? 1.0f / (float)s->labels_all : 0.0f;
  int64_t ranks = trc_step_averages_gradients(s) ? s->ranks : 1;
  return 1.0f / (float)(trc_step_micro_batches(s) * ranks);
}

/* Dropout masks are keyed by (step, micro-batch, rank): the same on a
 * resumed run, distinct across ranks. */
void trc_step_micro_batch(trc_step *s, int64_t k) {
  const trc_model *m = s->model;
  uint64_t micro_batch =
      ((uint64_t)s->step * (uint64_t)s->cfg->accumulate + (uint64_t)k) * (uint64_t)s->ranks +
      (uint64_t)s->rank;
  trc_set_mode(m, s->arena, trc_rng_key(s->cfg->seed, TRC_STREAM_DROPOUT, micro_batch), 1);
  trc_dataset_gather(s->train, m, trc_step_rows(s->plan, s->step, k), m->batch, s->arena);
}

/* A pass over the region only when the last update did not leave it zero
 * (the first step, or after a step that stopped before its update). */
void trc_step_zero_gradients(trc_step *s) {
  if (!s->optim->gradients_zero) memset(gradients(s), 0, s->model->trained_count * sizeof(float));
  s->optim->gradients_zero = 0;
}

void trc_step_bucket_ready(trc_step *s, uint64_t first, uint64_t count) {
  trc_sync_gradients_start(s->sync, gradients(s) + first, first, count);
}

void trc_step_wait_gradients(trc_step *s) { trc_sync_gradients_wait(s->sync); }

void trc_step_allreduce_gradients(trc_step *s) { trc_sync_gradients(s->sync, gradients(s)); }

/* The norm before clipping is kept for the log (grad_norm), clipped or not;
 * the update applies the clipping factor. Without clipping the norm is
 * summed only for the steps the log records: it is a pass over every
 * gradient (GPT-2 124M: 18 ms of a 400 ms bf16 step). */
void trc_step_clip_gradients(trc_step *s) {
  if (!s->wants_norm) return;
  s->grad_norm = trc_grad_norm(gradients(s), s->model->trained_count);
  s->grad_scale = trc_clip_scale(s->grad_norm, s->cfg->clip_norm);
}

void trc_step_update(trc_step *s) {
  trc_optimizer_step(s->optim, s->model, s->cfg, s->arena, s->lr, s->grad_scale);
}

int trc_step_ends_round(const trc_step *s) { return trc_sync_due(s->cfg, s->step + 1); }

/* A device's parameters come to the host only when the average needs them. */
void trc_step_average_parameters(trc_step *s) {
  const int changes = trc_sync_changes_parameters(s->sync);
  if (changes) trc_device_host_current(s->model, s->arena, s->optim);
  trc_sync_parameters(s->sync, s->cfg, (float *)(s->arena + s->model->param_offset), s->optim);
  if (changes) trc_device_host_changed(s->model);
  s->params_averaged = 1;
}

trc_update_scalars trc_step_update_scalars(trc_step *s) {
  return trc_optimizer_scalars(s->optim, s->cfg, s->lr);
}

void trc_step_optimizer_state(trc_step *s, float **m, float **v) {
  *m = s->optim->m, *v = s->optim->v;
}

void trc_step_set_grad_norm(trc_step *s, double norm) { s->grad_norm = norm; }

int trc_step_averages_with_state(const trc_step *s) { return s->sync->staging != NULL; }

void trc_step_outer_state(trc_step *s, float **anchor, float **momentum) {
  *anchor = s->sync->anchor, *momentum = s->sync->momentum;
}

trc_outer_scalars trc_step_outer_scalars(const trc_step *s) {
  return trc_sync_outer_scalars(s->cfg);
}

void trc_step_parameters_averaged(trc_step *s) { s->params_averaged = 1; }

void trc_step_device_synced(trc_step *s, uint64_t floats, double seconds) {
  s->sync->syncs++;
  s->sync->bytes += floats * sizeof(float);
  s->sync->seconds += seconds;
}

void trc_step_stop_unless_finite(trc_step *s, const float *values, uint64_t first,
                                 uint64_t count, trc_check_what what) {
  trc_sync_stop_unless_finite(s->sync, values, first, count, what);
}

void trc_device_host_current(const trc_model *m, char *arena, const trc_optimizer *o) {
  if (m->device && m->device->host_current) m->device->host_current(arena, o->m, o->v);
}

void trc_device_host_changed(const trc_model *m) {
  if (m->device && m->device->host_changed) m->device->host_changed();
}
