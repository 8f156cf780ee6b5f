/* test_optim_torch.c — SGD (plain, momentum, nesterov) and AdamW over several
 * steps against torch.optim on the same data (torch_optim_reference.py, run
 * by Debian's python). Skipped (exit 77) when torch is not installed. */
#include "test_util.h"

#include <stdint.h>
#include <stdlib.h>

#define N 4096
#define STEPS 6

typedef struct {
  const char *name;
  int adamw;
  trc_sgd_hparams sgd;
  trc_adamw_hparams adam;
} config;

static const config configs[] = {
    {"sgd", 0, .sgd = {0.1, 0.0, 0.0, 0}},
    {"sgd_momentum", 0, .sgd = {0.1, 0.9, 0.01, 0}},
    {"sgd_nesterov", 0, .sgd = {0.05, 0.8, 0.001, 1}},
    {"adamw", 1, .adam = {0.01, 0.9, 0.999, 1e-8, 0.01, 0}},
    {"adamw_nodecay", 1, .adam = {0.003, 0.8, 0.99, 1e-6, 0.0, 0}},
};

static float p0[N], grads[STEPS][N];

static void make_inputs(void) {
  uint64_t key = trc_rng_key(1, 2, 3);
  for (int i = 0; i < N; i++) p0[i] = (float)trc_rng_normal(key, i);
  for (int s = 0; s < STEPS; s++)
    for (int i = 0; i < N; i++) /* some tiny gradients, some large */
      grads[s][i] =
          (float)(trc_rng_normal(key, (uint64_t)(N * (s + 1) + i)) * (i % 7 == 0   ? 1e-4
                                                                      : i % 5 == 0 ? 10.0
                                                                                   : 1.0));
}

static void run_config(const config *c, float *p) {
  static float m[N], v[N];
  memcpy(p, p0, sizeof p0);
  memset(m, 0, sizeof m);
  memset(v, 0, sizeof v);
  trc_adamw_hparams adam = c->adam;
  for (int s = 0; s < STEPS; s++) {
    if (c->adamw) {
      adam.step = s + 1;
      trc_adamw_update(p, grads[s], 1.0f, m, v, N, &adam);
    } else {
      trc_sgd_update(p, grads[s], 1.0f, m, N, &c->sgd);
    }
  }
}

static void compare(const char *dir, const config *c) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.npy", dir, c->name);
  const trc_input in = {c->name, TRC_F32, 1, {1}, 0, 4, 0};
  unsigned char *data;
  int64_t rows;
  trc_error err;
  if (trc_input_load_file(path, &in, &data, &rows, &err) || rows != N) {
    fprintf(stderr, "%s: %s\n", path, err.msg);
    test_failures++;
    return;
  }
  static float ours[N];
  const float *ref = (const float *)data;
  run_config(c, ours);
  double worst = 0;
  for (int i = 0; i < N; i++) {
    /* relative to the values' scale: near zero, cancellation makes any
       rounding difference (torch's kernels fuse multiply-adds) look big */
    double diff = fabs((double)ours[i] - ref[i]) / fmax(1.0, fabs(ref[i]));
    if (diff > worst) worst = diff;
  }
  printf("%-14s max |ours - torch| / max(1, |torch|): %.3g\n", c->name, worst);
  CHECK(worst < 4e-6); /* a few float ulps; a wrong rule is off by >= 1e-4 */
  free(data);
}

int main(int argc, char **argv) {
  if (argc < 2 || !test_python_has("torch") || !test_python_has("numpy")) {
    printf("test_optim_torch: torch/numpy not available to %s; skipped\n", TEST_PYTHON);
    return TEST_SKIP;
  }
  char dir[512], path[1024], cmd[2048];
  test_make_dir(dir, sizeof dir);
  make_inputs();
  test_path(path, sizeof path, dir, "p0.npy");
  CHECK(test_write_npy(path, "<f4", 1, (int64_t[]){N}, p0, sizeof p0) == 0);
  test_path(path, sizeof path, dir, "g.npy");
  CHECK(test_write_npy(path, "<f4", 2, (int64_t[]){STEPS, N}, grads, sizeof grads) == 0);
  snprintf(cmd, sizeof cmd, "%s %s %s", TEST_PYTHON, argv[1], dir);
  CHECK(system(cmd) == 0);
  for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) compare(dir, &configs[i]);
  test_remove_dir(dir);
  return test_finish("test_optim_torch");
}
