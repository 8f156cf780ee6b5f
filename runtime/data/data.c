/* data.c — a model's training data: one array file per input, checked against
 * the input's dtype and per-example shape, converted once, held in memory, and
 * copied example by example into the arena's input slots. */
#include "rt_data.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

static void format_shape(char *out, size_t cap, int rank, const int64_t *dims) {
  size_t n = (size_t)snprintf(out, cap, "[");
  for (int d = 0; d < rank && n < cap; d++)
    n += (size_t)snprintf(out + n, cap - n, "%s%lld", d ? ", " : "", (long long)dims[d]);
  if (n < cap) snprintf(out + n, cap - n, "]");
}

/* The input's shape with the batch dim written N: "[N, 784]". */
static void format_input_shape(char *out, size_t cap, const trc_input *in) {
  size_t n = (size_t)snprintf(out, cap, "[N");
  for (int d = 1; d < in->rank && n < cap; d++)
    n += (size_t)snprintf(out + n, cap - n, ", %lld", (long long)in->dims[d]);
  if (n < cap) snprintf(out + n, cap - n, "]");
}

/* Which stored element types each input dtype accepts; integers widen or
 * narrow with a range check, floats must already be f32. */
static int convertible(trc_dtype want, trc_elem_type have) {
  switch (want) {
  case TRC_U8: return have == TRC_ELEM_U8;
  case TRC_I32: return have == TRC_ELEM_U8 || have == TRC_ELEM_I32 || have == TRC_ELEM_I64;
  case TRC_F32: return have == TRC_ELEM_F32;
  }
  return 0;
}

static uint64_t load_element(const unsigned char *p, size_t size, int big_endian) {
  uint64_t v = 0;
  for (size_t k = 0; k < size; k++) v |= (uint64_t)p[big_endian ? size - 1 - k : k] << (8 * k);
  return v;
}

/* Whether stored elements differ in size or byte order from the input's. */
static int needs_conversion(const trc_array_header *h, trc_dtype want) {
  size_t size = trc_elem_size(h->elem);
  return size != trc_dtype_size(want) || (size > 1 && h->big_endian);
}

/* Converts n elements to `want` (src == dst: byte swaps in place). Returns
 * -1 with *bad set to the first element that does not fit in i32. */
static int convert_elements(const unsigned char *src, const trc_array_header *h, uint64_t n,
                            unsigned char *dst, uint64_t *bad) {
  size_t size = trc_elem_size(h->elem);
  for (uint64_t i = 0; i < n; i++) {
    uint64_t bits = load_element(src + i * size, size, h->big_endian);
    if (size == 4) { /* byte-swapped f32 or i32: same bits */
      uint32_t v = (uint32_t)bits;
      memcpy(dst + 4 * i, &v, 4);
      continue;
    }
    int64_t v = (int64_t)bits; /* u8 or i64 into i32 */
    if (v < INT32_MIN || v > INT32_MAX) {
      *bad = i;
      return -1;
    }
    int32_t w = (int32_t)v;
    memcpy(dst + 4 * i, &w, 4);
  }
  return 0;
}

void trc_store_index(const trc_input *in, unsigned char *data, uint64_t i, int32_t v) {
  if (in->dtype == TRC_U8)
    data[i] = (unsigned char)v;
  else
    memcpy(data + 4 * i, &v, 4);
}

static int64_t load_index(const trc_input *in, const unsigned char *data, uint64_t i) {
  if (in->dtype == TRC_U8) return data[i];
  int32_t v;
  memcpy(&v, data + 4 * i, 4);
  return v;
}

/* `ignore`: a label that is also allowed (cross_entropy's ignore), or NULL. */
static int check_index_limit(const trc_input *in, const unsigned char *data, int64_t rows,
                             const int64_t *ignore, const char *path, trc_error *err) {
  uint64_t per = trc_input_example_elems(in), n = (uint64_t)rows * per;
  for (uint64_t i = 0; i < n; i++) {
    int64_t v = load_index(in, data, i);
    if ((v < 0 || v >= in->index_limit) && !(ignore && v == *ignore))
      return trc_fail_at(err, path, "input '%s': value %lld at row %llu is outside [0, %lld)%s",
                         in->name, (long long)v, (unsigned long long)(i / per),
                         (long long)in->index_limit, ignore ? " and not ignored" : "");
  }
  return 0;
}

