/* make_tiny_data DIR N SEED — a dataset for tiny_model.c: x.npy (<f4 [N, 8])
 * drawn around one of 4 centers with unit noise, and y.npy (<i8 [N],
 * converted to i32 on load) naming the center. The centers are rows of an
 * 8x8 Hadamard matrix times 1.5: any two differ by 3 in 4 coordinates, so the
 * classes overlap by about 0.1% and a good model reaches ~99% accuracy. */
#include "test_util.h"

#include <stdint.h>
#include <stdlib.h>

enum { D = 8, C = 4 };

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: make_tiny_data DIR N SEED\n");
    return 2;
  }
  int64_t n = atoll(argv[2]);
  uint64_t key = trc_rng_key(strtoull(argv[3], NULL, 10), 99, 0);
  float *x = malloc((size_t)n * D * sizeof(float));
  int64_t *y = malloc((size_t)n * sizeof(int64_t));
  for (int64_t r = 0; r < n; r++) {
    y[r] = (int64_t)(trc_rng_u64(key, (uint64_t)r) % C);
    for (int d = 0; d < D; d++) {
      float center = __builtin_popcount((unsigned)(y[r] & d)) % 2 ? -1.5f : 1.5f;
      x[r * D + d] = center + (float)trc_rng_normal(key, (uint64_t)(n + r * D + d));
    }
  }
  char path[4096];
  test_path(path, sizeof path, argv[1], "x.npy");
  int rc = test_write_npy(path, "<f4", 2, (int64_t[]){n, D}, x, (size_t)n * D * sizeof(float));
  test_path(path, sizeof path, argv[1], "y.npy");
  rc |= test_write_npy(path, "<i8", 1, (int64_t[]){n}, y, (size_t)n * sizeof(int64_t));
  free(x);
  free(y);
  if (rc) fprintf(stderr, "make_tiny_data: cannot write into %s\n", argv[1]);
  return rc ? 1 : 0;
}
