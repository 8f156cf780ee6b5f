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
 *     under fp32 there is no such pass. */
#include "test_passes.h"

#include <math.h>

static const char model[] =
    "model mlp {\n"
    "  input  image : u8[B, 784]\n"
    "  input  label : i32[B]\n"
    "  param  w2    : f32[512, 10] = normal(0, 0.02)\n"
    "  x      = f32(image) / 255.0\n"
    "  h      = relu(linear(x, 512))\n"
    "  logits = h @ w2\n"
    "  loss   = cross_entropy(logits, label)\n"
    "  predict logits\n"
    "}\n"
    "train {\n"
    "  batch 128\n"
    "  optimizer adamw(lr = 1e-3)\n"
    "}\n";

static bool near(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b); }

static Graph *compiled(Compilation *c, SourceFile *src) {
  Diag diag;
  diag_init(&diag, stderr);
  CompileOptions o = {.conv = CONV_LIBRARY, .head_chunk = 32, .dump = PASS_NONE};
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

int main(void) {
  Compilation c = {0};
  SourceFile *src = source_from_string("mlp.nn", model);
  Graph *g = compiled(&c, src);
  CHECK(g, "the model compiles");
  if (g) {
    test_head_rows(g);
    test_bf16_rounding(g);
  }
  compilation_free(&c);
  source_free(src);
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
