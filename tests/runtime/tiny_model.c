/* tiny_model.c — a trainer written by hand the way trainc generates one: a
 * trc_model over one arena, its forward and backward, and main() calling
 * trc_main. The model: x f32[B, 8] -> linear 16 -> relu -> linear 4 ->
 * cross-entropy against y i32[B] in [0, 4).
 *
 * Built twice: tiny_trainer, and tiny_trainer_broken with
 * -DTINY_BROKEN_BACKWARD, whose backward forgets the relu mask, so the tests
 * can show that --gradcheck fails on a wrong backward rule. With MPI, a third
 * time: tiny_trainer_mpi (-DTINY_MPI), whose backward can be told to make a
 * NaN gradient on one rank. Its step() is the generated one's without
 * gradient buckets: averaged gradients are all-reduced after the last
 * backward.
 *
 * TINY_RAISE=SIGNO,K,N raises signal SIGNO N times inside the K-th step()
 * of the process: a signal in the middle of a step, at a known step, for
 * the tests of stopping on a signal (stop.sh). */
#include "trainc_rt.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 32, D = 8, H = 16, C = 4 };

/* Arena layout in bytes; every region 64-byte aligned. */
#define ALIGN(x) (((x) + 63) / 64 * 64)
#define OFF_W1 0
#define OFF_B1 (OFF_W1 + 4 * D * H)
#define OFF_W2 (OFF_B1 + 4 * H)
#define OFF_B2 (OFF_W2 + 4 * H * C)
#define N_PARAMS (D * H + H + H * C + C)
#define OFF_GRAD ALIGN(4 * N_PARAMS)
#define OFF_X ALIGN(OFF_GRAD + 4 * N_PARAMS)
#define OFF_Y ALIGN(OFF_X + 4 * B * D)
#define OFF_Z1 ALIGN(OFF_Y + 4 * B)      /* pre-activation [B, H] */
#define OFF_H1 ALIGN(OFF_Z1 + 4 * B * H) /* relu(z1) */
#define OFF_LOGITS ALIGN(OFF_H1 + 4 * B * H)
#define OFF_PROBS ALIGN(OFF_LOGITS + 4 * B * C)
#define OFF_DLOGITS ALIGN(OFF_PROBS + 4 * B * C)
#define OFF_DH ALIGN(OFF_DLOGITS + 4 * B * C)
#define OFF_LOSS ALIGN(OFF_DH + 4 * B * H)
#define OFF_SEED (OFF_LOSS + 4)
#define OFF_RNG_KEY (OFF_LOSS + 8) /* unused: the model has no dropout */
#define OFF_TRAINING (OFF_LOSS + 16)
#define ARENA_BYTES ALIGN(OFF_TRAINING + 4)

#define F(arena, off) ((float *)((arena) + (off)))

/* out[r, j] = sum_k in[r, k] * w[k, j] + b[j] */
static void linear(const float *in, const float *w, const float *b, float *out, int rows, int n_in,
                   int n_out) {
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < n_out; j++) {
      float s = b[j];
      for (int k = 0; k < n_in; k++) s += in[r * n_in + k] * w[k * n_out + j];
      out[r * n_out + j] = s;
    }
}

/* dw[k, j] += sum_r in[r, k] * dout[r, j];  db[j] += sum_r dout[r, j] */
static void linear_backward_params(const float *in, const float *dout, float *dw, float *db,
                                   int rows, int n_in, int n_out) {
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < n_out; j++) {
      db[j] += dout[r * n_out + j];
      for (int k = 0; k < n_in; k++) dw[k * n_out + j] += in[r * n_in + k] * dout[r * n_out + j];
    }
}

static void forward(char *a) {
  const float *x = F(a, OFF_X);
  const int32_t *y = (const int32_t *)(a + OFF_Y);
  float *z1 = F(a, OFF_Z1), *h1 = F(a, OFF_H1), *logits = F(a, OFF_LOGITS),
        *probs = F(a, OFF_PROBS);
  linear(x, F(a, OFF_W1), F(a, OFF_B1), z1, B, D, H);
  for (int i = 0; i < B * H; i++) h1[i] = z1[i] > 0 ? z1[i] : 0;
  linear(h1, F(a, OFF_W2), F(a, OFF_B2), logits, B, H, C);
  float loss = 0;
  for (int r = 0; r < B; r++) {
    const float *l = logits + r * C;
    float max = l[0], sum = 0;
    for (int c = 1; c < C; c++) max = l[c] > max ? l[c] : max;
    for (int c = 0; c < C; c++) sum += (probs[r * C + c] = expf(l[c] - max));
    for (int c = 0; c < C; c++) probs[r * C + c] /= sum;
    loss += logf(sum) + max - l[y[r]];
  }
  *F(a, OFF_LOSS) = loss / B;
}

