/* --text (runtime/data/text.c): a text file or JSON Lines cut into windows of
 * T + 1 tokens (tokens, next tokens), checked element by element; hostile
 * files refused with the line; models that text cannot feed refused.
 * Also TFRecord's CRC-32C against its published check value.
 * usage: test_text BPE_DIR */
#include "test_util.h"

#include <stdlib.h>

enum { T = 4 };

static trc_input inputs[2] = {
    {"tokens", TRC_I32, 2, {2, T}, 0, 4 * T, 256},
    {"next", TRC_I32, 2, {2, T}, 64, 4 * T, 256},
};

static trc_model model(int64_t limit) {
  inputs[0].index_limit = inputs[1].index_limit = limit;
  return (trc_model){.name = "lm", .batch = 2, .n_inputs = 2, .inputs = inputs, .has_predict = 1,
                     .predict_classes = limit, .predict_rows = T, .label_input = 1,
                     .token_input = 0};
}

static int32_t at(const trc_dataset *ds, int col, int64_t row, int t) {
  int32_t v;
  memcpy(&v, ds->columns[col].data + (row * T + t) * 4, 4);
  return v;
}

/* Loads `text` written to NAME in dir with tokenizer tok; 0 on success. */
static int load(const char *dir, const char *name, const char *text, const trc_tokenizer *tok,
                trc_dataset *ds, trc_error *err) {
  char path[4096];
  test_path(path, sizeof path, dir, name);
  test_write_file(path, text, strlen(text));
  trc_model m = model(trc_tokenizer_vocab(tok));
  return trc_text_load(&m, tok, path, ds, err);
}

static void test_windows(const char *dir, const trc_tokenizer *bytes) {
  trc_dataset ds;
  trc_error err;
  /* 11 bytes: (11 - 1) / 4 = 2 windows, "abcde" and "efghi" */
  CHECK(load(dir, "a.txt", "abcdefghijk", bytes, &ds, &err) == 0);
  CHECK(ds.n == 2);
  for (int64_t r = 0; r < ds.n; r++)
    for (int t = 0; t < T; t++) {
      CHECK(at(&ds, 0, r, t) == 'a' + r * T + t);
      CHECK(at(&ds, 1, r, t) == 'a' + r * T + t + 1);
    }
  trc_dataset_free(&ds);
  CHECK_FAILS_WITH(load(dir, "short.txt", "abcd", bytes, &ds, &err), err,
                   "4 tokens, fewer than one window of 5");
}

static void test_jsonl(const char *dir, const trc_tokenizer *bytes, const trc_tokenizer *bpe) {
  trc_dataset ds;
  trc_error err;
  /* documents joined by a newline (bytes) or <|endoftext|> (BPE); other
   * members of any type skipped; blank lines ignored */
  const char *text = "{\"id\": [1, {\"x\": null}], \"text\": \"ab\\u00e9\", \"n\": -1.5e3}\n\n"
                     "{\"text\": \"cd\"}\n";
  CHECK(load(dir, "d.jsonl", text, bytes, &ds, &err) == 0 && ds.n == 1);
  const int32_t want[T + 1] = {'a', 'b', 0xC3, 0xA9, '\n'};
  for (int t = 0; t < T; t++) CHECK(at(&ds, 0, 0, t) == want[t] && at(&ds, 1, 0, t) == want[t + 1]);
  trc_dataset_free(&ds);
  /* hello Ġworld <|endoftext|> hello Ġworld: ids 259 264 273 259 264 (make_fixture.py) */
  CHECK(load(dir, "e.jsonl", "{\"text\": \"hello world\"}\n{\"text\": \"hello world\"}", bpe,
             &ds, &err) == 0 && ds.n == 1);
  const int32_t ids[T + 1] = {259, 264, 273, 259, 264};
  for (int t = 0; t < T; t++) CHECK(at(&ds, 0, 0, t) == ids[t] && at(&ds, 1, 0, t) == ids[t + 1]);
  trc_dataset_free(&ds);
  CHECK_FAILS_WITH(load(dir, "f.jsonl", "{\"text\": \"ok\"}\n{\"text\": 3}\n", bytes, &ds, &err),
                   err, "line 2: malformed JSON: expected a string");
  CHECK(strstr(err.where, "f.jsonl") != NULL);
  CHECK_FAILS_WITH(load(dir, "g.jsonl", "{\"txt\": \"ok\"}\n", bytes, &ds, &err), err,
                   "line 1: the object has no \"text\" string");
  /* two "text" members: which one is the document? (issue 26) */
  CHECK_FAILS_WITH(load(dir, "k.jsonl",
                        "{\"text\": \"hello\"}\n{\"text\": \"world\", \"text\": \"there\"}\n",
                        bytes, &ds, &err),
                   err, "line 2: the object has two \"text\" members");
  CHECK(strstr(err.where, "k.jsonl") != NULL);
  CHECK_FAILS_WITH(load(dir, "h.jsonl", "{\"text\": \"ok\"} x\n", bytes, &ds, &err), err,
                   "line 1: malformed JSON: expected the end of the line");
  CHECK_FAILS_WITH(load(dir, "i.jsonl", "{\"text\": \"o\xffk\"}\n", bytes, &ds, &err), err,
                   "line 1: malformed JSON");
}

static void test_bad_utf8(const char *dir, const trc_tokenizer *bytes, const trc_tokenizer *bpe) {
  trc_dataset ds;
  trc_error err;
  CHECK_FAILS_WITH(load(dir, "u.txt", "hello world\nhello w\xc3rld\n", bpe, &ds, &err), err,
                   "line 2, column 8: invalid UTF-8");
  CHECK(load(dir, "v.txt", "any\xff\xfe bytes", bytes, &ds, &err) == 0); /* bytes are tokens */
  trc_dataset_free(&ds);
}

static void test_models(const trc_tokenizer *bytes, const trc_tokenizer *bpe) {
  trc_error err;
  trc_model m = model(256);
  CHECK(trc_text_check_model(&m, bytes, &err) == 0);
  CHECK_FAILS_WITH(trc_text_check_model(&m, bpe, &err), err,
                   "the tokenizer has 274 tokens, but input 'tokens' takes ids below 256");
  m.n_inputs = 1;
  CHECK_FAILS_WITH(trc_text_check_model(&m, bytes, &err), err, "--text needs a sequence model");
}

int main(int argc, char **argv) {
  char dir[4096];
  trc_tokenizer *bytes, *bpe;
  trc_error err;
  if (argc != 2 || trc_tokenizer_load("bytes", &bytes, &err) ||
      trc_tokenizer_load(argv[1], &bpe, &err)) {
    fprintf(stderr, "usage: test_text BPE_DIR\n");
    return 2;
  }
  test_make_dir(dir, sizeof dir);
  test_windows(dir, bytes);
  test_jsonl(dir, bytes, bpe);
  test_bad_utf8(dir, bytes, bpe);
  test_models(bytes, bpe);
  CHECK(trc_crc32c("123456789", 9) == 0xE3069283u); /* CRC-32C's check value */
  test_remove_dir(dir);
  trc_tokenizer_free(bytes);
  trc_tokenizer_free(bpe);
  return test_finish("text");
}
