/* Tokenizers (runtime/data/tokenizer.c): the byte tokenizer's round trip, GPT-2's
 * BPE on a hand-made vocab/merges (bpe_small/, see make_fixture.py there)
 * with known output, round trips, and hostile files refused with a message.
 * usage: test_tokenizer BPE_DIR */
#include "test_tokens.h"

#include <stdlib.h>

/* decode(encode(s)) == s */
static void check_round_trip(const trc_tokenizer *t, const unsigned char *s, size_t len) {
  trc_tokens tk = {0};
  trc_error err;
  CHECK(trc_tokenizer_encode(t, s, len, &tk, &err) == 0);
  unsigned char *back = malloc(len + 1);
  size_t n = 0;
  for (uint64_t i = 0; i < tk.n; i++) {
    size_t k;
    const unsigned char *b = trc_tokenizer_token(t, tk.ids[i], &k);
    if (n + k > len) break;
    memcpy(back + n, b, k);
    n += k;
  }
  CHECK(n == len && memcmp(back, s, len) == 0);
  free(back);
  trc_tokens_free(&tk);
}

static void test_bytes(void) {
  trc_tokenizer *t;
  trc_error err;
  CHECK(trc_tokenizer_load("bytes", &t, &err) == 0);
  CHECK(trc_tokenizer_vocab(t) == 256 && trc_tokenizer_eot(t) == -1);
  unsigned char all[512];
  for (int i = 0; i < 512; i++) all[i] = (unsigned char)(i * 7 + 3);
  trc_tokens tk = {0};
  CHECK(trc_tokenizer_encode(t, all, sizeof all, &tk, &err) == 0 && tk.n == sizeof all);
  for (uint64_t i = 0; i < tk.n; i++) CHECK(tk.ids[i] == all[i]);
  trc_tokens_free(&tk);
  check_round_trip(t, all, sizeof all); /* any bytes, not only UTF-8 */
  trc_tokenizer_free(t);
}

static void test_bpe(const char *dir) {
  trc_tokenizer *t;
  trc_error err;
  if (trc_tokenizer_load(dir, &t, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    test_failures++;
    return;
  }
  CHECK(trc_tokenizer_vocab(t) == 274 && trc_tokenizer_eot(t) == 273);
  CHECK_TOKENS(t, "hello world", "hello| world");    /* merges by rank */
  CHECK_TOKENS(t, "hell", "hell");
  CHECK_TOKENS(t, "lll", "ll|l");                    /* leftmost pair first */
  CHECK_TOKENS(t, "x12", "x|12");                    /* letters, then numbers: no "x1" */
  CHECK_TOKENS(t, "\xc3\xa9" "12", "\xc3\xa9|12");   /* é is one letter of two bytes */
  CHECK_TOKENS(t, "a\n\n", "a|\n\n");                /* \s+ at the end */
  CHECK_TOKENS(t, "a\n\nb", "a|\n|\n|b");            /* \s+(?!\S) leaves the last one */
  CHECK_TOKENS(t, "a   b", "a|  | b");               /* ... which then joins the word */
  CHECK_TOKENS(t, "it's", "i|t|'s");                 /* contractions */
  CHECK_TOKENS(t, "a 'x", "a| '|x");                 /* ' ?[^\s\p{L}\p{N}]+' */
  CHECK_TOKENS(t, "<|endoftext|>", "<|||e|n|d|o|f|t|e|x|t|||>"); /* text, not the special */
  static const char *texts[] = {"", "hello world, it's 2024!\n\n  indented\ttab",
                                "na\xc3\xafve caf\xc3\xa9 \xce\xa9mega \xe4\xb8\xad\xe6\x96\x87",
                                "\xf0\x9f\x98\x80 emoji  \xe2\x80\x83 em space", "   "};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
    check_round_trip(t, (const unsigned char *)texts[i], strlen(texts[i]));
  trc_tokens tk = {0};
  CHECK_FAILS_WITH(trc_tokenizer_encode(t, (const unsigned char *)"ok\xff", 3, &tk, &err), err,
                   "invalid UTF-8 at byte 2");
  trc_tokens_free(&tk);
  trc_tokenizer_free(t);
}

static void clear_error(trc_error *e) { e->where[0] = e->msg[0] = '\0'; }

/* A BPE folder whose vocab.json and merges.txt are these texts (NULL: no
 * merges.txt). */
static void write_bpe(const char *dir, const char *vocab, const char *merges) {
  char path[4096];
  test_path(path, sizeof path, dir, "vocab.json");
  test_write_file(path, vocab, strlen(vocab));
  test_path(path, sizeof path, dir, "merges.txt");
  if (merges)
    test_write_file(path, merges, strlen(merges));
  else
    remove(path);
}

#define CHECK_LOAD_FAILS(dir, needle)                                                              \
  do {                                                                                             \
    trc_tokenizer *t_ = NULL;                                                                      \
    trc_error e_;                                                                                  \
    clear_error(&e_);                                                                              \
    int rc_ = trc_tokenizer_load(dir, &t_, &e_);                                                   \
    char both_[2048];                                                                              \
    snprintf(both_, sizeof both_, "%s: %s", e_.where, e_.msg);                                     \
    if (rc_ == 0 || !strstr(both_, needle)) {                                                      \
      fprintf(stderr, "%s:%d: expected a failure mentioning '%s', got rc %d: %s\n", __FILE__,      \
              __LINE__, needle, rc_, both_);                                                       \
      test_failures++;                                                                             \
    }                                                                                              \
    trc_tokenizer_free(t_);                                                                        \
  } while (0)

/* '{' and every byte's token in GPT-2's alphabet, as JSON members "c": id, ... */
static size_t byte_members(char *out, size_t cap) {
  size_t n = (size_t)snprintf(out, cap, "{");
  int next = 256;
  for (int b = 0; b < 256; b++) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    unsigned cp = printable ? (unsigned)b : (unsigned)next++;
    if (cp == '"' || cp == '\\')
      n += (size_t)snprintf(out + n, cap - n, "\"\\%c\": %d, ", (char)cp, b);
    else if (cp < 0x80)
      n += (size_t)snprintf(out + n, cap - n, "\"%c\": %d, ", (char)cp, b);
    else
      n += (size_t)snprintf(out + n, cap - n, "\"%c%c\": %d, ", (char)(0xC0 | cp >> 6),
                            (char)(0x80 | (cp & 0x3F)), b);
  }
  return n;
}

