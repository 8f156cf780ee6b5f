/* labels.c — counting the labels that count. A model whose loss is
 * cross_entropy(logits, y, ignore = L) computes the SUM of its per-row
 * losses over the rows whose label is not L; the runtime divides by their
 * number. For training that number is taken over the whole accumulation
 * window (and over the ranks when gradients are averaged) before the step
 * runs, so the loss seed 1/count gives the gradient of the mean over every
 * real label of the window — not a mean of per-micro-batch means, which
 * weighs a micro-batch with few real labels as much as a full one. */
#include "rt_data.h"

#include <string.h>

int trc_ignore_input(const trc_model *m) { return m->has_ignore ? m->ignore_input : -1; }

static int64_t count_in(const trc_model *m, const unsigned char *labels, uint64_t elems) {
  int64_t n = 0;
  for (uint64_t e = 0; e < elems; e++) {
    int32_t v;
    memcpy(&v, labels + 4 * e, 4);
    n += v != m->ignore_label;
  }
  return n;
}

int64_t trc_count_labels(const trc_model *m, const trc_dataset *ds, const int64_t *rows,
                         int64_t count) {
  const trc_column *c = &ds->columns[m->ignore_input];
  int64_t n = 0;
  for (int64_t r = 0; r < count; r++)
    n += count_in(m, c->data + (uint64_t)rows[r] * c->example_bytes, c->example_bytes / 4);
  return n;
}

int64_t trc_count_labels_in_arena(const trc_model *m, const char *arena) {
  const trc_input *in = &m->inputs[m->ignore_input];
  return count_in(m, (const unsigned char *)arena + in->offset,
                  in->example_bytes / 4 * (uint64_t)m->batch);
}

int trc_check_labels_count(const trc_model *m, const unsigned char *labels, int64_t rows,
                           const char *path, trc_error *err) {
  const trc_input *in = &m->inputs[m->ignore_input];
  if (rows == 0 || count_in(m, labels, (uint64_t)rows * (in->example_bytes / 4)) > 0) return 0;
  return trc_fail_at(err, path, "every label of input '%s' is %lld, the ignored label: no "
                     "example has a label that counts, nothing to train on or evaluate",
                     in->name, (long long)m->ignore_label);
}
