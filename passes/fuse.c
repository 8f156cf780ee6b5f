/* fuse.c — pointwise kernels computed inside the one kernel that reads them.
 *
 * A step P fuses into a step C when, proved from the schedule and the loop
 * nests (never from op names):
 *   - C is P's only reader in the whole program (forward and backward,
 *     recomputes included), and reads P once, as itself, not through a view;
 *     P is not the loss or the prediction (nor their storage: the runtime
 *     reads those) and adds into no parameter's gradient slot;
 *   - P's kernel is a perfect loop nest `for i1 < e1: ... for id < ed:
 *     [float locals;] P[row-major index of i] = e(i)` over P's N elements
 *     (P is f32): every element written once, at iteration i, by an
 *     expression that loads neither P nor a gradient slot (whose value other
 *     kernels change between P's step and C's);
 *   - C's kernel is such a nest over N elements too, `C[row-major j] (+)=
 *     e'(j)`, whose loads of P (a GELU reads its input twice) are at the
 *     row-major index of its own variables j; and the nests have the same extents, or P's is one flat
 *     loop (i = C's index of P), or C's is (then rebuilt with P's extents
 *     around the same statements: the same iterations in the same order).
 * Iteration j of C then reads exactly the element that iteration j of P
 * wrote (the same row-major position), so C computes it itself: P's
 * statements with P's variables renamed, P's value in a local
 * `float t = e(j);`, and t wherever C loaded P[j]. Row-major indices are read
 * from the loop nest as affine forms (kexpr_affine), never from op names. Every float is the same
 * operation on the same operands as before; only the store and the load of
 * P[j] are gone. P's value stays a statement of its own, never an operand
 * inside one of C's expressions, so a C compiler that contracts a*b + c into
 * an FMA within an expression (clang's default -ffp-contract=on) sees the
 * expressions it saw unfused. The memory plan gives P no storage and keeps
 * P's inputs alive until C's step; nothing else writes them meanwhile (every
 * value but a gradient slot is written once, by its own step).
 *
 * A value read by several steps (a GELU's input, which its gradient reads
 * again; a bias add a GEMM reads) fuses the same way into its first reader,
 * C, which then also stores it: P[j] = t, for the readers after it (stored
 * by C: Program.stored_by). The conditions are those above but the one
 * reader: C is the first step to read P, in the same pass (forward or
 * backward) as P. Only P's load is gone, and P's own pass over memory: a
 * bias add and the GELU after it read the GEMM's output once and write both
 * values in one loop. P's storage begins at C's step.
 *
 * Steps are visited in schedule order, so a chain a -> b -> c (a, b each
 * read only by the next) ends as one kernel. */
#include "internal.h"

#include <stdlib.h>

/* A kernel that is a perfect loop nest `for v1 < e1: ... for vd < ed:
 * [float locals;] buf[row-major index of v1..vd] (+)= value` over e1*...*ed
 * elements: every element of buf written once, at iteration (v1..vd). */
typedef struct {
  KStmt *loops[IR_MAX_RANK]; /* outermost first */
  int depth;
} Nest;

static KStmt *innermost(const Nest *n) { return n->loops[n->depth - 1]; }
static KStmt *store_of(const Nest *n) { return innermost(n)->body[innermost(n)->nbody - 1]; }

/* Whether e is sum of v_d * stride_d, the strides row-major over n's extents
 * (a variable of extent 1 may have any coefficient: it is always 0). */
static bool is_row_major(const Kernel *k, const Nest *n, const KExpr *e) {
  int64_t *coef = xcalloc((size_t)k->n_vars + 1, sizeof *coef), konst, stride = 1;
  bool ok = kexpr_affine(k, e, coef, &konst) && konst == 0;
  for (int d = n->depth - 1; d >= 0 && ok; d--) {
    ok = n->loops[d]->extent == 1 || coef[n->loops[d]->var] == stride;
    stride *= n->loops[d]->extent;
  }
  free(coef);
  return ok;
}

