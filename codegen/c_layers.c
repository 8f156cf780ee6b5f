/* c_layers.c — finds the runs of alike layers of a call list and names and
 * prints their tables (c_layers.h). */
#include "c_layers.h"

#include <stdlib.h>
#include <string.h>

/* The repeat copy a call is in: its layer path up to the first component
 * that is a number ("block.3" of block.3.attn.q; lowering numbers only the
 * copies of a repeat, whose paths are "f.i"). */
typedef struct {
  const char *path;
  size_t repeat_len, layer_len; /* of "block" and "block.3" */
  int index;
} Layer;

static bool call_layer(const Graph *g, int id, Layer *out) {
  const char *path = node_layer_path(g, id);
  for (const char *part = path; part && *part;) {
    size_t len = strcspn(part, ".");
    if (part != path && len && len < 9 && strspn(part, "0123456789") == len) {
      *out = (Layer){path, (size_t)(part - path - 1), (size_t)(part - path) + len, atoi(part)};
      return true;
    }
    part = part[len] ? part + len + 1 : NULL;
  }
  return false;
}

static bool same_prefix(const Layer *a, const Layer *b, size_t len_a, size_t len_b) {
  return len_a == len_b && !strncmp(a->path, b->path, len_a);
}

/* One copy's calls [start, end) of the list, and the buffers they pass:
 * slot[i] for the i-th buffer argument (the calls' parameters in order) is
 * its index in the order of first use, node[s] that slot's value, local[s]
 * its name within the layer (the C name less the layer's prefix), NULL for
 * a value from outside the layer. */
typedef struct {
  int start, end;
  Layer layer;
  int *slot, n_args;
  int *node, n_slots;
  const char **local;
} Copy;

/* name less "block_3_" (after "grad_" for a gradient's), or NULL. */
static const char *local_name(const char *name, const char *prefix, char **owned) {
  size_t n = strlen(prefix);
  if (!strncmp(name, prefix, n)) return name + n;
  if (!strncmp(name, "grad_", 5) && !strncmp(name + 5, prefix, n))
    return *owned = xsprintf("grad_%s", name + 5 + n);
  return NULL;
}

static Copy copy_of(const CNames *c, const int *ids, int start, int end, const Layer *layer) {
  Copy cp = {.start = start, .end = end, .layer = *layer};
  char *prefix = xsprintf("%.*s_", (int)layer->layer_len, layer->path);
  for (char *ch = prefix; *ch; ch++)
    if (*ch == '.') *ch = '_';
  int cap_node = 0, cap_local = 0, cap_slot = 0, n_local = 0;
  for (int i = start; i < end; i++) {
    const KernelForm *f = &c->forms[ids[i]];
    for (int k = 0; k < f->n_params; k++) {
      int s = 0;
      while (s < cp.n_slots && cp.node[s] != f->params[k]) s++;
      if (s == cp.n_slots) {
        char *owned = NULL;
        const char *local = local_name(c->value[f->params[k]], prefix, &owned);
        VEC_PUSH(cp.node, cp.n_slots, cap_node, f->params[k]);
        VEC_PUSH(cp.local, n_local, cap_local, owned ? owned : local ? xstrdup(local) : NULL);
      }
      VEC_PUSH(cp.slot, cp.n_args, cap_slot, s);
    }
  }
  free(prefix);
  return cp;
}

static void copy_free(Copy *cp) {
  for (int s = 0; s < cp->n_slots; s++) free((char *)cp->local[s]);
  free(cp->slot), free(cp->node), free(cp->local);
}

/* Whether copies a and b make the same calls: the same functions, buffers in
 * the same pattern with the same types, each of its layer in both or in
 * neither, the same number of buckets final after each call (ready, per
 * list index). A value may have another name in one layer (the last one's
 * output is the model's `h`): the loop names it as the first layer does. */
static bool same_plan(const Program *p, const CNames *c, const int *ids, const int *ready,
                      const Copy *a, const Copy *b) {
  if (a->end - a->start != b->end - b->start || a->n_args != b->n_args ||
      a->n_slots != b->n_slots)
    return false;
  for (int j = 0; j < a->end - a->start; j++)
    if (c->fn_of[ids[a->start + j]] != c->fn_of[ids[b->start + j]] ||
        ready[a->start + j] != ready[b->start + j])
      return false;
  for (int i = 0; i < a->n_args; i++)
    if (a->slot[i] != b->slot[i]) return false;
  for (int s = 0; s < a->n_slots; s++)
    if (p->g->nodes[a->node[s]].dtype != p->g->nodes[b->node[s]].dtype ||
        !a->local[s] != !b->local[s])
      return false;
  return true;
}

