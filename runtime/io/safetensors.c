/* safetensors.c — weights as .safetensors (the format of Hugging Face's
 * `safetensors`): u64 LE header length N, N bytes of JSON
 *   {"name":{"dtype":"F32","shape":[..],"data_offsets":[b,e]}, ...,
 *    "__metadata__":{"format":"pt","trainc_model":"<model>"}}
 * padded with spaces so the data starts 8-byte aligned, then the data, whose
 * offsets are relative to its start. Reading is strict: the header must be
 * valid JSON of exactly that shape, and the tensors' byte ranges must match
 * their shapes, not overlap, and cover the data section exactly. */
#include "rt_io.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HEADER_BYTES (100u << 20) /* the reference implementation's limit */

static size_t dtype_bytes(const char *dtype) {
  static const struct {
    const char *name;
    size_t bytes;
  } known[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
               {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
               {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (strcmp(dtype, known[i].name) == 0) return known[i].bytes;
  return 0;
}

void trc_st_header_free(trc_st_header *h) {
  for (int i = 0; i < h->n; i++) free(h->entries[i].name);
  free(h->entries);
  free(h->model_name);
  for (int i = 0; i < 2 * h->n_meta; i++) free(h->meta[i]);
  free(h->meta);
  memset(h, 0, sizeof *h);
}

/* ---- reading ---- */

static int parse_dtype(trc_json *j, trc_st_entry *e, trc_error *err) {
  char *s;
  if (trc_json_string(j, &s, err)) return -1;
  size_t ok = strlen(s) < sizeof e->dtype && dtype_bytes(s);
  if (ok)
    memcpy(e->dtype, s, strlen(s) + 1);
  else
    trc_fail(err, "tensor '%s': unknown dtype '%.20s'", e->name, s);
  free(s);
  return ok ? 0 : -1;
}

static int parse_shape(trc_json *j, trc_st_entry *e, trc_error *err) {
  if (trc_json_expect(j, '[', err)) return -1;
  e->rank = 0;
  if (trc_json_accept(j, ']')) return 0;
  do {
    uint64_t d;
    if (e->rank == TRC_MAX_RANK)
      return trc_fail(err, "tensor '%s': more than %d dimensions", e->name, TRC_MAX_RANK);
    if (trc_json_u64(j, &d, err)) return -1;
    if (d > (uint64_t)INT64_MAX) return trc_fail(err, "tensor '%s': dimension too large", e->name);
    e->dims[e->rank++] = (int64_t)d;
  } while (trc_json_accept(j, ','));
  return trc_json_expect(j, ']', err);
}

static int parse_offsets(trc_json *j, trc_st_entry *e, trc_error *err) {
  if (trc_json_expect(j, '[', err) || trc_json_u64(j, &e->begin, err) ||
      trc_json_expect(j, ',', err) || trc_json_u64(j, &e->end, err) || trc_json_expect(j, ']', err))
    return -1;
  return 0;
}

enum { HAS_DTYPE = 1, HAS_SHAPE = 2, HAS_OFFSETS = 4 };

static int parse_tensor_field(trc_json *j, trc_st_entry *e, unsigned *seen, trc_error *err) {
  char *key;
  if (trc_json_string(j, &key, err)) return -1;
  unsigned bit = strcmp(key, "dtype") == 0          ? HAS_DTYPE
                 : strcmp(key, "shape") == 0        ? HAS_SHAPE
                 : strcmp(key, "data_offsets") == 0 ? HAS_OFFSETS
                                                    : 0;
  int rc = bit == 0      ? trc_fail(err, "tensor '%s': unexpected key '%.40s'", e->name, key)
           : *seen & bit ? trc_fail(err, "tensor '%s': key '%s' repeated", e->name, key)
                         : 0;
  free(key);
  if (rc || trc_json_expect(j, ':', err)) return -1;
  *seen |= bit;
  return bit == HAS_DTYPE   ? parse_dtype(j, e, err)
         : bit == HAS_SHAPE ? parse_shape(j, e, err)
                            : parse_offsets(j, e, err);
}

static int parse_tensor(trc_json *j, trc_st_entry *e, trc_error *err) {
  unsigned seen = 0;
  if (trc_json_expect(j, '{', err)) return -1;
  do {
    if (parse_tensor_field(j, e, &seen, err)) return -1;
  } while (trc_json_accept(j, ','));
  if (trc_json_expect(j, '}', err)) return -1;
  if (seen != (HAS_DTYPE | HAS_SHAPE | HAS_OFFSETS))
    return trc_fail(err, "tensor '%s': needs dtype, shape and data_offsets", e->name);
  return 0;
}

/* Keeps one metadata pair (takes ownership of both strings). */
static int add_meta(trc_st_header *h, char *key, char *value, int *cap, trc_error *err) {
  if (h->n_meta == *cap) {
    int bigger = *cap ? 2 * *cap : 8;
    char **m = realloc(h->meta, (size_t)bigger * 2 * sizeof *m);
    if (!m) {
      free(key);
      free(value);
      return trc_fail(err, "out of memory");
    }
    h->meta = m;
    *cap = bigger;
  }
  h->meta[2 * h->n_meta] = key;
  h->meta[2 * h->n_meta++ + 1] = value;
  return 0;
}

/* "__metadata__": a flat object of strings; all kept, trainc_model also
 * as model_name. */
static int parse_metadata(trc_json *j, trc_st_header *h, trc_error *err) {
  int cap = 0;
  if (trc_json_expect(j, '{', err)) return -1;
  if (trc_json_accept(j, '}')) return 0;
  do {
    char *key, *value;
    if (trc_json_string(j, &key, err)) return -1;
    if (trc_json_expect(j, ':', err) || trc_json_string(j, &value, err)) {
      free(key);
      return -1;
    }
    if (strcmp(key, "trainc_model") == 0 && !h->model_name && !(h->model_name = strdup(value))) {
      free(key);
      free(value);
      return trc_fail(err, "out of memory");
    }
    if (add_meta(h, key, value, &cap, err)) return -1;
  } while (trc_json_accept(j, ','));
  return trc_json_expect(j, '}', err);
}

static int add_entry(trc_st_header *h, char *name, int *cap, trc_error *err) {
  if (h->n == *cap) {
    int bigger = *cap ? 2 * *cap : 16;
    trc_st_entry *e = realloc(h->entries, (size_t)bigger * sizeof *e);
    if (!e) {
      free(name);
      return trc_fail(err, "out of memory");
    }
    h->entries = e;
    *cap = bigger;
  }
  memset(&h->entries[h->n], 0, sizeof h->entries[h->n]);
  h->entries[h->n++].name = name;
  return 0;
}

static int parse_member(trc_json *j, trc_st_header *h, int *cap, int *seen_metadata,
                        trc_error *err) {
  char *name;
  if (trc_json_string(j, &name, err)) return -1;
  if (strcmp(name, TRC_SAFETENSORS_METADATA) == 0) {
    free(name);
    if ((*seen_metadata)++) return trc_fail(err, "__metadata__ repeated");
    return trc_json_expect(j, ':', err) ? -1 : parse_metadata(j, h, err);
  }
  if (add_entry(h, name, cap, err) || trc_json_expect(j, ':', err)) return -1;
  return parse_tensor(j, &h->entries[h->n - 1], err);
}

static int parse_header_json(const char *text, size_t len, trc_st_header *h, trc_error *err) {
  trc_json j;
  int cap = 0, seen_metadata = 0;
  trc_json_init(&j, text, len);
  if (trc_json_expect(&j, '{', err)) return -1;
  if (!trc_json_accept(&j, '}')) {
    do {
      if (parse_member(&j, h, &cap, &seen_metadata, err)) return -1;
    } while (trc_json_accept(&j, ','));
    if (trc_json_expect(&j, '}', err)) return -1;
  }
  return trc_json_at_end(&j) ? 0 : trc_json_fail(&j, err, "the end of the header");
}

static int compare_names(const void *a, const void *b) {
  return strcmp((*(const trc_st_entry *const *)a)->name, (*(const trc_st_entry *const *)b)->name);
}

static int compare_begins(const void *a, const void *b) {
  const trc_st_entry *x = *(const trc_st_entry *const *)a, *y = *(const trc_st_entry *const *)b;
  return x->begin < y->begin   ? -1
         : x->begin > y->begin ? 1
         : x->end < y->end     ? -1
                               : x->end > y->end;
}

static int check_entry_size(const trc_st_entry *e, trc_error *err) {
  uint64_t bytes = dtype_bytes(e->dtype);
  for (int d = 0; d < e->rank; d++)
    if (!trc_mul_ok(bytes, (uint64_t)e->dims[d], &bytes))
      return trc_fail(err, "tensor '%s': shape overflows", e->name);
  if (e->end < e->begin || e->end - e->begin != bytes)
    return trc_fail(err, "tensor '%s': data_offsets [%llu, %llu] do not hold its %llu bytes",
                    e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                    (unsigned long long)bytes);
  return 0;
}

/* Unique names; ranges back to back from 0 to the end of the data. */
static int check_layout(trc_st_header *h, uint64_t data_bytes, trc_error *err) {
  const trc_st_entry **order = malloc(((size_t)h->n + 1) * sizeof *order);
  if (!order) return trc_fail(err, "out of memory");
  for (int i = 0; i < h->n; i++) order[i] = &h->entries[i];
  int rc = 0;
  qsort(order, (size_t)h->n, sizeof *order, compare_names);
  for (int i = 1; i < h->n && rc == 0; i++)
    if (strcmp(order[i - 1]->name, order[i]->name) == 0)
      rc = trc_fail(err, "tensor '%s' appears twice", order[i]->name);
  qsort(order, (size_t)h->n, sizeof *order, compare_begins);
  uint64_t expect = 0;
  for (int i = 0; i < h->n && rc == 0; i++) {
    if (order[i]->begin != expect)
      rc =
          trc_fail(err,
                   "tensor '%s' starts at byte %llu of the data, expected %llu (tensors "
                   "must not overlap or leave gaps)",
                   order[i]->name, (unsigned long long)order[i]->begin, (unsigned long long)expect);
    expect = order[i]->end;
  }
  if (rc == 0 && expect != data_bytes)
    rc = trc_fail(err, "the tensors cover %llu bytes but the data section has %llu",
                  (unsigned long long)expect, (unsigned long long)data_bytes);
  free(order);
  return rc;
}

int trc_safetensors_parse(const void *buf, size_t len, trc_st_header *h, trc_error *err) {
  const unsigned char *b = buf;
  memset(h, 0, sizeof *h);
  if (len < 8) return trc_fail(err, "file too short for a safetensors header");
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | b[i];
  if (n > MAX_HEADER_BYTES || n > len - 8)
    return trc_fail(err, "header length %llu does not fit in the file (%zu bytes)",
                    (unsigned long long)n, len);
  int rc = parse_header_json((const char *)b + 8, (size_t)n, h, err);
  for (int i = 0; i < h->n && rc == 0; i++) rc = check_entry_size(&h->entries[i], err);
  if (rc == 0) rc = check_layout(h, len - 8 - n, err);
  if (rc) {
    trc_st_header_free(h);
    return -1;
  }
  h->data_start = 8 + n;
  return 0;
}

/* ---- writing ---- */

typedef struct {
  const char *model_name;
  const char *const *meta; /* n_meta (key, value) pairs */
  int n_meta;
  const trc_tensor *tensors;
  int n;
} st_file;

static uint64_t tensor_bytes(const trc_tensor *t) {
  uint64_t n = 4;
  for (int d = 0; d < t->rank; d++) n *= (uint64_t)t->dims[d];
  return n;
}

/* The header JSON, without the padding. */
static void write_header_json(FILE *f, const st_file *s) {
  uint64_t offset = 0;
  fputc('{', f);
  for (int i = 0; i < s->n; i++) {
    const trc_tensor *t = &s->tensors[i];
    trc_json_write_string(f, t->name);
    fputs(":{\"dtype\":\"F32\",\"shape\":[", f);
    for (int d = 0; d < t->rank; d++) fprintf(f, "%s%lld", d ? "," : "", (long long)t->dims[d]);
    uint64_t end = offset + tensor_bytes(t);
    fprintf(f, "],\"data_offsets\":[%llu,%llu]},", (unsigned long long)offset,
            (unsigned long long)end);
    offset = end;
  }
  fputs("\"" TRC_SAFETENSORS_METADATA "\":{\"format\":\"pt\",\"trainc_model\":", f);
  trc_json_write_string(f, s->model_name);
  for (int i = 0; i < s->n_meta; i++) {
    fputc(',', f);
    trc_json_write_string(f, s->meta[2 * i]);
    fputc(':', f);
    trc_json_write_string(f, s->meta[2 * i + 1]);
  }
  fputs("}}", f);
}

/* fwrite that says why it failed (ENOSPC, EFBIG, EIO, ...). */
static int write_bytes(FILE *f, const void *p, size_t n, trc_error *err) {
  return fwrite(p, 1, n, f) == n ? 0 : trc_fail(err, "write failed: %s", strerror(errno));
}

static int write_file(FILE *f, const void *ctx, trc_error *err) {
  const st_file *s = ctx;
  char *header = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&header, &len);
  if (!mem) return trc_fail(err, "out of memory");
  fwrite("\0\0\0\0\0\0\0\0", 1, 8, mem); /* the length, filled in below */
  write_header_json(mem, s);
  while (ftell(mem) % 8 != 0) fputc(' ', mem); /* data starts 8-byte aligned */
  if (fclose(mem) != 0) {
    free(header);
    return trc_fail(err, "out of memory");
  }
  for (int i = 0; i < 8; i++) header[i] = (char)((uint64_t)(len - 8) >> (8 * i));
  int rc = write_bytes(f, header, len, err);
  free(header);
  for (int i = 0; i < s->n && rc == 0; i++)
    rc = write_bytes(f, s->tensors[i].data, (size_t)tensor_bytes(&s->tensors[i]), err);
  return rc;
}

int trc_safetensors_write_meta(const char *path, const char *model_name, const char *const *meta,
                               int n_meta, const trc_tensor *tensors, int n, trc_error *err) {
  st_file s = {model_name, meta, n_meta, tensors, n};
  return trc_write_atomic(path, write_file, &s, err);
}

int trc_safetensors_write(const char *path, const char *model_name, const trc_tensor *tensors,
                          int n, trc_error *err) {
  return trc_safetensors_write_meta(path, model_name, NULL, 0, tensors, n, err);
}

/* ---- a model's parameters ----
 * In weight files a parameter is under its file name (the model file's
 * `map`, else its own name) and, when `map ... transposed`, as the
 * transpose of its [out, in] matrix: [in, out], as GPT-2's Conv1D keeps it. */

static const char *file_name(const trc_param *p) { return p->file_name ? p->file_name : p->name; }

static void transpose(const float *src, int64_t rows, int64_t cols, float *dst) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) dst[c * rows + r] = src[r * cols + c];
}

