/* c_family.c — the printer the C and CUDA backends share (c_family.h): loop
 * nests as C statements, forward/backward call lists with the gradient
 * buckets, the step, and the runtime's tables. Buffers are never aliased
 * within a kernel (the memory plan gives values that are alive together
 * disjoint ranges), hence restrict. */
#include "c_family.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *c_type(DType t) {
  switch (t) {
  case DT_F32: return "float";
  case DT_I32: return "int32_t";
  case DT_U8: return "uint8_t";
  case DT_BF16: return "uint16_t"; /* a stored activation's bits (trc_bf16_pack) */
  }
  return "float";
}

/* A float literal C reads back to the same float. */
void print_float(FILE *out, double v) {
  if (isinf(v)) {
    fputs(v < 0 ? "(-INFINITY)" : "INFINITY", out);
    return;
  }
  char buf[64];
  snprintf(buf, sizeof buf, "%.9g", v);
  bool has_point = strpbrk(buf, ".e") != NULL;
  fprintf(out, v < 0 ? "(%s%sf)" : "%s%sf", buf, has_point ? "" : ".0");
}

/* Buffer buf's name: names->names[i] where names->ids[i] is buf, else b<buf>. */
static void print_buf(FILE *out, int buf, const BufNames *names) {
  for (int i = 0; names && i < names->n; i++)
    if (names->ids[i] == buf) {
      fputs(names->names[i], out);
      return;
    }
  fprintf(out, "b%d", buf);
}

/* `, stream, ` of a random draw: its variable, or the number. */
static void print_stream(FILE *out, int64_t stream, const BufNames *nm) {
  for (int i = 0; nm && i < nm->n_streams; i++)
    if (nm->streams[i] == stream) {
      fprintf(out, ", stream%d, ", i);
      return;
    }
  fprintf(out, ", %lldu, ", (long long)stream);
}

static void print_expr(FILE *out, const KExpr *e, const BufNames *nm) {
  static const char *unary_fn[] = {[KU_NEG] = "-", [KU_EXP] = "expf", [KU_LOG] = "logf",
                                   [KU_TANH] = "tanhf", [KU_ERF] = "erff", [KU_SQRT] = "sqrtf"};
  static const char *binary_op[] = {[KB_ADD] = "+", [KB_SUB] = "-", [KB_MUL] = "*", [KB_DIV] = "/"};
  switch (e->kind) {
  case KE_CONST: print_float(out, e->f); break;
  case KE_ICONST: fprintf(out, "%lld", (long long)e->i); break;
  case KE_INDEX: fprintf(out, "i%d", e->var); break;
  case KE_LOCAL:
    fprintf(out, "t%d", e->var);
    if (e->a) { /* a row's element */
      fputc('[', out);
      print_expr(out, e->a, nm);
      fputc(']', out);
    }
    break;
  case KE_LOAD:
    if (e->is_int) fputs("(int64_t)", out);
    print_buf(out, e->buf, nm);
    fputc('[', out);
    print_expr(out, e->a, nm);
    fputc(']', out);
    break;
  case KE_UNARY:
    fprintf(out, "%s(", unary_fn[e->op]);
    print_expr(out, e->a, nm);
    fputc(')', out);
    break;
  case KE_BINARY:
    if (e->op == KB_MAX || e->op == KB_MIN) {
      fputs(e->op == KB_MAX ? "trc_maxf(" : "trc_minf(", out);
      print_expr(out, e->a, nm);
      fputs(", ", out);
      print_expr(out, e->b, nm);
      fputc(')', out);
      break;
    }
    fputc('(', out);
    print_expr(out, e->a, nm);
    fprintf(out, " %s ", binary_op[e->op]);
    print_expr(out, e->b, nm);
    fputc(')', out);
    break;
  case KE_SELECT: /* eager: a call, so that both arms are evaluated (trainc.h) */
    fputs(e->eager ? "trc_selectf(" : "(", out);
    print_expr(out, e->a, nm);
    fputs(e->eager ? ", " : " > 0.0f ? ", out);
    print_expr(out, e->b, nm);
    fputs(e->eager ? ", " : " : ", out);
    print_expr(out, e->c, nm);
    fputc(')', out);
    break;
  case KE_EQ:
    fputs("((", out);
    print_expr(out, e->a, nm);
    fputs(") == (", out);
    print_expr(out, e->b, nm);
    fputs(") ? 1.0f : 0.0f)", out);
    break;
  case KE_TO_FLOAT:
    fputs(e->narrow ? "(float)(int32_t)(" : "(float)(", out);
    print_expr(out, e->a, nm);
    fputc(')', out);
    break;
  case KE_RANDOM:
    fputs("trc_kernel_uniform(", out);
    print_buf(out, e->buf, nm);
    print_stream(out, e->i, nm);
    print_expr(out, e->a, nm);
    fputc(')', out);
    break;
  }
}

