/* parser.y — the model language's grammar (docs/language.md) → AST.
 *
 * A pure (reentrant) LALR parser over the tokens of lexer.l. Statements end
 * with NL tokens: the scanner turns '\n' (outside brackets) and ';' into NL,
 * inserts one before a '}' that ends a line, and one at the end of the file,
 * so the grammar below never sees optional terminators.
 *
 * Errors: syntax errors are reported by yyreport_syntax_error() (the scanner
 * reports lexical ones itself and hands over YYerror, which recovers without
 * a second message). Recovery resumes at the next NL — in a block, in a train
 * block, at top level — so one run reports independent errors of many lines.
 * Every AST node lives in the parse's pool; recovery drops values freely. */

%require "3.8"
%define api.pure full
%define api.token.prefix {TOK_}
%define api.location.type {SrcLoc}
%define parse.error custom
%define parse.lac full
%locations
%lex-param {yyscan_t scanner}
%parse-param {yyscan_t scanner} {ParseCtx *ctx}

%code requires {
#include "internal.h"
typedef void *yyscan_t; /* also typedef'd by lexer.h: breaks the include cycle */
}

%code {
#include "lexer.h"

#include <limits.h>
#include <stdlib.h>

/* A rule's location is that of its first symbol; an empty rule's is that of
 * the symbol before it. */
#define YYLLOC_DEFAULT(Cur, Rhs, N) ((Cur) = (N) ? YYRHSLOC(Rhs, 1) : YYRHSLOC(Rhs, 0))

static void yyerror(SrcLoc *loc, yyscan_t scanner, ParseCtx *ctx, const char *msg);
static void missing_brace(ParseCtx *ctx, SrcLoc open, int lookahead, SrcLoc where);

static Expr *new_expr(ParseCtx *ctx, ExprKind kind, SrcLoc loc) {
  return ast_new_expr(ctx->pool, kind, loc);
}

/* Operators, calls and repeats count against the one size limit of a model
 * (support.h). Past it: one error where the file passes it, and the scanner
 * ends the parse (the rest of a 16 MiB file would be gigabytes of AST). */
static void count_op(ParseCtx *ctx, SrcLoc loc) {
  if (++ctx->ops != TRAINC_MAX_OPS + 1) return;
  parse_error(ctx, loc, "the file has more than %d operations, the limit of every model",
              TRAINC_MAX_OPS);
  ctx->stop = 1;
}

static Expr *new_binary(ParseCtx *ctx, int op, Expr *lhs, Expr *rhs) {
  count_op(ctx, rhs->loc);
  Expr *e = new_expr(ctx, EX_BINARY, lhs->loc);
  e->op = op;
  e->lhs = lhs;
  e->rhs = rhs;
  return e;
}

static Expr *new_neg(ParseCtx *ctx, SrcLoc loc, Expr *operand) {
  count_op(ctx, loc);
  Expr *e = new_expr(ctx, EX_NEG, loc);
  e->lhs = operand;
  return e;
}

static Expr *new_ident(ParseCtx *ctx, const char *name, SrcLoc loc) {
  Expr *e = new_expr(ctx, EX_IDENT, loc);
  e->name = name;
  return e;
}

/* Chains the nodes collected in a Vec through their `next` fields, in order. */
#define DEFINE_LINK(T)                                                         \
  static T *link_##T(Vec v) {                                                  \
    for (int i = 0; i + 1 < v.len; i++) ((T *)v.items[i])->next = v.items[i + 1]; \
    return v.len ? v.items[0] : NULL;                                          \
  }
DEFINE_LINK(Arg)
DEFINE_LINK(Stmt)
DEFINE_LINK(Setting)
DEFINE_LINK(Def)
DEFINE_LINK(Model)
DEFINE_LINK(TrainBlock)

static Expr **expr_array(ParseCtx *ctx, Vec v) {
  Expr **a = pool_alloc(ctx->pool, (size_t)v.len * sizeof *a);
  for (int i = 0; i < v.len; i++) a[i] = v.items[i];
  return a;
}

static Arg *new_arg(ParseCtx *ctx, const char *key, Expr *value, SrcLoc loc) {
  Arg *a = pool_alloc(ctx->pool, sizeof *a);
  a->key = key;
  a->value = value;
  a->loc = loc;
  return a;
}

/* Keyword arguments come last: f(x, k = v), never f(k = v, x). */
static void push_arg(ParseCtx *ctx, Vec *args, Arg *arg) {
  if (!arg->key && args->len > 0 && ((Arg *)args->items[args->len - 1])->key)
    parse_error(ctx, arg->loc, "positional argument after keyword argument");
  vec_push(ctx->pool, args, arg);
}

