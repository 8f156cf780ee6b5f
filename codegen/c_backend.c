/* c_backend.c — prints a Program as one readable C file.
 *
 * Layout of the output, top to bottom: a header comment, one static function
 * per kernel (loop nests as the op table built them; GEMMs as cblas_sgemm
 * calls; arena offsets as literals), forward() and backward() as flat call
 * lists (backward with the gradient buckets' all-reduce starts after the
 * kernels that finish them), step() — the whole optimizer step, calling the
 * runtime through runtime/trainc.h — then the parameter and input tables, the
 * trc_model descriptor with its compiled defaults (printed from the config
 * table TRC_TRAIN_CONFIG) and main(). Buffers are never aliased within a
 * kernel (the memory plan gives values that are alive together disjoint
 * ranges), hence `restrict`. */
#include "c_family.h"

static void print_loop_kernel(FILE *out, const Program *p, int id, const Kernel *k) {
  fprintf(out, "static void k%d(char *restrict A) {\n", id);
  print_buffer_decls(out, p, id, k, "restrict", "A");
  print_stmts(out, k->body, k->nbody, 1);
  fputs("}\n\n", out);
}

/* C = op(A) op(B), one cblas_sgemm per matrix of the batch. */
static void print_gemm(FILE *out, const Program *p, int id) {
  const GemmShape s = gemm_shape(p, id);
  fprintf(out, "static void k%d(char *restrict A) {\n", id);
  fprintf(out, "  for (int64_t i = 0; i < %lld; i++)\n", (long long)s.batch);
  fprintf(out, "    cblas_sgemm(CblasRowMajor, %s, %s, %lld, %lld, %lld, 1.0f,\n",
          s.ta ? "CblasTrans" : "CblasNoTrans", s.tb ? "CblasTrans" : "CblasNoTrans",
          (long long)s.m, (long long)s.n, (long long)s.k);
  fprintf(out,
          "                (const float *)(A + %llu) + i * %lld, %lld, (const float *)(A + %llu) + "
          "i * %lld, %lld,\n",
          (unsigned long long)s.a_offset, (long long)s.a_stride, (long long)s.lda,
          (unsigned long long)s.b_offset, (long long)s.b_stride, (long long)s.ldb);
  fprintf(out, "                %s, (float *)(A + %llu) + i * %lld, %lld);\n}\n\n",
          s.accumulate ? "1.0f" : "0.0f", (unsigned long long)s.c_offset, (long long)s.c_stride,
          (long long)s.n);
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
  fputs("#include <math.h>\n#include <stdint.h>\n#include <string.h>\n#include <cblas.h>\n#include \"trainc.h\"\n\n", out);
  print_kernels(out, p, print_gemm, print_loop_kernel);
  print_forward_backward(out, p, &c_form);
  print_step(out, p, &c_form);
  print_runtime_tables(out, p, NULL);
}