void print_index(FILE *out, const KExpr *e) { print_expr(out, e, NULL); }

static void indent(FILE *out, int depth) {
  for (int i = 0; i < depth; i++) fputs("  ", out);
}

/* `a op b;` for a reduction's op: its opening (up to b) and its close. */
static void open_combine(FILE *out, KBinaryOp op, const char *a) {
  fprintf(out, op == KB_ADD ? "%s + " : op == KB_MAX ? "trc_maxf(%s, " : "trc_minf(%s, ", a);
}

static void close_combine(FILE *out, KBinaryOp op) { fputs(op == KB_ADD ? ";\n" : ");\n", out); }

/* `a op e;` for the reduction's element e. */
static void print_combine(FILE *out, KBinaryOp op, const char *a, const KExpr *e,
                          const BufNames *nm) {
  open_combine(out, op, a);
  print_expr(out, e, nm);
  close_combine(out, op);
}

/* The body of a reduction's loop over its full groups of K_LANES: a sum
 * adds each element to its lane; a max or min computes the group's elements
 * first and hands them to trainc.h's trc_lanes_maxf / trc_lanes_minf, which
 * GCC vectorizes where it does not a loop of trc_maxf. Either loop over the
 * group is kept from whole unrolling (TRC_GROUP_LOOP), so that it runs as
 * one vector of K_LANES. */
static void print_lane_groups(FILE *out, const KStmt *s, KBinaryOp op, int depth,
                              const BufNames *nm) {
  int v = s->var;
  const KExpr *element = s->body[0]->value->b;
  char lane[64];
  snprintf(lane, sizeof lane, "lane[i%d - c]", v);
  if (op == KB_ADD) {
    fputc('\n', out);
    indent(out, depth);
    fprintf(out, "TRC_GROUP_LOOP for (int64_t i%d = c; i%d < c + %d; i%d++) %s = ", v, v, K_LANES, v,
            lane);
    print_combine(out, op, lane, element, nm);
    return;
  }
  fputs(" {\n", out);
  indent(out, depth);
  fprintf(out, "float group[%d];\n", K_LANES);
  indent(out, depth);
  fprintf(out, "TRC_GROUP_LOOP for (int64_t i%d = c; i%d < c + %d; i%d++) group[i%d - c] = ", v,
          v, K_LANES, v, v);
  print_expr(out, element, nm);
  fputs(";\n", out);
  indent(out, depth);
  fprintf(out, "%s(lane, group);\n", op == KB_MAX ? "trc_lanes_maxf" : "trc_lanes_minf");
  indent(out, depth - 1);
  fputs("}\n", out);
}

/* A reduction loop in K_LANES lanes (ir.h): full groups of lanes, the
 * remainder, then the lanes folded in halves into the local. */
