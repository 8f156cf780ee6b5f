/* rt_internal.h — helpers shared by the runtime's files; not installed. */
#ifndef TRAINC_RT_INTERNAL_H
#define TRAINC_RT_INTERNAL_H

#include "trainc_rt.h"

#include <stdarg.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the runtime writes f32 tensors as they lie in memory: little-endian hosts only"
#endif

/* Sets err->msg (err->where untouched) and returns -1. */
int trc_fail(trc_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sets err->where; returns -1 so callers can `return trc_fail_at(...)`. */
int trc_fail_at(trc_error *err, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sets err->where only; returns -1. */
int trc_set_where(trc_error *err, const char *where);
void trc_error_clear(trc_error *err);
/* "where: error: msg" (or "trainer: error: msg") on stderr. */
void trc_report(const trc_error *err);

/* Overflow-checked size arithmetic: 1 when the result fits. */
static inline int trc_mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline int trc_add_ok(uint64_t a, uint64_t b, uint64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}

/* Independent random streams (rng.c keys). */
enum { TRC_STREAM_INIT = 1, TRC_STREAM_SHUFFLE = 2, TRC_STREAM_GRADCHECK = 3, TRC_STREAM_DROPOUT = 4,
       TRC_STREAM_SAMPLE = 5 };

/* Elements per example of an input: the product of dims[1..rank). */
uint64_t trc_input_example_elems(const trc_input *in);

/* Bytes of one element of a .npy / IDX array. */
size_t trc_elem_size(trc_elem_type elem);
/* Sets hdr->count and hdr->data_bytes from the dims and checks that exactly
 * that many bytes follow hdr->data_offset in a buffer of `len` bytes. */
int trc_array_check_payload(trc_array_header *hdr, size_t len, trc_error *err);

/* Writes a file atomically: `write` fills the temp file; on any failure the
 * temp file is removed and `path` is left as it was. */
typedef int (*trc_write_fn)(FILE *f, const void *ctx, trc_error *err);
int trc_write_atomic(const char *path, trc_write_fn write, const void *ctx, trc_error *err);

/* Fails when a file could not be created at `path` (its directory is missing
 * or not writable): checked before training, not after. */
int trc_check_can_create(const char *path, trc_error *err);

/* Seconds on a monotonic clock. */
double trc_now(void);

/* JSON text helpers (json.c). */
void trc_json_write_number(FILE *f, double x);      /* %.9g, null if not finite */
void trc_json_write_string(FILE *f, const char *s); /* quoted and escaped */

/* A strict pull reader: each call skips whitespace, then reads one token.
 * Failures name what was expected and the byte offset. */
typedef struct {
  const char *p, *end, *start;
} trc_json;
void trc_json_init(trc_json *j, const char *text, size_t len);
int trc_json_accept(trc_json *j, char c); /* 1 if c was next (consumed) */
int trc_json_expect(trc_json *j, char c, trc_error *err);
int trc_json_string(trc_json *j, char **out, trc_error *err); /* malloc'ed, no NUL inside */
int trc_json_u64(trc_json *j, uint64_t *out, trc_error *err);
int trc_json_at_end(trc_json *j);
int trc_json_fail(trc_json *j, trc_error *err, const char *expected);

/* ---- pieces of trc_main (train.c) ---- */

typedef struct {
  double loss, accuracy, f1;
  int has_loss, has_accuracy, has_f1;
  int64_t examples;
} trc_eval_result;

/* Evaluation state, allocated once: a row list for one batch and metrics. */
typedef struct {
  int64_t *rows;
  int classify; /* predict + labels exist: accuracy, F1, CE loss */
  trc_metrics metrics;
} trc_evaluator;

int trc_evaluator_init(trc_evaluator *ev, const trc_model *model, trc_error *err);
void trc_evaluator_free(trc_evaluator *ev);
/* forward() over ds in batches (the last one padded); labels must be in
 * [0, predict_classes) (see trc_check_labels). */
void trc_evaluate(trc_evaluator *ev, const trc_model *model, const trc_train_config *cfg,
                  char *arena, const trc_dataset *ds, trc_eval_result *out);
int trc_check_labels(const trc_model *model, const trc_dataset *ds, const char *what,
                     trc_error *err);

typedef struct {
  int64_t step; /* optimizer steps done */
  double epoch, loss, lr, examples_per_s, seconds;
} trc_step_record;

typedef struct {
  FILE *f; /* NULL: no log */
} trc_log;

int trc_log_open(trc_log *log, const char *path, trc_error *err);
void trc_log_close(trc_log *log);
void trc_log_step(trc_log *log, const trc_step_record *r);
void trc_log_eval(trc_log *log, int64_t step, double epoch, const trc_eval_result *r);

typedef struct {
  int64_t total;
  int quiet, tty, drawn;
  double last_draw;
} trc_progress;

void trc_progress_init(trc_progress *p, int64_t total, int quiet);
/* `done` steps of total; log_point: this step is logged (non-terminal output
 * prints only then). */
void trc_progress_update(trc_progress *p, int64_t done, double loss, double per_s, double eta,
                         int log_point);
/* Ends a redrawn line before other output. */
void trc_progress_break(trc_progress *p);

#endif