/* The parameter's shape as the file holds it. */
static void file_dims(const trc_param *p, int64_t dims[TRC_MAX_RANK]) {
  memcpy(dims, p->dims, sizeof p->dims);
  if (p->transposed) dims[0] = p->dims[1], dims[1] = p->dims[0];
}

/* The parameter as the file's tensor t: its floats, or a transposed copy of
 * them in *copy (freed by the caller); dims: room for the file's shape. */
static int file_tensor(const trc_param *p, const char *arena, int64_t *dims, float **copy,
                       trc_tensor *t) {
  const float *data = (const float *)(arena + p->offset);
  file_dims(p, dims);
  if (p->transposed) {
    if (!(*copy = malloc(p->count * sizeof(float)))) return -1;
    transpose(data, p->dims[0], p->dims[1], *copy);
    data = *copy;
  }
  *t = (trc_tensor){file_name(p), p->rank, dims, data};
  return 0;
}

int trc_save_weights(const trc_model *m, const char *arena, const char *path, trc_error *err) {
  if (trc_check_block_finite(m, (const float *)(arena + m->param_offset),
                             "refusing to save non-finite weights: parameter", err))
    return trc_set_where(err, path);
  size_t n = (size_t)m->n_params + 1;
  trc_tensor *t = calloc(n, sizeof *t);
  int64_t(*dims)[TRC_MAX_RANK] = calloc(n, sizeof *dims);
  float **copies = calloc(n, sizeof *copies);
  int rc = !t || !dims || !copies ? trc_fail_at(err, path, "out of memory") : 0;
  for (int i = 0; i < m->n_params && rc == 0; i++)
    if (file_tensor(&m->params[i], arena, dims[i], &copies[i], &t[i]))
      rc = trc_fail_at(err, path, "out of memory");
  if (rc == 0) rc = trc_safetensors_write(path, m->name, t, m->n_params, err);
  for (int i = 0; copies && i < m->n_params; i++) free(copies[i]);
  free(copies);
  free(dims);
  free(t);
  return rc;
}

