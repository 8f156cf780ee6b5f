/* pairs.c — `--pairs FILE`: a sentence-pair classifier's data from text, as
 * Hugging Face's tokenizer(text_a, text_b, truncation=True,
 * padding="max_length", max_length=T) gives it with BERT's WordPiece
 * (wordpiece.c): [CLS] a [SEP] b [SEP], cut longest first to the model's T
 * and padded with [PAD]; token_type_ids 0 over [CLS] a [SEP] and 1 over
 * b [SEP]; attention_mask 1 on the tokens and 0 on the padding. The file is
 * TSV (text_a TAB text_b TAB label, with an optional header naming the
 * columns) or JSON Lines ({"text_a": ..., "text_b": ..., "label": 1}), other
 * names given by --pair-fields. The model's inputs are fed by name
 * (input_ids, token_type_ids, attention_mask) and its labels input; the
 * result is an ordinary trc_dataset, batched, shuffled and split as --data's. */
#include "rt_data.h"

#include <stdlib.h>
#include <string.h>

/* ---- one example ---- */

void trc_pair_truncate(int64_t na, int64_t nb, int64_t budget, int64_t *ka, int64_t *kb) {
  if (na + nb <= budget) {
    *ka = na, *kb = nb;
    return;
  }
  /* Hugging Face's tokenizers: the shorter keeps its tokens, up to half the
   * budget; the longer (b on a tie) gets the rest. */
  int64_t shorter = na < nb ? na : nb, small = shorter < budget / 2 ? shorter : budget / 2;
  *ka = na > nb ? budget - small : small;
  *kb = na > nb ? small : budget - small;
}

static int32_t special_id(const trc_tokenizer *t, const char *name) {
  return trc_tokenizer_find(t, (const unsigned char *)name, strlen(name));
}

static int check_specials(const trc_tokenizer *t, trc_error *err) {
  if (!trc_tokenizer_is_wordpiece(t) || special_id(t, "[CLS]") < 0 ||
      special_id(t, "[SEP]") < 0 || special_id(t, "[PAD]") < 0)
    return trc_fail(err, "sentence pairs need BERT's WordPiece with [CLS], [SEP] and [PAD] "
                         "(--tokenizer DIR with vocab.txt)");
  return 0;
}

/* ids[*at..] = the first n of tk's ids, with type `type`. */
static void put_tokens(const int32_t *tk, int64_t n, int32_t type, int32_t *ids, int32_t *types,
                       int64_t *at) {
  for (int64_t i = 0; i < n; i++, ++*at) ids[*at] = tk[i], types[*at] = type;
}

int trc_pair_encode(const trc_tokenizer *t, const char *a, size_t a_len, const char *b,
                    size_t b_len, int64_t T, int32_t *ids, int32_t *types, int32_t *mask,
                    trc_error *err) {
  trc_tokens ta = {0}, tb = {0};
  const int32_t cls = special_id(t, "[CLS]"), sep = special_id(t, "[SEP]");
  const int64_t specials = b ? 3 : 2;
  if (check_specials(t, err) ||
      (T < specials && trc_fail(err, "T = %lld leaves no room for the %lld special tokens",
                                (long long)T, (long long)specials)) ||
      trc_tokenizer_encode(t, (const unsigned char *)a, a_len, &ta, err) ||
      (b && trc_tokenizer_encode(t, (const unsigned char *)b, b_len, &tb, err))) {
    trc_tokens_free(&ta);
    trc_tokens_free(&tb);
    return -1;
  }
  int64_t ka, kb, at = 0;
  trc_pair_truncate((int64_t)ta.n, (int64_t)tb.n, T - specials, &ka, &kb);
  put_tokens(&cls, 1, 0, ids, types, &at);
  put_tokens(ta.ids, ka, 0, ids, types, &at);
  put_tokens(&sep, 1, 0, ids, types, &at);
  if (b) {
    put_tokens(tb.ids, kb, 1, ids, types, &at);
    put_tokens(&sep, 1, 1, ids, types, &at);
  }
  for (int64_t i = 0; i < T; i++) mask[i] = i < at;
  for (const int32_t pad = special_id(t, "[PAD]"); at < T; at++) ids[at] = pad, types[at] = 0;
  trc_tokens_free(&ta);
  trc_tokens_free(&tb);
  return 0;
}

