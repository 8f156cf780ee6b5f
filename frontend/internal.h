/* internal.h — what the frontend's scanner (lexer.l), parser (parser.y) and
 * AST code (ast.c) share. Not part of the stage's interface: other stages
 * include frontend.h only. */
#ifndef TRAINC_FRONTEND_INTERNAL_H
#define TRAINC_FRONTEND_INTERNAL_H

#include "frontend.h"

/* ---- the node pool: every node, string and array of one Ast lives here ---- */
typedef struct Pool Pool;
Pool *pool_new(void);
void *pool_alloc(Pool *pool, size_t size); /* zeroed, suitably aligned */
char *pool_strndup(Pool *pool, const char *s, size_t n);
void pool_free(Pool *pool);

/* A list under construction (parser semantic values), grown inside the pool,
 * so that error recovery may drop one without leaking. */
typedef struct {
  void **items;
  int len, cap;
} Vec;
void vec_push(Pool *pool, Vec *vec, void *item);

Expr *ast_new_expr(Pool *pool, ExprKind kind, SrcLoc loc);

#define MAX_IDENT_LEN 64
#define MAX_STRING_LEN 200 /* a tensor name; Hugging Face's are under 100 */

/* How an end-of-statement token came about; messages name it after its origin. */
typedef enum {
  NL_NEWLINE,      /* '\n' outside ( ) and [ ]            */
  NL_SEMICOLON,    /* ';'                                 */
  NL_BEFORE_BRACE, /* inserted before a '}' ending a line  */
  NL_END_OF_FILE,  /* inserted once at the end of the file */
} NlKind;

typedef struct {
  char ch; /* '(' or '[' */
  SrcLoc loc;
} Bracket;

/* The state of one parse, shared by scanner (as yyextra) and parser. */
typedef struct {
  const SourceFile *file;
  Diag *diag;
  int errors;     /* reported by this parse; yyparse may return 0 after recovery */
  int error_line; /* line of the last error reported */
  int ops;        /* operators, calls and repeats so far (TRAINC_MAX_OPS) */
  int stop;       /* past the limit: 1, the scanner ends the parse; 2, it has */
  Pool *pool;
  Vec consts, defs, models, trains, weights; /* top-level items, in source order */

  /* scanner position and bracket nesting */
  int line, col;
  Bracket *brackets; /* open ( and [, innermost last: newlines inside are skipped */
  int nbrackets, brackets_cap;
  bool newline_skipped; /* since the last token */
  bool brace_pending;   /* a '}' waits behind the NL inserted before it */
  SrcLoc brace_loc;
  bool eof_nl_sent;

  /* the lookahead token, as the error messages need it */
  int token, prev_token;      /* token kinds; prev_token starts as NL */
  bool after_skipped_newline; /* the lookahead is the first on its line inside ( ) or [ ] */
  NlKind nl_kind;             /* origin of the last NL token */
} ParseCtx;

/* Reports an error of this parse (counted in ctx->errors). */
void parse_error(ParseCtx *ctx, SrcLoc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
