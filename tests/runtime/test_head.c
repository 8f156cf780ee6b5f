/* test_head.c — trc_linear_cross_entropy (trainc.h), the chunked loss head,
 * against a double-precision reference of the whole head (all n rows'
 * logits, softmax, loss, argmax, dx and dw at once): blocks that do not
 * divide n, one block larger than n, blocks of one row, v not a multiple of
 * 16 and large enough for trc_gemm to cut, both layouts of w, ignored rows,
 * no dw and a dw that starts non-zero (the head adds to it), seeds other
 * than 1; a row of zero logits (every column ties: the argmax is column 0);
 * d = 512, from which w's gradient under bf16 reads g^T made row-major in
 * the scratch where the machine's bf16 GEMMs want it (AMX; CMake runs this
 * test with TRAINC_BF16_TRANSPOSE_A at 0 and at 1: both forms anywhere).
 * Every output and dw are bitwise the same on 1, 2 and 3 threads; in fp32,
 * and in bf16 against the reference on operands rounded to bf16. (Not
 * bitwise the unfused kernels': the rows' expf is libmvec's vector one, as
 * in the generated loops, on other elements than theirs.)
 *
 * Tolerances. Each value is compared with the double reference relative
 * to the sum of its terms' magnitudes (as test_gemm does). In fp32, a
 * logit's error is a few float roundings of sum_k |x w| (L below, per row),
 * and the head's later steps (expf, logf, the row sums) add a few roundings
 * each; 1e-5 is ~170 float epsilons, well above what the shapes here (d
 * and v at most a few hundred) accumulate (the errors seen are under 5% of
 * it), and far below what a wrong scale, a missing dw accumulate or a wrong
 * row would give. A row's gradient
 * g_c = (p_c - y_c) s is compared through dx and dw with magnitude
 * |s| (p_c + y_c) (1 + L): the softmax's error scales with p_c (not with
 * |p_c - y_c|, which cancels at the label) and with the logits' error. In
 * bf16, the head also rounds g to bf16 (relative 2^-9) for dx and dw, which
 * the reference does not: 2^-8 there (that rounding alone reaches half
 * of it). The logits are products of bf16
 * operands accumulated in f32, so the loss keeps the fp32 tolerance. An
 * ignored row must give exactly 0: its loss, its dx row, its share of dw. */
#include "test_util.h"

#include <stdlib.h>

enum { IGNORE = -100 };

typedef struct {
  int64_t n, d, v, chunk;
  int w_vd, has_ignore, with_dw;
  float seed;
} head_case;

/* What the head gives. */
typedef struct {
  float *out, *dw;
} head_result;

/* The reference, with its tolerances' magnitudes (*_mag, logit_mag: L). */
typedef struct {
  double *loss, *dx, *dx_mag, *dw, *dw_mag, *logit_max, *logit_mag;
  double *logits; /* [n, v] */
} reference;

static float *random_floats(uint64_t seed, int64_t count, double scale) {
  float *x = malloc((size_t)count * sizeof *x);
  for (int64_t i = 0; i < count; i++) x[i] = (float)(scale * trc_rng_normal(seed, (uint64_t)i));
  return x;
}

/* Row r's label: the first and last columns for rows 0 and 1, then spread
 * over [0, v); with ignore every third row ignored. */
static int32_t label_of(const head_case *h, int64_t r) {
  if (h->has_ignore && r % 3 == 2) return IGNORE;
  if (r < 2) return r == 0 ? 0 : (int32_t)h->v - 1;
  return (int32_t)((r * 7919 + 13) % h->v);
}

static int counts(const head_case *h, const int32_t *labels, int64_t r) {
  return !(h->has_ignore && labels[r] == IGNORE);
}

static double operand(float v, trc_precision p) { return p == TRC_BF16 ? test_bf16(v) : v; }

/* w[c, k] of the logits x w^T, whatever w's layout. */
static double w_at(const head_case *h, const float *w, int64_t c, int64_t k, trc_precision p) {
  return operand(h->w_vd ? w[c * h->d + k] : w[k * h->v + c], p);
}

/* The reference: row r's logits, softmax p, loss, and (through the row's
 * scale s) dx = g W and dw = start + g^T x, g = (p - y) s, with each
 * value's magnitude for the tolerance. */
