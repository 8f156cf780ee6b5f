/* tokenizer.c — text to token ids and back, for --text, --pairs and
 * --sample: the byte-level tokenizer (token = byte, 256 ids), GPT-2's
 * byte-level BPE read from a folder with `vocab.json` and `merges.txt` in the
 * format GPT-2 and Hugging Face ship, and BERT's WordPiece from a folder with
 * `vocab.txt` (its vocabulary here; its algorithm in wordpiece.c).
 *
 * GPT-2's BPE, as its encoder.py does it: the text is cut into pre-tokens by
 * the pattern  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (matched here by hand, with Unicode's letter and number classes from
 * unicode_classes.h and \s as Unicode's White_Space); each pre-token's bytes
 * start as one symbol each, and the adjacent pair with the lowest merge rank
 * (its line in merges.txt) is merged everywhere, left to right, until no
 * pair has a rank. vocab.json and merges.txt spell bytes as GPT-2's
 * bytes_to_unicode() characters (space is 'Ġ'); they are turned back into
 * bytes when the files are read, so the merge table works on token ids. */
#include "rt_data.h"
#include "unicode_classes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { MAX_VOCAB = 1 << 24 };

typedef struct {
  int32_t left, right; /* a pair of token ids */
  int32_t rank;        /* its line in merges.txt: lower merges first */
  int32_t result;      /* the id of the merged token */
} merge;

typedef enum { KIND_BYTES, KIND_BPE, KIND_WORDPIECE } tokenizer_kind;

struct trc_tokenizer {
  tokenizer_kind kind;
  int64_t vocab;           /* ids are 0..vocab-1 */
  unsigned char *bytes;    /* every token's bytes, in id order */
  uint64_t *offset;        /* token id is bytes[offset[id] .. offset[id + 1]) */
  int32_t byte_token[256]; /* the id of each one-byte token */
  int32_t *by_text;        /* hash table of ids by their bytes; -1: empty */
  uint64_t text_slots;
  merge *merges;           /* BPE: hash table by (left, right); rank -1: empty */
  uint64_t merge_slots;
  int32_t eot;             /* <|endoftext|>, or -1 */
};

/* ---- GPT-2's byte alphabet: bytes_to_unicode() ---- */

/* Printable Latin-1 bytes stand for themselves; the others, in order, for
 * U+0100 onwards. */
