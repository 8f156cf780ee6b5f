/* parallel.c — which top-level loops of a kernel may run on several threads
 * (kernel_mark_parallel, ir.h). The proof is from the loop nest alone: the
 * loop's iterations share no local, and for every buffer the loop stores to,
 * each iteration's stores and loads stay inside a slab of that buffer that no
 * other iteration touches. Anything the analysis cannot read as an affine
 * index (an index loaded from memory, as a scatter through ids) keeps the
 * loop sequential — unless it is a loaded row number times the row's width
 * plus an affine column inside the row (embedding_grad in column blocks):
 * then the columns are what must be disjoint. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

/* An index as konst + sum of coef[var] * var; ok false when it is not one
 * (a load, a product of two variables, an overflow). With a modulus M > 0 it
 * is X * M + that, for an integer X read from memory (a row picked by id, as
 * embedding_grad's scatter: ids[r] * D + d): the index's residue modulo M is
 * known although the index is not. */
typedef struct {
  bool ok;
  bool loaded; /* a value loaded from memory: no form, but X in X * M */
  int64_t konst, modulus;
  int64_t *coef; /* n_vars entries */
} Affine;

static Affine affine_new(const Kernel *k) {
  return (Affine){.ok = true, .coef = xcalloc((size_t)k->n_vars + 1, sizeof(int64_t))};
}

static bool affine_is_constant(const Affine *a, int n_vars) {
  for (int v = 0; v < n_vars; v++)
    if (a->coef[v])
      return false;
  return true;
}

/* a *= c */
static void affine_scale(Affine *a, int64_t c, int n_vars) {
  a->ok = a->ok && !__builtin_mul_overflow(a->konst, c, &a->konst);
  for (int v = 0; v < n_vars; v++)
    a->ok = a->ok && !__builtin_mul_overflow(a->coef[v], c, &a->coef[v]);
}

/* a += sign * b */
static void affine_add(Affine *a, const Affine *b, int64_t sign, int n_vars) {
  a->ok = a->ok && b->ok && !__builtin_add_overflow(a->konst, sign * b->konst, &a->konst);
  for (int v = 0; v < n_vars; v++)
    a->ok = a->ok && !__builtin_add_overflow(a->coef[v], sign * b->coef[v], &a->coef[v]);
}

static bool is_constant(const Affine *a, int n_vars) {
  return a->ok && !a->modulus && affine_is_constant(a, n_vars);
}

/* a * b, where one of them is a constant; X * M when the other is a loaded
 * value X and the constant M is positive. */
static void affine_mul(Affine *a, Affine *b, int n_vars) {
  if (is_constant(a, n_vars)) { /* c * b */
    Affine t = *a;
    *a = *b, *b = t;
  }
  if (!is_constant(b, n_vars)) {
    a->ok = false; /* a product of two variables */
  } else if (a->loaded && b->konst > 0) {
    *a = (Affine){.ok = true, .modulus = b->konst, .coef = a->coef};
    memset(a->coef, 0, (size_t)n_vars * sizeof *a->coef);
  } else {
    a->ok = a->ok && !a->modulus; /* (X * M) * c: not followed */
    affine_scale(a, b->konst, n_vars);
  }
}

/* The affine form of an index expression (the caller frees .coef). */
static Affine affine_of(const Kernel *k, const KExpr *e) {
  Affine r = affine_new(k);
  if (e->kind == KE_ICONST) {
    r.konst = e->i;
  } else if (e->kind == KE_INDEX) {
    r.coef[e->var] = 1;
  } else if (e->kind == KE_BINARY && (e->op == KB_ADD || e->op == KB_SUB || e->op == KB_MUL)) {
    Affine a = affine_of(k, e->a), b = affine_of(k, e->b);
    if (e->op == KB_MUL) {
      affine_mul(&a, &b, k->n_vars);
    } else {
      /* X * M plus an affine form keeps M; two of them are not followed */
      a.ok = a.ok && !(a.modulus && b.modulus);
      if (b.modulus) a.modulus = b.modulus;
      affine_add(&a, &b, e->op == KB_ADD ? 1 : -1, k->n_vars);
    }
    free(b.coef);
    free(r.coef);
    return a;
  } else {
    r.ok = false; /* a load (a scatter, a gather by id), or not an integer */
    r.loaded = e->kind == KE_LOAD;
  }
  return r;
}

bool kexpr_affine(const Kernel *k, const KExpr *e, int64_t *coef, int64_t *konst) {
  Affine a = affine_of(k, e);
  memcpy(coef, a.coef, (size_t)k->n_vars * sizeof *coef);
  *konst = a.konst;
  free(a.coef);
  return a.ok && !a.modulus;
}

/* One store or load of a buffer inside the loop: its coefficient of the
 * loop's variable and the range [lo, hi] of the rest over the inner loops;
 * with a modulus M, the index is some X * M plus that. A grid's fixed
 * variables (kernel_grid) are left out: each adds the same to every access
 * of a buffer the loop stores to (its own test required one coefficient
 * c > 0 for all of them), and the first grid loop's test already bounded
 * every residue modulo M with all variables over their range. */