static Expr *new_call(ParseCtx *ctx, const char *name, SrcLoc loc, Vec args) {
  count_op(ctx, loc);
  Expr *e = new_expr(ctx, EX_CALL, loc);
  e->name = name;
  e->args = link_Arg(args);
  e->nargs = args.len;
  return e;
}

static TypeExpr make_type(ParseCtx *ctx, DType dtype, SrcLoc loc, Vec dims) {
  TypeExpr t = {.dtype = dtype, .loc = loc};
  for (int i = 0; i < dims.len; i++) {
    if (i == AST_MAX_RANK) {
      parse_error(ctx, ((Expr *)dims.items[i])->loc,
                  "tensor type has %d dimensions, at most %d are allowed", dims.len,
                  AST_MAX_RANK);
      break;
    }
    t.dims[t.rank++] = dims.items[i];
  }
  return t;
}

static Stmt *new_stmt(ParseCtx *ctx, StmtKind kind, SrcLoc loc, const char *name, Expr *value) {
  Stmt *s = pool_alloc(ctx->pool, sizeof *s);
  s->kind = kind;
  s->loc = loc;
  s->name = name;
  s->value = value;
  return s;
}

static Setting *new_setting(ParseCtx *ctx, const char *key, SrcLoc loc, Vec items,
                            bool has_colon, Vec after) {
  Setting *s = pool_alloc(ctx->pool, sizeof *s);
  s->key = key;
  s->loc = loc;
  s->items = expr_array(ctx, items);
  s->nitems = items.len;
  s->has_colon = has_colon;
  s->after_colon = expr_array(ctx, after);
  s->nafter = after.len;
  return s;
}

static Def *new_def(ParseCtx *ctx, const char *name, SrcLoc loc, Vec params, Vec body) {
  Def *d = pool_alloc(ctx->pool, sizeof *d);
  d->name = name;
  d->loc = loc;
  d->nparams = params.len;
  d->params = pool_alloc(ctx->pool, (size_t)params.len * sizeof *d->params);
  d->param_locs = pool_alloc(ctx->pool, (size_t)params.len * sizeof *d->param_locs);
  for (int i = 0; i < params.len; i++) {
    Expr *p = params.items[i];
    d->params[i] = p->name;
    d->param_locs[i] = p->loc;
  }
  d->body = link_Stmt(body);
  return d;
}

static Model *new_model(ParseCtx *ctx, const char *name, SrcLoc loc, Vec body) {
  Model *m = pool_alloc(ctx->pool, sizeof *m);
  m->name = name;
  m->loc = loc;
  m->body = link_Stmt(body);
  return m;
}

static TrainBlock *new_train(ParseCtx *ctx, SrcLoc loc, Vec settings) {
  TrainBlock *t = pool_alloc(ctx->pool, sizeof *t);
  t->loc = loc;
  t->settings = link_Setting(settings);
  return t;
}

}

%union {
  const char *name;
  Expr *expr;
  Arg *arg;
  Stmt *stmt;
  Setting *setting;
  Def *def;
  Model *model;
  TrainBlock *train;
  TypeExpr type;
  DType dtype;
  Vec vec;
  bool closed;
}

%token <name> IDENT "identifier"
%token <expr> NUMBER "number"
%token <expr> SIZE "size"
%token NL "end of line"
%token <expr> STRING "string"
%token MODEL "'model'" DEF "'def'" TRAIN "'train'" WEIGHTS "'weights'"
%token INPUT "'input'" PARAM "'param'" CONST "'const'" PREDICT "'predict'" RETURN "'return'"
%token REPEAT "'repeat'" F32 "'f32'" I32 "'i32'" U8 "'u8'"

/* Two shift/reduce choices, both resolved as shift:
 *  - after a block's statements, NL, 'const' and error recovery continue the
 *    block; only a token that can start nothing else there ('def', 'model',
 *    'train', end of file) closes it without its '}' (an error, see
 *    missing_brace);
 *  - inside a setting, `name (` starts a call, not two items. */
%precedence MISSING_BRACE
%precedence NL CONST error
%precedence NOT_A_CALL
%precedence '('

%type <expr> expr term unary primary call item
%type <arg> arg
%type <stmt> stmt const_stmt
%type <setting> setting
%type <def> def
%type <model> model
%type <train> train weights
%type <type> type
%type <dtype> dtype
%type <vec> params param_list stmt_block stmts setting_block settings
%type <vec> dims dim_list args arg_list items items1
%type <closed> block_end

%initial-action { @$ = (SrcLoc){ctx->file, 1, 1}; }