static void print_reduction(FILE *out, const KStmt *s, const KLaneSplit *ls, int depth,
                            const BufNames *nm) {
  KBinaryOp op = ls->op;
  int t = ls->local;
  const char *identity = op == KB_ADD ? "0.0f" : op == KB_MAX ? "-INFINITY" : "INFINITY";
  int v = s->var;
  fprintf(out, "{ /* t%d in %d lanes */\n", t, K_LANES);
  indent(out, depth + 1);
  fprintf(out, "float lane[%d];\n", K_LANES);
  indent(out, depth + 1);
  fprintf(out, "for (int l = 0; l < %d; l++) lane[l] = l ? %s : t%d;\n", K_LANES, identity, t);
  /* the bounds: constants, or a bounded loop's, computed once here */
  char full[32], end[32];
  snprintf(full, sizeof full, "%lld", (long long)ls->full);
  snprintf(end, sizeof end, "%lld", (long long)ls->extent);
  if (ls->limit) {
    indent(out, depth + 1);
    fputs("const int64_t lane_end = ", out);
    print_expr(out, ls->limit, nm);
    fprintf(out, ", lane_full = lane_end / %d * %d;\n", K_LANES, K_LANES);
    snprintf(full, sizeof full, "lane_full");
    snprintf(end, sizeof end, "lane_end");
  }
  indent(out, depth + 1);
  fprintf(out, "for (int64_t c = 0; c < %s; c += %d)", full, K_LANES);
  print_lane_groups(out, s, op, depth + 2, nm);
  if (ls->limit || ls->full < ls->extent) {
    char lane[64];
    snprintf(lane, sizeof lane, "lane[i%d - %s]", v, full);
    indent(out, depth + 1);
    fprintf(out, "for (int64_t i%d = %s; i%d < %s; i%d++) %s = ", v, full, v, end, v, lane);
    print_combine(out, op, lane, s->body[0]->value->b, nm);
  }
  indent(out, depth + 1);
  fprintf(out, "for (int w = %d; w > 0; w /= 2)\n", K_LANES / 2);
  indent(out, depth + 2);
  fputs("for (int l = 0; l < w; l++) lane[l] = ", out);
  open_combine(out, op, "lane[l]");
  fputs("lane[l + w]", out);
  close_combine(out, op);
  indent(out, depth + 1);
  fprintf(out, "t%d = lane[0];\n", t);
  indent(out, depth);
  fputs("}\n", out);
}

static bool expr_any(const KExpr *e, bool (*match)(const KExpr *, int64_t), int64_t arg) {
  if (!e) return false;
  return match(e, arg) || expr_any(e->a, match, arg) || expr_any(e->b, match, arg) ||
         expr_any(e->c, match, arg);
}

bool stmts_any_expr(KStmt *const *body, int n, bool (*match)(const KExpr *, int64_t),
                    int64_t arg) {
  for (int i = 0; i < n; i++) {
    const KStmt *s = body[i];
    if (expr_any(s->index, match, arg) || expr_any(s->value, match, arg) ||
        stmts_any_expr(s->body, s->nbody, match, arg))
      return true;
  }
  return false;
}

bool expr_is_var(const KExpr *e, int64_t var) { return e->kind == KE_INDEX && e->var == var; }

/* A loop of one iteration: its body in place, after its variable (0) when
 * the body reads it (loop variables and locals are unique within a kernel). */
static void print_one_iteration(FILE *out, const KStmt *s, int depth, const BufNames *nm) {
  if (stmts_any_expr(s->body, s->nbody, expr_is_var, s->var)) {
    indent(out, depth);
    fprintf(out, "const int64_t i%d = 0;\n", s->var);
  }
  print_stmts_named(out, s->body, s->nbody, depth, nm);
}

static bool has_loop(KStmt *const *body, int n) {
  for (int i = 0; i < n; i++)
    if (body[i]->kind == KS_FOR) return true;
  return false;
}

/* A bound of a loop's range: a constant, or a bounded loop's limit (rounded
 * down to a multiple of K_LANES when `whole`). */
typedef struct {
  int64_t konst;
  const KExpr *limit;
  bool whole;
} Bound;

static void print_bound(FILE *out, Bound b, const BufNames *nm) {
  if (!b.limit) {
    fprintf(out, "%lld", (long long)b.konst);
    return;
  }
  if (b.whole) fputc('(', out);
  print_expr(out, b.limit, nm);
  if (b.whole) fprintf(out, " / %d * %d)", K_LANES, K_LANES);
}

static void print_range(FILE *out, const KStmt *s, Bound from, Bound to, int depth,
                        const BufNames *nm) {
  fprintf(out, "for (int64_t i%d = ", s->var);
  print_bound(out, from, nm);
  fprintf(out, "; i%d < ", s->var);
  print_bound(out, to, nm);
  fprintf(out, "; i%d++) {\n", s->var);
  print_stmts_named(out, s->body, s->nbody, depth + 1, nm);
  indent(out, depth);
  fputs("}\n", out);
}

