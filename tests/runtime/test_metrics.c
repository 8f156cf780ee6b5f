/* test_metrics.c — accuracy, F1 (macro, binary, and Hugging Face's eval_f1
 * choosing between them), per-class precision / recall, the confusion
 * matrix and cross-entropy on cases worked out by hand (the numbers
 * sklearn's f1_score, precision_score, recall_score and confusion_matrix
 * give). */
#include "test_util.h"

#include <stdint.h>

/* 4 classes; class 3 never occurs and must not count in the macro average.
 * labels 0 0 1 1 2 2, predictions 0 1 1 1 0 2:
 *   class 0: tp 1 fp 1 fn 1 -> F1 2/4;  class 1: tp 2 fp 1 fn 0 -> 4/5;
 *   class 2: tp 1 fp 0 fn 1 -> 2/3.     macro F1 = (1/2 + 4/5 + 2/3) / 3. */
static const int predictions[6] = {0, 1, 1, 1, 0, 2};

static void make_logits(float *logits) {
  memset(logits, 0, 6 * 4 * sizeof(float));
  for (int r = 0; r < 6; r++) logits[4 * r + predictions[r]] = 2.0f;
}

static void check_case(const trc_metrics *mt) {
  CHECK(mt->examples == 6 && mt->correct == 4);
  CHECK_NEAR(trc_metrics_accuracy(mt), 4.0 / 6.0, 1e-12);
  CHECK_NEAR(trc_metrics_macro_f1(mt), (0.5 + 0.8 + 2.0 / 3.0) / 3.0, 1e-12);
  CHECK_NEAR(trc_metrics_task_f1(mt), (0.5 + 0.8 + 2.0 / 3.0) / 3.0, 1e-12); /* 4 classes */
  /* class 1: precision 2/3, recall 2/2; class 3: nothing, so 0 (zero_division) */
  CHECK_NEAR(trc_metrics_precision(mt, 1), 2.0 / 3.0, 1e-12);
  CHECK_NEAR(trc_metrics_recall(mt, 1), 1.0, 1e-12);
  CHECK_NEAR(trc_metrics_recall(mt, 0), 0.5, 1e-12);
  CHECK(trc_metrics_precision(mt, 3) == 0 && trc_metrics_recall(mt, 3) == 0 &&
        trc_metrics_f1(mt, 3) == 0 && trc_metrics_support(mt, 3) == 0);
  CHECK(trc_metrics_support(mt, 0) == 2 && trc_metrics_support(mt, 2) == 2);
  /* rows: the label, columns: the prediction */
  static const int64_t matrix[16] = {1, 1, 0, 0, /**/ 0, 2, 0, 0, /**/ 1, 0, 1, 0, /**/ 0, 0, 0, 0};
  CHECK(memcmp(mt->confusion, matrix, sizeof matrix) == 0);
  /* every row: log(e^2 + 3) minus 2 when right, minus 0 when wrong */
  CHECK_NEAR(trc_metrics_cross_entropy(mt), log(exp(2.0) + 3.0) - 2.0 * 4.0 / 6.0, 1e-9);
}

/* Two classes (MRPC-style): eval_f1 is class 1's F1, not the macro mean.
 * labels 1 1 1 1 0 0, predictions 1 1 0 0 1 0: class 1 tp 2 fp 1 fn 2 ->
 * F1 4/7; class 0 tp 1 fp 2 fn 1 -> 2/5; macro 0.4857... */
static void test_binary(void) {
  const int32_t labels[6] = {1, 1, 1, 1, 0, 0};
  const int pred[6] = {1, 1, 0, 0, 1, 0};
  float logits[12] = {0};
  trc_metrics mt;
  trc_error err;
  for (int r = 0; r < 6; r++) logits[2 * r + pred[r]] = 1.0f;
  CHECK(trc_metrics_init(&mt, 2, &err) == 0);
  CHECK(isnan(trc_metrics_task_f1(&mt)));
  trc_metrics_add(&mt, logits, labels, TRC_I32, 6);
  CHECK_NEAR(trc_metrics_f1(&mt, 1), 4.0 / 7.0, 1e-12);
  CHECK_NEAR(trc_metrics_task_f1(&mt), 4.0 / 7.0, 1e-12);
  CHECK_NEAR(trc_metrics_macro_f1(&mt), (4.0 / 7.0 + 0.4) / 2.0, 1e-12);
  CHECK_NEAR(trc_metrics_precision(&mt, 1), 2.0 / 3.0, 1e-12);
  CHECK_NEAR(trc_metrics_recall(&mt, 1), 0.5, 1e-12);
  static const int64_t matrix[4] = {1, 1, 2, 2};
  CHECK(memcmp(mt.confusion, matrix, sizeof matrix) == 0);
  trc_metrics_free(&mt);
}