/* ---- the model's inputs ---- */

typedef enum { ROLE_IDS, ROLE_TYPES, ROLE_MASK, ROLE_LABEL, ROLE_NONE } input_role;
static const char *const sequence_names[] = {"input_ids", "token_type_ids", "attention_mask"};

static input_role role_of(const trc_model *m, int i) {
  if (i == m->label_input) return ROLE_LABEL;
  for (int r = ROLE_IDS; r <= ROLE_MASK; r++)
    if (strcmp(m->inputs[i].name, sequence_names[r]) == 0) return (input_role)r;
  return ROLE_NONE;
}

static int find_input(const trc_model *m, input_role role) {
  for (int i = 0; i < m->n_inputs; i++)
    if (role_of(m, i) == role) return i;
  return -1;
}

/* A sequence input [B, T] of integers that can hold values up to `largest`. */
static int check_sequence(const trc_input *in, int64_t T, int64_t largest, trc_error *err) {
  if (in->dtype == TRC_F32 || in->rank != 2 || in->dims[1] != T)
    return trc_fail(err, "input '%s' must be i32[B, %lld] (or u8), as input_ids is", in->name,
                    (long long)T);
  int64_t limit = in->index_limit;
  if (in->dtype == TRC_U8 && (limit == 0 || limit > 256)) limit = 256;
  if (limit > 0 && largest >= limit)
    return trc_fail(err, "input '%s' takes values below %lld, but the pairs give it up to %lld",
                    in->name, (long long)limit, (long long)largest);
  return 0;
}

static const char *const supplied =
    "--pairs gives input_ids, token_type_ids and attention_mask [B, T] and the labels [B]";

int trc_pairs_check_model(const trc_model *m, const trc_tokenizer *tok, trc_error *err) {
  const int ids = find_input(m, ROLE_IDS);
  if (check_specials(tok, err)) return -1;
  if (ids < 0 || m->label_input < 0)
    return trc_fail(err, "model '%s' has no input %s: %s", m->name,
                    ids < 0 ? "named input_ids" : "of class labels", supplied);
  if (m->inputs[ids].rank != 2)
    return trc_fail(err, "input 'input_ids' must be i32[B, T]: %s", supplied);
  const int64_t T = m->inputs[ids].dims[1], largest[] = {trc_tokenizer_vocab(tok) - 1, 1, 1};
  for (int i = 0; i < m->n_inputs; i++) {
    const trc_input *in = &m->inputs[i];
    input_role role = role_of(m, i);
    if (role == ROLE_NONE)
      return trc_fail(err, "model '%s' has an input '%s' that the pairs do not give: %s",
                      m->name, in->name, supplied);
    if (role == ROLE_LABEL && (in->rank != 1 || in->dtype == TRC_F32))
      return trc_fail(err, "the labels input '%s' must be i32[B]: %s", in->name, supplied);
    if (role != ROLE_LABEL && check_sequence(in, T, largest[role], err)) return -1;
  }
  return 0;
}

int trc_pair_fields_parse(const char *spec, trc_pair_fields *f, trc_error *err) {
  char *names[3] = {f->a, f->b, f->label};
  const char *p = spec;
  for (int k = 0; k < 3; k++) {
    size_t n = strcspn(p, ",");
    if (n >= sizeof f->a || (k < 2 && p[n] != ',') || (k == 2 && p[n]) || (n == 0 && k != 1))
      return trc_fail(err, "--pair-fields: expected TEXT_A,TEXT_B,LABEL (TEXT_B may be empty "
                           "for single sentences), got '%s'", spec);
    memcpy(names[k], p, n);
    names[k][n] = '\0';
    p += n + 1;
  }
  return 0;
}