static bool pointwise_nest(const Kernel *k, int buf, int64_t numel, Nest *n) {
  n->depth = 0;
  if (!k || k->nbody != 1 || k->body[0]->kind != KS_FOR) return false;
  int64_t count = 1;
  for (KStmt *s = k->body[0];; s = s->body[0]) {
    /* a bounded loop leaves elements out: no nest over all of them */
    if (n->depth == IR_MAX_RANK || s->limit) return false;
    n->loops[n->depth++] = s;
    count *= s->extent;
    if (s->nbody != 1 || s->body[0]->kind != KS_FOR) break;
  }
  const KStmt *inner = innermost(n);
  if (count != numel || inner->nbody < 1) return false;
  for (int i = 0; i + 1 < inner->nbody; i++)
    if (inner->body[i]->kind != KS_LOCAL || inner->body[i]->extent) return false; /* scalars, no rows */
  const KStmt *store = store_of(n);
  return store->kind == KS_STORE && store->buf == buf && is_row_major(k, n, store->index);
}

static bool same_extents(const Nest *a, const Nest *b) {
  if (a->depth != b->depth) return false;
  for (int d = 0; d < a->depth; d++)
    if (a->loops[d]->extent != b->loops[d]->extent) return false;
  return true;
}

/* The loads C may make of its producer's value: a GELU reads its input
 * twice, a product with itself as often. */
enum { MAX_LOADS = 4 };
typedef struct {
  KExpr *at[MAX_LOADS];
  int n; /* how many there are, MAX_LOADS + 1 for more */
} Loads;

/* Adds the loads of buffer buf in e to l. */
static void find_loads(KExpr *e, int buf, Loads *l) {
  if (!e || l->n > MAX_LOADS) return;
  if (e->kind == KE_LOAD && e->buf == buf) {
    if (l->n < MAX_LOADS) l->at[l->n] = e;
    l->n++;
  }
  find_loads(e->a, buf, l), find_loads(e->b, buf, l), find_loads(e->c, buf, l);
}

static Loads loads_in(const KStmt *loop, int buf) {
  Loads l = {.n = 0};
  for (int i = 0; i < loop->nbody; i++) find_loads(loop->body[i]->value, buf, &l), find_loads(loop->body[i]->index, buf, &l);
  return l;
}

/* A load of P itself or of a gradient slot, which P may not move later. */
static bool loads_unstable(const Program *p, const KExpr *e, int self) {
  if (!e) return false;
  if (e->kind == KE_LOAD &&
      (e->buf == self || p->g->nodes[p->storage_root[e->buf]].grad_of_param >= 0))
    return true;
  return loads_unstable(p, e->a, self) || loads_unstable(p, e->b, self) ||
         loads_unstable(p, e->c, self);
}

/* e rebuilt in k: loop variable v becomes vars[v], local l becomes locals[l]. */
static KExpr *clone(Kernel *k, const KExpr *e, KExpr *const *vars, const int *locals) {
  switch (e->kind) {
  case KE_CONST: return k_const(k, e->f);
  case KE_ICONST: return k_iconst(k, e->i);
  case KE_INDEX: return vars[e->var];
  case KE_LOCAL: /* a pointwise producer declares no rows (pointwise_nest) */
    if (e->a) diag_internal_error("a row read in a fused producer");
    return k_localv(k, locals[e->var]);
  case KE_LOAD: return k_load(k, e->buf, clone(k, e->a, vars, locals), e->is_int);
  case KE_UNARY: return k_unary(k, (KUnaryOp)e->op, clone(k, e->a, vars, locals));
  case KE_BINARY:
    return k_binary(k, (KBinaryOp)e->op, clone(k, e->a, vars, locals),
                    clone(k, e->b, vars, locals));
  case KE_SELECT:
    return k_select(k, clone(k, e->a, vars, locals), clone(k, e->b, vars, locals),
                    clone(k, e->c, vars, locals));
  case KE_EQ: return k_eq(k, clone(k, e->a, vars, locals), clone(k, e->b, vars, locals));
  case KE_TO_FLOAT: return k_to_float(k, clone(k, e->a, vars, locals));
  case KE_RANDOM: return k_random(k, e->buf, e->i, clone(k, e->a, vars, locals));
  }
  diag_internal_error("clone of an expression of unknown kind %d", (int)e->kind);
}

