/* ast.c — the AST's memory (one pool per Ast) and its printer. */
#include "internal.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

/* ---- pool ----
 * A chain of chunks, bump-allocated; only freed all at once. */

typedef struct Chunk Chunk;
struct Chunk {
  Chunk *next;
  size_t used, size;
  alignas(max_align_t) unsigned char data[];
};

struct Pool {
  Chunk *chunks; /* newest first */
};

enum { CHUNK_SIZE = 64 * 1024 };

Pool *pool_new(void) { return xcalloc(1, sizeof(Pool)); }

void *pool_alloc(Pool *pool, size_t size) {
  size = (size + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
  Chunk *c = pool->chunks;
  if (!c || c->size - c->used < size) {
    size_t data_size = size > CHUNK_SIZE ? size : CHUNK_SIZE;
    c = xmalloc(sizeof *c + data_size);
    c->used = 0;
    c->size = data_size;
    c->next = pool->chunks;
    pool->chunks = c;
  }
  void *p = c->data + c->used;
  c->used += size;
  return memset(p, 0, size);
}

char *pool_strndup(Pool *pool, const char *s, size_t n) {
  char *p = pool_alloc(pool, n + 1);
  memcpy(p, s, n);
  return p;
}

void pool_free(Pool *pool) {
  if (!pool) return;
  for (Chunk *c = pool->chunks, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  free(pool);
}

void vec_push(Pool *pool, Vec *vec, void *item) {
  if (vec->len == vec->cap) { /* the old array stays in the pool: at most half is waste */
    int cap = vec->cap ? 2 * vec->cap : 4;
    void **items = pool_alloc(pool, (size_t)cap * sizeof *items);
    if (vec->len) memcpy(items, vec->items, (size_t)vec->len * sizeof *items);
    vec->items = items;
    vec->cap = cap;
  }
  vec->items[vec->len++] = item;
}

Expr *ast_new_expr(Pool *pool, ExprKind kind, SrcLoc loc) {
  Expr *e = pool_alloc(pool, sizeof *e);
  e->kind = kind;
  e->loc = loc;
  return e;
}

int expr_chain(const Expr *e, const Expr ***nodes) {
  int n = 0;
  for (const Expr *x = e; x->kind == EX_BINARY; x = x->lhs) n++;
  *nodes = xmalloc((size_t)n * sizeof **nodes);
  int i = n;
  for (const Expr *x = e; x->kind == EX_BINARY; x = x->lhs) (*nodes)[--i] = x;
  return n;
}

const char *dtype_name(DType dtype) {
#define DTYPE_WORD(id, word, size) [id] = word,
  static const char *const words[] = {TRAINC_DTYPES(DTYPE_WORD)};
#undef DTYPE_WORD
  if (dtype == DT_BF16) return "bf16";
  return (unsigned)dtype < DT_COUNT ? words[dtype] : "?";
}

void ast_free(Ast *ast) {
  if (ast) pool_free(ast->pool); /* the Ast itself lives in its pool */
}

/* ---- printer ----
 * Prints text that parses back to the same AST: binary expressions fully
 * parenthesized, numbers in their shortest exact form. */

static void print_expr(FILE *out, const Expr *e);

/* Where the grammar wants a primary (the operand of '-', a repeat count), a
 * negation needs parentheses; binary expressions always have them. */
static void print_primary(FILE *out, const Expr *e) {
  if (e->kind != EX_NEG) {
    print_expr(out, e);
    return;
  }
  fputc('(', out);
  print_expr(out, e);
  fputc(')', out);
}

static void print_number(FILE *out, const Expr *e) {
  if (e->is_int) { /* at most 2^53: "%.0f" is exact */
    fprintf(out, "%.0f", e->num);
    return;
  }
  char buf[40];
  for (int precision = 1; precision <= 17; precision++) {
    snprintf(buf, sizeof buf, "%.*g", precision, e->num);
    if (strtod(buf, NULL) == e->num) break;
  }
  /* keep it a real: "2" would read back as an integer */
  fprintf(out, "%s%s", buf, strpbrk(buf, ".e") ? "" : ".0");
}

/* A size in the unit that gives the smallest whole count: 64MiB, 1500B. */
static void print_size(FILE *out, double num) {
  static const struct {
    const char *name;
    uint64_t bytes;
  } units[] = {{"TiB", 1ull << 40}, {"GiB", 1ull << 30}, {"GB", 1000000000},
               {"MiB", 1ull << 20}, {"MB", 1000000},    {"KiB", 1ull << 10},
               {"KB", 1000}};
  uint64_t bytes = (uint64_t)num; /* a whole number ≤ 2^53: exact */
  const char *unit = "B";
  uint64_t count = bytes;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (bytes > 0 && bytes % units[i].bytes == 0 && bytes / units[i].bytes < count) {
      unit = units[i].name;
      count = bytes / units[i].bytes;
    }
  }
  fprintf(out, "%llu%s", (unsigned long long)count, unit);
}

static void print_args(FILE *out, const Arg *args) {
  for (const Arg *a = args; a; a = a->next) {
    if (a->key) fprintf(out, "%s = ", a->key);
    print_expr(out, a->value);
    if (a->next) fputs(", ", out);
  }
}

/* ((a + b) - c): the chain's opening brackets at once, then each operator
 * with its right operand and closing bracket (a loop: see expr_chain). */
static void print_chain(FILE *out, const Expr *e) {
  const Expr **chain;
  int n = expr_chain(e, &chain);
  for (int i = 0; i < n; i++) fputc('(', out);
  print_expr(out, chain[0]->lhs);
  for (int i = 0; i < n; i++) {
    fprintf(out, " %c ", chain[i]->op);
    print_expr(out, chain[i]->rhs);
    fputc(')', out);
  }
  free(chain);
}

static void print_expr(FILE *out, const Expr *e) {
  switch (e->kind) {
  case EX_NUM: print_number(out, e); break;
  case EX_SIZE: print_size(out, e->num); break;
  case EX_IDENT: fputs(e->name, out); break;
  case EX_STRING: fprintf(out, "\"%s\"", e->name); break;
  case EX_BINARY: print_chain(out, e); break;
  case EX_NEG:
    fputc('-', out);
    print_primary(out, e->lhs);
    break;
  case EX_CALL:
    fprintf(out, "%s(", e->name);
    print_args(out, e->args);
    fputc(')', out);
    break;
  case EX_REPEAT:
    fputs("repeat ", out);
    print_primary(out, e->lhs);
    fputc(' ', out);
    print_expr(out, e->rhs);
    break;
  }
}

static void print_type(FILE *out, const TypeExpr *t) {
  fprintf(out, "%s[", dtype_name(t->dtype));
  for (int i = 0; i < t->rank; i++) {
    if (i > 0) fputs(", ", out);
    print_expr(out, t->dims[i]);
  }
  fputc(']', out);
}

static void print_stmt(FILE *out, const Stmt *s) {
  switch (s->kind) {
  case ST_INPUT:
  case ST_PARAM:
    fprintf(out, "%s %s : ", s->kind == ST_INPUT ? "input" : "param", s->name);
    print_type(out, &s->type);
    if (s->kind == ST_PARAM) {
      fputs(" = ", out);
      print_expr(out, s->value);
    }
    break;
  case ST_CONST:
  case ST_ASSIGN:
    fprintf(out, "%s%s = ", s->kind == ST_CONST ? "const " : "", s->name);
    print_expr(out, s->value);
    break;
  case ST_PREDICT:
  case ST_RETURN:
    fputs(s->kind == ST_PREDICT ? "predict " : "return ", out);
    print_expr(out, s->value);
    break;
  }
  fputc('\n', out);
}

static void print_body(FILE *out, const Stmt *body) {
  for (const Stmt *s = body; s; s = s->next) {
    fputs("  ", out);
    print_stmt(out, s);
  }
  fputs("}\n", out);
}

/* `key item item: item, item`. Before the colon, an item written with a
 * leading '(' gets a comma, or `name (a + b)` would read back as a call. */
static void print_setting(FILE *out, const Setting *s) {
  fprintf(out, "  %s", s->key);
  for (int i = 0; i < s->nitems; i++) {
    fputs(s->items[i]->kind == EX_BINARY && i > 0 ? ", " : " ", out);
    print_expr(out, s->items[i]);
  }
  if (s->has_colon) fputc(':', out);
  for (int i = 0; i < s->nafter; i++) {
    fputs(i > 0 ? ", " : " ", out);
    print_expr(out, s->after_colon[i]);
  }
  fputc('\n', out);
}

static bool print_setting_blocks(FILE *out, const char *keyword, const TrainBlock *blocks,
                                 bool printed) {
  for (const TrainBlock *t = blocks; t; t = t->next) {
    fprintf(out, "%s%s {\n", printed ? "\n" : "", keyword);
    for (const Setting *s = t->settings; s; s = s->next) print_setting(out, s);
    fputs("}\n", out);
    printed = true;
  }
  return printed;
}

/* Top-level items print grouped (constants, defs, models, train blocks,
 * weights blocks),
 * separated by blank lines. */
void ast_print(FILE *out, const Ast *ast) {
  bool printed = false;
  for (const Stmt *s = ast->consts; s; s = s->next) {
    print_stmt(out, s);
    printed = true;
  }
  for (const Def *d = ast->defs; d; d = d->next) {
    fprintf(out, "%sdef %s(", printed ? "\n" : "", d->name);
    for (int i = 0; i < d->nparams; i++) fprintf(out, "%s%s", i > 0 ? ", " : "", d->params[i]);
    fputs(") {\n", out);
    print_body(out, d->body);
    printed = true;
  }
  for (const Model *m = ast->models; m; m = m->next) {
    fprintf(out, "%smodel %s {\n", printed ? "\n" : "", m->name);
    print_body(out, m->body);
    printed = true;
  }
  printed = print_setting_blocks(out, "train", ast->trains, printed);
  print_setting_blocks(out, "weights", ast->weights, printed);
}