static int byte_is_printable(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* The byte that code point cp stands for, or -1. */
static int byte_of_char(uint32_t cp) {
  static int16_t after_255[68]; /* U+0100.. stand for the 68 other bytes, in order */
  if (cp < 256) return byte_is_printable((int)cp) ? (int)cp : -1;
  if (cp >= 256 + 68) return -1;
  if (!after_255[1])
    for (int b = 0, n = 0; b < 256; b++)
      if (!byte_is_printable(b)) after_255[n++] = (int16_t)b;
  return after_255[cp - 256];
}

/* ---- UTF-8 ---- */

uint32_t trc_utf8_decode(const unsigned char *s, size_t len, size_t *n) {
  if (s[0] < 0x80) {
    *n = 1;
    return s[0];
  }
  *n = trc_utf8_sequence(s, s + len);
  uint32_t cp = s[0] & (0x7F >> *n);
  for (size_t i = 1; i < *n; i++) cp = cp << 6 | (s[i] & 0x3F);
  return cp;
}

size_t trc_utf8_invalid_at(const unsigned char *s, size_t len) {
  for (size_t i = 0; i < len;) {
    size_t n = s[i] < 0x80 ? 1 : trc_utf8_sequence(s + i, s + len);
    if (n == 0) return i;
    i += n;
  }
  return len;
}

/* GPT-2-alphabet text (a vocab.json key, a merges.txt part) to bytes, in
 * place (never longer); -1 when a character is outside the alphabet. */
static int64_t alphabet_to_bytes(unsigned char *s, size_t len, uint32_t *bad) {
  size_t out = 0;
  for (size_t i = 0, n; i < len; i += n) {
    uint32_t cp = trc_utf8_decode(s + i, len - i, &n);
    int b = n ? byte_of_char(cp) : -1;
    if (b < 0) {
      *bad = n ? cp : s[i];
      return -1;
    }
    s[out++] = (unsigned char)b;
  }
  return (int64_t)out;
}

/* ---- hash tables ---- */

static uint64_t hash_bytes(const unsigned char *s, size_t n) {
  uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001B3ull;
  return h;
}

static uint64_t slots_for(uint64_t n) {
  uint64_t slots = 16;
  while (slots < 2 * n) slots *= 2;
  return slots;
}

static const unsigned char *token_bytes(const trc_tokenizer *t, int32_t id, size_t *n) {
  *n = (size_t)(t->offset[id + 1] - t->offset[id]);
  return t->bytes + t->offset[id];
}

/* The slot of the token with these bytes, or of the empty slot where it goes. */
static uint64_t text_slot(const trc_tokenizer *t, const unsigned char *s, size_t n) {
  uint64_t mask = t->text_slots - 1, i = hash_bytes(s, n) & mask;
  for (;; i = (i + 1) & mask) {
    int32_t id = t->by_text[i];
    size_t len;
    if (id < 0) return i;
    const unsigned char *b = token_bytes(t, id, &len);
    if (len == n && memcmp(b, s, n) == 0) return i;
  }
}

int32_t trc_tokenizer_find(const trc_tokenizer *t, const unsigned char *s, size_t n) {
  return t->by_text[text_slot(t, s, n)];
}

static uint64_t merge_slot(const trc_tokenizer *t, int32_t left, int32_t right) {
  uint64_t mask = t->merge_slots - 1;
  uint64_t i = trc_mix64((uint64_t)(uint32_t)left << 32 | (uint32_t)right) & mask;
  for (;; i = (i + 1) & mask) {
    const merge *m = &t->merges[i];
    if (m->rank < 0 || (m->left == left && m->right == right)) return i;
  }
}

/* ---- vocab.json ---- */

typedef struct {
  unsigned char *text; /* the token's bytes (malloc'ed) */
  size_t len;
  uint64_t id;
} vocab_entry;

static void free_entries(vocab_entry *e, size_t n) {
  for (size_t i = 0; i < n; i++) free(e[i].text);
  free(e);
}

static int read_entry(trc_json *j, vocab_entry *e, trc_error *err) {
  char *key;
  if (trc_json_string(j, &key, err)) return -1;
  uint32_t bad;
  int64_t n = alphabet_to_bytes((unsigned char *)key, strlen(key), &bad);
  e->text = (unsigned char *)key;
  if (n <= 0) {
    if (n == 0) return trc_fail(err, "a token is the empty string");
    return trc_fail(err, "token \"%s\" holds U+%04X, which is not a character of GPT-2's byte "
                         "alphabet", key, (unsigned)bad);
  }
  e->len = (size_t)n;
  if (trc_json_expect(j, ':', err) || trc_json_u64(j, &e->id, err)) return -1;
  if (e->id >= MAX_VOCAB)
    return trc_fail(err, "token id %llu is too large", (unsigned long long)e->id);
  return 0;
}

/* The {"token": id, ...} object, entries in file order. */
static int parse_vocab(const char *text, size_t len, vocab_entry **out, size_t *count,
                       trc_error *err) {
  trc_json j;
  trc_json_init(&j, text, len);
  vocab_entry *e = NULL;
  size_t n = 0, cap = 0;
  if (trc_json_expect(&j, '{', err)) return -1;
  if (trc_json_accept(&j, '}')) return trc_fail(err, "the vocabulary is empty");
  do {
    if (n == cap) {
      vocab_entry *grown = realloc(e, (cap = cap ? 2 * cap : 1024) * sizeof *e);
      if (!grown) {
        free_entries(e, n);
        return trc_fail(err, "out of memory (vocabulary)");
      }
      e = grown;
    }
    e[n] = (vocab_entry){0};
    if (read_entry(&j, &e[n++], err)) {
      free_entries(e, n);
      return -1;
    }
  } while (trc_json_accept(&j, ','));
  if (trc_json_expect(&j, '}', err) ||
      (!trc_json_at_end(&j) && trc_json_fail(&j, err, "the end"))) {
    free_entries(e, n);
    return -1;
  }
  *out = e;
  *count = n;
  return 0;
}

/* Ids must be exactly 0..n-1, each once, and texts distinct. */
static int build_vocab(trc_tokenizer *t, vocab_entry *e, size_t n, trc_error *err) {
  uint64_t total = 0;
  vocab_entry **by_id = calloc(n, sizeof *by_id);
  if (!by_id) return trc_fail(err, "out of memory (vocabulary)");
  for (size_t i = 0; i < n; i++) {
    if (e[i].id >= n || by_id[e[i].id]) {
      free(by_id);
      return trc_fail(err, e[i].id >= n ? "ids are not 0..%zu: token id %llu" :
                                          "%zu tokens, and id %llu is given twice",
                      e[i].id >= n ? n - 1 : n, (unsigned long long)e[i].id);
    }
    by_id[e[i].id] = &e[i];
    total += e[i].len;
  }
  t->vocab = (int64_t)n;
  t->bytes = malloc(total ? total : 1);
  t->offset = malloc((n + 1) * sizeof *t->offset);
  t->text_slots = slots_for(n);
  t->by_text = malloc(t->text_slots * sizeof *t->by_text);
  if (!t->bytes || !t->offset || !t->by_text) {
    free(by_id);
    return trc_fail(err, "out of memory (vocabulary)");
  }
  memset(t->by_text, 0xFF, t->text_slots * sizeof *t->by_text);
  t->offset[0] = 0;
  for (size_t id = 0; id < n; id++) {
    memcpy(t->bytes + t->offset[id], by_id[id]->text, by_id[id]->len);
    t->offset[id + 1] = t->offset[id] + by_id[id]->len;
    uint64_t slot = text_slot(t, by_id[id]->text, by_id[id]->len);
    if (t->by_text[slot] >= 0) {
      free(by_id);
      return trc_fail(err, "ids %d and %zu are the same token", t->by_text[slot], id);
    }
    t->by_text[slot] = (int32_t)id;
  }
  free(by_id);
  return 0;
}

/* Every byte must be a token of its own: the text may hold any byte. */
static int find_byte_tokens(trc_tokenizer *t, trc_error *err) {
  for (int b = 0; b < 256; b++) {
    unsigned char c = (unsigned char)b;
    if ((t->byte_token[b] = trc_tokenizer_find(t, &c, 1)) < 0)
      return trc_fail(err, "no token for byte 0x%02X (a byte-level BPE needs all 256 bytes)", b);
  }
  static const char eot[] = "<|endoftext|>";
  t->eot = trc_tokenizer_find(t, (const unsigned char *)eot, sizeof eot - 1);
  return 0;
}

/* ---- merges.txt ---- */

/* One "LEFT RIGHT" line (in the byte alphabet), as token ids and the id of
 * their concatenation. */
static int parse_merge(const trc_tokenizer *t, unsigned char *line, size_t len, merge *m,
                       trc_error *err) {
  unsigned char *space = memchr(line, ' ', len);
  size_t right_len = space ? len - (size_t)(space + 1 - line) : 0;
  if (!space || space == line || right_len == 0 || memchr(space + 1, ' ', right_len))
    return trc_fail(err, "expected two tokens separated by one space, got '%.*s'", (int)len, line);
  uint32_t bad;
  size_t left_len = (size_t)(space - line);
  int64_t a = alphabet_to_bytes(line, left_len, &bad);
  int64_t b = a < 0 ? -1 : alphabet_to_bytes(space + 1, len - left_len - 1, &bad);
  if (a < 0 || b < 0)
    return trc_fail(err, "U+%04X is not a character of GPT-2's byte alphabet", (unsigned)bad);
  unsigned char *joined = malloc((size_t)(a + b));
  if (!joined) return trc_fail(err, "out of memory (merges)");
  memcpy(joined, line, (size_t)a);
  memcpy(joined + a, space + 1, (size_t)b);
  m->left = trc_tokenizer_find(t, line, (size_t)a);
  m->right = trc_tokenizer_find(t, space + 1, (size_t)b);
  m->result = trc_tokenizer_find(t, joined, (size_t)(a + b));
  free(joined);
  const char *missing = m->left < 0 ? "its left part" : m->right < 0 ? "its right part"
                        : m->result < 0 ? "the merged token" : NULL;
  return missing ? trc_fail(err, "%s is not in vocab.json", missing) : 0;
}

static int add_merges(trc_tokenizer *t, unsigned char *text, size_t len, trc_error *err) {
  size_t lines = 1;
  for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
  t->merge_slots = slots_for(lines);
  t->merges = malloc(t->merge_slots * sizeof *t->merges);
  if (!t->merges) return trc_fail(err, "out of memory (merges)");
  for (uint64_t i = 0; i < t->merge_slots; i++) t->merges[i].rank = -1;
  int32_t rank = 0;
  size_t line_no = 0;
  for (size_t at = 0; at < len;) {
    unsigned char *line = text + at, *nl = memchr(line, '\n', len - at);
    size_t n = nl ? (size_t)(nl - line) : len - at;
    at += n + 1;
    line_no++;
    if (n > 0 && line[n - 1] == '\r') n--;
    if (n == 0 || (line_no == 1 && n >= 8 && memcmp(line, "#version", 8) == 0)) continue;
    merge m;
    if (parse_merge(t, line, n, &m, err)) {
      char why[sizeof err->msg];
      memcpy(why, err->msg, sizeof why);
      return trc_fail(err, "line %zu: %s", line_no, why);
    }
    merge *slot = &t->merges[merge_slot(t, m.left, m.right)];
    if (slot->rank >= 0) continue; /* a repeated pair keeps its first rank */
    m.rank = rank++;
    *slot = m;
  }
  return 0;
}

/* ---- the BPE from its two texts ---- */

/* vocab.json's and merges.txt's contents (merges' is changed in place);
 * the names are the files' for messages. */
static int parse_bpe(trc_tokenizer *t, const char *vocab, size_t vocab_len,
                     unsigned char *merges, size_t merges_len, const char *vocab_name,
                     const char *merges_name, trc_error *err) {
  vocab_entry *e = NULL;
  size_t n = 0;
  t->kind = KIND_BPE;
  int rc = parse_vocab(vocab, vocab_len, &e, &n, err) || build_vocab(t, e, n, err) ||
           find_byte_tokens(t, err);
  free_entries(e, n);
  if (rc) return trc_set_where(err, vocab_name);
  size_t bad = trc_utf8_invalid_at(merges, merges_len);
  if (bad < merges_len ? trc_fail(err, "invalid UTF-8 at byte %zu", bad)
                       : add_merges(t, merges, merges_len, err))
    return trc_set_where(err, merges_name);
  return 0;
}

/* ---- vocab.txt ---- */

/* One token a line, its id the line's number from 0, as BERT ships it; the
 * end of a line (\n or \r\n) and spaces or tabs after the token are not part
 * of it (Hugging Face trims them too). */
static int parse_wordpiece_lines(const unsigned char *text, size_t len, vocab_entry **out,
                                 size_t *count, trc_error *err) {
  size_t lines = 0, n = 0;
  for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
  vocab_entry *e = calloc(lines + 1, sizeof *e);
  if (!e) return trc_fail(err, "out of memory (vocabulary)");
  for (size_t at = 0; at < len; n++) {
    const unsigned char *line = text + at, *nl = memchr(line, '\n', len - at);
    size_t k = nl ? (size_t)(nl - line) : len - at;
    at += k + 1;
    while (k > 0 && (line[k - 1] == '\r' || line[k - 1] == ' ' || line[k - 1] == '\t')) k--;
    if (k == 0 || !(e[n].text = malloc(k))) {
      free_entries(e, n);
      return k ? trc_fail(err, "out of memory (vocabulary)")
               : trc_fail(err, "line %zu: an empty token", n + 1);
    }
    memcpy(e[n].text, line, k);
    e[n].len = k;
    e[n].id = n;
  }
  *out = e;
  *count = n;
  return n ? 0 : trc_fail(err, "the vocabulary is empty");
}

/* vocab.txt's content; `name` is the file's for messages. A word that
 * matches nothing becomes [UNK], which must be there. */
static int parse_wordpiece(trc_tokenizer *t, const unsigned char *text, size_t len,
                           const char *name, trc_error *err) {
  static const char unk[] = "[UNK]";
  vocab_entry *e = NULL;
  size_t n = 0, bad = trc_utf8_invalid_at(text, len);
  t->kind = KIND_WORDPIECE;
  int rc = bad < len ? trc_fail(err, "invalid UTF-8 at byte %zu", bad)
                     : parse_wordpiece_lines(text, len, &e, &n, err) ||
                           build_vocab(t, e, n, err);
  free_entries(e, n);
  if (rc == 0 && trc_tokenizer_find(t, (const unsigned char *)unk, sizeof unk - 1) < 0)
    rc = trc_fail(err, "no [UNK] token (BERT's WordPiece needs it)");
  static const char sep[] = "[SEP]"; /* what joins documents, as <|endoftext|> does */
  t->eot = rc ? -1 : trc_tokenizer_find(t, (const unsigned char *)sep, sizeof sep - 1);
  return rc ? trc_set_where(err, name) : 0;
}

static int load_wordpiece(trc_tokenizer *t, const char *path, trc_error *err) {
  unsigned char *text = NULL;
  size_t len;
  int rc = trc_read_file(path, &text, &len, err) || parse_wordpiece(t, text, len, path, err);
  free(text);
  return rc ? -1 : 0;
}

/* ---- loading ---- */

static int load_bytes(trc_tokenizer *t, trc_error *err) {
  t->vocab = 256;
  t->eot = -1;
  t->bytes = malloc(256);
  t->offset = malloc(257 * sizeof *t->offset);
  if (!t->bytes || !t->offset) return trc_fail(err, "out of memory (tokenizer)");
  for (int b = 0; b <= 256; b++) {
    if (b < 256) t->bytes[b] = (unsigned char)b, t->byte_token[b] = b;
    t->offset[b] = (uint64_t)b;
  }
  return 0;
}

static int load_bpe(trc_tokenizer *t, const char *dir, trc_error *err) {
  char vocab[4096], merges[4096];
  if ((size_t)snprintf(vocab, sizeof vocab, "%s/vocab.json", dir) >= sizeof vocab ||
      (size_t)snprintf(merges, sizeof merges, "%s/merges.txt", dir) >= sizeof merges)
    return trc_fail_at(err, dir, "the tokenizer's folder name is too long");
  unsigned char *v = NULL, *m = NULL;
  size_t v_len, m_len;
  int rc = trc_read_file(vocab, &v, &v_len, err) || trc_read_file(merges, &m, &m_len, err) ||
           parse_bpe(t, (const char *)v, v_len, m, m_len, vocab, merges, err);
  free(v);
  free(m);
  return rc ? -1 : 0;
}

/* *out = t when rc is 0, else t freed; returns -1 or 0. */
static int hand_over(trc_tokenizer **out, int rc, trc_tokenizer *t) {
  if (rc) {
    trc_tokenizer_free(t);
    return -1;
  }
  *out = t;
  return 0;
}

static int file_exists(const char *dir, const char *name) {
  char path[4096];
  struct stat st;
  return (size_t)snprintf(path, sizeof path, "%s/%s", dir, name) < sizeof path &&
         stat(path, &st) == 0;
}

/* ---- tokenizer_config.json ---- */

/* Why member `key` (its value's JSON text v) of Hugging Face's
 * tokenizer_config.json says the tokenizer is not BERT's uncased one, or
 * NULL. strip_accents null or true, as do_lower_case true, are uncased. */
static const char *cased_setting(const char *key, const char *v, size_t n) {
  if (n != 5 || memcmp(v, "false", 5) != 0) return NULL;
  return strcmp(key, "do_lower_case") == 0   ? "do_lower_case is false"
         : strcmp(key, "strip_accents") == 0 ? "strip_accents is false"
                                             : NULL;
}

static int check_config(const char *text, size_t len, trc_error *err) {
  trc_json j;
  trc_json_init(&j, text, len);
  if (trc_json_expect(&j, '{', err)) return -1;
  if (trc_json_accept(&j, '}')) return 0;
  do {
    char *key = NULL;
    const char *v;
    size_t n;
    int rc = trc_json_string(&j, &key, err) || trc_json_expect(&j, ':', err) ||
             trc_json_value_text(&j, &v, &n, err);
    const char *why = rc ? NULL : cased_setting(key, v, n);
    free(key);
    if (rc) return -1;
    if (why)
      return trc_fail(err, "%s: only BERT's uncased WordPiece is implemented (lowercased, "
                           "accents stripped)", why);
  } while (trc_json_accept(&j, ','));
  return trc_json_expect(&j, '}', err);
}

/* A folder's tokenizer_config.json, when it has one, must describe the
 * uncased tokenizer that wordpiece.c implements. */
static int check_uncased(const char *dir, trc_error *err) {
  char path[4096];
  unsigned char *text = NULL;
  size_t len;
  if ((size_t)snprintf(path, sizeof path, "%s/tokenizer_config.json", dir) >= sizeof path ||
      !file_exists(dir, "tokenizer_config.json"))
    return 0;
  int rc = trc_read_file(path, &text, &len, err) || check_config((const char *)text, len, err);
  free(text);
  return rc ? trc_set_where(err, path) : 0;
}

/* A folder with vocab.txt holds BERT's WordPiece; one with vocab.json,
 * GPT-2's BPE. */
static int load_folder(trc_tokenizer *t, const char *dir, trc_error *err) {
  struct stat st;
  if (stat(dir, &st) != 0) return trc_fail_at(err, dir, "cannot open: %s", strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return trc_fail_at(err, dir, "not a folder (--tokenizer takes `bytes` or a folder)");
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/vocab.txt", dir) >= sizeof path)
    return trc_fail_at(err, dir, "the tokenizer's folder name is too long");
  if (file_exists(dir, "vocab.txt"))
    return check_uncased(dir, err) || load_wordpiece(t, path, err) ? -1 : 0;
  if (file_exists(dir, "vocab.json")) return load_bpe(t, dir, err);
  return trc_fail_at(err, dir, "no tokenizer here: expected vocab.txt (BERT's WordPiece) or "
                               "vocab.json and merges.txt (GPT-2's BPE)");
}

int trc_tokenizer_load(const char *spec, trc_tokenizer **out, trc_error *err) {
  trc_tokenizer *t = calloc(1, sizeof *t);
  if (!t) return trc_fail(err, "out of memory (tokenizer)");
  int rc = strcmp(spec, "bytes") == 0 ? load_bytes(t, err) : load_folder(t, spec, err);
  return hand_over(out, rc, t);
}

int trc_tokenizer_parse_wordpiece(const char *vocab, size_t len, trc_tokenizer **out,
                                  trc_error *err) {
  trc_tokenizer *t = calloc(1, sizeof *t);
  if (!t) return trc_fail(err, "out of memory (tokenizer)");
  return hand_over(out, parse_wordpiece(t, (const unsigned char *)vocab, len, "vocab.txt", err),
                   t);
}

int trc_tokenizer_parse(const char *vocab, size_t vocab_len, const char *merges,
                        size_t merges_len, trc_tokenizer **out, trc_error *err) {
  trc_tokenizer *t = calloc(1, sizeof *t);
  unsigned char *copy = malloc(merges_len ? merges_len : 1);
  if (!t || !copy) {
    free(t);
    free(copy);
    return trc_fail(err, "out of memory (tokenizer)");
  }
  memcpy(copy, merges, merges_len);
  int rc = parse_bpe(t, vocab, vocab_len, copy, merges_len, "vocab.json", "merges.txt", err);
  free(copy);
  return hand_over(out, rc, t);
}

void trc_tokenizer_free(trc_tokenizer *t) {
  if (!t) return;
  free(t->bytes);
  free(t->offset);
  free(t->by_text);
  free(t->merges);
  free(t);
}

int64_t trc_tokenizer_vocab(const trc_tokenizer *t) { return t->vocab; }
int32_t trc_tokenizer_eot(const trc_tokenizer *t) { return t->eot; }
int trc_tokenizer_needs_utf8(const trc_tokenizer *t) { return t->kind != KIND_BYTES; }
int trc_tokenizer_is_wordpiece(const trc_tokenizer *t) { return t->kind == KIND_WORDPIECE; }

const unsigned char *trc_tokenizer_token(const trc_tokenizer *t, int32_t id, size_t *len) {
  return token_bytes(t, id, len);
}

/* ---- encoding ---- */

int trc_tokens_push(trc_tokens *tk, int32_t id, trc_error *err) {
  if (tk->n == tk->cap) {
    uint64_t cap = tk->cap ? 2 * tk->cap : 4096;
    int32_t *grown = cap < (SIZE_MAX / 4) ? realloc(tk->ids, (size_t)cap * 4) : NULL;
    if (!grown) return trc_fail(err, "out of memory (%llu tokens)", (unsigned long long)tk->n);
    tk->ids = grown;
    tk->cap = cap;
  }
  tk->ids[tk->n++] = id;
  return 0;
}

void trc_tokens_free(trc_tokens *tk) {
  free(tk->ids);
  *tk = (trc_tokens){0};
}

typedef enum { CH_LETTER, CH_NUMBER, CH_SPACE, CH_OTHER } char_class;

int trc_in_ranges(uint32_t cp, const uint32_t (*r)[2], size_t n) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (cp < r[mid][0]) hi = mid;
    else if (cp > r[mid][1]) lo = mid + 1;
    else return 1;
  }
  return 0;
}

