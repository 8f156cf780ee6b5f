/* lower.c — AST → typed tensor graph.
 *
 * Lowering evaluates the model body like an interpreter: every expression
 * yields either a compile-time number (shape arithmetic, constants) or a graph
 * node. Calls to `def`s are inlined with a fresh scope; `repeat N f(x, ...)`
 * inlines N copies, each with its own parameters. Shapes are checked as nodes
 * are added (the op table's shape rules), so errors point at the expression.
 *
 * Parameter names (docs/language.md): a builtin that declares parameters is
 * named after the variable its statement assigns (`h1 = linear(x, 512)` →
 * `h1.weight`, `h1.bias`; in a `return`/`predict`, after the builtin), a def
 * call after the def (`block.`), copy i of a repeat `block.i.`; a name used a
 * second time in the same scope gets `_1`, `_2`, ... */
#include "ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEF_DEPTH 32
#define MAX_REPEAT 10000
#define MAX_NODES 1000000 /* forward nodes: keeps nested repeats from exhausting memory */
#define MAX_NUMEL ((int64_t)1 << 40)

typedef enum { V_ERROR, V_NUM, V_TENSOR } ValueKind;

typedef struct {
  ValueKind kind;
  double num;
  bool is_int;
  int node;
} Value;

typedef enum { B_INPUT, B_PARAM, B_CONST, B_VAR } BindingKind;

typedef struct {
  const char *name;
  BindingKind kind;
  Value value;
} Binding;

typedef struct Scope Scope;
struct Scope {
  const char *prefix; /* "" at model level, "block.3." inside a repeat copy */
  Binding *vars;
  int nvars, capvars;
  char **used; /* parameter base names taken in this scope */
  int nused, capused;
  const char *target; /* the variable the current statement assigns, or NULL */
  int depth;
};

typedef struct {
  const Ast *ast;
  Graph *g;
  Diag *diag;
  Scope globals; /* top-level consts and B */
  int mse_node;  /* the last mse() result, to name the loss kind */
} Lower;

static const Value error_value = {.kind = V_ERROR};

static Value num_value(double v, bool is_int) { return (Value){.kind = V_NUM, .num = v, .is_int = is_int}; }
static Value tensor_value(int node) {
  return node < 0 ? error_value : (Value){.kind = V_TENSOR, .node = node};
}

/* ------------------------------------------------------------------ scopes */

static Binding *lookup_in(Scope *s, const char *name) {
  for (int i = s->nvars - 1; i >= 0; i--)
    if (strcmp(s->vars[i].name, name) == 0) return &s->vars[i];
  return NULL;
}

static Binding *lookup(Lower *L, Scope *s, const char *name) {
  Binding *b = lookup_in(s, name);
  return b ? b : lookup_in(&L->globals, name);
}

/* Binds name in s. Inputs, params and consts cannot be rebound; variables can. */
static void bind(Lower *L, Scope *s, const char *name, BindingKind kind, Value v, SrcLoc loc) {
  Binding *old = lookup(L, s, name);
  if (old && (old->kind != B_VAR || kind != B_VAR)) {
    diag_error(L->diag, loc, "'%s' is already defined", name);
    return;
  }
  Binding b = {name, kind, v};
  VEC_PUSH(s->vars, s->nvars, s->capvars, b);
}

static void scope_free(Scope *s) {
  for (int i = 0; i < s->nused; i++) free(s->used[i]);
  free(s->used);
  free(s->vars);
  free((char *)s->prefix);
}

static bool name_used(Scope *s, const char *name) {
  for (int i = 0; i < s->nused; i++)
    if (strcmp(s->used[i], name) == 0) return true;
  return false;
}

/* Reserves a unique base name in scope s: base, base_1, base_2, ... */
static char *unique_base(Scope *s, const char *base) {
  char *name = xstrdup(base);
  for (int i = 1; name_used(s, name); i++) {
    free(name);
    name = xsprintf("%s_%d", base, i);
  }
  VEC_PUSH(s->used, s->nused, s->capused, name);
  return name;
}

/* The prefix for parameters of a builtin call: "<scope prefix><base>." */
static char *param_prefix(Scope *s, const char *builtin) {
  char *base = unique_base(s, s->target ? s->target : builtin);
  return xsprintf("%s%s.", s->prefix, base);
}

/* ------------------------------------------------------------------- nodes */

static bool check_numel(Lower *L, const Shape *sh, SrcLoc loc) {
  int64_t n = 1;
  for (int i = 0; i < sh->rank; i++) {
    if (sh->dim[i] < 1 || sh->dim[i] > MAX_NUMEL || n > MAX_NUMEL / sh->dim[i]) {
      diag_error(L->diag, loc, "tensor too large or dimension out of range");
      return false;
    }
    n *= sh->dim[i];
  }
  return true;
}

static int add_param(Lower *L, const char *name, const Shape *sh, Init init, bool decay, SrcLoc loc) {
  if (!check_numel(L, sh, loc)) return -1;
  Graph *g = L->g;
  int id = graph_add(g, OP_PARAM, NULL, 0, loc, NULL);
  Node *n = &g->nodes[id];
  n->shape = *sh;
  n->name = xstrdup(name);
  n->init = init;
  n->decay = decay;
  VEC_PUSH(g->params, g->n_params, g->cap_params, id);
  return id;
}

static int add_node(Lower *L, OpKind op, int a, int b, SrcLoc loc) {
  int in[2] = {a, b};
  return graph_add(L->g, op, in, op_info(op)->arity, loc, L->diag);
}

static int add_scalar_op(Lower *L, OpKind op, int x, double c, SrcLoc loc) {
  return graph_add_attr(L->g, op, &x, 1, c, 0, 0, loc, L->diag);
}

/* ------------------------------------------------------------- expressions */

static const Shape *shape_of(Lower *L, int node) { return &L->g->nodes[node].shape; }
static int64_t last_dim_of(Lower *L, int node) { return shape_of(L, node)->dim[shape_of(L, node)->rank - 1]; }

/* The tensor has at least `rank` axes; otherwise reports `message`. */
static bool want_rank(Lower *L, int node, int rank, SrcLoc loc, const char *message) {
  if (shape_of(L, node)->rank >= rank) return true;
  char sb[128];
  diag_error(L->diag, loc, "%s, got %s", message, shape_str(shape_of(L, node), sb));
  return false;
}


static Value eval(Lower *L, Scope *s, const Expr *e);

static bool want_tensor(Lower *L, Value v, SrcLoc loc, const char *what) {
  if (v.kind == V_TENSOR) return true;
  if (v.kind == V_NUM) diag_error(L->diag, loc, "%s must be a tensor, not a number", what);
  return false;
}

static bool want_int_value(Lower *L, Value v, SrcLoc loc, const char *what, int64_t min, int64_t max,
                           int64_t *out) {
  if (v.kind == V_ERROR) return false;
  if (v.kind != V_NUM || !v.is_int) {
    diag_error(L->diag, loc, "%s must be an integer, not %s", what,
               v.kind == V_NUM ? "a fraction" : "a tensor");
    return false;
  }
  if (v.num < (double)min || v.num > (double)max) {
    diag_error(L->diag, loc, "%s must be between %lld and %lld, got %.0f", what, (long long)min,
               (long long)max, v.num);
    return false;
  }
  *out = (int64_t)v.num;
  return true;
}

static Value eval_number_binary(Lower *L, int op, Value a, Value b, SrcLoc loc) {
  bool ints = a.is_int && b.is_int;
  double r;
  switch (op) {
  case '+': r = a.num + b.num; break;
  case '-': r = a.num - b.num; break;
  case '*': r = a.num * b.num; break;
  case '/':
    if (b.num == 0) {
      diag_error(L->diag, loc, "division by zero");
      return error_value;
    }
    r = a.num / b.num;
    ints = ints && fmod(a.num, b.num) == 0;
    break;
  default:
    diag_error(L->diag, loc, "'@' needs two tensors");
    return error_value;
  }
  if (ints && fabs(r) > 9.0e15) {
    diag_error(L->diag, loc, "integer overflow in constant arithmetic");
    return error_value;
  }
  return num_value(r, ints);
}

