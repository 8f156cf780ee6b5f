/* cuda_backend.c — prints a Program as one readable CUDA file (.cu).
 *
 * The same program as the C backend's, printed by the same printer
 * (c_family.h): the op table's loop nests become __global__ kernels, GEMMs
 * cuBLAS's strided batched GEMM (row-major C = A B is column-major
 * C^T = B^T A^T: the operands swap), and forward(), backward() and step()
 * are the C backend's call lists and step schedule on the device arena. The
 * step's loss sum, clipping, optimizer and all-reduces are the runtime CUDA
 * header's (trainc_cuda.h: on the device, NCCL across ranks), the inputs go
 * up per micro-batch through its double buffers, and the parameters and
 * optimizer state stay on the device between steps.
 *
 * A kernel whose body is loops runs each loop as a launch of its own, on the
 * grid of threads the IR proved safe (kernel_grid: one thread per iteration
 * of the grid loops, the other loops in order inside); any other kernel runs
 * as one thread (docs/cuda.md). The file
 * includes runtime/trainc_cuda.h, which under TRC_CUDA_EMULATE runs it on
 * the CPU (`trainc build --backend cuda-emulate`). */
#include "c_family.h"

/* Threads per block of a kernel mapped to the grid. */
#define BLOCK 256

/* Whether kernel k runs as launches of its top-level loops, one each (a
 * launch ends before the next starts): its body is loops only. Otherwise it
 * runs as one thread. */
static bool in_parts(const Kernel *k) {
  for (int i = 0; i < k->nbody; i++)
    if (k->body[i]->kind != KS_FOR) return false;
  return true;
}

/* The launches of a kernel in parts, `kN` or `kN_part`. */
static void part_name(char *name, size_t size, int id, const Kernel *k, int part) {
  if (!in_parts(k) || k->nbody == 1)
    snprintf(name, size, "k%d", id);
  else
    snprintf(name, size, "k%d_%d", id, part);
}

/* The chain from loop c on: a grid loop's body in place (its variable is the
 * thread's), any other loop as a for; the chain's last loop's body whole. */
static void print_chain(FILE *out, const KGrid *g, int c, int depth) {
  const KStmt *loop = g->loop[c];
  const int inner = g->grid[c] ? depth : depth + 1;
  if (!g->grid[c] && loop->limit) { /* a bounded loop (never a grid loop) */
    fprintf(out, "%*sfor (int64_t i%d = 0; i%d < ", 2 * depth, "", loop->var, loop->var);
    print_index(out, loop->limit);
    fprintf(out, "; i%d++) {\n", loop->var);
  } else if (!g->grid[c]) {
    fprintf(out, "%*sfor (int64_t i%d = 0; i%d < %lld; i%d++) {\n", 2 * depth, "", loop->var,
            loop->var, (long long)loop->extent, loop->var);
  }
  for (int i = 0; i < loop->nbody; i++)
    if (c + 1 < g->n && loop->body[i] == g->loop[c + 1])
      print_chain(out, g, c + 1, inner);
    else
      print_stmts(out, &loop->body[i], 1, inner);
  if (!g->grid[c]) fprintf(out, "%*s}\n", 2 * depth, "");
}

/* The thread's grid variables from its index, innermost (fastest) first. */
static void print_thread_index(FILE *out, const KStmt *top, const KGrid *g) {
  fputs("  int64_t thread = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n", out);
  fprintf(out, "  if (thread >= %lld) return;\n", (long long)g->threads);
  int outermost = 0;
  while (!g->grid[outermost]) outermost++;
  for (int c = g->n - 1; c >= outermost; c--) {
    if (!g->grid[c]) continue;
    const KStmt *loop = g->loop[c];
    bool used = stmts_any_expr((KStmt *const *)&top, 1, expr_is_var, loop->var);
    if (c == outermost) {
      if (used) fprintf(out, "  const int64_t i%d = thread;\n", loop->var);
      break;
    }
    if (used)
      fprintf(out, "  const int64_t i%d = thread %% %lld;\n", loop->var, (long long)loop->extent);
    fprintf(out, "  thread /= %lld;\n", (long long)loop->extent);
  }
}

/* One __global__ function: top-level loop `part` of the kernel on its grid,
 * or the whole kernel in one thread. */