static void backward(char *a, trc_step *s) {
  (void)s; /* no gradient buckets */
  const float seed = *F(a, OFF_SEED);
  const int32_t *y = (const int32_t *)(a + OFF_Y);
  const float *probs = F(a, OFF_PROBS), *z1 = F(a, OFF_Z1), *w2 = F(a, OFF_W2);
  float *dlogits = F(a, OFF_DLOGITS), *dh = F(a, OFF_DH), *grad = F(a, OFF_GRAD);
  for (int r = 0; r < B; r++)
    for (int c = 0; c < C; c++)
      dlogits[r * C + c] = (probs[r * C + c] - (c == y[r] ? 1.0f : 0.0f)) * seed / B;
  linear_backward_params(F(a, OFF_H1), dlogits, grad + OFF_W2 / 4, grad + OFF_B2 / 4, B, H, C);
  for (int r = 0; r < B; r++)
    for (int k = 0; k < H; k++) {
      float s = 0;
      for (int c = 0; c < C; c++) s += dlogits[r * C + c] * w2[k * C + c];
#ifdef TINY_BROKEN_BACKWARD
      dh[r * H + k] = s; /* the bug: relu's mask forgotten */
      (void)z1;
#else
      dh[r * H + k] = z1[r * H + k] > 0 ? s : 0;
#endif
    }
  linear_backward_params(F(a, OFF_X), dh, grad + OFF_W1 / 4, grad + OFF_B1 / 4, B, D, H);
#ifdef TINY_MPI
  /* a rank started with TINY_NAN_GRADIENT set gets one NaN gradient, its
   * loss staying finite: the sync must stop it reaching the other ranks */
  if (getenv("TINY_NAN_GRADIENT")) grad[OFF_B2 / 4 + 1] = NAN;
#endif
}

/* TINY_RAISE (above), when this is the step it names. */
static void raise_if_asked(void) {
  static long calls;
  const char *spec = getenv("TINY_RAISE");
  int signo, times;
  long at;
  calls++;
  if (spec && sscanf(spec, "%d,%ld,%d", &signo, &at, &times) == 3 && calls == at)
    for (int i = 0; i < times; i++) raise(signo);
}

static double step(trc_step *s) {
  raise_if_asked();
  char *a = trc_step_arena(s);
  const int64_t window = trc_step_micro_batches(s);
  const float seed = trc_step_loss_seed(s);
  double loss_sum = 0.0;
  memset(a + OFF_GRAD, 0, 4 * N_PARAMS);
  for (int64_t k = 0; k < window; k++) {
    trc_step_micro_batch(s, k);
    *F(a, OFF_SEED) = seed;
    forward(a);
    loss_sum += *F(a, OFF_LOSS);
    backward(a, NULL);
  }
  if (trc_step_averages_gradients(s)) trc_step_allreduce_gradients(s);
  const double loss = loss_sum / (double)window;
  if (!isfinite(loss)) return loss;
  trc_step_clip_gradients(s);
  trc_step_update(s);
  if (trc_step_ends_round(s)) trc_step_average_parameters(s);
  return loss;
}

static const trc_input inputs[] = {
    {"x", TRC_F32, 2, {B, D}, OFF_X, 4 * D, 0},
    {"y", TRC_I32, 1, {B}, OFF_Y, 4, C},
};

static const trc_param params[] = {
    {"fc1.weight", 2, {D, H}, OFF_W1, D *H, TRC_INIT_HE, 1, 0, D, H, 1, 0, NULL, 0},
    {"fc1.bias", 1, {H}, OFF_B1, H, TRC_INIT_ZEROS, 0, 0, 0, 0, 0, 0, NULL, 0},
    {"fc2.weight", 2, {H, C}, OFF_W2, H *C, TRC_INIT_XAVIER, 1, 0, H, C, 1, 0, NULL, 0},
    {"fc2.bias", 1, {C}, OFF_B2, C, TRC_INIT_ZEROS, 0, 0, 0, 0, 0, 0, NULL, 0},
};

static const trc_model model = {
    .name = "tiny_mlp",
    .source = "tests/runtime/tiny_model.c",
    .batch = B,
    .arena_bytes = ARENA_BYTES,
    .param_offset = 0,
    .param_count = N_PARAMS, .trained_count = N_PARAMS,
    .grad_offset = OFF_GRAD,
    .n_params = 4,
    .params = params,
    .n_inputs = 2,
    .inputs = inputs,
    .loss_offset = OFF_LOSS,
    .loss_seed_offset = OFF_SEED,
    .loss_kind = TRC_LOSS_CROSS_ENTROPY,
    .has_predict = 1,
    .predict_offset = OFF_LOGITS,
    .predict_classes = C,
    .predict_rows = 1,
    .label_input = 1,
    .token_input = -1,
    .rng_key_offset = OFF_RNG_KEY,
    .training_offset = OFF_TRAINING,
    .forward = forward,
    .backward = backward,
    .step = step,
    .defaults = {.accumulate = 2,
                 .epochs = 6,
                 .optimizer = TRC_ADAMW,
                 .lr = 0.01,
                 .beta1 = 0.9,
                 .beta2 = 0.999,
                 .eps = 1e-8,
                 .weight_decay = 0.01,
                 .schedule = TRC_SCHED_COSINE,
                 .warmup = 10,
                 .min_lr = 0.0,
                 .clip_norm = 1.0,
                 .seed = 7,
                 .eval_every_epoch = 1,
                 .metrics = TRC_METRIC_LOSS | TRC_METRIC_ACCURACY | TRC_METRIC_F1,
                 .log_every = 10,
                 .validation = 0.2,
                 .local_sgd = 1},
};

int main(int argc, char **argv) {
  return trc_main(&model, argc, argv);
}
