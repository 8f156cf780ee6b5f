/* test_optim.c — optimizers, clipping and LR schedules against values
 * worked out by hand (PyTorch's update rules; Hugging Face's schedules). */
#include "test_util.h"

static void test_sgd(void) {
  float p = 1.0f, g = 0.5f, buf = 0.0f;
  trc_sgd_hparams h = {0.1, 0.9, 0.01, 0};
  trc_sgd_update(&p, &g, 1.0f, &buf, 1, &h);
  CHECK_NEAR(p, 0.949, 1e-6); /* d = 0.5 + 0.01*1; buf = d; p -= 0.1*buf */
  CHECK_NEAR(buf, 0.51, 1e-6);
  trc_sgd_update(&p, &g, 1.0f, &buf, 1, &h);
  CHECK_NEAR(buf, 0.9 * 0.51 + 0.5 + 0.01 * 0.949, 1e-6);
  CHECK_NEAR(p, 0.949 - 0.1 * (0.9 * 0.51 + 0.5 + 0.01 * 0.949), 1e-6);

  p = 1.0f, buf = 0.0f, h.nesterov = 1;
  trc_sgd_update(&p, &g, 1.0f, &buf, 1, &h);
  CHECK_NEAR(p, 1 - 0.1 * (0.51 + 0.9 * 0.51), 1e-6);

  trc_sgd_hparams plain = {0.1, 0.0, 0.0, 0};
  p = 1.0f;
  trc_sgd_update(&p, &g, 1.0f, NULL, 1, &plain);
  CHECK_NEAR(p, 0.95, 1e-7);
}

static void test_adamw(void) {
  float p = 1.0f, g = 0.5f, m = 0.0f, v = 0.0f;
  trc_adamw_hparams h = {0.1, 0.9, 0.999, 1e-8, 0.01, 1};
  trc_adamw_update(&p, &g, 1.0f, &m, &v, 1, &h);
  /* p = 1*(1 - 0.1*0.01); m = 0.05; v = 2.5e-4; m/0.1 / (sqrt(v/0.001) + eps) = 1 */
  CHECK_NEAR(m, 0.05, 1e-8);
  CHECK_NEAR(v, 2.5e-4, 1e-10);
  CHECK_NEAR(p, 0.999 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-6);
}

/* Decay only where param->decay is 1; the step counter drives bias correction. */
static void test_optimizer_over_model(void) {
  static const trc_param params[] = {
      {"w", 1, {2}, 0, 2, TRC_INIT_ZEROS, 0, 0, 0, 0, 1, 0, NULL, 0},
      {"b", 1, {2}, 8, 2, TRC_INIT_ZEROS, 0, 0, 0, 0, 0, 0, NULL, 0},
  };
  trc_model m = {.name = "m",
                 .batch = 1,
                 .arena_bytes = 64,
                 .param_offset = 0,
                 .param_count = 4, .trained_count = 4,
                 .grad_offset = 32,
                 .n_params = 2,
                 .params = params};
  trc_train_config cfg = {
      .optimizer = TRC_ADAMW, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.5};
  float arena[16] = {2, 2, 2, 2};
  trc_optimizer opt;
  trc_error err;
  CHECK(trc_optimizer_init(&opt, &cfg, 4, &err) == 0);
  trc_optimizer_step(&opt, &m, &cfg, (char *)arena, 0.1f, 1.0f); /* zero gradients */
  CHECK_NEAR(arena[0], 2 * (1 - 0.1 * 0.5), 1e-6);
  CHECK_NEAR(arena[2], 2, 0);
  CHECK(opt.step == 1);

  /* the update zeroes each gradient it read: the next step adds into zeros */
  arena[8] = arena[11] = 0.5f;
  opt.gradients_zero = 0;
  trc_optimizer_step(&opt, &m, &cfg, (char *)arena, 0.1f, 1.0f);
  CHECK(arena[8] == 0 && arena[11] == 0 && opt.gradients_zero);
  CHECK(arena[3] < 2); /* b[1] moved: the gradient was read first */
  trc_optimizer_free(&opt);

  cfg.optimizer = TRC_SGD;
  cfg.momentum = 0.0;
  arena[0] = arena[2] = 2;
  CHECK(trc_optimizer_init(&opt, &cfg, 4, &err) == 0 && opt.m == NULL);
  trc_optimizer_step(&opt, &m, &cfg, (char *)arena, 0.1f, 1.0f);
  CHECK_NEAR(arena[0], 2 - 0.1 * 0.5 * 2, 1e-6);
  CHECK_NEAR(arena[2], 2, 0);
  trc_optimizer_free(&opt);
}

