/* test_cost.c — what the cost model prices in a library call beside its
 * arithmetic, against counts worked out by hand on a small MLP (batch 128,
 * 784 -> 512 -> 10, the last layer bias-free: a loss head the head pass
 * chunks):
 *   - the loss head's rows: two expf a logit (the sum of exponentials, then
 *     the gradient) and one read and one write of each logit, whatever the
 *     chunk; a chunk's logits are the rows' working set;
 *   - a GEMM under precision bf16 rounds each operand that is not read from
 *     the parameters' bf16 copy in a pass of its own before it multiplies:
 *     4 bytes read and 2 written a value (the first layer's forward rounds
 *     x [128, 784] alone, its weight's gradient [512, 784] dy [128, 512]
 *     and x both);
 *     under fp32 there is no such pass;
 *   - a batched product (bmm, attention's scores and outputs) pays for its
 *     arithmetic and its bytes one after the other, where a single GEMM's
 *     overlap: faster arithmetic and a faster memory each shorten the
 *     former, only one of them the latter;
 *   - dropout's random numbers (one an element) at rng_draws a second;
 *   - each element of a GEMM's A, B and C at gemm_element_seconds: the first
 *     layer's forward and weight gradient, the head's three GEMMs chunk by
 *     chunk (two, and two thirds of its FLOPs, with w2 frozen), a bmm's every matrix, and a one-channel convolution's weight
 *     gradient, which the runtime runs as one GEMM an image (under bf16
 *     its operands rounded first);
 *   - a loop's output written where nothing moved lately costs a read from
 *     memory (write-allocate); a GEMM's does not. */
#include "test_passes.h"

#include <math.h>
#include <stdlib.h>

/* The MLP and its training block, open for one more setting. */
#define MLP_MODEL                                             \
  "model mlp {\n"                                             \
  "  input  image : u8[B, 784]\n"                             \
  "  input  label : i32[B]\n"                                 \
  "  param  w2    : f32[512, 10] = normal(0, 0.02)\n"         \
  "  x      = f32(image) / 255.0\n"                           \
  "  h      = relu(linear(x, 512))\n"                         \
  "  logits = h @ w2\n"                                       \
  "  loss   = cross_entropy(logits, label)\n"                 \
  "  predict logits\n"                                        \
  "}\n"                                                       \
  "train {\n"                                                 \
  "  batch 128\n"                                             \
  "  optimizer adamw(lr = 1e-3)\n"

static const char model[] = MLP_MODEL "}\n";

/* The same with the head's weights frozen. */
static const char frozen_model[] = MLP_MODEL "  freeze \"w2\"\n}\n";

/* One block of causal self-attention, its probabilities stored
 * (--attention whole): its products are bmm nodes; then dropout. */
static const char attention_model[] =
    "model att {\n"
    "  input  x      : f32[B, 64, 128]\n"
    "  input  target : f32[B, 64, 128]\n"
    "  y      = dropout(causal_self_attention(x, 4, dropout = 0), 0.1)\n"
    "  loss   = mse(y, target)\n"
    "}\n"
    "train {\n"
    "  batch 8\n"
    "  optimizer adamw(lr = 1e-3)\n"
    "}\n";

/* One channel in, 4 filters of 3x3 over 8x8 images, batch 16. */
static const char cnn_model[] =
    "model cnn {\n"
    "  input  image : f32[B, 1, 8, 8]\n"
    "  input  label : i32[B]\n"
    "  c1     = relu(conv2d(image, 4, 3, padding = 1))\n"
    "  logits = linear(flatten(c1), 10)\n"
    "  loss   = cross_entropy(logits, label)\n"
    "}\n"
    "train {\n"
    "  batch 16\n"
    "  optimizer adamw(lr = 1e-3)\n"
    "}\n";

static bool near(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b); }

static Graph *compiled_as(Compilation *c, SourceFile *src, AttentionForm attention) {
  Diag diag;
  diag_init(&diag, stderr);
  CompileOptions o = {.conv = CONV_LIBRARY, .head_chunk = 32, .attention = attention, .dump = PASS_NONE};
  return compile_graph(c, src, &o, &diag) ? c->graph : NULL;
}