/* ---- records ---- */

typedef struct {
  const char *s;
  size_t n;
} span;

typedef struct {
  span a, b, label; /* b.s NULL: one sentence */
} record;

typedef struct {
  const trc_model *m;
  const trc_tokenizer *tok;
  trc_pair_fields fields;
  int64_t T;
  int32_t *ids, *types, *mask; /* one example, T each */
  trc_dataset *ds;
} loader;

static int is_integer(span s) {
  size_t i = s.n > 0 && s.s[0] == '-';
  if (i == s.n) return 0;
  for (; i < s.n; i++)
    if (s.s[i] < '0' || s.s[i] > '9') return 0;
  return 1;
}

static int parse_label(const loader *L, span s, int32_t *out, trc_error *err) {
  const trc_input *in = &L->m->inputs[L->m->label_input];
  const int negative = s.n > 0 && s.s[0] == '-';
  if (!is_integer(s) || s.n - (size_t)negative > 10)
    return trc_fail(err, "the label '%.*s' is not an integer", (int)s.n, s.s);
  long long v = 0;
  for (size_t i = (size_t)negative; i < s.n; i++) v = v * 10 + (s.s[i] - '0');
  v = negative ? -v : v;
  int ignored = trc_ignore_input(L->m) == L->m->label_input && v == L->m->ignore_label;
  if (!ignored && (v < 0 || v > INT32_MAX || (in->index_limit > 0 && v >= in->index_limit)))
    return trc_fail(err, "the label %lld is outside [0, %lld)", v,
                    (long long)(in->index_limit > 0 ? in->index_limit : INT32_MAX));
  *out = (int32_t)v;
  return 0;
}

/* Encodes the record into row ds->n of every column. */
static int add_example(loader *L, const record *r, trc_error *err) {
  int32_t label;
  if (parse_label(L, r->label, &label, err) ||
      trc_pair_encode(L->tok, r->a.s, r->a.n, r->b.s, r->b.n, L->T, L->ids, L->types, L->mask,
                      err))
    return -1;
  const int32_t *values[] = {L->ids, L->types, L->mask, &label};
  const uint64_t row = (uint64_t)L->ds->n++;
  for (int i = 0; i < L->m->n_inputs; i++) {
    const trc_input *in = &L->m->inputs[i];
    const uint64_t per = trc_input_example_elems(in);
    for (uint64_t k = 0; k < per; k++)
      trc_store_index(in, L->ds->columns[i].data, row * per + k, values[role_of(L->m, i)][k]);
  }
  return 0;
}

/* ---- TSV ---- */

enum { MAX_COLUMNS = 64 };

/* The first MAX_COLUMNS tab-separated fields of a line into f; returns how
 * many fields the line has. */
static int split_tabs(span line, span *f) {
  int n = 0;
  for (const char *p = line.s, *end = line.s + line.n;; p++, n++) {
    const char *tab = memchr(p, '\t', (size_t)(end - p));
    if (n < MAX_COLUMNS) f[n] = (span){p, (size_t)((tab ? tab : end) - p)};
    if (!tab) return n + 1;
    p = tab;
  }
}

static int column_named(const span *f, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (f[i].n == strlen(name) && memcmp(f[i].s, name, f[i].n) == 0) return i;
  return -1;
}

typedef struct {
  int a, b, label; /* column numbers; b -1: one sentence */
  int count;       /* columns a line has */
} tsv_layout;

/* A first line naming every field is a header (1); otherwise (0) the
 * columns are text_a, text_b, label in that order (text_a, label for one
 * sentence), and a first line whose label is a word is a header that names
 * other fields (-1). */
