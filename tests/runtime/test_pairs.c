/* Sentence pairs (runtime/data/pairs.c): truncation longest first as Hugging
 * Face's tokenizers does it, [CLS] a [SEP] b [SEP] with token types, padding
 * and attention mask, TSV and JSON Lines files fed to a model's inputs by
 * name, and bad files and models refused with the file and line. */
#include "test_util.h"

#include <stdlib.h>

enum { T = 8 };

static const char vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\nc\n##c\n!\n";
enum { PAD, UNK, CLS, SEP, MASK, A, B, C, CC, BANG };

static void check_truncate(int64_t na, int64_t nb, int64_t budget, int64_t ka, int64_t kb) {
  int64_t got_a, got_b;
  trc_pair_truncate(na, nb, budget, &got_a, &got_b);
  if (got_a != ka || got_b != kb) {
    fprintf(stderr, "truncate(%lld, %lld, %lld) = (%lld, %lld), expected (%lld, %lld)\n",
            (long long)na, (long long)nb, (long long)budget, (long long)got_a,
            (long long)got_b, (long long)ka, (long long)kb);
    test_failures++;
  }
}

/* Hugging Face's results (tokenizers 0.23, longest_first): the shorter keeps
 * up to half, the longer the rest, b the longer on a tie. */
static void test_truncate(void) {
  check_truncate(5, 5, 13, 5, 5);   /* fits: nothing cut */
  check_truncate(20, 19, 13, 7, 6);
  check_truncate(20, 20, 13, 6, 7); /* a tie: b keeps the odd one */
  check_truncate(19, 20, 13, 6, 7);
  check_truncate(3, 20, 13, 3, 10); /* the short one whole */
  check_truncate(20, 3, 13, 10, 3);
  check_truncate(30, 0, 13, 13, 0); /* one sentence */
  check_truncate(4, 4, 0, 0, 0);
}

static void check_row(const int32_t *got, const int32_t *want, const char *what) {
  for (int i = 0; i < T; i++)
    if (got[i] != want[i]) {
      fprintf(stderr, "%s[%d] = %d, expected %d\n", what, i, got[i], want[i]);
      test_failures++;
      return;
    }
}

static void test_encode(const trc_tokenizer *tok) {
  int32_t ids[T], types[T], mask[T];
  trc_error err;
  CHECK(trc_pair_encode(tok, "a b", 3, "cc!", 3, T, ids, types, mask, &err) == 0);
  check_row(ids, (const int32_t[T]){CLS, A, B, SEP, C, CC, BANG, SEP}, "ids");
  check_row(types, (const int32_t[T]){0, 0, 0, 0, 1, 1, 1, 1}, "types");
  check_row(mask, (const int32_t[T]){1, 1, 1, 1, 1, 1, 1, 1}, "mask");
  CHECK(trc_pair_encode(tok, "A", 1, "b", 1, T, ids, types, mask, &err) == 0); /* padded */
  check_row(ids, (const int32_t[T]){CLS, A, SEP, B, SEP, PAD, PAD, PAD}, "ids");
  check_row(types, (const int32_t[T]){0, 0, 0, 1, 1, 0, 0, 0}, "types");
  check_row(mask, (const int32_t[T]){1, 1, 1, 1, 1, 0, 0, 0}, "mask");
  CHECK(trc_pair_encode(tok, "a a a a a", 9, "b b b b", 7, T, ids, types, mask, &err) == 0);
  check_row(ids, (const int32_t[T]){CLS, A, A, A, SEP, B, B, SEP}, "ids"); /* 3 + 2 of 5 */
  CHECK(trc_pair_encode(tok, "a b c d", 7, NULL, 0, T, ids, types, mask, &err) == 0);
  check_row(ids, (const int32_t[T]){CLS, A, B, C, UNK, SEP, PAD, PAD}, "ids"); /* one sentence */
  check_row(types, (const int32_t[T]){0}, "types");
  CHECK_FAILS_WITH(trc_pair_encode(tok, "a", 1, "b", 1, 2, ids, types, mask, &err), err,
                   "T = 2 leaves no room for the 3 special tokens");
}

/* input_ids, token_type_ids (u8) and attention_mask [B, T], label [B] below 3 */
static trc_input inputs[] = {
    {"label", TRC_I32, 1, {2}, 0, 4, 3},
    {"input_ids", TRC_I32, 2, {2, T}, 64, 4 * T, 10},
    {"token_type_ids", TRC_U8, 2, {2, T}, 128, T, 2},
    {"attention_mask", TRC_I32, 2, {2, T}, 192, 4 * T, 0},
};

static trc_model model(int n_inputs) {
  return (trc_model){.name = "pairs", .batch = 2, .n_inputs = n_inputs, .inputs = inputs,
                     .has_predict = 1, .predict_classes = 3, .predict_rows = 1,
                     .label_input = 0, .token_input = -1};
}