static void print_part(FILE *out, const Program *p, int id, const Kernel *k, int part) {
  char name[32];
  part_name(name, sizeof name, id, k, part);
  KStmt *const *body = in_parts(k) ? &k->body[part] : k->body;
  const int n = in_parts(k) ? 1 : k->nbody;
  fprintf(out, "static __global__ void %s(char *__restrict__ D) {\n", name);
  print_stmt_buffers(out, p, id, body, n, "__restrict__", "D");
  KGrid g = in_parts(k) ? kernel_grid(k, body[0]) : (KGrid){.threads = 1};
  if (g.threads > 1) {
    print_thread_index(out, body[0], &g);
    print_chain(out, &g, 0, 1);
  } else {
    print_stmts(out, (KStmt **)body, n, 1);
  }
  fputs("}\n\n", out);
}

/* A part's launch: blocks of BLOCK threads over its grid. */
static void print_launch(FILE *out, const Program *p, int id, const Kernel *k, int part) {
  char name[32];
  part_name(name, sizeof name, id, k, part);
  int64_t n = in_parts(k) ? kernel_grid(k, k->body[part]).threads : 1;
  int64_t block = n < BLOCK ? n : BLOCK;
  fprintf(out, "trc_launch(%s, dim3(%lld), dim3(%lld), \"%s\", %d, D);", name,
          (long long)((n + block - 1) / block), (long long)block, name, p->g->nodes[id].loc.line);
}

/* The kernel's __global__ functions; in several parts, a host function
 * launching them in order. */
static void print_kernel(FILE *out, const Program *p, int id, const Kernel *k) {
  const int parts = in_parts(k) ? k->nbody : 1;
  for (int part = 0; part < parts; part++) print_part(out, p, id, k, part);
  if (parts == 1) return;
  fprintf(out, "static void k%d(char *D) {\n", id);
  for (int part = 0; part < parts; part++) {
    fputs("  ", out);
    print_launch(out, p, id, k, part);
    fputs("\n", out);
  }
  fputs("}\n\n", out);
}

static const char *cublas_op(bool transpose) { return transpose ? "CUBLAS_OP_T" : "CUBLAS_OP_N"; }

/* Operand `x` at byte offset `offset` of the arena: its matrix of head h
 * when the batch is split into heads (then one call per head). */
static void print_operand(FILE *out, const char *type, uint64_t offset, const GemmDims *s,
                          int64_t head_stride, int64_t ld, int64_t stride) {
  fprintf(out, "(%s *)(D + %llu)", type, (unsigned long long)offset);
  if (s->heads > 1) fprintf(out, " + h * %lld", (long long)head_stride);
  fprintf(out, ", %lld, %lld", (long long)ld, (long long)stride);
}

/* Row-major C[m, n] = A B as column-major C^T[n, m] = B^T A^T, through the
 * runtime's trc_cuda_gemm (cuBLAS in the run's precision: fp32, or bf16
 * inputs, but in fp32 where the C trainer keeps f32 operands, GemmDims.f32;
 * trainc_cuda.h). cuBLAS's strided batch has one stride per
 * operand: a batch split into heads (gemm_dims) is one call per head over
 * the batch, cut by the emulation's trc_gemm as the C trainer's call is
 * (trainc.h). (A model lowered for this backend has no convolution op:
 * CONV_IM2COL.) */
static void print_gemm(FILE *out, const Program *p, int id) {
  const Node *n = &p->g->nodes[id];
  GemmDims s;
  gemm_dims(p->g, n, &s);
  fprintf(out, "static void k%d(char *D) {\n", id);
  if (s.heads > 1) fprintf(out, "  for (long long h = 0; h < %lld; h++)\n  ", (long long)s.heads);
  fprintf(out, "  trc_cuda_gemm(%s, %s, %lld, %lld, %lld,\n      ", cublas_op(s.trans_b),
          cublas_op(s.trans_a), (long long)s.n, (long long)s.m, (long long)s.k);
  print_operand(out, "const float", p->offset[n->in[1]], &s, s.head_stride_b, s.ldb, s.stride_b);
  fputs(", ", out);
  print_operand(out, "const float", p->offset[n->in[0]], &s, s.head_stride_a, s.lda, s.stride_a);
  fprintf(out, ",\n      %s, ", s.accumulate ? "1.0f" : "0.0f");
  print_operand(out, "float", p->offset[id], &s, s.head_stride_c, s.ldc, s.stride_c);
  fprintf(out, ", %lld, %d, \"k%d\", %d);\n}\n\n", (long long)s.batch, s.f32, id, n->loc.line);
}

