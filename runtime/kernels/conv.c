/* conv.c — trc_conv2d (trainc.h): the convolutions of generated code on
 * oneDNN's convolution primitives (forward, backward-data,
 * backward-weights), NCHW activations and OIHW weights as the arena holds
 * them. As trc_gemm does, the work is cut by a partition fixed by the shapes
 * — the batch in at most CONV_PARTS blocks of images — and every block is
 * one single-threaded primitive run on the runtime's pool (each pool thread
 * has set its OpenMP thread count to 1, parallel.c; oneDNN here is built
 * with OpenMP and starts no team of its own). Every output element is then
 * computed by the same primitive with the same blocking whatever --threads
 * is: bitwise the same results for any thread count. The weight gradient is
 * a sum over images: each block writes its own partial gradient, and the
 * partials are added in block order, again independent of the threads.
 * Primitives are made once per shape (at most two block shapes per
 * convolution) on the first call, and kept; the scratchpads (user-managed,
 * one per thread) and the partial gradients live in one workspace outside
 * the arena, whose size trc_conv_workspace_bytes reports. Under precision
 * bf16 the two inputs of each pass are bf16 (oneDNN's reorders into the
 * primitive's layout round them, to nearest even) and its output f32.
 * The forward pass may add a bias per output channel (f32) and apply relu
 * inside the primitive (a post-op), while each block's output is in the
 * cache: no pass of its own over the output for either. The weight gradient
 * of images of one channel runs on sgemm instead (weights_by_sgemm). */
#include "rt_kernels.h"

#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CONV_PARTS = 8, ALIGN = 64 };

/* What one block's primitive depends on. All 8-byte fields: compared with
 * memcmp. */
typedef struct {
  int64_t pass, images, c, h, w, o, k, stride, pad, oh, ow, bf16, bias, relu;
} conv_shape;

/* One tensor of a block: as the arena holds it (NCHW, OIHW) and as the
 * primitive wants it (oneDNN picks a blocked layout, nChw16c and the like,
 * for its fastest kernels), with the reorder between the two — to the
 * primitive's layout for an input, back for the output — or NULL when they
 * are the same. The primitive's copy lives in the slot at byte `at`. */
typedef struct {
  int arg; /* DNNL_ARG_... */
  dnnl_memory_desc_t user, inner;
  dnnl_primitive_t reorder;
  size_t at;
} operand;

/* A primitive's memory objects on one slot, made on the slot's first run
 * and then pointed at each run's data: a run allocates nothing (glibc's
 * heap grew in step 2 when every run created and destroyed its own). */
typedef struct {
  dnnl_memory_t user[3], inner[3], scratch, bias;
} slot_memories;

/* A block's primitive: its operands a, b (inputs) and out, as trc_conv2d
 * takes them, and its scratchpad at the start of the slot. */
typedef struct {
  conv_shape shape;
  dnnl_primitive_t primitive;
  operand op[3];
  dnnl_memory_desc_t scratch_md, bias_md;
  size_t slot_bytes;
  slot_memories *mem; /* TRC_MAX_THREADS of them */
} cached_conv;

static struct {
  dnnl_engine_t engine;
  dnnl_stream_t streams[TRC_MAX_THREADS]; /* one per slot (concurrent executions) */
  cached_conv *cache;
  int cached, cache_cap;
  char *workspace;             /* the slots' scratchpads, then the partial weight gradients */
  size_t workspace_cap, slot_bytes;
} conv;

/* oneDNN failing here is a broken installation or out of memory: the
 * convolution has no way to report, so the trainer stops (every rank). */
static void check(dnnl_status_t status, const char *what) {
  if (status == dnnl_success) return;
  fprintf(stderr, "trainer: error: oneDNN %s failed (status %d) in a convolution\n", what,
          (int)status);
  trc_comm_abort(1);
}

static size_t aligned(size_t bytes) { return (bytes + ALIGN - 1) / ALIGN * ALIGN; }

/* ---- primitives ---- */

static void plain_md(dnnl_memory_desc_t *md, int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                     dnnl_format_tag_t tag, dnnl_data_type_t type) {
  dnnl_dims_t dims = {d0, d1, d2, d3};
  check(dnnl_memory_desc_init_by_tag(md, 4, dims, type, tag), "memory descriptor");
}

/* The forward pass's bias: o floats. */
static void bias_md(dnnl_memory_desc_t *md, int64_t o) {
  dnnl_dims_t dims = {o};
  check(dnnl_memory_desc_init_by_tag(md, 1, dims, dnnl_f32, dnnl_a), "memory descriptor");
}

