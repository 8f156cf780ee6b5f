/* weights.c — which parameters train and where weight files keep them
 * (docs/ops.md, "Frozen parameters" and "Weight-file names"): the train
 * block's `freeze` and the `weights` block's `map`, `allow_missing` and
 * `allow_unexpected`, applied to the lowered model's parameters.
 *
 * Patterns are name strings (the frontend lets only name bytes into them).
 * A `*` matches any run of characters; in `map`, `{i}` (any identifier in
 * braces) matches a decimal number in a parameter's name — the copy index
 * of a repeat — and puts that number where the file name says `{i}`, and
 * one `*` puts the run it matched where the file name has its `*`. */
#include "lower_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_HOLES 4       /* placeholders in one map pattern, its `*` included */
#define MAX_IDENT_NAME 64 /* a placeholder's name, as an identifier */

typedef struct {
  char name[MAX_IDENT_NAME + 1]; /* "i" for {i}, "*" for the star */
  const char *digits;            /* where the match found its text (digits for {i}) */
  int len;
} Hole;

/* The placeholder at p ("{i}..."): its name's length, or 0 when p is no
 * well-formed placeholder. */
static int hole_name_len(const char *p) {
  int n = 0;
  while (p[1 + n] && p[1 + n] != '}' && n <= MAX_IDENT_NAME) n++;
  return p[1 + n] == '}' && n > 0 && n <= MAX_IDENT_NAME ? n : 0;
}

/* Matches a checked map pattern (literals, placeholders, at most one `*`)
 * against name, recording each placeholder's text from holes[n] on; *total:
 * how many there are. A placeholder takes the whole run of digits there;
 * the star the longest run that lets the rest match (recursion as deep as
 * the pattern is long, one level of backtracking: O(len^2)). */
static bool match_from(const char *pattern, const char *name, Hole *holes, int n, int *total) {
  for (;; pattern++, name++) {
    if (*pattern == 0) {
      *total = n;
      return *name == 0;
    }
    if (*pattern == '*' || *pattern == '{') break;
    if (*pattern != *name) return false;
  }
  Hole *h = &holes[n];
  h->digits = name;
  if (*pattern == '*') {
    strcpy(h->name, "*");
    for (h->len = (int)strlen(name); h->len >= 0; h->len--)
      if (match_from(pattern + 1, name + h->len, holes, n + 1, total)) return true;
    return false;
  }
  int len = hole_name_len(pattern);
  memcpy(h->name, pattern + 1, (size_t)len);
  h->name[len] = 0;
  const char *end = name;
  while (*end >= '0' && *end <= '9') end++;
  h->len = (int)(end - name);
  return h->len > 0 && match_from(pattern + len + 2, end, holes, n + 1, total);
}

static const Hole *find_hole(const Hole *holes, int n, const char *name, int len) {
  for (int i = 0; i < n; i++)
    if ((int)strlen(holes[i].name) == len && !strncmp(holes[i].name, name, (size_t)len))
      return &holes[i];
  return NULL;
}

/* The file pattern with each placeholder and its star replaced by what
 * they matched. */
static char *fill_holes(const char *pattern, const Hole *holes, int nholes) {
  StrBuf out = {0};
  sb_append(&out, "");
  while (*pattern) {
    bool star = *pattern == '*';
    int n = star ? 1 : *pattern == '{' ? hole_name_len(pattern) : 0;
    if (!n) {
      sb_appendn(&out, pattern++, 1);
      continue;
    }
    const Hole *h = find_hole(holes, nholes, star ? "*" : pattern + 1, n);
    sb_appendn(&out, h->digits, (size_t)h->len);
    pattern += star ? 1 : n + 2;
  }
  return sb_take(&out);
}

/* ---- checking the strings ---- */

static const Expr *want_string(Lower *L, const Expr *e, const char *what) {
  if (e->kind == EX_STRING) return e;
  diag_error(L->diag, e->loc, "%s is a name string in double quotes", what);
  return NULL;
}

/* A pattern without placeholders: `freeze`, `allow_missing`, `allow_unexpected`. */
static bool check_glob(Lower *L, const Expr *e) {
  const char *brace = strpbrk(e->name, "{}");
  if (!brace) return true;
  SrcLoc at = {e->loc.file, e->loc.line, e->loc.col + 1 + (int)(brace - e->name)};
  diag_error(L->diag, at, "placeholders such as {i} belong in `map` patterns; use '*' here");
  return false;
}

/* A map pattern: well-formed placeholders, each named once, and at most
 * one `*` (a hole named "*"). Returns the number of holes, -1 after an
 * error. */