/* An innermost loop whose trip count is past K_LANES but not a multiple of
 * it is printed as a part that is and the rest, in the same order: GCC's
 * very-cheap cost model (the default flags) vectorizes only the former. A
 * bounded loop that may run K_LANES iterations is split the same way at
 * run time (GCC sees that `limit / 16 * 16` is a multiple of 16). */
static void print_for(FILE *out, const KStmt *s, int depth, const BufNames *nm) {
  const Bound zero = {0}, end = {.konst = s->extent, .limit = s->limit};
  const Bound full = {.konst = s->extent / K_LANES * K_LANES, .limit = s->limit, .whole = true};
  bool split = s->limit ? s->extent >= K_LANES : full.konst != 0 && full.konst != s->extent;
  if (!split || has_loop(s->body, s->nbody)) {
    print_range(out, s, zero, end, depth, nm);
    return;
  }
  print_range(out, s, zero, full, depth, nm);
  indent(out, depth);
  print_range(out, s, full, end, depth, nm);
}

void print_stmts_named(FILE *out, KStmt *const *body, int n, int depth, const BufNames *nm) {
  for (int i = 0; i < n; i++) {
    const KStmt *s = body[i];
    KLaneSplit ls;
    if (s->kind == KS_FOR && s->extent == 1 && !s->limit) {
      print_one_iteration(out, s, depth, nm);
      continue;
    }
    indent(out, depth);
    if (kstmt_lane_split(s, &ls)) {
      print_reduction(out, s, &ls, depth, nm);
      continue;
    }
    switch (s->kind) {
    case KS_FOR: print_for(out, s, depth, nm); break;
    case KS_LOCAL:
      if (s->extent) { /* a row */
        fprintf(out, "float t%d[%lld];\n", s->var, (long long)s->extent);
        break;
      }
      fprintf(out, "float t%d = ", s->var);
      print_expr(out, s->value, nm);
      fputs(";\n", out);
      break;
    case KS_SET:
      fprintf(out, "t%d", s->var);
      if (s->index) {
        fputc('[', out);
        print_expr(out, s->index, nm);
        fputc(']', out);
      }
      fputs(" = ", out);
      print_expr(out, s->value, nm);
      fputs(";\n", out);
      break;
    case KS_STORE:
      print_buf(out, s->buf, nm);
      fputc('[', out);
      print_expr(out, s->index, nm);
      fputs(s->accumulate ? "] += " : "] = ", out);
      print_expr(out, s->value, nm);
      fputs(";\n", out);
      break;
    }
  }
}

void print_stmts(FILE *out, KStmt **body, int n, int depth) {
  print_stmts_named(out, body, n, depth, NULL);
}

void print_node_comment(FILE *out, const Program *p, int id) {
  const Node *n = &p->g->nodes[id];
  char sb[128];
  fprintf(out, "/* %%%d = %s", id, op_info(n->op)->name);
  for (int k = 0; k < n->nin; k++) fprintf(out, "%s%%%d", k ? ", " : " ", n->in[k]);
  fprintf(out, " : %s%s", dtype_name(n->dtype), shape_str(&n->shape, sb));
  if (n->grad_of_param >= 0) fprintf(out, ", added to grad(%s)", p->g->nodes[n->grad_of_param].name);
  if (n->recompute_of >= 0) fprintf(out, ", recomputes %%%d", n->recompute_of);
  if (n->name) fprintf(out, " -- %s", n->name);
  const char *path = node_layer_path(p->g, id);
  if (path) fprintf(out, ", in %s", path);
  if (n->loc.line) fprintf(out, ", line %d", n->loc.line);
  fputs(" */\n", out);
}

