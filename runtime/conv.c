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
 * the arena, whose size trc_conv_workspace_bytes reports. */
#include "rt_internal.h"

#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CONV_PARTS = 8, ALIGN = 64 };

/* What one block's primitive depends on. All 8-byte fields: compared with
 * memcmp. */
typedef struct {
  int64_t pass, images, c, h, w, o, k, stride, pad, oh, ow;
} conv_shape;

typedef struct {
  conv_shape shape;
  dnnl_primitive_t primitive;
  dnnl_memory_desc_t src_md, weights_md, dst_md, scratch_md;
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
                     dnnl_format_tag_t tag) {
  dnnl_dims_t dims = {d0, d1, d2, d3};
  check(dnnl_memory_desc_init_by_tag(md, 4, dims, dnnl_f32, tag), "memory descriptor");
}

/* The convolution's descriptor for one block; src/weights/dst are the
 * tensors of the forward convolution (their gradients for the backward
 * passes). */
static void conv_desc(dnnl_convolution_desc_t *d, int64_t pass, const cached_conv *e) {
  const conv_shape *s = &e->shape;
  dnnl_dims_t strides = {s->stride, s->stride}, pad = {s->pad, s->pad};
  /* the right/bottom padding that makes the output exactly oh x ow */
  dnnl_dims_t pad_r = {(s->oh - 1) * s->stride + s->k - s->h - s->pad,
                       (s->ow - 1) * s->stride + s->k - s->w - s->pad};
  const dnnl_alg_kind_t direct = dnnl_convolution_direct;
  if (pass == TRC_CONV_FORWARD)
    check(dnnl_convolution_forward_desc_init(d, dnnl_forward_training, direct, &e->src_md,
                                             &e->weights_md, NULL, &e->dst_md, strides, pad,
                                             pad_r),
          "convolution descriptor");
  else if (pass == TRC_CONV_BACKWARD_DATA)
    check(dnnl_convolution_backward_data_desc_init(d, direct, &e->src_md, &e->weights_md,
                                                   &e->dst_md, strides, pad, pad_r),
          "convolution descriptor");
  else
    check(dnnl_convolution_backward_weights_desc_init(d, direct, &e->src_md, &e->weights_md, NULL,
                                                      &e->dst_md, strides, pad, pad_r),
          "convolution descriptor");
}

static dnnl_primitive_desc_t primitive_desc(int64_t pass, const cached_conv *e,
                                            const_dnnl_primitive_desc_t hint) {
  dnnl_convolution_desc_t d;
  conv_desc(&d, pass, e);
  dnnl_primitive_attr_t attr;
  check(dnnl_primitive_attr_create(&attr), "attributes");
  check(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "scratchpad");
  dnnl_primitive_desc_t pd;
  check(dnnl_primitive_desc_create(&pd, &d, attr, conv.engine, hint), "convolution");
  dnnl_primitive_attr_destroy(attr);
  return pd;
}

/* The backward passes' primitives take the forward one's as a hint. */
static void create_conv(cached_conv *e) {
  const conv_shape *s = &e->shape;
  plain_md(&e->src_md, s->images, s->c, s->h, s->w, dnnl_nchw);
  plain_md(&e->weights_md, s->o, s->c, s->k, s->k, dnnl_oihw);
  plain_md(&e->dst_md, s->images, s->o, s->oh, s->ow, dnnl_nchw);
  dnnl_primitive_desc_t forward = primitive_desc(TRC_CONV_FORWARD, e, NULL), pd = forward;
  if (s->pass != TRC_CONV_FORWARD) pd = primitive_desc(s->pass, e, forward);
  e->scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
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
  if (conv.cached == conv.cache_cap) {
    int cap = conv.cache_cap ? 2 * conv.cache_cap : 16;
    cached_conv *grown = realloc(conv.cache, (size_t)cap * sizeof *grown);
    if (!grown) check(dnnl_out_of_memory, "primitive cache");
    conv.cache = grown, conv.cache_cap = cap;
  }
  cached_conv *e = &conv.cache[conv.cached++];
  memset(e, 0, sizeof *e);
  e->shape = *s;
  create_conv(e);
  size_t need = aligned(dnnl_memory_desc_get_size(&e->scratch_md));
  if (need > conv.slot_bytes) conv.slot_bytes = need;
}

