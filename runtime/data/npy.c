/* npy.c — the NumPy .npy header, parsed strictly from memory.
 *
 * Layout: "\x93NUMPY", major, minor, header length (u16 LE for version 1,
 * u32 LE for 2 and 3), then a Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 784), }
 * padded with spaces and a newline, then the elements. Only the four dtypes
 * trainers read are accepted, and the elements must fill the rest of the
 * buffer exactly. */
#include "rt_data.h"

#include <string.h>

typedef struct {
  const char *p, *end, *start;
} cursor;

static void skip_space(cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int accept(cursor *c, char ch) {
  skip_space(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return 1;
  }
  return 0;
}

static int malformed(cursor *c, trc_error *err, const char *expected) {
  return trc_fail(err, "malformed .npy header: expected %s at header byte %ld", expected,
                  (long)(c->p - c->start));
}

/* A quoted Python string without escapes or control bytes (none occur in
 * numpy's keys or the dtypes we accept; a NUL would end the C string early:
 * '|u1\0' read as '|u1'). */
static int parse_string(cursor *c, char *out, size_t cap, trc_error *err) {
  skip_space(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return malformed(c, err, "a string");
  char quote = *c->p++;
  size_t n = 0;
  while (c->p < c->end && *c->p != quote) {
    if (*c->p == '\\' || (unsigned char)*c->p < 0x20 || n + 1 >= cap)
      return malformed(c, err, "a short string without escapes or control bytes");
    out[n++] = *c->p++;
  }
  if (c->p >= c->end) return malformed(c, err, "a closing quote");
  c->p++;
  out[n] = '\0';
  return 0;
}

static int accept_word(cursor *c, const char *word) {
  size_t n = strlen(word);
  skip_space(c);
  if ((size_t)(c->end - c->p) >= n && memcmp(c->p, word, n) == 0) {
    c->p += n;
    return 1;
  }
  return 0;
}

static int parse_bool(cursor *c, int *value, trc_error *err) {
  if (accept_word(c, "True"))
    *value = 1;
  else if (accept_word(c, "False"))
    *value = 0;
  else
    return malformed(c, err, "True or False");
  return 0;
}

static int parse_dim(cursor *c, int64_t *dim, trc_error *err) {
  skip_space(c);
  if (c->p >= c->end || *c->p < '0' || *c->p > '9') return malformed(c, err, "a dimension");
  uint64_t v = 0;
  while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
    if (!trc_mul_ok(v, 10, &v) || !trc_add_ok(v, (uint64_t)(*c->p - '0'), &v) ||
        v > (uint64_t)INT64_MAX)
      return malformed(c, err, "a dimension that fits in 64 bits");
    c->p++;
  }
  *dim = (int64_t)v;
  return 0;
}

/* A Python tuple of ints: (), (5,), (3, 4) or (3, 4,). */
static int parse_shape(cursor *c, trc_array_header *h, trc_error *err) {
  if (!accept(c, '(')) return malformed(c, err, "'(' starting the shape");
  h->rank = 0;
  while (!accept(c, ')')) {
    if (h->rank == TRC_MAX_RANK)
      return trc_fail(err, "shape has more than %d dimensions", TRC_MAX_RANK);
    if (parse_dim(c, &h->dims[h->rank++], err)) return -1;
    if (accept(c, ')')) break;
    if (!accept(c, ',')) return malformed(c, err, "',' or ')' in the shape");
  }
  return 0;
}

static int set_dtype(trc_array_header *h, const char *descr, trc_error *err) {
  static const struct {
    const char *descr;
    trc_elem_type elem;
  } known[] = {
      {"|u1", TRC_ELEM_U8}, {"<i4", TRC_ELEM_I32}, {"<i8", TRC_ELEM_I64}, {"<f4", TRC_ELEM_F32}};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (strcmp(descr, known[i].descr) == 0) {
      h->elem = known[i].elem;
      h->big_endian = 0;
      snprintf(h->type_name, sizeof h->type_name, "%s", known[i].descr);
      return 0;
    }
  return trc_fail(err, "unsupported dtype '%s' (supported: |u1 <i4 <i8 <f4)", descr);
}

enum { KEY_DESCR = 1, KEY_FORTRAN = 2, KEY_SHAPE = 4 };

static int parse_entry(cursor *c, trc_array_header *h, unsigned *seen, trc_error *err) {
  char key[32], descr[32];
  if (parse_string(c, key, sizeof key, err)) return -1;
  if (!accept(c, ':')) return malformed(c, err, "':'");
  unsigned bit = strcmp(key, "descr") == 0           ? KEY_DESCR
                 : strcmp(key, "fortran_order") == 0 ? KEY_FORTRAN
                 : strcmp(key, "shape") == 0         ? KEY_SHAPE
                                                     : 0;
  if (bit == 0) return trc_fail(err, "unexpected key '%s' in the .npy header", key);
  if (*seen & bit) return trc_fail(err, "key '%s' repeated in the .npy header", key);
  *seen |= bit;
  if (bit == KEY_DESCR) {
    if (parse_string(c, descr, sizeof descr, err)) return -1;
    return set_dtype(h, descr, err);
  }
  if (bit == KEY_FORTRAN) {
    int fortran = 0;
    if (parse_bool(c, &fortran, err)) return -1;
    return fortran ? trc_fail(err, "fortran_order is True; save the array in C order "
                                   "(np.ascontiguousarray)")
                   : 0;
  }
  return parse_shape(c, h, err);
}

static int parse_dict(cursor *c, trc_array_header *h, trc_error *err) {
  unsigned seen = 0;
  if (!accept(c, '{')) return malformed(c, err, "'{'");
  while (!accept(c, '}')) {
    if (parse_entry(c, h, &seen, err)) return -1;
    if (accept(c, '}')) break;
    if (!accept(c, ',')) return malformed(c, err, "',' or '}'");
  }
  skip_space(c);
  if (c->p != c->end) return malformed(c, err, "only padding after '}'");
  if (seen != (KEY_DESCR | KEY_FORTRAN | KEY_SHAPE))
    return trc_fail(err, "the .npy header lacks one of 'descr', 'fortran_order', 'shape'");
  return 0;
}

uint64_t trc_npy_header_extent(const unsigned char *b, size_t n) {
  if (n < 8) return n >= 6 && memcmp(b, "\x93NUMPY", 6) != 0 ? 0 : 10;
  if (memcmp(b, "\x93NUMPY", 6) != 0) return 0;
  if (b[6] == 1) return n < 10 ? 10 : 10 + ((uint64_t)b[8] | (uint64_t)b[9] << 8);
  if (b[6] != 2 && b[6] != 3) return 0;
  if (n < 12) return 12;
  return 12 + ((uint64_t)b[8] | (uint64_t)b[9] << 8 | (uint64_t)b[10] << 16 |
               (uint64_t)b[11] << 24);
}

int trc_npy_parse_header(const void *buf, size_t len, trc_array_header *h, trc_error *err) {
  const unsigned char *b = buf;
  memset(h, 0, sizeof *h);
  if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
    return trc_fail(err, "not a .npy file (bad magic)");
  unsigned major = b[6];
  uint64_t header_len, start;
  if (major == 1) {
    header_len = (uint64_t)b[8] | (uint64_t)b[9] << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12) return trc_fail(err, "file truncated inside the .npy preamble");
    header_len =
        (uint64_t)b[8] | (uint64_t)b[9] << 8 | (uint64_t)b[10] << 16 | (uint64_t)b[11] << 24;
    start = 12;
  } else {
    return trc_fail(err, "unsupported .npy version %u.%u", major, b[7]);
  }
  if (header_len > len - start) return trc_fail(err, "file truncated inside the .npy header");
  cursor c = {(const char *)b + start, (const char *)b + start + header_len,
              (const char *)b + start};
  if (parse_dict(&c, h, err)) return -1;
  h->data_offset = start + header_len;
  return trc_array_size(h, err);
}

int trc_npy_parse(const void *buf, size_t len, trc_array_header *h, trc_error *err) {
  return trc_npy_parse_header(buf, len, h, err) || trc_array_check_payload(h, len, err) ? -1 : 0;
}