void print_buffer_list(FILE *out, const Program *p, int id, const int *used, int n_used,
                       const char *restrict_kw, const char *arena) {
  const Graph *g = p->g;
  for (int i = 0; i < n_used; i++) {
    int b = used[i];
    const char *qual = b == id || p->stored_by[b] == id ? "" : "const ";
    const char *type = c_type(g->nodes[b].dtype);
    fprintf(out, "  %s%s *%s b%d = (%s%s *)(%s + %llu);\n", qual, type, restrict_kw, b, qual, type,
            arena, (unsigned long long)p->offset[b]);
  }
}

void print_stmt_buffers(FILE *out, const Program *p, int id, KStmt *const *body, int n,
                        const char *restrict_kw, const char *arena) {
  int *used, n_used = kernel_stmt_buffers(body, n, &used);
  print_buffer_list(out, p, id, used, n_used, restrict_kw, arena);
  free(used);
}

void print_call_comment(FILE *out, const Program *p, int id) { print_call_comment_in(out, p, id, 0); }

void print_call_comment_in(FILE *out, const Program *p, int id, size_t layer_len) {
  const Node *nd = &p->g->nodes[id];
  const char *path = node_layer_path(p->g, id);
  if (path && layer_len) path = path[layer_len] ? path + layer_len + 1 : NULL;
  fprintf(out, " /* %s%sline %d: %s%s%s%s */\n", path ? path : "", path ? " " : "", nd->loc.line,
          nd->recompute_of >= 0 ? "recompute " : "", op_info(nd->op)->name, nd->name ? " -> " : "",
          nd->name ? nd->name : "");
}

void print_header_comment(FILE *out, const Program *p) {
  const Graph *g = p->g;
  char b1[32], b2[32];
  fprintf(out, "/* Generated by trainc from ");
  print_safe_path(out, g->source_path);
  fprintf(out, ", model %s. Do not edit: edit the model file and rebuild.\n", g->model_name);
  fprintf(out, " * Arena: %s in all; activations and gradients in flight %s (planned peak). */\n",
          format_bytes(p->arena_bytes, b1), format_bytes(p->activation_bytes, b2));
}

static void print_kernel_list(FILE *out, const Program *p, const int *ids, int n,
                              void (*gemm)(FILE *, const Program *, int),
                              void (*loop)(FILE *, const Program *, int, const Kernel *)) {
  for (int i = 0; i < n; i++) {
    print_node_comment(out, p, ids[i]);
    if (op_calls_library(p->g->nodes[ids[i]].op))
      gemm(out, p, ids[i]);
    else
      loop(out, p, ids[i], p->kernels[ids[i]]);
  }
}

void print_kernels(FILE *out, const Program *p, void (*gemm)(FILE *, const Program *, int),
                   void (*loop)(FILE *, const Program *, int, const Kernel *)) {
  fputs("/* ---- forward kernels ---- */\n\n", out);
  print_kernel_list(out, p, p->forward, p->n_forward, gemm, loop);
  fputs("/* ---- backward kernels ---- */\n\n", out);
  print_kernel_list(out, p, p->backward, p->n_backward, gemm, loop);
}

/* Kernel id's call and its mark for --kernel-times (runtime/trainc.h). */
static void print_calls(FILE *out, const Program *p, const StepForm *f, int id, int site) {
  f->call(out, p, id, f->data);
  fprintf(out, " trc_kernel_done(%d);", site);
  print_call_comment(out, p, id);
}


/* The buckets final after backward kernel `at` (-1: before the first). */
static void print_buckets_ready(FILE *out, const Program *p, const StepForm *f, int at) {
  const Graph *g = p->g;
  for (int b = 0; b < p->n_buckets; b++) {
    const GradBucket *bk = &p->buckets[b];
    if (bk->ready != at) continue;
    fprintf(out, "  if (s) %sbucket_ready(s, %llu, %llu); /* bucket %d final: grad(%s)",
            step_comm_prefix(f), (unsigned long long)bk->first, (unsigned long long)bk->count, b,
            g->nodes[g->params[bk->first_param]].name);
    if (bk->n_params > 1)
      fprintf(out, " .. grad(%s)", g->nodes[g->params[bk->first_param + bk->n_params - 1]].name);
    fputs(" */\n", out);
  }
}

/* The calls of ids[0..n), in loops over layers where f prints them; in
 * backward(), with a step s each gradient bucket handed to its all-reduce as
 * soon as the kernel that finishes it has run. */