/* A tensor's type inside the primitive: bf16 for a pass's inputs under
 * precision bf16 (forward x and w, backward-data dy and w, backward-weights
 * x and dy), f32 otherwise. */
enum tensor { TENSOR_X, TENSOR_W, TENSOR_Y };
static dnnl_data_type_t inner_type(const conv_shape *s, int64_t pass, enum tensor t) {
  static const enum tensor output[3] = {[TRC_CONV_FORWARD] = TENSOR_Y,
                                        [TRC_CONV_BACKWARD_DATA] = TENSOR_X,
                                        [TRC_CONV_BACKWARD_WEIGHTS] = TENSOR_W};
  return s->bf16 && !trc_bf16_emulated() && output[pass] != t ? dnnl_bf16 : dnnl_f32;
}

/* Emulated bf16 (trc_bf16_emulated): f32 primitives whose two inputs are
 * copied into the slot and rounded there (rounding is elementwise: any
 * layout). */
static int rounds_in_slot(const conv_shape *s, int i) {
  return s->bf16 && i < 2 && trc_bf16_emulated();
}

/* The convolution's descriptor for one block; src/weights/dst are the
 * tensors of the forward convolution (their gradients for the backward
 * passes). */
static void conv_desc(dnnl_convolution_desc_t *d, int64_t pass, const conv_shape *s,
                      const dnnl_memory_desc_t *x, const dnnl_memory_desc_t *w,
                      const dnnl_memory_desc_t *y) {
  dnnl_dims_t strides = {s->stride, s->stride}, pad = {s->pad, s->pad};
  /* the right/bottom padding that makes the output exactly oh x ow */
  dnnl_dims_t pad_r = {(s->oh - 1) * s->stride + s->k - s->h - s->pad,
                       (s->ow - 1) * s->stride + s->k - s->w - s->pad};
  const dnnl_alg_kind_t direct = dnnl_convolution_direct;
  dnnl_memory_desc_t bias;
  bias_md(&bias, s->o);
  if (pass == TRC_CONV_FORWARD)
    check(dnnl_convolution_forward_desc_init(d, dnnl_forward_training, direct, x, w,
                                             s->bias ? &bias : NULL, y, strides, pad, pad_r),
          "convolution descriptor");
  else if (pass == TRC_CONV_BACKWARD_DATA)
    check(dnnl_convolution_backward_data_desc_init(d, direct, x, w, y, strides, pad, pad_r),
          "convolution descriptor");
  else
    check(dnnl_convolution_backward_weights_desc_init(d, direct, x, w, NULL, y, strides, pad,
                                                      pad_r),
          "convolution descriptor");
}

/* The pass's primitive for shape s with every layout left to oneDNN. */
static dnnl_primitive_desc_t primitive_desc(int64_t pass, const conv_shape *s,
                                            const_dnnl_primitive_desc_t hint) {
  dnnl_memory_desc_t x, w, y;
  const dnnl_format_tag_t any = dnnl_format_tag_any;
  plain_md(&x, s->images, s->c, s->h, s->w, any, inner_type(s, pass, TENSOR_X));
  plain_md(&w, s->o, s->c, s->k, s->k, any, inner_type(s, pass, TENSOR_W));
  plain_md(&y, s->images, s->o, s->oh, s->ow, any, inner_type(s, pass, TENSOR_Y));
  dnnl_convolution_desc_t d;
  conv_desc(&d, pass, s, &x, &w, &y);
  dnnl_primitive_attr_t attr;
  check(dnnl_primitive_attr_create(&attr), "attributes");
  check(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "scratchpad");
  dnnl_post_ops_t post_ops = NULL;
  if (pass == TRC_CONV_FORWARD && s->relu) { /* max(y, 0): alpha 0, scale 1 */
    check(dnnl_post_ops_create(&post_ops), "post-ops");
    check(dnnl_post_ops_append_eltwise(post_ops, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f), "relu post-op");
    check(dnnl_primitive_attr_set_post_ops(attr, post_ops), "post-ops");
  }
  dnnl_primitive_desc_t pd;
  check(dnnl_primitive_desc_create(&pd, &d, attr, conv.engine, hint), "convolution");
  if (post_ops) dnnl_post_ops_destroy(post_ops);
  dnnl_primitive_attr_destroy(attr);
  return pd;
}

