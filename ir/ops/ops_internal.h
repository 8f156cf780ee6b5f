/* ops_internal.h — what ir/ops/'s files share. Together they define what
 * every op is: its shape rule, cost, backward rule and kernel, side by side,
 * one op or op family at a time (as llm.c keeps layernorm_forward beside
 * layernorm_backward), one file per family. ir/ops.def lists the ops with
 * their class, model-file name and these functions; common.c's table ties
 * the two together. ir.h is ir's interface; this header is not.
 *
 * Kernels are loop nests (ir.h). Pointwise ops only give their scalar formula;
 * pointwise_kernel() wraps it in loops with broadcasting. Row ops (softmax,
 * layernorm, cross-entropy) work on the last axis: R rows of C columns. A
 * kernel whose node has grad_of_param >= 0 adds into that parameter's gradient
 * instead of overwriting its output. */
#ifndef TRAINC_OPS_INTERNAL_H
#define TRAINC_OPS_INTERNAL_H

#include "ir.h"

/* The parts of an op's record (OpInfo, ir.h), as function types. */
typedef bool OpInfer(const Graph *g, Node *n, Diag *diag);
typedef double OpFlops(const Graph *g, const Node *n);
typedef void OpBackward(Graph *g, int n, int dy, const bool want[IR_MAX_IN], int dx[IR_MAX_IN]);
typedef Kernel *OpKernel(const Graph *g, const Node *n);
typedef void OpPrintAttrs(FILE *out, const Node *n);

/* ---- common.c */

const Node *in_node(const Graph *g, const Node *n, int i);
bool want_f32(const Graph *g, const Node *n, int i, Diag *diag);
bool want_int(const Graph *g, const Node *n, int i, Diag *diag);
int64_t last_dim(const Shape *s);
int64_t rows_of(const Shape *s);
bool accumulates(const Node *n);

/* Backward rules build their nodes with these (shapes cannot fail). Their
 * location is left empty: autodiff gives every node a rule makes the
 * location (and origin) of the forward node whose rule it is. */
static const SrcLoc no_loc;
int add1(Graph *g, OpKind op, int a);
int add2(Graph *g, OpKind op, int a, int b);
int add3(Graph *g, OpKind op, int a, int b, int c, double f0);

/* An op on one input with the attributes `attr`. */
int add_with(Graph *g, OpKind op, int x, const Attr *attr);

/* The FLOP count of a loop kernel: k per element touched. */
double flops_per_element(const Graph *g, const Node *n, double k);

/* out[...] = 0 over the whole output — unless the kernel accumulates into a
 * gradient slot, which the runtime zeroes once per optimizer step. */
void zero_output(Kernel *k, const Node *n);

typedef KExpr *(*ScalarFn)(Kernel *k, const Node *n, KExpr **x);

/* Index of element (vars) of `out` in an input broadcast to it. */
KExpr *broadcast_index(Kernel *k, const Shape *out, const Shape *in, const int *vars);

/* Loops over every element of n's output (one flat loop when no input is
 * broadcast, so the innermost loop is long and contiguous). */
Kernel *pointwise_kernel(const Graph *g, const Node *n, ScalarFn fn);

#define POINTWISE(fn)                                                          \
  Kernel *kernel_##fn(const Graph *g, const Node *n) { return pointwise_kernel(g, n, s_##fn); }

/* ---- pointwise.c */

/* The width of the column blocks sum_to splits a kept last axis of `cols`
 * columns into (at least two blocks); 0: none fits. */
int64_t sum_to_block(int64_t cols);

/* ---- rows.c */

/* A row kernel: for each of R rows, `body` fills in the loops over C columns.
 * row_base(r) = r * C is the index of the row's first element. */