static void print_call_list(FILE *out, const Program *p, const StepForm *f, const int *ids,
                            int n) {
  if (f->declare) f->declare(out, p, ids, n, f->data);
  bool backward = ids == p->backward;
  fputs("  trc_kernel_start();\n", out);
  if (backward) print_buckets_ready(out, p, f, -1);
  for (int i = 0; i < n;) {
    int looped = f->loop ? f->loop(out, p, f, ids, i) : 0;
    if (looped) {
      i += looped;
      continue;
    }
    print_calls(out, p, f, ids[i], step_site(p, ids, i));
    if (backward) print_buckets_ready(out, p, f, i);
    i++;
  }
}

/* forward(), and backward(..., s). */
void print_forward_backward(FILE *out, const Program *p, const StepForm *f) {
  fprintf(out, "%s {\n", f->forward_def);
  print_call_list(out, p, f, p->forward, p->n_forward);
  fprintf(out, "}\n\n%s {\n", f->backward_def);
  print_call_list(out, p, f, p->backward, p->n_backward);
  fputs("}\n\n", out);
}

/* ---- tables for the runtime ---- */

static void print_dims(FILE *out, const Shape *s) {
  fputc('{', out);
  for (int i = 0; i < s->rank; i++) fprintf(out, "%s%lld", i ? ", " : "", (long long)s->dim[i]);
  fputc('}', out);
}

/* Model-file names are name strings (letters, digits, "_.-*{},"), and the
 * escape below keeps even another byte from ending the literal. */
static void print_c_string_or_null(FILE *out, const char *s) {
  if (!s) {
    fputs("NULL", out);
    return;
  }
  fputc('"', out);
  print_safe_path(out, s);
  fputc('"', out);
}

static void print_params(FILE *out, const Program *p) {
  static const char *const init_enum[] = {TRC_INIT_KINDS(TRC_ENUM_IDENT)};
  const Graph *g = p->g;
  fputs("static const trc_param params[] = {\n", out);
  int *declared = graph_params_declared(g);
  for (int i = 0; i < g->n_params; i++) {
    const Node *n = &g->nodes[declared[i]];
    fprintf(out, "    {.name = \"%s\", .rank = %d, .dims = ", n->name, n->shape.rank);
    print_dims(out, &n->shape);
    fprintf(out, ", .offset = %llu, .count = %lld, .init = %s, .a = ",
            (unsigned long long)p->offset[n->id], (long long)shape_numel(&n->shape),
            init_enum[n->init.kind]);
    print_float(out, n->init.a);
    fputs(", .b = ", out);
    print_float(out, n->init.b);
    fprintf(out, ", .fan_in = %lld, .fan_out = %lld, .decay = %d, .frozen = %d, .file_name = ",
            (long long)n->init.fan_in, (long long)n->init.fan_out, n->decay, n->frozen);
    print_c_string_or_null(out, n->file_name);
    fprintf(out, ", .transposed = %d},\n", n->transposed);
  }
  free(declared);
  fputs("};\n\n", out);
}

static void print_inputs(FILE *out, const Program *p) {
  static const char *const dtype_enum[] = {TRC_DTYPES(TRC_ENUM_IDENT)};
  const Graph *g = p->g;
  fputs("static const trc_input inputs[] = {\n", out);
  for (int i = 0; i < g->n_inputs; i++) {
    const Node *n = &g->nodes[g->inputs[i]];
    uint64_t example =
        (uint64_t)(shape_numel(&n->shape) / n->shape.dim[0]) * (uint64_t)dtype_size(n->dtype);
    fprintf(out, "    {.name = \"%s\", .dtype = %s, .rank = %d, .dims = ", n->name,
            dtype_enum[dtype_abi(n->dtype)], n->shape.rank);
    print_dims(out, &n->shape);
    fprintf(out, ", .offset = %llu, .example_bytes = %llu, .index_limit = %lld},\n",
            (unsigned long long)p->offset[n->id], (unsigned long long)example,
            (long long)n->index_limit);
  }
  fputs("};\n\n", out);
}