%%

file
  : %empty
  | file NL
  | file const_stmt NL { vec_push(ctx->pool, &ctx->consts, $2); }
  | file def           { vec_push(ctx->pool, &ctx->defs, $2); }
  | file model         { vec_push(ctx->pool, &ctx->models, $2); }
  | file train         { vec_push(ctx->pool, &ctx->trains, $2); }
  | file weights       { vec_push(ctx->pool, &ctx->weights, $2); }
  | file error NL /* no yyerrok: after a bad block header, each body line
                     would be another error at top level */
  ;

def
  : DEF IDENT '(' params ')' stmt_block { $$ = new_def(ctx, $2, @1, $4, $6); }
  ;

params
  : %empty     { $$ = (Vec){0}; }
  | param_list
  ;

param_list
  : IDENT                { $$ = (Vec){0}; vec_push(ctx->pool, &$$, new_ident(ctx, $1, @1)); }
  | param_list ',' IDENT { $$ = $1; vec_push(ctx->pool, &$$, new_ident(ctx, $3, @3)); }
  ;

model
  : MODEL IDENT stmt_block { $$ = new_model(ctx, $2, @1, $3); }
  ;

train
  : TRAIN setting_block { $$ = new_train(ctx, @1, $2); }
  ;

weights
  : WEIGHTS setting_block { $$ = new_train(ctx, @1, $2); }
  ;

stmt_block
  : '{' stmts block_end    { $$ = $2; if (!$3) missing_brace(ctx, @1, yychar, yylloc); }
  ;

setting_block
  : '{' settings block_end { $$ = $2; if (!$3) missing_brace(ctx, @1, yychar, yylloc); }
  ;

block_end
  : '}'                         { $$ = true; }
  | %empty %prec MISSING_BRACE  { $$ = false; }
  ;

stmts
  : %empty        { $$ = (Vec){0}; }
  | stmts NL
  | stmts stmt NL { $$ = $1; vec_push(ctx->pool, &$$, $2); }
  | stmts error NL { yyerrok; } /* the next line is a fresh start */
  ;

stmt
  : INPUT IDENT ':' type          { $$ = new_stmt(ctx, ST_INPUT, @1, $2, NULL); $$->type = $4; }
  | PARAM IDENT ':' type '=' call { $$ = new_stmt(ctx, ST_PARAM, @1, $2, $6); $$->type = $4; }
  | const_stmt
  | IDENT '=' expr                { $$ = new_stmt(ctx, ST_ASSIGN, @1, $1, $3); }
  | PREDICT expr                  { $$ = new_stmt(ctx, ST_PREDICT, @1, NULL, $2); }
  | RETURN expr                   { $$ = new_stmt(ctx, ST_RETURN, @1, NULL, $2); }
  ;

const_stmt
  : CONST IDENT '=' expr { $$ = new_stmt(ctx, ST_CONST, @1, $2, $4); }
  ;

type
  : dtype '[' dims ']' { $$ = make_type(ctx, $1, @1, $3); }
  ;

dtype
  : F32 { $$ = DT_F32; }
  | I32 { $$ = DT_I32; }
  | U8  { $$ = DT_U8; }
  ;

dims
  : %empty   { $$ = (Vec){0}; }
  | dim_list
  ;

dim_list
  : expr              { $$ = (Vec){0}; vec_push(ctx->pool, &$$, $1); }
  | dim_list ',' expr { $$ = $1; vec_push(ctx->pool, &$$, $3); }
  ;

settings
  : %empty              { $$ = (Vec){0}; }
  | settings NL
  | settings setting NL { $$ = $1; vec_push(ctx->pool, &$$, $2); }
  | settings error NL { yyerrok; }
  ;

setting
  : IDENT items            { $$ = new_setting(ctx, $1, @1, $2, false, (Vec){0}); }
  | IDENT items ':' items1 { $$ = new_setting(ctx, $1, @1, $2, true, $4); }
  ;

items /* { item [','] } */
  : %empty         { $$ = (Vec){0}; }
  | items item     { $$ = $1; vec_push(ctx->pool, &$$, $2); }
  | items item ',' { $$ = $1; vec_push(ctx->pool, &$$, $2); }
  ;

items1 /* item { [','] item } */
  : item            { $$ = (Vec){0}; vec_push(ctx->pool, &$$, $1); }
  | items1 item     { $$ = $1; vec_push(ctx->pool, &$$, $2); }
  | items1 ',' item { $$ = $1; vec_push(ctx->pool, &$$, $3); }
  ;

item
  : primary
  | STRING
  | '-' primary { $$ = new_neg(ctx, @1, $2); }
  ;

