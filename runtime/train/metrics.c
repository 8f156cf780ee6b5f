/* metrics.c — classification metrics over an evaluation pass: accuracy,
 * F1 as scikit-learn's f1_score computes it (per class 2TP / (2TP + FP + FN),
 * 0 when a class has no TP, FP or FN; macro: the mean over the classes
 * present in labels or predictions; binary: class 1's), per-class
 * precision and recall, the confusion matrix (for up to
 * TRC_CONFUSION_MAX_CLASSES classes) and mean cross-entropy, from the logits or
 * from each row's loss and argmax. */
#include "rt_train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int trc_metrics_init(trc_metrics *mt, int64_t classes, trc_error *err) {
  memset(mt, 0, sizeof *mt);
  mt->classes = classes;
  size_t n = (size_t)(classes > 0 ? classes : 1);
  mt->true_pos = calloc(n, sizeof(int64_t));
  mt->false_pos = calloc(n, sizeof(int64_t));
  mt->false_neg = calloc(n, sizeof(int64_t));
  int confusion = classes <= TRC_CONFUSION_MAX_CLASSES;
  if (confusion) mt->confusion = calloc(n * n, sizeof(int64_t));
  if (!mt->true_pos || !mt->false_pos || !mt->false_neg || (confusion && !mt->confusion)) {
    trc_metrics_free(mt);
    return trc_fail(err, "out of memory (metrics)");
  }
  return 0;
}

void trc_metrics_reset(trc_metrics *mt) {
  size_t bytes = (size_t)mt->classes * sizeof(int64_t);
  memset(mt->true_pos, 0, bytes);
  memset(mt->false_pos, 0, bytes);
  memset(mt->false_neg, 0, bytes);
  if (mt->confusion) memset(mt->confusion, 0, bytes * (size_t)mt->classes);
  mt->examples = mt->correct = 0;
  mt->ce_sum = 0.0;
}

void trc_metrics_free(trc_metrics *mt) {
  free(mt->true_pos);
  free(mt->false_pos);
  free(mt->false_neg);
  free(mt->confusion);
  memset(mt, 0, sizeof *mt);
}

static int64_t label_at(const void *labels, trc_dtype dtype, int64_t r) {
  if (dtype == TRC_U8) return ((const uint8_t *)labels)[r];
  int32_t v;
  memcpy(&v, (const char *)labels + 4 * r, 4);
  return v;
}

/* Whether label y counts: an ignored label lies outside [0, classes)
 * (loading checked the others). */
static int label_counts(const trc_metrics *mt, int64_t y) { return y >= 0 && y < mt->classes; }

/* Counts the prediction `pred` of a label y that counts, with its
 * cross-entropy ce. */
static void count_row(trc_metrics *mt, int64_t y, int64_t pred, double ce) {
  mt->examples++;
  mt->ce_sum += ce;
  if (pred == y) {
    mt->correct++;
    mt->true_pos[y]++;
  } else {
    mt->false_pos[pred]++;
    mt->false_neg[y]++;
  }
  if (mt->confusion) mt->confusion[y * mt->classes + pred]++;
}

void trc_metrics_add(trc_metrics *mt, const float *logits, const void *labels,
                     trc_dtype label_dtype, int64_t rows) {
  const int64_t k = mt->classes;
  for (int64_t r = 0; r < rows; r++) {
    const float *x = logits + r * k;
    int64_t y = label_at(labels, label_dtype, r);
    if (label_counts(mt, y))
      count_row(mt, y, trc_argmax_row(x, k), trc_cross_entropy_row(x, k, y));
  }
}

void trc_metrics_add_rows(trc_metrics *mt, const float *row_loss, const float *argmax,
                          const void *labels, trc_dtype label_dtype, int64_t rows) {
  for (int64_t r = 0; r < rows; r++) {
    int64_t y = label_at(labels, label_dtype, r);
    if (label_counts(mt, y)) count_row(mt, y, (int64_t)argmax[r], row_loss[r]);
  }
}

double trc_metrics_accuracy(const trc_metrics *mt) {
  return mt->examples ? (double)mt->correct / (double)mt->examples : NAN;
}

static double ratio(int64_t num, int64_t den) { return den ? (double)num / (double)den : 0.0; }

double trc_metrics_precision(const trc_metrics *mt, int64_t c) {
  return ratio(mt->true_pos[c], mt->true_pos[c] + mt->false_pos[c]);
}

double trc_metrics_recall(const trc_metrics *mt, int64_t c) {
  return ratio(mt->true_pos[c], mt->true_pos[c] + mt->false_neg[c]);
}

double trc_metrics_f1(const trc_metrics *mt, int64_t c) {
  return ratio(2 * mt->true_pos[c], 2 * mt->true_pos[c] + mt->false_pos[c] + mt->false_neg[c]);
}

int64_t trc_metrics_support(const trc_metrics *mt, int64_t c) {
  return mt->true_pos[c] + mt->false_neg[c];
}

double trc_metrics_macro_f1(const trc_metrics *mt) {
  double sum = 0.0;
  int64_t present = 0;
  for (int64_t c = 0; c < mt->classes; c++) {
    if (mt->true_pos[c] + mt->false_pos[c] + mt->false_neg[c] == 0) continue;
    sum += trc_metrics_f1(mt, c);
    present++;
  }
  return present ? sum / (double)present : NAN;
}

/* Hugging Face's eval_f1 (evaluate's "f1", i.e. f1_score's default
 * average="binary" with pos_label 1) for two classes; macro beyond. */
double trc_metrics_task_f1(const trc_metrics *mt) {
  if (mt->examples == 0) return NAN;
  return mt->classes == 2 ? trc_metrics_f1(mt, 1) : trc_metrics_macro_f1(mt);
}

double trc_metrics_cross_entropy(const trc_metrics *mt) {
  return mt->examples ? mt->ce_sum / (double)mt->examples : NAN;
}
