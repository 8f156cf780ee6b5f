/* peak.c — this machine's arithmetic peak, the figure bench/RESULTS.md
 * divides the steps' FLOP/s by: fp32 fused multiply-adds in the widest
 * vectors the CPU has (AVX-512, else AVX2 with FMA), and bf16 dot products
 * (AVX512_BF16's vdpbf16ps) where it has them; independent accumulators
 * enough to cover the FMA latency on every x86-64 core seen here (2 FMAs a
 * cycle, 4 cycles each) that fit the registers with the two operands (16
 * of AVX-512's 32, 12 of AVX2's 16: 16 spilled, and halved the figure),
 * best of 3 runs, every OpenMP thread. Built for any x86-64 and
 * dispatched at run time:
 *   gcc -O2 -fopenmp bench/peak.c -o /tmp/peak && /tmp/peak
 * (OMP_NUM_THREADS=1 for one core). bench/gemm_shapes.sh runs it. */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <time.h>

enum { ACCUMULATORS = 16, AVX2_ACCUMULATORS = 12, RUNS = 3 };
static const long ITERATIONS = 25000000; /* per thread: about 1 s on one core at AVX2 */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Each returns a sum of its accumulators, printed so that none is dead. */
__attribute__((target("avx512f"))) static double fma_avx512(long iterations) {
  __m512 acc[ACCUMULATORS], x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
  for (int i = 0; i < ACCUMULATORS; i++) acc[i] = _mm512_set1_ps((float)i);
  for (long k = 0; k < iterations; k++)
#pragma GCC unroll 16
    for (int i = 0; i < ACCUMULATORS; i++) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  for (int i = 1; i < ACCUMULATORS; i++) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  return _mm512_reduce_add_ps(acc[0]);
}

__attribute__((target("avx2,fma"))) static double fma_avx2(long iterations) {
  __m256 acc[AVX2_ACCUMULATORS], x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(0.9999999f);
  for (int i = 0; i < AVX2_ACCUMULATORS; i++) acc[i] = _mm256_set1_ps((float)i);
  for (long k = 0; k < iterations; k++)
#pragma GCC unroll 12
    for (int i = 0; i < AVX2_ACCUMULATORS; i++) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  for (int i = 1; i < AVX2_ACCUMULATORS; i++) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  float lanes[8];
  _mm256_storeu_ps(lanes, acc[0]);
  double sum = 0;
  for (int i = 0; i < 8; i++) sum += lanes[i];
  return sum;
}

__attribute__((target("avx512f,avx512bf16"))) static double dot_bf16(long iterations) {
  __m512 acc[ACCUMULATORS];
  __m512bh one = (__m512bh)_mm512_set1_epi16(0x3f80); /* 1.0 in bf16 */
  for (int i = 0; i < ACCUMULATORS; i++) acc[i] = _mm512_setzero_ps();
  for (long k = 0; k < iterations; k++)
#pragma GCC unroll 16
    for (int i = 0; i < ACCUMULATORS; i++) acc[i] = _mm512_dpbf16_ps(acc[i], one, one);
  for (int i = 1; i < ACCUMULATORS; i++) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  return _mm512_reduce_add_ps(acc[0]);
}

typedef struct {
  const char *name;
  double (*kernel)(long);
  int flops;        /* per instruction: lanes x 2 (a multiply and an add) */
  int accumulators; /* instructions per iteration */
} peak;

/* The best GFLOP/s of RUNS runs of p on every thread. */
static double measure(const peak *p) {
  double best = 0, sink = 0;
  for (int run = 0; run < RUNS; run++) {
    double start = now(), sum = 0;
#pragma omp parallel reduction(+ : sum)
    sum += p->kernel(ITERATIONS);
    double seconds = now() - start;
    double gflops = (double)omp_get_max_threads() * ITERATIONS * p->accumulators * p->flops / seconds / 1e9;
    if (gflops > best) best = gflops;
    sink += sum;
  }
  printf("threads %d  %-28s %6.0f GFLOP/s  (sink %g)\n", omp_get_max_threads(), p->name, best, sink);
  return best;
}

int main(void) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    measure(&(peak){"fp32 FMA (AVX-512)", fma_avx512, 32, ACCUMULATORS});
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    measure(&(peak){"fp32 FMA (AVX2)", fma_avx2, 16, AVX2_ACCUMULATORS});
  else
    printf("no AVX2 with FMA: no vector peak measured\n");
  if (__builtin_cpu_supports("avx512bf16"))
    measure(&(peak){"bf16 dot product (AVX512_BF16)", dot_bf16, 64, ACCUMULATORS});
  else
    printf("no AVX512_BF16: no bf16 arithmetic (trainc emulates bf16 in fp32 here)\n");
  return 0;
}
