/* test_tokens.h — what the tokenizer tests share: a text's tokens, as their
 * bytes joined by '|', checked against the expected string. */
#ifndef TRAINC_TEST_TOKENS_H
#define TRAINC_TEST_TOKENS_H

#include "test_util.h"

/* Encodes `text`; its tokens' bytes joined by '|' into out. */
static int tokens_of(const trc_tokenizer *t, const char *text, char *out, size_t cap) {
  trc_tokens tk = {0};
  trc_error err;
  size_t n = 0;
  out[0] = '\0';
  if (trc_tokenizer_encode(t, (const unsigned char *)text, strlen(text), &tk, &err)) {
    fprintf(stderr, "encode failed: %s\n", err.msg);
    return -1;
  }
  for (uint64_t i = 0; i < tk.n && n + 64 < cap; i++) {
    size_t len;
    const unsigned char *b = trc_tokenizer_token(t, tk.ids[i], &len);
    if (i) out[n++] = '|';
    memcpy(out + n, b, len);
    n += len;
  }
  out[n] = '\0';
  trc_tokens_free(&tk);
  return 0;
}

#define CHECK_TOKENS(t, text, expected)                                                            \
  do {                                                                                             \
    char got_[2048];                                                                               \
    if (tokens_of(t, text, got_, sizeof got_) || strcmp(got_, expected) != 0) {                    \
      fprintf(stderr, "%s:%d: '%s' gave '%s', expected '%s'\n", __FILE__, __LINE__, text, got_,   \
              expected);                                                                           \
      test_failures++;                                                                             \
    }                                                                                              \
  } while (0)

#endif
