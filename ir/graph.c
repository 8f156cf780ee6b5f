/* graph.c — building, querying and printing the tensor graph (see ir.h). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include "ir.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int64_t shape_numel(const Shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->dim[i];
  return n;
}

bool shape_equal(const Shape *a, const Shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dim[i] != b->dim[i]) return false;
  return true;
}

const char *shape_str(const Shape *s, char buf[128]) {
  int len = snprintf(buf, 128, "[");
  for (int i = 0; i < s->rank && len < 100; i++)
    len += snprintf(buf + len, 128 - len, "%s%lld", i ? ", " : "", (long long)s->dim[i]);
  snprintf(buf + len, 128 - len, "]");
  return buf;
}

int dtype_size(DType t) {
#define DTYPE_SIZE(id, word, size) [id] = size,
  static const int sizes[] = {TRAINC_DTYPES(DTYPE_SIZE)[DT_BF16] = 2};
#undef DTYPE_SIZE
  return sizes[t];
}

/* The frontend's list and the runtime's name the same types in one order,
 * so a DType is its trc_dtype: no conversion table. */
_Static_assert(DT_F32 == (int)TRC_F32 && DT_I32 == (int)TRC_I32 && DT_U8 == (int)TRC_U8 &&
                   DT_COUNT == sizeof(const char *[]){TRC_DTYPES(TRC_ENUM_WORD)} / sizeof(const char *),
               "DType (frontend.h) and trc_dtype (trainc.h) must list the same types in one order");

trc_dtype dtype_abi(DType t) { return (trc_dtype)t; }

/* The node storage: IR_MAX_NODES nodes of address space, reserved once and
 * never moved (ir.h). MAP_NORESERVE asks for no swap or memory up front: the
 * kernel commits each page when a node is first written to it, so a small
 * graph uses a few pages of its reservation. (Under ASan the storage is
 * plain mapped memory, as it was heap memory before: an index past g->n is
 * not reported, but no pointer into it can dangle while the graph lives.) */
static const size_t node_storage = (size_t)IR_MAX_NODES * sizeof(Node);

static Node *reserve_nodes(void) {
  void *p = mmap(NULL, node_storage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    Diag d; /* no caller can go on from here (as when memory runs out) */
    diag_init(&d, stderr);
    diag_error(&d, NO_LOC, "cannot reserve %zu MiB of address space for a graph: %s", node_storage >> 20,
               strerror(errno));
    exit(1);
  }
  return p;
}

Graph *graph_new(void) {
  Graph *g = xcalloc(1, sizeof *g);
  g->nodes = reserve_nodes();
  g->loss = g->predict = g->labels = g->tokens = g->loss_seed = g->rng_key = g->training = -1;
  g->loss_head = -1;
  return g;
}

static void namelist_free(NameList *l) {
  for (int i = 0; i < l->n; i++) free(l->items[i]);
  free(l->items);
}

static void namelist_copy(NameList *to, const NameList *from) {
  for (int i = 0; i < from->n; i++) VEC_PUSH(to->items, to->n, to->cap, xstrdup(from->items[i]));
}

char *namelist_join(const NameList *l) {
  if (l->n == 0) return NULL;
  StrBuf sb = {0};
  for (int i = 0; i < l->n; i++) sb_printf(&sb, "%s%s", i ? "," : "", l->items[i]);
  return sb_take(&sb);
}

