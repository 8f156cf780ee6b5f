/* fuzz_frontend — libFuzzer harness for the frontend.
 *
 * Any bytes must parse to an AST or to diagnostics without a crash, a leak or
 * undefined behaviour; and an AST must print as text that parses back to an
 * AST printing the same text (the round-trip property of the golden tests). */
#include "frontend.h"

#include <stdlib.h>
#include <string.h>

static FILE *devnull;

/* The AST printed into a fresh string, or NULL when the text has errors. */
static char *parse_and_print(const char *text, size_t len, size_t *printed_len) {
  char *copy = xmalloc(len + 1); /* SourceFile text is NUL-terminated */
  memcpy(copy, text, len);
  copy[len] = '\0';
  SourceFile file = {.path = "fuzz.nn", .text = copy, .len = len};
  Diag diag;
  diag_init(&diag, devnull);
  Ast *ast = parse_source(&file, &diag);
  char *out = NULL;
  if (ast) {
    FILE *stream = open_memstream(&out, printed_len);
    if (!stream) abort();
    ast_print(stream, ast);
    fclose(stream);
    ast_free(ast);
  }
  free(copy);
  return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!devnull && !(devnull = fopen("/dev/null", "w"))) abort();
  size_t first_len, second_len;
  char *first = parse_and_print((const char *)data, size, &first_len);
  if (!first) return 0;
  char *second = parse_and_print(first, first_len, &second_len);
  if (!second || strcmp(first, second) != 0) {
    fprintf(stderr, "round trip failed:\n--- first\n%s--- second\n%s", first,
            second ? second : "(errors)\n");
    abort();
  }
  free(first);
  free(second);
  return 0;
}
