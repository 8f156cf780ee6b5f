/* lower_internal.h — what the IR stage's lowering files share: the
 * evaluator (lower.c: scopes, expressions, defs and repeat, statements), the
 * builtin layer library (builtins.c) and the train block (train_block.c).
 * Not part of the stage's interface: other stages include ir.h only. */
#ifndef TRAINC_IR_LOWER_INTERNAL_H
#define TRAINC_IR_LOWER_INTERNAL_H

#include "ir.h"

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
  NameMap var_index; /* name -> its latest binding in vars */
  char **used; /* parameter base names taken in this scope */
  int nused, capused;
  NameMap used_next;  /* each used name -> the suffix to try next when it is
                         a base again (base_1, base_2, ...) */
  const char *target; /* the variable the current statement assigns, or NULL */
  int depth;
};

typedef struct {
  const Ast *ast;
  Graph *g;
  Diag *diag;
  NameMap defs; /* def name -> its index in def_list (the first of a name) */
  const Def **def_list;
  Scope globals; /* top-level consts and B */
  int mse_node;  /* the last mse() result, to name the loss kind */
  ConvForm conv; /* what conv2d lowers to */
} Lower;

extern const Value error_value;
Value tensor_value(int node); /* error_value for a node id < 0 */
Value eval(Lower *L, Scope *s, const Expr *e);

char *param_prefix(Scope *s, const char *builtin);
/* Nodes [first, g->n) without a layer path get the one of `prefix`
 * ("block.3.attn." is block.3.attn): a def's copy, a builtin's layer. */
void set_layer_path(Lower *L, int first, const char *prefix);
int add_param(Lower *L, const char *name, const Shape *sh, Init init, bool decay, SrcLoc loc);
int add_node(Lower *L, OpKind op, int a, int b, SrcLoc loc);
int add_scalar_op(Lower *L, OpKind op, int x, double c, SrcLoc loc);
const Shape *shape_of(Lower *L, int node);

/* Checks that report a located error and return false. */
bool want_tensor(Lower *L, Value v, SrcLoc loc, const char *what);
bool want_number(Lower *L, Value v, SrcLoc loc, const char *what);
bool want_int_value(Lower *L, Value v, SrcLoc loc, const char *what, int64_t min, int64_t max, int64_t *out);

#define MAX_PARAMS (1 + IR_MAX_RANK) /* reshape(x, up to 8 dims) */

/* A builtin's signature: parameter names; those after `required` are optional
 * with the given defaults (numbers). */
typedef struct {
  const char *names[MAX_PARAMS];
  int count, required;
  double defaults[MAX_PARAMS];
} Signature;

bool bind_args(Lower *L, Scope *s, const Expr *call, const Signature *sig, Value vals[MAX_PARAMS],
               SrcLoc locs[MAX_PARAMS]);

/* ---- builtins.c: the builtin layer library ---- */
typedef Value (*BuiltinFn)(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs);

typedef struct {
  const char *name;
  BuiltinFn fn;
  Signature sig;
} Builtin;

/* The builtin called `name`, or NULL. */
const Builtin *find_builtin(const char *name);

/* ---- train_block.c ---- */
/* Sets L->g->train from the file's train block (defaults where it is silent). */
void lower_train(Lower *L, const TrainBlock *tb);
/* After the model: metrics the model cannot have (f1_binary needs 2 classes). */
void check_train_metrics(Lower *L, const TrainBlock *tb);
/* weights.c: the train block's `freeze` and the weights block, applied to
 * the lowered model's parameters. */
void apply_weight_settings(Lower *L, const TrainBlock *train, const TrainBlock *weights);

#endif