static int read_header(const loader *L, span line, tsv_layout *t, trc_error *err) {
  span f[MAX_COLUMNS];
  const int n = split_tabs(line, f), single = !L->fields.b[0];
  const int stored = n < MAX_COLUMNS ? n : MAX_COLUMNS;
  t->a = column_named(f, stored, L->fields.a);
  t->b = single ? -1 : column_named(f, stored, L->fields.b);
  t->label = column_named(f, stored, L->fields.label);
  if (n <= MAX_COLUMNS && t->a >= 0 && (single || t->b >= 0) && t->label >= 0) {
    t->count = n;
    return 1;
  }
  *t = single ? (tsv_layout){0, -1, 1, 2} : (tsv_layout){0, 1, 2, 3};
  if (n == t->count && !is_integer(f[t->label]))
    return trc_fail(err, "the first line is neither a pair (its label '%.*s' is not an integer) "
                         "nor a header naming the fields %s%s%s and %s (--pair-fields names "
                         "others)",
                    (int)f[t->label].n, f[t->label].s, L->fields.a, single ? "" : ", ",
                    L->fields.b, L->fields.label);
  return 0;
}

static int tsv_record(const loader *L, const tsv_layout *t, span line, record *r,
                      trc_error *err) {
  span f[MAX_COLUMNS];
  const int n = split_tabs(line, f);
  if (n != t->count)
    return trc_fail(err, "expected %d tab-separated fields (%s%s%s, %s), found %d", t->count,
                    L->fields.a, t->b >= 0 ? ", " : "", t->b >= 0 ? L->fields.b : "",
                    L->fields.label, n);
  r->a = f[t->a];
  r->b = t->b >= 0 ? f[t->b] : (span){NULL, 0};
  r->label = f[t->label];
  return 0;
}

/* ---- JSON Lines ---- */

typedef struct {
  char *a, *b; /* malloc'ed */
  span label;
} json_record;

/* The member `key` of the object into *rec. */
static int json_member(const loader *L, trc_json *j, const char *key, json_record *rec,
                       trc_error *err) {
  const trc_pair_fields *f = &L->fields;
  char **text = strcmp(key, f->a) == 0 ? &rec->a : f->b[0] && strcmp(key, f->b) == 0 ? &rec->b
                                                                                    : NULL;
  if (text || strcmp(key, f->label) == 0) {
    if ((text && *text) || (!text && rec->label.s))
      return trc_fail(err, "the key \"%s\" is given twice", key);
    if (text) return trc_json_string(j, text, err);
    return trc_json_value_text(j, &rec->label.s, &rec->label.n, err);
  }
  return trc_fail(err, "unknown key \"%s\" (the fields are \"%s\"%s%s%s and \"%s\"; "
                       "--pair-fields names others)", key, f->a, f->b[0] ? ", \"" : "", f->b,
                  f->b[0] ? "\"" : "", f->label);
}

static int json_object(const loader *L, span line, json_record *rec, trc_error *err) {
  trc_json j;
  trc_json_init(&j, line.s, line.n);
  if (trc_json_expect(&j, '{', err)) return -1;
  if (!trc_json_accept(&j, '}')) {
    do {
      char *key = NULL;
      int rc = trc_json_string(&j, &key, err) || trc_json_expect(&j, ':', err) ||
               json_member(L, &j, key, rec, err);
      free(key);
      if (rc) return -1;
    } while (trc_json_accept(&j, ','));
    if (trc_json_expect(&j, '}', err)) return -1;
  }
  if (!trc_json_at_end(&j)) return trc_json_fail(&j, err, "the end of the line");
  const char *missing = !rec->a ? L->fields.a : L->fields.b[0] && !rec->b ? L->fields.b
                        : !rec->label.s ? L->fields.label : NULL;
  return missing ? trc_fail(err, "no \"%s\" key", missing) : 0;
}

static int add_json_line(loader *L, span line, trc_error *err) {
  json_record rec = {0};
  int rc = json_object(L, line, &rec, err);
  if (rc == 0) {
    record r = {{rec.a, strlen(rec.a)}, {rec.b, rec.b ? strlen(rec.b) : 0}, rec.label};
    rc = add_example(L, &r, err);
  }
  free(rec.a);
  free(rec.b);
  return rc;
}

/* ---- the file ---- */