/* tensor op number, or number op tensor (swapped). */
static Value eval_scalar_binary(Lower *L, int op, int t, double c, bool swapped, SrcLoc loc) {
  switch (op) {
  case '+': return tensor_value(add_scalar_op(L, OP_ADD_SCALAR, t, c, loc));
  case '*': return tensor_value(add_scalar_op(L, OP_MUL_SCALAR, t, c, loc));
  case '-':
    if (!swapped) return tensor_value(add_scalar_op(L, OP_ADD_SCALAR, t, -c, loc));
    return tensor_value(add_scalar_op(L, OP_ADD_SCALAR, add_node(L, OP_NEG, t, -1, loc), c, loc));
  case '/':
    if (swapped) {
      diag_error(L->diag, loc, "a number divided by a tensor is not supported");
      return error_value;
    }
    if (c == 0) {
      diag_error(L->diag, loc, "division by zero");
      return error_value;
    }
    return tensor_value(add_scalar_op(L, OP_MUL_SCALAR, t, 1.0 / c, loc));
  default:
    diag_error(L->diag, loc, "'@' needs two tensors, got a tensor and a number");
    return error_value;
  }
}

static Value eval_binary(Lower *L, Scope *s, const Expr *e) {
  Value a = eval(L, s, e->lhs), b = eval(L, s, e->rhs);
  if (a.kind == V_ERROR || b.kind == V_ERROR) return error_value;
  if (a.kind == V_NUM && b.kind == V_NUM) return eval_number_binary(L, e->op, a, b, e->loc);
  if (a.kind == V_TENSOR && b.kind == V_NUM) return eval_scalar_binary(L, e->op, a.node, b.num, false, e->loc);
  if (a.kind == V_NUM) return eval_scalar_binary(L, e->op, b.node, a.num, true, e->loc);
  static const struct { int op; OpKind kind; } ops[] = {
      {'+', OP_ADD}, {'-', OP_SUB}, {'*', OP_MUL}, {'/', OP_DIV}, {'@', OP_MATMUL}};
  const Node *bn = &L->g->nodes[b.node];
  if (e->op == '@' && bn->op == OP_PERMUTE && bn->shape.rank == 2 && bn->attr.i[0] == 1) /* x @ transpose(w): no copy */
    return tensor_value(graph_add_attr(L->g, OP_MATMUL, (int[2]){a.node, bn->in[0]}, 2, 0, 0, 1, e->loc, L->diag));
  if (e->op == '@' && shape_of(L, b.node)->rank >= 3) /* batches of matrices */
    return tensor_value(graph_add_attr(L->g, OP_BMM, (int[2]){a.node, b.node}, 2, 0, 0, 0, e->loc, L->diag));
  if (e->op == '@' && shape_of(L, b.node)->rank != 2) {
    char sa[128], sb[128];
    diag_error(L->diag, e->loc, "'@' needs a matrix or a batch of matrices on the right: %s @ %s",
               shape_str(shape_of(L, a.node), sa), shape_str(shape_of(L, b.node), sb));
    return error_value;
  }
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (ops[i].op == e->op) return tensor_value(add_node(L, ops[i].kind, a.node, b.node, e->loc));
  return error_value;
}

static Value eval_ident(Lower *L, Scope *s, const Expr *e) {
  Binding *b = lookup(L, s, e->name);
  if (!b) {
    diag_error(L->diag, e->loc, "undefined name '%s'", e->name);
    return error_value;
  }
  return b->value;
}

/* ----------------------------------------------------------- call arguments */

#define MAX_PARAMS (1 + IR_MAX_RANK) /* reshape(x, up to 8 dims) */

/* A builtin's signature: parameter names; those after `required` are optional
 * with the given defaults (numbers). */
typedef struct {
  const char *names[MAX_PARAMS];
  int count, required;
  double defaults[MAX_PARAMS];
} Signature;

/* Matches a call's positional and keyword arguments to a signature and
 * evaluates them into vals[] (defaults filled in as numbers). */
static bool bind_args(Lower *L, Scope *s, const Expr *call, const Signature *sig, Value vals[MAX_PARAMS],
                      SrcLoc locs[MAX_PARAMS]) {
  bool given[MAX_PARAMS] = {0}, ok = true;
  int pos = 0;
  for (const Arg *a = call->args; a; a = a->next) {
    int slot = -1;
    if (!a->key) {
      slot = pos++;
      if (slot >= sig->count) {
        diag_error(L->diag, a->loc, "%s() takes at most %d arguments", call->name, sig->count);
        return false;
      }
    } else {
      for (int i = 0; i < sig->count; i++)
        if (strcmp(sig->names[i], a->key) == 0) slot = i;
      if (slot < 0) {
        diag_error(L->diag, a->loc, "%s() has no argument named '%s'", call->name, a->key);
        ok = false;
        continue;
      }
      if (given[slot]) {
        diag_error(L->diag, a->loc, "argument '%s' given twice", a->key);
        ok = false;
        continue;
      }
    }
    given[slot] = true;
    vals[slot] = eval(L, s, a->value);
    locs[slot] = a->loc;
    if (vals[slot].kind == V_ERROR) ok = false;
  }
  for (int i = 0; i < sig->count; i++) {
    if (given[i]) continue;
    if (i < sig->required) {
      diag_error(L->diag, call->loc, "%s() is missing its argument '%s'", call->name, sig->names[i]);
      ok = false;
    }
    vals[i] = num_value(sig->defaults[i], floor(sig->defaults[i]) == sig->defaults[i]);
    locs[i] = call->loc;
  }
  return ok;
}

static bool want_number(Lower *L, Value v, SrcLoc loc, const char *what) {
  if (v.kind == V_NUM) return true;
  if (v.kind == V_TENSOR) diag_error(L->diag, loc, "%s must be a number, not a tensor", what);
  return false;
}

/* ---------------------------------------------------------------- builtins */

typedef Value (*BuiltinFn)(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs);


/* The integer input behind an index argument (labels, token ids): its values
 * are checked by the trainer against `limit` before any kernel reads them. */
static bool mark_index_input(Lower *L, Value v, SrcLoc loc, int64_t limit, const char *what) {
  Node *n = &L->g->nodes[v.node];
  if (n->op != OP_INPUT || n->dtype == DT_F32) {
    diag_error(L->diag, loc, "%s must be an integer model input (so its values can be checked)", what);
    return false;
  }
  if (n->index_limit && n->index_limit != limit) {
    diag_error(L->diag, loc, "input '%s' is used as an index below %lld and below %lld", n->name,
               (long long)n->index_limit, (long long)limit);
    return false;
  }
  n->index_limit = limit;
  return true;
}

/* PyTorch's default for Linear: uniform(±1/sqrt(fan_in)) for weight and bias. */
static Init torch_linear_init(int64_t fan_in) {
  double bound = 1.0 / sqrt((double)fan_in);
  return (Init){.kind = INIT_UNIFORM, .a = -bound, .b = bound, .fan_in = fan_in};
}

/* x @ weight^T + bias with weight [out, in], bias [out], named
 * "<prefix>weight", "<prefix>bias" (PyTorch's Linear layout and init). */
static int linear_layer(Lower *L, int x, int64_t out, bool bias, const char *prefix, SrcLoc loc) {
  int64_t in = last_dim_of(L, x);
  char *wname = xsprintf("%sweight", prefix), *bname = xsprintf("%sbias", prefix);
  Init init = torch_linear_init(in);
  init.fan_out = out;
  int w = add_param(L, wname, &(Shape){.rank = 2, .dim = {out, in}}, init, true, loc);
  int y = -1;
  if (w >= 0) {
    int mm[2] = {x, w};
    y = graph_add_attr(L->g, OP_MATMUL, mm, 2, 0, 0, 1, loc, L->diag);
  }
  if (y >= 0 && bias) {
    int b = add_param(L, bname, &(Shape){.rank = 1, .dim = {out}}, init, false, loc);
    y = add_node(L, OP_ADD, y, b, loc);
  }
  free(wname), free(bname);
  return y;
}

static Value builtin_linear(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  int64_t out, bias;
  if (!want_tensor(L, v[0], locs[0], "linear's input") ||
      !want_int_value(L, v[1], locs[1], "linear's output size", 1, MAX_NUMEL, &out) ||
      !want_int_value(L, v[2], locs[2], "bias", 0, 1, &bias) ||
      !want_rank(L, v[0].node, 1, locs[0], "linear needs an input with at least one axis"))
    return error_value;
  char *prefix = param_prefix(s, "linear");
  int y = linear_layer(L, v[0].node, out, bias, prefix, call->loc);
  free(prefix);
  return tensor_value(y);
}

static Value builtin_layernorm(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  if (!want_tensor(L, v[0], locs[0], "layernorm's input") || !want_number(L, v[1], locs[1], "eps"))
    return error_value;
  if (!want_rank(L, v[0].node, 1, locs[0], "layernorm needs an input with at least one axis"))
    return error_value;
  const Shape *x = shape_of(L, v[0].node);
  Shape vec = {.rank = 1, .dim = {x->dim[x->rank - 1]}};
  char *prefix = param_prefix(s, "layernorm");
  char *wname = xsprintf("%sweight", prefix), *bname = xsprintf("%sbias", prefix);
  int gamma = add_param(L, wname, &vec, (Init){.kind = INIT_ONES}, false, call->loc);
  int beta = add_param(L, bname, &vec, (Init){.kind = INIT_ZEROS}, false, call->loc);
  free(prefix), free(wname), free(bname);
  int in[3] = {v[0].node, gamma, beta};
  return tensor_value(graph_add_attr(L->g, OP_LAYERNORM, in, 3, v[1].num, 0, 0, call->loc, L->diag));
}

