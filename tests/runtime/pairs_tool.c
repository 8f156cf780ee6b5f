/* pairs_tool TOKENIZER_DIR T FIELDS FILE — loads FILE as --pairs FILE
 * --pair-fields FIELDS would for a model with inputs input_ids,
 * token_type_ids and attention_mask i32[B, T] and label i32[B], and prints
 * each example as one line: the ids, types, mask and label, the groups
 * separated by " | " (for wordpiece_reference.py). */
#include "trainc_rt.h"

#include <stdlib.h>
#include <string.h>

static void print_row(const trc_column *c, int64_t row, int64_t n, const char *after) {
  for (int64_t k = 0; k < n; k++) {
    int32_t v;
    memcpy(&v, c->data + ((uint64_t)row * (uint64_t)n + (uint64_t)k) * 4, 4);
    printf(k ? " %d" : "%d", v);
  }
  fputs(after, stdout);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: pairs_tool TOKENIZER_DIR T FIELDS FILE\n");
    return 2;
  }
  const int64_t T = atoll(argv[2]);
  const uint64_t row = 4 * (uint64_t)T;
  trc_input inputs[] = {
      {"input_ids", TRC_I32, 2, {1, T}, 0, row, 0},
      {"token_type_ids", TRC_I32, 2, {1, T}, row, row, 2},
      {"attention_mask", TRC_I32, 2, {1, T}, 2 * row, row, 0},
      {"label", TRC_I32, 1, {1}, 3 * row, 4, 0},
  };
  trc_model m = {.name = "pairs", .batch = 1, .n_inputs = 4, .inputs = inputs,
                 .label_input = 3, .token_input = -1};
  trc_tokenizer *tok;
  trc_pair_fields fields;
  trc_dataset ds;
  trc_error err = {{0}, {0}};
  if (trc_tokenizer_load(argv[1], &tok, &err) || trc_pair_fields_parse(argv[3], &fields, &err) ||
      trc_pairs_load(&m, tok, argv[4], &fields, &ds, &err)) {
    fprintf(stderr, "%s: error: %s\n", err.where, err.msg);
    return 1;
  }
  for (int64_t r = 0; r < ds.n; r++) {
    print_row(&ds.columns[0], r, T, " | ");
    print_row(&ds.columns[1], r, T, " | ");
    print_row(&ds.columns[2], r, T, " | ");
    print_row(&ds.columns[3], r, 1, "\n");
  }
  trc_dataset_free(&ds);
  trc_tokenizer_free(tok);
  return 0;
}
