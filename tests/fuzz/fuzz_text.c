/* fuzz_text.c — libFuzzer over the readers of --text, --pairs and
 * --tokenizer: GPT-2 BPE files (vocab.json, merges.txt) and BERT's vocab.txt
 * parsed and, when accepted, used to encode text and decode every id; JSON
 * Lines documents tokenized; sentence-pair files (TSV, JSON Lines) read for a
 * model of input_ids, token_type_ids, attention_mask and label. Every input
 * must be accepted or rejected with a message — never a crash, an overread
 * (ASan) or undefined behaviour (UBSan).
 *
 * Byte 0 picks, by its value mod 4: 0, a BPE: the rest is vocab.json, a NUL,
 * merges.txt, a NUL, then text to encode; 1, JSON Lines tokenized by bytes;
 * 2, a WordPiece: vocab.txt, a NUL, then text to encode; 3, a pairs file
 * (byte 1 even: TSV, odd: JSON Lines) through a small fixed vocabulary.
 * Seeds: tests/fuzz/text_seeds/. */
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

/* Encodes text with t and reads every token's bytes; frees t. */
static void encode_and_decode(trc_tokenizer *t, const uint8_t *text, size_t n) {
  trc_tokens tk = {0};
  trc_error err;
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

static void fuzz_bpe(const uint8_t *data, size_t size) {
  const uint8_t *p = data, *end = data + size, *vocab, *merges, *text;
  size_t v = next_part(&p, end, &vocab), m = next_part(&p, end, &merges);
  size_t n = next_part(&p, end, &text);
  trc_tokenizer *t;
  trc_error err;
  if (trc_tokenizer_parse((const char *)vocab, v, (const char *)merges, m, &t, &err) == 0)
    encode_and_decode(t, text, n);
}

static void fuzz_wordpiece(const uint8_t *data, size_t size) {
  const uint8_t *p = data, *end = data + size, *vocab, *text;
  size_t v = next_part(&p, end, &vocab), n = next_part(&p, end, &text);
  trc_tokenizer *t;
  trc_error err;
  if (trc_tokenizer_parse_wordpiece((const char *)vocab, v, &t, &err) == 0)
    encode_and_decode(t, text, n);
}

static void fuzz_pairs(const uint8_t *data, size_t size) {
  static const char vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n##b\n.\n\xc3\xa9\n";
  static trc_tokenizer *tok;
  static trc_input inputs[] = {
      {"input_ids", TRC_I32, 2, {2, 6}, 0, 24, 9},
      {"token_type_ids", TRC_U8, 2, {2, 6}, 48, 6, 2},
      {"attention_mask", TRC_I32, 2, {2, 6}, 64, 24, 0},
      {"label", TRC_I32, 1, {2}, 112, 4, 3},
  };
  const trc_model m = {.name = "fuzz", .batch = 2, .n_inputs = 4, .inputs = inputs,
                       .label_input = 3, .token_input = -1};
  trc_pair_fields fields = {"text_a", "text_b", "label"};
  trc_dataset ds;
  trc_error err;
  if (!tok && trc_tokenizer_parse_wordpiece(vocab, sizeof vocab - 1, &tok, &err)) abort();
  if (size < 1) return;
  const char *name = data[0] % 2 ? "fuzz.jsonl" : "fuzz.tsv";
  if (trc_pairs_parse(&m, tok, name, &fields, data + 1, size - 1, &ds, &err) == 0)
    trc_dataset_free(&ds);
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
  static void (*const fuzz[4])(const uint8_t *, size_t) = {fuzz_bpe, fuzz_jsonl, fuzz_wordpiece,
                                                             fuzz_pairs};
  fuzz[data[0] % 4](data + 1, size - 1);
  return 0;
}
