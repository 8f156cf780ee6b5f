/* c_backend.c — prints a Program as one readable C file.
 *
 * Layout of the output, top to bottom: a header comment, one static function
 * per kernel (loop nests as the op table built them; GEMMs as trc_gemm
 * calls, the runtime's oneDNN; arena offsets as literals), forward() and
 * backward() as call lists, alike layers of a repeat one loop (c_layers.h;
 * backward with the gradient buckets' all-reduce starts after the
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
#include "c_layers.h"

#include <stdlib.h>
#include <string.h>

static bool writes_param(const CFunction *fn, int i) {
  return fn->form.roles[i] == KP_OUT || fn->form.roles[i] == KP_STORED;
}

/* `const float *restrict in0` for parameter i of fn (const unless the
 * kernel writes it: its own buffer, a value it stores besides). */
static void print_param(FILE *out, const Program *p, const CFunction *fn, int i) {
  int b = fn->form.params[i];
  fprintf(out, "%s%s *restrict %s", writes_param(fn, i) ? "" : "const ", c_type(p->g->nodes[b].dtype),
          fn->param_names[i]);
}

static bool draws_stream(const KExpr *e, int64_t stream) {
  return e->kind == KE_RANDOM && e->i == stream;
}

/* Which of fn's parameters and streams statements body[0..n) use; NULL
 * body: all of them. */
typedef struct {
  bool *param, *stream;
} Uses;

static Uses uses_of(const CFunction *fn, KStmt *const *body, int n) {
  Uses u = {xcalloc((size_t)fn->form.n_params + 1, 1), xcalloc((size_t)fn->form.n_streams + 1, 1)};
  int *used = NULL, n_used = body ? kernel_stmt_buffers(body, n, &used) : 0;
  for (int k = 0; k < fn->form.n_params; k++) {
    u.param[k] = !body;
    for (int i = 0; i < n_used; i++) u.param[k] |= used[i] == fn->form.params[k];
  }
  for (int k = 0; k < fn->form.n_streams; k++)
    u.stream[k] = !body || stmts_any_expr(body, n, draws_stream, fn->form.streams[k]);
  free(used);
  return u;
}

static void uses_free(Uses *u) { free(u->param), free(u->stream); }

/* `out, in0, ..., stream0`: fn's parameters and streams that u says, then
 * `after`. */
static void print_param_list(FILE *out, const Program *p, const CFunction *fn, const Uses *u,
                             const char *after) {
  const char *sep = "";
  for (int i = 0; i < fn->form.n_params; i++)
    if (u->param[i]) {
      fputs(sep, out), sep = ", ";
      print_param(out, p, fn, i);
    }
  for (int i = 0; i < fn->form.n_streams; i++)
    if (u->stream[i]) fprintf(out, "%suint64_t stream%d", sep, i), sep = ", ";
  fputs(after, out);
}

/* Before the functions of a kernel whose loops are short rows (ir.h):
 * trainc.h's attribute that lets GCC vectorize them. */
static const char *short_rows_attribute(const Kernel *k) { return k->short_rows ? "TRC_SHORT_ROWS " : ""; }

/* Parallel loop `at` of fn's kernel: NAME_loop<at>, a function of fn's
 * parameters and the iterations [lo, hi) it runs (in chunks of pl->chunk),
 * and NAME_loop<at>_task, the body trc_parallel_for runs (runtime/trainc.h),
 * which calls it with the parameters from its ctx array. The restrict
 * parameters are what lets GCC vectorize the loop: restrict pointers loaded
 * from ctx are not enough for it. */