int trc_is_white_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static char_class class_of(uint32_t cp) {
  if (trc_is_white_space(cp)) return CH_SPACE;
  if (trc_in_ranges(cp, trc_unicode_letters, COUNT(trc_unicode_letters))) return CH_LETTER;
  if (trc_in_ranges(cp, trc_unicode_numbers, COUNT(trc_unicode_numbers))) return CH_NUMBER;
  return CH_OTHER;
}

static char_class class_at(const unsigned char *s, size_t len, size_t i, size_t *n) {
  return class_of(trc_utf8_decode(s + i, len - i, n));
}

/* The end of the run of characters of class c starting at i. */
static size_t run_end(const unsigned char *s, size_t len, size_t i, char_class c) {
  size_t n;
  while (i < len && class_at(s, len, i, &n) == c) i += n;
  return i;
}

/* 's 't 'm 'd 're 've 'll: the contraction's length at s, or 0. */
static size_t contraction(const unsigned char *s, size_t len) {
  if (len < 2 || s[0] != '\'') return 0;
  if (strchr("stmd", s[1])) return 2;
  if (len >= 3 && (memcmp(s + 1, "re", 2) == 0 || memcmp(s + 1, "ve", 2) == 0 ||
                   memcmp(s + 1, "ll", 2) == 0))
    return 3;
  return 0;
}