typedef struct {
  int buf;
  bool store, affine;
  int64_t c, lo, hi, modulus;
} Access;

typedef struct {
  const Kernel *k;
  int var;           /* the loop under analysis */
  int64_t trips;     /* its extent */
  int64_t *extent;   /* per loop variable inside it; 0: not inside */
  int64_t *fixed;    /* per loop variable: a grid variable's extent (kernel_grid); 0: none */
  bool *own_local;   /* per local: declared inside it */
  bool *outer_local; /* per local: a grid chain's, declared above it: read, never set */
  bool shares_local; /* reads or sets a local declared outside it */
  Access *acc;
  int n_acc, cap_acc;
} Scan;

/* Widens [*lo, *hi] by coef[v] * v for each variable v with a coefficient
 * over [0, extent[v]), but `skip` and those fixed (fixed[v] != 0; fixed may
 * be NULL); false for a variable of no loop (extent 0) or on an overflow. */
static bool add_spans(const int64_t *coef, int n_vars, const int64_t *extent,
                      const int64_t *fixed, int skip, int64_t *lo, int64_t *hi) {
  for (int v = 0; v < n_vars; v++) {
    if (v == skip || !coef[v] || (fixed && fixed[v])) continue;
    int64_t span;
    if (!extent[v] || __builtin_mul_overflow(coef[v], extent[v] - 1, &span)) return false;
    if (span > 0 ? __builtin_add_overflow(*hi, span, hi) : __builtin_add_overflow(*lo, span, lo))
      return false;
  }
  return true;
}

bool kexpr_range(const Kernel *k, const KExpr *e, const int64_t *extent, int64_t *lo,
                 int64_t *hi) {
  Affine f = affine_of(k, e);
  *lo = *hi = f.konst;
  bool ok = f.ok && !f.modulus && add_spans(f.coef, k->n_vars, extent, NULL, -1, lo, hi);
  free(f.coef);
  return ok;
}

static void scan_access(Scan *s, int buf, const KExpr *index, bool store) {
  Access a = {.buf = buf, .store = store};
  Affine f = affine_of(s->k, index);
  a.modulus = f.modulus;
  a.c = f.coef[s->var];
  a.lo = a.hi = f.konst;
  /* (a variable of no loop inside this one cannot happen at the top level) */
  a.affine = f.ok && add_spans(f.coef, s->k->n_vars, s->extent, s->fixed, s->var, &a.lo, &a.hi);
  free(f.coef);
  VEC_PUSH(s->acc, s->n_acc, s->cap_acc, a);
}

static void scan_expr(Scan *s, const KExpr *e) {
  if (!e)
    return;
  if (e->kind == KE_LOCAL && !s->own_local[e->var] && !(s->outer_local && s->outer_local[e->var]))
    s->shares_local = true;
  if (e->kind == KE_LOAD)
    scan_access(s, e->buf, e->a, false);
  if (e->kind == KE_RANDOM) { /* reads its key: never a stored buffer, else not affine */
    Access key = {.buf = e->buf};
    VEC_PUSH(s->acc, s->n_acc, s->cap_acc, key);
  }
  scan_expr(s, e->a);
  scan_expr(s, e->b);
  scan_expr(s, e->c);
}

/* First pass: the loops and locals declared inside. A bounded loop's
 * variable is taken over its whole extent, which covers its limit's every
 * value (ir.h), so a slab proved for the extent holds for the limit. */
static void scan_decls(Scan *s, KStmt **body, int n) {
  for (int i = 0; i < n; i++) {
    const KStmt *st = body[i];
    if (st->kind == KS_FOR) {
      s->extent[st->var] = st->extent;
      scan_decls(s, st->body, st->nbody);
    }
    if (st->kind == KS_LOCAL)
      s->own_local[st->var] = true;
  }
}

static void scan_stmts(Scan *s, KStmt **body, int n) {
  for (int i = 0; i < n; i++) {
    const KStmt *st = body[i];
    if (st->kind == KS_FOR)
      scan_stmts(s, st->body, st->nbody);
    if (st->kind == KS_SET && !s->own_local[st->var])
      s->shares_local = true;
    if (st->kind == KS_STORE)
      scan_access(s, st->buf, st->index, true);
    scan_expr(s, st->index);
    scan_expr(s, st->value);
  }
}

/* Whether the slabs [c*i + lo, c*i + lo + c) of all iterations i lie in
 * [0, m): then, as residues modulo m, they are still disjoint. */
static bool slabs_within(const Scan *s, int64_t c, int64_t lo, int64_t m) {
  int64_t end;
  return lo >= 0 && !__builtin_mul_overflow(c, s->trips, &end) &&
         !__builtin_add_overflow(end, lo, &end) && end <= m;
}

/* Every access to a buffer the loop stores to lies in the slab
 * [c*i + lo, c*i + lo + c) of iteration i, for one c > 0 and one lo — or,
 * all with one modulus M (X * M + ...), in that slab's residues modulo M,
 * the slabs of all iterations within [0, M). */