static void print_loop_body(FILE *out, const Program *p, const CFunction *fn, const Kernel *k, int at,
                            const KParallelLoop *pl) {
  int64_t chunk = pl->chunk;
  KStmt *s = k->body[at];
  Uses u = uses_of(fn, &s, 1);
  fprintf(out, "%sstatic void %s_loop%d(", short_rows_attribute(k), fn->name, at);
  print_param_list(out, p, fn, &u, ", int64_t lo, int64_t hi) {\n");
  int v = s->var, depth = 2;
  if (chunk == 1) {
    fprintf(out, "  for (int64_t i%d = lo; i%d < hi; i%d++) {\n", v, v, v);
  } else {
    fputs("  for (int64_t c = lo; c < hi; c++) {\n", out);
    fprintf(out, "    for (int64_t j = 0; j < %lld; j++) {\n", (long long)chunk);
    fprintf(out, "      const int64_t i%d = c * %lld + j;\n", v, (long long)chunk);
    depth = 3;
  }
  BufNames names = c_function_buffers(fn);
  print_stmts_named(out, s->body, s->nbody, depth, &names);
  fputs(chunk == 1 ? "  }\n}\n\n" : "    }\n  }\n}\n\n", out);
  fprintf(out, "static void %s_loop%d_task(void *ctx, int64_t lo, int64_t hi) {", fn->name, at);
  fprintf(out, " void *const *arg = ctx; %s_loop%d(", fn->name, at);
  for (int i = 0; i < fn->form.n_params; i++)
    if (u.param[i]) fprintf(out, "arg[%d], ", i);
  for (int i = 0; i < fn->form.n_streams; i++)
    if (u.stream[i]) fprintf(out, "*(const uint64_t *)arg[%d], ", fn->form.n_params + i);
  fputs("lo, hi); }\n", out);
  uses_free(&u);
}

/* `static void NAME(float *restrict out, const float *restrict in0, ...)`,
 * noinline: a kernel called once, inlined into forward() or backward(), made
 * GCC's -O3 take twice as long on gpt124m (2.9 s against 1.4 s). */
static void print_function_head(FILE *out, const Program *p, const CFunction *fn) {
  fprintf(out, "static __attribute__((noinline)) void %s(", fn->name);
  Uses all = uses_of(fn, NULL, 0);
  print_param_list(out, p, fn, &all, ") {\n");
  uses_free(&all);
}

/* The function: the loops kstmt_parallel_loop picks as calls of their bodies
 * (printed first) through trc_kernel_loop, which runs them on the trainer's
 * threads when they have enough work; the rest inline. */
static void print_loop_function(FILE *out, const Program *p, const CFunction *fn,
                                const Kernel *k) {
  KParallelLoop pl;
  int n_parallel = 0;
  for (int i = 0; i < k->nbody; i++)
    if (kstmt_parallel_loop(k->body[i], &pl)) {
      print_loop_body(out, p, fn, k, i, &pl);
      n_parallel++;
    }
  fputs(short_rows_attribute(k), out);
  print_function_head(out, p, fn);
  if (n_parallel) {
    fputs("  void *arg[] = {", out);
    for (int i = 0; i < fn->form.n_params; i++)
      fprintf(out, "%s%s%s", i ? ", " : "", writes_param(fn, i) ? "" : "(void *)",
              fn->param_names[i]);
    for (int i = 0; i < fn->form.n_streams; i++) fprintf(out, ", &stream%d", i);
    fputs("};\n", out);
  }
  BufNames names = c_function_buffers(fn);
  for (int i = 0; i < k->nbody; i++) {
    if (kstmt_parallel_loop(k->body[i], &pl))
      fprintf(out, "  trc_kernel_loop(%lld, %lld, %s_loop%d_task, arg);\n", (long long)pl.n_chunks,
              (long long)pl.work, fn->name, i);
    else
      print_stmts_named(out, &k->body[i], 1, 1, &names);
  }
  fputs("}\n\n", out);
}

/* The parameter name under which fn's first kernel reads its input k. */
static const char *input_name(const Program *p, const CFunction *fn, int k) {
  return fn->param_names[kernel_form_param(&fn->form, p->g->nodes[fn->first].in[k])];
}

/* `, .name = v` of a GEMM dimension, left out when it is the descriptor's
 * default (0; 1 for batch and heads) and not a leading dimension. */
static void print_dim(FILE *out, const char *name, int64_t v, int64_t dflt, bool always) {
  if (always || v != dflt) fprintf(out, ", .%s = %lld", name, (long long)v);
}

/* C = op(A) op(B), batched (gemm_dims in ir.h), its dimensions a static
 * trc_gemm_shape: the runtime's trc_gemm runs it on the trainer's threads,
 * bitwise the same on any number of them. */
