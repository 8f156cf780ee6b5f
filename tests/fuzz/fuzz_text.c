/* fuzz_text.c — libFuzzer over the readers of --text and --tokenizer:
 * GPT-2 BPE files (vocab.json, merges.txt) parsed and, when accepted, used
 * to encode text and decode every id; JSON Lines documents tokenized. Every
 * input must be accepted or rejected with a message — never a crash, an
 * overread (ASan) or undefined behaviour (UBSan).
 *
 * Byte 0 picks: even, a BPE: the rest is vocab.json, a NUL, merges.txt, a
 * NUL, then text to encode; odd, JSON Lines tokenized by bytes. Seeds:
 * tests/fuzz/text_seeds/. */
#include "trainc_rt.h"

#include <stdlib.h>
#include <string.h>

/* The part of [*p, end) up to the next NUL (or the end), *p moved past it. */
static size_t next_part(const uint8_t **p, const uint8_t *end, const uint8_t **part) {
  const uint8_t *nul = memchr(*p, 0, (size_t)(end - *p));
  size_t n = nul ? (size_t)(nul - *p) : (size_t)(end - *p);
  *part = *p;
  *p = nul ? nul + 1 : end;
  return n;
}

static volatile unsigned sink;

static void fuzz_bpe(const uint8_t *data, size_t size) {
  const uint8_t *p = data, *end = data + size, *vocab, *merges, *text;
  size_t v = next_part(&p, end, &vocab), m = next_part(&p, end, &merges);
  size_t n = next_part(&p, end, &text);
  trc_tokenizer *t;
  trc_error err;
  if (trc_tokenizer_parse((const char *)vocab, v, (const char *)merges, m, &t, &err)) return;
  trc_tokens tk = {0};
  if (trc_tokenizer_encode(t, text, n, &tk, &err) == 0)
    for (uint64_t i = 0; i < tk.n; i++) {
      size_t len;
      const unsigned char *b = trc_tokenizer_token(t, tk.ids[i], &len);
      if (len == 0) abort(); /* a token is never empty */
      for (size_t k = 0; k < len; k++) sink += b[k]; /* read: ASan sees an overread */
    }
  trc_tokens_free(&tk);
  trc_tokenizer_free(t);
}

static void fuzz_jsonl(const uint8_t *data, size_t size) {
  static trc_tokenizer *bytes;
  trc_error err;
  if (!bytes && trc_tokenizer_load("bytes", &bytes, &err)) abort();
  trc_tokens tk = {0};
  trc_text_tokenize(bytes, "fuzz.jsonl", data, size, &tk, &err);
  trc_tokens_free(&tk);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  if (data[0] % 2)
    fuzz_jsonl(data + 1, size - 1);
  else
    fuzz_bpe(data + 1, size - 1);
  return 0;
}