static bool slabs_disjoint(const Scan *s) {
  for (int i = 0; i < s->n_acc; i++) {
    const Access *st = &s->acc[i];
    if (!st->store)
      continue;
    int64_t lo = st->lo, hi = st->hi;
    for (int j = 0; j < s->n_acc; j++) {
      const Access *a = &s->acc[j];
      if (a->buf != st->buf)
        continue;
      if (!a->affine || a->c != st->c || a->c <= 0 || a->modulus != st->modulus)
        return false;
      if (a->lo < lo)
        lo = a->lo;
      if (a->hi > hi)
        hi = a->hi;
    }
    if (hi - lo >= st->c || (st->modulus && !slabs_within(s, st->c, lo, st->modulus)))
      return false;
  }
  return true;
}

/* Chain loop j of g as a grid loop, given g's grid loops so far: its
 * iterations touch disjoint slabs with those variables fixed and the other
 * chain loops around it over their range; the chain's locals above it are
 * read by every thread (their loads are scanned too) and set by none. */
static bool grid_loop_ok(const Kernel *k, const KGrid *g, int j) {
  const KStmt *loop = g->loop[j];
  Scan s = {.k = k, .var = loop->var, .trips = loop->extent};
  s.extent = xcalloc((size_t)k->n_vars + 1, sizeof(int64_t));
  s.fixed = xcalloc((size_t)k->n_vars + 1, sizeof(int64_t));
  s.own_local = xcalloc((size_t)k->n_locals + 1, sizeof(bool));
  s.outer_local = xcalloc((size_t)k->n_locals + 1, sizeof(bool));
  for (int c = 0; c < g->n; c++)
    if (g->grid[c]) s.fixed[g->loop[c]->var] = g->loop[c]->extent;
  for (int c = 0; c < j; c++) {
    s.extent[g->loop[c]->var] = g->loop[c]->extent;
    for (int i = 0; i < g->loop[c]->nbody; i++) {
      const KStmt *st = g->loop[c]->body[i];
      if (st->kind != KS_LOCAL) continue;
      scan_expr(&s, st->value);
      s.outer_local[st->var] = true;
    }
  }
  scan_decls(&s, loop->body, loop->nbody);
  scan_stmts(&s, loop->body, loop->nbody);
  bool ok = !s.shares_local && slabs_disjoint(&s);
  free(s.extent);
  free(s.fixed);
  free(s.own_local);
  free(s.outer_local);
  free(s.acc);
  return ok;
}

/* The loop a chain loop's body continues the chain with: its one loop when
 * everything else there declares locals; NULL when the chain ends. */
static const KStmt *chain_next(const KStmt *loop) {
  const KStmt *next = NULL;
  for (int i = 0; i < loop->nbody; i++) {
    const KStmt *st = loop->body[i];
    if (st->kind == KS_FOR && !next)
      next = st;
    else if (st->kind != KS_LOCAL)
      return NULL;
  }
  return next;
}

KGrid kernel_grid(const Kernel *k, const KStmt *top) {
  KGrid g = {.threads = 1};
  KBinaryOp op;
  int local;
  for (const KStmt *s = top; s && g.n < K_CHAIN_MAX; s = chain_next(s)) {
    if (s->kind != KS_FOR || kstmt_is_reduction(s, &op, &local)) break;
    g.loop[g.n++] = s;
  }
  for (bool added = true; added;) {
    added = false;
    for (int j = 0; j < g.n; j++) {
      int64_t threads;
      /* a bounded loop's threads would depend on the other grid variables */
      if (g.grid[j] || g.loop[j]->limit || g.loop[j]->extent < 1 ||
          __builtin_mul_overflow(g.threads, g.loop[j]->extent, &threads) || !grid_loop_ok(k, &g, j))
        continue;
      g.grid[j] = added = true;
      g.threads = threads;
    }
  }
  return g;
}

/* A top-level loop is parallel when it is a grid loop as its chain's only
 * loop. */
void kernel_mark_parallel(Kernel *k) {
  for (int i = 0; i < k->nbody; i++)
    if (k->body[i]->kind == KS_FOR)
      k->body[i]->parallel = grid_loop_ok(k, &(KGrid){.n = 1, .loop = {k->body[i]}}, 0);
}

/* Innermost statements a loop runs: the work it would split among threads. */
static double loop_work(const KStmt *s) {
  double per_iteration = 0;
  for (int i = 0; i < s->nbody; i++)
    per_iteration += s->body[i]->kind == KS_FOR ? loop_work(s->body[i]) : 1;
  return (double)s->extent * per_iteration;
}

static int64_t parallel_chunk(const KStmt *s) {
  for (int i = 0; i < s->nbody; i++)
    if (s->body[i]->kind == KS_FOR) return 1;
  return s->extent % 64 == 0 ? 64 : s->extent % 16 == 0 ? 16 : 1;
}

bool kstmt_parallel_loop(const KStmt *s, KParallelLoop *pl) {
  if (s->kind != KS_FOR || !s->parallel || s->extent <= 1) return false;
  pl->chunk = parallel_chunk(s);
  pl->n_chunks = s->extent / pl->chunk;
  double work = loop_work(s); /* a whole number of statements */
  pl->work = work < 9e18 ? (int64_t)work : (int64_t)9e18;
  return true;
}
