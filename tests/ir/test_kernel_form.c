/* test_kernel_form.c — kernel_form (ir.h): kernels that differ only in the
 * buffers they touch, or in dropout's random stream, have one code; any
 * other difference (an op, a constant, a shape, an element type, which input
 * is which, a GEMM's transpose) gives another; parameters come in their
 * order (own buffer, inputs, others) with their roles. */
#include "ir.h"
#include "check.h"

#include <string.h>


static int leaf(Graph *g, OpKind op, DType t, Shape s) {
  int id = graph_add(g, op, NULL, 0, (SrcLoc){0}, NULL);
  g->nodes[id].dtype = t;
  g->nodes[id].shape = s;
  return id;
}

/* Node id's form (its kernel from the op table; NULL for a GEMM). */
static KernelForm form_of(Graph *g, int id) {
  const Node *n = &g->nodes[id];
  Kernel *k = op_info(n->op)->op_class == OPC_GEMM ? NULL : op_info(n->op)->kernel(g, n);
  KernelForm f = kernel_form(g, id, k);
  kernel_free(k);
  return f;
}

static int add(Graph *g, OpKind op, int a, int b, double f0, int64_t i0, int64_t i1) {
  int in[2] = {a, b};
  return graph_add_attr(g, op, in, b < 0 ? 1 : 2, f0, i0, i1, (SrcLoc){0}, NULL);
}

/* Whether nodes a and b have one code; both forms freed. */
static bool same_code(Graph *g, int a, int b) {
  KernelForm fa = form_of(g, a), fb = form_of(g, b);
  bool same = !strcmp(fa.code, fb.code);
  kernel_form_free(&fa);
  kernel_form_free(&fb);
  return same;
}

int main(void) {
  Graph *g = graph_new();
  Shape rows = {.rank = 2, .dim = {4, 8}}, vec = {.rank = 1, .dim = {8}};
  int x = leaf(g, OP_PARAM, DT_F32, rows), y = leaf(g, OP_PARAM, DT_F32, rows);
  int w1 = leaf(g, OP_PARAM, DT_F32, vec), w2 = leaf(g, OP_PARAM, DT_F32, vec);
  int x3 = leaf(g, OP_PARAM, DT_F32, (Shape){.rank = 2, .dim = {4, 9}});
  int key = leaf(g, OP_RNG_KEY, DT_I32, (Shape){.rank = 1, .dim = {2}});
  int on = leaf(g, OP_TRAINING, DT_F32, (Shape){0});

  int a1 = add(g, OP_ADD, x, w1, 0, 0, 0), a2 = add(g, OP_ADD, y, w2, 0, 0, 0);
  CHECK(same_code(g, a1, a2), "x + w1 and y + w2");
  CHECK(!same_code(g, a1, add(g, OP_MUL, x, w1, 0, 0, 0)), "add and mul");
  CHECK(!same_code(g, a1, add(g, OP_ADD, x, y, 0, 0, 0)), "a broadcast and a plain add");
  CHECK(!same_code(g, add(g, OP_MUL_SCALAR, x, -1, 2.0, 0, 0),
                   add(g, OP_MUL_SCALAR, x, -1, 3.0, 0, 0)),
        "x * 2 and x * 3");
  CHECK(!same_code(g, add(g, OP_RELU, x, -1, 0, 0, 0), add(g, OP_RELU, x3, -1, 0, 0, 0)),
        "relu of [4, 8] and of [4, 9]");
  CHECK(same_code(g, add(g, OP_SUB, x, y, 0, 0, 0), add(g, OP_SUB, y, x, 0, 0, 0)),
        "x - y and y - x are in0 - in1");

  int m1 = add(g, OP_MATMUL, x, y, 0, 0, 1), m2 = add(g, OP_MATMUL, y, x, 0, 0, 1);
  CHECK(same_code(g, m1, m2), "x y^T and y x^T");
  CHECK(!same_code(g, m1, add(g, OP_MATMUL, x, y, 0, 1, 0)), "x y^T and x^T y");

  /* the parameters: own buffer, inputs in order (an input used twice once) */
  KernelForm f = form_of(g, add(g, OP_ADD, y, x, 0, 0, 0));
  CHECK(f.n_params == 3 && f.params[1] == y && f.params[2] == x, "out, in0, in1");
  CHECK(f.roles[0] == KP_OUT && f.roles[1] == KP_IN0 && f.roles[2] == KP_IN0 + 1, "roles");
  CHECK(kernel_form_param(&f, x) == 2 && kernel_form_param(&f, w1) == -1, "positions");
  kernel_form_free(&f);
  f = form_of(g, add(g, OP_MUL, x, x, 0, 0, 0));
  CHECK(f.n_params == 2, "x * x takes x once");
  kernel_form_free(&f);

  /* dropout: the stream is a parameter, the probability is code */
  int d1[3] = {x, key, on}, d2[3] = {y, key, on};
  int drop1 = graph_add_attr(g, OP_DROPOUT, d1, 3, 0.1, 4, 0, (SrcLoc){0}, NULL);
  int drop2 = graph_add_attr(g, OP_DROPOUT, d2, 3, 0.1, 7, 0, (SrcLoc){0}, NULL);
  int drop3 = graph_add_attr(g, OP_DROPOUT, d2, 3, 0.2, 7, 0, (SrcLoc){0}, NULL);
  CHECK(same_code(g, drop1, drop2), "dropouts of streams 4 and 7");
  CHECK(!same_code(g, drop1, drop3), "dropouts of p 0.1 and 0.2");
  f = form_of(g, drop2);
  CHECK(f.n_streams == 1 && f.streams[0] == 7 && kernel_form_stream(&f, 7) == 0 &&
            kernel_form_stream(&f, 4) == -1,
        "dropout's stream");
  kernel_form_free(&f);
  graph_free(g);
  return failures != 0;
}