/* embedding(ids, vocab, dim) declares its table [vocab, dim];
 * embedding(ids, table) looks rows up in a given [vocab, dim] tensor (a
 * param the model also uses elsewhere, e.g. a tied output layer). */
static Value builtin_embedding(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  if (!want_tensor(L, v[0], locs[0], "embedding's ids")) return error_value;
  if (v[1].kind == V_TENSOR) {
    const Shape *t = shape_of(L, v[1].node);
    if (v[2].num != 0) {
      diag_error(L->diag, locs[2], "embedding(ids, table) takes its size from the table");
      return error_value;
    }
    if (t->rank != 2 || !mark_index_input(L, v[0], locs[0], t->dim[0], "embedding's ids")) {
      if (t->rank != 2) diag_error(L->diag, locs[1], "embedding needs a [vocab, dim] table");
      return error_value;
    }
    return tensor_value(add_node(L, OP_EMBEDDING, v[1].node, v[0].node, call->loc));
  }
  int64_t vocab, dim;
  if (!want_int_value(L, v[1], locs[1], "vocabulary size", 1, MAX_NUMEL, &vocab) ||
      !want_int_value(L, v[2], locs[2], "embedding size", 1, MAX_NUMEL, &dim) ||
      !mark_index_input(L, v[0], locs[0], vocab, "embedding's ids"))
    return error_value;
  char *prefix = param_prefix(s, "embedding");
  char *name = xsprintf("%sweight", prefix);
  Init init = {.kind = INIT_NORMAL, .a = 0, .b = 1};
  int table = add_param(L, name, &(Shape){.rank = 2, .dim = {vocab, dim}}, init, true, call->loc);
  free(prefix), free(name);
  return tensor_value(table < 0 ? -1 : add_node(L, OP_EMBEDDING, table, v[0].node, call->loc));
}

static Value builtin_cross_entropy(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  if (!want_tensor(L, v[0], locs[0], "cross_entropy's logits") ||
      !want_tensor(L, v[1], locs[1], "cross_entropy's labels"))
    return error_value;
  const Shape *x = shape_of(L, v[0].node);
  int64_t classes = x->rank ? x->dim[x->rank - 1] : 1;
  if (!mark_index_input(L, v[1], locs[1], classes, "cross_entropy's labels")) return error_value;
  int y = add_node(L, OP_CROSS_ENTROPY, v[0].node, v[1].node, call->loc);
  if (y >= 0 && L->g->labels < 0) L->g->labels = v[1].node;
  return tensor_value(y);
}

static Value mean_of(Lower *L, int x, SrcLoc loc) {
  int total = add_node(L, OP_SUM, x, -1, loc);
  if (total < 0) return error_value;
  return tensor_value(add_scalar_op(L, OP_MUL_SCALAR, total, 1.0 / (double)shape_numel(shape_of(L, x)), loc));
}

/* mse(a, b) = mean((a - b)^2), built from other ops. */
static Value builtin_mse(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  if (!want_tensor(L, v[0], locs[0], "mse's prediction") || !want_tensor(L, v[1], locs[1], "mse's target"))
    return error_value;
  int d = add_node(L, OP_SUB, v[0].node, v[1].node, call->loc);
  if (d < 0) return error_value;
  Value r = mean_of(L, add_node(L, OP_MUL, d, d, call->loc), call->loc);
  if (r.kind == V_TENSOR) L->mse_node = r.node;
  return r;
}

static Value builtin_mean(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  if (!want_tensor(L, v[0], locs[0], "mean's input")) return error_value;
  return mean_of(L, v[0].node, call->loc);
}

static Value builtin_cast(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  if (strcmp(call->name, "f32") != 0) {
    diag_error(L->diag, call->loc, "only f32() casts are supported");
    return error_value;
  }
  if (!want_tensor(L, v[0], locs[0], "f32's input")) return error_value;
  return tensor_value(add_node(L, OP_CAST, v[0].node, -1, call->loc));
}

/* ------------------------------------------------ layout, attention, images */

/* Arguments after the first of a variadic builtin (reshape, permute): they
 * must be positional; returns their count, or -1. */
static int trailing_args(Lower *L, const Expr *call) {
  for (const Arg *a = call->args; a; a = a->next)
    if (a->key) {
      diag_error(L->diag, a->loc, "%s() takes positional arguments only", call->name);
      return -1;
    }
  return call->nargs - 1;
}

/* An axis of a rank-`rank` tensor, negative counting from the end. */
static bool want_axis(Lower *L, Value v, SrcLoc loc, int rank, int *axis) {
  int64_t a;
  if (!want_int_value(L, v, loc, "an axis", -rank, rank - 1, &a)) return false;
  *axis = (int)(a < 0 ? a + rank : a);
  return true;
}

static int reshape_node(Lower *L, int x, Shape to, SrcLoc loc) {
  Attr a = {.shape = to};
  return graph_add_op(L->g, OP_RESHAPE, &x, 1, &a, loc, L->diag);
}

static int permute_node(Lower *L, int x, const int *perm, SrcLoc loc) {
  Attr a = {0};
  for (int d = 0; d < shape_of(L, x)->rank; d++) a.i[d] = perm[d];
  return graph_add_op(L->g, OP_PERMUTE, &x, 1, &a, loc, L->diag);
}

/* Swaps axes a and b (a copy). */
static int transpose_node(Lower *L, int x, int a, int b, SrcLoc loc) {
  int perm[IR_MAX_RANK];
  for (int d = 0; d < shape_of(L, x)->rank; d++) perm[d] = d;
  perm[a] = b, perm[b] = a;
  return permute_node(L, x, perm, loc);
}

/* reshape(x, d0, d1, ...): one dimension may be -1 (inferred). */
static Value builtin_reshape(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  int rank = trailing_args(L, call);
  if (rank < 0 || !want_tensor(L, v[0], locs[0], "reshape's input")) return error_value;
  if (rank == 0) {
    diag_error(L->diag, call->loc, "reshape() needs the new dimensions: reshape(x, d0, d1, ...)");
    return error_value;
  }
  Shape to = {.rank = rank};
  int infer = -1;
  int64_t known = 1;
  for (int d = 0; d < rank; d++) {
    if (!want_int_value(L, v[1 + d], locs[1 + d], "a dimension", -1, MAX_NUMEL, &to.dim[d])) return error_value;
    if (to.dim[d] == 0 || (to.dim[d] == -1 && infer >= 0)) {
      diag_error(L->diag, locs[1 + d], "a dimension is >= 1, or -1 once (inferred)");
      return error_value;
    }
    if (to.dim[d] == -1) infer = d;
    else if (known > MAX_NUMEL / to.dim[d]) {
      diag_error(L->diag, locs[1 + d], "reshape: more than 2^40 elements");
      return error_value;
    } else known *= to.dim[d];
  }
  int64_t total = shape_numel(shape_of(L, v[0].node));
  if (infer >= 0) to.dim[infer] = total % known == 0 ? total / known : 0;
  if (infer >= 0 && to.dim[infer] == 0) {
    char sb[128];
    diag_error(L->diag, locs[1 + infer], "reshape: cannot infer -1: %lld elements of %s are not a multiple of %lld",
               (long long)total, shape_str(shape_of(L, v[0].node), sb), (long long)known);
    return error_value;
  }
  return tensor_value(reshape_node(L, v[0].node, to, call->loc));
}

/* narrow(x, 0, start, length): rows [start, start + length) of x, a view
 * (only the first axis, whose slices are contiguous). */
static Value builtin_narrow(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  int64_t axis, start, length;
  if (!want_tensor(L, v[0], locs[0], "narrow's input") ||
      !want_rank(L, v[0].node, 1, locs[0], "narrow needs at least one axis") ||
      !want_int_value(L, v[1], locs[1], "narrow's axis", -IR_MAX_RANK, IR_MAX_RANK, &axis) ||
      !want_int_value(L, v[2], locs[2], "the start", 0, MAX_NUMEL, &start) ||
      !want_int_value(L, v[3], locs[3], "the length", 1, MAX_NUMEL, &length))
    return error_value;
  if (axis != 0) {
    diag_error(L->diag, locs[1], "narrow supports only axis 0 (whose slices are contiguous), got %lld",
               (long long)axis);
    return error_value;
  }
  Attr a = {.i = {start}, .shape = *shape_of(L, v[0].node)};
  a.shape.dim[0] = length;
  return tensor_value(graph_add_op(L->g, OP_SLICE, &v[0].node, 1, &a, call->loc, L->diag));
}

