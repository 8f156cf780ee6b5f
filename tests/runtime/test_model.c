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
  test_arena();
  return test_finish("test_model");
}