/* f32 inputs hold numbers: a NaN or infinity would train silently into NaN
 * weights (a relu hides it from the loss). */
static int check_finite(const trc_input *in, const unsigned char *data, int64_t rows,
                        const char *path, trc_error *err) {
  uint64_t per = trc_input_example_elems(in), n = (uint64_t)rows * per;
  uint64_t i = trc_first_non_finite((const float *)data, n);
  if (i == n) return 0;
  return trc_fail_at(err, path, "input '%s': value %s at row %llu, column %llu is not finite",
                     in->name, trc_non_finite_name(((const float *)data)[i]),
                     (unsigned long long)(i / per), (unsigned long long)(i % per));
}

static int check_header_fits(const trc_array_header *h, const trc_input *in, const char *path,
                             trc_error *err) {
  char found[256], expected[256];
  format_shape(found, sizeof found, h->rank, h->dims);
  format_input_shape(expected, sizeof expected, in);
  if (!convertible(in->dtype, h->elem))
    return trc_fail_at(err, path, "expected dtype %s for input '%s', found %s",
                       trc_dtype_name(in->dtype), in->name, h->type_name);
  if (h->rank < 1 || h->dims[0] < 1)
    return trc_fail_at(err, path, "expected shape %s with N >= 1 for input '%s', found %s",
                       expected, in->name, found);
  uint64_t per = h->count / (uint64_t)h->dims[0];
  if (per != trc_input_example_elems(in))
    return trc_fail_at(err, path,
                       "expected shape %s for input '%s' (%llu elements per example), found %s",
                       expected, in->name, (unsigned long long)trc_input_example_elems(in), found);
  return 0;
}

typedef struct {
  uint64_t (*extent)(const unsigned char *b, size_t n);
  int (*parse)(const void *buf, size_t len, trc_array_header *h, trc_error *err);
} array_format;

enum { MAX_HEADER_BYTES = 1 << 20, CHUNK_BYTES = 1 << 16 };

/* Reads the header, as long as its first bytes say it is (nothing after it). */
static int read_header(trc_source *src, trc_array_header *h, trc_error *err) {
  static const array_format npy = {trc_npy_header_extent, trc_npy_parse_header},
                            idx = {trc_idx_header_extent, trc_idx_parse_header};
  const array_format *f = ends_with(src->path, ".npy") ? &npy : &idx;
  unsigned char *buf = NULL;
  uint64_t n = 0, need, got;
  int rc = 0;
  while ((need = f->extent(buf, (size_t)n)) > n) {
    unsigned char *bigger = need > MAX_HEADER_BYTES ? NULL : realloc(buf, (size_t)need);
    if (!bigger) {
      rc = trc_fail(err, "the header is %llu bytes long; at most %d are read",
                    (unsigned long long)need, MAX_HEADER_BYTES);
      break;
    }
    buf = bigger;
    if ((rc = trc_source_read(src, buf + n, need - n, &got, err))) break;
    n += got;
    if (n < need) break; /* the file ends inside the header: the parser says where */
  }
  if (rc == 0) rc = f->parse(buf ? buf : (const unsigned char *)"", (size_t)n, h, err);
  free(buf);
  return rc ? trc_set_where(err, src->path) : 0;
}

/* The payload's size, checked before anything is allocated for it: exactly
 * what is left of a plain file; for gzip, no more than its size can hold. */
static int check_payload_size(const trc_source *src, const trc_array_header *h, trc_error *err) {
  if (!src->z)
    return trc_array_check_payload(h, src->size, err) ? trc_set_where(err, src->path) : 0;
  if (h->data_bytes > trc_source_max_size(src) - h->data_offset)
    return trc_fail_at(err, src->path,
                       "the header promises %llu bytes, more than a gzip file of %llu bytes can "
                       "hold",
                       (unsigned long long)h->data_bytes, (unsigned long long)src->size);
  return 0;
}

/* n bytes of payload, or the message of a file cut short. */
static int read_payload(trc_source *src, const trc_array_header *h, void *buf, uint64_t n,
                        trc_error *err) {
  uint64_t got;
  if (trc_source_read(src, buf, n, &got, err)) return -1;
  if (got == n) return 0;
  trc_array_check_payload(h, src->pos, err);
  return trc_set_where(err, src->path);
}