static const struct {
  int arg;
  dnnl_query_t query;
} operands[3][3] = {
    [TRC_CONV_FORWARD] = {{DNNL_ARG_SRC, dnnl_query_src_md},
                          {DNNL_ARG_WEIGHTS, dnnl_query_weights_md},
                          {DNNL_ARG_DST, dnnl_query_dst_md}},
    [TRC_CONV_BACKWARD_DATA] = {{DNNL_ARG_DIFF_DST, dnnl_query_diff_dst_md},
                                {DNNL_ARG_WEIGHTS, dnnl_query_weights_md},
                                {DNNL_ARG_DIFF_SRC, dnnl_query_diff_src_md}},
    [TRC_CONV_BACKWARD_WEIGHTS] = {{DNNL_ARG_SRC, dnnl_query_src_md},
                                   {DNNL_ARG_DIFF_DST, dnnl_query_diff_dst_md},
                                   {DNNL_ARG_DIFF_WEIGHTS, dnnl_query_diff_weights_md}},
};

static dnnl_primitive_t make_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to) {
  dnnl_primitive_desc_t pd;
  check(dnnl_reorder_primitive_desc_create(&pd, from, conv.engine, to, conv.engine, NULL),
        "reorder");
  dnnl_primitive_t reorder;
  check(dnnl_primitive_create(&reorder, pd), "reorder primitive");
  dnnl_primitive_desc_destroy(pd);
  return reorder;
}

/* Operand i of the primitive pd, placed in the slot at *used bytes. */
static void set_operand(cached_conv *e, const_dnnl_primitive_desc_t pd, int i,
                        const dnnl_memory_desc_t *user, size_t *used) {
  operand *op = &e->op[i];
  op->arg = operands[e->shape.pass][i].arg;
  op->user = *user;
  op->inner = *dnnl_primitive_desc_query_md(pd, operands[e->shape.pass][i].query, 0);
  if (dnnl_memory_desc_equal(&op->user, &op->inner) && !rounds_in_slot(&e->shape, i)) return;
  op->reorder = i < 2 ? make_reorder(&op->user, &op->inner) : make_reorder(&op->inner, &op->user);
  op->at = *used;
  *used += aligned(dnnl_memory_desc_get_size(&op->inner));
}

/* The backward passes' primitives take the forward one's as a hint. */
static void create_conv(cached_conv *e) {
  const conv_shape *s = &e->shape;
  dnnl_memory_desc_t x, w, y;
  plain_md(&x, s->images, s->c, s->h, s->w, dnnl_nchw, dnnl_f32);
  plain_md(&w, s->o, s->c, s->k, s->k, dnnl_oihw, dnnl_f32);
  plain_md(&y, s->images, s->o, s->oh, s->ow, dnnl_nchw, dnnl_f32);
  dnnl_primitive_desc_t forward = primitive_desc(TRC_CONV_FORWARD, s, NULL), pd = forward;
  if (s->pass != TRC_CONV_FORWARD) pd = primitive_desc(s->pass, s, forward);
  e->scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  bias_md(&e->bias_md, s->o);
  size_t used = aligned(dnnl_memory_desc_get_size(&e->scratch_md));
  const dnnl_memory_desc_t *user[3][3] = {
      [TRC_CONV_FORWARD] = {&x, &w, &y},
      [TRC_CONV_BACKWARD_DATA] = {&y, &w, &x},
      [TRC_CONV_BACKWARD_WEIGHTS] = {&x, &y, &w},
  };
  for (int i = 0; i < 3; i++) set_operand(e, pd, i, user[s->pass][i], &used);
  e->slot_bytes = used;
  check(dnnl_primitive_create(&e->primitive, pd), "primitive");
  if (pd != forward) dnnl_primitive_desc_destroy(pd);
  dnnl_primitive_desc_destroy(forward);
}

static const cached_conv *find_conv(const conv_shape *s) {
  for (int i = 0; i < conv.cached; i++)
    if (memcmp(&conv.cache[i].shape, s, sizeof *s) == 0) return &conv.cache[i];
  return NULL;
}

/* Called on one thread, before any block runs: the cache does not move
 * while the blocks read it. */
static void make_conv(const conv_shape *s) {
  if (find_conv(s)) return;
  cached_conv *e = trc_cache_append((void **)&conv.cache, &conv.cached, &conv.cache_cap, sizeof *e);
  if (e) e->mem = calloc(TRC_MAX_THREADS, sizeof *e->mem);
  if (!e || !e->mem) check(dnnl_out_of_memory, "primitive cache");
  e->shape = *s;
  create_conv(e);
  if (e->slot_bytes > conv.slot_bytes) conv.slot_bytes = e->slot_bytes;
}