expr
  : term
  | expr '+' term { $$ = new_binary(ctx, '+', $1, $3); }
  | expr '-' term { $$ = new_binary(ctx, '-', $1, $3); }
  ;

term
  : unary
  | term '*' unary { $$ = new_binary(ctx, '*', $1, $3); }
  | term '/' unary { $$ = new_binary(ctx, '/', $1, $3); }
  | term '@' unary { $$ = new_binary(ctx, '@', $1, $3); }
  ;

unary
  : primary
  | '-' unary { $$ = new_neg(ctx, @1, $2); }
  ;

primary
  : NUMBER
  | SIZE
  | IDENT %prec NOT_A_CALL { $$ = new_ident(ctx, $1, @1); }
  | call
  | '(' expr ')'           { $$ = $2; }
  | REPEAT primary call    { count_op(ctx, @1); $$ = new_expr(ctx, EX_REPEAT, @1);
                             $$->lhs = $2; $$->rhs = $3; }
  ;

call
  : IDENT '(' args ')' { $$ = new_call(ctx, $1, @1, $3); }
  | dtype '(' args ')' { $$ = new_call(ctx, dtype_name($1), @1, $3); }
  ;

args
  : %empty   { $$ = (Vec){0}; }
  | arg_list
  ;

arg_list
  : arg              { $$ = (Vec){0}; push_arg(ctx, &$$, $1); }
  | arg_list ',' arg { $$ = $1; push_arg(ctx, &$$, $3); }
  ;

arg
  : expr           { $$ = new_arg(ctx, NULL, $1, @1); }
  | IDENT '=' expr { $$ = new_arg(ctx, $1, $3, @1); }
  ;

%%

void parse_error(ParseCtx *ctx, SrcLoc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_verror(ctx->diag, loc, fmt, ap);
  va_end(ap);
  ctx->errors++;
  ctx->error_line = loc.line;
}

/* Called by bison only when its stacks overflow (YYMAXDEPTH): deep nesting. */
static void yyerror(SrcLoc *loc, yyscan_t scanner, ParseCtx *ctx, const char *msg) {
  parse_error(ctx, *loc, "nesting too deep (%s)", msg);
}

static const char *token_name(yysymbol_kind_t sym) { return yysymbol_name(sym); }

/* A block ended by a top-level keyword or the end of the file: blocks do not
 * nest, so the '}' is missing right there. */
static void missing_brace(ParseCtx *ctx, SrcLoc open, int lookahead, SrcLoc where) {
  parse_error(ctx, where, "missing '}' before %s", token_name(YYTRANSLATE(lookahead)));
  diag_note(ctx->diag, open, "to match this '{'");
}

/* The lookahead as the user wrote it: NL tokens have several origins. */
static const char *lookahead_name(const ParseCtx *ctx, yysymbol_kind_t sym) {
  if (sym != YYSYMBOL_NL) return token_name(sym);
  switch (ctx->nl_kind) {
  case NL_NEWLINE: return "end of line";
  case NL_SEMICOLON: return "';'";
  case NL_BEFORE_BRACE: return "'}'";
  case NL_END_OF_FILE: break;
  }
  return "end of file";
}

/* Tokens named as one entry in "expected ..." lists when all of them are
 * acceptable (token codes, 0-terminated). */
static const struct {
  const char *name;
  int tokens[10];
} token_groups[] = {
    {"expression",
     {TOK_IDENT, TOK_NUMBER, TOK_SIZE, '(', '-', TOK_REPEAT, TOK_F32, TOK_I32, TOK_U8}},
    {"statement", {TOK_IDENT, TOK_INPUT, TOK_PARAM, TOK_CONST, TOK_PREDICT, TOK_RETURN}},
    {"operator", {'+', '-', '*', '/', '@'}},
};

enum { MAX_EXPECTED = 5 }; /* longer lists say less than "unexpected X" alone */

/* Appends ", expected A, B or C" for the acceptable symbols, grouped; nothing
 * when they are too many. At the start of a line, blank lines and the end of
 * the file are always acceptable and never the fix, so they go unmentioned. */