static int add_column(LayerLoop *L, const char *name, LayerColumnKind kind, DType dtype) {
  LayerColumn col = {.name = name, .kind = kind, .dtype = dtype,
                     .values = xcalloc((size_t)L->layers, sizeof(uint64_t))};
  VEC_PUSH(L->cols, L->n_cols, L->cap_cols, col);
  return L->n_cols - 1;
}

/* The buffers' columns and names: a value of the layer is a column named as
 * in the layer; one from outside it the same in every layer is the
 * function's pointer (its name taken in the loop first); one that differs
 * (the previous layer's output) a column `layer_in`. */
static void buffer_columns(LayerLoop *L, const Program *p, CNames *c, const Copy *rows,
                           NameMap *local) {
  const Copy *r0 = &rows[0];
  int *col = xmalloc((size_t)r0->n_slots * sizeof *col);
  for (int s = 0; s < r0->n_slots; s++) {
    bool same = true;
    for (int r = 1; r < L->layers; r++) same &= rows[r].node[s] == r0->node[s];
    col[s] = r0->local[s] || !same ? 0 : -1;
    if (col[s] < 0) namemap_put(local, c->value[r0->node[s]], 1);
  }
  for (int s = 0; s < r0->n_slots; s++) {
    if (col[s] < 0) continue;
    const char *name = c_names_claim_local(c, local, r0->local[s] ? r0->local[s] : "layer_in");
    col[s] = add_column(L, name, COL_OFFSET, p->g->nodes[r0->node[s]].dtype);
    for (int r = 0; r < L->layers; r++) L->cols[col[s]].values[r] = p->offset[rows[r].node[s]];
  }
  L->arg = xmalloc((size_t)(r0->n_args + 1) * sizeof *L->arg);
  L->arg_col = xmalloc((size_t)(r0->n_args + 1) * sizeof *L->arg_col);
  for (int i = 0; i < r0->n_args; i++) {
    int s = r0->slot[i];
    L->arg_col[i] = col[s];
    L->arg[i] = col[s] < 0 ? c->value[r0->node[s]] : L->cols[col[s]].name;
  }
  free(col);
}

/* Dropout streams that differ between layers: a column each. */
static void stream_columns(LayerLoop *L, CNames *c, const int *ids, const Copy *rows,
                           NameMap *local) {
  int n_streams = 0, cap = 0;
  L->stream_at = xmalloc((size_t)(L->calls + 1) * sizeof *L->stream_at);
  for (int j = 0; j < L->calls; j++) {
    const KernelForm *f = &c->forms[ids[rows[0].start + j]];
    L->stream_at[j] = n_streams;
    for (int t = 0; t < f->n_streams; t++) {
      bool same = true;
      for (int r = 1; r < L->layers; r++)
        same &= c->forms[ids[rows[r].start + j]].streams[t] == f->streams[t];
      int col = -1;
      if (!same) {
        col = add_column(L, c_names_claim_local(c, local, "stream"), COL_STREAM, DT_F32);
        for (int r = 0; r < L->layers; r++)
          L->cols[col].values[r] = (uint64_t)c->forms[ids[rows[r].start + j]].streams[t];
      }
      VEC_PUSH(L->stream_col, n_streams, cap, col);
    }
  }
}

/* The gradient buckets final after each call: (first, count) columns. */
static void bucket_columns(LayerLoop *L, const Program *p, CNames *c, const Copy *rows,
                           const int *ready, NameMap *local) {
  L->ready = xcalloc((size_t)L->calls, sizeof *L->ready);
  L->ready_col = xcalloc((size_t)L->calls, sizeof *L->ready_col);
  for (int j = 0; j < L->calls; j++) {
    L->ready[j] = ready[rows[0].start + j];
    L->ready_col[j] = L->n_cols;
    for (int q = 0; q < L->ready[j]; q++) {
      add_column(L, c_names_claim_local(c, local, "bucket_first"), COL_BUCKET_FIRST, DT_F32);
      add_column(L, c_names_claim_local(c, local, "bucket_count"), COL_BUCKET_COUNT, DT_F32);
    }
    for (int r = 0; r < L->layers && L->ready[j]; r++) {
      int q = 0;
      for (int b = 0; b < p->n_buckets; b++)
        if (p->buckets[b].ready == rows[r].start + j) {
          L->cols[L->ready_col[j] + 2 * q].values[r] = p->buckets[b].first;
          L->cols[L->ready_col[j] + 2 * q + 1].values[r] = p->buckets[b].count;
          q++;
        }
    }
  }
}

