#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
/* permute_loop.c — a loop nest exactly as the C backend prints it: the
 * permute that splits examples/gpt.nn's [2, 64, 128] activations into 4 heads
 * of 32 (B = 2). GCC 12.2 at -O3 -march=native (AVX-512 here) miscompiles
 * it: 16383 of 16384 outputs wrong, with or without `restrict`, while -O2,
 * -march=skylake-avx512, -mavx2 and -fvect-cost-model=very-cheap are right.
 * That is why trainc's default flags carry the last one. Exit 0 when right. */
__attribute__((noinline)) static void k14(char *restrict A) {
  const float *restrict b13 = (const float *)(A + 65536);
  float *restrict b14 = (float *)(A + 0);
  for (int64_t i0 = 0; i0 < 2; i0++)
    for (int64_t i1 = 0; i1 < 4; i1++)
      for (int64_t i2 = 0; i2 < 64; i2++)
        for (int64_t i3 = 0; i3 < 32; i3++)
          b14[(((i3 + (i2 * 32)) + (i1 * 2048)) + (i0 * 8192))] = b13[((((i0 * 8192) + (i1 * 32)) + (i2 * 128)) + i3)];
}
int main(void) {
  float *a = aligned_alloc(64, 2 * 65536);
  if (!a) return 2;
  for (int i = 0; i < 16384; i++) a[16384 + i] = (float)i;
  k14((char *)a);
  int bad = 0;
  for (int i0 = 0; i0 < 2; i0++) for (int i1 = 0; i1 < 4; i1++) for (int i2 = 0; i2 < 64; i2++) for (int i3 = 0; i3 < 32; i3++) {
    float want = (float)(i0 * 8192 + i1 * 32 + i2 * 128 + i3);
    if (a[i3 + i2 * 32 + i1 * 2048 + i0 * 8192] != want) bad++;
  }
  printf("%d wrong of 16384\n", bad);
  free(a);
  return bad != 0;
}
