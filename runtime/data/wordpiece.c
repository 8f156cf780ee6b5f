/* wordpiece.c — BERT's WordPiece tokenizer, uncased, as Hugging Face's
 * BertTokenizerFast does it (its tokenizers library: BertNormalizer,
 * BertPreTokenizer, the WordPiece model), over a vocab.txt that tokenizer.c
 * has read:
 *
 * 1. The special tokens [PAD] [UNK] [CLS] [SEP] [MASK] written in the text
 *    are those tokens (matched exactly, before anything else).
 * 2. The rest is normalized character by character (the tables of
 *    unicode_bert.h, read off Hugging Face's normalizer): control and format
 *    characters, U+FFFD and accents (Mn, after NFD) are dropped, whitespace
 *    becomes a space, CJK ideographs get spaces around them, letters are
 *    lowercased and decomposed (NFD), Hangul syllables become their jamo.
 * 3. The text is split at whitespace and around every punctuation
 *    character into words.
 * 4. A word of more than 100 characters is [UNK]; any other is cut greedily
 *    into the longest pieces the vocabulary has, from the left, every piece
 *    after the first looked up with "##" before it; a word with a part that
 *    matches nothing is [UNK] as a whole.
 *
 * What is not done: NFD's canonical reordering, which matters only for
 * the 46 spacing marks with a combining class that survive accent stripping
 * (musical symbols, a few Brahmic viramas) when two of them meet out of order. */
#include "rt_data.h"
#include "unicode_bert.h"

#include <string.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

enum {
  MAX_WORD_CHARS = 100, /* longer words are [UNK] (max_input_chars_per_word) */
  HANGUL_FIRST = 0xAC00,
  HANGUL_LAST = 0xD7A3,
};

/* ---- normalization, one code point at a time ---- */

/* A Hangul syllable's two or three jamo (Unicode's algorithm, section 3.12). */
static int hangul_jamo(uint32_t cp, uint32_t out[3]) {
  uint32_t s = cp - HANGUL_FIRST;
  out[0] = 0x1100 + s / (21 * 28);
  out[1] = 0x1161 + s % (21 * 28) / 28;
  out[2] = 0x11A7 + s % 28;
  return s % 28 ? 3 : 2;
}

/* The row of trc_bert_mapped for cp, or NULL. */
static const uint32_t *mapped_row(uint32_t cp) {
  size_t lo = 0, hi = COUNT(trc_bert_mapped);
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (cp < trc_bert_mapped[mid][0]) hi = mid;
    else if (cp > trc_bert_mapped[mid][0]) lo = mid + 1;
    else return trc_bert_mapped[mid];
  }
  return NULL;
}

/* What the normalizer makes of cp: out[0 .. the count returned). */
static int normalize_char(uint32_t cp, uint32_t out[3]) {
  if (trc_in_ranges(cp, trc_bert_dropped, COUNT(trc_bert_dropped))) return 0;
  if (trc_is_white_space(cp)) {
    out[0] = ' ';
    return 1;
  }
  if (trc_in_ranges(cp, trc_bert_cjk, COUNT(trc_bert_cjk))) {
    out[0] = out[2] = ' ';
    out[1] = cp;
    return 3;
  }
  if (cp >= HANGUL_FIRST && cp <= HANGUL_LAST) return hangul_jamo(cp, out);
  const uint32_t *row = mapped_row(cp);
  if (!row) {
    out[0] = cp;
    return 1;
  }
  int n = 0;
  while (n < 3 && row[n + 1]) out[n] = row[n + 1], n++;
  return n;
}

/* ---- words into pieces ---- */

/* A word as it is collected: its first MAX_WORD_CHARS + 1 characters (one
 * more says it is too long) and its length. */
typedef struct {
  uint32_t cp[MAX_WORD_CHARS + 1];
  size_t n;
} word;

typedef struct {
  const trc_tokenizer *t;
  int32_t unk;
  trc_tokens *out;
} encoder;

/* The id of characters [start, end) of the word as a piece: "##" before
 * it unless it starts the word; -1 when the vocabulary lacks it. */