/* ---- the blocks ---- */

typedef struct {
  int64_t pass, n, c, h, w, o, k, stride, pad, oh, ow, parts, slots;
  const float *a, *b;
  float *out;
  float *partials; /* backward-weights: one weight gradient per block */
} conv_job;

/* Block `part`'s shape; its first image in *from. */
static conv_shape block_of(const conv_job *j, int64_t part, int64_t *from) {
  int64_t lo = j->n * part / j->parts, hi = j->n * (part + 1) / j->parts;
  *from = lo;
  return (conv_shape){j->pass, hi - lo, j->c, j->h, j->w, j->o, j->k, j->stride, j->pad, j->oh,
                      j->ow};
}

static dnnl_memory_t memory(const dnnl_memory_desc_t *md, const void *data) {
  dnnl_memory_t mem;
  check(dnnl_memory_create(&mem, md, conv.engine, (void *)data), "memory");
  return mem;
}

/* The tensors of block `part`: forward x, w -> y; backward-data dy, w ->
 * dx; backward-weights x, dy -> its partial dw. */
static void run_block(const conv_job *j, int64_t part, int64_t slot) {
  int64_t from;
  conv_shape s = block_of(j, part, &from);
  const cached_conv *e = find_conv(&s);
  int64_t image = j->c * j->h * j->w, out_image = j->o * j->oh * j->ow;
  dnnl_exec_arg_t args[4];
  if (j->pass == TRC_CONV_FORWARD) {
    args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, memory(&e->src_md, j->a + from * image)};
    args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, memory(&e->weights_md, j->b)};
    args[2] = (dnnl_exec_arg_t){DNNL_ARG_DST, memory(&e->dst_md, j->out + from * out_image)};
  } else if (j->pass == TRC_CONV_BACKWARD_DATA) {
    args[0] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, memory(&e->dst_md, j->a + from * out_image)};
    args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, memory(&e->weights_md, j->b)};
    args[2] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, memory(&e->src_md, j->out + from * image)};
  } else {
    float *partial = j->partials + part * j->o * j->c * j->k * j->k;
    args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, memory(&e->src_md, j->a + from * image)};
    args[1] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, memory(&e->dst_md, j->b + from * out_image)};
    args[2] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_WEIGHTS, memory(&e->weights_md, partial)};
  }
  args[3] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD,
                              memory(&e->scratch_md, conv.workspace + slot * conv.slot_bytes)};
  check(dnnl_primitive_execute(e->primitive, conv.streams[slot], 4, args), "execute");
  check(dnnl_stream_wait(conv.streams[slot]), "stream");
  for (int m = 0; m < 4; m++) dnnl_memory_destroy(args[m].memory);
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
    make_conv(&s);
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
                int64_t stride, int64_t pad, const float *a, const float *b, float *out,
                int accumulate) {
  conv_job j = {.pass = pass, .n = n, .c = c, .h = h, .w = w, .o = o, .k = k, .stride = stride,
                .pad = pad, .oh = (h + 2 * pad - k) / stride + 1,
                .ow = (w + 2 * pad - k) / stride + 1, .a = a, .b = b, .out = out};
  j.parts = n < CONV_PARTS ? n : CONV_PARTS;
  j.slots = trc_threads() < j.parts ? trc_threads() : j.parts;
  prepare(&j);
  trc_parallel_for(j.slots, run_slots, &j);
  if (pass != TRC_CONV_BACKWARD_WEIGHTS) return;
  weight_sum ws = {j.partials, out, j.parts, o * c * k * k, accumulate};
  trc_parallel_for(ws.size, sum_partials, &ws);
}

uint64_t trc_conv_workspace_bytes(void) { return conv.workspace_cap; }
