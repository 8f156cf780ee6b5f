/* test_conv.c — trc_conv2d (trainc.h) against a direct double-precision
 * convolution, for each pass: forward y, backward-data dx and
 * backward-weights dw (added onto what the buffer held when accumulating),
 * and the forward pass with its epilogues: plus a bias per channel, then
 * relu;
 * bitwise the same on 1, 2 and 3 threads; in fp32, and in bf16 against the
 * same sums of the inputs rounded to bf16. Shapes with a batch not divisible
 * into the blocks, stride 2, padding, a 1x1 kernel, and channel counts past
 * oneDNN's block of 16 (its blocked layouts and their reorders). */
#include "test_util.h"

#include <stdlib.h>

typedef struct {
  int64_t n, c, h, w, o, k, stride, pad;
} shape;

static int64_t out_dim(const shape *s, int64_t d) {
  return (d + 2 * s->pad - s->k) / s->stride + 1;
}

static float *random_floats(uint64_t seed, int64_t count) {
  float *x = malloc((size_t)count * sizeof *x);
  for (int64_t i = 0; i < count; i++) x[i] = (float)trc_rng_normal(seed, (uint64_t)i);
  return x;
}

/* The convolution's terms one by one: (n, o, oy, ox) reads x at (n, c, iy, ix)
 * through w (o, c, i, j); `visit` gets the three flat indices. */
typedef void (*term_fn)(void *ctx, int64_t xi, int64_t wi, int64_t yi);

static void each_term(const shape *s, term_fn visit, void *ctx) {
  int64_t oh = out_dim(s, s->h), ow = out_dim(s, s->w);
  for (int64_t n = 0; n < s->n; n++)
    for (int64_t o = 0; o < s->o; o++)
      for (int64_t oy = 0; oy < oh; oy++)
        for (int64_t ox = 0; ox < ow; ox++)
          for (int64_t c = 0; c < s->c; c++)
            for (int64_t i = 0; i < s->k; i++)
              for (int64_t j = 0; j < s->k; j++) {
                int64_t iy = oy * s->stride + i - s->pad, ix = ox * s->stride + j - s->pad;
                if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w) continue;
                visit(ctx, ((n * s->c + c) * s->h + iy) * s->w + ix,
                      ((o * s->c + c) * s->k + i) * s->k + j, ((n * s->o + o) * oh + oy) * ow + ox);
              }
}

typedef struct {
  int pass;
  const float *x, *w, *dy;
  double *out;
  trc_precision precision;
} reference;

/* An input as the precision's convolution reads it. */
static double in(const reference *r, float v) {
  return r->precision == TRC_BF16 ? test_bf16(v) : v;
}

static void add_term(void *ctx, int64_t xi, int64_t wi, int64_t yi) {
  reference *r = ctx;
  if (r->pass == TRC_CONV_FORWARD) r->out[yi] += in(r, r->x[xi]) * in(r, r->w[wi]);
  if (r->pass == TRC_CONV_BACKWARD_DATA) r->out[xi] += in(r, r->dy[yi]) * in(r, r->w[wi]);
  if (r->pass == TRC_CONV_BACKWARD_WEIGHTS) r->out[wi] += in(r, r->x[xi]) * in(r, r->dy[yi]);
}

/* The forward epilogue on the reference: y + bias[o], then max(., 0). */
static void add_epilogue(const shape *s, double *y, const float *bias, int relu) {
  int64_t plane = out_dim(s, s->h) * out_dim(s, s->w);
  for (int64_t i = 0; i < s->n * s->o * plane; i++) {
    if (bias) y[i] += bias[i / plane % s->o];
    if (relu && y[i] < 0) y[i] = 0;
  }
}