/* ---- one input channel's weight gradient ---- */

/* oneDNN 2.6's backward-weights primitive (jit:avx2 on AMD Zen 3) ran
 * fashion_cnn's first convolution, one input channel, 32 3x3 filters over
 * 28x28 images, at ~8 GFLOP/s: 0.87 ms for a block of 16 images, 7 ms a
 * step, five times its forward pass. With one channel the gradient is one
 * small GEMM an image: dw [o, k k] += dy [o, oh ow] times the image's k k
 * shifted copies [k k, oh ow] (im2col, in the block's slot), transposed;
 * the images in order, so the block's partial is the same bits whatever the
 * threads. Under bf16 both operands are rounded first (the copies in place,
 * dy into the slot after them): products of bf16 values are exact in f32,
 * so this is the bf16 gradient up to the order of its f32 sums (bf16's
 * primitive, emulated on this CPU, took 4.5 ms a step against fp32's 1.2).
 * The cost model prices these passes by the same test (ir.h,
 * conv_weights_by_gemm): change the two together. */
static int weights_by_sgemm(const conv_shape *s) {
  return s->pass == TRC_CONV_BACKWARD_WEIGHTS && s->c == 1;
}

static size_t im2col_bytes(const conv_shape *s) {
  return aligned((size_t)(s->k * s->k * s->oh * s->ow) * sizeof(float));
}

/* The slot of a block on sgemm: its copies, and under bf16 an image's
 * rounded dy. */
static size_t sgemm_slot_bytes(const conv_shape *s) {
  size_t dy = s->bf16 ? aligned((size_t)(s->o * s->oh * s->ow) * sizeof(float)) : 0;
  return im2col_bytes(s) + dy;
}

/* The output columns [*lo, *hi) whose input column ox stride + shift lies
 * inside the image's w columns. */
static void columns_inside(const conv_shape *s, int64_t shift, int64_t *lo, int64_t *hi) {
  *lo = shift >= 0 ? 0 : (-shift + s->stride - 1) / s->stride;
  *hi = s->w - shift <= 0 ? 0 : (s->w - shift + s->stride - 1) / s->stride;
  if (*hi > s->ow) *hi = s->ow;
  if (*lo > *hi) *lo = *hi;
}

/* Output row oy of tap (i, j): x's row oy stride + i - pad read at columns
 * ox stride + j - pad, 0 in the padding; the padding's columns found once a
 * tap (columns_inside), so the copy itself has no test (a test an element
 * kept it scalar: 2.5% of fashion_cnn's step). */
static void tap_row(const conv_shape *s, const float *x, int64_t i, int64_t j, int64_t lo,
                    int64_t hi, int64_t oy, float *row) {
  int64_t iy = oy * s->stride + i - s->pad, shift = j - s->pad;
  if (iy < 0 || iy >= s->h) {
    memset(row, 0, (size_t)s->ow * sizeof *row);
    return;
  }
  memset(row, 0, (size_t)lo * sizeof *row);
  const float *in = x + iy * s->w;
  if (s->stride == 1 && hi > lo)
    memcpy(row + lo, in + lo + shift, (size_t)(hi - lo) * sizeof *row);
  else
    for (int64_t ox = lo; ox < hi; ox++) row[ox] = in[ox * s->stride + shift];
  memset(row + hi, 0, (size_t)(s->ow - hi) * sizeof *row);
}

/* col[i k + j][oy ow + ox] = x at (oy stride + i - pad, ox stride + j - pad),
 * 0 in the padding. */
static void im2col_one_channel(const conv_shape *s, const float *x, float *col) {
  for (int64_t i = 0; i < s->k; i++)
    for (int64_t j = 0; j < s->k; j++) {
      int64_t lo, hi;
      columns_inside(s, j - s->pad, &lo, &hi);
      float *rows = col + (i * s->k + j) * s->oh * s->ow;
      for (int64_t oy = 0; oy < s->oh; oy++) tap_row(s, x, i, j, lo, hi, oy, rows + oy * s->ow);
    }
}

/* The block's partial weight gradient dw [o, k k] from its images x and
 * their output gradients dy, col the slot's im2col_bytes. */
