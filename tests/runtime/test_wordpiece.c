/* BERT's WordPiece (runtime/data/wordpiece.c) on a hand-made vocab.txt with known
 * output: accents, punctuation, CJK, ## continuations, [UNK] (no match, and
 * words over 100 characters), controls and whitespace, special tokens
 * written in the text; and vocab.txt files refused with a message.
 * (wordpiece_reference.py compares the ids with Hugging Face's on real text.) */
#include "test_tokens.h"

#include <stdlib.h>

static const char vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nun\n##aff\n##able\na\n##a\nab\n"
                            "##b\n,\n.\n!\ncafe\nnaive\n\xe4\xb8\xad\n\xe6\x96\x87\n"
                            "\xe1\x84\x92\n##\xe1\x85\xa1\n##\xe1\x86\xab\nistanbul\r\n"
                            "\xcf\x83\n##\xcf\x83\n";

/* n copies of s, joined. */
static char *repeat(const char *s, int n) {
  size_t k = strlen(s);
  char *out = malloc(k * (size_t)n + 1);
  for (int i = 0; i < n; i++) memcpy(out + k * (size_t)i, s, k);
  out[k * (size_t)n] = '\0';
  return out;
}

static void check_long_words(const trc_tokenizer *t) {
  char *w100 = repeat("a", 100), *w101 = repeat("a", 101), *e101 = repeat("\xc3\xa9", 101);
  char *want = malloc(4 * 100);
  strcpy(want, "a");
  for (int i = 1; i < 100; i++) strcat(want, "|##a");
  CHECK_TOKENS(t, w100, want);          /* 100 characters: pieces */
  CHECK_TOKENS(t, w101, "[UNK]");       /* 101: [UNK] whole */
  CHECK_TOKENS(t, e101, "[UNK]");       /* counted in characters, after normalization */
  free(w100), free(w101), free(e101), free(want);
}

