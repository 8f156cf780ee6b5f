/* rows.c — trc_row_max (rt_kernels.h), the row maximum the loss head and
 * fused attention take of each row. Written as trc_maxf over lanes, GCC 12
 * compiles it to scalar maxss and a branch an element whatever the target
 * (the NaN test stops its vectorizer); with AVX-512 sixteen lanes take the
 * maximum of the ordered values (a NaN passed over, as trc_maxf does). */
#include "rt_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

static float row_max_portable(const float *x, int64_t n) {
  float lane[ROW_LANES], max = -INFINITY;
  for (int i = 0; i < ROW_LANES; i++) lane[i] = -INFINITY;
  int64_t full = n / ROW_LANES * ROW_LANES;
  for (int64_t c = 0; c < full; c += ROW_LANES)
    for (int i = 0; i < ROW_LANES; i++) lane[i] = trc_maxf(lane[i], x[c + i]);
  for (int i = 0; i < ROW_LANES; i++) max = trc_maxf(max, lane[i]);
  for (int64_t c = full; c < n; c++) max = trc_maxf(max, x[c]);
  return max;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The lanes start at -inf and take only ordered values, so vmaxps (the
 * second operand where either is NaN) never meets a NaN: lane > x ? lane : x,
 * trc_maxf's answer. */
__attribute__((target("avx512f"))) static float row_max_avx512(const float *x, int64_t n) {
  __m512 lanes = _mm512_set1_ps(-INFINITY);
  int64_t c = 0;
  for (; c + ROW_LANES <= n; c += ROW_LANES) {
    __m512 v = _mm512_loadu_ps(x + c);
    lanes = _mm512_mask_max_ps(lanes, _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), lanes, v);
  }
  float max = _mm512_reduce_max_ps(lanes);
  for (; c < n; c++) max = trc_maxf(max, x[c]);
  return max;
}
#endif

float trc_row_max(const float *x, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) return row_max_avx512(x, n);
#endif
  return row_max_portable(x, n);
}
