/* eval.c — evaluation passes: forward() over a dataset in full batches, the
 * last one padded by repeating the set's first rows, counting valid rows only.
 *
 * With predictions and labels, eval_loss is the mean per-example
 * cross-entropy of the predict logits (exact even for the padded batch; with
 * the chunked loss head, the rows' losses its forward() computed);
 * otherwise it is the mean of the `loss` of the full batches.
 *
 * Under MPI each rank evaluates its own slice of the set, and the sums behind
 * the metrics (confusion counts, loss sums, example counts) are added across
 * ranks before any ratio is taken: one all-reduce of a buffer allocated once. */
#include "rt_train.h"
#include "data/rt_data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int trc_evaluator_init(trc_evaluator *ev, const trc_model *m, trc_error *err) {
  memset(ev, 0, sizeof *ev);
  ev->classify = m->has_predict && m->label_input >= 0;
  ev->rows = malloc((size_t)m->batch * sizeof *ev->rows);
  const int64_t c = m->has_predict ? m->predict_classes : 0;
  const int64_t matrix = c <= TRC_CONFUSION_MAX_CLASSES ? c * c : 0;
  ev->sums = malloc((size_t)(EVAL_SUMS + 3 * c + matrix) * sizeof *ev->sums);
  if (!ev->rows || !ev->sums) {
    trc_evaluator_free(ev);
    return trc_fail(err, "out of memory (evaluation)");
  }
  if (ev->classify && trc_metrics_init(&ev->metrics, m->predict_classes, err)) {
    free(ev->rows);
    free(ev->sums);
    return -1;
  }
  return 0;
}

void trc_evaluator_free(trc_evaluator *ev) {
  free(ev->rows);
  free(ev->sums);
  if (ev->classify && ev->metrics.true_pos) trc_metrics_free(&ev->metrics);
  memset(ev, 0, sizeof *ev);
}

int trc_check_labels(const trc_model *m, const trc_dataset *ds, const char *what, trc_error *err) {
  if (!(m->has_predict && m->label_input >= 0)) return 0;
  const trc_input *in = &m->inputs[m->label_input];
  const unsigned char *col = ds->columns[m->label_input].data;
  for (int64_t r = 0; r < ds->n * m->predict_rows; r++) {
    int32_t y = 0;
    if (in->dtype == TRC_U8)
      y = col[r];
    else
      memcpy(&y, col + 4 * r, 4);
    if ((y < 0 || y >= m->predict_classes) &&
        !(trc_ignore_input(m) == m->label_input && y == m->ignore_label))
      return trc_fail_at(err, what,
                         "label '%s' of row %lld is %d, outside the model's %lld classes", in->name,
                         (long long)(r / m->predict_rows), (int)y, (long long)m->predict_classes);
  }
  return 0;
}

/* Rows first..first+B of ds, wrapping to the start past its end. */
static void batch_rows(int64_t *rows, int64_t batch, int64_t first, int64_t n) {
  for (int64_t r = 0; r < batch; r++) rows[r] = first + r < n ? first + r : (first + r - n) % n;
}

/* Adds every rank's counts into every rank's: [examples, correct, ce_sum,
 * loss_sum, full_batches, predictions, then true_pos, false_pos, false_neg
 * per class, then the confusion matrix when there is one]. The metrics count
 * predictions: one per label that counts (a row of an example, a token of a
 * sequence; ignored labels are not). */
static void reduce_over_ranks(trc_evaluator *ev, int64_t *examples, double *loss_sum,
                              int64_t *full_batches) {
  trc_metrics *mt = &ev->metrics;
  const int64_t c = ev->classify ? mt->classes : 0, matrix = mt->confusion ? c * c : 0;
  int64_t *per_class[3] = {mt->true_pos, mt->false_pos, mt->false_neg};
  double *cells = ev->sums + EVAL_SUMS + 3 * c;
  double *s = ev->sums;
  s[0] = (double)*examples;
  s[1] = (double)mt->correct;
  s[2] = mt->ce_sum;
  s[3] = *loss_sum;
  s[4] = (double)*full_batches;
  s[5] = (double)mt->examples;
  for (int a = 0; a < 3; a++)
    for (int64_t k = 0; k < c; k++) s[EVAL_SUMS + a * c + k] = (double)per_class[a][k];
  for (int64_t k = 0; k < matrix; k++) cells[k] = (double)mt->confusion[k];
  trc_comm_allreduce_f64(s, (uint64_t)(EVAL_SUMS + 3 * c + matrix));
  *examples = (int64_t)s[0];
  *loss_sum = s[3];
  *full_batches = (int64_t)s[4];
  if (!ev->classify) return;
  mt->examples = (int64_t)s[5];
  mt->correct = (int64_t)s[1];
  mt->ce_sum = s[2];
  for (int a = 0; a < 3; a++)
    for (int64_t k = 0; k < c; k++) per_class[a][k] = (int64_t)s[EVAL_SUMS + a * c + k];
  for (int64_t k = 0; k < matrix; k++) mt->confusion[k] = (int64_t)cells[k];
}