static void test_hostile(void) {
  char dir[4096], vocab[8192];
  test_make_dir(dir, sizeof dir);
  size_t n = byte_members(vocab, sizeof vocab);
  CHECK_LOAD_FAILS(dir, "vocab.json"); /* nothing there */
  write_bpe(dir, "{\"a\": 0,", "");
  CHECK_LOAD_FAILS(dir, "malformed JSON");
  snprintf(vocab + n, sizeof vocab - n, "\"ab\": 256}");
  write_bpe(dir, vocab, NULL);
  CHECK_LOAD_FAILS(dir, "merges.txt"); /* missing */
  write_bpe(dir, vocab, "#version: 0.2\na b\nb c\n");
  CHECK_LOAD_FAILS(dir, "line 3: the merged token is not in vocab.json");
  write_bpe(dir, vocab, "a  b\n");
  CHECK_LOAD_FAILS(dir, "line 1: expected two tokens separated by one space");
  write_bpe(dir, vocab, "a \xff\n");
  CHECK_LOAD_FAILS(dir, "invalid UTF-8");
  snprintf(vocab + n, sizeof vocab - n, "\"ab\": 257}");
  write_bpe(dir, vocab, "a b\n");
  CHECK_LOAD_FAILS(dir, "ids are not 0..256");
  snprintf(vocab + n, sizeof vocab - n, "\"ab\": 0}");
  write_bpe(dir, vocab, "a b\n");
  CHECK_LOAD_FAILS(dir, "id 0 is given twice");
  snprintf(vocab + n, sizeof vocab - n, "\"a b\": 256}");
  write_bpe(dir, vocab, "a b\n");
  CHECK_LOAD_FAILS(dir, "not a character of GPT-2's byte alphabet");
  write_bpe(dir, "{\"a\": 0}", "");
  CHECK_LOAD_FAILS(dir, "no token for byte 0x00");
  test_remove_dir(dir);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_tokenizer BPE_DIR\n");
    return 2;
  }
  test_bytes();
  test_bpe(argv[1]);
  test_hostile();
  return test_finish("tokenizer");
}