static void test_head_rows(const Graph *g) {
  CHECK(g->loss_head >= 0, "the head pass made a chunked head");
  if (g->loss_head < 0) return;
  const Node *head = &g->nodes[g->loss_head];
  HeadDims h;
  head_dims(g, head, &h);
  CHECK(h.n == 128 && h.v == 10 && h.chunk == 32, "128 rows of 10 classes, 32 at a time");
  HeadPasses p = head_passes(&h);
  CHECK(p.math_calls == 2.0 * 128 * 10, "two expf a logit: %g", p.math_calls);
  CHECK(p.row_bytes == 2.0 * 128 * 10 * 4, "each logit read and written once: %g", p.row_bytes);
  CHECK(p.row_in_play == 32.0 * 10 * 4, "one chunk's logits in play: %g", p.row_in_play);
  MachineProfile m = profile_default(), fast = m;
  fast.math_calls = 2 * m.math_calls;
  double saved = node_seconds(g, head, &m) - node_seconds(g, head, &fast);
  CHECK(near(saved, p.math_calls / (2 * m.math_calls)), "the head's expf priced: %g s", saved);
}

/* The forward matmul and the weight-gradient matmul of the first layer. */
static void first_layer_gemms(const Graph *g, const Node **forward, const Node **weight_grad) {
  *forward = *weight_grad = NULL;
  for (int i = 0; i < g->n; i++) {
    const Node *n = &g->nodes[i];
    if (n->op != OP_MATMUL || n->shape.rank != 2) continue;
    if (n->grad_of_param < 0 && n->shape.dim[1] == 512) *forward = n;
    if (n->grad_of_param >= 0 && n->shape.dim[1] == 784) *weight_grad = n;
  }
}

static void test_bf16_rounding(Graph *g) {
  const Node *forward, *weight_grad;
  first_layer_gemms(g, &forward, &weight_grad);
  CHECK(forward && weight_grad, "the first layer's forward and weight-gradient GEMMs");
  if (!forward || !weight_grad) return;
  MachineProfile m = profile_default();
  m.gemm_bf16_flops = m.gemm_flops; /* the same arithmetic: what differs is the rounding */
  g->train.run.precision = TRC_FP32;
  double f32_forward = node_seconds(g, forward, &m), f32_grad = node_seconds(g, weight_grad, &m);
  g->train.run.precision = TRC_BF16;
  double rounding = node_seconds(g, forward, &m) - f32_forward;
  CHECK(near(rounding, memory_seconds(3.0 * 2 * 128 * 784, &m)), "x rounded, w from the copy: %g s",
        rounding);
  rounding = node_seconds(g, weight_grad, &m) - f32_grad;
  CHECK(near(rounding, memory_seconds(3.0 * 2 * (128 * 784 + 128 * 512), &m)),
        "x and dy both rounded: %g s", rounding);
  g->train.run.precision = TRC_FP32;
}

/* What gemm_element_seconds = 1 ns adds to node n. */
static double element_seconds_added(const Graph *g, const Node *n) {
  MachineProfile m = profile_default(), priced = m;
  priced.gemm_element_seconds = 1e-9;
  return node_seconds(g, n, &priced) - node_seconds(g, n, &m);
}

static void test_gemm_elements(const Graph *g) {
  const Node *forward, *weight_grad;
  first_layer_gemms(g, &forward, &weight_grad);
  if (!forward || !weight_grad || g->loss_head < 0) return;
  /* x [128, 784], w [512, 784], y [128, 512]: the same three matrices */
  double layer = 128.0 * 784 + 512.0 * 784 + 128.0 * 512;
  CHECK(near(element_seconds_added(g, forward), 1e-9 * layer), "forward: %g s",
        element_seconds_added(g, forward));
  CHECK(near(element_seconds_added(g, weight_grad), 1e-9 * layer), "weight gradient: %g s",
        element_seconds_added(g, weight_grad));
  /* 4 chunks of 32 rows: logits [32, 10], dx [32, 512], w2's gradient [512, 10] */
  double chunks = 0;
  for (int first = 0; first < 128; first += 32) chunks += 3 * (32.0 * 10 + 32.0 * 512 + 512.0 * 10);
  CHECK(near(element_seconds_added(g, &g->nodes[g->loss_head]), 1e-9 * chunks), "the head: %g s",
        element_seconds_added(g, &g->nodes[g->loss_head]));
}

