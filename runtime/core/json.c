/* json.c — the little JSON the runtime needs: writing numbers and strings
 * (logs, safetensors headers) and a strict pull reader (RFC 8259 syntax,
 * valid UTF-8) for the fixed shapes of safetensors headers. */
#include "rt_core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void trc_json_write_number(FILE *f, double x) {
  if (isfinite(x))
    fprintf(f, "%.9g", x);
  else
    fputs("null", f);
}

void trc_json_write_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

/* ---- reader ---- */

void trc_json_init(trc_json *j, const char *text, size_t len) {
  j->start = j->p = text;
  j->end = text + len;
}

static void skip_space(trc_json *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

int trc_json_fail(trc_json *j, trc_error *err, const char *expected) {
  return trc_fail(err, "malformed JSON: expected %s at byte %ld", expected,
                  (long)(j->p - j->start));
}

int trc_json_accept(trc_json *j, char c) {
  skip_space(j);
  if (j->p < j->end && *j->p == c) {
    j->p++;
    return 1;
  }
  return 0;
}

int trc_json_expect(trc_json *j, char c, trc_error *err) {
  char what[4] = {'\'', c, '\'', '\0'};
  return trc_json_accept(j, c) ? 0 : trc_json_fail(j, err, what);
}

int trc_json_at_end(trc_json *j) {
  skip_space(j);
  return j->p == j->end;
}

static int hex4(const char *p, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                 : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                 : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                        : 16u;
    if (d == 16) return -1;
    v = v * 16 + d;
  }
  *out = v;
  return 0;
}

size_t trc_utf8_encode(char *out, uint32_t cp) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | cp >> 12);
    out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | cp >> 18);
  out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* \uXXXX, or a surrogate pair \uD8xx\uDCxx; j->p is just past the 'u'. */
static int parse_unicode_escape(trc_json *j, unsigned *cp) {
  if (j->end - j->p < 4 || hex4(j->p, cp)) return -1;
  j->p += 4;
  if (*cp >= 0xDC00 && *cp <= 0xDFFF) return -1;
  if (*cp < 0xD800 || *cp > 0xDBFF) return 0;
  unsigned low;
  if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' || hex4(j->p + 2, &low) ||
      low < 0xDC00 || low > 0xDFFF)
    return -1;
  j->p += 6;
  *cp = 0x10000 + ((*cp - 0xD800) << 10) + (low - 0xDC00);
  return 0;
}

static int parse_escape(trc_json *j, char *out, size_t *n) {
  if (j->p >= j->end) return -1;
  char c = *j->p++;
  static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
  const char *hit = c ? strchr(from, c) : NULL;
  if (hit) {
    out[(*n)++] = to[hit - from];
    return 0;
  }
  unsigned cp;
  if (c != 'u' || parse_unicode_escape(j, &cp) || cp == 0) return -1; /* no NUL in C strings */
  *n += trc_utf8_encode(out + *n, cp);
  return 0;
}

size_t trc_utf8_sequence(const unsigned char *p, const unsigned char *end) {
  size_t len = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC2 ? 2 : 0;
  if (len == 0 || p[0] > 0xF4 || (size_t)(end - p) < len) return 0;
  for (size_t i = 1; i < len; i++)
    if ((p[i] & 0xC0) != 0x80) return 0;
  if ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] >= 0xA0) ||
      (p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] >= 0x90))
    return 0;
  return len;
}

/* One raw character (a whole UTF-8 sequence) or escape, appended to s. */
static int decode_char(trc_json *j, char *s, size_t *n) {
  const unsigned char c = (unsigned char)*j->p;
  if (c == '\\') {
    j->p++;
    return parse_escape(j, s, n);
  }
  const unsigned char *p = (const unsigned char *)j->p, *end = (const unsigned char *)j->end;
  size_t seq = c >= 0x80 ? trc_utf8_sequence(p, end)
                         : c >= 0x20;
  if (seq == 0) return -1;
  memcpy(s + *n, j->p, seq);
  *n += seq;
  j->p += seq;
  return 0;
}

/* A decoded string never grows: every escape is at least as long as its
 * UTF-8, so the raw length bounds the allocation. */