/* The end of the pre-token that starts at i (the pattern's first
 * alternative that matches there, as the regex engine takes it). */
static size_t pretoken_end(const unsigned char *s, size_t len, size_t i) {
  size_t n, k = contraction(s + i, len - i);
  if (k) return i + k;
  char_class c = class_at(s, len, i, &n);
  if (s[i] == ' ' && i + 1 < len) { /* " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+" */
    size_t m;
    char_class next = class_at(s, len, i + 1, &m);
    if (next != CH_SPACE) return run_end(s, len, i + 1, next);
  }
  if (c != CH_SPACE) return run_end(s, len, i, c);
  size_t end = run_end(s, len, i, CH_SPACE), last = i; /* "\s+(?!\S)|\s+" */
  for (size_t p = i; p < end; p += n) {
    trc_utf8_decode(s + p, len - p, &n);
    last = p;
  }
  return end == len || last == i ? end : last;
}

/* One pre-token: bytes to symbols, then merges by rank. */
static int encode_word(const trc_tokenizer *t, const unsigned char *s, size_t len, int32_t *sym,
                       trc_tokens *out, trc_error *err) {
  size_t n = len;
  for (size_t i = 0; i < len; i++) sym[i] = t->byte_token[s[i]];
  for (;;) {
    const merge *best = NULL;
    for (size_t i = 0; i + 1 < n; i++) {
      const merge *m = &t->merges[merge_slot(t, sym[i], sym[i + 1])];
      if (m->rank >= 0 && (!best || m->rank < best->rank)) best = m;
    }
    if (!best) break;
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
      if (i + 1 < n && sym[i] == best->left && sym[i + 1] == best->right) {
        sym[w++] = best->result;
        i++;
      } else {
        sym[w++] = sym[i];
      }
    }
    n = w;
  }
  for (size_t i = 0; i < n; i++)
    if (trc_tokens_push(out, sym[i], err)) return -1;
  return 0;
}

int trc_tokenizer_encode(const trc_tokenizer *t, const unsigned char *text, size_t len,
                         trc_tokens *out, trc_error *err) {
  if (t->kind == KIND_BYTES) {
    for (size_t i = 0; i < len; i++)
      if (trc_tokens_push(out, text[i], err)) return -1;
    return 0;
  }
  size_t bad = trc_utf8_invalid_at(text, len);
  if (bad < len) return trc_fail(err, "invalid UTF-8 at byte %zu", bad);
  if (t->kind == KIND_WORDPIECE) return trc_wordpiece_encode(t, text, len, out, err);
  int32_t *sym = NULL; /* room for the longest pre-token so far */
  size_t cap = 0;
  int rc = 0;
  for (size_t i = 0, end; i < len && rc == 0; i = end) {
    end = pretoken_end(text, len, i);
    if (end - i > cap) {
      int32_t *grown = realloc(sym, (cap = end - i) * sizeof *sym);
      if (!grown) {
        rc = trc_fail(err, "out of memory (a pre-token of %zu bytes)", end - i);
        break;
      }
      sym = grown;
    }
    rc = encode_word(t, text + i, end - i, sym, out, err);
  }
  free(sym);
  return rc;
}