static void replace_var(KExpr *e, int var, const KExpr *with) {
  if (!e) return;
  if (e->kind == KE_INDEX && e->var == var) *e = *with;
  else replace_var(e->a, var, with), replace_var(e->b, var, with), replace_var(e->c, var, with);
}

/* C's one flat loop `for j < N` rebuilt as loops of P's extents around the
 * same statements, j replaced by the row-major index of the new variables:
 * the same iterations in the same order, so that P's variables map to C's. */
static void renest_like(Kernel *ck, Nest *cn, const Nest *pn) {
  KStmt *flat = cn->loops[0];
  ck->nbody = 0;
  KStmt *parent = NULL;
  KExpr *index = k_iconst(ck, 0);
  for (int d = 0; d < pn->depth; d++) {
    int v;
    parent = cn->loops[d] = k_for(ck, parent, pn->loops[d]->extent, &v);
    index = k_iadd(ck, k_imul(ck, index, pn->loops[d]->extent), k_index(ck, v));
  }
  cn->depth = pn->depth;
  parent->body = flat->body, parent->nbody = flat->nbody, parent->capbody = flat->capbody;
  flat->body = NULL, flat->nbody = flat->capbody = 0;
  for (int i = 0; i < parent->nbody; i++) {
    replace_var(parent->body[i]->value, flat->var, index);
    replace_var(parent->body[i]->index, flat->var, index);
  }
}

/* Puts P's statements before C's store and P's value where C loaded it
 * (and, when `stored`, into P's buffer at the same element); P's variables
 * become vars. */
static void inline_producer(const Kernel *pk, const Nest *pn, Kernel *ck, const Nest *cn,
                            const Loads *loads, KExpr *const *vars, bool stored) {
  KStmt *ploop = innermost(pn), *cloop = innermost(cn);
  KStmt *store = cloop->body[--cloop->nbody];
  int *locals = xmalloc(((size_t)pk->n_locals + 1) * sizeof *locals), value;
  for (int i = 0; i + 1 < ploop->nbody; i++) {
    const KStmt *s = ploop->body[i];
    k_local(ck, cloop, clone(ck, s->value, vars, locals), &locals[s->var]);
  }
  k_local(ck, cloop, clone(ck, store_of(pn)->value, vars, locals), &value);
  if (stored)
    k_store(ck, cloop, store_of(pn)->buf, clone(ck, store_of(pn)->index, vars, locals), k_localv(ck, value), false);
  free(locals);
  VEC_PUSH(cloop->body, cloop->nbody, cloop->capbody, store);
  for (int i = 0; i < loads->n; i++) *loads->at[i] = (KExpr){.kind = KE_LOCAL, .var = value};
}

/* Per node: its reading steps (a read through a view counts twice, so that
 * such a value never fuses into its one reader), the first and the last of
 * them; per step node, whether forward() runs it. */
typedef struct {
  int *count, *first, *last;
  bool *in_forward;
} Readers;

static Readers readers_of(const Program *p) {
  const Graph *g = p->g;
  Readers r = {xcalloc((size_t)g->n, sizeof(int)), xcalloc((size_t)g->n, sizeof(int)),
               xcalloc((size_t)g->n, sizeof(int)), xcalloc((size_t)g->n, sizeof(bool))};
  for (int s = 0; s < p->n_forward + p->n_backward; s++) {
    int id = s < p->n_forward ? p->forward[s] : p->backward[s - p->n_forward];
    const Node *n = &g->nodes[id];
    r.in_forward[id] = s < p->n_forward;
    for (int k = 0; k < n->nin; k++) {
      int root = p->storage_root[n->in[k]];
      if (!r.count[root]) r.first[root] = id;
      r.count[root] += root == n->in[k] ? 1 : 2;
      r.last[root] = id;
    }
  }
  return r;
}