/* flatten(x): [N, ...] → [N, product of the rest] (torch.flatten(x, 1)). */
static Value builtin_flatten(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  if (!want_tensor(L, v[0], locs[0], "flatten's input") ||
      !want_rank(L, v[0].node, 2, locs[0], "flatten needs at least two axes"))
    return error_value;
  const Shape *x = shape_of(L, v[0].node);
  Shape to = {.rank = 2, .dim = {x->dim[0], shape_numel(x) / x->dim[0]}};
  return tensor_value(reshape_node(L, v[0].node, to, call->loc));
}

static Value builtin_transpose(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  int a, b;
  if (!want_tensor(L, v[0], locs[0], "transpose's input") ||
      !want_rank(L, v[0].node, 2, locs[0], "transpose needs at least two axes"))
    return error_value;
  int rank = shape_of(L, v[0].node)->rank;
  if (!want_axis(L, v[1], locs[1], rank, &a) || !want_axis(L, v[2], locs[2], rank, &b)) return error_value;
  return tensor_value(transpose_node(L, v[0].node, a, b, call->loc));
}

/* permute(x, a0, a1, ...): output axis i is input axis ai (torch's permute). */
static Value builtin_permute(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  int n = trailing_args(L, call);
  if (n < 0 || !want_tensor(L, v[0], locs[0], "permute's input")) return error_value;
  int rank = shape_of(L, v[0].node)->rank;
  if (n != rank) {
    char sb[128];
    diag_error(L->diag, call->loc, "permute() needs one axis for each of the %d axes of %s, got %d", rank,
               shape_str(shape_of(L, v[0].node), sb), n);
    return error_value;
  }
  int perm[IR_MAX_RANK];
  for (int d = 0; d < rank; d++)
    if (!want_axis(L, v[1 + d], locs[1 + d], rank, &perm[d])) return error_value;
  return tensor_value(permute_node(L, v[0].node, perm, call->loc));
}

/* softmax / log_softmax over any axis: a non-last axis is swapped to the end
 * and back. */
static Value builtin_softmax(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  OpKind op = strcmp(call->name, "softmax") == 0 ? OP_SOFTMAX : OP_LOG_SOFTMAX;
  int axis;
  if (!want_tensor(L, v[0], locs[0], "the argument") ||
      !want_rank(L, v[0].node, 1, locs[0], "softmax needs at least one axis") ||
      !want_axis(L, v[1], locs[1], shape_of(L, v[0].node)->rank, &axis))
    return error_value;
  int last = shape_of(L, v[0].node)->rank - 1;
  if (axis == last) return tensor_value(add_node(L, op, v[0].node, -1, call->loc));
  int t = transpose_node(L, v[0].node, axis, last, call->loc);
  return tensor_value(transpose_node(L, add_node(L, op, t, -1, call->loc), axis, last, call->loc));
}

static int causal_mask_node(Lower *L, int x, double scale, SrcLoc loc) {
  Attr a = {.f = {scale}};
  return graph_add_op(L->g, OP_CAUSAL_MASK, &x, 1, &a, loc, L->diag);
}

static Value builtin_causal_mask(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  if (!want_tensor(L, v[0], locs[0], "causal_mask's scores") || !want_number(L, v[1], locs[1], "scale"))
    return error_value;
  return tensor_value(causal_mask_node(L, v[0].node, v[1].num, call->loc));
}

/* The dropout key and training flag: leaves the runtime sets, made once. */
static void need_rng(Lower *L, SrcLoc loc) {
  Graph *g = L->g;
  if (g->rng_key >= 0) return;
  g->rng_key = graph_add(g, OP_RNG_KEY, NULL, 0, loc, NULL);
  g->nodes[g->rng_key].shape = (Shape){.rank = 1, .dim = {2}};
  g->nodes[g->rng_key].dtype = DT_I32;
  g->training = graph_add(g, OP_TRAINING, NULL, 0, loc, NULL);
}

/* dropout with probability p (0 <= p < 1); p = 0 is the identity. */
static int dropout_node(Lower *L, int x, double p, SrcLoc loc) {
  if (x < 0 || p == 0) return x;
  need_rng(L, loc);
  Attr a = {.f = {p}, .i = {L->g->n_dropout++}};
  int in[3] = {x, L->g->rng_key, L->g->training};
  return graph_add_op(L->g, OP_DROPOUT, in, 3, &a, loc, L->diag);
}

static bool want_probability(Lower *L, Value v, SrcLoc loc, double *p) {
  if (!want_number(L, v, loc, "the dropout probability")) return false;
  if (!(v.num >= 0 && v.num < 1)) {
    diag_error(L->diag, loc, "the dropout probability must be in [0, 1), got %g", v.num);
    return false;
  }
  *p = v.num;
  return true;
}

static Value builtin_dropout(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  double p;
  if (!want_tensor(L, v[0], locs[0], "dropout's input") || !want_probability(L, v[1], locs[1], &p))
    return error_value;
  return tensor_value(dropout_node(L, v[0].node, p, call->loc));
}

/* linear(x, C) named <prefix><part>., split into heads: [B, T, C] →
 * [B, H, T, C/H]. -1 on error. */
static int head_projection(Lower *L, int x, int64_t heads, const char *prefix, const char *part, SrcLoc loc) {
  const Shape xs = *shape_of(L, x); /* a copy: adding nodes moves the node array */
  char *sub = xsprintf("%s%s.", prefix, part);
  int y = linear_layer(L, x, xs.dim[2], true, sub, loc);
  free(sub);
  if (y < 0) return -1;
  Shape split = {.rank = 4, .dim = {xs.dim[0], xs.dim[1], heads, xs.dim[2] / heads}};
  int perm[4] = {0, 2, 1, 3};
  return permute_node(L, reshape_node(L, y, split, loc), perm, loc);
}

/* softmax(causal_mask(q k^T, scale)) (dropout) v on [B, H, T, D], heads
 * merged back into [B, T, H*D]. -1 on error (scores too large). */
static int attend(Lower *L, const int qkv[3], double scale, double p, SrcLoc loc) {
  int in[2] = {qkv[0], qkv[1]};
  int scores = graph_add_attr(L->g, OP_BMM, in, 2, 0, 0, 1, loc, L->diag); /* [B, H, T, T] */
  if (scores < 0) return -1;
  int probs = dropout_node(L, add_node(L, OP_SOFTMAX, causal_mask_node(L, scores, scale, loc), -1, loc), p, loc);
  int out[2] = {probs, qkv[2]};
  int perm[4] = {0, 2, 1, 3};
  int y = permute_node(L, graph_add_attr(L->g, OP_BMM, out, 2, 0, 0, 0, loc, L->diag), perm, loc);
  const Shape ys = *shape_of(L, y);
  return reshape_node(L, y, (Shape){.rank = 3, .dim = {ys.dim[0], ys.dim[1], ys.dim[2] * ys.dim[3]}}, loc);
}

/* causal_self_attention(x, heads, dropout = 0) on x [B, T, C], as GPT-2:
 * q, k, v = linear(x, C) each, split into heads; softmax of the causally
 * masked q k^T / sqrt(C/H); (dropout;) times v; heads merged; linear(C).
 * Parameters: <name>.q, .k, .v, .proj (weight [C, C] and bias [C] each). */
static Value builtin_attention(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  int64_t heads;
  double p;
  if (!want_tensor(L, v[0], locs[0], "causal_self_attention's input") ||
      !want_int_value(L, v[1], locs[1], "the number of heads", 1, MAX_NUMEL, &heads) ||
      !want_probability(L, v[2], locs[2], &p))
    return error_value;
  const Shape xs = *shape_of(L, v[0].node);
  if (xs.rank != 3 || xs.dim[2] % heads != 0) {
    char sb[128];
    diag_error(L->diag, locs[0], "causal_self_attention needs [B, T, C] with C divisible by the %lld heads, got %s",
               (long long)heads, shape_str(&xs, sb));
    return error_value;
  }
  char *prefix = param_prefix(s, "causal_self_attention");
  static const char *parts[] = {"q", "k", "v"};
  int qkv[3], y = 0;
  for (int i = 0; i < 3 && y >= 0; i++) y = qkv[i] = head_projection(L, v[0].node, heads, prefix, parts[i], call->loc);
  if (y >= 0) y = attend(L, qkv, 1.0 / sqrt((double)(xs.dim[2] / heads)), p, call->loc);
  char *proj = xsprintf("%sproj.", prefix);
  if (y >= 0) y = linear_layer(L, y, xs.dim[2], true, proj, call->loc);
  free(proj), free(prefix);
  return tensor_value(y);
}

