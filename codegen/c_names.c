/* c_names.c — the C backend's functions (one per distinct kernel body) and
 * the names of functions and values (c_names.h). */
#include "c_names.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Names the generated file declares or calls, and what its headers (math.h,
 * stdint.h, string.h, trainc.h) define in lower case; C11's keywords. */
static const char *const reserved[] = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "bool", "true", "false", "alignas",
    "alignof", "noreturn", "static_assert", "complex", "imaginary", "errno", "stdin", "stdout",
    "stderr", "assert", "linux", "unix", "i386", "math_errhandling", "A", "s", "arg", "ctx",
    "lo", "hi", "lane", "c", "l", "w", "j", "out", "dims", "forward", "backward", "step", "main",
    "model", "params", "inputs", "memset", "expf", "logf", "tanhf", "erff", "sqrtf", "isfinite",
};

/* The names the kernels' own variables take: t3 (locals), i2 (loop
 * variables), b7 (buffers), in0, x4 and stream0 (parameters). */
static bool is_variable_name(const char *name) {
  static const char *const prefixes[] = {"t", "i", "b", "in", "x", "stream"};
  size_t letters = strspn(name, "abcdefghijklmnopqrstuvwxyz");
  if (!letters || !name[letters] || strspn(name + letters, "0123456789") != strlen(name + letters))
    return false;
  for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
    if (strlen(prefixes[i]) == letters && !strncmp(name, prefixes[i], letters)) return true;
  return false;
}

/* A name the file may use for a value or a function: not reserved, not a
 * macro's form (no lower-case letter), no leading '_' or digit, not trc_'s
 * or a type's (`_t`). */
static bool usable(const char *name) {
  size_t n = strlen(name);
  if (!n || name[0] == '_' || isdigit((unsigned char)name[0])) return false;
  if (!strncmp(name, "trc_", 4) || (n >= 2 && !strcmp(name + n - 2, "_t"))) return false;
  if (!strpbrk(name, "abcdefghijklmnopqrstuvwxyz") || is_variable_name(name)) return false;
  for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
    if (!strcmp(name, reserved[i])) return false;
  return true;
}

/* The names taken in a scope (the file's: every name; a loop body's: its
 * own and the file scope's, ns.also); c owns them. */
typedef struct {
  NameMap *taken;
  const NameMap *also;
  CNames *c;
} Names;

static bool taken(const Names *ns, const char *name) {
  return namemap_get(ns->taken, name, NULL) || (ns->also && namemap_get(ns->also, name, NULL));
}

static char *take(Names *ns, char *name) {
  VEC_PUSH(ns->c->owned, ns->c->n_owned, ns->c->cap_owned, name);
  namemap_put(ns->taken, name, 1);
  return name;
}

/* text as a C identifier: every byte outside [A-Za-z0-9_] as '_', and a
 * `v_` in front when that is not usable. */
static char *identifier(const char *text) {
  char *id = xsprintf("v_%s", text);
  for (char *c = id + 2; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '_') *c = '_';
  if (usable(id + 2)) memmove(id, id + 2, strlen(id + 2) + 1);
  return id;
}

/* A free name for `text`, with `_2`, `_3`, ... when it is taken; with
 * n_loops > 0 also NAME_loop<i> and NAME_loop<i>_task for i < n_loops
 * must be free (and are taken with it). ns->c owns it. */
static char *claim(Names *ns, const char *text, int n_loops) {
  char *base = identifier(text), *name = xstrdup(base);
  for (int suffix = 2;; suffix++) {
    bool free_ = !taken(ns, name);
    for (int i = 0; free_ && i < n_loops; i++) {
      char *loop = xsprintf("%s_loop%d", name, i), *task = xsprintf("%s_loop%d_task", name, i);
      free_ = !taken(ns, loop) && !taken(ns, task);
      free(loop), free(task);
    }
    if (free_) break;
    free(name);
    name = xsprintf("%s_%d", base, suffix);
  }
  free(base);
  for (int i = 0; i < n_loops; i++) {
    take(ns, xsprintf("%s_loop%d", name, i));
    take(ns, xsprintf("%s_loop%d_task", name, i));
  }
  return take(ns, name);
}

