/* finite.c — finding NaN and infinities: in f32 inputs at load, in weights
 * loaded by --init or --resume, and in parameters and gradients before they
 * are saved or sent to the other ranks, so a non-finite value stops the run
 * with a message naming where it is instead of reaching a saved file. */
#include "rt_core.h"

#include <math.h>
#include <string.h>

/* Two passes: a branch-free one over the exponent bits (it vectorizes), then
 * the search for the first offender only when there is one. */
uint64_t trc_first_non_finite(const float *x, uint64_t n) {
  uint32_t any = 0;
  for (uint64_t i = 0; i < n; i++) {
    uint32_t bits;
    memcpy(&bits, &x[i], sizeof bits);
    any |= (bits & 0x7F800000u) == 0x7F800000u;
  }
  if (!any) return n;
  uint64_t i = 0;
  while (isfinite(x[i])) i++;
  return i;
}

const char *trc_non_finite_name(float x) { return isnan(x) ? "nan" : x > 0 ? "inf" : "-inf"; }

int trc_check_range_finite(const trc_model *m, const float *values, uint64_t first,
                           uint64_t count, const char *what, trc_error *err) {
  uint64_t at = trc_first_non_finite(values, count);
  if (at == count) return 0;
  const char *value = trc_non_finite_name(values[at]);
  const uint64_t i = first + at; /* in the block */
  for (int k = 0; k < m->n_params; k++) {
    const trc_param *p = &m->params[k];
    uint64_t start = (p->offset - m->param_offset) / sizeof(float);
    if (i >= start && i < start + p->count)
      return trc_fail(err, "%s '%s' is %s at element %llu", what, p->name, value,
                      (unsigned long long)(i - start));
  }
  return trc_fail(err, "%s block is %s at element %llu, between parameters", what, value,
                  (unsigned long long)i);
}

int trc_check_block_finite(const trc_model *m, const float *block, const char *what,
                           trc_error *err) {
  return trc_check_range_finite(m, block, 0, m->param_count, what, err);
}
