/* kernel_form.c — a kernel's canonical form (ir.h): its code with its buffers
 * as parameters, so that kernels differing only in the buffers they touch
 * (the layers of a repeat) are one function in every backend. */
#include "ir.h"

#include <stdlib.h>

static int param_of(const KernelForm *f, int buf) {
  for (int i = 0; i < f->n_params; i++)
    if (f->params[i] == buf) return i;
  return -1;
}

/* The position of a random stream among f's, added when new. */
static int64_t stream_of(KernelForm *f, int64_t stream) {
  for (int i = 0; i < f->n_streams; i++)
    if (f->streams[i] == stream) return i;
  f->streams = xrealloc(f->streams, (size_t)(f->n_streams + 1) * sizeof *f->streams);
  f->streams[f->n_streams] = stream;
  return f->n_streams++;
}

static void code_expr(StrBuf *sb, const KExpr *e, KernelForm *f) {
  if (!e) return;
  bool has_buf = e->kind == KE_LOAD || e->kind == KE_RANDOM;
  int64_t i = e->kind == KE_RANDOM ? stream_of(f, e->i) : e->i;
  sb_printf(sb, "(%d %d %a %lld %d %d %d %d", e->kind, e->op, e->f, (long long)i, e->var,
            has_buf ? param_of(f, e->buf) : -1, e->is_int, e->eager);
  code_expr(sb, e->a, f);
  code_expr(sb, e->b, f);
  code_expr(sb, e->c, f);
  sb_append(sb, ")");
}

static void code_stmts(StrBuf *sb, KStmt *const *body, int nbody, KernelForm *f) {
  for (int i = 0; i < nbody; i++) {
    const KStmt *s = body[i];
    sb_printf(sb, "[%d %d %lld %d %d %d", s->kind, s->var, (long long)s->extent,
              s->kind == KS_STORE ? param_of(f, s->buf) : -1, s->accumulate, s->parallel);
    code_stmts(sb, s->body, s->nbody, f);
    code_expr(sb, s->limit, f); /* a bounded loop's bound is part of its form */
    code_expr(sb, s->index, f);
    code_expr(sb, s->value, f);
    sb_append(sb, "]");
  }
}

static void code_gemm(StrBuf *sb, const Graph *g, int id) {
  GemmDims d;
  gemm_dims(g, &g->nodes[id], &d);
  sb_printf(sb,
            "gemm %d %d %d %d %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld "
            "%lld",
            d.trans_a, d.trans_b, d.accumulate, d.rounded, (long long)d.m, (long long)d.n, (long long)d.k,
            (long long)d.batch, (long long)d.heads, (long long)d.lda, (long long)d.ldb,
            (long long)d.ldc, (long long)d.stride_a, (long long)d.stride_b, (long long)d.stride_c,
            (long long)d.head_stride_a, (long long)d.head_stride_b, (long long)d.head_stride_c);
}

static void code_conv(StrBuf *sb, const Graph *g, int id) {
  ConvDims d;
  conv_dims(g, &g->nodes[id], &d);
  sb_printf(sb, "conv %d %d %d %d %lld %lld %lld %lld %lld %lld %lld %lld", d.pass, d.bias, d.relu, d.accumulate,
            (long long)d.n, (long long)d.c, (long long)d.h, (long long)d.w, (long long)d.o,
            (long long)d.k, (long long)d.stride, (long long)d.pad);
}

/* A runtime call's code: the loss head's dimensions, attention's, or a
 * bf16 store's direction and length. */