static void reference_head(const head_case *h, const float *x, const float *w,
                           const int32_t *labels, const float *dw_start, trc_precision p,
                           reference *ref) {
  int64_t n = h->n, d = h->d, v = h->v;
  double *prob = malloc((size_t)v * sizeof *prob);
  for (int64_t i = 0; i < v * d; i++) ref->dw[i] = dw_start[i], ref->dw_mag[i] = fabs(dw_start[i]);
  for (int64_t r = 0; r < n; r++) {
    double *l = ref->logits + r * v, max = -INFINITY, sum = 0, mag = 0;
    for (int64_t c = 0; c < v; c++) {
      double dot = 0, size = 0;
      for (int64_t k = 0; k < d; k++) {
        double term = operand(x[r * d + k], p) * w_at(h, w, c, k, p);
        dot += term, size += fabs(term);
      }
      l[c] = dot, mag = size > mag ? size : mag;
      if (dot > max) max = dot;
    }
    for (int64_t c = 0; c < v; c++) sum += exp(l[c] - max);
    double lse = max + log(sum);
    int used = counts(h, labels, r);
    ref->loss[r] = used ? lse - l[labels[r]] : 0;
    ref->logit_max[r] = max, ref->logit_mag[r] = mag;
    double s = (double)h->seed * (h->has_ignore ? used : 1.0 / (double)n);
    for (int64_t c = 0; c < v; c++) prob[c] = exp(l[c] - lse);
    for (int64_t k = 0; k < d; k++) {
      double dx = 0, dx_mag = 0;
      for (int64_t c = 0; c < v; c++) {
        double y = c == labels[r], g = (prob[c] - y) * s;
        double g_mag = fabs(s) * (prob[c] + y) * (1 + mag);
        double wck = w_at(h, w, c, k, p), xk = operand(x[r * d + k], p);
        int64_t at = h->w_vd ? c * d + k : k * v + c;
        dx += g * wck, dx_mag += g_mag * fabs(wck);
        ref->dw[at] += g * xk, ref->dw_mag[at] += g_mag * fabs(xk);
      }
      ref->dx[r * d + k] = dx, ref->dx_mag[r * d + k] = dx_mag;
    }
  }
  free(prob);
}

/* The head on `threads` threads. out starts as NaN: every element must be
 * written. */
static head_result run_head(const head_case *h, const float *x, const float *w,
                            const int32_t *labels, const float *dw_start, int threads) {
  int64_t out_size = h->n * h->d + 2 * h->n;
  head_result res = {malloc((size_t)out_size * sizeof(float)), NULL};
  for (int64_t i = 0; i < out_size; i++) res.out[i] = NAN;
  if (h->with_dw) {
    res.dw = malloc((size_t)(h->v * h->d) * sizeof(float));
    memcpy(res.dw, dw_start, (size_t)(h->v * h->d) * sizeof(float));
  }
  float *scratch = malloc((size_t)(h->chunk * h->v) * sizeof(float));
  trc_set_threads(threads);
  trc_linear_cross_entropy(h->n, h->d, h->v, h->chunk, h->w_vd, h->has_ignore, IGNORE, x, w,
                           labels, &h->seed, res.out, res.dw, scratch);
  free(scratch);
  return res;
}

/* The worst error relative to its tolerance (<= 1 passes); a zero
 * magnitude must be exact. */
static double worst_ratio(const float *got, const double *want, const double *mag, int64_t count,
                          double tol) {
  double worst = 0;
  for (int64_t i = 0; i < count; i++) {
    double err = fabs(got[i] - want[i]);
    double ratio = mag[i] > 0 ? err / (tol * mag[i]) : err > 0 || isnan(got[i]) ? INFINITY : 0;
    if (!(ratio <= worst)) worst = ratio;
  }
  return worst;
}