static const trc_st_entry *find_entry(const trc_st_header *h, const char *name) {
  for (int i = 0; i < h->n; i++)
    if (strcmp(h->entries[i].name, name) == 0) return &h->entries[i];
  return NULL;
}

static int same_shape(const trc_st_entry *e, const trc_param *p) {
  int64_t dims[TRC_MAX_RANK];
  file_dims(p, dims);
  if (e->rank != p->rank) return 0;
  for (int d = 0; d < p->rank; d++)
    if (e->dims[d] != dims[d]) return 0;
  return 1;
}

static void format_dims(char *out, size_t cap, int rank, const int64_t *dims) {
  size_t n = (size_t)snprintf(out, cap, "[");
  for (int d = 0; d < rank && n < cap; d++)
    n += (size_t)snprintf(out + n, cap - n, "%s%lld", d ? ", " : "", (long long)dims[d]);
  if (n < cap) snprintf(out + n, cap - n, "]");
}

/* Appends one problem to a "; "-separated list (truncated quietly when long). */
static void note(char *list, size_t cap, const char *fmt, ...) {
  size_t n = strlen(list);
  if (n + 3 >= cap) return;
  if (n) n += (size_t)snprintf(list + n, cap - n, "; ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(list + n, cap - n, fmt, ap);
  va_end(ap);
}

/* ---- F32, or BF16 / F16 widened to it ---- */

static int loadable_dtype(const char *dtype) {
  return !strcmp(dtype, "F32") || !strcmp(dtype, "BF16") || !strcmp(dtype, "F16");
}

/* bf16 is the top half of an f32: exact. */
static float from_bf16(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* IEEE half: 1 sign, 5 exponent (bias 15), 10 mantissa bits; every value,
 * subnormals, infinities and NaNs included, is exact in f32. */
static float from_f16(uint16_t h) {
  int exponent = h >> 10 & 0x1f, mantissa = h & 0x3ff;
  float magnitude = exponent == 0    ? ldexpf((float)mantissa, -24)
                    : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                     : ldexpf((float)(mantissa | 0x400), exponent - 25);
  return h & 0x8000 ? -magnitude : magnitude;
}

/* A tensor's data (little-endian, as the format stores it) into f32. */
static void widen_to_f32(const char *dtype, const unsigned char *data, uint64_t bytes, float *out) {
  if (!strcmp(dtype, "F32")) {
    memcpy(out, data, bytes);
    return;
  }
  int bf16 = !strcmp(dtype, "BF16");
  for (uint64_t i = 0; i < bytes / 2; i++) {
    uint16_t h = (uint16_t)(data[2 * i] | data[2 * i + 1] << 8);
    out[i] = bf16 ? from_bf16(h) : from_f16(h);
  }
}

/* ---- missing and unexpected tensors ----
 * As transformers' from_pretrained: a parameter the file lacks is
 * "missing", a tensor no parameter takes "unexpected"; either is an error
 * unless a pattern allows it (the weights block's allow_missing /
 * allow_unexpected, --allow-missing / --allow-unexpected). A missing
 * parameter keeps its seeded init. Shapes must always match. */

/* Whether some pattern of a ","-separated list (NULL: none) matches name. */
static int listed(const char *list, const char *name) {
  for (const char *p = list; p && *p;) {
    size_t len = strcspn(p, ",");
    if (len > 0 && trc_glob_match(p, p + len, name)) return 1;
    p += len + (p[len] == ',');
  }
  return 0;
}

static int allowed(const char *model_list, const char *flag_list, const char *name) {
  return listed(model_list, name) || listed(flag_list, name);
}

typedef struct {
  char problems[900]; /* "; "-separated */
  int missing, unexpected, other;
  char allowed_missing[300], allowed_unexpected[300]; /* ", "-separated, for the notice */
  int n_allowed_missing, n_allowed_unexpected;
} load_report;

/* Appends name to a ", "-separated list (truncated quietly when long). */
static void add_name(char *list, size_t cap, const char *name) {
  size_t n = strlen(list);
  if (n + 8 < cap) snprintf(list + n, cap - n, "%s%s", n ? ", " : "", name);
}

static void check_param_entry(const trc_param *p, const trc_st_entry *e, const trc_allowed *allow,
                              const trc_model *m, load_report *r) {
  char have[160], want[160];
  int64_t dims[TRC_MAX_RANK];
  if (!e && allowed(m->allow_missing, allow ? allow->missing : NULL, file_name(p))) {
    add_name(r->allowed_missing, sizeof r->allowed_missing, file_name(p));
    r->n_allowed_missing++;
  } else if (!e) {
    note(r->problems, sizeof r->problems, "missing '%s'", file_name(p));
    r->missing++;
  } else if (!loadable_dtype(e->dtype)) {
    note(r->problems, sizeof r->problems, "'%s' is %s, expected F32, BF16 or F16", e->name,
         e->dtype);
    r->other++;
  } else if (!same_shape(e, p)) {
    file_dims(p, dims);
    format_dims(have, sizeof have, e->rank, e->dims);
    format_dims(want, sizeof want, p->rank, dims);
    note(r->problems, sizeof r->problems, "'%s' has shape %s, the model expects %s%s", e->name,
         have, want, p->transposed ? " (its parameter transposed)" : "");
    r->other++;
  }
}

static int takes_entry(const trc_model *m, const char *name) {
  for (int k = 0; k < m->n_params; k++)
    if (strcmp(file_name(&m->params[k]), name) == 0) return 1;
  return 0;
}

static void find_mismatches(const trc_model *m, const trc_st_header *h,
                            const trc_allowed *allow, load_report *r) {
  for (int i = 0; i < m->n_params; i++)
    check_param_entry(&m->params[i], find_entry(h, file_name(&m->params[i])), allow, m, r);
  for (int i = 0; i < h->n; i++) {
    const char *name = h->entries[i].name;
    if (takes_entry(m, name)) continue;
    if (allowed(m->allow_unexpected, allow ? allow->unexpected : NULL, name)) {
      add_name(r->allowed_unexpected, sizeof r->allowed_unexpected, name);
      r->n_allowed_unexpected++;
    } else {
      note(r->problems, sizeof r->problems, "unexpected '%s'", name);
      r->unexpected++;
    }
  }
}

static int report_mismatches(const trc_model *m, const char *path, const load_report *r,
                             trc_error *err) {
  if (r->missing + r->unexpected + r->other == 0) return 0;
  const char *hint = r->missing && r->unexpected
                         ? " (--allow-missing / --allow-unexpected PATTERN, or allow_missing / "
                           "allow_unexpected in the weights block, accept them)"
                     : r->missing ? " (--allow-missing PATTERN, or allow_missing in the weights "
                                    "block, keeps the seeded init of missing ones)"
                     : r->unexpected
                         ? " (--allow-unexpected PATTERN, or allow_unexpected in the weights "
                           "block, ignores them)"
                         : "";
  return trc_fail_at(err, path, "weights do not match model '%s': %d missing, %d unexpected: %s%s",
                     m->name, r->missing, r->unexpected, r->problems, hint);
}

/* What was allowed, said as transformers' from_pretrained warns it. */
static void say_allowed(const char *path, const load_report *r) {
  if (r->n_allowed_missing)
    fprintf(stderr, "--init %s: %d missing, kept their seeded init: %s\n", path,
            r->n_allowed_missing, r->allowed_missing);
  if (r->n_allowed_unexpected)
    fprintf(stderr, "--init %s: %d unexpected, ignored: %s\n", path, r->n_allowed_unexpected,
            r->allowed_unexpected);
}

/* A PyTorch checkpoint (torch.save: a zip archive, or a bare pickle). */
static int is_pytorch_pickle(const unsigned char *b, size_t len) {
  return (len >= 4 && !memcmp(b, "PK\3\4", 4)) || (len >= 2 && b[0] == 0x80 && b[1] <= 5);
}

#define TO_SAFETENSORS                                                                           \
  "python3 -c \"import torch; from safetensors.torch import save_file; "                         \
  "save_file({k: v.contiguous().clone() for k, v in torch.load('pytorch_model.bin', "             \
  "map_location='cpu', weights_only=True).items()}, 'model.safetensors')\""

int trc_safetensors_load(const char *path, unsigned char **buf, trc_st_header *hdr, trc_error *err) {
  size_t len;
  if (trc_read_file(path, buf, &len, err)) return -1;
  if (trc_safetensors_parse(*buf, len, hdr, err)) {
    /* after the parse: a safetensors header length may begin 0x80 0x02 too */
    int pickle = is_pytorch_pickle(*buf, len);
    free(*buf);
    *buf = NULL;
    if (pickle)
      return trc_fail_at(err, path, "a PyTorch pickle (pytorch_model.bin), not .safetensors; "
                                    "convert it: " TO_SAFETENSORS);
    return trc_set_where(err, path);
  }
  return 0;
}

/* The tensor's data into the parameter, widened to f32 and transposed back
 * to [out, in] when the file holds [in, out]. */
static int copy_in(const trc_param *p, const trc_st_entry *e, const unsigned char *data,
                   char *arena) {
  float *dst = (float *)(arena + p->offset);
  if (!p->transposed) {
    widen_to_f32(e->dtype, data + e->begin, e->end - e->begin, dst);
    return 0;
  }
  float *tmp = malloc(p->count * sizeof(float));
  if (!tmp) return -1;
  widen_to_f32(e->dtype, data + e->begin, e->end - e->begin, tmp);
  transpose(tmp, p->dims[1], p->dims[0], dst);
  free(tmp);
  return 0;
}

int trc_load_weights_allowing(const trc_model *m, char *arena, const char *path,
                              const trc_allowed *allow, trc_error *err) {
  unsigned char *buf;
  trc_st_header h;
  if (trc_safetensors_load(path, &buf, &h, err)) return -1;
  load_report r;
  memset(&r, 0, sizeof r);
  find_mismatches(m, &h, allow, &r);
  int rc = report_mismatches(m, path, &r, err);
  for (int i = 0; i < m->n_params && rc == 0; i++) {
    const trc_st_entry *e = find_entry(&h, file_name(&m->params[i]));
    if (e && copy_in(&m->params[i], e, buf + h.data_start, arena))
      rc = trc_fail_at(err, path, "out of memory");
  }
  if (rc == 0 && trc_check_block_finite(m, (const float *)(arena + m->param_offset),
                                        "non-finite weights: parameter", err))
    rc = trc_set_where(err, path);
  if (rc == 0) say_allowed(path, &r);
  trc_st_header_free(&h);
  free(buf);
  return rc;
}

int trc_load_weights(const trc_model *m, char *arena, const char *path, trc_error *err) {
  return trc_load_weights_allowing(m, arena, path, NULL, err);
}