static int fail_not_i32(const trc_source *src, const trc_array_header *h, const trc_input *in,
                        uint64_t element, trc_error *err) {
  uint64_t per = h->count / (uint64_t)h->dims[0];
  return trc_fail_at(err, src->path, "input '%s': value at row %llu does not fit in i32",
                     in->name, (unsigned long long)(element / per));
}

/* Reads the payload into dst in the input's dtype: elements of that size
 * straight into dst (byte-swapped in place), others (u8 or i64 into i32)
 * through a small buffer, so the file's bytes are never held beside dst. */
static int read_elements(trc_source *src, const trc_array_header *h, const trc_input *in,
                         unsigned char *dst, trc_error *err) {
  const size_t size = trc_elem_size(h->elem), out = trc_dtype_size(in->dtype);
  uint64_t bad;
  if (size == out) {
    if (read_payload(src, h, dst, h->data_bytes, err)) return -1;
    return needs_conversion(h, in->dtype) ? convert_elements(dst, h, h->count, dst, &bad) : 0;
  }
  unsigned char *chunk = malloc(CHUNK_BYTES);
  if (!chunk) return trc_fail_at(err, src->path, "out of memory");
  int rc = 0;
  for (uint64_t done = 0; done < h->count && rc == 0; done += CHUNK_BYTES / size) {
    uint64_t k = h->count - done < CHUNK_BYTES / size ? h->count - done : CHUNK_BYTES / size;
    if ((rc = read_payload(src, h, chunk, k * size, err)) == 0 &&
        convert_elements(chunk, h, k, dst + done * out, &bad))
      rc = fail_not_i32(src, h, in, done + bad, err);
  }
  free(chunk);
  return rc;
}

/* The source's content ends with the payload; for gzip, reading on to the
 * end checks the trailer's CRC and size. */
static int check_end(trc_source *src, const trc_array_header *h, trc_error *err) {
  unsigned char extra;
  uint64_t got;
  if (trc_source_read(src, &extra, 1, &got, err)) return -1;
  if (got == 0) return 0;
  return trc_fail_at(err, src->path,
                     "trailing bytes: the header promises %llu elements of %s (%llu bytes) but "
                     "more bytes follow them",
                     (unsigned long long)h->count, h->type_name, (unsigned long long)h->data_bytes);
}

/* The whole load: header, checks against the input, one buffer of the
 * input's dtype filled from the source, value checks. */
static int load_array(trc_source *src, const trc_input *in, unsigned char **data, int64_t *rows,
                      trc_error *err) {
  trc_array_header h;
  uint64_t bytes;
  if (read_header(src, &h, err) || check_header_fits(&h, in, src->path, err) ||
      check_payload_size(src, &h, err))
    return -1;
  if (!trc_mul_ok(h.count, trc_dtype_size(in->dtype), &bytes) || bytes > SIZE_MAX)
    return trc_fail_at(err, src->path, "too large");
  unsigned char *dst = malloc(bytes ? (size_t)bytes : 1);
  if (!dst)
    return trc_fail_at(err, src->path, "out of memory (%llu bytes)", (unsigned long long)bytes);
  *rows = h.dims[0];
  if (read_elements(src, &h, in, dst, err) || check_end(src, &h, err) ||
      (in->dtype == TRC_F32 && check_finite(in, dst, *rows, src->path, err)) ||
      (in->index_limit > 0 && check_index_limit(in, dst, *rows, NULL, src->path, err))) {
    free(dst);
    return -1;
  }
  *data = dst;
  return 0;
}

int trc_input_parse(const char *path, const unsigned char *buf, size_t len, const trc_input *in,
                    unsigned char **data, int64_t *rows, trc_error *err) {
  trc_source src;
  trc_source_memory(&src, path, buf, len);
  return load_array(&src, in, data, rows, err);
}

int trc_input_load_file(const char *path, const trc_input *in, unsigned char **data, int64_t *rows,
                        trc_error *err) {
  trc_source src;
  if (trc_source_open(&src, path, err)) return -1;
  int rc = load_array(&src, in, data, rows, err);
  trc_source_close(&src);
  return rc;
}

