/* test_passes.h — what the tests of the passes stage share: a CHECK that
 * counts failures and goes on, a value's bytes, and a model file compiled up
 * to autodiff. */
#ifndef TEST_PASSES_H
#define TEST_PASSES_H

#include "passes.h"

static int failures;
#define CHECK(cond, ...)                                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      failures++;                                                                          \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);             \
      fprintf(stderr, __VA_ARGS__);                                                        \
      fputc('\n', stderr);                                                                 \
    }                                                                                      \
  } while (0)

/* A value's bytes (its shape times its element size). */
static inline uint64_t value_bytes(const Node *n) {
  return (uint64_t)shape_numel(&n->shape) * (uint64_t)dtype_size(n->dtype);
}

/* Parsed, lowered and differentiated; NULL (errors on stderr) when it does
 * not compile or src is NULL. Frees src. */
static inline Graph *compile_source(SourceFile *src) {
  if (!src) return NULL;
  Diag diag;
  diag_init(&diag, stderr);
  Ast *ast = parse_source(src, &diag);
  Graph *g = ast ? lower_ast(ast, NULL, CONV_LIBRARY, &diag) : NULL;
  if (g) autodiff(g);
  ast_free(ast);
  source_free(src);
  return g;
}

#endif