static void append_expected(StrBuf *msg, const ParseCtx *ctx, const yysymbol_kind_t *syms,
                            int nsyms) {
  bool open[YYNTOKENS] = {false}; /* acceptable and not yet named */
  for (int i = 0; i < nsyms; i++) open[syms[i]] = true;
  bool at_line_start = ctx->prev_token == TOK_NL || ctx->prev_token == '{';
  if (at_line_start) open[YYSYMBOL_NL] = open[YYSYMBOL_YYEOF] = false;
  /* Where '}' may close a block, the tokens that close it by the missing-'}'
   * rule are acceptable only as an error: a top-level keyword, the end of the
   * file, and 'const' where it is no statement (in a train block). */
  if (open[YYTRANSLATE('}')]) {
    open[YYSYMBOL_DEF] = open[YYSYMBOL_MODEL] = open[YYSYMBOL_TRAIN] = false;
    open[YYSYMBOL_WEIGHTS] = false;
    open[YYSYMBOL_YYEOF] = false;
    if (!open[YYSYMBOL_INPUT]) open[YYSYMBOL_CONST] = false;
  }

  const char *names[MAX_EXPECTED + 1];
  int n = 0;
  for (size_t g = 0; g < sizeof token_groups / sizeof token_groups[0]; g++) {
    bool all = true;
    for (const int *t = token_groups[g].tokens; *t; t++) all = all && open[YYTRANSLATE(*t)];
    if (!all) continue;
    for (const int *t = token_groups[g].tokens; *t; t++) open[YYTRANSLATE(*t)] = false;
    if (n <= MAX_EXPECTED) names[n++] = token_groups[g].name;
  }
  for (int s = 0; s < YYNTOKENS; s++)
    if (open[s] && n <= MAX_EXPECTED) names[n++] = token_name(s);

  if (n == 0 || n > MAX_EXPECTED) return;
  sb_append(msg, ", expected ");
  for (int i = 0; i < n; i++) {
    if (i > 0) sb_append(msg, i == n - 1 ? " or " : ", ");
    sb_append(msg, names[i]);
  }
}

/* An error on the first token of a line inside ( or [ — or at the end of the
 * file — most likely means the bracket was never closed: point at it. */
static void note_unclosed_bracket(const ParseCtx *ctx, yysymbol_kind_t sym) {
  if (ctx->nbrackets == 0) return;
  bool at_eof = sym == YYSYMBOL_YYEOF || (sym == YYSYMBOL_NL && ctx->nl_kind == NL_END_OF_FILE);
  if (!at_eof && !ctx->after_skipped_newline) return;
  const Bracket *b = &ctx->brackets[ctx->nbrackets - 1];
  diag_note(ctx->diag, b->loc, "to match this '%c'", b->ch);
}

static int yyreport_syntax_error(const yypcontext_t *pctx, yyscan_t scanner, ParseCtx *ctx) {
  yysymbol_kind_t expected[YYNTOKENS];
  int nexpected = yypcontext_expected_tokens(pctx, expected, YYNTOKENS);
  if (nexpected < 0) nexpected = 0; /* LAC ran out of stack: say just "unexpected X" */
  yysymbol_kind_t got = yypcontext_token(pctx);
  StrBuf msg = {0};
  sb_printf(&msg, "unexpected %s", lookahead_name(ctx, got));
  append_expected(&msg, ctx, expected, nexpected);
  parse_error(ctx, *yypcontext_location(pctx), "%s", msg.data);
  sb_free(&msg);
  note_unclosed_bracket(ctx, got);
  /* Recovery skips to the next NL: make newlines count again even when a
   * bracket was left open. */
  ctx->nbrackets = 0;
  return 0;
}

Ast *parse_source(SourceFile *file, Diag *diag) {
  Pool *pool = pool_new();
  ParseCtx ctx = {.file = file, .diag = diag, .pool = pool, .line = 1, .col = 1,
                  .token = TOK_NL, .prev_token = TOK_NL};
  if (file->len >= INT_MAX) { /* columns and flex's buffer sizes are ints */
    parse_error(&ctx, (SrcLoc){file, 1, 1}, "file too large");
  } else {
    yyscan_t scanner;
    if (yylex_init_extra(&ctx, &scanner) != 0) {
      parse_error(&ctx, NO_LOC, "cannot create the scanner (out of memory)");
    } else {
      YY_BUFFER_STATE buffer = yy_scan_bytes(file->text, (int)file->len, scanner);
      yyparse(scanner, &ctx);
      yy_delete_buffer(buffer, scanner);
      yylex_destroy(scanner);
    }
  }
  free(ctx.brackets);
  if (ctx.errors > 0) {
    pool_free(pool);
    return NULL;
  }
  Ast *ast = pool_alloc(pool, sizeof *ast);
  ast->file = file;
  ast->pool = pool;
  ast->consts = link_Stmt(ctx.consts);
  ast->defs = link_Def(ctx.defs);
  ast->models = link_Model(ctx.models);
  ast->trains = link_TrainBlock(ctx.trains);
  ast->weights = link_TrainBlock(ctx.weights);
  return ast;
}
