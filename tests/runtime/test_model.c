/* test_model.c — the descriptor check that guards the runtime against a
 * generated trc_model that lies, and the arena's alignment and zeroing. */
#include "test_util.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include <stdint.h>

static trc_input inputs[2];
static trc_param params[1];
static trc_model model;

static void nothing(char *arena) {
  (void)arena;
}

static void no_backward(char *arena, trc_step *step) {
  (void)arena, (void)step;
}

static double no_step(trc_step *step) {
  (void)step;
  return 0.0;
}

/* A consistent descriptor: x f32[4, 3], y i32[4] < 3, W f32[3, 3]. */
static void reset(void) {
  inputs[0] = (trc_input){"x", TRC_F32, 2, {4, 3}, 256, 12, 0};
  inputs[1] = (trc_input){"y", TRC_I32, 1, {4}, 320, 4, 3};
  params[0] = (trc_param){"W", 2, {3, 3}, 0, 9, TRC_INIT_XAVIER, 1, 0, 3, 3, 1, 0, NULL, 0};
  model = (trc_model){.name = "m",
                      .batch = 4,
                      .arena_bytes = 512,
                      .param_offset = 0,
                      .param_count = 9, .trained_count = 9,
                      .grad_offset = 64,
                      .n_params = 1,
                      .params = params,
                      .n_inputs = 2,
                      .inputs = inputs,
                      .loss_offset = 128,
                      .loss_seed_offset = 132,
                      .has_predict = 1,
                      .predict_offset = 192,
                      .predict_classes = 3,
                      .predict_rows = 1,
                      .label_input = 1,
                      .token_input = -1,
                      .rng_key_offset = 136,
                      .training_offset = 144,
                      .forward = nothing,
                      .backward = no_backward,
                      .step = no_step,
                      .defaults = {.accumulate = 1, .epochs = 1, .log_every = 1, .local_sgd = 1}};
}

static void test_check(void) {
  trc_error err;
  reset();
  CHECK(trc_model_check(&model, &err) == 0);
  params[0].offset = 8;
  CHECK_FAILS_WITH(trc_model_check(&model, &err), err, "outside the parameter region");
  reset();
  params[0].dims[1] = 4;
  CHECK_FAILS_WITH(trc_model_check(&model, &err), err, "does not match its dims");
  reset();
  inputs[0].offset = 480;
  CHECK_FAILS_WITH(trc_model_check(&model, &err), err, "slot outside the arena");
  reset();
  inputs[0].example_bytes = 3;
  CHECK_FAILS_WITH(trc_model_check(&model, &err), err, "example_bytes");
  reset();
  model.label_input = 0;
  CHECK_FAILS_WITH(trc_model_check(&model, &err), err, "label_input");
  reset();
  model.token_input = 0;
  CHECK_FAILS_WITH(trc_model_check(&model, &err), err, "token_input");
  reset();
  model.rng_key_offset = 508;
  CHECK_FAILS_WITH(trc_model_check(&model, &err), err, "rng key");
  reset();
  model.grad_offset = 500;
  CHECK_FAILS_WITH(trc_model_check(&model, &err), err, "gradient region");
  reset();
  model.predict_classes = 100;
  CHECK_FAILS_WITH(trc_model_check(&model, &err), err, "predict outside");
  reset();
  model.defaults.accumulate = 0;
  CHECK_FAILS_WITH(trc_model_check(&model, &err), err, "accumulate");
  reset();
  params[0].fan_in = params[0].fan_out = 0;
  CHECK_FAILS_WITH(trc_model_check(&model, &err), err, "fan_in");
}

/* The chunked loss head on the descriptor above: x [4, 3] where the
 * logits were, w the parameter W [3, 3], the row stats [2, 4] at 352. */
static void reset_head(void) {
  reset();
  model.predict_head = 1;
  model.head_dim = 3;
  model.head_weight_offset = 0;
  model.head_stats_offset = 352;
}