static bool want_image_input(Lower *L, Value v, SrcLoc loc, const char *what) {
  if (!want_tensor(L, v, loc, what)) return false;
  if (shape_of(L, v.node)->rank == 4) return true;
  char sb[128];
  diag_error(L->diag, loc, "%s must be an image batch [N, C, H, W], got %s", what, shape_str(shape_of(L, v.node), sb));
  return false;
}

/* conv2d(x, channels, kernel, stride = 1, padding = 0, bias = 1) on NCHW:
 * weight [channels, C, k, k] and bias [channels] as torch.nn.Conv2d. Lowered
 * to im2col (of the zero-padded input) and one GEMM with the weight viewed
 * as [channels, C*k*k], then back to [N, channels, OH, OW]. */
static Value builtin_conv2d(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  int64_t out, k, stride, pad, bias;
  if (!want_image_input(L, v[0], locs[0], "conv2d's input") ||
      !want_int_value(L, v[1], locs[1], "conv2d's output channels", 1, MAX_NUMEL, &out) ||
      !want_int_value(L, v[2], locs[2], "the kernel size", 1, 1 << 16, &k) ||
      !want_int_value(L, v[3], locs[3], "the stride", 1, 1 << 16, &stride) ||
      !want_int_value(L, v[4], locs[4], "the padding", 0, 1 << 16, &pad) ||
      !want_int_value(L, v[5], locs[5], "bias", 0, 1, &bias))
    return error_value;
  const Shape xs = *shape_of(L, v[0].node);
  if (k > xs.dim[2] + 2 * pad || k > xs.dim[3] + 2 * pad) {
    char sb[128];
    diag_error(L->diag, locs[2], "conv2d: a %lldx%lld kernel does not fit the %lldx%lld image of %s (padding %lld)",
               (long long)k, (long long)k, (long long)xs.dim[2], (long long)xs.dim[3], shape_str(&xs, sb),
               (long long)pad);
    return error_value;
  }
  int64_t oh = (xs.dim[2] + 2 * pad - k) / stride + 1, ow = (xs.dim[3] + 2 * pad - k) / stride + 1;
  if ((double)xs.dim[0] * (double)(oh * ow) * (double)xs.dim[1] * (double)(k * k) > (double)MAX_NUMEL) {
    diag_error(L->diag, call->loc, "conv2d: the unfolded input (im2col) would have more than 2^40 elements");
    return error_value;
  }
  int x = v[0].node;
  if (pad > 0) {
    Attr a = {.i = {pad}};
    x = graph_add_op(L->g, OP_PAD, &x, 1, &a, call->loc, L->diag);
  }
  Attr win = {.i = {k, stride}};
  int cols = graph_add_op(L->g, OP_IM2COL, &x, 1, &win, call->loc, L->diag);
  char *prefix = param_prefix(s, "conv2d");
  char *wname = xsprintf("%sweight", prefix), *bname = xsprintf("%sbias", prefix);
  Init init = torch_linear_init(xs.dim[1] * k * k);
  init.fan_out = out * k * k;
  Shape wshape = {.rank = 4, .dim = {out, xs.dim[1], k, k}};
  int w = add_param(L, wname, &wshape, init, true, call->loc);
  int y = -1;
  if (cols >= 0 && w >= 0) {
    int mm[2] = {cols, reshape_node(L, w, (Shape){.rank = 2, .dim = {out, xs.dim[1] * k * k}}, call->loc)};
    y = graph_add_attr(L->g, OP_MATMUL, mm, 2, 0, 0, 1, call->loc, L->diag); /* [N, OH*OW, out] */
  }
  if (y >= 0 && bias)
    y = add_node(L, OP_ADD, y, add_param(L, bname, &(Shape){.rank = 1, .dim = {out}}, init, false, call->loc),
                 call->loc);
  free(prefix), free(wname), free(bname);
  if (y < 0) return error_value;
  int perm[3] = {0, 2, 1};
  y = permute_node(L, y, perm, call->loc);
  return tensor_value(reshape_node(L, y, (Shape){.rank = 4, .dim = {xs.dim[0], out, oh, ow}}, call->loc));
}

/* maxpool(x, size, stride = size), avgpool(...): no padding. */
static Value builtin_pool(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  int64_t size, stride;
  if (!want_image_input(L, v[0], locs[0], "the pool's input") ||
      !want_int_value(L, v[1], locs[1], "the window size", 1, 1 << 16, &size) ||
      !want_int_value(L, v[2], locs[2], "the stride", 0, 1 << 16, &stride))
    return error_value;
  Attr a = {.i = {size, stride ? stride : size}};
  OpKind op = strcmp(call->name, "maxpool") == 0 ? OP_MAXPOOL : OP_AVGPOOL;
  return tensor_value(graph_add_op(L->g, op, &v[0].node, 1, &a, call->loc, L->diag));
}

/* Builtins that are one op applied to one tensor. */
static const struct {
  const char *name;
  OpKind op;
} unary_builtins[] = {
    {"relu", OP_RELU}, {"gelu", OP_GELU}, {"tanh", OP_TANH}, {"sigmoid", OP_SIGMOID}, {"exp", OP_EXP},
    {"log", OP_LOG},   {"sum", OP_SUM},
};

static Value builtin_unary(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  for (size_t i = 0; i < sizeof unary_builtins / sizeof unary_builtins[0]; i++) {
    if (strcmp(unary_builtins[i].name, call->name) != 0) continue;
    if (!want_tensor(L, v[0], locs[0], "the argument")) return error_value;
    return tensor_value(add_node(L, unary_builtins[i].op, v[0].node, -1, call->loc));
  }
  return error_value;
}

typedef struct {
  const char *name;
  BuiltinFn fn;
  Signature sig;
} Builtin;

static const Builtin builtins[] = {
    {"linear", builtin_linear, {{"x", "out", "bias"}, 3, 2, {0, 0, 1}}},
    {"layernorm", builtin_layernorm, {{"x", "eps"}, 2, 1, {0, 1e-5}}},
    {"embedding", builtin_embedding, {{"ids", "vocab", "dim"}, 3, 2, {0, 0, 0}}},
    {"cross_entropy", builtin_cross_entropy, {{"logits", "labels"}, 2, 2, {0}}},
    {"mse", builtin_mse, {{"prediction", "target"}, 2, 2, {0}}},
    {"mean", builtin_mean, {{"x"}, 1, 1, {0}}},
    {"f32", builtin_cast, {{"x"}, 1, 1, {0}}},
    {"i32", builtin_cast, {{"x"}, 1, 1, {0}}},
    {"u8", builtin_cast, {{"x"}, 1, 1, {0}}},
#define UNARY(name) {name, builtin_unary, {{"x"}, 1, 1, {0}}}
    UNARY("relu"), UNARY("gelu"), UNARY("tanh"), UNARY("sigmoid"), UNARY("exp"),
    UNARY("log"),  UNARY("sum"),
#undef UNARY
    {"softmax", builtin_softmax, {{"x", "axis"}, 2, 1, {0, -1}}},
    {"log_softmax", builtin_softmax, {{"x", "axis"}, 2, 1, {0, -1}}},
    {"reshape", builtin_reshape, {{"x", "d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7"}, 9, 1, {0}}},
    {"flatten", builtin_flatten, {{"x"}, 1, 1, {0}}},
    {"narrow", builtin_narrow, {{"x", "axis", "start", "length"}, 4, 4, {0}}},
    {"transpose", builtin_transpose, {{"x", "a", "b"}, 3, 1, {0, -2, -1}}},
    {"permute", builtin_permute, {{"x", "a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"}, 9, 1, {0}}},
    {"causal_mask", builtin_causal_mask, {{"x", "scale"}, 2, 1, {0, 1}}},
    {"dropout", builtin_dropout, {{"x", "p"}, 2, 2, {0}}},
    {"causal_self_attention", builtin_attention, {{"x", "heads", "dropout"}, 3, 2, {0, 0, 0}}},
    {"conv2d", builtin_conv2d, {{"x", "channels", "kernel", "stride", "padding", "bias"}, 6, 3, {0, 0, 0, 1, 0, 1}}},
    {"maxpool", builtin_pool, {{"x", "size", "stride"}, 3, 2, {0, 0, 0}}},
    {"avgpool", builtin_pool, {{"x", "size", "stride"}, 3, 2, {0, 0, 0}}},
};