static void test_clip(void) {
  float g[2] = {3, 4};
  CHECK_NEAR(trc_grad_norm(g, 2), 5.0, 1e-12);
  CHECK(trc_clip_scale(5.0, 10.0) == 1.0f && trc_clip_scale(5.0, 0.0) == 1.0f);
  CHECK(trc_clip_scale(5.0, 1.0) == (float)(1.0 / (5.0 + 1e-6)));
}

/* The update's gradient scale is the same float as the gradient scaled in
 * place first (what clipping did before the update read it). */
static void test_update_scale(void) {
  const float scale = trc_clip_scale(7.3, 1.0), g = 0.37f, scaled = g * scale;
  trc_adamw_hparams adam = {0.1, 0.9, 0.999, 1e-8, 0.01, 3};
  float p1 = 0.5f, m1 = 0.02f, v1 = 0.003f, p2 = p1, m2 = m1, v2 = v1;
  trc_adamw_update(&p1, &g, scale, &m1, &v1, 1, &adam);
  trc_adamw_update(&p2, &scaled, 1.0f, &m2, &v2, 1, &adam);
  CHECK(p1 == p2 && m1 == m2 && v1 == v2 && p1 != 0.5f);
  trc_sgd_hparams sgd = {0.1, 0.9, 0.01, 1};
  float q1 = 0.5f, b1 = 0.1f, q2 = q1, b2 = b1, unscaled = 0.5f;
  trc_sgd_update(&q1, &g, scale, &b1, 1, &sgd);
  trc_sgd_update(&q2, &scaled, 1.0f, &b2, 1, &sgd);
  CHECK(q1 == q2 && b1 == b2);
  trc_sgd_update(&unscaled, &g, 1.0f, &(float){0.1f}, 1, &sgd);
  CHECK(unscaled != q1);
}

static void test_schedules(void) {
  trc_train_config c = {.lr = 1.0, .min_lr = 0.1, .warmup = 10, .schedule = TRC_SCHED_COSINE};
  CHECK_NEAR(trc_schedule_lr(&c, 0, 110), 0.0, 0);
  CHECK_NEAR(trc_schedule_lr(&c, 5, 110), 0.5, 1e-12);
  CHECK_NEAR(trc_schedule_lr(&c, 10, 110), 1.0, 1e-12);
  CHECK_NEAR(trc_schedule_lr(&c, 60, 110), 0.55, 1e-12);
  CHECK_NEAR(trc_schedule_lr(&c, 110, 110), 0.1, 1e-12);
  CHECK(trc_schedule_lr(&c, 109, 110) > 0.1 && trc_schedule_lr(&c, 109, 110) < 0.1005);
  c.schedule = TRC_SCHED_LINEAR;
  CHECK_NEAR(trc_schedule_lr(&c, 10, 110), 1.0, 1e-12);
  CHECK_NEAR(trc_schedule_lr(&c, 35, 110), 0.775, 1e-12);
  CHECK_NEAR(trc_schedule_lr(&c, 110, 110), 0.1, 1e-12);
  c.schedule = TRC_SCHED_CONSTANT;
  CHECK_NEAR(trc_schedule_lr(&c, 3, 110), 0.3, 1e-12);
  CHECK_NEAR(trc_schedule_lr(&c, 100, 110), 1.0, 0);
  c.warmup = 0;
  c.schedule = TRC_SCHED_COSINE;
  CHECK_NEAR(trc_schedule_lr(&c, 0, 100), 1.0, 1e-12);
  CHECK_NEAR(trc_schedule_lr(&c, 50, 100), 0.55, 1e-12);
}

int main(void) {
  test_sgd();
  test_adamw();
  test_optimizer_over_model();
  test_clip();
  test_update_scale();
  test_schedules();
  return test_finish("test_optim");
}
