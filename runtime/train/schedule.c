/* schedule.c — learning-rate schedules, as Hugging Face's
 * get_{constant,linear,cosine}_schedule_with_warmup: step s (0-based) of
 * `total` gets lr*s/warmup during warm-up (so the first step's lr is 0 when
 * warmup > 0), then decays from lr to min_lr, reaching min_lr at s = total. */
#include "rt_train.h"

#include <math.h>

#define PI 3.14159265358979323846

double trc_schedule_lr(const trc_train_config *c, int64_t step, int64_t total) {
  if (step < c->warmup) return c->lr * (double)step / (double)c->warmup;
  if (c->schedule == TRC_SCHED_CONSTANT || total <= c->warmup) return c->lr;
  double progress = (double)(step - c->warmup) / (double)(total - c->warmup);
  if (progress > 1.0) progress = 1.0;
  double factor =
      c->schedule == TRC_SCHED_LINEAR ? 1.0 - progress : 0.5 * (1.0 + cos(PI * progress));
  return c->min_lr + (c->lr - c->min_lr) * factor;
}