/* The value's name in the model: a parameter's or input's full name, else
 * its variable's, or for a backward node the forward node's it comes from;
 * NULL for none. */
static const char *model_name(const Graph *g, int id) {
  const Node *n = &g->nodes[id];
  if (n->name) return n->name;
  if (n->recompute_of >= 0) return model_name(g, n->recompute_of);
  return n->origin >= 0 ? model_name(g, n->origin) : NULL;
}

/* The text a value's pointer is named after: `grad.<param>` for a
 * contribution to a parameter's gradient; `<layer path>.<variable>` for a
 * named value (`_recomputed` for its recomputation); `<path>.<origin
 * name>_bwd_<op>` for a backward node; `<path>.<op>` for the rest. */
static char *value_text(const Graph *g, int id) {
  const Node *n = &g->nodes[id];
  const char *op = op_info(n->op)->name;
  if (n->op == OP_PARAM || n->op == OP_INPUT) return xstrdup(n->name);
  if (n->grad_of_param >= 0) return xsprintf("grad.%s", g->nodes[n->grad_of_param].name);
  const char *path = node_layer_path(g, id), *dot = path ? "." : "", *n_name = n->name;
  path = path ? path : "";
  if (n->name) {
    const char *last = strrchr(path, '.') ? strrchr(path, '.') + 1 : path;
    if (!strcmp(last, n->name)) dot = "", n_name = ""; /* h = linear(...): h, not h.h */
    return xsprintf("%s%s%s%s", path, dot, n_name, n->recompute_of >= 0 ? "_recomputed" : "");
  }
  if (n->origin >= 0) {
    const char *from = model_name(g, n->origin);
    return xsprintf("%s%s%s_bwd_%s", path, dot, from ? from : op_info(g->nodes[n->origin].op)->name,
                    op);
  }
  return xsprintf("%s%s%s", path, dot, op);
}

/* The dimensions joined by x ("4x64x768"). */
static void append_dims(StrBuf *s, const int64_t *dims, int n) {
  for (int i = 0; i < n; i++) sb_printf(s, "%s%lld", i ? "x" : "", (long long)dims[i]);
}

/* The function's name: what it computes and its shape, never its users.
 * A GEMM: op, [batch x] m x n x k and its transposes and accumulation
 * ("matmul_256x768x3072_tb_acc"); a convolution: op, images and weights;
 * a loop kernel: op and output shape ("layernorm_4x64x768"). Kernels that
 * differ at the same shape get _2, _3 (claim). */
static char *function_text(const Graph *g, int id) {
  const Node *n = &g->nodes[id];
  StrBuf s = {0};
  sb_printf(&s, "%s_", op_info(n->op)->name);
  OpClass cls = op_info(n->op)->op_class;
  if (cls == OPC_GEMM) {
    GemmDims d;
    gemm_dims(g, n, &d);
    int64_t dims[] = {d.batch * d.heads, d.m, d.n, d.k};
    bool batched = dims[0] > 1;
    append_dims(&s, dims + !batched, 4 - !batched);
    sb_printf(&s, "%s%s%s", d.trans_a ? "_ta" : "", d.trans_b ? "_tb" : "",
               d.accumulate ? "_acc" : "");
  } else if (cls == OPC_CONV) {
    ConvDims d;
    conv_dims(g, n, &d);
    int64_t dims[] = {d.n, d.c, d.h, d.w, d.o, d.k};
    append_dims(&s, dims, 6);
  } else if (n->op == OP_LINEAR_CROSS_ENTROPY) {
    HeadDims h;
    head_dims(g, n, &h);
    int64_t dims[] = {h.n, h.d, h.v};
    append_dims(&s, dims, 3);
  } else if (n->shape.rank) {
    append_dims(&s, n->shape.dim, n->shape.rank);
  } else {
    sb_printf(&s, "scalar");
  }
  return sb_take(&s);
}

static int parallel_loops(const Kernel *k) {
  KParallelLoop pl;
  int n = 0;
  for (int i = 0; k && i < k->nbody; i++) n += kstmt_parallel_loop(k->body[i], &pl);
  return n;
}

static char *param_name(const KernelForm *f, int i) {
  if (f->roles[i] == KP_OUT) return xstrdup("out");
  if (f->roles[i] == KP_OTHER || f->roles[i] == KP_STORED) return xsprintf("x%d", i);
  return xsprintf("in%d", (int)f->roles[i] - KP_IN0);
}

