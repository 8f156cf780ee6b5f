/* parallel.c — the trainer's threads (trainc.h): trc_parallel_for on
 * OpenMP, which Debian's OpenMP build of OpenBLAS shares, so the loop
 * kernels and the GEMMs run on one set of threads. Built without OpenMP (a
 * compiler without its runtime, as the fuzz build's clang), every loop runs
 * on the caller. */
#include "rt_internal.h"

#ifdef _OPENMP
#include <omp.h>
#endif

int trc_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

void trc_set_threads(int n) {
#ifdef _OPENMP
  if (n > 0)
    omp_set_num_threads(n); /* OpenBLAS (OpenMP build) follows it */
#else
  (void)n;
#endif
}

#ifdef _OPENMP
/* Block t of [0, n) cut into `parts` (trainc.h). */
static int64_t block_start(int64_t n, int parts, int t) {
  int64_t q = n / parts, r = n % parts;
  return t * q + (t < r ? t : r);
}
#endif

void trc_parallel_for(int64_t n, trc_loop_body body, void *ctx) {
  if (n <= 0)
    return;
#ifdef _OPENMP
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads > n)
    threads = (int)n;
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    {
      int t = omp_get_thread_num(), parts = omp_get_num_threads();
      int64_t lo = block_start(n, parts, t), hi = block_start(n, parts, t + 1);
      if (lo < hi)
        body(ctx, lo, hi);
    }
    return;
  }
#endif
  body(ctx, 0, n);
}