/* With w2 frozen the head makes no gradient for it: two GEMMs a chunk. */
static void test_frozen_head(const Graph *g) {
  CHECK(g->loss_head >= 0, "the head pass made a chunked head");
  if (g->loss_head < 0) return;
  const Node *head = &g->nodes[g->loss_head];
  double flops = op_info(OP_LINEAR_CROSS_ENTROPY)->flops(g, head);
  CHECK(flops == 2 * 2.0 * 128 * 512 * 10, "the logits and dx: %g FLOPs", flops);
  double chunks = 4 * 2 * (32.0 * 10 + 32.0 * 512 + 512.0 * 10);
  CHECK(near(element_seconds_added(g, head), 1e-9 * chunks), "two GEMMs a chunk: %g s",
        element_seconds_added(g, head));
}

static void test_conv_weights_by_gemm(Graph *g) {
  const Node *dw = NULL;
  for (int i = 0; i < g->n && !dw; i++)
    if (g->nodes[i].op == OP_CONV2D_GRAD_WEIGHT) dw = &g->nodes[i];
  CHECK(dw, "the convolution's weight gradient");
  if (!dw) return;
  /* per image: dy [4, 64], the shifted copies [9, 64], dw [4, 9] */
  double per_image = 4.0 * 64 + 9.0 * 64 + 4.0 * 9;
  CHECK(near(element_seconds_added(g, dw), 1e-9 * 16 * per_image), "one GEMM an image: %g s",
        element_seconds_added(g, dw));
  g->train.run.precision = TRC_BF16;
  CHECK(near(element_seconds_added(g, dw), 1e-9 * 16 * per_image), "bf16: the same GEMMs: %g s",
        element_seconds_added(g, dw));
  /* bf16 rounds the copies in place (8 bytes more a copy) and a copy of dy
   * (16 bytes a value), at the memory's rate */
  MachineProfile m = profile_default();
  m.bandwidth = m.cache_bandwidth = 1e9;
  double bf16 = node_seconds(g, dw, &m);
  g->train.run.precision = TRC_FP32;
  double rounding = bf16 - node_seconds(g, dw, &m);
  CHECK(near(rounding, 16 * (8.0 * 9 * 64 + 16.0 * 4 * 64) / 1e9), "bf16's rounding: %g s", rounding);
}

/* How much node n's time falls with twice the GEMM rate, and with twice
 * the memory's rates. */
static void time_saved(const Graph *g, const Node *n, double *by_arithmetic, double *by_memory) {
  MachineProfile m = profile_default(), fast_gemm = m, fast_memory = m;
  fast_gemm.gemm_flops *= 2;
  fast_memory.bandwidth *= 2;
  fast_memory.cache_bandwidth *= 2;
  *by_arithmetic = node_seconds(g, n, &m) - node_seconds(g, n, &fast_gemm);
  *by_memory = node_seconds(g, n, &m) - node_seconds(g, n, &fast_memory);
}

static void test_batched_traffic(const Graph *g) {
  const Node *bmm = NULL, *matmul = NULL;
  for (int i = 0; i < g->n; i++) {
    if (g->nodes[i].op == OP_BMM && !bmm) bmm = &g->nodes[i];
    if (g->nodes[i].op == OP_MATMUL && !matmul) matmul = &g->nodes[i];
  }
  CHECK(bmm && matmul, "attention's bmm and a projection's matmul");
  if (!bmm || !matmul) return;
  double arithmetic, memory;
  time_saved(g, bmm, &arithmetic, &memory);
  MachineProfile m = profile_default();
  CHECK(near(arithmetic, op_info(OP_BMM)->flops(g, bmm) / (2 * m.gemm_flops)),
        "a bmm's FLOPs priced whole: %g s", arithmetic);
  CHECK(memory > 0, "a bmm's bytes priced beside its FLOPs: %g s", memory);
  GemmDims d;
  gemm_dims(g, bmm, &d);
  double per_matrix = (double)(d.m * d.k + d.k * d.n + d.m * d.n);
  CHECK(d.batch * d.heads == 8 * 4 && near(element_seconds_added(g, bmm), 1e-9 * 32 * per_matrix),
        "a bmm's every matrix: %g s", element_seconds_added(g, bmm));
  time_saved(g, matmul, &arithmetic, &memory);
  CHECK((arithmetic > 0) != (memory > 0), "a matmul's arithmetic hides its bytes or they it: %g %g s",
        arithmetic, memory);
}