/* A vocabulary-sized output keeps the per-class counts but no matrix. */
static void test_many_classes(void) {
  trc_metrics mt;
  trc_error err;
  CHECK(trc_metrics_init(&mt, TRC_CONFUSION_MAX_CLASSES + 1, &err) == 0 && !mt.confusion);
  float logits[TRC_CONFUSION_MAX_CLASSES + 1] = {0};
  const int32_t label = 5;
  logits[5] = 1.0f;
  trc_metrics_add(&mt, logits, &label, TRC_I32, 1);
  CHECK(mt.correct == 1 && trc_metrics_task_f1(&mt) == 1.0);
  trc_metrics_free(&mt);
  CHECK(trc_metrics_init(&mt, TRC_CONFUSION_MAX_CLASSES, &err) == 0 && mt.confusion);
  trc_metrics_free(&mt);
}

/* The chunked loss head's rows (each row's loss and argmax, computed as
 * evaluation computes them from logits) count exactly as the logits do;
 * -100 is an ignored label, whose row loss the head leaves at 0. */
static void test_rows(void) {
  enum { ROWS = 12, CLASSES = 5 };
  const int32_t labels[ROWS] = {0, 4, 2, -100, 1, 1, 3, 0, -100, 2, 4, 4};
  float logits[ROWS * CLASSES], row_loss[ROWS], argmax[ROWS];
  uint64_t key = trc_rng_key(7, 0, 0);
  for (int i = 0; i < ROWS * CLASSES; i++) logits[i] = (float)trc_rng_normal(key, (uint64_t)i);
  for (int r = 0; r < ROWS; r++) {
    const float *x = logits + r * CLASSES;
    row_loss[r] = labels[r] < 0 ? 0.0f : (float)trc_cross_entropy_row(x, CLASSES, labels[r]);
    argmax[r] = (float)trc_argmax_row(x, CLASSES);
  }
  trc_metrics a, b;
  trc_error err;
  CHECK(trc_metrics_init(&a, CLASSES, &err) == 0 && trc_metrics_init(&b, CLASSES, &err) == 0);
  trc_metrics_add(&a, logits, labels, TRC_I32, ROWS);
  trc_metrics_add_rows(&b, row_loss, argmax, labels, TRC_I32, 7); /* in two parts */
  trc_metrics_add_rows(&b, row_loss + 7, argmax + 7, labels + 7, TRC_I32, ROWS - 7);
  const size_t per_class = CLASSES * sizeof(int64_t);
  CHECK(a.examples == ROWS - 2 && a.correct > 0 && a.correct < a.examples); /* both kinds */
  CHECK(b.examples == a.examples && b.correct == a.correct);
  CHECK(memcmp(a.true_pos, b.true_pos, per_class) == 0 &&
        memcmp(a.false_pos, b.false_pos, per_class) == 0 &&
        memcmp(a.false_neg, b.false_neg, per_class) == 0 &&
        memcmp(a.confusion, b.confusion, per_class * CLASSES) == 0);
  CHECK_NEAR(b.ce_sum, a.ce_sum, 1e-5 * a.ce_sum); /* the row losses are floats */
  trc_metrics_free(&a);
  trc_metrics_free(&b);
}

int main(void) {
  float logits[24];
  const int32_t labels[6] = {0, 0, 1, 1, 2, 2};
  const uint8_t labels_u8[6] = {0, 0, 1, 1, 2, 2};
  trc_metrics mt;
  trc_error err;
  make_logits(logits);
  CHECK(trc_metrics_init(&mt, 4, &err) == 0);
  trc_metrics_add(&mt, logits, labels, TRC_I32, 4); /* in two parts, as batches arrive */
  trc_metrics_add(&mt, logits + 16, labels + 4, TRC_I32, 2);
  check_case(&mt);
  trc_metrics_reset(&mt);
  CHECK(mt.examples == 0 && isnan(trc_metrics_accuracy(&mt)) && isnan(trc_metrics_macro_f1(&mt)));
  trc_metrics_add(&mt, logits, labels_u8, TRC_U8, 6);
  check_case(&mt);

  /* ties go to the first class, as argmax does; large logits stay finite */
  trc_metrics_reset(&mt);
  const float tied[4] = {1000.0f, 1000.0f, -1000.0f, 0.0f};
  const int32_t zero = 0;
  trc_metrics_add(&mt, tied, &zero, TRC_I32, 1);
  CHECK(mt.correct == 1);
  CHECK_NEAR(trc_metrics_cross_entropy(&mt), log(2.0), 1e-9);
  CHECK_NEAR(trc_metrics_macro_f1(&mt), 1.0, 0);
  trc_metrics_free(&mt);
  test_binary();
  test_many_classes();
  test_rows();
  return test_finish("test_metrics");
}