static int check_holes(Lower *L, const Expr *e, Hole *holes) {
  int n = 0;
  for (const char *p = e->name; *p; p++) {
    SrcLoc at = {e->loc.file, e->loc.line, e->loc.col + 1 + (int)(p - e->name)};
    if (*p == '}') {
      diag_error(L->diag, at, "'}' without its '{' (placeholders are written {i})");
      return -1;
    }
    if (*p == '*' && find_hole(holes, n, "*", 1)) {
      diag_error(L->diag, at, "a second '*' in a map pattern (one at most)");
      return -1;
    }
    if (*p != '{' && *p != '*') continue;
    int len = *p == '*' ? 1 : hole_name_len(p);
    if (!len || n == MAX_HOLES) {
      diag_error(L->diag, at, len ? "more than %d placeholders in one pattern"
                                  : "a placeholder is a name in braces, such as {i}",
                 MAX_HOLES);
      return -1;
    }
    if (*p == '*') {
      strcpy(holes[n++].name, "*");
      continue;
    }
    memcpy(holes[n].name, p + 1, (size_t)len);
    holes[n].name[len] = 0;
    if (find_hole(holes, n, p + 1, len)) {
      diag_error(L->diag, at, "placeholder {%s} appears twice", holes[n].name);
      return -1;
    }
    n++;
    p += len + 1;
  }
  return n;
}

/* Every placeholder of the file pattern must have a value from the
 * parameter pattern. */
static bool check_file_pattern(Lower *L, const Expr *file, const Hole *from, int nfrom) {
  Hole holes[MAX_HOLES];
  int n = check_holes(L, file, holes);
  for (int i = 0; i < n; i++)
    if (!find_hole(from, nfrom, holes[i].name, (int)strlen(holes[i].name))) {
      if (!strcmp(holes[i].name, "*"))
        diag_error(L->diag, file->loc, "'*' in the file name but not in the parameter pattern");
      else
        diag_error(L->diag, file->loc, "placeholder {%s} is not in the parameter pattern",
                   holes[i].name);
      return false;
    }
  return n >= 0;
}

/* "no parameter matches ..." with the first parameter names as a hint. */
static void no_match(Lower *L, const Expr *e, const char *what) {
  const Graph *g = L->g;
  StrBuf some = {0};
  sb_append(&some, "");
  for (int i = 0; i < g->n_params && i < 6; i++)
    sb_printf(&some, "%s%s", i ? ", " : "", g->nodes[g->params[i]].name);
  diag_error(L->diag, e->loc, "%s \"%s\" matches no parameter (they are %s%s)", what, e->name,
             some.data, g->n_params > 6 ? ", ..." : "");
  sb_free(&some);
}

/* ---- freeze ---- */

/* `freeze "encoder.*" "emb.weight"`: those parameters keep their values. */
static void apply_freeze(Lower *L, const Setting *st) {
  if (st->has_colon || st->nitems == 0) {
    diag_error(L->diag, st->loc, "freeze takes parameter name patterns: freeze \"encoder.*\"");
    return;
  }
  Graph *g = L->g;
  for (int k = 0; k < st->nitems; k++) {
    const Expr *e = want_string(L, st->items[k], "a freeze pattern");
    if (!e || !check_glob(L, e)) continue;
    bool any = false;
    for (int i = 0; i < g->n_params; i++) {
      Node *p = &g->nodes[g->params[i]];
      if (!trc_glob_match(e->name, e->name + strlen(e->name), p->name)) continue;
      p->frozen = true;
      any = true;
    }
    if (!any) no_match(L, e, "freeze pattern");
  }
}

/* ---- the weights block ---- */

