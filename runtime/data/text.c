/* text.c — `--text FILE`: a language model's data from text, with no Python
 * step. The file (plain text, or JSON Lines with a "text" field per line) is
 * tokenized (tokenizer.c) and cut into windows of T + 1 tokens, as llm.c's
 * data loader does: the first T go to the token input, the last T to the
 * labels, so every position's label is the token after it. The result is an
 * ordinary trc_dataset, batched, shuffled and split like --data. */
#include "rt_data.h"

#include <stdlib.h>
#include <string.h>

static int is_sequence_input(const trc_model *m, int i, int64_t T) {
  const trc_input *in = &m->inputs[i];
  return in->dtype != TRC_F32 && in->rank == 2 && in->dims[1] == T;
}

int trc_text_check_model(const trc_model *m, const trc_tokenizer *tok, trc_error *err) {
  const int64_t T = m->predict_rows;
  if (m->token_input < 0 || m->label_input < 0 || m->n_inputs != 2 || T < 1 ||
      !is_sequence_input(m, m->token_input, T) || !is_sequence_input(m, m->label_input, T))
    return trc_fail(err, "--text needs a sequence model of two inputs, token ids [B, T] that an "
                         "embedding reads and their labels [B, T] (as examples/gpt.nn); "
                         "model '%s' is not one: give its inputs with --data", m->name);
  const int64_t vocab = trc_tokenizer_vocab(tok);
  for (int k = 0; k < 2; k++) {
    const trc_input *in = &m->inputs[k == 0 ? m->token_input : m->label_input];
    if (in->index_limit < vocab)
      return trc_fail(err, "the tokenizer has %lld tokens, but input '%s' takes ids below %lld",
                      (long long)vocab, in->name, (long long)in->index_limit);
  }
  return 0;
}

/* The line and column (1-based, in bytes) of byte `at`. */
static void line_col(const unsigned char *text, size_t at, size_t *line, size_t *col) {
  *line = 1;
  size_t start = 0;
  for (size_t i = 0; i < at; i++)
    if (text[i] == '\n') ++*line, start = i + 1;
  *col = at - start + 1;
}

static int encode_plain(const trc_tokenizer *tok, const unsigned char *text, size_t len,
                        trc_tokens *out, trc_error *err) {
  size_t bad = trc_tokenizer_needs_utf8(tok) ? trc_utf8_invalid_at(text, len) : len;
  if (bad < len) {
    size_t line, col;
    line_col(text, bad, &line, &col);
    return trc_fail(err, "line %zu, column %zu: invalid UTF-8 (this tokenizer reads UTF-8 "
                         "text)", line, col);
  }
  return trc_tokenizer_encode(tok, text, len, out, err);
}

/* The "text" string of one JSON Lines object (one only); other members are
 * skipped. */
static int document_text(const char *line, size_t len, char **text, trc_error *err) {
  trc_json j;
  trc_json_init(&j, line, len);
  *text = NULL;
  if (trc_json_expect(&j, '{', err)) return -1;
  if (!trc_json_accept(&j, '}')) {
    do {
      char *key = NULL;
      if (trc_json_string(&j, &key, err) || trc_json_expect(&j, ':', err)) {
        free(key);
        return -1;
      }
      int is_text = strcmp(key, "text") == 0;
      free(key);
      if (is_text && *text) /* which one is the document? */
        return trc_fail(err, "the object has two \"text\" members");
      if (is_text ? trc_json_string(&j, text, err) : trc_json_skip_value(&j, err)) return -1;
    } while (trc_json_accept(&j, ','));
    if (trc_json_expect(&j, '}', err)) return -1;
  }
  if (!trc_json_at_end(&j)) return trc_json_fail(&j, err, "the end of the line");
  return *text ? 0 : trc_fail(err, "the object has no \"text\" string");
}

/* Document after document, separated by <|endoftext|> (or a newline byte). */
static int encode_jsonl(const trc_tokenizer *tok, const unsigned char *data, size_t len,
                        trc_tokens *out, trc_error *err) {
  const int32_t eot = trc_tokenizer_eot(tok);
  size_t line_no = 0;
  int documents = 0;
  for (size_t at = 0; at < len;) {
    const unsigned char *line = data + at, *nl = memchr(line, '\n', len - at);
    size_t n = nl ? (size_t)(nl - line) : len - at;
    at += n + 1;
    line_no++;
    if (n == 0 || (n == 1 && line[0] == '\r')) continue; /* blank lines hold no document */
    char *text = NULL;
    if (document_text((const char *)line, n, &text, err) ||
        (documents++ && trc_tokens_push(out, eot >= 0 ? eot : '\n', err)) ||
        trc_tokenizer_encode(tok, (const unsigned char *)text, strlen(text), out, err)) {
      char why[sizeof err->msg];
      memcpy(why, err->msg, sizeof why);
      free(text);
      return trc_fail(err, "line %zu: %s", line_no, why);
    }
    free(text);
  }
  return 0;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Windows of T + 1 tokens, stored in each input's element type. */
static int make_windows(const trc_model *m, const trc_tokens *tk, trc_dataset *ds,
                        trc_error *err) {
  const int64_t T = m->predict_rows;
  int64_t n = tk->n > 0 ? (int64_t)(tk->n - 1) / T : 0;
  if (n < 1)
    return trc_fail(err, "%llu tokens, fewer than one window of %lld (T + 1)",
                    (unsigned long long)tk->n, (long long)(T + 1));
  memset(ds, 0, sizeof *ds);
  ds->n = n;
  ds->n_columns = m->n_inputs;
  ds->owns_data = 1;
  if (!(ds->columns = calloc(2, sizeof *ds->columns))) return trc_fail(err, "out of memory");
  for (int k = 0; k < 2; k++) {
    const int i = k == 0 ? m->token_input : m->label_input;
    const trc_input *in = &m->inputs[i];
    trc_column *c = &ds->columns[i];
    c->example_bytes = in->example_bytes;
    if (!(c->data = malloc((size_t)n * in->example_bytes))) {
      trc_dataset_free(ds);
      return trc_fail(err, "out of memory (%lld windows)", (long long)n);
    }
    for (int64_t e = 0; e < n; e++)
      for (int64_t t = 0; t < T; t++)
        trc_store_index(in, c->data, (uint64_t)(e * T + t), tk->ids[e * T + t + k]);
  }
  return 0;
}

int trc_text_tokenize(const trc_tokenizer *tok, const char *name, const unsigned char *data,
                      size_t len, trc_tokens *out, trc_error *err) {
  int jsonl = ends_with(name, ".jsonl") || ends_with(name, ".jsonl.gz");
  return jsonl ? encode_jsonl(tok, data, len, out, err) : encode_plain(tok, data, len, out, err);
}

int trc_text_load(const trc_model *m, const trc_tokenizer *tok, const char *path,
                  trc_dataset *ds, trc_error *err) {
  unsigned char *data;
  size_t len;
  trc_tokens tk = {0};
  if (trc_read_file(path, &data, &len, err)) return -1;
  int rc = trc_text_tokenize(tok, path, data, len, &tk, err);
  free(data);
  if (rc == 0) rc = make_windows(m, &tk, ds, err);
  trc_tokens_free(&tk);
  return rc ? trc_set_where(err, path) : 0;
}
