/* error.c — how the runtime reports failures: a trc_error filled where the
 * problem is found, printed once by whoever gives up. */
#include "rt_core.h"

#include <stdio.h>
#include <string.h>

void trc_error_clear(trc_error *err) {
  err->where[0] = '\0';
  err->msg[0] = '\0';
}

int trc_fail(trc_error *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  return -1;
}

int trc_fail_at(trc_error *err, const char *where, const char *fmt, ...) {
  snprintf(err->where, sizeof err->where, "%s", where);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  return -1;
}

int trc_set_where(trc_error *err, const char *where) {
  snprintf(err->where, sizeof err->where, "%s", where);
  return -1;
}

void trc_report(const trc_error *err) {
  fprintf(stderr, "%s: error: %s\n", err->where[0] ? err->where : "trainer", err->msg);
}