static void check_against(const head_case *h, const head_result *res, const reference *ref,
                          const int32_t *labels, trc_precision p) {
  int64_t n = h->n, d = h->d;
  double grad_tol = p == TRC_BF16 ? 1.0 / 256 : 1e-5;
  double *loss_mag = malloc((size_t)n * sizeof *loss_mag);
  for (int64_t r = 0; r < n; r++) loss_mag[r] = counts(h, labels, r) ? 1 + ref->logit_mag[r] : 0;
  double loss = worst_ratio(res->out + n * d, ref->loss, loss_mag, n, 1e-5);
  double dx = worst_ratio(res->out, ref->dx, ref->dx_mag, n * d, grad_tol);
  double dw = h->with_dw ? worst_ratio(res->dw, ref->dw, ref->dw_mag, h->v * d, grad_tol) : 0;
  /* the argmax: a column whose logit is the maximum, up to the logits'
   * error (a near tie may go either way) */
  int argmax_ok = 1;
  for (int64_t r = 0; r < n; r++) {
    float a = res->out[n * d + n + r];
    int64_t c = (int64_t)a;
    argmax_ok &= a == (float)c && c >= 0 && c < h->v &&
                 ref->logits[r * h->v + c] >= ref->logit_max[r] - 1e-5 * (1 + ref->logit_mag[r]);
  }
  if (!(loss <= 1 && dx <= 1 && dw <= 1 && argmax_ok))
    fprintf(stderr,
            "case n %lld d %lld v %lld chunk %lld w_vd %d ignore %d dw %d seed %g (%s): error / "
            "tolerance: loss %g dx %g dw %g, argmax %s\n",
            (long long)n, (long long)d, (long long)h->v, (long long)h->chunk, h->w_vd,
            h->has_ignore, h->with_dw, h->seed, p == TRC_BF16 ? "bf16" : "fp32", loss, dx, dw,
            argmax_ok ? "ok" : "wrong");
  CHECK(loss <= 1);
  CHECK(dx <= 1);
  CHECK(dw <= 1);
  CHECK(argmax_ok);
  free(loss_mag);
}

static void check_case(const head_case *h, trc_precision p) {
  int64_t n = h->n, d = h->d, v = h->v;
  /* w ~ N(0, 1/d): logits of order 1, a softmax that is not one-hot */
  float *x = random_floats(1, n * d, 1.0), *w = random_floats(2, v * d, 1.0 / sqrt((double)d));
  float *dw_start = random_floats(3, v * d, 0.1);
  if (n > 1) memset(x + d, 0, (size_t)d * sizeof *x); /* row 1: all logits 0, all tied */
  int32_t *labels = malloc((size_t)n * sizeof *labels);
  for (int64_t r = 0; r < n; r++) labels[r] = label_of(h, r);
  reference ref;
  double **fields[] = {&ref.loss, &ref.logit_max, &ref.logit_mag, &ref.dx, &ref.dx_mag,
                       &ref.dw, &ref.dw_mag, &ref.logits};
  int64_t sizes[] = {n, n, n, n * d, n * d, v * d, v * d, n * v};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    *fields[i] = malloc((size_t)sizes[i] * sizeof(double));
  reference_head(h, x, w, labels, dw_start, p, &ref);

  trc_set_precision(p);
  head_result one = run_head(h, x, w, labels, dw_start, 1);
  for (int threads = 2; threads <= 3; threads++) {
    head_result many = run_head(h, x, w, labels, dw_start, threads);
    CHECK(memcmp(one.out, many.out, (size_t)(n * d + 2 * n) * sizeof(float)) == 0);
    CHECK(!h->with_dw || memcmp(one.dw, many.dw, (size_t)(v * d) * sizeof(float)) == 0);
    free(many.out), free(many.dw);
  }
  trc_set_precision(TRC_FP32);
  check_against(h, &one, &ref, labels, p);
  if (n > 1) CHECK(one.out[n * d + n + 1] == 0.0f); /* the first of the tied columns */

  free(one.out), free(one.dw), free(x), free(w), free(dw_start), free(labels);
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) free(*fields[i]);
}

int main(void) {
  const head_case cases[] = {
      /* n  d    v chunk w_vd ignore dw seed */
      {10, 16, 33, 4, 1, 0, 1, 1.0f},   /* a short last block */
      {10, 16, 33, 4, 0, 0, 1, 0.1f},   /* w as [d, v] */
      {7, 9, 20, 16, 1, 1, 1, 2.5f},    /* one block larger than n, ignored rows */
      {7, 9, 20, 16, 0, 1, 0, 1.0f},    /* no dw */
      {5, 12, 17, 1, 0, 1, 1, 0.75f},   /* blocks of one row */
      {70, 24, 300, 32, 1, 1, 1, 1.25f}, /* v that trc_gemm cuts */
      {70, 24, 300, 32, 0, 0, 0, 1.05f},
      {1, 5, 3, 2, 1, 0, 1, 1.0f},      /* a single row */
      {10, 16, 33, 4, 1, 1, 1, 0.0f},   /* seed 0 (evaluation): dx 0, dw untouched */
      {40, 512, 300, 16, 1, 1, 1, 1.0f}, /* d from which bf16 may read g^T row-major */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (trc_precision p = TRC_FP32; p <= TRC_BF16; p++) check_case(&cases[i], p);
  return test_finish("head");
}
