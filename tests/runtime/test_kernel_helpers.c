/* test_kernel_helpers.c — trainc.h's trc_maxf and trc_minf, the maximum and
 * minimum generated kernels use, against the C library's fmaxf and fminf
 * (a NaN operand yields the other one) over every pair of special and
 * ordinary values. */
#include "test_util.h"

#include <math.h>
#include <stdbool.h>

static bool same(float got, float want) { return isnan(want) ? isnan(got) : got == want; }

int main(void) {
  const float v[] = {NAN, -INFINITY, -3.5f, -1e-40f, -0.0f, 0.0f, 1e-40f, 2.0f, 3.4e38f, INFINITY};
  const int n = (int)(sizeof v / sizeof v[0]);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      CHECK(same(trc_maxf(v[i], v[j]), fmaxf(v[i], v[j])));
      CHECK(same(trc_minf(v[i], v[j]), fminf(v[i], v[j])));
    }
  return test_failures != 0;
}