int trc_json_string(trc_json *j, char **out, trc_error *err) {
  if (!trc_json_accept(j, '"')) return trc_json_fail(j, err, "a string");
  const char *close = j->p;
  while (close < j->end && *close != '"') close += *close == '\\' && close + 1 < j->end ? 2 : 1;
  if (close >= j->end) return trc_json_fail(j, err, "a closing '\"'");
  char *s = malloc((size_t)(close - j->p) + 1);
  if (!s) return trc_fail(err, "out of memory");
  size_t n = 0;
  while (j->p < close)
    if (decode_char(j, s, &n)) {
      free(s);
      return trc_json_fail(j, err, "a valid string character or escape");
    }
  j->p++;
  s[n] = '\0';
  *out = s;
  return 0;
}

int trc_json_u64(trc_json *j, uint64_t *out, trc_error *err) {
  skip_space(j);
  if (j->p >= j->end || *j->p < '0' || *j->p > '9')
    return trc_json_fail(j, err, "a non-negative integer");
  if (*j->p == '0' && j->p + 1 < j->end && j->p[1] >= '0' && j->p[1] <= '9')
    return trc_json_fail(j, err, "a number without leading zeros");
  uint64_t v = 0;
  while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
    if (!trc_mul_ok(v, 10, &v) || !trc_add_ok(v, (uint64_t)(*j->p - '0'), &v))
      return trc_json_fail(j, err, "an integer below 2^64");
    j->p++;
  }
  if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
    return trc_json_fail(j, err, "an integer");
  *out = v;
  return 0;
}

/* A number's syntax (RFC 8259): -? int frac? exp? */
static int skip_number(trc_json *j) {
  const char *p = j->p;
  if (p < j->end && *p == '-') p++;
  if (p >= j->end || *p < '0' || *p > '9') return -1;
  if (*p == '0') p++;
  else
    while (p < j->end && *p >= '0' && *p <= '9') p++;
  if (p < j->end && *p == '.') {
    if (++p >= j->end || *p < '0' || *p > '9') return -1;
    while (p < j->end && *p >= '0' && *p <= '9') p++;
  }
  if (p < j->end && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < j->end && (*p == '+' || *p == '-')) p++;
    if (p >= j->end || *p < '0' || *p > '9') return -1;
    while (p < j->end && *p >= '0' && *p <= '9') p++;
  }
  j->p = p;
  return 0;
}

static int skip_word(trc_json *j, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0) return -1;
  j->p += n;
  return 0;
}

static int skip_nested(trc_json *j, int depth, trc_error *err);

/* The members of an object or the elements of an array, after its opening. */
static int skip_members(trc_json *j, int object, int depth, trc_error *err) {
  char close = object ? '}' : ']';
  if (trc_json_accept(j, close)) return 0;
  do {
    if (object) {
      char *key;
      if (trc_json_string(j, &key, err)) return -1;
      free(key);
      if (trc_json_expect(j, ':', err)) return -1;
    }
    if (skip_nested(j, depth + 1, err)) return -1;
  } while (trc_json_accept(j, ','));
  return trc_json_expect(j, close, err);
}

static int skip_nested(trc_json *j, int depth, trc_error *err) {
  if (depth > 64) return trc_json_fail(j, err, "at most 64 levels of nesting");
  skip_space(j);
  if (j->p >= j->end) return trc_json_fail(j, err, "a value");
  char c = *j->p;
  if (c == '"') {
    char *s;
    if (trc_json_string(j, &s, err)) return -1;
    free(s);
    return 0;
  }
  if (c == '{' || c == '[') {
    j->p++;
    return skip_members(j, c == '{', depth, err);
  }
  int bad = c == 't' ? skip_word(j, "true") : c == 'f' ? skip_word(j, "false")
            : c == 'n' ? skip_word(j, "null") : skip_number(j);
  return bad ? trc_json_fail(j, err, "a value") : 0;
}

int trc_json_skip_value(trc_json *j, trc_error *err) { return skip_nested(j, 0, err); }

int trc_json_value_text(trc_json *j, const char **text, size_t *len, trc_error *err) {
  skip_space(j);
  *text = j->p;
  if (trc_json_skip_value(j, err)) return -1;
  *len = (size_t)(j->p - *text);
  return 0;
}