static const Builtin *find_builtin(const char *name) {
  for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
    if (strcmp(builtins[i].name, name) == 0) return &builtins[i];
  return NULL;
}

static const Def *find_def(Lower *L, const char *name) {
  for (const Def *d = L->ast->defs; d; d = d->next)
    if (strcmp(d->name, name) == 0) return d;
  return NULL;
}

/* ------------------------------------------------------------ def inlining */

static bool is_init_name(const char *name);
static bool lower_stmts(Lower *L, Scope *s, const Stmt *body, Value *ret);

/* Inlines one call of def d with already-evaluated arguments, its parameters
 * prefixed by `prefix`. */
static Value inline_def(Lower *L, Scope *caller, const Def *d, const Value *args, const char *prefix,
                        SrcLoc loc) {
  if (L->g->n > MAX_NODES) {
    diag_error(L->diag, loc, "the model grows past %d operations here (nested repeats?)", MAX_NODES);
    return error_value;
  }
  if (caller->depth >= MAX_DEF_DEPTH) {
    diag_error(L->diag, loc, "calls nest deeper than %d (does '%s' call itself?)", MAX_DEF_DEPTH, d->name);
    return error_value;
  }
  Scope s = {.prefix = xstrdup(prefix), .depth = caller->depth + 1};
  for (int i = 0; i < d->nparams; i++) {
    if (lookup_in(&s, d->params[i])) {
      diag_error(L->diag, d->param_locs[i], "def '%s' has two parameters named '%s'", d->name, d->params[i]);
      scope_free(&s);
      return error_value;
    }
    bind(L, &s, d->params[i], B_VAR, args[i], d->param_locs[i]);
  }
  Value ret = error_value;
  bool returned = lower_stmts(L, &s, d->body, &ret);
  if (!returned && diag_count(L->diag) == 0)
    diag_error(L->diag, d->loc, "def '%s' does not return a value", d->name);
  scope_free(&s);
  return ret;
}

static bool eval_def_args(Lower *L, Scope *s, const Expr *call, const Def *d, Value *args) {
  if (call->nargs != d->nparams) {
    diag_error(L->diag, call->loc, "'%s' takes %d arguments, got %d", d->name, d->nparams, call->nargs);
    return false;
  }
  bool ok = true;
  int i = 0;
  for (const Arg *a = call->args; a; a = a->next, i++) {
    if (a->key) {
      diag_error(L->diag, a->loc, "arguments of '%s' are positional", d->name);
      ok = false;
    }
    args[i] = eval(L, s, a->value);
    if (args[i].kind == V_ERROR) ok = false;
  }
  return ok;
}

static Value eval_def_call(Lower *L, Scope *s, const Expr *call, const Def *d) {
  Value *args = xcalloc((size_t)d->nparams + 1, sizeof *args);
  Value r = error_value;
  if (eval_def_args(L, s, call, d, args)) {
    char *base = unique_base(s, d->name);
    char *prefix = xsprintf("%s%s.", s->prefix, base);
    r = inline_def(L, s, d, args, prefix, call->loc);
    free(prefix);
  }
  free(args);
  return r;
}

/* repeat N f(x, ...): x flows through N copies of f, copy i named "f.i.". */
static Value eval_repeat(Lower *L, Scope *s, const Expr *e) {
  int64_t count;
  if (!want_int_value(L, eval(L, s, e->lhs), e->lhs->loc, "the repeat count", 1, MAX_REPEAT, &count))
    return error_value;
  const Expr *call = e->rhs;
  const Def *d = find_def(L, call->name);
  if (!d) {
    diag_error(L->diag, call->loc, "repeat needs a def, and '%s' is not one", call->name);
    return error_value;
  }
  if (d->nparams < 1) {
    diag_error(L->diag, call->loc, "repeat needs a def whose first argument is the value it transforms");
    return error_value;
  }
  Value *args = xcalloc((size_t)d->nparams, sizeof *args);
  Value x = error_value;
  if (eval_def_args(L, s, call, d, args)) {
    char *base = unique_base(s, d->name);
    x = args[0];
    for (int64_t i = 0; i < count && x.kind != V_ERROR; i++) {
      args[0] = x;
      char *prefix = xsprintf("%s%s.%lld.", s->prefix, base, (long long)i);
      x = inline_def(L, s, d, args, prefix, call->loc);
      free(prefix);
    }
  }
  free(args);
  return x;
}

static Value eval_call(Lower *L, Scope *s, const Expr *call) {
  const Def *d = find_def(L, call->name);
  if (d) return eval_def_call(L, s, call, d);
  const Builtin *b = find_builtin(call->name);
  if (!b) {
    if (is_init_name(call->name))
      diag_error(L->diag, call->loc, "'%s' initializes a param; use it as `param NAME : TYPE = %s(...)`",
                 call->name, call->name);
    else
      diag_error(L->diag, call->loc, "unknown function '%s'", call->name);
    return error_value;
  }
  Value vals[MAX_PARAMS];
  SrcLoc locs[MAX_PARAMS];
  if (!bind_args(L, s, call, &b->sig, vals, locs)) return error_value;
  return b->fn(L, s, call, vals, locs);
}

static Value eval(Lower *L, Scope *s, const Expr *e) {
  switch (e->kind) {
  case EX_NUM: return num_value(e->num, e->is_int);
  case EX_SIZE: return num_value(e->num, true);
  case EX_IDENT: return eval_ident(L, s, e);
  case EX_BINARY: return eval_binary(L, s, e);
  case EX_NEG: {
    Value a = eval(L, s, e->lhs);
    if (a.kind == V_NUM) return num_value(-a.num, a.is_int);
    if (a.kind == V_TENSOR) return tensor_value(add_node(L, OP_NEG, a.node, -1, e->loc));
    return a;
  }
  case EX_CALL: return eval_call(L, s, e);
  case EX_REPEAT: return eval_repeat(L, s, e);
  }
  return error_value;
}

/* -------------------------------------------------------------- statements */

static bool eval_shape(Lower *L, Scope *s, const TypeExpr *t, Shape *out) {
  out->rank = t->rank;
  bool ok = true;
  for (int i = 0; i < t->rank; i++) {
    int64_t d = 0;
    ok = want_int_value(L, eval(L, s, t->dims[i]), t->dims[i]->loc, "a dimension", 1, MAX_NUMEL, &d) && ok;
    out->dim[i] = d;
  }
  return ok && check_numel(L, out, t->loc);
}

static void lower_input(Lower *L, Scope *s, const Stmt *st) {
  Shape sh;
  if (!eval_shape(L, s, &st->type, &sh)) return;
  if (sh.rank < 1 || sh.dim[0] != L->g->train.batch) {
    diag_error(L->diag, st->type.loc, "the first dimension of input '%s' must be the batch B (%lld)", st->name,
               (long long)L->g->train.batch);
    return;
  }
  Graph *g = L->g;
  int id = graph_add(g, OP_INPUT, NULL, 0, st->loc, NULL);
  g->nodes[id].shape = sh;
  g->nodes[id].dtype = st->type.dtype;
  g->nodes[id].name = xstrdup(st->name);
  VEC_PUSH(g->inputs, g->n_inputs, g->cap_inputs, id);
  bind(L, s, st->name, B_INPUT, tensor_value(id), st->loc);
}

static const struct {
  const char *name;
  InitKind kind;
  Signature sig;
} inits[] = {
    {"zeros", INIT_ZEROS, {{0}, 0, 0, {0}}},
    {"ones", INIT_ONES, {{0}, 0, 0, {0}}},
    {"normal", INIT_NORMAL, {{"mean", "std"}, 2, 0, {0, 1}}},
    {"uniform", INIT_UNIFORM, {{"low", "high"}, 2, 0, {0, 1}}},
    {"xavier", INIT_XAVIER, {{"gain"}, 1, 0, {1}}},
    {"he", INIT_HE, {{"gain"}, 1, 0, {1}}},
};

static bool is_init_name(const char *name) {
  for (size_t i = 0; i < sizeof inits / sizeof inits[0]; i++)
    if (strcmp(inits[i].name, name) == 0) return true;
  return false;
}

/* fan_in / fan_out as PyTorch computes them for a [out, in, ...] weight. */
static void set_fans(Init *init, const Shape *sh) {
  int64_t receptive = 1;
  for (int i = 2; i < sh->rank; i++) receptive *= sh->dim[i];
  init->fan_out = sh->rank >= 1 ? sh->dim[0] * receptive : 1;
  init->fan_in = sh->rank >= 2 ? sh->dim[1] * receptive : init->fan_out;
}