static void print_call(FILE *out, const Program *p, int id, const void *data) {
  (void)data;
  if (op_info(p->g->nodes[id].op)->op_class == OPC_GEMM) {
    fprintf(out, "  k%d(D);", id);
    return;
  }
  const Kernel *k = p->kernels[id];
  fputs("  ", out);
  if (in_parts(k) && k->nbody > 1)
    fprintf(out, "k%d(D);", id);
  else
    print_launch(out, p, id, k, 0);
}

static void take_host_state(FILE *out, const Program *p) {
  StepPlaces at = step_places(p);
  fputs("  char *D = trc_cuda_arena;\n", out);
  fputs("  trc_cuda_take_host_state(s, A); /* parameters, optimizer state: up once, then kept */\n",
        out);
  fprintf(out, "  trc_cuda_zero(%llu, %llu); /* the gradients: the same offsets on the device */\n",
          (unsigned long long)at.gradients, (unsigned long long)at.gradient_bytes);
}

static void upload_micro_batch(FILE *out, const Program *p) {
  (void)p;
  fputs("    trc_cuda_upload_inputs(A, k); /* its inputs, loss seed, dropout key and flag */\n",
        out);
}

static void add_loss(FILE *out, const Program *p) {
  (void)p;
  fputs("    trc_cuda_add_loss((const char *)loss - A, k); /* summed on the device */\n", out);
}

static void window_loss(FILE *out, const Program *p) {
  (void)p;
  fputs("  loss_sum = trc_cuda_loss_sum(); /* the window's loss: 8 bytes down */\n", out);
}

static void update_on_device(FILE *out, const Program *p) {
  (void)p;
  fputs("  trc_cuda_update(s, runs, sizeof runs / sizeof runs[0]); /* clipping, optimizer */\n",
        out);
}

/* The trained parameters as runs of consecutive floats with the same weight
 * decay, one optimizer launch each. */
static void print_runs(FILE *out, const Program *p) {
  const Graph *g = p->g;
  const int trained = graph_trained_params(g);
  fputs("/* The optimizer's launches: parameter floats [first, first + count), decayed. */\n"
        "static const trc_cuda_run runs[] = {\n",
        out);
  for (int i = 0; i < trained;) {
    const Node *first = &g->nodes[g->params[i]];
    uint64_t start = (p->offset[first->id] - p->param_offset) / 4, end = start;
    int j = i;
    for (; j < trained; j++) {
      const Node *n = &g->nodes[g->params[j]];
      if (n->decay != first->decay || (p->offset[n->id] - p->param_offset) / 4 != end) break;
      end += (uint64_t)shape_numel(&n->shape);
    }
    fprintf(out, "    {%llu, %llu, %d}, /* %s", (unsigned long long)start,
            (unsigned long long)(end - start), first->decay, first->name);
    if (j - i > 1) fprintf(out, " .. %s", g->nodes[g->params[j - 1]].name);
    fputs(" */\n", out);
    i = j;
  }
  fputs("};\n\n", out);
}

static const StepForm cuda_form = {
    .forward_def = "static void device_forward(char *D)",
    .backward_def = "static void device_backward(char *D, trc_step *s)",
    .forward_call = "device_forward(D)",
    .backward_call = "device_backward(D, ",
    .call = print_call,
    .ops = {[STEP_ZERO_GRADIENTS] = take_host_state,
            [STEP_INPUTS_TO_DEVICE] = upload_micro_batch,
            [STEP_ADD_LOSS] = add_loss,
            [STEP_LOSS_FROM_DEVICE] = window_loss,
            [STEP_UPDATE] = update_on_device},
    .comm_prefix = "trc_cuda_step_",
};

/* Whether evaluation counts the predictions on the device: the model has
 * predictions and labels (the runtime's classification metrics). */
static bool counts_on_device(const Graph *g) { return g->predict >= 0 && g->labels >= 0; }

/* forward()'s start: what it reads goes up, the device computes, the loss
 * comes down. */
static void print_forward_head(FILE *out, const Program *p, const char *head) {
  fprintf(out, "%s {\n", head);
  fprintf(out, "  trc_cuda_upload(A, %llu, %llu); /* parameters, gradients, inputs, scalars */\n",
          (unsigned long long)p->param_offset,
          (unsigned long long)(p->activation_offset - p->param_offset));
  fputs("  device_forward(trc_cuda_arena);\n", out);
  fprintf(out, "  trc_cuda_download(A, %llu, 4); /* the loss */\n",
          (unsigned long long)p->offset[p->g->loss]);
}

