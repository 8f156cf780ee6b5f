/* kernel.c — builders for the loop-nest form of kernels (see ir.h).
 * All nodes of a kernel live in one pool freed with the kernel. */
#include "ir.h"

#include <stddef.h>
#include <stdlib.h>

/* The pool: zeroed blocks, each twice its predecessor's size (from
 * FIRST_BLOCK to LAST_BLOCK bytes), nodes bumped off the newest. One
 * allocation a node made a planner that builds and frees a program per
 * candidate spend a third of its time in malloc and free (10,000 blocks). */
typedef struct Block Block;
struct Block {
  Block *next;
  size_t used, size;
  max_align_t data[];
};

enum { FIRST_BLOCK = 512, LAST_BLOCK = 16384 };

static void *kalloc(Kernel *k, size_t size) {
  Block *b = k->pool;
  size = (size + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
  if (!b || b->size - b->used < size) {
    size_t next = b ? (b->size * 2 < LAST_BLOCK ? b->size * 2 : LAST_BLOCK) : FIRST_BLOCK;
    Block *grown = xcalloc(1, sizeof(Block) + (size > next ? size : next));
    grown->size = size > next ? size : next;
    grown->next = b;
    k->pool = b = grown;
  }
  void *at = (char *)b->data + b->used;
  b->used += size;
  return at;
}

Kernel *kernel_new(int node) {
  Kernel *k = xcalloc(1, sizeof *k);
  k->node = node;
  return k;
}

static void free_stmts(KStmt **body, int n) {
  for (int i = 0; i < n; i++)
    if (body[i]->kind == KS_FOR) free_stmts(body[i]->body, body[i]->nbody);
  free(body);
}

void kernel_free(Kernel *k) {
  if (!k) return;
  free_stmts(k->body, k->nbody);
  for (Block *b = k->pool; b;) {
    Block *next = b->next;
    free(b);
    b = next;
  }
  free(k);
}

/* Appends a statement to the parent loop's body, or to the kernel's top level. */
static KStmt *append(Kernel *k, KStmt *parent, KStmtKind kind) {
  KStmt *s = kalloc(k, sizeof *s);
  s->kind = kind;
  if (parent)
    VEC_PUSH(parent->body, parent->nbody, parent->capbody, s);
  else
    VEC_PUSH(k->body, k->nbody, k->capbody, s);
  return s;
}

KStmt *k_for(Kernel *k, KStmt *parent, int64_t extent, int *var) {
  KStmt *s = append(k, parent, KS_FOR);
  s->var = *var = k->n_vars++;
  s->extent = extent;
  return s;
}

/* The bound is read as an index by every backend and analysis: a load or a
 * local there would be a kernel bug. */
static bool is_index_of_vars(const KExpr *e) {
  if (!e) return true;
  if (e->kind == KE_LOAD || e->kind == KE_LOCAL || e->kind == KE_RANDOM || !e->is_int) return false;
  return is_index_of_vars(e->a) && is_index_of_vars(e->b) && is_index_of_vars(e->c);
}

KStmt *k_for_bounded(Kernel *k, KStmt *parent, int64_t extent, KExpr *limit, int *var) {
  if (!is_index_of_vars(limit))
    diag_internal_error("a loop bound that is not an integer expression of loop variables");
  KStmt *s = k_for(k, parent, extent, var);
  s->limit = limit;
  s->short_row = k->short_rows = true; /* a row that ends at run time ends in a tail */
  return s;
}

KStmt *k_local(Kernel *k, KStmt *parent, KExpr *value, int *local) {
  KStmt *s = append(k, parent, KS_LOCAL);
  s->var = *local = k->n_locals++;
  s->value = value;
  return s;
}

KStmt *k_set(Kernel *k, KStmt *parent, int local, KExpr *value) {
  KStmt *s = append(k, parent, KS_SET);
  s->var = local;
  s->value = value;
  return s;
}

KStmt *k_row(Kernel *k, KStmt *parent, int64_t extent) {
  KStmt *s = append(k, parent, KS_LOCAL);
  s->var = k->n_locals++;
  s->extent = extent;
  return s;
}

KStmt *k_set_at(Kernel *k, KStmt *parent, const KStmt *row, KExpr *index, KExpr *value) {
  if (!is_index_of_vars(index)) diag_internal_error("a row index that is not an integer expression of loop variables");
  KStmt *s = k_set(k, parent, row->var, value);
  s->index = index;
  return s;
}

KStmt *k_store(Kernel *k, KStmt *parent, int buf, KExpr *index, KExpr *value, bool accumulate) {
  KStmt *s = append(k, parent, KS_STORE);
  s->buf = buf;
  s->index = index;
  s->value = value;
  s->accumulate = accumulate;
  return s;
}

static KExpr *expr(Kernel *k, KExprKind kind) {
  KExpr *e = kalloc(k, sizeof *e);
  e->kind = kind;
  return e;
}

KExpr *k_const(Kernel *k, double f) {
  KExpr *e = expr(k, KE_CONST);
  e->f = f;
  return e;
}

KExpr *k_iconst(Kernel *k, int64_t i) {
  KExpr *e = expr(k, KE_ICONST);
  e->i = i;
  e->is_int = true;
  return e;
}

KExpr *k_index(Kernel *k, int var) {
  KExpr *e = expr(k, KE_INDEX);
  e->var = var;
  e->is_int = true;
  return e;
}

KExpr *k_localv(Kernel *k, int local) {
  KExpr *e = expr(k, KE_LOCAL);
  e->var = local;
  return e;
}

KExpr *k_row_at(Kernel *k, const KStmt *row, KExpr *index) {
  if (!is_index_of_vars(index)) diag_internal_error("a row index that is not an integer expression of loop variables");
  KExpr *e = k_localv(k, row->var);
  e->i = row->extent;
  e->a = index;
  return e;
}

KExpr *k_load(Kernel *k, int buf, KExpr *index, bool is_int) {
  KExpr *e = expr(k, KE_LOAD);
  e->buf = buf;
  e->a = index;
  e->is_int = is_int;
  return e;
}

KExpr *k_unary(Kernel *k, KUnaryOp op, KExpr *a) {
  KExpr *e = expr(k, KE_UNARY);
  e->op = op;
  e->a = a;
  return e;
}

KExpr *k_binary(Kernel *k, KBinaryOp op, KExpr *a, KExpr *b) {
  KExpr *e = expr(k, KE_BINARY);
  e->op = op;
  e->a = a;
  e->b = b;
  e->is_int = a->is_int && b->is_int;
  return e;
}

KExpr *k_select(Kernel *k, KExpr *cond, KExpr *a, KExpr *b) {
  KExpr *e = expr(k, KE_SELECT);
  e->a = cond;
  e->b = a;
  e->c = b;
  e->is_int = a->is_int && b->is_int; /* a choice between two indices is an index */
  return e;
}

KExpr *k_eq(Kernel *k, KExpr *a, KExpr *b) {
  KExpr *e = expr(k, KE_EQ);
  e->a = a;
  e->b = b;
  return e;
}

KExpr *k_to_float(Kernel *k, KExpr *a) {
  KExpr *e = expr(k, KE_TO_FLOAT);
  e->a = a;
  return e;
}

KExpr *k_random(Kernel *k, int key_buf, int64_t stream, KExpr *counter) {
  KExpr *e = expr(k, KE_RANDOM);
  e->buf = key_buf;
  e->i = stream;
  e->a = counter;
  return e;
}

KExpr *k_iadd(Kernel *k, KExpr *a, KExpr *b) {
  if (a->kind == KE_ICONST && a->i == 0) return b;
  if (b->kind == KE_ICONST && b->i == 0) return a;
  if (a->kind == KE_ICONST && b->kind == KE_ICONST) return k_iconst(k, a->i + b->i);
  return k_binary(k, KB_ADD, a, b);
}

KExpr *k_imul(Kernel *k, KExpr *a, int64_t c) {
  if (c == 0) return k_iconst(k, 0);
  if (c == 1) return a;
  if (a->kind == KE_ICONST) return k_iconst(k, a->i * c);
  return k_binary(k, KB_MUL, a, k_iconst(k, c));
}

static bool reads_local(const KExpr *e, int local) {
  return e && ((e->kind == KE_LOCAL && e->var == local) || reads_local(e->a, local) ||
               reads_local(e->b, local) || reads_local(e->c, local));
}

bool kstmt_is_reduction(const KStmt *loop, KBinaryOp *op, int *local) {
  if (loop->kind != KS_FOR || loop->nbody != 1 || loop->body[0]->kind != KS_SET) return false;
  const KStmt *set = loop->body[0];
  const KExpr *v = set->value;
  if (set->index || v->kind != KE_BINARY || (v->op != KB_ADD && v->op != KB_MAX && v->op != KB_MIN)) return false;
  if (v->a->kind != KE_LOCAL || v->a->a || v->a->var != set->var || reads_local(v->b, set->var)) return false;
  *op = (KBinaryOp)v->op;
  *local = set->var;
  return true;
}

bool kstmt_lane_split(const KStmt *loop, KLaneSplit *split) {
  if (loop->extent < K_LANES || !kstmt_is_reduction(loop, &split->op, &split->local)) return false;
  split->full = loop->extent / K_LANES * K_LANES;
  split->extent = loop->extent;
  split->limit = loop->limit;
  return true;
}

/* ---- the buffers a kernel touches ----
 * A kernel touches a handful of buffers: a short list, not a flag per graph
 * node (scanning every node for every kernel made emit quadratic: 10,000
 * blocks took 17 s). */

typedef struct {
  int *ids;
  int n, cap;
} BufList;

static void mark_buf(BufList *l, int buf) {
  for (int i = 0; i < l->n; i++)
    if (l->ids[i] == buf) return;
  VEC_PUSH(l->ids, l->n, l->cap, buf);
}

static void mark_expr(const KExpr *e, BufList *used) {
  if (!e) return;
  if (e->kind == KE_LOAD || e->kind == KE_RANDOM) mark_buf(used, e->buf);
  mark_expr(e->a, used);
  mark_expr(e->b, used);
  mark_expr(e->c, used);
}

static void mark_stmts(KStmt *const *body, int n, BufList *used) {
  for (int i = 0; i < n; i++) {
    const KStmt *s = body[i];
    if (s->kind == KS_FOR) mark_stmts(s->body, s->nbody, used); /* a limit reads no buffer */
    if (s->kind == KS_STORE) mark_buf(used, s->buf);
    mark_expr(s->index, used);
    mark_expr(s->value, used);
  }
}

/* Loop variable var read as 0 in e. */
static void zero_var(KExpr *e, int var) {
  if (!e) return;
  if (e->kind == KE_INDEX && e->var == var) *e = (KExpr){.kind = KE_ICONST, .i = 0};
  zero_var(e->a, var), zero_var(e->b, var), zero_var(e->c, var);
}

static void zero_var_in(KStmt *const *body, int n, int var) {
  for (int i = 0; i < n; i++) {
    const KStmt *s = body[i];
    zero_var(s->limit, var), zero_var(s->index, var), zero_var(s->value, var);
    zero_var_in(s->body, s->nbody, var);
  }
}

void kernel_drop_unit_loops(Kernel *k) {
  for (int i = 0; i < k->nbody; i++) {
    KStmt *s = k->body[i];
    while (s->kind == KS_FOR && s->extent == 1 && !s->limit && s->nbody == 1 && s->body[0]->kind == KS_FOR) {
      zero_var_in(s->body, s->nbody, s->var);
      KStmt *inner = s->body[0];
      free(s->body); /* the statement itself is the kernel's pool's */
      s = inner;
    }
    k->body[i] = s;
  }
}

void kernel_prepare(const Graph *g, Kernel *k) {
  kernel_drop_unit_loops(k);
  kernel_mark_parallel(k);
  kernel_mark_by_ranges(g, k);
}

bool kernel_stmts_store(KStmt *const *body, int n, int buf) {
  for (int i = 0; i < n; i++) {
    const KStmt *s = body[i];
    if ((s->kind == KS_FOR && kernel_stmts_store(s->body, s->nbody, buf)) || (s->kind == KS_STORE && s->buf == buf))
      return true;
  }
  return false;
}

static int compare_ints(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

int kernel_stmt_buffers(KStmt *const *body, int n, int **ids) {
  BufList used = {0};
  mark_stmts(body, n, &used);
  if (used.n > 1) qsort(used.ids, (size_t)used.n, sizeof *used.ids, compare_ints);
  *ids = used.ids;
  return used.n;
}

/* ---- math calls and random draws ---- */

static bool is_math_call(const KExpr *e) {
  return e->kind == KE_UNARY && (e->op == KU_EXP || e->op == KU_LOG || e->op == KU_TANH || e->op == KU_ERF);
}

static bool is_random_draw(const KExpr *e) { return e->kind == KE_RANDOM; }

static double expr_count(const KExpr *e, bool (*counted)(const KExpr *)) {
  if (!e) return 0;
  return counted(e) + expr_count(e->a, counted) + expr_count(e->b, counted) + expr_count(e->c, counted);
}

/* Evaluations of the expressions `counted` picks in the statements' values;
 * a bounded loop counts its extent: the most it runs. */
static double stmts_count(KStmt *const *body, int n, bool (*counted)(const KExpr *)) {
  double count = 0;
  for (int i = 0; i < n; i++) {
    const KStmt *s = body[i];
    count += s->kind == KS_FOR ? (double)s->extent * stmts_count(s->body, s->nbody, counted)
                               : expr_count(s->value, counted);
  }
  return count;
}

double kernel_math_calls(const Kernel *k) { return k ? stmts_count(k->body, k->nbody, is_math_call) : 0; }

double kernel_random_draws(const Kernel *k) { return k ? stmts_count(k->body, k->nbody, is_random_draw) : 0; }

/* ---- window accesses ---- */

typedef struct {
  const KExpr **loads;
  int n, cap;
} LoadSet;

/* The loads of e not yet in `seen`, added to it. */
static double new_loads(const KExpr *e, LoadSet *seen) {
  if (!e) return 0;
  double count = new_loads(e->a, seen) + new_loads(e->b, seen) + new_loads(e->c, seen);
  bool row_read = e->kind == KE_LOCAL && e->a; /* an access to a row in the cache */
  if (e->kind != KE_LOAD && !row_read) return count;
  for (int i = 0; i < seen->n; i++)
    if (seen->loads[i] == e) return count;
  VEC_PUSH(seen->loads, seen->n, seen->cap, e);
  return count + 1;
}

/* Accesses of one run of body: its statements' distinct loads and its
 * stores, and its loops' at their extents. */
static double body_accesses(KStmt *const *body, int n) {
  LoadSet seen = {0};
  double count = 0;
  for (int i = 0; i < n; i++) {
    const KStmt *s = body[i];
    if (s->kind == KS_FOR) count += (double)s->extent * body_accesses(s->body, s->nbody);
    else count += new_loads(s->index, &seen) + new_loads(s->value, &seen) + (s->kind == KS_STORE || s->index);
  }
  free(seen.loads);
  return count;
}

/* Adds the rows of windows in body, run `times` times, to w: short rows of
 * a fixed extent (a bounded row is a causal softmax's columns, long rows
 * that vectorize). */
static void add_short_rows(KStmt *const *body, int n, double times, ShortRowWork *w) {
  for (int i = 0; i < n; i++) {
    const KStmt *s = body[i];
    if (s->kind == KS_LOCAL && s->extent) w->scratch = true;
    if (s->kind != KS_FOR) continue;
    if (s->short_row && !s->limit) {
      w->accesses += times * (double)s->extent * body_accesses(s->body, s->nbody);
      w->runs += times;
    } else {
      add_short_rows(s->body, s->nbody, times * (double)s->extent, w);
    }
  }
}

ShortRowWork kernel_short_row_work(const Kernel *k) {
  ShortRowWork w = {0};
  if (k) add_short_rows(k->body, k->nbody, 1, &w);
  return w;
}