static void print_gemm_function(FILE *out, const Program *p, const CFunction *fn) {
  const Node *n = &p->g->nodes[fn->first];
  GemmDims d;
  gemm_dims(p->g, n, &d);
  print_function_head(out, p, fn);
  fprintf(out, "  static const trc_gemm_shape dims = {.m = %lld, .n = %lld, .k = %lld",
          (long long)d.m, (long long)d.n, (long long)d.k);
  print_dim(out, "batch", d.batch, 1, false);
  print_dim(out, "heads", d.heads, 1, false);
  print_dim(out, "trans_a", d.trans_a, 0, false);
  print_dim(out, "trans_b", d.trans_b, 0, false);
  print_dim(out, "accumulate", d.accumulate, 0, false);
  print_dim(out, "rounded", d.rounded, 0, false);
  print_dim(out, "f32", d.f32, 0, false);
  fprintf(out, ", .lda = %lld", (long long)d.lda);
  print_dim(out, "stride_a", d.stride_a, 0, false);
  print_dim(out, "head_stride_a", d.head_stride_a, 0, false);
  print_dim(out, "ldb", d.ldb, 0, true);
  print_dim(out, "stride_b", d.stride_b, 0, false);
  print_dim(out, "head_stride_b", d.head_stride_b, 0, false);
  print_dim(out, "ldc", d.ldc, 0, true);
  print_dim(out, "stride_c", d.stride_c, 0, false);
  print_dim(out, "head_stride_c", d.head_stride_c, 0, false);
  fprintf(out, "};\n  trc_gemm_shaped(&dims, %s, %s, out);\n}\n\n", input_name(p, fn, 0),
          input_name(p, fn, 1));
}

/* A convolution pass (conv_dims in ir.h): the runtime's trc_conv2d runs it on
 * oneDNN's primitives on the trainer's threads, bitwise the same on any
 * number of them; the forward pass with its bias and relu. */
static void print_conv_function(FILE *out, const Program *p, const CFunction *fn) {
  const Node *n = &p->g->nodes[fn->first];
  ConvDims d;
  conv_dims(p->g, n, &d);
  print_function_head(out, p, fn);
  fprintf(out, "  trc_conv2d(%d, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld,\n", d.pass,
          (long long)d.n, (long long)d.c, (long long)d.h, (long long)d.w, (long long)d.o,
          (long long)d.k, (long long)d.stride, (long long)d.pad);
  fprintf(out, "             %s, %s, %s, %d, out, %d);\n}\n\n", input_name(p, fn, 0),
          input_name(p, fn, 1), d.bias ? input_name(p, fn, 2) : "NULL", d.relu, d.accumulate);
}

/* `f32[4, 64, 768]` of node id. */
static void print_type(FILE *out, const Program *p, int id) {
  char sb[128];
  const Node *n = &p->g->nodes[id];
  fprintf(out, "%s%s", dtype_name(n->dtype), shape_str(&n->shape, sb));
}

/* What fn computes — its op on the types it reads, the values fused into
 * it — and how many values it computes, the first named:
 * `/ * layernorm of f32[4, 64, 768], ... -> f32[4, 64, 768]; 25 uses, the
 * first %10 ln_1 in block.0, line 14 * /`. */
static void print_function_comment(FILE *out, const Program *p, const CFunction *fn) {
  const Node *n = &p->g->nodes[fn->first];
  fprintf(out, "/* %s of ", op_info(n->op)->name);
  for (int k = 0; k < n->nin; k++) {
    if (k) fputs(", ", out);
    print_type(out, p, n->in[k]);
  }
  fputs(" -> ", out);
  print_type(out, p, fn->first);
  for (int v = 0; v < p->g->n; v++)
    if (p->fused_into[v] == fn->first) fprintf(out, ", computing %s inline", op_info(p->g->nodes[v].op)->name);
    else if (p->stored_by[v] == fn->first) fprintf(out, ", computing and storing %s", op_info(p->g->nodes[v].op)->name);
  if (n->grad_of_param >= 0) fputs(", added into a gradient", out);
  if (fn->n_uses > 1)
    fprintf(out, "; %d uses, the first %%%d", fn->n_uses, fn->first);
  else
    fprintf(out, "; one use, %%%d", fn->first);
  if (n->name) fprintf(out, " %s", n->name);
  const char *path = node_layer_path(p->g, fn->first);
  if (path) fprintf(out, " in %s", path);
  if (n->loc.line) fprintf(out, ", line %d", n->loc.line);
  fputs(" */\n", out);
}

