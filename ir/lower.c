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
#include "lower_internal.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEF_DEPTH 32
#define MAX_REPEAT 10000

const Value error_value = {.kind = V_ERROR};

static Value num_value(double v, bool is_int) { return (Value){.kind = V_NUM, .num = v, .is_int = is_int}; }
Value tensor_value(int node) {
  return node < 0 ? error_value : (Value){.kind = V_TENSOR, .node = node};
}

/* ------------------------------------------------------------------ scopes */

static Binding *lookup_in(Scope *s, const char *name) {
  int i;
  return namemap_get(&s->var_index, name, &i) ? &s->vars[i] : NULL;
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
  namemap_put(&s->var_index, name, s->nvars - 1);
}

static void scope_free(Scope *s) {
  for (int i = 0; i < s->nused; i++) free(s->used[i]);
  free(s->used);
  free(s->vars);
  namemap_free(&s->var_index);
  namemap_free(&s->used_next);
  free((char *)s->prefix);
}

static bool name_used(Scope *s, const char *name) { return namemap_get(&s->used_next, name, NULL); }

static char *take_name(Scope *s, char *name) {
  VEC_PUSH(s->used, s->nused, s->capused, name);
  namemap_put(&s->used_next, name, 1);
  return name;
}

/* Reserves a unique base name in scope s: base, base_1, base_2, ... the
 * first not taken. Names are never given back, so the search for a base
 * goes on from where its last one stopped. */
static char *unique_base(Scope *s, const char *base) {
  int i;
  if (!namemap_get(&s->used_next, base, &i)) return take_name(s, xstrdup(base));
  char *name = xsprintf("%s_%d", base, i);
  while (name_used(s, name)) {
    free(name);
    name = xsprintf("%s_%d", base, ++i);
  }
  namemap_put(&s->used_next, base, i + 1);
  return take_name(s, name);
}

