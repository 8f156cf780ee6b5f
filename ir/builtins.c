/* builtins.c — the builtin layer library of the model language
 * (docs/ops.md): each builtin checks its arguments, declares its parameters
 * (named as lower.c's header says) and adds the graph nodes it stands for.
 * linear, layernorm, embedding, the losses, the layout builtins (reshape,
 * narrow, permute, ...), attention, dropout, conv2d and pooling. */
#include "lower_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t last_dim_of(Lower *L, int node) { return shape_of(L, node)->dim[shape_of(L, node)->rank - 1]; }

/* The tensor has at least `rank` axes; otherwise reports `message`. */
static bool want_rank(Lower *L, int node, int rank, SrcLoc loc, const char *message) {
  if (shape_of(L, node)->rank >= rank) return true;
  char sb[128];
  diag_error(L->diag, loc, "%s, got %s", message, shape_str(shape_of(L, node), sb));
  return false;
}

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
  return (Init){.kind = TRC_INIT_UNIFORM, .a = -bound, .b = bound, .fan_in = fan_in};
}

/* x @ weight^T + bias with weight [out, in], bias [out], named
 * "<prefix>weight", "<prefix>bias" (PyTorch's Linear layout and init). */
static int linear_layer(Lower *L, int x, int64_t out, bool bias, const char *prefix, SrcLoc loc) {
  int64_t in = last_dim_of(L, x);
  int first = L->g->n;
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
  set_layer_path(L, first, prefix);
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
  if (!(v[1].num > 0 && isfinite(v[1].num))) { /* it keeps 1/sqrt(var + eps) finite */
    diag_error(L->diag, locs[1], "layernorm's eps must be positive, got %g", v[1].num);
    return error_value;
  }
  if (!want_rank(L, v[0].node, 1, locs[0], "layernorm needs an input with at least one axis"))
    return error_value;
  const Shape *x = shape_of(L, v[0].node);
  Shape vec = {.rank = 1, .dim = {x->dim[x->rank - 1]}};
  char *prefix = param_prefix(s, "layernorm");
  char *wname = xsprintf("%sweight", prefix), *bname = xsprintf("%sbias", prefix);
  int gamma = add_param(L, wname, &vec, (Init){.kind = TRC_INIT_ONES}, false, call->loc);
  int beta = add_param(L, bname, &vec, (Init){.kind = TRC_INIT_ZEROS}, false, call->loc);
  free(prefix), free(wname), free(bname);
  double eps = v[1].num;
  int stats = graph_add_attr(L->g, OP_LAYERNORM_STATS, &v[0].node, 1, eps, 0, 0, call->loc, L->diag);
  if (stats < 0) return error_value;
  int in[4] = {v[0].node, gamma, beta, stats};
  return tensor_value(graph_add_attr(L->g, OP_LAYERNORM, in, 4, eps, 0, 0, call->loc, L->diag));
}

/* The embedding op of ids in table; `padding_idx` (NaN: none) is a row
 * whose gradient is 0, as torch.nn.Embedding's (attr.i[1] = 1, attr.i[2] =
 * the row). -1 on error. */
static int embedding_node(Lower *L, int table, Value ids, Value padding_idx, SrcLoc loc,
                          SrcLoc pad_loc) {
  int64_t vocab = shape_of(L, table)->dim[0], pad = 0;
  bool padded = !(padding_idx.kind == V_NUM && isnan(padding_idx.num));
  if (padded && !want_int_value(L, padding_idx, pad_loc, "padding_idx", 0, vocab - 1, &pad))
    return -1;
  Attr a = {.i = {0, padded, pad}};
  int in[2] = {table, ids.node};
  return graph_add_op(L->g, OP_EMBEDDING, in, 2, &a, loc, L->diag);
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
    return tensor_value(embedding_node(L, v[1].node, v[0], v[3], call->loc, locs[3]));
  }
  int64_t vocab, dim;
  if (!want_int_value(L, v[1], locs[1], "vocabulary size", 1, MAX_NUMEL, &vocab) ||
      !want_int_value(L, v[2], locs[2], "embedding size", 1, MAX_NUMEL, &dim) ||
      !mark_index_input(L, v[0], locs[0], vocab, "embedding's ids"))
    return error_value;
  char *prefix = param_prefix(s, "embedding");
  char *name = xsprintf("%sweight", prefix);
  Init init = {.kind = TRC_INIT_NORMAL, .a = 0, .b = 1};
  int table = add_param(L, name, &(Shape){.rank = 2, .dim = {vocab, dim}}, init, true, call->loc);
  free(prefix), free(name);
  return tensor_value(table < 0 ? -1 : embedding_node(L, table, v[0], v[3], call->loc, locs[3]));
}