/* Whether the name ends in suffix, or in suffix and ".gz". */
static int has_suffix(const char *name, const char *suffix) {
  size_t n = strlen(name), k = strlen(suffix);
  if (n >= 3 && strcmp(name + n - 3, ".gz") == 0) n -= 3;
  return n >= k && strncmp(name + n - k, suffix, k) == 0;
}

static int allocate_columns(loader *L, int64_t rows, trc_error *err) {
  trc_dataset *ds = L->ds;
  memset(ds, 0, sizeof *ds);
  ds->owns_data = 1;
  ds->n_columns = L->m->n_inputs;
  if (!(ds->columns = calloc((size_t)ds->n_columns, sizeof *ds->columns)))
    return trc_fail(err, "out of memory");
  for (int i = 0; i < ds->n_columns; i++) {
    ds->columns[i].example_bytes = L->m->inputs[i].example_bytes;
    if (!(ds->columns[i].data = malloc((size_t)rows * L->m->inputs[i].example_bytes)))
      return trc_fail(err, "out of memory (%lld examples)", (long long)rows);
  }
  L->ids = malloc(3 * (size_t)L->T * sizeof *L->ids);
  L->types = L->ids + L->T;
  L->mask = L->types + L->T;
  return L->ids ? 0 : trc_fail(err, "out of memory");
}

/* Line after line; a failure names the line (where = "FILE:LINE"). */
static int read_lines(loader *L, const char *path, const char *data, size_t len, int tsv,
                      trc_error *err) {
  tsv_layout layout = {0};
  size_t line_no = 0;
  int seen = 0; /* a line that is not blank */
  for (size_t at = 0; at < len;) {
    span line = {data + at, 0};
    const char *nl = memchr(line.s, '\n', len - at);
    line.n = nl ? (size_t)(nl - line.s) : len - at;
    at += line.n + 1;
    line_no++;
    if (line.n > 0 && line.s[line.n - 1] == '\r') line.n--;
    if (line.n == 0) continue;
    const int header = tsv && !seen++ ? read_header(L, line, &layout, err) : 0;
    if (header == 1) continue;
    record r;
    if (header < 0 || (tsv ? tsv_record(L, &layout, line, &r, err) || add_example(L, &r, err)
                           : add_json_line(L, line, err))) {
      char where[sizeof err->where];
      snprintf(where, sizeof where, "%s:%zu", path, line_no);
      return trc_set_where(err, where);
    }
  }
  return L->ds->n > 0 ? 0 : trc_fail_at(err, path, "no examples");
}

int trc_pairs_parse(const trc_model *m, const trc_tokenizer *tok, const char *path,
                    const trc_pair_fields *fields, const unsigned char *data, size_t len,
                    trc_dataset *ds, trc_error *err) {
  const int tsv = has_suffix(path, ".tsv");
  if (!tsv && !has_suffix(path, ".jsonl"))
    return trc_fail_at(err, path, "expected a .tsv or .jsonl file (either may be .gz)");
  if (trc_pairs_check_model(m, tok, err)) return -1;
  int64_t lines = 1;
  for (size_t i = 0; i < len; i++) lines += data[i] == '\n';
  loader L = {m, tok, *fields, m->inputs[find_input(m, ROLE_IDS)].dims[1], NULL, NULL, NULL, ds};
  int rc = allocate_columns(&L, lines, err) ? trc_set_where(err, path)
                                              : read_lines(&L, path, (const char *)data, len,
                                                           tsv, err);
  free(L.ids);
  if (rc) trc_dataset_free(ds);
  return rc;
}

int trc_pairs_load(const trc_model *m, const trc_tokenizer *tok, const char *path,
                   const trc_pair_fields *fields, trc_dataset *ds, trc_error *err) {
  unsigned char *data;
  size_t len;
  if (trc_read_file(path, &data, &len, err)) return -1;
  int rc = trc_pairs_parse(m, tok, path, fields, data, len, ds, err);
  free(data);
  return rc;
}