static int input_index(const Graph *g, int node) {
  for (int i = 0; i < g->n_inputs; i++)
    if (g->inputs[i] == node) return i;
  return -1;
}

/* Values of trc_train_config by the kind of their row in TRC_TRAIN_CONFIG,
 * as C that reads back the same value. */
static void print_cfg_I64(FILE *out, int64_t v) { fprintf(out, "%lld", (long long)v); }
static void print_cfg_U64(FILE *out, uint64_t v) { fprintf(out, "%lluu", (unsigned long long)v); }
static void print_cfg_F64(FILE *out, double v) { fprintf(out, "%.17g", v); }
static void print_cfg_BOOL(FILE *out, int v) { fprintf(out, "%d", v); }
static void print_cfg_METRICS(FILE *out, unsigned v) { fprintf(out, "%uu", v); }
static void print_cfg_OPTIMIZER(FILE *out, trc_optimizer_kind v) {
  static const char *const names[] = {TRC_OPTIMIZERS(TRC_ENUM_IDENT)};
  fputs(names[v], out);
}
static void print_cfg_SCHEDULE(FILE *out, trc_schedule_kind v) {
  static const char *const names[] = {TRC_SCHEDULES(TRC_ENUM_IDENT)};
  fputs(names[v], out);
}
static void print_cfg_PRECISION(FILE *out, trc_precision v) {
  static const char *const names[] = {TRC_PRECISIONS(TRC_ENUM_IDENT)};
  fputs(names[v], out);
}

