/* holdout.c — the validation split (`validation F`, --validation F): which
 * rows of --data are held out for evaluation is drawn from the seed, so a
 * file sorted by class or by time still gives a representative split.
 *
 * Selection sampling (Knuth's Algorithm S): row i is held out when
 * u(key, i) * (rows left) < (rows still to hold out), with u the
 * counter-based uniform of (seed, TRC_STREAM_HOLDOUT); every subset of the
 * size is equally likely, and the split is a function of the seed alone.
 * The rows are then reordered in place, stably: the training rows first in
 * file order, the held-out rows last in file order, so the trainer takes
 * both as views. Extra memory: one byte per row and the held-out rows. */
#include "rt_data.h"

#include <stdlib.h>
#include <string.h>

/* Moves the rows marked in `held` to the end of the column, both parts in
 * their order; `tmp` holds n_held rows. */
static void partition_column(trc_column *col, int64_t n, const unsigned char *held,
                             int64_t n_held, unsigned char *tmp) {
  const uint64_t w = col->example_bytes;
  int64_t kept = 0, moved = 0;
  for (int64_t r = 0; r < n; r++) {
    unsigned char *row = col->data + (uint64_t)r * w;
    if (held[r]) {
      memcpy(tmp + (uint64_t)moved++ * w, row, w);
    } else {
      if (kept != r) memmove(col->data + (uint64_t)kept * w, row, w);
      kept++;
    }
  }
  memcpy(col->data + (uint64_t)(n - n_held) * w, tmp, (uint64_t)n_held * w);
}

int trc_dataset_hold_out(trc_dataset *ds, int64_t n_held, uint64_t seed, trc_error *err) {
  const int64_t n = ds->n;
  if (n_held <= 0) return 0;
  if (n_held > n) return trc_fail(err, "cannot hold out %lld of %lld rows", (long long)n_held,
                                  (long long)n);
  uint64_t widest = 0;
  for (int i = 0; i < ds->n_columns; i++)
    if (ds->columns[i].example_bytes > widest) widest = ds->columns[i].example_bytes;
  unsigned char *held = malloc((size_t)n), *tmp = malloc((size_t)(n_held * widest) + 1);
  if (!held || !tmp) {
    free(held);
    free(tmp);
    return trc_fail(err, "out of memory (validation split)");
  }
  const uint64_t key = trc_rng_key(seed, TRC_STREAM_HOLDOUT, 0);
  int64_t wanted = n_held;
  for (int64_t r = 0; r < n; r++) {
    held[r] = trc_rng_uniform(key, (uint64_t)r) * (double)(n - r) < (double)wanted;
    wanted -= held[r];
  }
  for (int i = 0; i < ds->n_columns; i++) partition_column(&ds->columns[i], n, held, n_held, tmp);
  free(held);
  free(tmp);
  return 0;
}
