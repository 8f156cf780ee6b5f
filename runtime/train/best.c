/* best.c — the best evaluation of a run (--load-best, --early-stopping), as
 * Hugging Face's Trainer keeps it: metric_for_best_model compared with its
 * best value so far (lower is better for eval_loss, higher for the others);
 * a strictly better value is the new best (with --load-best its weights are
 * copied aside); an evaluation that does not beat the best by more than the
 * threshold counts towards the patience of EarlyStoppingCallback, one that
 * does resets it. The counters and the best weights are part of the
 * resumable state (state.c), so a resumed run chooses and stops exactly as
 * an uninterrupted one. */
#include "rt_train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int trc_best_init(trc_best *b, const trc_options *o, uint64_t count, trc_error *err) {
  memset(b, 0, sizeof *b);
  b->metric = o->metric_for_best;
  b->patience = o->early_stopping;
  b->threshold = o->early_stopping_threshold;
  b->count = count;
  if (o->load_best && !(b->weights = (float *)trc_arena_alloc(count * sizeof(float), err)))
    return -1;
  return 0;
}

void trc_best_free(trc_best *b) {
  trc_arena_free((char *)b->weights);
  b->weights = NULL;
}

static int active(const trc_best *b) { return b->weights || b->patience > 0; }

/* How much better `value` is than the best so far (> 0: better). */
static double improvement(const trc_best *b, double value) {
  return b->metric == TRC_EVAL_LOSS ? b->value - value : value - b->value;
}

void trc_best_update(trc_best *b, const trc_eval_result *r, int64_t step, const float *params) {
  if (!active(b) || !(r->has >> b->metric & 1)) return;
  double value = r->value[b->metric];
  if (isnan(value)) return;
  int first = b->step == 0;
  double gain = first ? INFINITY : improvement(b, value);
  b->bad_evals = gain > b->threshold ? 0 : b->bad_evals + 1;
  if (!(gain > 0)) return;
  b->step = step;
  b->value = value;
  if (b->weights) memcpy(b->weights, params, b->count * sizeof(float));
}

int trc_best_stops(const trc_best *b) { return b->patience > 0 && b->bad_evals >= b->patience; }