static void test_check_head(void) {
  trc_error err;
  reset_head();
  CHECK(trc_model_check(&model, &err) == 0);
  model.head_stats_offset = 488; /* 32 bytes from 488 pass the arena's 512 */
  CHECK_FAILS_WITH(trc_model_check(&model, &err), err, "row stats outside");
  model.head_stats_offset = 354;
  CHECK_FAILS_WITH(trc_model_check(&model, &err), err, "row stats outside");
  reset_head();
  model.head_weight_offset = 480;
  CHECK_FAILS_WITH(trc_model_check(&model, &err), err, "weight outside");
  reset_head();
  model.head_dim = 40;
  CHECK_FAILS_WITH(trc_model_check(&model, &err), err, "x outside");
  model.head_dim = 0;
  CHECK_FAILS_WITH(trc_model_check(&model, &err), err, "head_dim");
  reset_head();
  model.has_predict = 0;
  model.label_input = -1;
  CHECK_FAILS_WITH(trc_model_check(&model, &err), err, "needs predict");
}

/* Row 1 of two predict rows, 3 classes: stored, or the head's x [2, 2]
 * times w(c, k) = {{1, 2}, {3, 4}, {5, 6}} in either layout. */
static void test_predict_row(void) {
  float arena[32] = {0}, logits[3];
  const float x[4] = {0.5f, 1.0f, 2.0f, -1.0f};
  const float w_vd[6] = {1, 2, 3, 4, 5, 6}, w_dv[6] = {1, 3, 5, 2, 4, 6};
  const float stored[6] = {9, 9, 9, 7.0f, -1.5f, 0.25f};
  trc_model m = {.batch = 1, .has_predict = 1, .predict_offset = 0, .predict_classes = 3,
                 .predict_rows = 2, .predict_head = 1, .head_dim = 2, .head_weight_offset = 64};
  memcpy(arena, x, sizeof x);
  memcpy(arena + 16, w_vd, sizeof w_vd);
  m.head_w_vd = 1;
  trc_predict_row(&m, (const char *)arena, 1, logits);
  CHECK(logits[0] == 0.0f && logits[1] == 2.0f && logits[2] == 4.0f);
  memcpy(arena + 16, w_dv, sizeof w_dv);
  m.head_w_vd = 0;
  trc_predict_row(&m, (const char *)arena, 1, logits);
  CHECK(logits[0] == 0.0f && logits[1] == 2.0f && logits[2] == 4.0f);
  trc_predict_row(&m, (const char *)arena, 0, logits);
  CHECK(logits[0] == 2.5f && logits[1] == 5.5f && logits[2] == 8.5f);
  memcpy(arena, stored, sizeof stored);
  m.predict_head = 0;
  trc_predict_row(&m, (const char *)arena, 1, logits);
  CHECK(memcmp(logits, stored + 3, sizeof logits) == 0);
}

static void test_arena(void) {
  trc_error err;
  char *small = trc_arena_alloc(1000, &err), *large = trc_arena_alloc(5u << 20, &err);
  CHECK(small && (uintptr_t)small % 64 == 0);
  CHECK(large && (uintptr_t)large % (2u << 20) == 0);
  int zero = 1;
  for (size_t i = 0; i < (5u << 20) && large; i += 4096) zero &= large[i] == 0;
  CHECK(zero && small[999] == 0);
#if defined(__SANITIZE_ADDRESS__) /* the bytes past an arena are poisoned */
  CHECK(__asan_address_is_poisoned(small + 1000) && !__asan_address_is_poisoned(small + 999));
  CHECK(__asan_address_is_poisoned(large + (5u << 20)) &&
        !__asan_address_is_poisoned(large + (5u << 20) - 1));
#endif
  trc_arena_free(small);
  trc_arena_free(large);
}

int main(void) {
  test_check();
  test_check_head();
  test_predict_row();
  test_arena();
  return test_finish("test_model");
}
