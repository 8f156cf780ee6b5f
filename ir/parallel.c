/* parallel.c — which top-level loops of a kernel may run on several threads
 * (kernel_mark_parallel, ir.h). The proof is from the loop nest alone: the
 * loop's iterations share no local, and for every buffer the loop stores to,
 * each iteration's stores and loads stay inside a slab of that buffer that no
 * other iteration touches. Anything the analysis cannot read as an affine
 * index (an index loaded from memory, as embedding_grad's scatter) keeps the
 * loop sequential. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

/* An index as konst + sum of coef[var] * var; ok false when it is not one
 * (a load, a product of two variables, an overflow). */
typedef struct {
  bool ok;
  int64_t konst;
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

/* The affine form of an index expression (the caller frees .coef). */
static Affine affine_of(const Kernel *k, const KExpr *e) {
  Affine r = affine_new(k);
  if (e->kind == KE_ICONST) {
    r.konst = e->i;
  } else if (e->kind == KE_INDEX) {
    r.coef[e->var] = 1;
  } else if (e->kind == KE_BINARY && (e->op == KB_ADD || e->op == KB_SUB || e->op == KB_MUL)) {
    Affine a = affine_of(k, e->a), b = affine_of(k, e->b);
    if (e->op != KB_MUL) {
      affine_add(&a, &b, e->op == KB_ADD ? 1 : -1, k->n_vars);
    } else if (affine_is_constant(&a, k->n_vars)) { /* c * b */
      Affine t = a;
      a = b, b = t;
      affine_scale(&a, b.konst, k->n_vars);
      a.ok = a.ok && b.ok;
    } else {
      a.ok = a.ok && b.ok && affine_is_constant(&b, k->n_vars); /* a * c, else not affine */
      affine_scale(&a, b.konst, k->n_vars);
    }
    free(b.coef);
    free(r.coef);
    return a;
  } else {
    r.ok = false; /* a load (a scatter, a gather by id), or not an integer */
  }
  return r;
}

bool kexpr_affine(const Kernel *k, const KExpr *e, int64_t *coef, int64_t *konst) {
  Affine a = affine_of(k, e);
  memcpy(coef, a.coef, (size_t)k->n_vars * sizeof *coef);
  *konst = a.konst;
  free(a.coef);
  return a.ok;
}

/* One store or load of a buffer inside the loop: its coefficient of the
 * loop's variable and the range [lo, hi] of the rest over the inner loops. */
typedef struct {
  int buf;
  bool store, affine;
  int64_t c, lo, hi;
} Access;

typedef struct {
  const Kernel *k;
  int var;           /* the loop under analysis */
  int64_t *extent;   /* per loop variable inside it; 0: not inside */
  bool *own_local;   /* per local: declared inside it */
  bool shares_local; /* reads or sets a local declared outside it */
  Access *acc;
  int n_acc, cap_acc;
} Scan;

static void scan_access(Scan *s, int buf, const KExpr *index, bool store) {
  Access a = {.buf = buf, .store = store};
  Affine f = affine_of(s->k, index);
  a.affine = f.ok;
  a.c = f.coef[s->var];
  a.lo = a.hi = f.konst;
  for (int v = 0; v < s->k->n_vars && a.affine; v++) {
    if (v == s->var || !f.coef[v])
      continue;
    int64_t span;
    /* a variable of no loop inside this one (cannot happen at the top level) */
    if (!s->extent[v] || __builtin_mul_overflow(f.coef[v], s->extent[v] - 1, &span))
      a.affine = false;
    else if (span > 0)
      a.affine = !__builtin_add_overflow(a.hi, span, &a.hi);
    else
      a.affine = !__builtin_add_overflow(a.lo, span, &a.lo);
  }
  free(f.coef);
  VEC_PUSH(s->acc, s->n_acc, s->cap_acc, a);
}

static void scan_expr(Scan *s, const KExpr *e) {
  if (!e)
    return;
  if (e->kind == KE_LOCAL && !s->own_local[e->var])
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

/* First pass: the loops and locals declared inside. */
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

/* Every access to a buffer the loop stores to lies in the slab
 * [c*i + lo, c*i + lo + c) of iteration i, for one c > 0 and one lo. */
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
      if (!a->affine || a->c != st->c || a->c <= 0)
        return false;
      if (a->lo < lo)
        lo = a->lo;
      if (a->hi > hi)
        hi = a->hi;
    }
    if (hi - lo >= st->c)
      return false;
  }
  return true;
}

static bool loop_is_parallel(const Kernel *k, const KStmt *loop) {
  Scan s = {.k = k, .var = loop->var};
  s.extent = xcalloc((size_t)k->n_vars + 1, sizeof(int64_t));
  s.own_local = xcalloc((size_t)k->n_locals + 1, sizeof(bool));
  scan_decls(&s, loop->body, loop->nbody);
  scan_stmts(&s, loop->body, loop->nbody);
  bool parallel = !s.shares_local && slabs_disjoint(&s);
  free(s.extent);
  free(s.own_local);
  free(s.acc);
  return parallel;
}

void kernel_mark_parallel(Kernel *k) {
  for (int i = 0; i < k->nbody; i++)
    if (k->body[i]->kind == KS_FOR)
      k->body[i]->parallel = loop_is_parallel(k, k->body[i]);
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