/* Loads `text` as file `name` in dir with --pair-fields `fields`. */
static int load(const char *dir, const char *name, const char *text, const char *fields,
                const trc_tokenizer *tok, trc_dataset *ds, trc_error *err) {
  char path[4096];
  trc_pair_fields f;
  test_path(path, sizeof path, dir, name);
  test_write_file(path, text, strlen(text));
  trc_model m = model(4);
  memset(err, 0, sizeof *err);
  return trc_pair_fields_parse(fields, &f, err) || trc_pairs_load(&m, tok, path, &f, ds, err);
}

static int32_t value(const trc_dataset *ds, int col, int64_t row, int t) {
  const trc_input *in = &inputs[col];
  const unsigned char *p = ds->columns[col].data + row * (int64_t)in->example_bytes;
  int32_t v;
  if (in->dtype == TRC_U8) return p[t];
  memcpy(&v, p + 4 * t, 4);
  return v;
}

/* Row `row` holds [CLS] a [SEP] b [SEP] (ids given), padded, and label. */
static void check_example(const trc_dataset *ds, int64_t row, int32_t a, int32_t b,
                          int32_t label) {
  const int32_t ids[T] = {CLS, a, SEP, b, SEP, PAD, PAD, PAD};
  for (int t = 0; t < T; t++) {
    CHECK(value(ds, 1, row, t) == ids[t]);
    CHECK(value(ds, 2, row, t) == (t == 3 || t == 4));
    CHECK(value(ds, 3, row, t) == (t < 5));
  }
  CHECK(value(ds, 0, row, 0) == label);
}

static void test_files(const char *dir, const trc_tokenizer *tok) {
  trc_dataset ds;
  trc_error err;
  CHECK(load(dir, "p.tsv", "a\tb\t1\n\nb\ta\t2\r\n", "text_a,text_b,label", tok, &ds, &err) == 0);
  CHECK(ds.n == 2 && ds.n_columns == 4);
  check_example(&ds, 0, A, B, 1);
  check_example(&ds, 1, B, A, 2);
  trc_dataset_free(&ds);
  /* a header names the columns, in any order, among others */
  CHECK(load(dir, "h.tsv", "id\ty\ts2\ts1\n7\t0\tb\ta\n", "s1,s2,y", tok, &ds, &err) == 0);
  CHECK(ds.n == 1);
  check_example(&ds, 0, A, B, 0);
  trc_dataset_free(&ds);
  CHECK(load(dir, "j.jsonl", "{\"label\": 2, \"text_b\": \"a\", \"text_a\": \"c\"}\n", "text_a,"
             "text_b,label", tok, &ds, &err) == 0);
  CHECK(ds.n == 1);
  check_example(&ds, 0, C, A, 2);
  trc_dataset_free(&ds);
  CHECK(load(dir, "s.jsonl", "{\"s\": \"a b\", \"y\": 1}\n", "s,,y", tok, &ds, &err) == 0);
  CHECK(ds.n == 1 && value(&ds, 1, 0, 3) == SEP && value(&ds, 2, 0, 3) == 0); /* one sentence */
  trc_dataset_free(&ds);
}

#define CHECK_LOAD_FAILS(name, text, fields, at, needle)                                       \
  do {                                                                                             \
    trc_dataset ds_;                                                                               \
    trc_error e_;                                                                                  \
    CHECK_FAILS_WITH(load(dir, name, text, fields, tok, &ds_, &e_), e_, needle);                  \
    if (!strstr(e_.where, at)) {                                                                   \
      fprintf(stderr, "%s:%d: where '%s', expected '%s'\n", __FILE__, __LINE__, e_.where, at);     \
      test_failures++;                                                                             \
    }                                                                                              \
  } while (0)

