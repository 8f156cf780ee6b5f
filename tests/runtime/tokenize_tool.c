/* tokenize_tool SPEC FILE [count] — prints the ids --tokenizer SPEC gives
 * FILE's bytes, one a line (for bpe_reference.sh), or with `count` only how
 * many there are (for bench/tokenize.sh). */
#include "trainc_rt.h"

#include <stdlib.h>

int main(int argc, char **argv) {
  trc_tokenizer *t;
  trc_tokens tk = {0};
  trc_error err;
  unsigned char *text;
  size_t len;
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: tokenize_tool SPEC FILE [count]\n");
    return 2;
  }
  if (trc_tokenizer_load(argv[1], &t, &err) || trc_read_file(argv[2], &text, &len, &err) ||
      trc_tokenizer_encode(t, text, len, &tk, &err)) {
    fprintf(stderr, "%s: %s\n", err.where, err.msg);
    return 1;
  }
  if (argc == 4)
    printf("%llu\n", (unsigned long long)tk.n);
  else
    for (uint64_t i = 0; i < tk.n; i++) printf("%d\n", tk.ids[i]);
  trc_tokens_free(&tk);
  free(text);
  trc_tokenizer_free(t);
  return 0;
}