/* `ignore = L`: rows labelled L (negative, as PyTorch's -100) add no loss
 * and no gradient. The labels' input allows L besides [0, classes). */
static bool mark_ignored_label(Lower *L, Value labels, Value v, SrcLoc loc, bool *given,
                               int64_t *ignore) {
  *given = !(v.kind == V_NUM && isnan(v.num)); /* the default is NaN */
  if (!*given) return true;
  if (!want_int_value(L, v, loc, "ignore", INT32_MIN, -1, ignore)) return false;
  Node *n = &L->g->nodes[labels.node];
  if (n->dtype != DT_I32) {
    diag_error(L->diag, loc, "ignore needs i32 labels (input '%s' is %s)", n->name,
               dtype_name(n->dtype));
    return false;
  }
  if (n->has_ignore && n->ignore_label != *ignore) {
    diag_error(L->diag, loc, "input '%s' already ignores the label %lld", n->name,
               (long long)n->ignore_label);
    return false;
  }
  n->has_ignore = true;
  n->ignore_label = *ignore;
  return true;
}

static Value builtin_cross_entropy(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  if (!want_tensor(L, v[0], locs[0], "cross_entropy's logits") ||
      !want_tensor(L, v[1], locs[1], "cross_entropy's labels"))
    return error_value;
  const Shape *x = shape_of(L, v[0].node);
  int64_t classes = x->rank ? x->dim[x->rank - 1] : 1, ignore = 0;
  bool ignores;
  if (!mark_index_input(L, v[1], locs[1], classes, "cross_entropy's labels") ||
      !mark_ignored_label(L, v[1], v[2], locs[2], &ignores, &ignore))
    return error_value;
  int in[3] = {v[0].node, v[1].node, add_node(L, OP_LOGSUMEXP, v[0].node, -1, call->loc)};
  if (in[2] < 0) return error_value;
  int y = graph_add_attr(L->g, OP_CROSS_ENTROPY, in, 3, 0, ignores, ignore, call->loc, L->diag);
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

/* store(x) / recompute(x): pin the checkpoint planner's decision for x. */
static Value builtin_pin(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  if (!want_tensor(L, v[0], locs[0], "the argument")) return error_value;
  Node *n = &L->g->nodes[v[0].node];
  if (n->op == OP_INPUT || n->op == OP_PARAM) {
    diag_error(L->diag, locs[0], "%s() applies to computed values, not to inputs or parameters", call->name);
    return error_value;
  }
  n->pin = strcmp(call->name, "store") == 0 ? PIN_STORE : PIN_RECOMPUTE;
  return v[0];
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

static Value builtin_causal_mask(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  if (!want_tensor(L, v[0], locs[0], "causal_mask's scores") || !want_number(L, v[1], locs[1], "scale"))
    return error_value;
  Attr a = {.f = {v[1].num}};
  return tensor_value(graph_add_op(L->g, OP_CAUSAL_MASK, &v[0].node, 1, &a, call->loc, L->diag));
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

/* linear(x, C) named <prefix><part>.: [B, T, C], read by attend()'s bmms as
 * H heads interleaved in each row (no copy). -1 on error. */
static int head_projection(Lower *L, int x, const char *prefix, const char *part, SrcLoc loc) {
  char *sub = xsprintf("%s%s.", prefix, part);
  int y = linear_layer(L, x, shape_of(L, x)->dim[2], true, sub, loc);
  free(sub);
  return y;
}

/* softmax(q k^T * scale) (dropout) v per head, the softmax one op: `softmax`
 * (causal_softmax, which never reads the masked half, or masked_softmax)
 * of the scores, with the key mask as its second input when key_mask >= 0.
 * q, k, v and the result are [B, T, H*D], the heads interleaved in each
 * row: the bmms' strides split and merge the heads (ops.def); the scores
 * are [B, H, T, T]. -1 on error (scores too large). */
static int attend(Lower *L, const int qkv[3], int64_t heads, OpKind softmax, int key_mask,
                  double scale, double p, SrcLoc loc) {
  int in[2] = {qkv[0], qkv[1]};
  int scores = graph_add_bmm(L->g, in, 0, 1, heads, BMM_HEADS_A | BMM_HEADS_B, loc, L->diag);
  if (scores < 0) return -1;
  int soft_in[2] = {scores, key_mask};
  Attr a = {.f = {scale}};
  int probs = graph_add_op(L->g, softmax, soft_in, key_mask >= 0 ? 2 : 1, &a, loc, L->diag);
  int out[2] = {dropout_node(L, probs, p, loc), qkv[2]};
  return graph_add_bmm(L->g, out, 0, 0, heads, BMM_HEADS_B | BMM_HEADS_C, loc, L->diag);
}

/* A 0/1 mask over the [B, T] positions of x [B, T, ...] (attention's keys,
 * pooling's tokens): an integer model input, whose values the trainer
 * checks when data loads; the default NaN is no mask (-1). False on error. */
static bool want_mask(Lower *L, Value v, SrcLoc loc, int x, int *mask) {
  *mask = -1;
  if (v.kind == V_NUM && isnan(v.num)) return true;
  if (!want_tensor(L, v, loc, "the mask") || !mark_index_input(L, v, loc, 2, "the mask"))
    return false;
  const Shape *m = shape_of(L, v.node), *xs = shape_of(L, x);
  if (xs->rank < 2 || m->rank != 2 || m->dim[0] != xs->dim[0] || m->dim[1] != xs->dim[1]) {
    char sm[128], sx[128];
    diag_error(L->diag, loc, "the mask %s does not fit the positions of %s (expected [B, T])",
               shape_str(m, sm), shape_str(xs, sx));
    return false;
  }
  *mask = v.node;
  return true;
}

/* x is [B, T, C] with C a multiple of the heads. */
static bool want_heads_input(Lower *L, const char *builtin, int x, int64_t heads, SrcLoc loc) {
  const Shape *xs = shape_of(L, x);
  if (xs->rank == 3 && xs->dim[2] % heads == 0) return true;
  char sb[128];
  diag_error(L->diag, loc, "%s needs [B, T, C] with C divisible by the %lld heads, got %s",
             builtin, (long long)heads, shape_str(xs, sb));
  return false;
}

/* causal_self_attention(x, heads, dropout = 0) on x [B, T, C], as GPT-2:
 * q, k, v = linear(x, C) each, split into heads; softmax of the causally
 * masked q k^T / sqrt(C/H); (dropout;) times v; heads merged; linear(C).
 * self_attention(x, heads, mask = M, dropout = 0), as BERT: the same with
 * every query seeing every key whose M [B, T] is 1 (all, without M).
 * Parameters: <name>.q, .k, .v, .proj (weight [C, C] and bias [C] each). */
static Value builtin_attention(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  bool causal = strcmp(call->name, "causal_self_attention") == 0;
  int64_t heads;
  double p;
  int mask = -1;
  int p_arg = causal ? 2 : 3;
  const char *input = causal ? "causal_self_attention's input" : "self_attention's input";
  if (!want_tensor(L, v[0], locs[0], input) ||
      !want_int_value(L, v[1], locs[1], "the number of heads", 1, MAX_NUMEL, &heads) ||
      !want_heads_input(L, call->name, v[0].node, heads, locs[0]) ||
      (!causal && !want_mask(L, v[2], locs[2], v[0].node, &mask)) ||
      !want_probability(L, v[p_arg], locs[p_arg], &p))
    return error_value;
  const Shape xs = *shape_of(L, v[0].node);
  char *prefix = param_prefix(s, call->name);
  static const char *parts[] = {"q", "k", "v"};
  int qkv[3], y = 0, first = L->g->n;
  for (int i = 0; i < 3 && y >= 0; i++)
    y = qkv[i] = head_projection(L, v[0].node, prefix, parts[i], call->loc);
  double scale = 1.0 / sqrt((double)(xs.dim[2] / heads));
  OpKind softmax = causal ? OP_CAUSAL_SOFTMAX : OP_MASKED_SOFTMAX;
  if (y >= 0) y = attend(L, qkv, heads, softmax, mask, scale, p, call->loc);
  char *proj = xsprintf("%sproj.", prefix);
  if (y >= 0) y = linear_layer(L, y, xs.dim[2], true, proj, call->loc);
  set_layer_path(L, first, prefix);
  free(proj), free(prefix);
  return tensor_value(y);
}

/* mean_pool(x, mask): x [B, T, ...] averaged over the positions whose mask
 * is 1 (all, without a mask), as sentence-transformers' mean pooling. */
static Value builtin_mean_pool(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  int mask;
  if (!want_tensor(L, v[0], locs[0], "mean_pool's input") ||
      !want_mask(L, v[1], locs[1], v[0].node, &mask))
    return error_value;
  int in[2] = {v[0].node, mask};
  return tensor_value(graph_add(L->g, OP_MEAN_POOL, in, mask >= 0 ? 2 : 1, call->loc, L->diag));
}

static bool want_image_input(Lower *L, Value v, SrcLoc loc, const char *what) {
  if (!want_tensor(L, v, loc, what)) return false;
  if (shape_of(L, v.node)->rank == 4) return true;
  char sb[128];
  diag_error(L->diag, loc, "%s must be an image batch [N, C, H, W], got %s", what, shape_str(shape_of(L, v.node), sb));
  return false;
}

/* conv2d's unfolded form (CONV_IM2COL): im2col of the zero-padded input
 * and one GEMM with the weight viewed as [channels, C*k*k], [N, OH*OW,
 * channels] out. */
static int conv_as_gemm(Lower *L, int x, int w, const Shape *ws, const Attr *conv, SrcLoc loc) {
  int64_t out = ws->dim[0], k = ws->dim[2];
  if (conv->i[1] > 0) {
    Attr a = {.i = {conv->i[1]}};
    x = graph_add_op(L->g, OP_PAD, &x, 1, &a, loc, L->diag);
  }
  Attr win = {.i = {k, conv->i[0]}};
  int cols = graph_add_op(L->g, OP_IM2COL, &x, 1, &win, loc, L->diag);
  if (cols < 0) return -1;
  int mm[2] = {cols, reshape_node(L, w, (Shape){.rank = 2, .dim = {out, ws->dim[1] * k * k}}, loc)};
  return graph_add_attr(L->g, OP_MATMUL, mm, 2, 0, 0, 1, loc, L->diag);
}

/* conv2d(x, channels, kernel, stride = 1, padding = 0, bias = 1) on NCHW:
 * weight [channels, C, k, k] and bias [channels] as torch.nn.Conv2d. One
 * conv2d op (the convolution library's), or under CONV_IM2COL the unfolded
 * GEMM, its bias added and its output moved back to [N, channels, OH, OW]. */
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
  char *prefix = param_prefix(s, "conv2d");
  char *wname = xsprintf("%sweight", prefix), *bname = xsprintf("%sbias", prefix);
  Init init = torch_linear_init(xs.dim[1] * k * k);
  init.fan_out = out * k * k;
  Shape wshape = {.rank = 4, .dim = {out, xs.dim[1], k, k}};
  int w = add_param(L, wname, &wshape, init, true, call->loc);
  Attr conv = {.i = {stride, pad}};
  bool unfolded = L->conv == CONV_IM2COL;
  int y = -1;
  if (w >= 0 && unfolded)
    y = conv_as_gemm(L, v[0].node, w, &wshape, &conv, call->loc); /* [N, OH*OW, out] */
  else if (w >= 0)
    y = graph_add_op(L->g, OP_CONV2D, (int[2]){v[0].node, w}, 2, &conv, call->loc, L->diag);
  if (y >= 0 && bias) {
    int b = add_param(L, bname, &(Shape){.rank = 1, .dim = {out}}, init, false, call->loc);
    if (b >= 0 && !unfolded)
      b = reshape_node(L, b, (Shape){.rank = 3, .dim = {out, 1, 1}}, call->loc); /* per channel */
    y = add_node(L, OP_ADD, y, b, call->loc);
  }
  free(prefix), free(wname), free(bname);
  if (y < 0) return error_value;
  if (!unfolded) return tensor_value(y);
  y = permute_node(L, y, (int[3]){0, 2, 1}, call->loc);
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

static const Builtin builtins[] = {
    {"linear", builtin_linear, {{"x", "out", "bias"}, 3, 2, {0, 0, 1}}},
    {"layernorm", builtin_layernorm, {{"x", "eps"}, 2, 1, {0, 1e-5}}},
    {"embedding", builtin_embedding,
     {{"ids", "vocab", "dim", "padding_idx"}, 4, 2, {0, 0, 0, NAN}}},
    {"cross_entropy", builtin_cross_entropy, {{"logits", "labels", "ignore"}, 3, 2, {0, 0, NAN}}},
    {"mse", builtin_mse, {{"prediction", "target"}, 2, 2, {0}}},
    {"mean", builtin_mean, {{"x"}, 1, 1, {0}}},
    {"f32", builtin_cast, {{"x"}, 1, 1, {0}}},
    {"i32", builtin_cast, {{"x"}, 1, 1, {0}}},
    {"u8", builtin_cast, {{"x"}, 1, 1, {0}}},
    {"store", builtin_pin, {{"x"}, 1, 1, {0}}},
    {"recompute", builtin_pin, {{"x"}, 1, 1, {0}}},
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
    {"self_attention", builtin_attention,
     {{"x", "heads", "mask", "dropout"}, 4, 2, {0, 0, NAN, 0}}},
    {"mean_pool", builtin_mean_pool, {{"x", "mask"}, 2, 1, {0, NAN}}},
    {"conv2d", builtin_conv2d, {{"x", "channels", "kernel", "stride", "padding", "bias"}, 6, 3, {0, 0, 0, 1, 0, 1}}},
    {"maxpool", builtin_pool, {{"x", "size", "stride"}, 3, 2, {0, 0, 0}}},
    {"avgpool", builtin_pool, {{"x", "size", "stride"}, 3, 2, {0, 0, 0}}},
};

static Value builtin_one_op(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs);

/* The builtins that are one op applied to one tensor: the ops with a
 * model-file name in ir/ops.def, at their op's index (NULL names elsewhere). */
static const Builtin one_op_builtins[OP_COUNT] = {
#define OP(e, name, class, builtin, ...) [e] = {builtin, builtin_one_op, {{"x"}, 1, 1, {0}}},
#include "ops.def"
#undef OP
};

static const Builtin *find_in(const Builtin *list, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (list[i].name && strcmp(list[i].name, name) == 0) return &list[i];
  return NULL;
}

const Builtin *find_builtin(const char *name) {
  const Builtin *b = find_in(builtins, sizeof builtins / sizeof builtins[0], name);
  return b ? b : find_in(one_op_builtins, OP_COUNT, name);
}

static Value builtin_one_op(Lower *L, Scope *s, const Expr *call, Value *v, SrcLoc *locs) {
  if (!want_tensor(L, v[0], locs[0], "the argument")) return error_value;
  OpKind op = (OpKind)(find_in(one_op_builtins, OP_COUNT, call->name) - one_op_builtins);
  return tensor_value(add_node(L, op, v[0].node, -1, call->loc));
}