/* The prefix for parameters of a builtin call: "<scope prefix><base>." */
char *param_prefix(Scope *s, const char *builtin) {
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

/* A parameter's full name becomes a tensor name in .safetensors weights and
 * state files, where the runtime keeps some names for itself (trainc.h):
 * `param __metadata__` would write a header with two __metadata__ keys that
 * no reader loads, and `trainc.optimizer.m` (a def `trainc` calling a def
 * `optimizer` that declares `m`) would collide with a state file's array. */
static bool reserved_param_name(Lower *L, const char *name, SrcLoc loc) {
  const char *prefix = TRC_STATE_PREFIX;
  if (strcmp(name, TRC_SAFETENSORS_METADATA) == 0) {
    diag_error(L->diag, loc,
               "the parameter name '%s' is reserved: it is the .safetensors header's own key",
               name);
    return true;
  }
  if (strncmp(name, prefix, strlen(prefix)) == 0) {
    diag_error(
        L->diag, loc,
        "the parameter name '%s' is reserved: names under '%s' are a state file's own arrays "
        "(rename the def or variable '%.*s')",
        name, prefix, (int)strlen(prefix) - 1, prefix);
    return true;
  }
  return false;
}

int add_param(Lower *L, const char *name, const Shape *sh, Init init, bool decay, SrcLoc loc) {
  if (!check_numel(L, sh, loc) || reserved_param_name(L, name, loc)) return -1;
  Graph *g = L->g;
  int id = graph_add(g, OP_PARAM, NULL, 0, loc, L->diag);
  if (id < 0) return -1;
  Node *n = &g->nodes[id];
  n->shape = *sh;
  n->name = xstrdup(name);
  n->init = init;
  n->decay = decay;
  VEC_PUSH(g->params, g->n_params, g->cap_params, id);
  return id;
}

int add_node(Lower *L, OpKind op, int a, int b, SrcLoc loc) {
  int in[2] = {a, b};
  return graph_add(L->g, op, in, op_info(op)->arity, loc, L->diag);
}

int add_scalar_op(Lower *L, OpKind op, int x, double c, SrcLoc loc) {
  return graph_add_attr(L->g, op, &x, 1, c, 0, 0, loc, L->diag);
}

/* ------------------------------------------------------------- expressions */

const Shape *shape_of(Lower *L, int node) { return &L->g->nodes[node].shape; }

bool want_tensor(Lower *L, Value v, SrcLoc loc, const char *what) {
  if (v.kind == V_TENSOR) return true;
  if (v.kind == V_NUM) diag_error(L->diag, loc, "%s must be a tensor, not a number", what);
  return false;
}

bool want_int_value(Lower *L, Value v, SrcLoc loc, const char *what, int64_t min, int64_t max,
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

/* Every tensor is f32: a number past its range (finite in double) would
 * make the first step's loss NaN; refused where it is written. */
static bool fits_f32(Lower *L, double c, SrcLoc loc, const char *what) {
  if (fabs(c) <= FLT_MAX) return true;
  diag_error(L->diag, loc, "%s %g, which overflows f32 (the type of every tensor; at most %g)",
             what, c, (double)FLT_MAX);
  return false;
}

/* A tensor divided by c is multiplied by 1/c, which must fit f32 too. */
static bool reciprocal_fits_f32(Lower *L, double c, SrcLoc loc) {
  char what[64];
  snprintf(what, sizeof what, "dividing by %g multiplies by", c);
  return c == 0 || fits_f32(L, 1.0 / c, loc, what);
}

/* A const is an f32 wherever it is used: checked at its definition. */
static bool const_fits_f32(Lower *L, const Stmt *st, double v) {
  char what[160];
  snprintf(what, sizeof what, "const %s is", st->name);
  return fits_f32(L, v, st->loc, what);
}

/* tensor op number, or number op tensor (swapped); the number is written at c_loc. */
static Value eval_scalar_binary(Lower *L, int op, int t, double c, bool swapped, SrcLoc loc,
                                SrcLoc c_loc) {
  if (!fits_f32(L, c, c_loc, "this number is") ||
      (op == '/' && !swapped && !reciprocal_fits_f32(L, c, c_loc)))
    return error_value;
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

/* One link of a chain: a (its left side, evaluated) op e's right operand. */
static Value eval_binary(Lower *L, Scope *s, const Expr *e, Value a) {
  Value b = eval(L, s, e->rhs);
  if (a.kind == V_ERROR || b.kind == V_ERROR) return error_value;
  if (a.kind == V_NUM && b.kind == V_NUM) return eval_number_binary(L, e->op, a, b, e->loc);
  if (a.kind == V_TENSOR && b.kind == V_NUM)
    return eval_scalar_binary(L, e->op, a.node, b.num, false, e->loc, e->rhs->loc);
  if (a.kind == V_NUM)
    return eval_scalar_binary(L, e->op, b.node, a.num, true, e->loc, e->lhs->loc);
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

/* a + b - c ...: left to right in a loop, however long (see expr_chain). */
static Value eval_chain(Lower *L, Scope *s, const Expr *e) {
  const Expr **chain;
  int n = expr_chain(e, &chain);
  Value acc = eval(L, s, chain[0]->lhs);
  for (int i = 0; i < n; i++) acc = eval_binary(L, s, chain[i], acc);
  free(chain);
  return acc;
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

/* Matches a call's positional and keyword arguments to a signature and
 * evaluates them into vals[] (defaults filled in as numbers). */
bool bind_args(Lower *L, Scope *s, const Expr *call, const Signature *sig, Value vals[MAX_PARAMS],
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

bool want_number(Lower *L, Value v, SrcLoc loc, const char *what) {
  if (v.kind == V_NUM) return true;
  if (v.kind == V_TENSOR) diag_error(L->diag, loc, "%s must be a number, not a tensor", what);
  return false;
}

static const Def *find_def(Lower *L, const char *name) {
  int i;
  return namemap_get(&L->defs, name, &i) ? L->def_list[i] : NULL;
}

/* ------------------------------------------------------------ def inlining */

void set_layer_path(Lower *L, int first, const char *prefix) {
  char *path = xstrndup(prefix, strlen(prefix) - 1); /* "block.3." is layer block.3 */
  graph_set_scope(L->g, first, path);
  free(path);
}

static bool is_init_name(const char *name);
static bool lower_stmts(Lower *L, Scope *s, const Stmt *body, Value *ret);

/* Inlines one call of def d with already-evaluated arguments, its parameters
 * prefixed by `prefix`. */
static Value inline_def(Lower *L, Scope *caller, const Def *d, const Value *args, const char *prefix,
                        SrcLoc loc) {
  if (L->g->too_large) return error_value; /* said once, by graph_add: stop unrolling */
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
  int first = L->g->n;
  bool returned = lower_stmts(L, &s, d->body, &ret);
  set_layer_path(L, first, prefix);
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

Value eval(Lower *L, Scope *s, const Expr *e) {
  switch (e->kind) {
  case EX_NUM: return num_value(e->num, e->is_int);
  case EX_SIZE: return num_value(e->num, true);
  case EX_IDENT: return eval_ident(L, s, e);
  case EX_BINARY: return eval_chain(L, s, e);
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
  int id = graph_add(g, OP_INPUT, NULL, 0, st->loc, L->diag);
  if (id < 0) return;
  g->nodes[id].shape = sh;
  g->nodes[id].dtype = st->type.dtype;
  g->nodes[id].name = xstrdup(st->name);
  VEC_PUSH(g->inputs, g->n_inputs, g->cap_inputs, id);
  bind(L, s, st->name, B_INPUT, tensor_value(id), st->loc);
}

static const struct {
  const char *name;
  trc_init_kind kind;
  Signature sig;
} inits[] = {
    {"zeros", TRC_INIT_ZEROS, {{0}, 0, 0, {0}}},
    {"ones", TRC_INIT_ONES, {{0}, 0, 0, {0}}},
    {"normal", TRC_INIT_NORMAL, {{"mean", "std"}, 2, 0, {0, 1}}},
    {"uniform", TRC_INIT_UNIFORM, {{"low", "high"}, 2, 0, {0, 1}}},
    {"xavier", TRC_INIT_XAVIER, {{"gain"}, 1, 0, {1}}},
    {"he", TRC_INIT_HE, {{"gain"}, 1, 0, {1}}},
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

/* Arguments that make no distribution: a negative std, low above high, a
 * value that is not finite (constant arithmetic can overflow). */
static bool init_args_ok(Lower *L, const Expr *call, trc_init_kind kind, const Value *v,
                         const SrcLoc *locs) {
  for (int a = 0; a < 2; a++)
    if (!isfinite(v[a].num)) {
      diag_error(L->diag, locs[a], "%s() needs finite arguments, got %g", call->name, v[a].num);
      return false;
    }
  if (kind == TRC_INIT_NORMAL && v[1].num < 0) {
    diag_error(L->diag, locs[1], "normal()'s std must not be negative, got %g", v[1].num);
    return false;
  }
  if (kind == TRC_INIT_UNIFORM && v[0].num > v[1].num) {
    diag_error(L->diag, call->loc, "uniform()'s low %g is above its high %g", v[0].num, v[1].num);
    return false;
  }
  return true;
}

static bool eval_init(Lower *L, Scope *s, const Expr *call, const Shape *sh, Init *init) {
  for (size_t i = 0; i < sizeof inits / sizeof inits[0]; i++) {
    if (strcmp(inits[i].name, call->name) != 0) continue;
    Value v[MAX_PARAMS] = {{0}}; /* zeros() and ones() take no arguments: a, b stay 0 */
    SrcLoc locs[MAX_PARAMS];
    if (!bind_args(L, s, call, &inits[i].sig, v, locs)) return false;
    for (int a = 0; a < inits[i].sig.count; a++)
      if (!want_number(L, v[a], locs[a], inits[i].sig.names[a])) return false;
    if (!init_args_ok(L, call, inits[i].kind, v, locs)) return false;
    *init = (Init){.kind = inits[i].kind, .a = v[0].num, .b = v[1].num};
    if (init->kind == TRC_INIT_XAVIER || init->kind == TRC_INIT_HE) init->b = 0;
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
  bind(L, s, st->name, B_PARAM, tensor_value(id), st->loc); /* errors too: uses stay quiet */
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
      else if (v.kind == V_NUM && const_fits_f32(L, st, v.num))
        bind(L, s, st->name, B_CONST, v, st->loc);
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

/* A cross_entropy with `ignore` is a sum that the trainer divides by the
 * number of labels that count in the whole accumulation window, so it must
 * be the loss itself (a term of a larger loss would be mis-scaled), and its
 * labels may feed nothing else (no other op can take the ignored value). */
static void check_ignored_labels(Lower *L) {
  Graph *g = L->g;
  for (int i = 0; i < g->n; i++) {
    const Node *n = &g->nodes[i];
    if (n->op == OP_CROSS_ENTROPY && n->attr.i[0] && i != g->loss)
      diag_error(L->diag, n->loc, "cross_entropy with ignore must be the model's loss itself "
                                  "(the trainer divides its sum by the labels that count)");
    for (int k = 0; k < n->nin; k++) {
      const Node *in = &g->nodes[n->in[k]];
      if (in->op == OP_INPUT && in->has_ignore && !(n->op == OP_CROSS_ENTROPY && n->attr.i[0]))
        diag_error(L->diag, n->loc, "input '%s' holds ignored labels (%lld): only the loss's "
                                    "cross_entropy may read it", in->name,
                   (long long)in->ignore_label);
    }
  }
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
  g->loss_kind = n->op == OP_CROSS_ENTROPY ? TRC_LOSS_CROSS_ENTROPY : n->id == L->mse_node ? TRC_LOSS_MSE : TRC_LOSS_OTHER;
  check_ignored_labels(L);
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

/* Indexes the file's defs by name. A def may not take the name of another
 * or of a builtin: `def relu` would silently change what every relu() in the
 * file means (trainc has errors, not warnings: renaming is the fix). */
static void index_defs(Lower *L) {
  int n = 0;
  for (const Def *d = L->ast->defs; d; d = d->next) n++;
  L->def_list = xmalloc((size_t)n * sizeof *L->def_list);
  n = 0;
  for (const Def *d = L->ast->defs; d; d = d->next) {
    int first;
    if (namemap_get(&L->defs, d->name, &first)) {
      diag_error(L->diag, d->loc, "def '%s' is already defined", d->name);
      diag_note(L->diag, L->def_list[first]->loc, "first defined here");
    } else if (find_builtin(d->name) || is_init_name(d->name)) {
      diag_error(L->diag, d->loc, "def '%s' has the name of a builtin %s; give it another name",
                 d->name, find_builtin(d->name) ? "function" : "initializer");
    } else {
      L->def_list[n] = d;
      namemap_put(&L->defs, d->name, n++);
    }
  }
}

Graph *lower_ast(const Ast *ast, const char *model_name, ConvForm conv, Diag *diag) {
  Lower L = {.ast = ast, .g = graph_new(), .diag = diag, .conv = conv, .globals = {.prefix = xstrdup("")}, .mse_node = -1};
  Graph *g = L.g;
  index_defs(&L);
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
    if (diag_count(diag) == 0) check_train_metrics(&L, ast->trains);
    scope_free(&s);
  }
  scope_free(&L.globals);
  namemap_free(&L.defs);
  free(L.def_list);
  g->n_forward = g->n;
  if (diag_count(diag) > 0) {
    graph_free(g);
    return NULL;
  }
  return g;
}