/* `map "block.{i}.q.weight" "encoder.layer.{i}.attention.self.query.weight" [transposed]`. */
static void apply_map(Lower *L, const Setting *st, const Setting **mapped_by) {
  bool transposed = st->nitems == 3 && st->items[2]->kind == EX_IDENT &&
                    !strcmp(st->items[2]->name, "transposed");
  if (st->has_colon || !(st->nitems == 2 || transposed)) {
    diag_error(L->diag, st->loc,
               "map takes a parameter pattern, a file name pattern and optionally `transposed`");
    return;
  }
  const Expr *from = want_string(L, st->items[0], "a parameter pattern");
  const Expr *to = want_string(L, st->items[1], "a file name pattern");
  Hole holes[MAX_HOLES];
  int nholes = from ? check_holes(L, from, holes) : -1;
  if (nholes < 0 || !to || !check_file_pattern(L, to, holes, nholes)) return;
  Graph *g = L->g;
  bool any = false;
  for (int i = 0; i < g->n_params; i++) {
    Node *p = &g->nodes[g->params[i]];
    if (!match_from(from->name, p->name, holes, 0, &nholes)) continue;
    any = true;
    if (mapped_by[i]) {
      diag_error(L->diag, st->loc, "'%s' is mapped twice", p->name);
      diag_note(L->diag, mapped_by[i]->loc, "first mapped here");
      continue;
    }
    if (transposed && p->shape.rank != 2) {
      char sb[128];
      diag_error(L->diag, st->items[2]->loc, "'transposed' needs a 2-D parameter; '%s' is f32%s",
                 p->name, shape_str(&p->shape, sb));
      continue;
    }
    mapped_by[i] = st;
    p->file_name = fill_holes(to->name, holes, nholes);
    p->transposed = transposed;
  }
  if (!any) no_match(L, from, "map pattern");
}

/* `allow_missing "classifier.*"`, `allow_unexpected "pooler.*"`: patterns of
 * file names the trainer accepts a weight file without, or with. */
static void add_allowed(Lower *L, const Setting *st, NameList *list) {
  if (st->has_colon || st->nitems == 0) {
    diag_error(L->diag, st->loc, "%s takes file name patterns: %s \"pooler.*\"", st->key,
               st->key);
    return;
  }
  for (int k = 0; k < st->nitems; k++) {
    const Expr *e = want_string(L, st->items[k], "a file name pattern");
    if (e && check_glob(L, e)) VEC_PUSH(list->items, list->n, list->cap, xstrdup(e->name));
  }
}

/* Two parameters under one file name would overwrite each other in a file,
 * and the header's own key would make it no safetensors file. */
static void check_file_names(Lower *L) {
  const Graph *g = L->g;
  NameMap seen = {0};
  for (int i = 0; i < g->n_params; i++) {
    const Node *p = &g->nodes[g->params[i]];
    const char *name = node_file_name(p);
    int first;
    if (!strcmp(name, TRC_SAFETENSORS_METADATA))
      diag_error(L->diag, p->loc, "'%s' cannot be called '%s' in weight files: the name is "
                 "the .safetensors header's own", p->name, name);
    else if (namemap_get(&seen, name, &first))
      diag_error(L->diag, p->loc, "'%s' and '%s' would both be '%s' in weight files",
                 g->nodes[g->params[first]].name, p->name, name);
    else
      namemap_put(&seen, name, i);
  }
  namemap_free(&seen);
}

static void apply_weights_block(Lower *L, const TrainBlock *wb) {
  if (wb->next) diag_error(L->diag, wb->next->loc, "a file has at most one weights block");
  const Setting **mapped_by = xcalloc((size_t)L->g->n_params + 1, sizeof *mapped_by);
  for (const Setting *st = wb->settings; st; st = st->next) {
    if (!strcmp(st->key, "map")) apply_map(L, st, mapped_by);
    else if (!strcmp(st->key, "allow_missing")) add_allowed(L, st, &L->g->allow_missing);
    else if (!strcmp(st->key, "allow_unexpected")) add_allowed(L, st, &L->g->allow_unexpected);
    else
      diag_error(L->diag, st->loc,
                 "unknown weights setting '%s' (expected map, allow_missing or allow_unexpected)",
                 st->key);
  }
  free(mapped_by);
  check_file_names(L);
}

/* Trained parameters first, frozen ones after, each in declaration order:
 * the arena keeps them in this order, so that the gradient region and the
 * optimizer's state cover the trained prefix only. */
static void put_frozen_last(Graph *g) {
  if (g->n_params == 0) return;
  int *order = xmalloc((size_t)g->n_params * sizeof *order);
  int n = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < g->n_params; i++)
      if (g->nodes[g->params[i]].frozen == (pass == 1)) order[n++] = g->params[i];
  memcpy(g->params, order, (size_t)n * sizeof *order);
  free(order);
}

void apply_weight_settings(Lower *L, const TrainBlock *train, const TrainBlock *weights) {
  for (const Setting *st = train ? train->settings : NULL; st; st = st->next)
    if (!strcmp(st->key, "freeze")) apply_freeze(L, st);
  put_frozen_last(L->g);
  if (L->g->n_params > 0 && graph_trained_params(L->g) == 0)
    diag_error(L->diag, train->loc, "every parameter is frozen: nothing would train");
  if (weights) apply_weights_block(L, weights);
}