static void test_dropout_draws(const Graph *g) {
  const Node *drop = NULL;
  for (int i = 0; i < g->n && !drop; i++)
    if (g->nodes[i].op == OP_DROPOUT) drop = &g->nodes[i];
  CHECK(drop, "a dropout node");
  if (!drop) return;
  MachineProfile m = profile_default(), fast = m;
  fast.rng_draws *= 2;
  double saved = node_seconds(g, drop, &m) - node_seconds(g, drop, &fast);
  CHECK(near(saved, 8.0 * 64 * 128 / (2 * m.rng_draws)), "a draw an element priced: %g s", saved);
}

/* The seconds the program prices the first forward kernel of an `op` node
 * at, under m: the shares of the node and of the values fused into it. */
static double first_kernel_seconds(const Program *p, OpKind op, const MachineProfile *m) {
  int at = -1;
  for (int t = 0; t < p->n_forward && at < 0; t++)
    if (p->g->nodes[p->forward[t]].op == op) at = p->forward[t];
  double *seconds = program_node_seconds(p, m, NULL), sum = 0;
  for (int i = 0; at >= 0 && i < p->g->n; i++)
    if (i == at || p->fused_into[i] == at || p->stored_by[i] == at) sum += seconds[i];
  free(seconds);
  return at >= 0 ? sum : -1;
}

/* A loop writing where nothing moved this step (forward's first relu, h,
 * stored for backward) fetches its lines from memory first: its output
 * costs what reading it from memory does, unless the whole arena fits in
 * the cache (then the last step left it there). A GEMM writes behind its
 * arithmetic: its output costs nothing either way. Memory at 1 GB/s, the
 * cache and the arithmetic all but free. */
static void test_cold_writes(Graph *g) {
  Program *p = program_build(g, NULL);
  MachineProfile m = profile_default();
  m.bandwidth = 1e9, m.cache_bandwidth = 1e15, m.loop_flops = m.gemm_flops = 1e18;
  m.kernel_overhead = m.gemm_element_seconds = 0;
  m.cache_bytes = (int)p->arena_bytes - 1;
  double relu_spilled = first_kernel_seconds(p, OP_RELU, &m), gemm_spilled = first_kernel_seconds(p, OP_MATMUL, &m);
  m.cache_bytes = (int)p->arena_bytes;
  double relu_fits = first_kernel_seconds(p, OP_RELU, &m), gemm_fits = first_kernel_seconds(p, OP_MATMUL, &m);
  double h = 128.0 * 512 * 4 / 1e9; /* h's bytes from memory */
  CHECK(relu_spilled > 0.75 * h && relu_spilled < 1.01 * h, "relu writes h from memory: %g s", relu_spilled);
  CHECK(relu_fits >= 0 && relu_fits < 0.01 * h, "the arena in the cache: %g s", relu_fits);
  CHECK(gemm_spilled > 0 && gemm_spilled == gemm_fits, "the GEMM's output behind its arithmetic: %g, %g s",
        gemm_spilled, gemm_fits);
  program_free(p);
}

static void mlp_tests(Graph *g) {
  test_cold_writes(g);
  test_head_rows(g);
  test_bf16_rounding(g);
  test_gemm_elements(g);
}

static void frozen_tests(Graph *g) { test_frozen_head(g); }

static void attention_tests(Graph *g) {
  test_batched_traffic(g);
  test_dropout_draws(g);
}

/* Compiles model `text` and runs `tests` on its graph. */
static void on_model(const char *name, const char *text, AttentionForm attention,
                     void (*tests)(Graph *)) {
  Compilation c = {0};
  SourceFile *src = source_from_string(name, text);
  Graph *g = compiled_as(&c, src, attention);
  CHECK(g, "%s compiles", name);
  if (g) tests(g);
  compilation_free(&c);
  source_free(src);
}

int main(void) {
  on_model("mlp.nn", model, ATTENTION_AUTO, mlp_tests);
  on_model("frozen.nn", frozen_model, ATTENTION_AUTO, frozen_tests);
  on_model("att.nn", attention_model, ATTENTION_WHOLE, attention_tests);
  on_model("cnn.nn", cnn_model, ATTENTION_AUTO, test_conv_weights_by_gemm);
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
