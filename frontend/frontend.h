/* frontend.h — the model language's scanner and parser: .nn text → AST.
 *
 * The whole interface of the frontend stage. The AST is plain data: later
 * stages (ir/ lowering) read it and never call back into the parser. Every node
 * carries the SrcLoc of its first token so that any stage can point at it.
 *
 * The grammar is documented in docs/language.md. Statements end at a newline
 * (newlines inside ( ) and [ ] are ignored), so `x = a` / `- b` on two lines are
 * two statements. All AST memory belongs to the Ast and goes with ast_free(). */
#ifndef TRAINC_FRONTEND_H
#define TRAINC_FRONTEND_H

#include "support.h"

typedef enum {
  EX_NUM,    /* 42, 1e-3, 0.5             : num, is_int                      */
  EX_SIZE,   /* 64MiB, 512KB, 100B         : num (bytes, exact integer)       */
  EX_IDENT,  /* x, B, epoch               : name                             */
  EX_BINARY, /* a + b, a @ b              : op ('+','-','*','/','@'), lhs, rhs */
  EX_NEG,    /* -a                        : lhs                              */
  EX_CALL,   /* f(a, b, k = v)            : name, args                       */
  EX_REPEAT, /* repeat N f(args)          : lhs = count, rhs = the EX_CALL   */
  EX_STRING, /* "h.{i}.attn.*" (settings)  : name, without the quotes        */
} ExprKind;

typedef struct Expr Expr;
typedef struct Arg Arg;

struct Arg {
  const char *key; /* keyword argument name, NULL when positional */
  Expr *value;
  SrcLoc loc;
  Arg *next;
};

struct Expr {
  ExprKind kind;
  SrcLoc loc;
  double num;       /* EX_NUM, EX_SIZE */
  bool is_int;      /* EX_NUM written without '.', 'e' (e.g. 784) */
  const char *name; /* EX_IDENT, EX_CALL (callee) */
  int op;           /* EX_BINARY */
  Expr *lhs, *rhs;  /* EX_BINARY, EX_NEG (lhs), EX_REPEAT */
  Arg *args;        /* EX_CALL, in source order */
  int nargs;
};

/* The element types, one list: its enum, its spelling and its size. The
 * runtime's trc_dtype (trainc.h) lists the same types in the same order,
 * which ir/graph.c checks at compile time, so a DType is its ABI value. */
#define TRAINC_DTYPES(X) X(DT_F32, "f32", 4) X(DT_I32, "i32", 4) X(DT_U8, "u8", 1)
#define TRAINC_DTYPE_ENUM(id, word, size) id,
#define TRAINC_DTYPE_ONE(id, word, size) +1
/* DT_BF16 comes after them: no model file writes it, no runtime input has
 * it; the planner stores activations in it (`--compress bf16`). */
typedef enum { TRAINC_DTYPES(TRAINC_DTYPE_ENUM) DT_BF16 } DType;
enum { DT_COUNT = 0 TRAINC_DTYPES(TRAINC_DTYPE_ONE) }; /* the model file's types */
const char *dtype_name(DType t); /* "f32", "i32", "u8", "bf16" */

/* A tensor type as written: `u8[B, 784]`. Dims are integer expressions over
 * constants, def parameters and the batch symbol B; rank 0 is a scalar `f32[]`. */
#define AST_MAX_RANK 8
typedef struct {
  DType dtype;
  int rank;
  Expr *dims[AST_MAX_RANK];
  SrcLoc loc;
} TypeExpr;

typedef enum {
  ST_INPUT,   /* input NAME : TYPE                 */
  ST_PARAM,   /* param NAME : TYPE = INIT-CALL     */
  ST_CONST,   /* const NAME = EXPR                 */
  ST_ASSIGN,  /* NAME = EXPR                       */
  ST_PREDICT, /* predict EXPR                      */
  ST_RETURN,  /* return EXPR   (def bodies only)   */
} StmtKind;

typedef struct Stmt Stmt;
struct Stmt {
  StmtKind kind;
  SrcLoc loc;
  const char *name; /* INPUT, PARAM, CONST, ASSIGN */
  TypeExpr type;    /* INPUT, PARAM */
  Expr *value;      /* PARAM (initializer call), CONST, ASSIGN, PREDICT, RETURN */
  Stmt *next;
};

typedef struct Def Def;
struct Def { /* def NAME(p1, p2, ...) { body } */
  const char *name;
  SrcLoc loc;
  const char **params;
  SrcLoc *param_locs;
  int nparams;
  Stmt *body;
  Def *next;
};

typedef struct Model Model;
struct Model { /* model NAME { body } */
  const char *name;
  SrcLoc loc;
  Stmt *body;
  Model *next;
};

/* One line of a train block: `KEY item item ... [: item, item ...]`.
 * Items are expressions (numbers, sizes, identifiers, calls such as
 * `adamw(lr = 1e-3)`); commas between items are optional and not recorded.
 *   batch 128                      → key "batch", items [128]
 *   checkpoint budget 64MiB        → key "checkpoint", items [budget, 64MiB]
 *   eval every epoch: accuracy, f1 → key "eval", items [every, epoch],
 *                                    after_colon [accuracy, f1]
 * The frontend checks only the shape of a setting; ir/ gives it meaning. */
typedef struct Setting Setting;
struct Setting {
  const char *key;
  SrcLoc loc;
  Expr **items;
  int nitems;
  Expr **after_colon;
  int nafter;
  bool has_colon;
  Setting *next;
};

typedef struct TrainBlock TrainBlock;
struct TrainBlock {
  SrcLoc loc;
  Setting *settings;
  TrainBlock *next; /* a file may hold more than one; ir/ rejects that */
};

/* A parsed file. Top-level items keep their source order within each list. */
typedef struct {
  SourceFile *file;    /* owned by the caller of parse_source() */
  Stmt *consts;        /* top-level `const NAME = EXPR` statements */
  Def *defs;
  Model *models;
  TrainBlock *trains;
  TrainBlock *weights; /* `weights { ... }` blocks: settings, as in a train block */
  void *pool;          /* private: the memory every node lives in */
} Ast;

/* Parses a whole file. Syntax errors go to diag (as many as recovery finds);
 * the result is NULL when any error was reported, so a caller never sees a
 * half-built AST. The returned Ast refers to `file` for locations: keep the
 * file alive as long as the Ast. */
Ast *parse_source(SourceFile *file, Diag *diag);
void ast_free(Ast *ast);

/* A chain `a + b - c` parses to a left-deep tree as deep as the chain is
 * long (100k terms: 100k levels), so no walker may recurse along it. This
 * gives a chain's binary nodes bottom-up: returns how many there are (0 when
 * e is not binary) and sets *nodes to them, innermost first, in an array the
 * caller frees; the chain's first operand is (*nodes)[0]->lhs. Walkers loop
 * over it and recurse only into right operands, which nest only through
 * brackets, '-' and calls, as deep as the parser's stack allows. */
int expr_chain(const Expr *e, const Expr ***nodes);

/* Prints the AST back as model-language text, one statement a line (used by
 * tests: parse → print → parse gives the same print). */
void ast_print(FILE *out, const Ast *ast);

#endif