/* The chunked loss head (head_dims in ir.h): the runtime's
 * trc_linear_cross_entropy makes the logits a chunk of rows at a time in
 * its scratch, and the gradients right there: dx into the output, w's into
 * its slot, which lies as far into the gradient region as w lies into the
 * parameters'. Both are reached from the buffers the function is given:
 * they are all in one arena. */
static int64_t scratch_distance(const Program *p, int id) {
  return ((int64_t)p->scratch_offset[id] - (int64_t)p->offset[id]) / (int64_t)sizeof(float);
}

static void print_head_function(FILE *out, const Program *p, const CFunction *fn) {
  HeadDims h;
  head_dims(p->g, &p->g->nodes[fn->first], &h);
  print_function_head(out, p, fn);
  fprintf(out, "  trc_linear_cross_entropy(%lld, %lld, %lld, %lld, %d, %d, %lld,\n", (long long)h.n,
          (long long)h.d, (long long)h.v, (long long)h.chunk, h.w_vd, h.has_ignore,
          (long long)h.ignore_label);
  const char *w = input_name(p, fn, 1);
  fprintf(out, "                           %s, %s, %s, %s, out,\n", input_name(p, fn, 0), w,
          input_name(p, fn, 2), input_name(p, fn, 3));
  if (h.adds_dw)
    fprintf(out, "                           (float *)%s + %llu /* its gradient */", w,
            (unsigned long long)((p->grad_offset - p->param_offset) / sizeof(float)));
  else
    fputs("                           NULL /* frozen: no gradient */", out);
  fprintf(out, ",\n                           out + %lld /* the chunk's logits: its scratch */);\n}\n\n",
          (long long)scratch_distance(p, fn->first));
}

/* A value stored in bf16: rounded as forward() makes it, widened where
 * backward() reads it (trc_bf16_pack, trc_bf16_unpack). */
static void print_bf16_function(FILE *out, const Program *p, const CFunction *fn) {
  const Node *n = &p->g->nodes[fn->first];
  print_function_head(out, p, fn);
  fprintf(out, "  trc_bf16_%s(%lld, %s, out);\n}\n\n", n->op == OP_TO_BF16 ? "pack" : "unpack",
          (long long)shape_numel(&n->shape), input_name(p, fn, 0));
}

/* Fused causal attention (attention_dims in ir.h): trc_causal_attention,
 * or its gradient into the [3, B, T, C] output. */
static void print_attention_function(FILE *out, const Program *p, const CFunction *fn) {
  const Node *n = &p->g->nodes[fn->first];
  AttentionDims d;
  attention_dims(p->g, n, &d);
  bool grad = n->op == OP_CAUSAL_ATTENTION_GRAD;
  print_function_head(out, p, fn);
  fprintf(out, "  trc_causal_attention%s(%lld, %lld, %lld, %lld, (float)%.17g, %s, %s, %s, %s%sout);\n}\n\n",
          grad ? "_grad" : "", (long long)d.b, (long long)d.t, (long long)d.c, (long long)d.heads, d.scale,
          input_name(p, fn, 0), input_name(p, fn, 1), input_name(p, fn, 2), grad ? input_name(p, fn, 3) : "",
          grad ? ", " : "");
}

static void print_call_function(FILE *out, const Program *p, const CFunction *fn) {
  OpKind op = p->g->nodes[fn->first].op;
  if (op == OP_LINEAR_CROSS_ENTROPY) print_head_function(out, p, fn);
  else if (op == OP_CAUSAL_ATTENTION || op == OP_CAUSAL_ATTENTION_GRAD) print_attention_function(out, p, fn);
  else print_bf16_function(out, p, fn);
}

