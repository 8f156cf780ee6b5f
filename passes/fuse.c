/* fuse.c — pointwise kernels computed inside the one kernel that reads them.
 *
 * A step P fuses into a step C when, proved from the schedule and the loop
 * nests (never from op names):
 *   - C is P's only reader in the whole program (forward and backward,
 *     recomputes included), and reads P once, as itself, not through a view;
 *     P is not the loss or the prediction (nor their storage: the runtime
 *     reads those) and adds into no parameter's gradient slot;
 *   - P's kernel is one flat loop `for i < N: [float locals;] P[i] = e(i)`,
 *     N being P's element count (P is f32): every element written once, at
 *     its own index, by an expression that loads neither P nor a gradient
 *     slot (whose value other kernels change between P's step and C's);
 *   - C's kernel is one flat loop `for j < N: [float locals;] C[j] (+)= e'(j)`
 *     over the same N, whose one load of P is P[j].
 * Iteration j of C then reads exactly the element iteration j of P wrote, so
 * C computes it itself: P's statements with i renamed j, P's value in a local
 * `float t = e(j);`, and t where C loaded P[j]. Every float is the same
 * operation on the same operands as before; only the store and the load of
 * P[j] are gone. P's value stays a statement of its own, never an operand
 * inside one of C's expressions, so a C compiler that contracts a*b + c into
 * an FMA within an expression (clang's default -ffp-contract=on) sees the
 * expressions it saw unfused. The memory plan gives P no storage and keeps
 * P's inputs alive until C's step; nothing else writes them meanwhile (every
 * value but a gradient slot is written once, by its own step).
 *
 * Steps are visited in schedule order, so a chain a -> b -> c (a, b each
 * read only by the next) ends as one kernel. */
#include "internal.h"

#include <stdlib.h>

static bool is_var(const KExpr *e, int var) { return e->kind == KE_INDEX && e->var == var; }

/* k's loop when k is `for v < extent: [locals;] buf[v] (+)= value`. */
static KStmt *flat_loop(const Kernel *k, int buf, int64_t extent) {
  if (!k || k->nbody != 1) return NULL;
  KStmt *loop = k->body[0];
  if (loop->kind != KS_FOR || loop->extent != extent || loop->nbody < 1) return NULL;
  for (int i = 0; i + 1 < loop->nbody; i++)
    if (loop->body[i]->kind != KS_LOCAL) return NULL;
  const KStmt *store = loop->body[loop->nbody - 1];
  if (store->kind != KS_STORE || store->buf != buf || !is_var(store->index, loop->var)) return NULL;
  return loop;
}

/* Loads of buffer buf in e; *last: one of them. */
static int count_loads(KExpr *e, int buf, KExpr **last) {
  if (!e) return 0;
  int n = e->kind == KE_LOAD && e->buf == buf;
  if (n) *last = e;
  return n + count_loads(e->a, buf, last) + count_loads(e->b, buf, last) + count_loads(e->c, buf, last);
}

static int count_loads_in(const KStmt *loop, int buf, KExpr **last) {
  int n = 0;
  for (int i = 0; i < loop->nbody; i++)
    n += count_loads(loop->body[i]->value, buf, last) + count_loads(loop->body[i]->index, buf, last);
  return n;
}

/* A load of P itself or of a gradient slot, which P may not move later. */
static bool loads_unstable(const Graph *g, const KExpr *e, int self) {
  if (!e) return false;
  if (e->kind == KE_LOAD &&
      (e->buf == self || g->nodes[graph_storage_root(g, e->buf)].grad_of_param >= 0))
    return true;
  return loads_unstable(g, e->a, self) || loads_unstable(g, e->b, self) || loads_unstable(g, e->c, self);
}

/* e rebuilt in k: its one loop variable becomes var, local l becomes locals[l]. */
static KExpr *clone(Kernel *k, const KExpr *e, int var, const int *locals) {
  switch (e->kind) {
  case KE_CONST: return k_const(k, e->f);
  case KE_ICONST: return k_iconst(k, e->i);
  case KE_INDEX: return k_index(k, var);
  case KE_LOCAL: return k_localv(k, locals[e->var]);
  case KE_LOAD: return k_load(k, e->buf, clone(k, e->a, var, locals), e->is_int);
  case KE_UNARY: return k_unary(k, (KUnaryOp)e->op, clone(k, e->a, var, locals));
  case KE_BINARY:
    return k_binary(k, (KBinaryOp)e->op, clone(k, e->a, var, locals), clone(k, e->b, var, locals));
  case KE_SELECT:
    return k_select(k, clone(k, e->a, var, locals), clone(k, e->b, var, locals), clone(k, e->c, var, locals));
  case KE_EQ: return k_eq(k, clone(k, e->a, var, locals), clone(k, e->b, var, locals));
  case KE_TO_FLOAT: return k_to_float(k, clone(k, e->a, var, locals));
  case KE_RANDOM: return k_random(k, e->buf, e->i, clone(k, e->a, var, locals));
  }
  abort();
}