static void readers_free(Readers *r) {
  free(r->count);
  free(r->first);
  free(r->last);
  free(r->in_forward);
}

/* Whether the runtime reads the value node id (after forward or backward). */
static bool read_by_runtime(const Program *p, int id) {
  const Graph *g = p->g;
  return id == p->storage_root[g->loss] ||
         (g->predict >= 0 && id == p->storage_root[g->predict]);
}

/* A fused kernel copies its producer's statements, so a chain of n fused
 * steps would copy O(n^2) of them (a 100,000-term `x + x + ...` timed out
 * the fuzzers): a producer of more statements than this is not fused, and
 * long chains fuse in pieces. */
enum { FUSE_MAX_STATEMENTS = 64 };

/* Fuses P into its reader C when the conditions above hold; `stored`: C
 * stores P too, for P's later readers. */
static bool try_fuse(Program *p, int P, int C, bool stored) {
  const Graph *g = p->g;
  const Node *pn = &g->nodes[P];
  if (pn->dtype != DT_F32 || pn->grad_of_param >= 0 || read_by_runtime(p, P)) return false;
  int64_t n = shape_numel(&pn->shape);
  Kernel *pk = p->kernels[P], *ck = p->kernels[C];
  Nest pnest, cnest;
  if (!pointwise_nest(pk, P, n, &pnest) || !pointwise_nest(ck, C, n, &cnest) ||
      store_of(&pnest)->accumulate || innermost(&pnest)->nbody > FUSE_MAX_STATEMENTS)
    return false;
  for (int i = 0; i < innermost(&pnest)->nbody; i++)
    if (loads_unstable(p, innermost(&pnest)->body[i]->value, P)) return false;
  Loads loads = loads_in(innermost(&cnest), P);
  if (loads.n < 1 || loads.n > MAX_LOADS) return false;
  for (int i = 0; i < loads.n; i++)
    if (!is_row_major(ck, &cnest, loads.at[i]->a)) return false;
  KExpr *load = loads.at[0];
  /* (an outer loop of one trip that renesting gives C, threads would not
   * split: kernel_drop_unit_loops removes it before the parallel pass) */
  bool renest = cnest.depth == 1 && pnest.depth > 1;
  if (!renest && !same_extents(&pnest, &cnest) && pnest.depth != 1) return false;
  if (renest) renest_like(ck, &cnest, &pnest);
  /* C's iteration reads the element P wrote at the iteration of the same
   * row-major position: P's variables are C's (same extents), or P's one
   * variable is that position, C's index of P. */
  KExpr **vars = xcalloc((size_t)pk->n_vars + 1, sizeof *vars);
  for (int d = 0; d < pnest.depth; d++)
    vars[pnest.loops[d]->var] = pnest.depth == 1 && !same_extents(&pnest, &cnest)
                                    ? load->a
                                    : k_index(ck, cnest.loops[d]->var);
  inline_producer(pk, &pnest, ck, &cnest, &loads, vars, stored);
  free(vars);
  return true;
}


static void drop_fused_steps(const Program *p, int *steps, int *n) {
  int kept = 0;
  for (int i = 0; i < *n; i++)
    if (fused_consumer(p, steps[i]) == steps[i]) steps[kept++] = steps[i];
  *n = kept;
}

static void drop_fused(Program *p) {
  drop_fused_steps(p, p->forward, &p->n_forward);
  drop_fused_steps(p, p->backward, &p->n_backward);
}

void program_fuse(Program *p, FuseScope scope) {
  Readers r = readers_of(p);
  for (int s = 0; s < p->n_forward + p->n_backward; s++) {
    int P = s < p->n_forward ? p->forward[s] : p->backward[s - p->n_forward];
    bool in_scope = scope >= FUSE_ALL || (scope == FUSE_FORWARD) == (s < p->n_forward);
    bool stored = r.count[P] > 1;
    if (scope == FUSE_NONE || !in_scope || !r.count[P] || (stored && scope != FUSE_ALL_STORED)) continue;
    int C = stored ? r.first[P] : r.last[P];
    if ((stored && r.in_forward[P] != r.in_forward[C]) || !try_fuse(p, P, C, stored)) continue;
    kernel_free(p->kernels[P]);
    p->kernels[P] = NULL;
    *(stored ? &p->stored_by[P] : &p->fused_into[P]) = C;
    p->n_fused++;
    p->n_stored += stored;
  }
  drop_fused(p);
  p->memory_planned = false;
  readers_free(&r);
}

