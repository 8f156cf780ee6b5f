/* parse_tool — the frontend's test driver.
 *
 *   parse_tool FILE              prints the AST (ast_print), or the diagnostics
 *   parse_tool --roundtrip FILE  checks that parse → print → parse → print
 *                                prints the same text twice
 *
 * Exit status: 0 on success, 1 on syntax errors or a round-trip mismatch,
 * 2 on usage or I/O errors. */
#include "frontend.h"

#include <stdlib.h>
#include <string.h>

/* Parses file and prints its AST into a fresh string; NULL on errors. */
static char *parse_and_print(SourceFile *file) {
  Diag diag;
  diag_init(&diag, stderr);
  Ast *ast = parse_source(file, &diag);
  if (!ast) return NULL;
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  if (!out) {
    perror("parse_tool: open_memstream");
    exit(2);
  }
  ast_print(out, ast);
  fclose(out);
  ast_free(ast);
  return text;
}

static int roundtrip(SourceFile *file) {
  char *first = parse_and_print(file);
  if (!first) return 1;
  SourceFile *printed = source_from_string("<printed>", first);
  char *second = parse_and_print(printed);
  int status = 0;
  if (!second || strcmp(first, second) != 0) {
    fprintf(stderr, "%s: the printed AST does not print back the same:\n--- first\n%s--- second\n%s",
            file->path, first, second ? second : "(errors)\n");
    status = 1;
  }
  free(first);
  free(second);
  source_free(printed);
  return status;
}

int main(int argc, char **argv) {
  bool check_roundtrip = argc == 3 && strcmp(argv[1], "--roundtrip") == 0;
  if (argc != 2 && !check_roundtrip) {
    fprintf(stderr, "usage: parse_tool [--roundtrip] FILE\n");
    return 2;
  }
  Diag diag;
  diag_init(&diag, stderr);
  SourceFile *file = source_read(argv[argc - 1], &diag);
  if (!file) return 2;
  int status;
  if (check_roundtrip) {
    status = roundtrip(file);
  } else {
    char *text = parse_and_print(file);
    if (text) fputs(text, stdout);
    status = text ? 0 : 1;
    free(text);
  }
  source_free(file);
  return status;
}
