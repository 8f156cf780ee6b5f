/* dump.c — `--dump-step FILE`: one forward and backward on the first batch of
 * --data (rows 0..B-1 in file order, no shuffling) with loss seed 1 (with
 * ignored labels: 1 / the labels that count, and "loss" is their mean, as
 * PyTorch's cross_entropy(ignore_index=...) gives it), written
 * as a .safetensors file for comparison with a reference implementation
 * (tests/torch/ compares it with PyTorch on the same weights):
 *   "loss"          f32[]                  the model's loss
 *   "predict"       f32[B, classes], or f32[B, T, classes] for sequence models:
 *                                          the predicted scores, when the model has them
 *                                          (with the loss head: computed from x and w)
 *   "grad.<param>"  the parameter's shape  d(loss)/d(param), for every parameter
 * It is a training step: dropout is on, with the key of the first training
 * micro-batch. */
#include "rt_io.h"
#include "data/rt_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs the step on rows 0..B-1 (`rows` holds B); gradients start at zero, so they are this batch's alone. */
static float forward_backward(const trc_model *m, char *arena, const trc_dataset *ds,
                              uint64_t seed, int64_t *rows) {
  trc_set_mode(m, arena, trc_rng_key(seed, TRC_STREAM_DROPOUT, 0), 1);
  for (int64_t r = 0; r < m->batch; r++) rows[r] = r;
  trc_dataset_gather(ds, m, rows, m->batch, arena);
  /* with ignored labels the loss is a sum: the mean over the labels that count */
  int64_t labels = trc_ignore_input(m) >= 0 ? trc_count_labels_in_arena(m, arena) : 1;
  const float loss_seed = labels > 0 ? 1.0f / (float)labels : 0.0f;
  memset(arena + m->grad_offset, 0, m->trained_count * sizeof(float));
  memcpy(arena + m->loss_seed_offset, &loss_seed, sizeof loss_seed);
  m->forward(arena);
  m->backward(arena, NULL);
  float loss;
  memcpy(&loss, arena + m->loss_offset, sizeof loss);
  return loss * loss_seed;
}

/* Every predict row of a loss-head model, which stores x and w rather than
 * its logits: malloc'ed [B * rows, classes], NULL when out of memory. */
static float *predict_rows_of_head(const trc_model *m, const char *arena) {
  const int64_t rows = m->batch * m->predict_rows;
  float *logits = malloc((size_t)rows * (size_t)m->predict_classes * sizeof *logits);
  for (int64_t r = 0; logits && r < rows; r++)
    trc_predict_row(m, arena, r, logits + r * m->predict_classes);
  return logits;
}

/* Tensor list: loss, predict (if any), then the gradient of each trained
 * parameter, named "grad.<param name>" (names malloc'ed in `names`). */
static int write_dump(const trc_model *m, const char *arena, const float *loss, const char *path,
                      trc_error *err) {
  int n = 0, rc = -1;
  trc_tensor *t = calloc((size_t)m->n_params + 2, sizeof *t);
  char **names = calloc((size_t)m->n_params + 1, sizeof *names);
  float *head_logits = m->predict_head ? predict_rows_of_head(m, arena) : NULL;
  const int64_t predict_dims[3] = {m->batch, m->predict_rows, m->predict_classes};
  const int64_t class_dims[2] = {m->batch, m->predict_classes};
  if (!t || !names || (m->predict_head && !head_logits)) {
    trc_fail_at(err, path, "out of memory");
    goto done;
  }
  t[n++] = (trc_tensor){"loss", 0, predict_dims, loss};
  if (m->has_predict)
    t[n++] = (trc_tensor){"predict", m->predict_rows > 1 ? 3 : 2,
                          m->predict_rows > 1 ? predict_dims : class_dims,
                          head_logits ? head_logits : (const float *)(arena + m->predict_offset)};
  for (int i = 0; i < m->n_params; i++) {
    const trc_param *p = &m->params[i];
    if (p->frozen) continue; /* it has no gradient */
    size_t len = strlen(p->name) + sizeof "grad.";
    if (!(names[i] = malloc(len))) {
      trc_fail_at(err, path, "out of memory");
      goto done;
    }
    snprintf(names[i], len, "grad.%s", p->name);
    const float *grad = (const float *)(arena + m->grad_offset + (p->offset - m->param_offset));
    t[n++] = (trc_tensor){names[i], p->rank, p->dims, grad};
  }
  rc = trc_safetensors_write(path, m->name, t, n, err);
done:
  for (int i = 0; names && i < m->n_params; i++) free(names[i]);
  free(names);
  free(t);
  free(head_logits);
  return rc;
}

int trc_dump_step(const trc_model *m, char *arena, const char *data_dir, uint64_t seed,
                  const char *path, trc_error *err) {
  trc_dataset ds;
  if (trc_dataset_load(m, data_dir, &ds, err)) return -1;
  int rc = -1;
  int64_t *rows = malloc((size_t)m->batch * sizeof *rows);
  if (!rows)
    trc_fail(err, "out of memory");
  else if (ds.n < m->batch)
    trc_fail_at(err, data_dir, "%lld examples, fewer than one batch of %lld", (long long)ds.n,
                (long long)m->batch);
  else {
    float loss = forward_backward(m, arena, &ds, seed, rows);
    rc = write_dump(m, arena, &loss, path, err);
  }
  free(rows);
  trc_dataset_free(&ds);
  return rc;
}