static void weights_one_channel(const conv_shape *s, const float *x, const float *dy, float *dw,
                                float *col) {
  int64_t pixels = s->oh * s->ow, taps = s->k * s->k;
  float *rounded_dy = col + im2col_bytes(s) / sizeof(float);
  for (int64_t i = 0; i < s->images; i++) {
    const float *dy_image = dy + i * s->o * pixels;
    im2col_one_channel(s, x + i * s->h * s->w, col);
    if (s->bf16) {
      trc_bf16_round_in_place(col, taps * pixels);
      memcpy(rounded_dy, dy_image, (size_t)(s->o * pixels) * sizeof(float));
      trc_bf16_round_in_place(rounded_dy, s->o * pixels);
      dy_image = rounded_dy;
    }
    trc_sgemm('N', 'T', s->o, taps, pixels, 1.0f, dy_image, pixels, col, pixels, i ? 1.0f : 0.0f, dw,
              taps);
  }
}

/* ---- the blocks ---- */

typedef struct {
  int64_t pass, n, c, h, w, o, k, stride, pad, oh, ow, parts, slots, relu;
  const float *a, *b, *bias;
  float *out;
  float *partials; /* backward-weights: one weight gradient per block */
} conv_job;

/* Block `part`'s shape; its first image in *from. */
static conv_shape block_of(const conv_job *j, int64_t part, int64_t *from) {
  int64_t lo = j->n * part / j->parts, hi = j->n * (part + 1) / j->parts;
  *from = lo;
  return (conv_shape){j->pass, hi - lo, j->c,  j->h,  j->w, j->o, j->k, j->stride,
                      j->pad,  j->oh,   j->ow, trc_get_precision() == TRC_BF16, j->bias != NULL, j->relu};
}

static dnnl_memory_t bind(dnnl_memory_t *mem, const dnnl_memory_desc_t *md, const void *data) {
  if (*mem)
    check(dnnl_memory_set_data_handle(*mem, (void *)data), "memory");
  else
    check(dnnl_memory_create(mem, md, conv.engine, (void *)data), "memory");
  return *mem;
}

static void execute(dnnl_primitive_t primitive, int64_t slot, int n, const dnnl_exec_arg_t *args) {
  check(dnnl_primitive_execute(primitive, conv.streams[slot], n, args), "execute");
  check(dnnl_stream_wait(conv.streams[slot]), "stream");
}

/* Operand i at `data` in the arena, in the primitive's layout: the same
 * bytes, or its copy in the slot (an input reordered into it now, and
 * rounded under emulated bf16). */
static dnnl_memory_t operand_memory(const cached_conv *e, int i, const void *data,
                                    slot_memories *m, char *slot_base, int64_t slot) {
  const operand *op = &e->op[i];
  if (!op->reorder) return bind(&m->inner[i], &op->user, data);
  dnnl_memory_t user = bind(&m->user[i], &op->user, data);
  dnnl_memory_t inner = bind(&m->inner[i], &op->inner, slot_base + op->at);
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, inner}};
  if (i < 2) execute(op->reorder, slot, 2, args);
  if (rounds_in_slot(&e->shape, i))
    trc_bf16_round_in_place((float *)(slot_base + op->at),
                            (int64_t)(dnnl_memory_desc_get_size(&op->inner) / sizeof(float)));
  return inner;
}

/* The tensors of block `part`: forward x, w -> y; backward-data dy, w ->
 * dx; backward-weights x, dy -> its partial dw. */
static void run_block(const conv_job *j, int64_t part, int64_t slot) {
  int64_t from;
  conv_shape s = block_of(j, part, &from);
  int64_t image = j->c * j->h * j->w, out_image = j->o * j->oh * j->ow;
  char *slot_base = conv.workspace + slot * conv.slot_bytes;
  if (weights_by_sgemm(&s)) {
    weights_one_channel(&s, j->a + from * image, j->b + from * out_image,
                        j->partials + part * j->o * j->k * j->k, (float *)slot_base);
    return;
  }
  const cached_conv *e = find_conv(&s);
  const void *data[3];
  if (j->pass == TRC_CONV_FORWARD)
    data[0] = j->a + from * image, data[1] = j->b, data[2] = j->out + from * out_image;
  else if (j->pass == TRC_CONV_BACKWARD_DATA)
    data[0] = j->a + from * out_image, data[1] = j->b, data[2] = j->out + from * image;
  else
    data[0] = j->a + from * image, data[1] = j->b + from * out_image,
    data[2] = j->partials + part * j->o * j->c * j->k * j->k;
  slot_memories *m = &e->mem[slot];
  dnnl_exec_arg_t args[5];
  for (int i = 0; i < 3; i++)
    args[i] = (dnnl_exec_arg_t){e->op[i].arg,
                                operand_memory(e, i, data[i], m, slot_base, slot)};
  args[3] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, bind(&m->scratch, &e->scratch_md, slot_base)};
  if (j->bias) args[4] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bind(&m->bias, &e->bias_md, j->bias)};
  execute(e->primitive, slot, j->bias ? 5 : 4, args);
  if (e->op[2].reorder)
    execute(e->op[2].reorder, slot, 2,
            (dnnl_exec_arg_t[2]){{DNNL_ARG_FROM, m->inner[2]}, {DNNL_ARG_TO, m->user[2]}});
}