/* Which columns are affine in the layer. */
static void find_affine(LayerLoop *L) {
  for (int k = 0; k < L->n_cols; k++) {
    LayerColumn *col = &L->cols[k];
    col->stride = (int64_t)(col->values[1] - col->values[0]);
    col->affine = true;
    for (int r = 1; r < L->layers; r++)
      col->affine &= (int64_t)(col->values[r] - col->values[r - 1]) == col->stride;
  }
}

static int table_columns(const LayerLoop *L) {
  int n = 0;
  for (int k = 0; k < L->n_cols; k++) n += !L->cols[k].affine;
  return n;
}

/* The loop over copies rows[0..n), as they run; its rows in layer order. */
static LayerLoop make_loop(const Program *p, CNames *c, const int *ids, const int *ready,
                           Copy *rows, int n, const char *table) {
  int step = rows[0].layer.index < rows[n - 1].layer.index ? 1 : -1;
  if (step < 0) /* the rows ascend */
    for (int i = 0; i < n / 2; i++) {
      Copy t = rows[i];
      rows[i] = rows[n - 1 - i], rows[n - 1 - i] = t;
    }
  LayerLoop L = {.start = rows[0].start < rows[n - 1].start ? rows[0].start : rows[n - 1].start,
                 .calls = rows[0].end - rows[0].start, .layers = n, .step = step,
                 .layer = xmalloc((size_t)n * sizeof(int)),
                 .repeat = xstrndup(rows[0].layer.path, rows[0].layer.repeat_len)};
  for (int r = 0; r < n; r++) L.layer[r] = rows[r].layer.index;
  char *text = xsprintf("%s%s", L.repeat, table);
  L.table = c_names_claim_file_scope(c, text);
  free(text);
  NameMap local = {0};
  buffer_columns(&L, p, c, rows, &local);
  L.arg_at = xmalloc((size_t)(L.calls + 1) * sizeof *L.arg_at);
  for (int j = 0, at = 0; j <= L.calls; j++) {
    L.arg_at[j] = at;
    if (j < L.calls) at += c->forms[ids[rows[0].start + j]].n_params;
  }
  stream_columns(&L, c, ids, rows, &local);
  bucket_columns(&L, p, c, rows, ready, &local);
  find_affine(&L);
  namemap_free(&local);
  return L;
}

/* Per call of the list: how many buckets are final after it (backward). */
static int *ready_counts(const Program *p, const int *ids, int n) {
  int *ready = xcalloc((size_t)n + 1, sizeof *ready);
  for (int b = 0; ids == p->backward && b < p->n_buckets; b++)
    if (p->buckets[b].ready >= 0) ready[p->buckets[b].ready]++;
  return ready;
}

/* The list cut into copies: maximal runs of calls in one repeat copy. */
static Copy *copies_of(const Program *p, const CNames *c, const int *ids, int n, int *n_copies) {
  Copy *copies = NULL;
  int cap = 0;
  *n_copies = 0;
  for (int i = 0; i < n;) {
    Layer layer, next;
    if (!call_layer(p->g, ids[i], &layer)) {
      i++;
      continue;
    }
    int end = i + 1;
    while (end < n && call_layer(p->g, ids[end], &next) &&
           same_prefix(&layer, &next, layer.layer_len, next.layer_len))
      end++;
    VEC_PUSH(copies, *n_copies, cap, copy_of(c, ids, i, end, &layer));
    i = end;
  }
  return copies;
}

/* Whether copy b continues the run of copies ending at a, going by step. */
static bool continues(const Program *p, const CNames *c, const int *ids, const int *ready,
                      const Copy *a, const Copy *b, int step) {
  return a->end == b->start && same_prefix(&a->layer, &b->layer, a->layer.repeat_len,
                                           b->layer.repeat_len) &&
         b->layer.index == a->layer.index + step && same_plan(p, c, ids, ready, a, b);
}

