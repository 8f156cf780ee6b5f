/* report.c — the per-class report after a run's last evaluation, as
 * scikit-learn's classification_report and confusion_matrix print them:
 * precision, recall, F1 and support of every class, then the matrix (rows:
 * the true class, columns: the predicted one). Models with more than
 * TRC_CONFUSION_MAX_CLASSES classes (a language model's vocabulary) get
 * neither: a table of thousands of rows is not a report. */
#include "rt_io.h"

#include <inttypes.h>

void trc_report_classes(const trc_metrics *mt, FILE *out) {
  if (!mt->confusion || mt->examples == 0) return;
  const int64_t k = mt->classes;
  fprintf(out, "per class (last evaluation, %" PRId64 " predictions):\n", mt->examples);
  fprintf(out, "  %5s %9s %9s %9s %9s\n", "class", "precision", "recall", "f1", "support");
  for (int64_t c = 0; c < k; c++)
    fprintf(out, "  %5" PRId64 " %9.4f %9.4f %9.4f %9" PRId64 "\n", c,
            trc_metrics_precision(mt, c), trc_metrics_recall(mt, c), trc_metrics_f1(mt, c),
            trc_metrics_support(mt, c));
  fprintf(out, "confusion matrix (rows: true class, columns: predicted):\n  %5s", "");
  for (int64_t c = 0; c < k; c++) fprintf(out, " %6" PRId64, c);
  for (int64_t t = 0; t < k; t++) {
    fprintf(out, "\n  %5" PRId64, t);
    for (int64_t c = 0; c < k; c++) fprintf(out, " %6" PRId64, mt->confusion[t * k + c]);
  }
  fputc('\n', out);
}
