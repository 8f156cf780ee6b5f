/* c_backend.c — prints a Program as one readable C file.
 *
 * Layout of the output, top to bottom: a header comment, one static function
 * per kernel (loop nests as the op table built them; GEMMs as trc_gemm
 * calls, the runtime's OpenBLAS; arena offsets as literals), forward() and
 * backward() as flat call lists (backward with the gradient buckets' all-reduce starts after the
 * kernels that finish them), step() — the whole optimizer step, calling the
 * runtime through runtime/trainc.h — then the parameter and input tables, the
 * trc_model descriptor with its compiled defaults (printed from the config
 * table TRC_TRAIN_CONFIG) and main(). Buffers are never aliased within a
 * kernel (the memory plan gives values that are alive together disjoint
 * ranges), hence `restrict`. A kernel's top-level loop that the IR proved
 * parallel (kernel_mark_parallel) becomes a function of an iteration range,
 * run through trc_kernel_loop (runtime/trainc.h): on the trainer's threads
 * when it has enough work. The printer is shared with the CUDA backend
 * (c_family.h). */
#include "c_family.h"

#include <stdlib.h>

/* A parallel loop as the body trc_parallel_for runs (runtime/trainc.h):
 * chunks [lo, hi) of loop `at` of kernel `id`. */
static void print_loop_body(FILE *out, const Program *p, int id, int at, KStmt *s,
                            const KParallelLoop *pl) {
  int64_t chunk = pl->chunk;
  fprintf(out, "static void k%d_loop%d(void *ctx, int64_t lo, int64_t hi) {\n", id, at);
  fputs("  char *restrict A = ctx;\n", out);
  print_stmt_buffers(out, p, id, &s, 1, "restrict", "A");
  int v = s->var, depth = 2;
  if (chunk == 1) {
    fprintf(out, "  for (int64_t i%d = lo; i%d < hi; i%d++) {\n", v, v, v);
  } else {
    fputs("  for (int64_t c = lo; c < hi; c++) {\n", out);
    fprintf(out, "    for (int64_t j = 0; j < %lld; j++) {\n", (long long)chunk);
    fprintf(out, "      const int64_t i%d = c * %lld + j;\n", v, (long long)chunk);
    depth = 3;
  }
  print_stmts(out, s->body, s->nbody, depth);
  fputs(chunk == 1 ? "  }\n}\n\n" : "    }\n  }\n}\n\n", out);
}

/* The kernel: the loops kstmt_parallel_loop picks as calls of their bodies
 * (printed first) through trc_kernel_loop, which runs them on the trainer's
 * threads when they have enough work; the rest inline. */
static void print_loop_kernel(FILE *out, const Program *p, int id, const Kernel *k) {
  KStmt **inline_stmts = xmalloc((size_t)(k->nbody ? k->nbody : 1) * sizeof *inline_stmts);
  int n_inline = 0;
  KParallelLoop pl;
  for (int i = 0; i < k->nbody; i++) {
    if (kstmt_parallel_loop(k->body[i], &pl))
      print_loop_body(out, p, id, i, k->body[i], &pl);
    else
      inline_stmts[n_inline++] = k->body[i];
  }
  fprintf(out, "static void k%d(char *restrict A) {\n", id);
  print_stmt_buffers(out, p, id, inline_stmts, n_inline, "restrict", "A");
  free(inline_stmts);
  for (int i = 0; i < k->nbody; i++) {
    if (kstmt_parallel_loop(k->body[i], &pl))
      fprintf(out, "  trc_kernel_loop(%lld, %lld, k%d_loop%d, A);\n", (long long)pl.n_chunks,
              (long long)pl.work, id, i);
    else
      print_stmts(out, &k->body[i], 1, 1);
  }
  fputs("}\n\n", out);
}

/* C = op(A) op(B), batched (gemm_dims in ir.h): the runtime's trc_gemm runs it on
 * the trainer's threads, bitwise the same on any number of them. */
static void print_gemm(FILE *out, const Program *p, int id) {
  const Node *n = &p->g->nodes[id];
  GemmDims d;
  gemm_dims(p->g, n, &d);
  fprintf(out, "static void k%d(char *restrict A) {\n", id);
  fprintf(out, "  trc_gemm(%lld, %d, %d, %lld, %lld, %lld,\n", (long long)d.batch, d.trans_a,
          d.trans_b, (long long)d.m, (long long)d.n, (long long)d.k);
  fprintf(out,
          "           (const float *)(A + %llu), %lld, %lld, (const float *)(A + %llu), %lld, %lld,\n",
          (unsigned long long)p->offset[n->in[0]], (long long)d.lda, (long long)d.stride_a,
          (unsigned long long)p->offset[n->in[1]], (long long)d.ldb, (long long)d.stride_b);
  fprintf(out, "           %s, (float *)(A + %llu), %lld, %lld);\n}\n\n", d.accumulate ? "1.0f" : "0.0f",
          (unsigned long long)p->offset[id], (long long)d.ldc, (long long)d.stride_c);
}

/* A convolution pass (conv_dims in ir.h): the runtime's trc_conv2d runs it on
 * oneDNN's primitives on the trainer's threads, bitwise the same on any
 * number of them. */
static void print_conv(FILE *out, const Program *p, int id) {
  const Node *n = &p->g->nodes[id];
  ConvDims d;
  conv_dims(p->g, n, &d);
  fprintf(out, "static void k%d(char *restrict A) {\n", id);
  fprintf(out, "  trc_conv2d(%d, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld,\n", d.pass,
          (long long)d.n, (long long)d.c, (long long)d.h, (long long)d.w, (long long)d.o,
          (long long)d.k, (long long)d.stride, (long long)d.pad);
  fprintf(out,
          "             (const float *)(A + %llu), (const float *)(A + %llu), (float *)(A + %llu), "
          "%d);\n}\n\n",
          (unsigned long long)p->offset[n->in[0]], (unsigned long long)p->offset[n->in[1]],
          (unsigned long long)p->offset[id], d.accumulate);
}

static void print_library_call(FILE *out, const Program *p, int id) {
  (op_info(p->g->nodes[id].op)->op_class == OPC_CONV ? print_conv : print_gemm)(out, p, id);
}

static void print_call(FILE *out, const Program *p, int id) { fprintf(out, "  k%d(A);", id); }

static void zero_gradients(FILE *out, const Program *p) {
  fprintf(out, "  memset(A + %llu, 0, %llu); /* the gradients */\n", (unsigned long long)p->grad_offset,
          (unsigned long long)p->param_bytes);
}

static const StepForm c_form = {
    .forward_def = "static void forward(char *A)",
    .backward_def = "static void backward(char *A, trc_step *s)",
    .forward_call = "forward(A)",
    .backward_call = "backward(A, ",
    .call = print_call,
    .gradients_zeroed = zero_gradients,
};

void emit_c(FILE *out, const Program *p) {
  print_header_comment(out, p);
  fputs("#include <math.h>\n#include <stdint.h>\n#include <string.h>\n", out);
  fputs("#define TRC_VECTOR_MATH 1 /* vector expf, logf, tanhf, erff from libmvec */\n", out);
  fputs("#include \"trainc.h\"\n\n", out);
  print_kernels(out, p, print_library_call, print_loop_kernel);
  print_forward_backward(out, p, &c_form);
  print_step(out, p, &c_form);
  print_runtime_tables(out, p, NULL);
}
