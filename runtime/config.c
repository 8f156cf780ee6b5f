/* config.c — a train config field by field, walked from the one table of its
 * fields (TRC_TRAIN_CONFIG in trainc.h): what --help lists as the compiled
 * defaults and what a resumable state's fingerprint records. */
#include "rt_internal.h"

#include <stdlib.h>
#include <string.h>

/* Numbers in the shortest of %.15g and %.17g that reads back exactly: "0.9",
 * not "0.90000000000000002", and never a rounded value. */
static void text_F64(char *buf, size_t n, double v) {
  snprintf(buf, n, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, n, "%.17g", v);
}
static void text_I64(char *buf, size_t n, int64_t v) { snprintf(buf, n, "%lld", (long long)v); }
static void text_U64(char *buf, size_t n, uint64_t v) {
  snprintf(buf, n, "%llu", (unsigned long long)v);
}
static void text_BOOL(char *buf, size_t n, int v) { snprintf(buf, n, "%s", v ? "yes" : "no"); }
static void text_OPTIMIZER(char *buf, size_t n, trc_optimizer_kind v) {
  static const char *const words[] = {TRC_OPTIMIZERS(TRC_ENUM_WORD)};
  snprintf(buf, n, "%s", words[v]);
}
static void text_SCHEDULE(char *buf, size_t n, trc_schedule_kind v) {
  static const char *const words[] = {TRC_SCHEDULES(TRC_ENUM_WORD)};
  snprintf(buf, n, "%s", words[v]);
}
static void text_PRECISION(char *buf, size_t n, trc_precision v) {
  static const char *const words[] = {TRC_PRECISIONS(TRC_ENUM_WORD)};
  snprintf(buf, n, "%s", words[v]);
}
static void text_METRICS(char *buf, size_t n, unsigned v) {
  snprintf(buf, n, "%s%s%s", v & TRC_METRIC_LOSS ? "loss," : "",
           v & TRC_METRIC_ACCURACY ? "accuracy," : "", v & TRC_METRIC_F1 ? "f1," : "");
  size_t len = strlen(buf);
  if (len > 0) buf[len - 1] = '\0'; /* the last comma */
}

void trc_config_fields(const trc_train_config *c, trc_config_field out[TRC_CONFIG_FIELDS]) {
  trc_config_field *f = out;
#define FIELD(kind, field, run, text)                                                              \
  *f = (trc_config_field){.name = #field, .help = text, .shapes_run = run};                       \
  text_##kind(f->value, sizeof f->value, c->field);                                               \
  f++;
  TRC_TRAIN_CONFIG(FIELD)
#undef FIELD
}