static void print_function(FILE *out, const Program *p, const CFunction *fn) {
  print_function_comment(out, p, fn);
  if (p->kernels[fn->first])
    print_loop_function(out, p, fn, p->kernels[fn->first]);
  else if (op_info(p->g->nodes[fn->first].op)->op_class == OPC_CONV)
    print_conv_function(out, p, fn);
  else if (op_info(p->g->nodes[fn->first].op)->op_class == OPC_CALL)
    print_call_function(out, p, fn);
  else
    print_gemm_function(out, p, fn);
}

/* What the C backend's forward() and backward() are printed from. */
typedef struct {
  CNames names;
  LayerLoops forward, backward;
} CEmit;

static const LayerLoops *loops_of(const CEmit *e, const Program *p, const int *ids) {
  return ids == p->forward ? &e->forward : &e->backward;
}

/* `  float *const block_0_ln_1 = (float *)(A + 7739456);` for each buffer
 * the calls of kernels ids[0..n) pass, once, in order of first use; inside
 * a loop over layers only those that are the same in every layer. */
static void declare_values(FILE *out, const Program *p, const int *ids, int n, const void *data) {
  const CEmit *e = data;
  const CNames *c = &e->names;
  const LayerLoops *ll = loops_of(e, p, ids);
  bool *declared = xcalloc((size_t)p->g->n, sizeof *declared);
  for (int i = 0; i < n; i++) {
    const KernelForm *f = &c->forms[ids[i]];
    const LayerLoop *L = ll->loop_of[i] >= 0 ? &ll->loops[ll->loop_of[i]] : NULL;
    int at = L ? L->arg_at[(i - L->start) % L->calls] : 0;
    for (int k = 0; k < f->n_params; k++) {
      int b = f->params[k];
      if (declared[b] || (L && L->arg_col[at + k] >= 0)) continue;
      declared[b] = true;
      const char *type = c_type(p->g->nodes[b].dtype);
      fprintf(out, "  %s *const %s = (%s *)(A + %llu);\n", type, c->value[b], type,
              (unsigned long long)p->offset[b]);
    }
  }
  free(declared);
}

/* `  fn(args[0], ..., streams);`: kernel id's function with its buffers
 * named args[k] and its streams as streams[t] says (NULL: the number). */
static void print_call_named(FILE *out, const CNames *c, int id, const char *const *args,
                             const char *const *streams) {
  const KernelForm *f = &c->forms[id];
  fprintf(out, "  %s(", c->fns[c->fn_of[id]].name);
  for (int k = 0; k < f->n_params; k++) fprintf(out, "%s%s", k ? ", " : "", args[k]);
  for (int t = 0; t < f->n_streams; t++)
    if (streams && streams[t])
      fprintf(out, ", %s", streams[t]);
    else
      fprintf(out, ", %lld", (long long)f->streams[t]);
  fputs(");", out);
}

static void print_call(FILE *out, const Program *p, int id, const void *data) {
  const CNames *c = &((const CEmit *)data)->names;
  const KernelForm *f = &c->forms[id];
  const char **args = xmalloc((size_t)(f->n_params + 1) * sizeof *args);
  for (int k = 0; k < f->n_params; k++) args[k] = c->value[f->params[k]];
  (void)p;
  print_call_named(out, c, id, args, NULL);
  free(args);
}

/* Call j of loop L's layer, its buffers and streams read from the row,
 * and its --kernel-times mark: the site of call j of the layer the loop is
 * at (first: the site of call j of the loop's first layer). */
static void print_loop_call(FILE *out, const Program *p, const CEmit *e, const LayerLoop *L,
                            int id, int j, int first) {
  const KernelForm *f = &e->names.forms[id];
  char **streams = xcalloc((size_t)f->n_streams + 1, sizeof *streams);
  char value[192];
  for (int t = 0; t < f->n_streams; t++) { /* (no streams: stream_col may be NULL) */
    int col = L->stream_col[L->stream_at[j] + t];
    if (col >= 0) streams[t] = xstrdup(layer_value(L, col, value, sizeof value));
  }
  fputs("  ", out);
  print_call_named(out, &e->names, id, L->arg + L->arg_at[j], (const char *const *)streams);
  int lo = L->layer[0], hi = L->layer[L->layers - 1];
  if (L->step > 0) fprintf(out, " trc_kernel_done(%d + (int)(l - %d) * %d);", first, lo, L->calls);
  else fprintf(out, " trc_kernel_done(%d + (int)(%d - l) * %d);", first, hi, L->calls);
  for (int t = 0; t < f->n_streams; t++) free(streams[t]);
  free(streams);
  const char *path = node_layer_path(p->g, id);
  size_t layer_len = strlen(L->repeat) + 1 + strcspn(path + strlen(L->repeat) + 1, ".");
  print_call_comment_in(out, p, id, layer_len);
}