static void code_call(StrBuf *sb, const Graph *g, int id) {
  const Node *n = &g->nodes[id];
  if (n->op == OP_CAUSAL_ATTENTION || n->op == OP_CAUSAL_ATTENTION_GRAD) {
    AttentionDims d;
    attention_dims(g, n, &d);
    sb_printf(sb, "%s %lld %lld %lld %lld %.17g", op_info(n->op)->name, (long long)d.b, (long long)d.t,
              (long long)d.c, (long long)d.heads, d.scale);
    return;
  }
  if (n->op != OP_LINEAR_CROSS_ENTROPY) {
    sb_printf(sb, "%s %lld", op_info(n->op)->name, (long long)shape_numel(&n->shape));
    return;
  }
  HeadDims h;
  head_dims(g, &g->nodes[id], &h);
  sb_printf(sb, "head %lld %lld %lld %lld %d %d %d %lld", (long long)h.n, (long long)h.d,
            (long long)h.v, (long long)h.chunk, h.w_vd, h.has_ignore, h.adds_dw,
            (long long)h.ignore_label);
}

/* Appends buf as the next parameter unless it is one already. */
static void add_param(KernelForm *f, int buf, KParamRole role) {
  if (param_of(f, buf) >= 0) return;
  f->params[f->n_params] = buf;
  f->roles[f->n_params++] = role;
}

/* The parameters: the node's own buffer, the values its kernel k stores
 * besides, its inputs in order, then the others (values fused into it, the
 * dropout key), ascending — of those the code touches (a GEMM: A, B, C). */
static void order_params(KernelForm *f, const Graph *g, int id, const Kernel *k, const int *used, int n_used) {
  const Node *n = &g->nodes[id];
  f->params = xmalloc((size_t)(n_used ? n_used : 1) * sizeof *f->params);
  f->roles = xmalloc((size_t)(n_used ? n_used : 1) * sizeof *f->roles);
  f->n_params = 0;
  for (int i = 0; i < n_used; i++)
    if (used[i] == id) add_param(f, id, KP_OUT);
  for (int i = 0; i < n_used && k; i++)
    if (kernel_stmts_store(k->body, k->nbody, used[i])) add_param(f, used[i], KP_STORED);
  for (int k = 0; k < n->nin; k++)
    for (int i = 0; i < n_used; i++)
      if (used[i] == n->in[k]) add_param(f, used[i], (KParamRole)(KP_IN0 + k));
  for (int i = 0; i < n_used; i++) add_param(f, used[i], KP_OTHER);
}

KernelForm kernel_form(const Graph *g, int id, const Kernel *k) {
  KernelForm f = {0};
  int *used, n_used;
  if (k) {
    n_used = kernel_stmt_buffers(k->body, k->nbody, &used);
  } else {
    const Node *n = &g->nodes[id]; /* a library call reads all its inputs */
    used = xmalloc((size_t)(n->nin + 1) * sizeof *used);
    for (n_used = 0; n_used < n->nin; n_used++) used[n_used] = n->in[n_used];
    used[n_used++] = id;
  }
  order_params(&f, g, id, k, used, n_used);
  free(used);
  StrBuf sb = {0};
  for (int i = 0; i < f.n_params; i++)
    sb_printf(&sb, "%d:%d,", f.roles[i], g->nodes[f.params[i]].dtype);
  if (k) {
    sb_printf(&sb, "%d %d", k->n_vars, k->n_locals);
    code_stmts(&sb, k->body, k->nbody, &f);
  } else if (op_info(g->nodes[id].op)->op_class == OPC_CONV) {
    code_conv(&sb, g, id);
  } else if (op_info(g->nodes[id].op)->op_class == OPC_CALL) {
    code_call(&sb, g, id);
  } else {
    code_gemm(&sb, g, id);
  }
  f.code = sb_take(&sb);
  return f;
}

int kernel_form_param(const KernelForm *f, int buf) { return param_of(f, buf); }

int kernel_form_stream(const KernelForm *f, int64_t stream) {
  for (int i = 0; i < f->n_streams; i++)
    if (f->streams[i] == stream) return i;
  return -1;
}

void kernel_form_free(KernelForm *f) {
  free(f->code);
  free(f->params);
  free(f->roles);
  free(f->streams);
  *f = (KernelForm){0};
}