static int by_id(const void *a, const void *b) {
  return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

int *graph_params_declared(const Graph *g) {
  int *ids = xmalloc((size_t)(g->n_params ? g->n_params : 1) * sizeof *ids);
  if (g->n_params == 0) return ids; /* params is NULL then */
  memcpy(ids, g->params, (size_t)g->n_params * sizeof *ids);
  qsort(ids, (size_t)g->n_params, sizeof *ids, by_id);
  return ids;
}

int graph_trained_params(const Graph *g) {
  int n = 0;
  while (n < g->n_params && !g->nodes[g->params[n]].frozen) n++;
  return n;
}

const char *node_file_name(const Node *param) {
  return param->file_name ? param->file_name : param->name;
}

void graph_free(Graph *g) {
  if (!g) return;
  for (int i = 0; i < g->n; i++) free((char *)g->nodes[i].name), free(g->nodes[i].file_name);
  namelist_free(&g->allow_missing);
  namelist_free(&g->allow_unexpected);
  munmap(g->nodes, node_storage);
  free(g->params);
  free(g->inputs);
  for (int i = 0; i < g->n_scopes; i++) free(g->scopes[i]);
  free(g->scopes);
  free((char *)g->model_name);
  free((char *)g->source_path);
  free(g);
}

const char *node_layer_path(const Graph *g, int id) {
  for (;;) {
    const Node *n = &g->nodes[id];
    if (n->scope) return g->scopes[n->scope - 1];
    if (n->recompute_of >= 0)
      id = n->recompute_of;
    else if (n->origin >= 0)
      id = n->origin;
    else
      return NULL;
  }
}

void graph_set_scope(Graph *g, int first, const char *path) {
  if (first >= g->n) return;
  VEC_PUSH(g->scopes, g->n_scopes, g->cap_scopes, xstrdup(path));
  for (int i = first; i < g->n; i++) {
    Node *n = &g->nodes[i];
    /* a leaf other than a parameter (dropout's key) belongs to no layer */
    bool shared_leaf = op_info(n->op)->op_class == OPC_LEAF && n->op != OP_PARAM;
    if (!n->scope && !shared_leaf) n->scope = g->n_scopes;
  }
}

/* Stores n as the next node (its id set). The passes never fill a graph
 * (IR_MAX_NODES), so a full one here is a compiler bug. */
static int append_node(Graph *g, const Node *n) {
  if (g->n == IR_MAX_NODES) {
    diag_internal_error("a graph of more than %d nodes", IR_MAX_NODES);
  }
  g->nodes[g->n] = *n;
  g->nodes[g->n].id = g->n;
  return g->n++;
}

/* A result must have at most 2^40 elements (as declared tensors: lower.c),
 * so that every byte count fits 64 bits with room to spare. */
static bool size_fits(const Node *n, Diag *diag) {
  int64_t total = 1;
  for (int i = 0; i < n->shape.rank; i++)
    if (__builtin_mul_overflow(total, n->shape.dim[i], &total) || total > ((int64_t)1 << 40)) {
      diag_error(diag, n->loc, "the result of %s would have more than 2^40 elements", op_info(n->op)->name);
      return false;
    }
  return true;
}

/* A model file's graph stays within the one size limit (support.h). */
static bool within_limit(Graph *g, SrcLoc loc, Diag *diag) {
  if (g->n < IR_MAX_FORWARD) return true;
  if (!g->too_large)
    diag_error(diag, loc,
               "the model has more than %d operations here (defs inlined, repeats unrolled), "
               "the limit of every model",
               IR_MAX_FORWARD);
  g->too_large = true;
  return false;
}

int graph_add_op(Graph *g, OpKind op, const int *in, int nin, const Attr *attr, SrcLoc loc,
                 Diag *diag) {
  for (int i = 0; i < nin; i++)
    if (in[i] < 0) { /* a value whose error was reported */
      if (!diag || diag_count(diag) == 0)
        diag_internal_error("%s of a missing value", op_info(op)->name);
      return -1;
    }
  if (diag && !within_limit(g, loc, diag)) return -1;
  Node n = {0};
  n.id = g->n;
  n.op = op;
  n.nin = nin;
  for (int i = 0; i < nin; i++) n.in[i] = in[i];
  n.attr = *attr;
  n.loc = loc;
  n.grad_of_param = -1;
  n.recompute_of = -1;
  n.origin = -1;
  n.dtype = DT_F32;
  const OpInfo *info = op_info(op);
  if (!info->infer || (info->infer(g, &n, diag) && size_fits(&n, diag))) return append_node(g, &n);
  if (!diag) diag_internal_error("bad shapes for %s", info->name);
  return -1;
}

Graph *graph_copy_header(const Graph *g) {
  Graph *c = graph_new();
  c->model_name = xstrdup(g->model_name);
  c->source_path = xstrdup(g->source_path);
  c->loss = g->loss, c->predict = g->predict, c->labels = g->labels, c->tokens = g->tokens;
  c->loss_seed = g->loss_seed, c->loss_head = g->loss_head, c->rng_key = g->rng_key, c->training = g->training, c->n_dropout = g->n_dropout;
  c->loss_kind = g->loss_kind;
  c->train = g->train;
  namelist_copy(&c->allow_missing, &g->allow_missing);
  namelist_copy(&c->allow_unexpected, &g->allow_unexpected);
  for (int i = 0; i < g->n_params; i++) VEC_PUSH(c->params, c->n_params, c->cap_params, g->params[i]);
  for (int i = 0; i < g->n_inputs; i++) VEC_PUSH(c->inputs, c->n_inputs, c->cap_inputs, g->inputs[i]);
  for (int i = 0; i < g->n_scopes; i++)
    VEC_PUSH(c->scopes, c->n_scopes, c->cap_scopes, xstrdup(g->scopes[i]));
  return c;
}

int graph_push(Graph *g, const Node *n) {
  Node copy = *n;
  copy.name = n->name ? xstrdup(n->name) : NULL;
  copy.file_name = n->file_name ? xstrdup(n->file_name) : NULL;
  return append_node(g, &copy);
}

int graph_add_attr(Graph *g, OpKind op, const int *in, int nin, double f0, int64_t i0,
                   int64_t i1, SrcLoc loc, Diag *diag) {
  Attr attr = {.f = {f0}, .i = {i0, i1}};
  return graph_add_op(g, op, in, nin, &attr, loc, diag);
}

bool graph_read_only_by(const Graph *g, int v, const int *readers, int n) {
  for (int i = v + 1; i < g->n_forward; i++)
    for (int k = 0; k < g->nodes[i].nin; k++) {
      bool among = false;
      for (int r = 0; r < n; r++) among |= i == readers[r];
      if (g->nodes[i].in[k] == v && !among) return false;
    }
  return true;
}

bool node_is_view(const Node *n) { return op_info(n->op)->op_class == OPC_VIEW && n->grad_of_param < 0; }

uint64_t view_offset(const Graph *g, const Node *n) {
  if (n->op != OP_SLICE) return 0;
  return (uint64_t)n->attr.i[0] * (uint64_t)(shape_numel(&n->shape) / n->shape.dim[0]) * (uint64_t)dtype_size(n->dtype);
}

/* Nodes come after their inputs, so a view's source is resolved first. */
int *graph_storage_roots(const Graph *g) {
  int *root = xmalloc((size_t)g->n * sizeof *root);
  for (int i = 0; i < g->n; i++)
    root[i] = node_is_view(&g->nodes[i]) ? root[g->nodes[i].in[0]] : i;
  return root;
}

int graph_add(Graph *g, OpKind op, const int *in, int nin, SrcLoc loc, Diag *diag) {
  return graph_add_attr(g, op, in, nin, 0, 0, 0, loc, diag);
}

int graph_sum_to(Graph *g, int x, int like) {
  if (shape_equal(&g->nodes[x].shape, &g->nodes[like].shape)) return x;
  int id = graph_add_attr(g, OP_SUM_TO, &x, 1, 0, like, 0, g->nodes[x].loc, NULL);
  return id;
}

int graph_expand_to(Graph *g, int x, int like) {
  if (shape_equal(&g->nodes[x].shape, &g->nodes[like].shape)) return x;
  return graph_add_attr(g, OP_EXPAND, &x, 1, 0, like, 0, g->nodes[x].loc, NULL);
}

static void print_node(FILE *out, const Graph *g, const Node *n) {
  char sb[128];
  const OpInfo *info = op_info(n->op);
  fprintf(out, "%%%d = %s", n->id, info->name);
  for (int i = 0; i < n->nin; i++) fprintf(out, "%s%%%d", i ? ", " : " ", n->in[i]);
  if (info->print_attrs) info->print_attrs(out, n);
  fprintf(out, " : %s%s", dtype_name(n->dtype), shape_str(&n->shape, sb));
  if (n->grad_of_param >= 0) fprintf(out, " +=> grad(%s)", g->nodes[n->grad_of_param].name);
  if (n->recompute_of >= 0) fprintf(out, " (recompute of %%%d)", n->recompute_of);
  if (n->name && n->op != OP_PARAM && n->op != OP_INPUT) fprintf(out, "  # %s", n->name);
  if (n->loc.file) fprintf(out, "  @%d:%d", n->loc.line, n->loc.col);
  fputc('\n', out);
}

void graph_print(FILE *out, const Graph *g) {
  fprintf(out, "model %s (batch %lld)\n", g->model_name, (long long)g->train.batch);
  for (int i = 0; i < g->n; i++) {
    if (i == g->n_forward && g->n_forward < g->n) fprintf(out, "backward:\n");
    print_node(out, g, &g->nodes[i]);
  }
  fprintf(out, "loss %%%d", g->loss);
  if (g->predict >= 0) fprintf(out, ", predict %%%d", g->predict);
  if (g->labels >= 0) fprintf(out, ", labels %%%d", g->labels);
  if (g->tokens >= 0) fprintf(out, ", tokens %%%d", g->tokens);
  fputc('\n', out);
}