/* Evaluation's forward(): the predictions are counted where they are. */
static void print_eval_entries(FILE *out, const Program *p) {
  const Graph *g = p->g;
  if (!counts_on_device(g)) return;
  print_forward_head(out, p, "static void eval_forward(char *A, int64_t rows)");
  fputs("  trc_cuda_eval_add(rows); /* argmax, cross-entropy, counts: on the device */\n}\n\n",
        out);
  const Shape *ps = &g->nodes[g->predict].shape;
  fputs("static void eval_start(void) {\n  /* predictions, labels, classes, label rows, u8 */\n",
        out);
  fprintf(out, "  static const trc_cuda_eval_layout layout = {%lluu, %lluu, %lld, %lld, %d};\n",
          (unsigned long long)p->offset[g->predict], (unsigned long long)p->offset[g->labels],
          (long long)ps->dim[ps->rank - 1], (long long)(shape_numel(ps) / ps->dim[ps->rank - 1]),
          g->nodes[g->labels].dtype == DT_U8);
  fputs("  trc_cuda_eval_start(&layout);\n}\n\n", out);
}

/* forward() and backward() as the runtime calls them outside step()
 * (evaluation, sampling, --gradcheck, --dump-step), on the host arena: what
 * they read goes up, what the runtime reads comes down. And the device. */
static void print_host_entries(FILE *out, const Program *p) {
  const Graph *g = p->g;
  fputs("/* What the runtime calls outside step(): the host arena holds the truth. */\n", out);
  print_forward_head(out, p, "static void forward(char *A)");
  if (g->predict >= 0)
    fprintf(out, "  trc_cuda_download(A, %llu, %llu); /* the predictions */\n",
            (unsigned long long)p->offset[g->predict],
            (unsigned long long)(4 * shape_numel(&g->nodes[g->predict].shape)));
  fputs("}\n\nstatic void backward(char *A, trc_step *s) {\n", out);
  fputs("  device_backward(trc_cuda_arena, s);\n", out);
  fprintf(out, "  trc_cuda_download(A, %llu, %llu); /* the gradients */\n}\n\n",
          (unsigned long long)p->grad_offset, (unsigned long long)p->trained_bytes);
  print_eval_entries(out, p);
  fputs("static int start(void) {\n  /* arena, parameters, gradients, parameter floats, "
        "trained ones, inputs and scalars */\n",
        out);
  fprintf(out,
          "  static const trc_cuda_layout layout = {%lluu, %lluu, %lluu, %lluu, %lluu, %lluu, "
          "%lluu};\n",
          (unsigned long long)p->arena_bytes, (unsigned long long)p->param_offset,
          (unsigned long long)p->grad_offset, (unsigned long long)(p->param_bytes / 4),
          (unsigned long long)(p->trained_bytes / 4),
          (unsigned long long)p->input_offset,
          (unsigned long long)(p->activation_offset - p->input_offset));
  if (counts_on_device(g))
    fputs("  if (trc_cuda_start(&layout)) return 1;\n  eval_start();\n  return 0;\n}\n\n", out);
  else
    fputs("  return trc_cuda_start(&layout);\n}\n\n", out);
  fputs("static const trc_device device = {TRC_DEVICE_NAME, start, trc_cuda_download,\n"
        "                                   trc_cuda_upload, trc_cuda_host_current,\n"
        "                                   trc_cuda_host_changed,\n",
        out);
  fputs(counts_on_device(g)
            ? "                                   eval_forward, trc_cuda_eval_counts};\n\n"
            : "                                   NULL, NULL};\n\n",
        out);
}

void emit_cuda(FILE *out, const Program *p) {
  if (p->g->loss_head >= 0) diag_internal_error("the CUDA backend got a chunked loss head");
  for (int i = 0; i < p->g->n; i++)
    if (p->g->nodes[i].dtype == DT_BF16 || p->g->nodes[i].rounded)
      diag_internal_error("the CUDA backend got a value stored in bf16 or a rounded GEMM");
  print_header_comment(out, p);
  fputs("#include <math.h>\n#include <stdint.h>\n#include <string.h>\n#include \"trainc_cuda.h\"\n"
        "#include \"trainc.h\"\n\n",
        out);
  print_kernels(out, p, print_gemm, print_kernel);
  print_forward_backward(out, p, &cuda_form);
  print_host_entries(out, p);
  print_runs(out, p);
  print_step(out, p, &cuda_form);
  print_runtime_tables(out, p, "device");
}
