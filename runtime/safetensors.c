/* safetensors.c — weights as .safetensors (the format of Hugging Face's
 * `safetensors`): u64 LE header length N, N bytes of JSON
 *   {"name":{"dtype":"F32","shape":[..],"data_offsets":[b,e]}, ...,
 *    "__metadata__":{"format":"pt","trainc_model":"<model>"}}
 * padded with spaces so the data starts 8-byte aligned, then the data, whose
 * offsets are relative to its start. Reading is strict: the header must be
 * valid JSON of exactly that shape, and the tensors' byte ranges must match
 * their shapes, not overlap, and cover the data section exactly. */
#include "rt_internal.h"

#include <errno.h>
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

/* ---- a model's parameters ---- */

int trc_save_weights(const trc_model *m, const char *arena, const char *path, trc_error *err) {
  if (trc_check_block_finite(m, (const float *)(arena + m->param_offset),
                             "refusing to save non-finite weights: parameter", err))
    return trc_set_where(err, path);
  trc_tensor *t = calloc((size_t)m->n_params + 1, sizeof *t);
  if (!t) return trc_fail_at(err, path, "out of memory");
  for (int i = 0; i < m->n_params; i++) {
    const trc_param *p = &m->params[i];
    t[i] = (trc_tensor){p->name, p->rank, p->dims, (const float *)(arena + p->offset)};
  }
  int rc = trc_safetensors_write(path, m->name, t, m->n_params, err);
  free(t);
  return rc;
}

static const trc_st_entry *find_entry(const trc_st_header *h, const char *name) {
  for (int i = 0; i < h->n; i++)
    if (strcmp(h->entries[i].name, name) == 0) return &h->entries[i];
  return NULL;
}

static int same_shape(const trc_st_entry *e, const trc_param *p) {
  if (e->rank != p->rank) return 0;
  for (int d = 0; d < p->rank; d++)
    if (e->dims[d] != p->dims[d]) return 0;
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

static int check_param_entry(const trc_param *p, const trc_st_entry *e, char *list, size_t cap) {
  char have[160], want[160];
  if (!e) {
    note(list, cap, "missing '%s'", p->name);
    return 1;
  }
  if (strcmp(e->dtype, "F32") != 0) {
    note(list, cap, "'%s' is %s, expected F32", p->name, e->dtype);
    return 1;
  }
  if (!same_shape(e, p)) {
    format_dims(have, sizeof have, e->rank, e->dims);
    format_dims(want, sizeof want, p->rank, p->dims);
    note(list, cap, "'%s' has shape %s, the model expects %s", p->name, have, want);
    return 1;
  }
  return 0;
}

static int find_mismatches(const trc_model *m, const trc_st_header *h, char *list, size_t cap) {
  int problems = 0;
  for (int i = 0; i < m->n_params; i++)
    problems += check_param_entry(&m->params[i], find_entry(h, m->params[i].name), list, cap);
  for (int i = 0; i < h->n; i++) {
    int known = 0;
    for (int k = 0; k < m->n_params && !known; k++)
      known = strcmp(m->params[k].name, h->entries[i].name) == 0;
    if (!known) {
      note(list, cap, "unexpected '%s'", h->entries[i].name);
      problems++;
    }
  }
  return problems;
}

int trc_safetensors_load(const char *path, unsigned char **buf, trc_st_header *hdr, trc_error *err) {
  size_t len;
  if (trc_read_file(path, buf, &len, err)) return -1;
  if (trc_safetensors_parse(*buf, len, hdr, err)) {
    free(*buf);
    *buf = NULL;
    return trc_set_where(err, path);
  }
  return 0;
}

int trc_load_weights(const trc_model *m, char *arena, const char *path, trc_error *err) {
  unsigned char *buf;
  trc_st_header h;
  if (trc_safetensors_load(path, &buf, &h, err)) return -1;
  char list[900] = "";
  int rc = 0;
  if (find_mismatches(m, &h, list, sizeof list))
    rc = trc_fail_at(err, path, "weights do not match model '%s': %s", m->name, list);
  for (int i = 0; i < m->n_params && rc == 0; i++) {
    const trc_st_entry *e = find_entry(&h, m->params[i].name);
    memcpy(arena + m->params[i].offset, buf + h.data_start + e->begin, e->end - e->begin);
  }
  if (rc == 0 && trc_check_block_finite(m, (const float *)(arena + m->param_offset),
                                        "non-finite weights: parameter", err))
    rc = trc_set_where(err, path);
  trc_st_header_free(&h);
  free(buf);
  return rc;
}
