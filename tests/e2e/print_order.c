/* print_order N SEED EPOCHS — the training order of each epoch, one line
 * per epoch (trc_shuffle, which the runtime's step schedule uses), so that a
 * reference implementation can visit the same rows. */
#include "trainc_rt.h"

#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: print_order N SEED EPOCHS\n");
    return 2;
  }
  int64_t n = atoll(argv[1]), epochs = atoll(argv[3]);
  uint64_t seed = strtoull(argv[2], NULL, 10);
  int64_t *perm = malloc((size_t)(n > 0 ? n : 1) * sizeof *perm);
  if (!perm || n < 1) return 1;
  for (int64_t e = 0; e < epochs; e++) {
    trc_shuffle(perm, n, seed, (uint64_t)e);
    for (int64_t i = 0; i < n; i++) printf("%lld%c", (long long)perm[i], i + 1 < n ? ' ' : '\n');
  }
  free(perm);
  return 0;
}