int fused_consumer(const Program *p, int id) {
  for (;;) {
    if (p->fused_into[id] >= 0) id = p->fused_into[id];
    else if (p->stored_by[id] >= 0) id = p->stored_by[id];
    else return id;
  }
}

/* g's program to SCHEDULE with this fusion scope. */
static Program *fused_trial(const Graph *g, FuseScope scope) {
  Program *t = program_steps(g);
  program_lower_kernels(t);
  program_fuse(t, scope);
  program_plan_memory(t);
  return t;
}

static void program_swap(Program *a, Program *b) {
  Program t = *a;
  *a = *b;
  *b = t;
}

/* Whether some step of fused program p is a loop nest over its value read
 * by several steps, the first of them a loop nest in the same pass: a
 * value a stored fusion might take (try_fuse decides). */
static bool stored_candidates(const Program *p) {
  Readers r = readers_of(p);
  bool found = false;
  for (int s = 0; s < p->n_forward + p->n_backward && !found; s++) {
    int P = s < p->n_forward ? p->forward[s] : p->backward[s - p->n_forward];
    found = r.count[P] > 1 && p->kernels[P] && p->kernels[r.first[P]] && r.in_forward[P] == r.in_forward[r.first[P]];
  }
  readers_free(&r);
  return found;
}

/* The stored fusions on top of p's (all of them), kept when the arena is
 * no larger: a stored value's inputs stay alive while it and its reader's
 * value are written (a bias add's input, its value and the GELU's output
 * at one step), which a placement may or may not absorb (the issue-10 GPT:
 * 74 KB more; GPT-2 124M: none). */
static void fuse_stored_if_no_larger(Program *p) {
  if (!stored_candidates(p)) return; /* the planner's programs: mostly none, no trial */
  Program *t = fused_trial(p->g, FUSE_ALL_STORED);
  if (t->n_stored > 0 && t->arena_bytes <= p->arena_bytes) program_swap(p, t);
  program_free(t);
}

/* Fusion keeps a fused value's inputs alive until its reader runs, and
 * greedy placement is sensitive to what it places, so a fused program's
 * arena may come out larger (fashion_mlp: by 2%). The planner's peak must
 * hold for what is built, so p becomes the widest fusion of all,
 * forward-only, backward-only, none, whose arena is no larger than the
 * unfused one; then, fused all the way and unless `plain`, the same with
 * the stored fusions too where that arena is no larger again. p itself is
 * fused all the way first: that usually wins, and then no second program
 * is lowered but for the stored fusions. The planner's candidates (one
 * program each) are plain: the plan it picks is built with them, its
 * arena no larger for it. */
void program_fuse_widest(Program *p, bool plain) {
  if (p->g->train.no_fuse) return;
  program_plan_memory(p);
  uint64_t unfused = p->arena_bytes;
  program_fuse(p, FUSE_ALL);
  program_plan_memory(p);
  if (p->n_fused > 0 && p->arena_bytes <= unfused) {
    if (!plain) fuse_stored_if_no_larger(p);
    return;
  }
  FuseScope narrower[] = {FUSE_FORWARD, FUSE_BACKWARD, FUSE_NONE};
  for (size_t i = 0; i < sizeof narrower / sizeof narrower[0]; i++) {
    Program *t = fused_trial(p->g, narrower[i]);
    bool wins = narrower[i] == FUSE_NONE || (t->n_fused > 0 && t->arena_bytes <= unfused);
    if (wins) program_swap(p, t);
    program_free(t);
    if (wins) return;
  }
}