/* epilogue (forward only): 0 none, 1 the bias, 2 the bias and relu. */
static void check_pass(const shape *s, int pass, trc_precision precision, int epilogue) {
  int64_t xs = s->n * s->c * s->h * s->w, ws = s->o * s->c * s->k * s->k;
  int64_t ys = s->n * s->o * out_dim(s, s->h) * out_dim(s, s->w);
  int64_t sizes[3] = {[TRC_CONV_FORWARD] = ys, [TRC_CONV_BACKWARD_DATA] = xs,
                      [TRC_CONV_BACKWARD_WEIGHTS] = ws};
  int64_t size = sizes[pass];
  float *x = random_floats(1, xs), *w = random_floats(2, ws), *dy = random_floats(3, ys);
  float *start = random_floats(4, size); /* what dw holds before it accumulates */
  int accumulate = pass == TRC_CONV_BACKWARD_WEIGHTS;
  double *ref = calloc((size_t)size, sizeof *ref);
  for (int64_t i = 0; accumulate && i < size; i++) ref[i] = start[i];
  reference r = {pass, x, w, dy, ref, precision};
  each_term(s, add_term, &r);
  float *bias = epilogue ? random_floats(5, s->o) : NULL;
  add_epilogue(s, ref, bias, epilogue == 2);
  trc_set_precision(precision);
  const float *a = pass == TRC_CONV_BACKWARD_DATA ? dy : x;
  const float *b = pass == TRC_CONV_BACKWARD_WEIGHTS ? dy : w;
  float *one = malloc((size_t)size * sizeof *one), *many = malloc((size_t)size * sizeof *many);
  for (int threads = 1; threads <= 3; threads++) {
    float *out = threads == 1 ? one : many;
    memcpy(out, start, (size_t)size * sizeof *out);
    trc_set_threads(threads);
    trc_conv2d(pass, s->n, s->c, s->h, s->w, s->o, s->k, s->stride, s->pad, a, b, bias,
               epilogue == 2, out, accumulate);
    if (threads > 1) CHECK(memcmp(one, many, (size_t)size * sizeof *one) == 0);
  }
  trc_set_precision(TRC_FP32);
  double worst = 0;
  for (int64_t i = 0; i < size; i++) {
    double err = fabs(one[i] - ref[i]) / (1 + fabs(ref[i]));
    if (err > worst) worst = err;
  }
  if (worst >= 1e-5)
    fprintf(stderr, "shape %lldx%lldx%lldx%lld o %lld k %lld, pass %d, epilogue %d, %s: error %g\n",
            (long long)s->n, (long long)s->c, (long long)s->h, (long long)s->w, (long long)s->o,
            (long long)s->k, pass, epilogue, precision == TRC_BF16 ? "bf16" : "fp32", worst);
  CHECK(worst < 1e-5);
  free(x), free(w), free(dy), free(start), free(ref), free(one), free(many), free(bias);
}

int main(void) {
  const shape shapes[] = {
      {11, 3, 9, 9, 5, 3, 2, 1},  /* ragged blocks, stride 2, padding */
      {9, 17, 6, 7, 20, 3, 1, 1}, /* channels past a block of 16 */
      {2, 4, 5, 5, 3, 1, 1, 0},   /* a 1x1 kernel, fewer images than blocks */
      {3, 1, 8, 8, 32, 3, 1, 1},  /* one input channel (fashion_cnn's first layer) */
      {19, 1, 9, 7, 4, 3, 2, 1},  /* one channel, stride 2, ragged blocks of 2-3 images: its weight gradient on sgemm */
      {5, 1, 7, 6, 3, 5, 1, 2},   /* one channel, 5x5 and padding 2: two padded columns each side */
      {4, 1, 10, 11, 2, 5, 3, 2}, /* one channel, stride 3 past the padding */
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int pass = TRC_CONV_FORWARD; pass <= TRC_CONV_BACKWARD_WEIGHTS; pass++)
      for (trc_precision p = TRC_FP32; p <= TRC_BF16; p++)
        for (int epilogue = 0; epilogue <= (pass == TRC_CONV_FORWARD ? 2 : 0); epilogue++)
          check_pass(&shapes[i], pass, p, epilogue);
  return test_failures != 0;
}