/* The loop L: its offsets' pointers, then each call of a layer and the
 * gradient buckets final after it. */
static void print_layer_loop(FILE *out, const Program *p, const StepForm *f, const LayerLoop *L,
                             const int *ids) {
  int lo = L->layer[0], hi = L->layer[L->layers - 1];
  char value[192], count[192];
  if (L->step > 0)
    fprintf(out, "  for (int64_t l = %d; l <= %d; l++) { /* %s.l */\n", lo, hi, L->repeat);
  else
    fprintf(out, "  for (int64_t l = %d; l >= %d; l--) { /* %s.l */\n", hi, lo, L->repeat);
  for (int k = 0; k < L->n_cols; k++) {
    const LayerColumn *col = &L->cols[k];
    if (col->kind != COL_OFFSET) continue;
    const char *type = c_type(col->dtype);
    fprintf(out, "    %s *const %s = (%s *)(A + %s);\n", type, col->name, type,
            layer_value(L, k, value, sizeof value));
  }
  for (int j = 0; j < L->calls; j++) {
    print_loop_call(out, p, f->data, L, ids[L->start + j], j, step_site(p, ids, L->start + j));
    for (int q = 0; q < L->ready[j]; q++) {
      int first = L->ready_col[j] + 2 * q;
      fprintf(out, "    if (s) %sbucket_ready(s, %s, %s); /* a gradient bucket final */\n",
              step_comm_prefix(f), layer_value(L, first, value, sizeof value),
              layer_value(L, first + 1, count, sizeof count));
    }
  }
  fputs("  }\n", out);
}

static int print_loop(FILE *out, const Program *p, const StepForm *f, const int *ids, int at) {
  const LayerLoops *ll = loops_of(f->data, p, ids);
  if (ll->loop_at[at] < 0) return 0;
  const LayerLoop *L = &ll->loops[ll->loop_at[at]];
  print_layer_loop(out, p, f, L, ids);
  return L->layers * L->calls;
}

static const StepForm c_form = {
    .forward_def = "static void forward(char *A)",
    .backward_def = "static void backward(char *A, trc_step *s)",
    .forward_call = "forward(A)",
    .backward_call = "backward(A, ",
    .declare = declare_values,
    .call = print_call,
    .loop = print_loop,
};

void emit_c(FILE *out, const Program *p) {
  CEmit e;
  c_names_build(&e.names, p);
  layer_loops_find(&e.forward, p, &e.names, p->forward, p->n_forward);
  layer_loops_find(&e.backward, p, &e.names, p->backward, p->n_backward);
  StepForm form = c_form;
  form.data = &e;
  print_header_comment(out, p);
  fputs("#include <math.h>\n#include <stdint.h>\n#include <string.h>\n", out);
  fputs("#define TRC_VECTOR_MATH 1 /* vector expf, logf, tanhf, erff from libmvec */\n", out);
  fputs("#include \"trainc.h\"\n\n", out);
  fputs("/* ---- kernels: each distinct one once, a function of its buffers ---- */\n\n", out);
  for (int f = 0; f < e.names.n_fns; f++) print_function(out, p, &e.names.fns[f]);
  layer_loops_print_tables(out, &e.forward, "forward()");
  layer_loops_print_tables(out, &e.backward, "backward()");
  print_forward_backward(out, p, &form);
  print_step(out, p, &form);
  print_runtime_tables(out, p, NULL);
  layer_loops_free(&e.forward);
  layer_loops_free(&e.backward);
  c_names_free(&e.names, p);
}