int trc_find_input_file(const char *dir, const char *name, char *path, size_t cap,
                           trc_error *err) {
  static const char *const suffixes[] = {".npy", ".idx", ".idx.gz"};
  struct stat st;
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    if ((size_t)snprintf(path, cap, "%s/%s%s", dir, name, suffixes[i]) >= cap)
      return trc_fail_at(err, dir, "path too long");
    if (lstat(path, &st) == 0) return 0;
  }
  return trc_fail_at(err, dir, "no file for input '%s' (looked for %s.npy, %s.idx, %s.idx.gz)",
                     name, name, name, name);
}

/* Loads input i into ds->columns[i]; its example count must match the first's. */
static int load_column(const trc_model *m, int i, const char *dir, trc_dataset *ds,
                       char *first_path, size_t cap, trc_error *err) {
  const trc_input *in = &m->inputs[i];
  trc_input labels = *in; /* ignored labels: checked below, with their exception */
  const int ignored = trc_ignore_input(m) == i;
  labels.index_limit = ignored ? 0 : in->index_limit;
  char path[4096];
  int64_t rows;
  if (trc_find_input_file(dir, in->name, path, sizeof path, err) ||
      trc_input_load_file(path, &labels, &ds->columns[i].data, &rows, err))
    return -1;
  ds->n_columns = i + 1; /* freed with the dataset from here on */
  if (ignored && (check_index_limit(in, ds->columns[i].data, rows, &m->ignore_label, path, err) ||
                  trc_check_labels_count(m, ds->columns[i].data, rows, path, err)))
    return -1;
  ds->columns[i].example_bytes = in->example_bytes;
  if (i == 0) {
    ds->n = rows;
    snprintf(first_path, cap, "%s", path);
  } else if (rows != ds->n) {
    return trc_fail_at(err, path, "has %lld examples but %s has %lld", (long long)rows, first_path,
                       (long long)ds->n);
  }
  return 0;
}

int trc_dataset_load(const trc_model *m, const char *dir, trc_dataset *ds, trc_error *err) {
  struct stat st;
  memset(ds, 0, sizeof *ds);
  if (stat(dir, &st) != 0) return trc_fail_at(err, dir, "cannot open: %s", strerror(errno));
  if (!S_ISDIR(st.st_mode)) return trc_fail_at(err, dir, "not a directory");
  ds->columns = calloc((size_t)m->n_inputs + 1, sizeof *ds->columns);
  if (!ds->columns) return trc_fail_at(err, dir, "out of memory");
  ds->owns_data = 1;
  char first_path[4096];
  for (int i = 0; i < m->n_inputs; i++)
    if (load_column(m, i, dir, ds, first_path, sizeof first_path, err)) {
      trc_dataset_free(ds);
      return -1;
    }
  return 0;
}

int trc_dataset_view(const trc_dataset *src, int64_t first, int64_t count, trc_dataset *view,
                     trc_error *err) {
  memset(view, 0, sizeof *view);
  if (first < 0 || count < 0 || first > src->n - count)
    return trc_fail(err, "rows [%lld, +%lld) outside a dataset of %lld", (long long)first,
                    (long long)count, (long long)src->n);
  view->columns = calloc((size_t)src->n_columns + 1, sizeof *view->columns);
  if (!view->columns) return trc_fail(err, "out of memory");
  view->n = count;
  view->n_columns = src->n_columns;
  for (int i = 0; i < src->n_columns; i++) {
    view->columns[i].example_bytes = src->columns[i].example_bytes;
    view->columns[i].data = src->columns[i].data + (uint64_t)first * src->columns[i].example_bytes;
  }
  return 0;
}

void trc_dataset_free(trc_dataset *ds) {
  if (ds->owns_data)
    for (int i = 0; i < ds->n_columns; i++) free(ds->columns[i].data);
  free(ds->columns);
  memset(ds, 0, sizeof *ds);
}

void trc_dataset_gather(const trc_dataset *ds, const trc_model *m, const int64_t *rows,
                        int64_t count, char *arena) {
  for (int i = 0; i < ds->n_columns; i++) {
    const trc_column *col = &ds->columns[i];
    char *slot = arena + m->inputs[i].offset;
    for (int64_t r = 0; r < count; r++)
      memcpy(slot + (uint64_t)r * col->example_bytes,
             col->data + (uint64_t)rows[r] * col->example_bytes, col->example_bytes);
  }
}