static bool eval_init(Lower *L, Scope *s, const Expr *call, const Shape *sh, Init *init) {
  for (size_t i = 0; i < sizeof inits / sizeof inits[0]; i++) {
    if (strcmp(inits[i].name, call->name) != 0) continue;
    Value v[MAX_PARAMS] = {{0}}; /* zeros() and ones() take no arguments: a, b stay 0 */
    SrcLoc locs[MAX_PARAMS];
    if (!bind_args(L, s, call, &inits[i].sig, v, locs)) return false;
    for (int a = 0; a < inits[i].sig.count; a++)
      if (!want_number(L, v[a], locs[a], inits[i].sig.names[a])) return false;
    *init = (Init){.kind = inits[i].kind, .a = v[0].num, .b = v[1].num};
    if (init->kind == INIT_XAVIER || init->kind == INIT_HE) init->b = 0;
    set_fans(init, sh);
    return true;
  }
  diag_error(L->diag, call->loc, "unknown initializer '%s' (expected zeros, ones, normal, uniform, xavier or he)",
             call->name);
  return false;
}

static void lower_param(Lower *L, Scope *s, const Stmt *st) {
  Shape sh;
  Init init;
  if (st->type.dtype != DT_F32) {
    diag_error(L->diag, st->type.loc, "parameters are f32");
    return;
  }
  if (!eval_shape(L, s, &st->type, &sh) || !eval_init(L, s, st->value, &sh, &init)) return;
  if (name_used(s, st->name)) {
    diag_error(L->diag, st->loc, "'%s' is already defined", st->name);
    return;
  }
  char *base = unique_base(s, st->name);
  char *name = xsprintf("%s%s", s->prefix, base);
  int id = add_param(L, name, &sh, init, sh.rank >= 2, st->loc);
  free(name);
  if (id >= 0) bind(L, s, st->name, B_PARAM, tensor_value(id), st->loc);
}

static void name_node(Lower *L, Value v, const char *name) {
  if (v.kind != V_TENSOR) return;
  Node *n = &L->g->nodes[v.node];
  if (!n->name) n->name = xstrdup(name);
}

/* Lowers a statement list; returns true when it ended in `return` (*ret set). */
static bool lower_stmts(Lower *L, Scope *s, const Stmt *body, Value *ret) {
  for (const Stmt *st = body; st; st = st->next) {
    s->target = st->kind == ST_ASSIGN ? st->name : NULL;
    switch (st->kind) {
    case ST_INPUT:
      if (s->depth > 0) diag_error(L->diag, st->loc, "inputs belong in a model, not a def");
      else lower_input(L, s, st);
      break;
    case ST_PARAM: lower_param(L, s, st); break;
    case ST_CONST: {
      Value v = eval(L, s, st->value);
      if (v.kind == V_TENSOR) diag_error(L->diag, st->value->loc, "a const must be a number");
      else if (v.kind == V_NUM) bind(L, s, st->name, B_CONST, v, st->loc);
      break;
    }
    case ST_ASSIGN: {
      Value v = eval(L, s, st->value);
      name_node(L, v, st->name);
      bind(L, s, st->name, B_VAR, v, st->loc); /* errors too: later uses stay quiet */
      break;
    }
    case ST_PREDICT: {
      Value v = eval(L, s, st->value);
      if (s->depth > 0) diag_error(L->diag, st->loc, "predict belongs in a model, not a def");
      else if (L->g->predict >= 0) diag_error(L->diag, st->loc, "a model has one predict");
      else if (want_tensor(L, v, st->value->loc, "predict's value")) L->g->predict = v.node;
      break;
    }
    case ST_RETURN:
      if (s->depth == 0) {
        diag_error(L->diag, st->loc, "return belongs in a def");
        break;
      }
      *ret = eval(L, s, st->value);
      if (st->next) diag_error(L->diag, st->next->loc, "statement after return");
      return true;
    }
  }
  s->target = NULL;
  return false;
}

/* ------------------------------------------------------------- train block */

static TrainConfig default_train(void) {
  return (TrainConfig){
      .batch = 32, .accumulate = 1, .epochs = 1, .optimizer = OPT_ADAMW, .lr = 1e-3, .momentum = 0,
      .weight_decay = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .schedule = SCHED_CONSTANT,
      .seed = 42, .metrics = METRIC_LOSS | METRIC_ACCURACY, .log_every = 50,
  };
}

static bool setting_arity(Lower *L, const Setting *st, int n) {
  if (st->nitems == n && !st->has_colon) return true;
  diag_error(L->diag, st->loc, "'%s' takes %d value%s", st->key, n, n == 1 ? "" : "s");
  return false;
}

static bool setting_int(Lower *L, const Setting *st, int64_t min, int64_t max, int64_t *out) {
  if (!setting_arity(L, st, 1)) return false;
  return want_int_value(L, eval(L, &L->globals, st->items[0]), st->items[0]->loc, st->key, min, max, out);
}

static bool number_in(Lower *L, Value v, SrcLoc loc, const char *what, double min, double max, double *out) {
  if (!want_number(L, v, loc, what)) return false;
  if (!(v.num >= min && v.num <= max)) {
    diag_error(L->diag, loc, "%s must be between %g and %g", what, min, max);
    return false;
  }
  *out = v.num;
  return true;
}

static bool setting_number(Lower *L, const Setting *st, double min, double max, double *out) {
  if (!setting_arity(L, st, 1)) return false;
  return number_in(L, eval(L, &L->globals, st->items[0]), st->items[0]->loc, st->key, min, max, out);
}

static bool is_word(const Expr *e, const char *word) {
  return e->kind == EX_IDENT && strcmp(e->name, word) == 0;
}

/* `optimizer sgd(lr = 0.1, momentum = 0.9)` or `optimizer adamw(...)`. */
static void lower_optimizer(Lower *L, const Setting *st, TrainConfig *t) {
  static const Signature sgd = {{"lr", "momentum", "weight_decay", "nesterov"}, 4, 0, {0.01, 0, 0, 0}};
  static const Signature adamw = {{"lr", "beta1", "beta2", "eps", "weight_decay"}, 5, 0, {1e-3, 0.9, 0.999, 1e-8, 0.01}};
  const Expr *c = st->nitems == 1 ? st->items[0] : NULL;
  bool is_sgd = c && (is_word(c, "sgd") || (c->kind == EX_CALL && strcmp(c->name, "sgd") == 0));
  bool is_adamw = c && (is_word(c, "adamw") || (c->kind == EX_CALL && strcmp(c->name, "adamw") == 0));
  if (!setting_arity(L, st, 1) || (!is_sgd && !is_adamw)) {
    if (st->nitems == 1) diag_error(L->diag, st->loc, "optimizer is sgd(...) or adamw(...)");
    return;
  }
  const Signature *sig = is_sgd ? &sgd : &adamw;
  Value v[MAX_PARAMS];
  SrcLoc locs[MAX_PARAMS];
  Expr none = {.kind = EX_CALL, .name = c->name, .loc = c->loc};
  if (!bind_args(L, &L->globals, c->kind == EX_CALL ? c : &none, sig, v, locs)) return;
  double x[MAX_PARAMS];
  for (int i = 0; i < sig->count; i++) /* lr up to 1000, the rest are fractions */
    if (!number_in(L, v[i], locs[i], sig->names[i], 0, i == 0 ? 1e3 : 1, &x[i])) return;
  if (is_sgd) {
    t->optimizer = OPT_SGD, t->lr = x[0], t->momentum = x[1], t->weight_decay = x[2], t->nesterov = x[3] != 0;
  } else {
    t->optimizer = OPT_ADAMW, t->lr = x[0], t->beta1 = x[1], t->beta2 = x[2], t->eps = x[3], t->weight_decay = x[4];
  }
}

/* `schedule constant`, `schedule linear(warmup = 100, min_lr = 0)`, `schedule cosine(...)`. */
static void lower_schedule(Lower *L, const Setting *st, TrainConfig *t) {
  static const char *names[] = {"constant", "linear", "cosine"};
  static const Signature sig = {{"warmup", "min_lr"}, 2, 0, {0, 0}};
  if (!setting_arity(L, st, 1)) return;
  const Expr *c = st->items[0];
  int kind = -1;
  for (int i = 0; i < 3; i++)
    if ((c->kind == EX_IDENT || c->kind == EX_CALL) && strcmp(c->name, names[i]) == 0) kind = i;
  if (kind < 0) {
    diag_error(L->diag, c->loc, "schedule is constant, linear(...) or cosine(...)");
    return;
  }
  t->schedule = (ScheduleKind)kind;
  if (c->kind != EX_CALL) return;
  Value v[MAX_PARAMS];
  SrcLoc locs[MAX_PARAMS];
  double min_lr;
  if (!bind_args(L, &L->globals, c, &sig, v, locs) ||
      !want_int_value(L, v[0], locs[0], "warmup", 0, INT64_C(1) << 40, &t->warmup) ||
      !number_in(L, v[1], locs[1], "min_lr", 0, 1e3, &min_lr))
    return;
  t->min_lr = min_lr;
}

