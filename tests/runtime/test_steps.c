/* test_steps.c — the step schedule (runtime/train/steps.c) and the sync rounds
 * (sync.c): window sizes, every rank's rows, and when syncs fall; and the
 * gradients' norm summed only for a step that clips or is logged (step.c).
 * Internal pieces, so this test includes rt_train.h. */
#include "train/rt_train.h"
#include "test_util.h"

#include <stdlib.h>

static trc_step_plan make_plan(int64_t n, int64_t batch, int64_t acc, int rank, int ranks,
                               int64_t steps, int64_t epochs) {
  trc_step_plan p;
  trc_error err;
  trc_step_plan_spec spec = {n, batch, acc, rank, ranks, 11, steps, epochs};
  if (trc_step_plan_init(&p, &spec, &err)) {
    fprintf(stderr, "plan: %s\n", err.msg);
    exit(1);
  }
  return p;
}

/* 205 rows, batch 10, accumulate 3: 20 micro-batches, windows 3x6 + 2. */
static void test_windows(void) {
  trc_step_plan p = make_plan(205, 10, 3, 0, 1, 0, 2);
  CHECK(p.batches_per_epoch == 20 && p.steps_per_epoch == 7 && p.total_steps == 14);
  for (int64_t s = 0; s < p.total_steps; s++)
    CHECK(trc_step_window(&p, s) == (s % 7 == 6 ? 2 : 3));
  CHECK(trc_step_ends_epoch(&p, 7) && !trc_step_ends_epoch(&p, 6));
  CHECK_NEAR(trc_step_epochs(&p, 7), 1.0, 0);
  trc_step_plan_free(&p);
}

/* Two ranks: for every micro-batch, rank 0's and rank 1's rows are the two
 * halves of the same global batch of the epoch's order, so the ranks' rows
 * of an epoch are disjoint and the dropped rows are the order's tail. */
static void test_ranks_share_global_batches(void) {
  const int64_t n = 50, B = 4;
  trc_step_plan r0 = make_plan(n, B, 2, 0, 2, 0, 2), r1 = make_plan(n, B, 2, 1, 2, 0, 2);
  CHECK(r0.batches_per_epoch == 6 && r1.batches_per_epoch == 6 && r0.total_steps == 6);
  int64_t *order = malloc(n * sizeof *order);
  for (int64_t s = 0; s < r0.total_steps; s++) {
    int64_t epoch = s / r0.steps_per_epoch, first = s % r0.steps_per_epoch * 2;
    trc_shuffle(order, n, 11, (uint64_t)epoch);
    for (int64_t k = 0; k < trc_step_window(&r0, s); k++) {
      const int64_t *a = trc_step_rows(&r0, s, k), *b = trc_step_rows(&r1, s, k);
      for (int64_t i = 0; i < B; i++) {
        CHECK(a[i] == order[(first + k) * 2 * B + i]);
        CHECK(b[i] == order[(first + k) * 2 * B + B + i]);
      }
    }
  }
  free(order);
  trc_step_plan_free(&r0);
  trc_step_plan_free(&r1);
}

static void test_too_little_data(void) {
  trc_step_plan p;
  trc_error err;
  trc_step_plan_spec spec = {7, 4, 1, 0, 2, 11, 0, 1};
  CHECK_FAILS_WITH(trc_step_plan_init(&p, &spec, &err), err, "fewer than one batch of 8");
}

/* Warm-up 3 (gradients averaged), then a parameter sync every 4 steps. */
static void test_sync_rounds(void) {
  trc_train_config c = {.local_sgd = 4, .local_sgd_warmup = 3};
  for (int64_t step = 0; step < 12; step++) CHECK(trc_sync_gradient_step(&c, step) == (step < 3));
  for (int64_t done = 1; done <= 12; done++) CHECK(trc_sync_due(&c, done) == (done == 7 || done == 11));
  c.sync_gradients = 1, c.local_sgd = 1, c.local_sgd_warmup = 0;
  for (int64_t done = 1; done <= 4; done++) CHECK(trc_sync_gradient_step(&c, done - 1) && !trc_sync_due(&c, done));
}

/* trc_step_clip_gradients: a step that neither clips nor is logged keeps
 * grad_norm NaN and its scale 1; one that is logged gets the norm, one that
 * clips the norm and its factor. */
static void test_norm_only_when_wanted(void) {
  enum { N = 5000 };
  float *g = malloc(N * sizeof *g);
  for (int i = 0; i < N; i++) g[i] = 0.01f * (float)(1 + i % 5);
  trc_model m = {.grad_offset = 0, .trained_count = N};
  trc_train_config cfg = {.clip_norm = 0};
  trc_step s = {.model = &m, .arena = (char *)g, .cfg = &cfg, .grad_norm = NAN, .grad_scale = 1.0f};
  trc_step_clip_gradients(&s);
  CHECK(isnan(s.grad_norm) && s.grad_scale == 1.0f);
  s.wants_norm = 1;
  trc_step_clip_gradients(&s);
  CHECK(s.grad_norm == trc_grad_norm(g, N) && s.grad_scale == 1.0f);
  cfg.clip_norm = 0.1;
  trc_step_clip_gradients(&s);
  CHECK(s.grad_scale == trc_clip_scale(s.grad_norm, 0.1) && s.grad_scale < 1.0f);
  free(g);
}

int main(void) {
  test_windows();
  test_norm_only_when_wanted();
  test_ranks_share_global_batches();
  test_too_little_data();
  test_sync_rounds();
  return test_finish("test_steps");
}