/* Slot s runs blocks [parts*s/slots, parts*(s+1)/slots) with scratchpad s. */
static void run_slots(void *ctx, int64_t lo, int64_t hi) {
  const conv_job *j = ctx;
  for (int64_t slot = lo; slot < hi; slot++)
    for (int64_t p = j->parts * slot / j->slots; p < j->parts * (slot + 1) / j->slots; p++)
      run_block(j, p, slot);
}

typedef struct {
  const float *partials;
  float *out;
  int64_t parts, size;
  int accumulate;
} weight_sum;

/* out[i] (+)= partial 0 [i] + partial 1 [i] + ..., in block order. */
static void sum_partials(void *ctx, int64_t lo, int64_t hi) {
  const weight_sum *ws = ctx;
  for (int64_t i = lo; i < hi; i++) {
    float sum = ws->accumulate ? ws->out[i] : 0.0f;
    for (int64_t p = 0; p < ws->parts; p++) sum += ws->partials[p * ws->size + i];
    ws->out[i] = sum;
  }
}

/* The engine, the slots' streams, the blocks' primitives and a workspace
 * large enough for this job (it only grows). */
static void prepare(conv_job *j) {
  if (!conv.engine) check(dnnl_engine_create(&conv.engine, dnnl_cpu, 0), "engine");
  for (int64_t s = 0; s < j->slots; s++)
    if (!conv.streams[s])
      check(dnnl_stream_create(&conv.streams[s], conv.engine, dnnl_stream_default_flags),
            "stream");
  for (int64_t part = 0, from; part < j->parts; part++) {
    conv_shape s = block_of(j, part, &from);
    if (!weights_by_sgemm(&s))
      make_conv(&s);
    else if (sgemm_slot_bytes(&s) > conv.slot_bytes)
      conv.slot_bytes = sgemm_slot_bytes(&s);
  }
  size_t scratch = (size_t)j->slots * conv.slot_bytes;
  size_t partials = j->pass == TRC_CONV_BACKWARD_WEIGHTS
                        ? (size_t)(j->parts * j->o * j->c * j->k * j->k) * sizeof(float)
                        : 0;
  size_t need = aligned(scratch + partials) + ALIGN;
  if (need > conv.workspace_cap) {
    free(conv.workspace);
    conv.workspace = aligned_alloc(ALIGN, need);
    if (!conv.workspace) {
      fprintf(stderr, "trainer: error: out of memory for %zu bytes of convolution workspace\n",
              need);
      trc_comm_abort(1);
    }
    memset(conv.workspace, 0, need); /* touched now: no page faults in later steps */
    conv.workspace_cap = need;
  }
  j->partials = (float *)(conv.workspace + aligned(scratch));
}

void trc_conv2d(int pass, int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t k,
                int64_t stride, int64_t pad, const float *a, const float *b, const float *bias,
                int relu, float *out, int accumulate) {
  conv_job j = {.pass = pass, .n = n, .c = c, .h = h, .w = w, .o = o, .k = k, .stride = stride,
                .pad = pad, .oh = (h + 2 * pad - k) / stride + 1,
                .ow = (w + 2 * pad - k) / stride + 1, .a = a, .b = b, .out = out};
  if (pass == TRC_CONV_FORWARD) j.bias = bias, j.relu = relu;
  j.parts = n < CONV_PARTS ? n : CONV_PARTS;
  j.slots = trc_threads() < j.parts ? trc_threads() : j.parts;
  prepare(&j);
  trc_parallel_for(j.slots, run_slots, &j);
  if (pass != TRC_CONV_BACKWARD_WEIGHTS) return;
  weight_sum ws = {j.partials, out, j.parts, o * c * k * k, accumulate};
  trc_parallel_for(ws.size, sum_partials, &ws);
}

uint64_t trc_conv_workspace_bytes(void) { return conv.workspace_cap; }