typedef struct {
  Kernel *k;
  KStmt *row;   /* the loop over rows */
  int r;        /* its variable */
  int64_t cols;
  /* Attention's row kernels (block_row_loop): the rows come in blocks of
   * `block_rows`, row r of block `block` (a loop around the row loop; -1:
   * none) — a causal kernel's [T, T] matrices, a masked softmax's batch
   * elements. Loads of buffer `scaled` are multiplied by `scale` (-1:
   * none). A causal kernel's column loops run over c <= r only, or with
   * `diagonal_mask` over the whole row, the columns past the diagonal
   * masked. With a `key_mask` (a [blocks, cols] 0/1 buffer; -1: none) or
   * the diagonal mask a masked column adds a reduction's identity and
   * stores 0. */
  int block, scaled, key_mask;
  int64_t block_rows;
  bool causal, diagonal_mask;
  double scale;
} RowLoop;

/* The row number: r, or block * block_rows + r. */
KExpr *row_number(RowLoop *rl);
RowLoop row_loop(const Graph *g, const Node *n, const Shape *shape);
KExpr *row_index(RowLoop *rl, int c);
KExpr *row_elem(RowLoop *rl, int buf, int c);

/* Declares a local holding a reduction of f(column c) over the row (masked
 * columns add init, op's identity). */
int row_reduce(RowLoop *rl, KBinaryOp op, double init, KExpr *(*f)(RowLoop *, int c, const void *),
               const void *ctx);

typedef struct {
  int buf, shift_local, other_buf;
} RowCtx;

KExpr *f_elem(RowLoop *rl, int c, const void *ctx);
KExpr *f_product(RowLoop *rl, int c, const void *ctx);
KExpr *f_square_shifted(RowLoop *rl, int c, const void *ctx);

/* max and log-sum-exp of row `buf`: locals m and lse = m + log(sum exp(x-m)). */
void row_logsumexp(RowLoop *rl, int buf, int *m, int *lse);

/* Stores f(c) over the row into n's output (0 in masked columns). */
void row_store(RowLoop *rl, const Node *n, KExpr *(*f)(RowLoop *, int c, const void *), const void *ctx);
bool infer_rows(const Graph *g, Node *n, Diag *diag);

typedef struct {
  int x, lse, dy, s, y, label;
  int row_scale, row_label; /* cross_entropy_grad's locals (row_label: -1, none) */
} SoftCtx;

KExpr *f_softmax(RowLoop *rl, int c, const void *p);

/* softmax: dx = y * (dy - sum(dy * y)). */
KExpr *f_softmax_grad(RowLoop *rl, int c, const void *p);

/* ---- norm.c */

/* Column c of block b of w columns (w = 0: no blocks, column c). */
KExpr *block_col(Kernel *k, int b, int64_t w, int c);

/* ---- attention.c */

/* The rows of n's output in `blocks` blocks (a loop over the blocks around
 * the loop over their rows), loads of `scaled` multiplied by n's scale. */
RowLoop block_row_loop(const Node *n, int64_t blocks, int scaled);

/* ---- images.c */

/* Images are [N, C, H, W]; a window of `size` at `stride` fits H and W. */
bool want_image(const Graph *g, Node *n, int64_t size, int64_t stride, Diag *diag);
int64_t windows(int64_t extent, int64_t size, int64_t stride);

/* ---- each family's parts of the op table (common.c's own are static there) */

/* pointwise.c */
OpInfer infer_cast, infer_broadcast, infer_scalar_out;
OpBackward bwd_add, bwd_sub, bwd_mul, bwd_div, bwd_neg, bwd_identity, bwd_mul_scalar, bwd_relu,
    bwd_gelu, bwd_tanh, bwd_sigmoid, bwd_silu, bwd_exp, bwd_log, bwd_sum;
OpKernel kernel_cast, kernel_add, kernel_sub, kernel_mul, kernel_div, kernel_neg, kernel_add_scalar,
    kernel_mul_scalar, kernel_relu, kernel_relu_grad, kernel_gelu, kernel_gelu_grad, kernel_tanh,
    kernel_tanh_grad, kernel_sigmoid, kernel_sigmoid_grad, kernel_silu, kernel_silu_grad,
    kernel_exp, kernel_log, kernel_sum, kernel_sum_to, kernel_copy;

