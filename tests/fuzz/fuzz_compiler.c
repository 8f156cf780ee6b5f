/* fuzz_compiler.c — libFuzzer harness for the whole compiler: any bytes that
 * parse go through lowering, autodiff, the memory plan and the C backend
 * (printed to /dev/null). No input may crash, leak or trip a sanitizer. */
#include "codegen.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *sink;
  if (!sink) sink = fopen("/dev/null", "w");
  SourceFile file = {.path = "fuzz.nn", .text = malloc(size + 1), .len = size};
  memcpy(file.text, data, size);
  file.text[size] = '\0';
  Diag diag;
  diag_init(&diag, sink);
  Ast *ast = parse_source(&file, &diag);
  Graph *g = ast ? lower_ast(ast, NULL, &diag) : NULL;
  if (g) {
    autodiff(g);
    Program *p = program_build(g);
    emit_c(sink, p);
    program_free(p);
    graph_free(g);
  }
  ast_free(ast);
  free(file.text);
  return 0;
}