/* Puts P's statements before C's store and P's value where C loaded it. */
static void inline_producer(const Kernel *pk, const KStmt *ploop, Kernel *ck, KStmt *cloop, KExpr *load) {
  KStmt *store = cloop->body[--cloop->nbody];
  int *locals = xmalloc(((size_t)pk->n_locals + 1) * sizeof *locals), value;
  for (int i = 0; i + 1 < ploop->nbody; i++) {
    const KStmt *s = ploop->body[i];
    k_local(ck, cloop, clone(ck, s->value, cloop->var, locals), &locals[s->var]);
  }
  k_local(ck, cloop, clone(ck, ploop->body[ploop->nbody - 1]->value, cloop->var, locals), &value);
  free(locals);
  VEC_PUSH(cloop->body, cloop->nbody, cloop->capbody, store);
  *load = (KExpr){.kind = KE_LOCAL, .var = value};
}

/* Per node: its reading steps (a read through a view counts twice, so that
 * such a value never fuses); *reader: the last of them. */
static void count_readers(const Program *p, int *readers, int *reader) {
  const Graph *g = p->g;
  for (int s = 0; s < p->n_forward + p->n_backward; s++) {
    int id = s < p->n_forward ? p->forward[s] : p->backward[s - p->n_forward];
    const Node *n = &g->nodes[id];
    for (int k = 0; k < n->nin; k++) {
      int root = graph_storage_root(g, n->in[k]);
      readers[root] += root == n->in[k] ? 1 : 2;
      reader[root] = id;
    }
  }
}

/* Whether the runtime reads the value node id (after forward or backward). */
static bool read_by_runtime(const Graph *g, int id) {
  return id == graph_storage_root(g, g->loss) || (g->predict >= 0 && id == graph_storage_root(g, g->predict));
}

/* Fuses P into its reader when the conditions above hold. */
static bool try_fuse(Program *p, int P, int C) {
  const Graph *g = p->g;
  const Node *pn = &g->nodes[P];
  if (pn->dtype != DT_F32 || pn->grad_of_param >= 0 || read_by_runtime(g, P)) return false;
  int64_t n = shape_numel(&pn->shape);
  KStmt *ploop = flat_loop(p->kernels[P], P, n), *cloop = flat_loop(p->kernels[C], C, n);
  if (!ploop || !cloop || ploop->body[ploop->nbody - 1]->accumulate) return false;
  for (int i = 0; i < ploop->nbody; i++)
    if (loads_unstable(g, ploop->body[i]->value, P)) return false;
  KExpr *load = NULL;
  if (count_loads_in(cloop, P, &load) != 1 || !is_var(load->a, cloop->var)) return false;
  inline_producer(p->kernels[P], ploop, p->kernels[C], cloop, load);
  return true;
}

static void drop_fused(int *steps, int *n, const int *fused_into) {
  int kept = 0;
  for (int i = 0; i < *n; i++)
    if (fused_into[steps[i]] < 0) steps[kept++] = steps[i];
  *n = kept;
}

void program_fuse(Program *p) {
  const Graph *g = p->g;
  int *readers = xcalloc((size_t)g->n, sizeof *readers), *reader = xcalloc((size_t)g->n, sizeof *reader);
  count_readers(p, readers, reader);
  for (int s = 0; s < p->n_forward + p->n_backward; s++) {
    int P = s < p->n_forward ? p->forward[s] : p->backward[s - p->n_forward];
    int C = reader[P];
    if (readers[P] != 1 || !try_fuse(p, P, C)) continue;
    kernel_free(p->kernels[P]);
    p->kernels[P] = NULL;
    p->fused_into[P] = C;
    p->n_fused++;
  }
  drop_fused(p->forward, &p->n_forward, p->fused_into);
  drop_fused(p->backward, &p->n_backward, p->fused_into);
  free(readers);
  free(reader);
}

int fused_consumer(const Program *p, int id) {
  while (p->fused_into[id] >= 0) id = p->fused_into[id];
  return id;
}
