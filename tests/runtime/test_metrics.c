/* test_metrics.c — accuracy, macro-F1 and cross-entropy on a case worked
 * out by hand (the same numbers sklearn's f1_score(average="macro") gives). */
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
  /* every row: log(e^2 + 3) minus 2 when right, minus 0 when wrong */
  CHECK_NEAR(trc_metrics_cross_entropy(mt), log(exp(2.0) + 3.0) - 2.0 * 4.0 / 6.0, 1e-9);
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
  return test_finish("test_metrics");
}