static void set_metric(trc_eval_result *r, int metric, double value) {
  r->value[metric] = value;
  r->has |= 1u << metric;
}

/* The classification metrics the run asked for (bit i of cfg->metrics is
 * metric i), from the summed counts. */
static void classification_metrics(const trc_metrics *mt, unsigned metrics, trc_eval_result *out) {
  const double values[TRC_EVAL_METRICS] = {
      [TRC_EVAL_ACCURACY] = trc_metrics_accuracy(mt),
      [TRC_EVAL_F1] = trc_metrics_task_f1(mt),
      [TRC_EVAL_F1_MACRO] = trc_metrics_macro_f1(mt),
      [TRC_EVAL_F1_BINARY] = mt->classes == 2 && mt->examples ? trc_metrics_f1(mt, 1) : NAN,
  };
  for (int i = TRC_EVAL_ACCURACY; i < TRC_EVAL_METRICS; i++)
    if (metrics >> i & 1) set_metric(out, i, values[i]);
}

/* Counts the batch's first `rows` predictions: from the stored logits, or
 * from the per-row loss and argmax that the loss head's forward() left. */
static void count_batch(trc_metrics *mt, const trc_model *m, const char *arena, int64_t rows) {
  const trc_input *labels = &m->inputs[m->label_input];
  if (m->predict_head) {
    const float *stats = (const float *)(arena + m->head_stats_offset);
    trc_metrics_add_rows(mt, stats, stats + m->batch * m->predict_rows, arena + labels->offset,
                         labels->dtype, rows);
  } else {
    trc_metrics_add(mt, (const float *)(arena + m->predict_offset), arena + labels->offset,
                    labels->dtype, rows);
  }
}

void trc_evaluate(trc_evaluator *ev, const trc_model *m, const trc_train_config *cfg, char *arena,
                  const trc_dataset *ds, trc_eval_result *out) {
  const int64_t B = m->batch;
  double loss_sum = 0.0;
  int64_t full_batches = 0;
  memset(out, 0, sizeof *out);
  if (ev->classify) trc_metrics_reset(&ev->metrics);
  trc_set_mode(m, arena, 0, 0);
  const trc_device *device =
      ev->classify && m->device && m->device->eval_forward ? m->device : NULL;
  for (int64_t first = 0; first < ds->n; first += B) {
    int64_t valid = ds->n - first < B ? ds->n - first : B;
    batch_rows(ev->rows, B, first, ds->n);
    trc_dataset_gather(ds, m, ev->rows, B, arena);
    if (device) /* the predictions stay on the device, counted there */
      device->eval_forward(arena, valid * m->predict_rows);
    else
      m->forward(arena);
    if (valid == B) {
      float loss;
      memcpy(&loss, arena + m->loss_offset, sizeof loss);
      if (trc_ignore_input(m) >= 0) { /* a sum over the labels that count: their mean */
        int64_t labels = trc_count_labels_in_arena(m, arena);
        loss = labels > 0 ? loss / (float)labels : 0.0f;
      }
      loss_sum += loss;
      full_batches++;
    }
    if (ev->classify && !device) count_batch(&ev->metrics, m, arena, valid * m->predict_rows);
  }
  trc_metrics *mt = &ev->metrics;
  if (device)
    device->eval_counts(&mt->examples, &mt->correct, mt->true_pos, mt->false_pos, mt->false_neg,
                        mt->confusion, &mt->ce_sum);
  int64_t examples = ds->n;
  reduce_over_ranks(ev, &examples, &loss_sum, &full_batches);
  out->examples = examples;
  if (ev->classify && m->loss_kind == TRC_LOSS_CROSS_ENTROPY)
    set_metric(out, TRC_EVAL_LOSS, trc_metrics_cross_entropy(&ev->metrics));
  else if (full_batches > 0)
    set_metric(out, TRC_EVAL_LOSS, loss_sum / (double)full_batches);
  if (ev->classify) classification_metrics(&ev->metrics, cfg->metrics, out);
}