static int32_t piece_id(const encoder *e, const unsigned char *w, const size_t *at, size_t start,
                        size_t end) {
  unsigned char piece[2 + 4 * MAX_WORD_CHARS] = "##";
  size_t len = at[end] - at[start];
  memcpy(piece + 2, w + at[start], len);
  return start ? trc_tokenizer_find(e->t, piece, len + 2)
               : trc_tokenizer_find(e->t, piece + 2, len);
}

/* The greedy longest-match-first cut of a word; [UNK] if a part matches
 * nothing. `w` is the word's UTF-8 and at[i] where character i starts. */
static int push_pieces(const encoder *e, const unsigned char *w, const size_t *at, size_t chars,
                       trc_error *err) {
  const uint64_t first = e->out->n;
  for (size_t start = 0, end; start < chars; start = end) {
    int32_t id = -1;
    for (end = chars; end > start; end--)
      if ((id = piece_id(e, w, at, start, end)) >= 0) break;
    if (id < 0) {
      e->out->n = first;
      return trc_tokens_push(e->out, e->unk, err);
    }
    if (trc_tokens_push(e->out, id, err)) return -1;
  }
  return 0;
}

static int end_word(const encoder *e, word *wd, trc_error *err) {
  if (wd->n == 0) return 0;
  if (wd->n > MAX_WORD_CHARS) {
    wd->n = 0;
    return trc_tokens_push(e->out, e->unk, err);
  }
  char bytes[4 * MAX_WORD_CHARS];
  size_t at[MAX_WORD_CHARS + 1] = {0};
  for (size_t i = 0; i < wd->n; i++) at[i + 1] = at[i] + trc_utf8_encode(bytes + at[i], wd->cp[i]);
  size_t chars = wd->n;
  wd->n = 0;
  return push_pieces(e, (const unsigned char *)bytes, at, chars, err);
}

/* One normalized character: whitespace ends the word, punctuation is a
 * word of its own, anything else goes on the word. */
static int add_char(const encoder *e, word *wd, uint32_t cp, trc_error *err) {
  if (trc_is_white_space(cp)) return end_word(e, wd, err);
  int punctuation = trc_in_ranges(cp, trc_bert_punctuation, COUNT(trc_bert_punctuation));
  if (punctuation && end_word(e, wd, err)) return -1;
  if (wd->n <= MAX_WORD_CHARS) wd->cp[wd->n] = cp;
  wd->n++;
  return punctuation ? end_word(e, wd, err) : 0;
}

/* Text without special tokens: normalized, split, cut. */
static int encode_plain(const encoder *e, const unsigned char *s, size_t len, trc_error *err) {
  word wd;
  wd.n = 0;
  for (size_t i = 0, n; i < len; i += n) {
    uint32_t norm[3];
    int k = normalize_char(trc_utf8_decode(s + i, len - i, &n), norm);
    for (int j = 0; j < k; j++)
      if (add_char(e, &wd, norm[j], err)) return -1;
  }
  return end_word(e, &wd, err);
}

/* ---- special tokens in the text ---- */

static const char *const specials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

/* The id of the special token written at s, and its length; -1 if none. */
static int32_t special_at(const trc_tokenizer *t, const unsigned char *s, size_t len,
                          size_t *n) {
  if (s[0] != '[') return -1;
  for (size_t k = 0; k < COUNT(specials); k++) {
    *n = strlen(specials[k]);
    if (*n <= len && memcmp(s, specials[k], *n) == 0)
      return trc_tokenizer_find(t, s, *n);
  }
  return -1;
}

int trc_wordpiece_encode(const trc_tokenizer *t, const unsigned char *text, size_t len,
                         trc_tokens *out, trc_error *err) {
  const encoder e = {t, trc_tokenizer_find(t, (const unsigned char *)"[UNK]", 5), out};
  size_t plain = 0; /* where the text since the last special token starts */
  for (size_t i = 0, n; i < len; i++) {
    int32_t id = special_at(t, text + i, len - i, &n);
    if (id < 0) continue;
    if (encode_plain(&e, text + plain, i - plain, err) || trc_tokens_push(out, id, err))
      return -1;
    i += n - 1;
    plain = i + 1;
  }
  return encode_plain(&e, text + plain, len - plain, err);
}