static void add_function(CNames *c, int id) {
  CFunction fn = {.form = c->forms[id], .first = id};
  fn.param_names = xmalloc((size_t)(fn.form.n_params + 1) * sizeof *fn.param_names);
  for (int i = 0; i < fn.form.n_params; i++) fn.param_names[i] = param_name(&fn.form, i);
  VEC_PUSH(c->fns, c->n_fns, c->cap_fns, fn);
}

/* Kernels ids[0..n) to functions, a new one for each code not seen yet. */
static void add_kernels(CNames *c, NameMap *by_code, const Program *p, const int *ids, int n) {
  for (int i = 0; i < n; i++) {
    int id = ids[i], fn;
    c->forms[id] = kernel_form(p->g, id, p->kernels[id]);
    if (!namemap_get(by_code, c->forms[id].code, &fn)) {
      fn = c->n_fns;
      add_function(c, id);
      namemap_put(by_code, c->forms[id].code, fn);
    }
    c->fn_of[id] = fn;
    CFunction *f = &c->fns[fn];
    VEC_PUSH(f->uses, f->n_uses, f->cap_uses, id);
  }
}

/* Names for the buffers the calls of kernels ids[0..n) pass. */
static void name_values(CNames *c, Names *ns, const Program *p, const int *ids, int n) {
  for (int i = 0; i < n; i++) {
    const KernelForm *f = &c->forms[ids[i]];
    for (int k = 0; k < f->n_params; k++) {
      int b = f->params[k];
      if (c->value[b]) continue;
      char *text = value_text(p->g, b);
      c->value[b] = claim(ns, text, 0);
      free(text);
    }
  }
}

void c_names_build(CNames *c, const Program *p) {
  int n = p->g->n;
  *c = (CNames){.fn_of = xmalloc((size_t)n * sizeof *c->fn_of),
                .forms = xcalloc((size_t)n, sizeof *c->forms),
                .value = xcalloc((size_t)n, sizeof *c->value)};
  for (int i = 0; i < n; i++) c->fn_of[i] = -1;
  Names ns = {.taken = &c->taken, .c = c};
  NameMap by_code = {0};
  add_kernels(c, &by_code, p, p->forward, p->n_forward);
  add_kernels(c, &by_code, p, p->backward, p->n_backward);
  /* values first: a reader meets them in forward() and in gdb */
  name_values(c, &ns, p, p->forward, p->n_forward);
  name_values(c, &ns, p, p->backward, p->n_backward);
  Names file_scope = {.taken = &c->file_scope, .also = &c->taken, .c = c};
  for (int f = 0; f < c->n_fns; f++) {
    char *text = function_text(p->g, c->fns[f].first);
    c->fns[f].name = claim(&file_scope, text, parallel_loops(p->kernels[c->fns[f].first]));
    free(text);
  }
  namemap_free(&by_code);
}

const char *c_names_claim_file_scope(CNames *c, const char *text) {
  Names ns = {.taken = &c->file_scope, .also = &c->taken, .c = c};
  return claim(&ns, text, 0);
}

const char *c_names_claim_local(CNames *c, NameMap *local, const char *text) {
  Names ns = {.taken = local, .also = &c->file_scope, .c = c};
  return claim(&ns, text, 0);
}

void c_names_free(CNames *c, const Program *p) {
  for (int f = 0; f < c->n_fns; f++) {
    CFunction *fn = &c->fns[f];
    for (int i = 0; i < fn->form.n_params; i++) free(fn->param_names[i]);
    free(fn->param_names);
    free(fn->uses);
  }
  for (int i = 0; i < p->g->n; i++) kernel_form_free(&c->forms[i]);
  namemap_free(&c->taken);
  namemap_free(&c->file_scope);
  for (int i = 0; i < c->n_owned; i++) free(c->owned[i]);
  free(c->owned);
  free(c->fns);
  free(c->fn_of);
  free(c->forms);
  free(c->value);
}

BufNames c_function_buffers(const CFunction *fn) {
  return (BufNames){fn->form.params, (const char *const *)fn->param_names, fn->form.n_params,
                    fn->form.streams, fn->form.n_streams};
}