/* matmul.c */
OpInfer infer_matmul, infer_bmm, infer_conv2d;
OpFlops flops_matmul, flops_bmm, flops_conv2d;
OpBackward bwd_matmul, bwd_bmm, bwd_conv2d;
OpPrintAttrs print_transpose, print_conv;
/* n values' bf16 copy as the bf16 GEMM's operand buffer holds it (ir.h,
 * node_bf16_operand_bytes): 2 bytes each, padded to BF16_COPY_ALIGN. */
uint64_t bf16_copy_bytes(int64_t values);

/* rows.c */
OpInfer infer_row_values, infer_cross_entropy;
OpFlops flops_cross_entropy;
OpBackward bwd_softmax, bwd_log_softmax, bwd_cross_entropy;
OpKernel kernel_softmax, kernel_log_softmax, kernel_softmax_grad, kernel_log_softmax_grad,
    kernel_logsumexp, kernel_cross_entropy, kernel_cross_entropy_grad;
OpPrintAttrs print_ignore;

/* storage.c */
OpInfer infer_to_bf16, infer_from_bf16;

/* head.c */
OpInfer infer_linear_cross_entropy, infer_head_loss;
OpFlops flops_linear_cross_entropy, flops_head_loss;
OpBackward bwd_linear_cross_entropy, bwd_head_loss;
OpKernel kernel_head_loss;
OpPrintAttrs print_head;
uint64_t head_bf16_operand_bytes(const Graph *g, const Node *n, bool weights_copied);

/* norm.c */
OpInfer infer_layernorm, infer_layernorm_stats, infer_layernorm_grad_gamma;
OpBackward bwd_layernorm;
OpKernel kernel_layernorm_stats, kernel_layernorm, kernel_layernorm_grad,
    kernel_layernorm_grad_gamma;

/* embedding.c */
OpInfer infer_embedding, infer_position_pool;
OpBackward bwd_embedding, bwd_cls_pool, bwd_mean_pool;
OpKernel kernel_embedding, kernel_embedding_grad, kernel_cls_pool, kernel_cls_pool_grad,
    kernel_mean_pool, kernel_mean_pool_grad;
OpPrintAttrs print_padding_idx;

/* layout.c */
OpInfer infer_reshape, infer_slice, infer_permute;
OpBackward bwd_reshape, bwd_slice, bwd_permute;
OpKernel kernel_reshape, kernel_slice_grad, kernel_permute;
OpPrintAttrs print_input, print_param, print_start, print_axes;

/* attention.c */
OpInfer infer_causal_mask, infer_masked_softmax, infer_dropout;
OpFlops flops_masked_softmax, flops_masked_softmax_grad, flops_causal_softmax,
    flops_causal_softmax_grad;
OpBackward bwd_causal_mask, bwd_scaled_softmax, bwd_dropout;
OpKernel kernel_causal_mask, kernel_causal_mask_grad, kernel_causal_softmax,
    kernel_causal_softmax_grad, kernel_masked_softmax, kernel_masked_softmax_grad, kernel_dropout;
OpPrintAttrs print_scale, print_dropout;
OpInfer infer_causal_attention;
OpFlops flops_causal_attention, flops_causal_attention_grad;
OpBackward bwd_causal_attention;
OpPrintAttrs print_attention;

/* images.c */
OpInfer infer_pad, infer_pool, infer_im2col;
OpBackward bwd_pad, bwd_maxpool, bwd_avgpool, bwd_im2col;
OpKernel kernel_pad, kernel_crop, kernel_maxpool, kernel_avgpool, kernel_maxpool_grad,
    kernel_avgpool_grad, kernel_im2col, kernel_col2im;
OpPrintAttrs print_pad, print_window;

#endif