static void test_encode(void) {
  trc_tokenizer *t;
  trc_error err;
  if (trc_tokenizer_parse_wordpiece(vocab, sizeof vocab - 1, &t, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    test_failures++;
    return;
  }
  CHECK(trc_tokenizer_is_wordpiece(t) && trc_tokenizer_needs_utf8(t));
  CHECK(trc_tokenizer_vocab(t) == 25 && trc_tokenizer_eot(t) == 3); /* [SEP] joins documents */
  CHECK_TOKENS(t, "unaffable", "un|##aff|##able");       /* longest match first, ## after */
  CHECK_TOKENS(t, "UnAffABLE", "un|##aff|##able");       /* lowercased */
  CHECK_TOKENS(t, "aab", "a|##a|##b");
  CHECK_TOKENS(t, "ab", "ab");                           /* the longest piece, not a|##b */
  CHECK_TOKENS(t, "unx", "[UNK]");                       /* a part without a match: all [UNK] */
  CHECK_TOKENS(t, "x a", "[UNK]|a");
  CHECK_TOKENS(t, "Caf\xc3\xa9 NA\xc3\x8fVE", "cafe|naive"); /* accents stripped */
  CHECK_TOKENS(t, "cafe\xcc\x81", "cafe");               /* a combining accent too */
  CHECK_TOKENS(t, "\xc4\xb0stanbul", "istanbul");        /* İ: I + dot above, dot dropped */
  CHECK_TOKENS(t, "\xce\xa3\xce\xa3", "\xcf\x83|##\xcf\x83"); /* ΣΣ: σσ, no final sigma */
  CHECK_TOKENS(t, "a,b.!", "a|,|[UNK]|.|!");             /* "b" starts a word: no ##b */
  CHECK_TOKENS(t, "a.a", "a|.|a");                       /* punctuation splits words */
  CHECK_TOKENS(t, "\xe4\xb8\xad\xe6\x96\x87", "\xe4\xb8\xad|\xe6\x96\x87"); /* 中文: one each */
  CHECK_TOKENS(t, "a\xe4\xb8\xad" "a", "a|\xe4\xb8\xad|a");
  CHECK_TOKENS(t, "\xed\x95\x9c", "\xe1\x84\x92|##\xe1\x85\xa1|##\xe1\x86\xab"); /* 한: jamo */
  CHECK_TOKENS(t, "a\x01" "b", "ab");                    /* controls dropped */
  CHECK_TOKENS(t, "a\xc2\xad" "b \xef\xbf\xbd", "ab");   /* soft hyphen, U+FFFD dropped */
  CHECK_TOKENS(t, "a\tb\n\xe3\x80\x80" "a\xc2\xa0" "a", "a|[UNK]|a|a"); /* whitespace */
  /* special tokens written exactly are those tokens; others are text */
  CHECK_TOKENS(t, "a[SEP]b [CLS] [sep] [MASK", "a|[SEP]|[UNK]|[CLS]|[UNK]|[UNK]|[UNK]|[UNK]|[UNK]");
  CHECK_TOKENS(t, "", "");
  CHECK_TOKENS(t, " \t ", "");
  check_long_words(t);
  trc_tokens tk = {0};
  CHECK_FAILS_WITH(trc_tokenizer_encode(t, (const unsigned char *)"ok\xff", 3, &tk, &err), err,
                   "invalid UTF-8 at byte 2");
  trc_tokens_free(&tk);
  trc_tokenizer_free(t);
}

#define CHECK_PARSE_FAILS(text, needle)                                                            \
  do {                                                                                             \
    trc_tokenizer *t_ = NULL;                                                                      \
    trc_error e_;                                                                                  \
    CHECK_FAILS_WITH(trc_tokenizer_parse_wordpiece(text, strlen(text), &t_, &e_), e_, needle);     \
    trc_tokenizer_free(t_);                                                                        \
  } while (0)

static void test_hostile(void) {
  CHECK_PARSE_FAILS("", "the vocabulary is empty");
  CHECK_PARSE_FAILS("a\nb\n", "no [UNK] token");
  CHECK_PARSE_FAILS("[UNK]\n\nb\n", "line 2: an empty token");
  CHECK_PARSE_FAILS("[UNK]\na\na\n", "ids 1 and 2 are the same token");
  CHECK_PARSE_FAILS("[UNK]\na\xff\n", "invalid UTF-8 at byte 7");
  char dir[4096], path[4096];
  trc_tokenizer *t = NULL;
  trc_error err;
  test_make_dir(dir, sizeof dir);
  CHECK_FAILS_WITH(trc_tokenizer_load(dir, &t, &err), err,
                   "expected vocab.txt (BERT's WordPiece) or vocab.json and merges.txt");
  test_path(path, sizeof path, dir, "vocab.txt");
  test_write_file(path, vocab, sizeof vocab - 1);
  CHECK(trc_tokenizer_load(dir, &t, &err) == 0 && trc_tokenizer_is_wordpiece(t));
  trc_tokenizer_free(t);
  t = NULL;
  test_write_file(path, "[UNK]\nx\nx\n", 10);
  CHECK_FAILS_WITH(trc_tokenizer_load(dir, &t, &err), err, "ids 1 and 2 are the same token");
  CHECK(strstr(err.where, "vocab.txt") != NULL);
  CHECK_FAILS_WITH(trc_tokenizer_load(path, &t, &err), err, "not a folder");
  test_write_file(path, vocab, sizeof vocab - 1);
  test_path(path, sizeof path, dir, "tokenizer_config.json"); /* Hugging Face's settings */
  const char *uncased = "{\"do_lower_case\": true, \"strip_accents\": null, \"x\": [{}]}";
  test_write_file(path, uncased, strlen(uncased));
  CHECK(trc_tokenizer_load(dir, &t, &err) == 0);
  trc_tokenizer_free(t);
  t = NULL;
  const char *cased = "{\"do_lower_case\": false}", *kept = "{\"strip_accents\": false}";
  test_write_file(path, cased, strlen(cased));
  CHECK_FAILS_WITH(trc_tokenizer_load(dir, &t, &err), err,
                   "do_lower_case is false: only BERT's uncased WordPiece is implemented");
  CHECK(strstr(err.where, "tokenizer_config.json") != NULL);
  test_write_file(path, kept, strlen(kept));
  CHECK_FAILS_WITH(trc_tokenizer_load(dir, &t, &err), err, "strip_accents is false");
  test_write_file(path, cased, 20); /* cut short */
  CHECK_FAILS_WITH(trc_tokenizer_load(dir, &t, &err), err, "malformed JSON");
  test_remove_dir(dir);
}

int main(void) {
  test_encode();
  test_hostile();
  return test_finish("wordpiece");
}