void layer_loops_find(LayerLoops *ll, const Program *p, CNames *c, const int *ids, int n) {
  *ll = (LayerLoops){.loop_at = xmalloc(((size_t)n + 1) * sizeof(int)),
                     .loop_of = xmalloc(((size_t)n + 1) * sizeof(int))};
  for (int i = 0; i < n; i++) ll->loop_at[i] = ll->loop_of[i] = -1;
  int *ready = ready_counts(p, ids, n), n_copies;
  Copy *copies = copies_of(p, c, ids, n, &n_copies);
  for (int i = 0; i < n_copies;) {
    int step = i + 1 < n_copies ? copies[i + 1].layer.index - copies[i].layer.index : 0, end = i + 1;
    while (end < n_copies && (step == 1 || step == -1) &&
           continues(p, c, ids, ready, &copies[end - 1], &copies[end], step))
      end++;
    if (end - i > 1) {
      for (int k = copies[i].start; k < copies[end - 1].end; k++) ll->loop_of[k] = ll->n;
      LayerLoop L = make_loop(p, c, ids, ready, copies + i, end - i,
                              ids == p->backward ? "_bwd" : "_fwd");
      ll->loop_at[L.start] = ll->n;
      VEC_PUSH(ll->loops, ll->n, ll->cap, L);
    }
    i = end;
  }
  for (int i = 0; i < n_copies; i++) copy_free(&copies[i]);
  free(copies);
  free(ready);
}

void layer_loops_free(LayerLoops *ll) {
  for (int i = 0; i < ll->n; i++) {
    LayerLoop *L = &ll->loops[i];
    for (int k = 0; k < L->n_cols; k++) free(L->cols[k].values);
    free(L->cols), free(L->layer), free(L->repeat), free(L->arg), free(L->arg_col);
    free(L->arg_at), free(L->stream_at), free(L->stream_col), free(L->ready), free(L->ready_col);
  }
  free(ll->loops), free(ll->loop_at), free(ll->loop_of);
}

const char *layer_value(const LayerLoop *L, int k, char *buf, size_t size) {
  const LayerColumn *col = &L->cols[k];
  char l[32];
  snprintf(l, sizeof l, L->layer[0] ? "(l - %d)" : "l", L->layer[0]);
  if (!col->affine)
    snprintf(buf, size, "%s[%s].%s", L->table, l, col->name);
  else if (!col->stride)
    snprintf(buf, size, "%llu", (unsigned long long)col->values[0]);
  else if (!col->values[0] && col->stride > 0)
    snprintf(buf, size, "%s * %lld", l, (long long)col->stride);
  else
    snprintf(buf, size, "%llu %c %s * %lld", (unsigned long long)col->values[0],
             col->stride > 0 ? '+' : '-', l, (long long)(col->stride > 0 ? col->stride : -col->stride));
  return buf;
}

/* items[0..n) joined by ", " within 100 columns, continued lines indented
 * by `indent`. */
static void print_wrapped(FILE *out, int col, int indent, char **items, int n) {
  for (int i = 0; i < n; i++) {
    int len = (int)strlen(items[i]) + 2;
    if (i && col + len > 100)
      col = fprintf(out, ",\n%*s", indent, "") - 2;
    else if (i)
      col += fprintf(out, ", ");
    col += fprintf(out, "%s", items[i]);
  }
}

/* The table's fields (row < 0) or row's values, as text. */
static char **table_items(const LayerLoop *L, int row, int *n) {
  char **items = xmalloc((size_t)(L->n_cols + 1) * sizeof *items);
  *n = 0;
  for (int k = 0; k < L->n_cols; k++)
    if (!L->cols[k].affine)
      items[(*n)++] = row < 0 ? xstrdup(L->cols[k].name)
                              : xsprintf("%llu", (unsigned long long)L->cols[k].values[row]);
  return items;
}

static void print_items(FILE *out, const LayerLoop *L, int row, int col) {
  int n;
  char **items = table_items(L, row, &n);
  print_wrapped(out, col, col, items, n);
  for (int i = 0; i < n; i++) free(items[i]);
  free(items);
}

static void print_table(FILE *out, const LayerLoop *L, const char *what) {
  if (!table_columns(L)) return;
  fprintf(out, "/* %s's loop over %s.%d .. %s.%d: per layer, what is not affine in it */\n",
          what, L->repeat, L->layer[0], L->repeat, L->layer[L->layers - 1]);
  fputs("static const struct {\n  uint64_t ", out);
  print_items(out, L, -1, 11);
  fprintf(out, ";\n} %s[%d] = {\n", L->table, L->layers);
  for (int r = 0; r < L->layers; r++) {
    fputs("    {", out);
    print_items(out, L, r, 5);
    fprintf(out, "}, /* %s.%d */\n", L->repeat, L->layer[r]);
  }
  fputs("};\n\n", out);
}

void layer_loops_print_tables(FILE *out, const LayerLoops *ll, const char *what) {
  for (int i = 0; i < ll->n; i++) print_table(out, &ll->loops[i], what);
}
