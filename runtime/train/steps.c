/* steps.c — the step schedule: which examples every optimizer step of every
 * rank trains on, as a pure function of the step number (so a resumed run
 * continues exactly where it stopped).
 *
 * Epoch e visits the training rows in the order trc_shuffle(seed, e), cut into
 * global batches of ranks*B rows; rank r's micro-batch j is the r-th B-slice
 * of global batch j (PyTorch's DistributedSampler, by blocks). A partial
 * global batch at the end of an epoch is dropped: the model's shapes fix B,
 * and every rank must run the same number of micro-batches. An optimizer step
 * is a window of `accumulate` micro-batches inside one epoch; the epoch's last
 * window holds what is left (batches_per_epoch mod accumulate, when not 0). */
#include "rt_train.h"

#include <stdlib.h>

int trc_step_plan_init(trc_step_plan *p, const trc_step_plan_spec *s, trc_error *err) {
  *p = (trc_step_plan){.batch = s->batch, .rank = s->rank, .ranks = s->ranks, .n = s->examples,
                       .accumulate = s->accumulate, .seed = s->seed, .perm_epoch = -1};
  int64_t global_batch = s->batch * s->ranks;
  if (s->examples < global_batch)
    return trc_fail(err, "%lld training examples, fewer than one batch of %lld%s",
                    (long long)s->examples, (long long)global_batch,
                    s->ranks > 1 ? " (batch x ranks)" : "");
  p->batches_per_epoch = s->examples / global_batch;
  p->steps_per_epoch = (p->batches_per_epoch + s->accumulate - 1) / s->accumulate;
  if (s->steps > 0) {
    p->total_steps = s->steps;
  } else {
    uint64_t total;
    if (!trc_mul_ok((uint64_t)s->epochs, (uint64_t)p->steps_per_epoch, &total) ||
        total > INT64_MAX)
      return trc_fail(err, "--epochs %lld is too many", (long long)s->epochs);
    p->total_steps = (int64_t)total;
  }
  p->perm = malloc((size_t)s->examples * sizeof *p->perm);
  if (!p->perm) return trc_fail(err, "out of memory (%lld examples)", (long long)s->examples);
  return 0;
}

void trc_step_plan_free(trc_step_plan *p) {
  free(p->perm);
  p->perm = NULL;
}

int64_t trc_step_window(const trc_step_plan *p, int64_t step) {
  int64_t first = step % p->steps_per_epoch * p->accumulate;
  int64_t left = p->batches_per_epoch - first;
  return left < p->accumulate ? left : p->accumulate;
}

const int64_t *trc_step_rows(trc_step_plan *p, int64_t step, int64_t k) {
  int64_t epoch = step / p->steps_per_epoch;
  if (epoch != p->perm_epoch) {
    trc_shuffle(p->perm, p->n, p->seed, (uint64_t)epoch);
    p->perm_epoch = epoch;
  }
  int64_t micro = step % p->steps_per_epoch * p->accumulate + k;
  return p->perm + (micro * p->ranks + p->rank) * p->batch;
}

double trc_step_epochs(const trc_step_plan *p, int64_t steps_done) {
  return (double)steps_done / (double)p->steps_per_epoch;
}

int trc_step_ends_epoch(const trc_step_plan *p, int64_t steps_done) {
  return steps_done % p->steps_per_epoch == 0;
}