static void test_bad_files(const char *dir, const trc_tokenizer *tok) {
  const char *def = "text_a,text_b,label";
  CHECK_LOAD_FAILS("a.tsv", "a\tb\t1\na\tb\n", def, "a.tsv:2",
                   "expected 3 tab-separated fields (text_a, text_b, label), found 2");
  CHECK_LOAD_FAILS("b.tsv", "a\tb\t1\na\tb\tyes\n", def, "b.tsv:2",
                   "the label 'yes' is not an integer");
  CHECK_LOAD_FAILS("b2.tsv", "s1\ts2\ty\na\tb\t1\n", def, "b2.tsv:1",
                   "nor a header naming the fields text_a, text_b and label");
  CHECK_LOAD_FAILS("c.tsv", "a\tb\t3\n", def, "c.tsv:1", "the label 3 is outside [0, 3)");
  CHECK_LOAD_FAILS("d.tsv", "a\tb\t-1\n", def, "d.tsv:1", "the label -1 is outside [0, 3)");
  CHECK_LOAD_FAILS("e.tsv", "a\tb\t99999999999\n", def, "e.tsv:1", "is not an integer");
  CHECK_LOAD_FAILS("f.tsv", "a\t\xff\t1\n", def, "f.tsv:1", "invalid UTF-8 at byte 0");
  CHECK_LOAD_FAILS("g.jsonl", "{\"text_a\": \"a\", \"text_b\": \"b\", \"label\": 1.5}\n", def,
                   "g.jsonl:1", "the label '1.5' is not an integer");
  CHECK_LOAD_FAILS("h.jsonl", "{\"text_a\": \"a\", \"text_b\": \"b\", \"label\": 1}\n{\"idx\": 1}",
                   def, "h.jsonl:2", "unknown key \"idx\"");
  CHECK_LOAD_FAILS("i.jsonl", "{\"text_a\": \"a\", \"label\": 1}\n", def, "i.jsonl:1",
                   "no \"text_b\" key");
  CHECK_LOAD_FAILS("j.jsonl", "{\"text_a\": \"a\", \"text_a\": \"b\"}\n", def, "j.jsonl:1",
                   "the key \"text_a\" is given twice");
  CHECK_LOAD_FAILS("k.jsonl", "{\"text_a\": 1}\n", def, "k.jsonl:1", "expected a string");
  CHECK_LOAD_FAILS("l.jsonl", "{\"text_a\": \"a\"} x\n", def, "l.jsonl:1",
                   "expected the end of the line");
  CHECK_LOAD_FAILS("m.jsonl", "\n\n", def, "m.jsonl", "no examples");
  CHECK_LOAD_FAILS("n.csv", "a,b,1\n", def, "n.csv", "expected a .tsv or .jsonl file");
  /* more fields than a header may name (64): counted, none read past those
   * stored (found by fuzz.text: a header of 65 read an unset field) */
  char wide[3 * 70 + 2] = "";
  for (int i = 0; i < 70; i++) strcat(wide, i ? "\tab" : "ab");
  strcat(wide, "\n");
  CHECK_LOAD_FAILS("o.tsv", wide, def, "o.tsv:1",
                   "expected 3 tab-separated fields (text_a, text_b, label), found 70");
  trc_pair_fields f;
  trc_error err;
  CHECK_FAILS_WITH(trc_pair_fields_parse("a,b", &f, &err), err, "expected TEXT_A,TEXT_B,LABEL");
  CHECK_FAILS_WITH(trc_pair_fields_parse(",b,c", &f, &err), err, "expected TEXT_A,TEXT_B,LABEL");
  CHECK_FAILS_WITH(trc_pair_fields_parse("a,b,c,d", &f, &err), err, "expected TEXT_A");
}

static void test_models(const trc_tokenizer *tok) {
  trc_error err;
  trc_model m = model(4);
  CHECK(trc_pairs_check_model(&m, tok, &err) == 0);
  m = model(2); /* label and input_ids only: fine */
  CHECK(trc_pairs_check_model(&m, tok, &err) == 0);
  m = model(1);
  CHECK_FAILS_WITH(trc_pairs_check_model(&m, tok, &err), err, "has no input named input_ids");
  m = model(4);
  m.label_input = -1;
  CHECK_FAILS_WITH(trc_pairs_check_model(&m, tok, &err), err, "has no input of class labels");
  inputs[3].name = "segment_mask";
  m = model(4);
  CHECK_FAILS_WITH(trc_pairs_check_model(&m, tok, &err), err,
                   "has an input 'segment_mask' that the pairs do not give");
  inputs[3].name = "attention_mask";
  inputs[1].index_limit = 5; /* an embedding of 5 rows: the vocabulary has 10 */
  CHECK_FAILS_WITH(trc_pairs_check_model(&m, tok, &err), err,
                   "input 'input_ids' takes values below 5, but the pairs give it up to 9");
  inputs[1].index_limit = 10;
  inputs[3].dims[1] = T + 1;
  CHECK_FAILS_WITH(trc_pairs_check_model(&m, tok, &err), err,
                   "input 'attention_mask' must be i32[B, 8]");
  inputs[3].dims[1] = T;
  trc_tokenizer *bytes;
  CHECK(trc_tokenizer_load("bytes", &bytes, &err) == 0);
  CHECK_FAILS_WITH(trc_pairs_check_model(&m, bytes, &err), err, "need BERT's WordPiece");
  trc_tokenizer_free(bytes);
}

int main(void) {
  trc_tokenizer *tok;
  trc_error err;
  if (trc_tokenizer_parse_wordpiece(vocab, sizeof vocab - 1, &tok, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  char dir[4096];
  test_make_dir(dir, sizeof dir);
  test_truncate();
  test_encode(tok);
  test_files(dir, tok);
  test_bad_files(dir, tok);
  test_models(tok);
  test_remove_dir(dir);
  trc_tokenizer_free(tok);
  return test_finish("pairs");
}
