/* test_holdout.c — the validation split (trc_dataset_hold_out): the rows
 * held out are a function of the seed (the same seed, the same rows;
 * another seed, other rows), spread over the whole file rather than its
 * tail, exactly as many as asked; the training rows and the held-out rows
 * each keep their file order, and every column moves together. */
#include "test_util.h"

#include <stdlib.h>

enum { N = 1000, HELD = 200 };

/* A dataset of N rows: column 0 holds the row's index (i32), column 1 its
 * index times 3 in a wider row (two i32), so a row that moves whole keeps
 * them in step. */
static void make(trc_dataset *ds, trc_column *cols, int32_t *ids, int32_t *pairs) {
  for (int32_t r = 0; r < N; r++) {
    ids[r] = r;
    pairs[2 * r] = 3 * r;
    pairs[2 * r + 1] = -r;
  }
  cols[0] = (trc_column){(unsigned char *)ids, 4};
  cols[1] = (trc_column){(unsigned char *)pairs, 8};
  *ds = (trc_dataset){.n = N, .n_columns = 2, .columns = cols, .owns_data = 0};
}

/* Splits with seed; checks the invariants; returns the held-out ids' sum. */
static long split(uint64_t seed, int32_t *held_ids) {
  int32_t ids[N], pairs[2 * N];
  trc_column cols[2];
  trc_dataset ds;
  trc_error err;
  make(&ds, cols, ids, pairs);
  CHECK(trc_dataset_hold_out(&ds, HELD, seed, &err) == 0);
  char seen[N] = {0};
  long sum = 0;
  for (int r = 0; r < N; r++) {
    CHECK(ids[r] >= 0 && ids[r] < N && !seen[ids[r]]);
    seen[ids[r]] = 1;
    CHECK(pairs[2 * r] == 3 * ids[r] && pairs[2 * r + 1] == -ids[r]);
    if (r != 0 && r != N - HELD) CHECK(ids[r] > ids[r - 1]); /* both parts in file order */
    if (r >= N - HELD) sum += ids[r];
  }
  memcpy(held_ids, ids + N - HELD, HELD * sizeof *held_ids);
  return sum;
}

int main(void) {
  int32_t a[HELD], b[HELD], c[HELD];
  long sum = split(1, a);
  split(1, b);
  split(2, c);
  CHECK(memcmp(a, b, sizeof a) == 0);  /* a function of the seed */
  CHECK(memcmp(a, c, sizeof a) != 0);  /* and it depends on it */
  /* Spread over the file: the mean index of a uniform sample of 200 of
   * 0..999 is 499.5 with a standard deviation of about 18; the tail would
   * give 899.5. */
  CHECK_NEAR((double)sum / HELD, 499.5, 100);
  int early = 0;
  for (int i = 0; i < HELD; i++) early += a[i] < N / 2;
  CHECK(early > HELD / 4 && early < 3 * HELD / 4);

  trc_dataset ds;
  trc_column cols[2];
  int32_t ids[N], pairs[2 * N];
  trc_error err;
  make(&ds, cols, ids, pairs);
  CHECK(trc_dataset_hold_out(&ds, 0, 1, &err) == 0 && ids[N - 1] == N - 1);
  CHECK(trc_dataset_hold_out(&ds, N, 1, &err) == 0); /* everything: the order is kept */
  for (int r = 0; r < N; r++) CHECK(ids[r] == r);
  CHECK_FAILS_WITH(trc_dataset_hold_out(&ds, N + 1, 1, &err), err, "cannot hold out");
  return test_finish("test_holdout");
}