static void print_defaults(FILE *out, const trc_train_config *c) {
  fputs("    .defaults = {\n", out);
#define PRINT_FIELD(kind, name, run, help)                                                         \
  fputs("        ." #name " = ", out);                                                             \
  print_cfg_##kind(out, c->name);                                                                  \
  fputs(",\n", out);
  TRC_TRAIN_CONFIG(PRINT_FIELD)
#undef PRINT_FIELD
  fputs("    },\n", out);
}

/* The source path is user text, printed inside a C string and a comment:
 * every byte but [A-Za-z0-9._/-] becomes a three-digit octal escape, so no
 * text ends the string or the comment ("*" and "/" never meet), no "??"
 * forms a trigraph, no backslash splices a line, and the string holds the
 * path exactly ("exp ()/x.nn" is "exp\040\050\051/x.nn"). */
void print_safe_path(FILE *out, const char *path) {
  for (const unsigned char *c = (const unsigned char *)path; *c; c++)
    if (isalnum(*c) || (*c && strchr("._-/", *c)))
      fputc(*c, out);
    else
      fprintf(out, "\\%03o", *c);
}

static void print_patterns(FILE *out, const NameList *patterns) {
  char *joined = namelist_join(patterns);
  print_c_string_or_null(out, joined);
  free(joined);
}

/* trc_model.kernel_sites: each call of forward() and backward() (the sites
 * of trc_kernel_done) with the cost model's seconds for it under each
 * precision, one short row each (a model of many layers has many: no field
 * names). */
static void print_kernel_sites(FILE *out, const Program *p) {
  fprintf(out, "/* per kernel call: op, value, line, predicted seconds forward, backward, recompute "
               "under fp32, then under bf16 */\n"
               "static const trc_kernel_site kernel_sites[%d] = {\n", step_sites(p));
  for (int site = 0; site < step_sites(p); site++) {
    int id = step_site_node(p, site);
    const Node *n = &p->g->nodes[id];
    fprintf(out, "    {\"%s\", ", op_info(n->op)->name);
    print_c_string_or_null(out, n->name);
    fprintf(out, ", %d, {", n->loc.line);
    for (int precision = 0; precision < TRC_PRECISION_COUNT; precision++) {
      const double *sec = p->kernel_seconds[precision] ? p->kernel_seconds[precision][id] : (const double[3]){0};
      fprintf(out, "%s{%.7g, %.7g, %.7g}", precision ? ", " : "", sec[0], sec[1], sec[2]);
    }
    fputs("}},\n", out);
  }
  fputs("};\n\n", out);
}

static void print_model(FILE *out, const Program *p, const char *device) {
  static const char *const loss_enum[] = {TRC_LOSS_KINDS(TRC_ENUM_IDENT)};
  const Graph *g = p->g;
  fputs("static const trc_model model = {\n", out);
  fprintf(out, "    .name = \"%s\",\n    .source = \"", g->model_name);
  print_safe_path(out, g->source_path);
  fprintf(out, "\",\n    .batch = %lld,\n    .arena_bytes = %llu,\n", (long long)g->train.batch,
          (unsigned long long)p->arena_bytes);
  fprintf(out, "    .bf16_operand_bytes = %llu, .rounded_operand_bytes = %llu,\n",
          (unsigned long long)p->bf16_operand_bytes, (unsigned long long)p->rounded_operand_bytes);
  fprintf(out, "    .param_offset = %llu, .param_count = %llu, .grad_offset = %llu,\n",
          (unsigned long long)p->param_offset, (unsigned long long)(p->param_bytes / 4),
          (unsigned long long)p->grad_offset);
  fprintf(out, "    .trained_count = %llu, .allow_missing = ",
          (unsigned long long)(p->trained_bytes / 4));
  print_patterns(out, &g->allow_missing);
  fputs(", .allow_unexpected = ", out);
  print_patterns(out, &g->allow_unexpected);
  fputs(",\n", out);
  fprintf(out, "    .n_params = %d, .params = params,\n    .n_inputs = %d, .inputs = inputs,\n",
          g->n_params, g->n_inputs);
  fprintf(out, "    .loss_offset = %llu, .loss_seed_offset = %llu, .loss_kind = %s,\n",
          (unsigned long long)p->offset[g->loss], (unsigned long long)p->seed_offset,
          loss_enum[g->loss_kind]);
  const PredictLayout pl = program_predict_layout(p);
  if (pl.has)
    fprintf(out,
            "    .has_predict = 1, .predict_offset = %llu, .predict_classes = %lld, .predict_rows "
            "= %lld,\n",
            (unsigned long long)pl.offset, (long long)pl.classes, (long long)pl.rows);
  if (pl.head)
    fprintf(out,
            "    .predict_head = 1, .head_weight_offset = %llu, .head_stats_offset = %llu, "
            ".head_dim = %lld, .head_w_vd = %d,\n",
            (unsigned long long)pl.weight_offset, (unsigned long long)pl.stats_offset,
            (long long)pl.dim, pl.w_vd);
  fprintf(out, "    .label_input = %d, .token_input = %d,\n",
          g->labels >= 0 ? input_index(g, g->labels) : -1,
          g->tokens >= 0 ? input_index(g, g->tokens) : -1);
  for (int i = 0; i < g->n_inputs; i++)
    if (g->nodes[g->inputs[i]].has_ignore)
      fprintf(out, "    .has_ignore = 1, .ignore_input = %d, .ignore_label = %lld,\n", i,
              (long long)g->nodes[g->inputs[i]].ignore_label);
  fprintf(out, "    .rng_key_offset = %llu, .training_offset = %llu,\n",
          (unsigned long long)p->rng_key_offset, (unsigned long long)p->training_offset);
  char spec[64];
  fprintf(out,
          "    .forward = forward,\n    .backward = backward,\n    .step = step,\n    .checkpoint "
          "= \"%s\",\n",
          checkpoint_spec_str(&g->train.checkpoint, spec));
  fprintf(out, "    .n_kernel_sites = %d, .kernel_sites = kernel_sites, .predicted_update = {", step_sites(p));
  for (int precision = 0; precision < TRC_PRECISION_COUNT; precision++)
    fprintf(out, "%s%.9g", precision ? ", " : "", p->update_seconds[precision]);
  fprintf(out, "}, .predicted_calibrated = %d,\n", p->priced_calibrated);
  print_defaults(out, &g->train.run);
  if (device) fprintf(out, "    .device = &%s,\n", device);
  fputs("};\n\nint main(int argc, char **argv) { return trc_main(&model, argc, argv); }\n", out);
}

void print_runtime_tables(FILE *out, const Program *p, const char *device) {
  print_params(out, p);
  print_inputs(out, p);
  print_kernel_sites(out, p);
  print_model(out, p, device);
}