/* `eval every epoch: accuracy, f1` or `eval every 500 steps: loss`. */
static void lower_eval(Lower *L, const Setting *st, TrainConfig *t) {
  bool epoch = st->nitems == 2 && is_word(st->items[0], "every") && is_word(st->items[1], "epoch");
  bool steps = st->nitems == 3 && is_word(st->items[0], "every") && is_word(st->items[2], "steps");
  if (!epoch && !steps) {
    diag_error(L->diag, st->loc, "expected `eval every epoch` or `eval every N steps`");
    return;
  }
  if (epoch) t->eval_every_epoch = true;
  else if (!want_int_value(L, eval(L, &L->globals, st->items[1]), st->items[1]->loc, "the eval period", 1,
                           INT64_C(1) << 40, &t->eval_every_steps))
    return;
  if (!st->has_colon) return;
  static const struct { const char *name; unsigned bit; } metrics[] = {
      {"loss", METRIC_LOSS}, {"accuracy", METRIC_ACCURACY}, {"f1", METRIC_F1}};
  t->metrics = METRIC_LOSS;
  for (int i = 0; i < st->nafter; i++) {
    const Expr *m = st->after_colon[i];
    unsigned bit = 0;
    for (int j = 0; j < 3; j++)
      if (m->kind == EX_IDENT && strcmp(m->name, metrics[j].name) == 0) bit = metrics[j].bit;
    if (!bit) diag_error(L->diag, m->loc, "unknown metric (expected loss, accuracy or f1)");
    t->metrics |= bit;
  }
}

/* Policies a later trainc will honour. Accepting them silently would be a lie,
 * so anything beyond the default is an error that says so. */
static void lower_not_yet(Lower *L, const Setting *st, const char *default_word, int64_t default_int) {
  if (st->nitems == 1 && !st->has_colon) {
    const Expr *e = st->items[0];
    if (default_word && is_word(e, default_word)) return;
    if (!default_word && e->kind == EX_NUM && e->is_int && (int64_t)e->num == default_int) return;
  }
  diag_error(L->diag, st->loc, "'%s' policies are not supported by this version of trainc (only `%s %s`)",
             st->key, st->key, default_word ? default_word : "1");
}

static void lower_setting(Lower *L, const Setting *st, TrainConfig *t) {
  const char *k = st->key;
  int64_t big = INT64_C(1) << 40;
  if (!strcmp(k, "batch")) setting_int(L, st, 1, 1 << 20, &t->batch);
  else if (!strcmp(k, "accumulate")) setting_int(L, st, 1, 1 << 20, &t->accumulate);
  else if (!strcmp(k, "epochs")) setting_int(L, st, 1, big, &t->epochs);
  else if (!strcmp(k, "steps")) setting_int(L, st, 1, big, &t->steps);
  else if (!strcmp(k, "log_every")) setting_int(L, st, 1, big, &t->log_every);
  else if (!strcmp(k, "seed")) {
    int64_t seed;
    if (setting_int(L, st, 0, big, &seed)) t->seed = (uint64_t)seed;
  } else if (!strcmp(k, "clip")) setting_number(L, st, 0, 1e9, &t->clip_norm);
  else if (!strcmp(k, "validation")) setting_number(L, st, 0, 0.9, &t->val_split);
  else if (!strcmp(k, "optimizer")) lower_optimizer(L, st, t);
  else if (!strcmp(k, "schedule")) lower_schedule(L, st, t);
  else if (!strcmp(k, "eval")) lower_eval(L, st, t);
  else if (!strcmp(k, "checkpoint")) lower_not_yet(L, st, "off", 0);
  else if (!strcmp(k, "local_sgd")) lower_not_yet(L, st, NULL, 1);
  else diag_error(L->diag, st->loc, "unknown train setting '%s'", k);
}

static void lower_train(Lower *L, const TrainBlock *tb) {
  L->g->train = default_train();
  if (!tb) return;
  if (tb->next) diag_error(L->diag, tb->next->loc, "a file has at most one train block");
  for (const Setting *st = tb->settings; st; st = st->next) lower_setting(L, st, &L->g->train);
}

/* ------------------------------------------------------------------- model */

static const Model *pick_model(Lower *L, const char *name) {
  const Model *only = L->ast->models;
  if (!only) {
    diag_error(L->diag, (SrcLoc){0}, "%s: no model in this file", L->ast->file->path);
    return NULL;
  }
  if (!name && only->next) {
    diag_error(L->diag, only->next->loc, "this file holds several models: choose one with --model NAME");
    return NULL;
  }
  for (const Model *m = only; m; m = m->next)
    if (!name || strcmp(m->name, name) == 0) return m;
  diag_error(L->diag, (SrcLoc){0}, "%s: no model named '%s'", L->ast->file->path, name);
  return NULL;
}

/* A sequence model [B, T, vocab] can sample when its token ids are exactly
 * one embedded input of shape `rows` [B, T] (not the labels); else -1. */
static int token_input(const Graph *g, const Shape *rows) {
  int found = -1;
  for (int i = 0; i < g->n; i++) {
    const Node *e = &g->nodes[i];
    if (e->op != OP_EMBEDDING || e->in[1] == g->labels || !shape_equal(&g->nodes[e->in[1]].shape, rows)) continue;
    if (found >= 0 && found != e->in[1]) return -1; /* two candidates: which one to feed? */
    found = e->in[1];
  }
  return found;
}

/* The trainer needs a scalar f32 `loss`; accuracy needs predict [B, C] and
 * labels [B] (or [B, T, C] and [B, T]); sampling needs token ids [B, T]. */
static void finish_model(Lower *L, Scope *s, const Model *m) {
  Graph *g = L->g;
  Binding *loss = lookup_in(s, "loss");
  if (!loss || loss->value.kind != V_TENSOR) {
    if (diag_count(L->diag) == 0) diag_error(L->diag, m->loc, "model '%s' defines no tensor named 'loss'", m->name);
    return;
  }
  const Node *n = &g->nodes[loss->value.node];
  if (n->shape.rank != 0 || n->dtype != DT_F32) {
    char sb[128];
    diag_error(L->diag, n->loc, "'loss' must be an f32 scalar, got %s%s", dtype_name(n->dtype), shape_str(&n->shape, sb));
    return;
  }
  g->loss = n->id;
  g->loss_kind = n->op == OP_CROSS_ENTROPY ? LOSS_CROSS_ENTROPY : n->id == L->mse_node ? LOSS_MSE : LOSS_OTHER;
  if (g->predict < 0) {
    g->labels = -1;
    return;
  }
  const Shape *p = &g->nodes[g->predict].shape;
  if (p->rank < 2 || p->rank > 3 || p->dim[0] != g->train.batch) {
    char sb[128];
    diag_error(L->diag, g->nodes[g->predict].loc, "predict must be [B, classes] or [B, T, classes], got %s",
               shape_str(p, sb));
    return;
  }
  /* Accuracy compares predict's rows with one class label per row. */
  Shape rows = *p;
  rows.rank--;
  int64_t classes = p->dim[p->rank - 1];
  if (g->labels >= 0) {
    const Node *y = &g->nodes[g->labels];
    if (!shape_equal(&y->shape, &rows) || y->index_limit != classes) g->labels = -1;
  }
  if (p->rank == 3) g->tokens = token_input(g, &rows);
}

Graph *lower_ast(const Ast *ast, const char *model_name, Diag *diag) {
  Lower L = {.ast = ast, .g = graph_new(), .diag = diag, .globals = {.prefix = xstrdup("")}, .mse_node = -1};
  Graph *g = L.g;
  lower_train(&L, ast->trains);
  bind(&L, &L.globals, "B", B_CONST, num_value((double)g->train.batch, true), (SrcLoc){0});
  lower_stmts(&L, &L.globals, ast->consts, NULL);
  const Model *m = pick_model(&L, model_name);
  if (m) {
    g->model_name = xstrdup(m->name);
    g->source_path = xstrdup(ast->file->path);
    Scope s = {.prefix = xstrdup("")};
    lower_stmts(&L, &s, m->body, NULL);
    if (diag_count(diag) == 0) finish_model(&L, &s, m);
    scope_free(&s);
  }
  scope_free(&L.globals);
  g->n_forward = g->n;
  if (diag_count(diag) > 0) {
    graph_free(g);
    return NULL;
  }
  return g;
}
