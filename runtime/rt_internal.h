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

/* The library is built for the baseline ISA; on x86-64 its hot element loops
 * (the optimizer's, initialization's normal numbers) are also compiled for
 * AVX2 and AVX-512 and picked at load time. Each element is computed by the
 * same IEEE operations in every clone (no FMA contraction in ISO C mode, no
 * reductions), so results are bitwise the same. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TRC_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TRC_VECTOR_CLONES
#endif

/* Numbers [from, to) of stream `key` for initialization, each a pure
 * function of (key, index), vectorized (rng.c), into out[0, to - from):
 * (float)(mean + std·n) for normal numbers n; (float)(low + (high - low)·u)
 * for trc_rng_uniform's u (the same bits). */
void trc_rng_normals(uint64_t key, uint64_t from, uint64_t to, double mean, double std,
                     float *out);
void trc_rng_uniforms(uint64_t key, uint64_t from, uint64_t to, double low, double high,
                      float *out);

/* Independent random streams (rng.c keys). */
enum { TRC_STREAM_INIT = 1, TRC_STREAM_SHUFFLE = 2, TRC_STREAM_GRADCHECK = 3, TRC_STREAM_DROPOUT = 4,
       TRC_STREAM_SAMPLE = 5, TRC_STREAM_HOLDOUT = 6 };

/* Calls fn(ctx, i, from, to) for each parameter i with elements [from, to)
 * among floats [lo, hi) of the parameter region (model.c): a range of the
 * region cut into its parameters, as the threads' parts of it are. */
typedef void (*trc_param_part_fn)(void *ctx, int param, uint64_t from, uint64_t to);
void trc_param_parts(const trc_model *m, int64_t lo, int64_t hi, trc_param_part_fn fn,
                     void *ctx);
/* How many of the model's parameters are frozen (`freeze`); *floats: their
 * elements. */
int trc_frozen_params(const trc_model *m, uint64_t *floats);

/* Elements per example of an input: the product of dims[1..rank). */
uint64_t trc_input_example_elems(const trc_input *in);
/* Element i of an integer input's data (u8 or i32) set to v (data.c). */
void trc_store_index(const trc_input *in, unsigned char *data, uint64_t i, int32_t v);

/* Bytes of one element of a .npy / IDX array. */
size_t trc_elem_size(trc_elem_type elem);
/* Sets hdr->count and hdr->data_bytes from the dims (overflow checked). */
int trc_array_size(trc_array_header *hdr, trc_error *err);
/* Fails unless exactly hdr->data_bytes follow hdr->data_offset in `len`. */
int trc_array_check_payload(const trc_array_header *hdr, uint64_t len, trc_error *err);

/* The file input `name` is read from: the first of DIR/NAME.npy,
 * DIR/NAME.idx, DIR/NAME.idx.gz that exists (a dangling symlink counts, so
 * the read reports it). */
int trc_find_input_file(const char *dir, const char *name, char *path, size_t cap, trc_error *err);

/* An array file's header read piece by piece (data.c): its extent from its
 * first n bytes (more than n: read that many first; 0: not this format, the
 * parser says why), then parsed from exactly that many bytes, which sets
 * data_offset, count and data_bytes but checks nothing after it. */
uint64_t trc_npy_header_extent(const unsigned char *b, size_t n);
uint64_t trc_idx_header_extent(const unsigned char *b, size_t n);
int trc_npy_parse_header(const void *buf, size_t len, trc_array_header *hdr, trc_error *err);
int trc_idx_parse_header(const void *buf, size_t len, trc_array_header *hdr, trc_error *err);

/* "a directory", "a FIFO", ... for messages about a file's st_mode. */
const char *trc_file_kind(unsigned mode);

/* A file's content, read in order (file.c): a regular file, a gzip file (a
 * name ending in ".gz": inflated as it is read, every member's CRC and size
 * checked, trailing bytes refused), or a buffer in memory. A FIFO or device
 * is refused before it is opened, so nothing blocks on it. */
struct z_stream_s;
typedef struct {
  const char *path;
  int fd;                /* -1 for memory */
  const unsigned char *mem;
  uint64_t size;         /* bytes of the file (compressed, for gzip) or buffer */
  uint64_t pos;          /* content bytes read so far */
  struct z_stream_s *z;  /* gzip only */
  unsigned char *in;     /* gzip: compressed bytes read ahead */
  int done;              /* gzip: the last member has ended */
} trc_source;
int trc_source_open(trc_source *s, const char *path, trc_error *err);
void trc_source_memory(trc_source *s, const char *path, const void *buf, size_t len);
/* Reads up to n bytes; *got < n only at the end of the content. */
int trc_source_read(trc_source *s, void *buf, uint64_t n, uint64_t *got, trc_error *err);
/* The most content bytes the source can hold: its size, or for gzip what
 * deflate's largest ratio (1032:1) allows. */
uint64_t trc_source_max_size(const trc_source *s);
/* Fails unless the content ends here (for gzip: after the trailer). */
int trc_source_at_end(trc_source *s, trc_error *err);
void trc_source_close(trc_source *s);

/* Writes a file atomically: `write` fills the temp file; on any failure the
 * temp file is removed and `path` is left as it was. */
typedef int (*trc_write_fn)(FILE *f, const void *ctx, trc_error *err);
int trc_write_atomic(const char *path, trc_write_fn write, const void *ctx, trc_error *err);

/* Fails when a file could not be created at `path` (its directory is missing
 * or not writable): checked before training, not after. */
int trc_check_can_create(const char *path, trc_error *err);
/* Fails unless `path` can take an output. Atomic (stream 0): absent, a
 * regular file or a symlink (the rename replaces the name, never what a
 * device node or FIFO there would be). A stream (the log): absent, a regular
 * file, or a character device or FIFO, written in place (--log /dev/stdout).
 * Either way a new file's directory must be writable. */
int trc_check_output(const char *path, int stream, trc_error *err);
/* 1 when both paths name one file: the same device and inode (through
 * symlinks and hard links), or for files not made yet, the same name in the
 * same directory. */
int trc_same_file(const char *a, const char *b);
/* Opens a stream output for writing (after trc_check_output): a regular file
 * is truncated unless `append`; a FIFO must have a reader (never waited for).
 * Returns the descriptor, or -1. */
int trc_open_stream(const char *path, int append, trc_error *err);
/* Removes what interrupted atomic writes left in dir: the temp files
 * ".BASE.tmp-XXXXXX" whose BASE is_ours accepts. */
void trc_remove_temp_files(const char *dir, int (*is_ours)(const char *base, const void *ctx),
                           const void *ctx);
/* The same for the temp files of one output path. */
void trc_remove_temps_of(const char *path);

/* Non-finite values (finite.c): the index of the first NaN or infinity in
 * x[0..n), n when there is none; "nan", "inf" or "-inf". */
uint64_t trc_first_non_finite(const float *x, uint64_t n);
const char *trc_non_finite_name(float x);
/* Fails when a block laid out as the parameters (the parameters themselves,
 * their gradients, optimizer state) holds a non-finite value, naming the
 * parameter and element: "<what> 'fc1.weight' is nan at element 17", what
 * being e.g. "the gradient of parameter". */
int trc_check_block_finite(const trc_model *m, const float *block, const char *what,
                           trc_error *err);
/* The same for values[0..count), the block's floats [first, first + count). */
int trc_check_range_finite(const trc_model *m, const float *values, uint64_t first,
                           uint64_t count, const char *what, trc_error *err);

/* Seconds on a monotonic clock. */
double trc_now(void);
/* Seconds since the process started (to the 10 ms of Linux's /proc; without
 * /proc, since the runtime was loaded). */
double trc_process_seconds(void);

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
/* Skips one value of any kind (nested at most 64 deep). */
int trc_json_skip_value(trc_json *j, trc_error *err);
/* The same, giving the value's JSON text ("1.5", "false", "[1, 2]"). */
int trc_json_value_text(trc_json *j, const char **text, size_t *len, trc_error *err);
/* Length of the valid UTF-8 sequence at p (lead byte >= 0x80), 0 if invalid:
 * no overlong forms, no surrogates, nothing above U+10FFFF. */
size_t trc_utf8_sequence(const unsigned char *p, const unsigned char *end);
/* Writes code point cp as UTF-8 (1 to 4 bytes); returns the length. */
size_t trc_utf8_encode(char *out, uint32_t cp);

/* Text and tokens (tokenizer.c), shared with wordpiece.c. */
/* The code point at s[0..len) (valid UTF-8, checked before) and its length. */
uint32_t trc_utf8_decode(const unsigned char *s, size_t len, size_t *n);
/* Unicode's White_Space property. */
int trc_is_white_space(uint32_t cp);
/* Whether cp lies in one of n sorted, disjoint, inclusive ranges. */
int trc_in_ranges(uint32_t cp, const uint32_t (*r)[2], size_t n);
/* The id of the token with these bytes, or -1. */
int32_t trc_tokenizer_find(const trc_tokenizer *t, const unsigned char *s, size_t n);
/* BERT's WordPiece (wordpiece.c) over t's vocabulary: the ids of valid
 * UTF-8 text, appended to out. */
int trc_wordpiece_encode(const trc_tokenizer *t, const unsigned char *text, size_t len,
                         trc_tokens *out, trc_error *err);

/* ---- the train config, field by field (config.c) ---- */

#define TRC_CONFIG_COUNT_FIELD(kind, name, run, help) +1
enum { TRC_CONFIG_FIELDS = 0 TRC_TRAIN_CONFIG(TRC_CONFIG_COUNT_FIELD) };
typedef struct {
  const char *name, *help; /* the field's name and help line in TRC_TRAIN_CONFIG */
  const char *metavar;     /* what its flag's value looks like: "N", "X", "yes|no", ... */
  char flag[40];           /* its flag, without the dashes before it: "weight-decay" */
  int shapes_run;          /* its RUN column */
  char value[48];          /* the value as text, exact ("0.9", "adamw", "yes") */
} trc_config_field;
/* Every field of c, in the table's order. */
void trc_config_fields(const trc_train_config *c, trc_config_field out[TRC_CONFIG_FIELDS]);
/* Field number `field` of c from a flag's text, parsed by its kind and
 * checked against its range; messages name the flag (--FLAG). */
int trc_config_set(trc_train_config *c, int field, const char *flag, const char *text,
                   trc_error *err);

/* ---- the step schedule (steps.c) ---- */

typedef struct {
  int64_t examples, batch, accumulate; /* training rows (the same on every rank) */
  int rank, ranks;
  uint64_t seed;
  int64_t steps, epochs; /* steps > 0 wins; else epochs */
} trc_step_plan_spec;

typedef struct {
  int64_t batch, n, accumulate;
  int rank, ranks;
  uint64_t seed;
  int64_t batches_per_epoch; /* micro-batches of each rank: floor(n / (ranks * batch)) */
  int64_t steps_per_epoch;   /* ceil(batches_per_epoch / accumulate) */
  int64_t total_steps;
  int64_t *perm, perm_epoch; /* the order of epoch perm_epoch, computed on demand */
} trc_step_plan;

int trc_step_plan_init(trc_step_plan *p, const trc_step_plan_spec *s, trc_error *err);
void trc_step_plan_free(trc_step_plan *p);
/* Micro-batches of optimizer step `step` (0-based): accumulate, or fewer in
 * the last window of an epoch. */
int64_t trc_step_window(const trc_step_plan *p, int64_t step);
/* This rank's `batch` rows of micro-batch k of step `step`. */
const int64_t *trc_step_rows(trc_step_plan *p, int64_t step, int64_t k);
double trc_step_epochs(const trc_step_plan *p, int64_t steps_done);
int trc_step_ends_epoch(const trc_step_plan *p, int64_t steps_done);

/* ---- synchronization across ranks (sync.c) ---- */

typedef struct {
  const trc_model *model;
  int ranks;
  uint64_t count;           /* parameters (f32) */
  float *anchor, *momentum; /* outer optimizer: parameters after the last sync, Nesterov buffer */
  float *staging;           /* [parameters | optimizer state] when the state is averaged */
  int64_t syncs;            /* all-reduces of parameters or gradients (none with one rank) */
  uint64_t bytes;           /* their payload */
  double seconds;           /* time inside them */
} trc_sync;

int trc_sync_init(trc_sync *s, const trc_train_config *c, const trc_model *m, const char *arena,
                  const trc_optimizer *opt, trc_error *err);
void trc_sync_free(trc_sync *s);
/* 1 when step `step` (0-based) averages gradients (sync gradients, or within
 * local_sgd_warmup); its loss seed is then divided by the number of ranks. */
int trc_sync_gradient_step(const trc_train_config *c, int64_t step);
/* 1 when the parameters are averaged after `done` steps (every local_sgd
 * steps after the warm-up). */
int trc_sync_due(const trc_train_config *c, int64_t done);
/* Both end the job (trc_comm_abort) when this rank's gradients or parameters
 * are not finite, before the all-reduce would spread them. */
void trc_sync_gradients(trc_sync *s, float *grad);
/* The same in buckets: each (floats [first, first + n) of the gradients)
 * checked and started (non-blocking) as backward finishes it, then all
 * waited for; counted as one sync of every bucket's bytes. */
void trc_sync_gradients_start(trc_sync *s, float *bucket, uint64_t first, uint64_t n);
/* The check itself, for a device's values[0..count), floats [first, first +
 * count) of what it is about to sync. */
void trc_sync_stop_unless_finite(const trc_sync *s, const float *values, uint64_t first,
                                 uint64_t count, trc_check_what what);
void trc_sync_gradients_wait(trc_sync *s);
void trc_sync_parameters(trc_sync *s, const trc_train_config *c, float *params,
                         trc_optimizer *opt);
/* The smallest and largest of every rank's `mine` (exact below 2^53), by
 * one all-reduce. Collective. */
int trc_ranks_min_max(int64_t mine, int64_t *min, int64_t *max, trc_error *err);
/* The same for n values at once (one all-reduce of ranks x n numbers). */
int trc_ranks_min_max_n(const int64_t *mine, int n, int64_t *min, int64_t *max, trc_error *err);
/* 1 when trc_sync_parameters reads or writes anything (more than one rank,
 * or the outer optimizer's anchor). */
int trc_sync_changes_parameters(const trc_sync *s);
/* The outer optimizer's anchor becomes `params` (after synchronous steps). */
void trc_sync_restart_outer(trc_sync *s, const float *params);
/* The outer step's floats, as the run's config gives them. */
trc_outer_scalars trc_sync_outer_scalars(const trc_train_config *c);

/* ---- the runtime's side of the generated step() (step.c) ---- */

struct trc_step {
  const trc_model *model;
  char *arena;
  const trc_train_config *cfg;
  trc_step_plan *plan;
  const trc_dataset *train;
  trc_optimizer *optim;
  trc_sync *sync;
  int64_t step;        /* this optimizer step, 0-based */
  int rank, ranks;
  double lr;           /* this step's learning rate */
  int overlap;         /* bucketed all-reduces allowed (not --no-overlap) */
  int params_averaged; /* set by trc_step_average_parameters */
  int64_t labels;      /* with ignored labels: the window's labels that count, this */
  int64_t labels_all;  /* rank's and those the gradient averages over; -1 otherwise */
  double grad_norm;    /* the gradients' L2 norm before clipping (NaN until clipped) */
  float grad_scale;    /* what the update multiplies the gradients by (clipping; else 1) */
};

/* A device that updates the parameters itself (trc_device): the host's
 * parameters and optimizer state made current before the runtime reads them,
 * and the device told after the runtime wrote them. Nothing without one. */
void trc_device_host_current(const trc_model *m, char *arena, const trc_optimizer *o);
void trc_device_host_changed(const trc_model *m);

/* ---- resumable state (state.c) ---- */

/* What one evaluation found (eval.c). */
typedef struct {
  double value[TRC_EVAL_METRICS]; /* by TRC_EVAL_* */
  unsigned has;                   /* bit i: value[i] was computed */
  int64_t examples;
} trc_eval_result;

/* The best evaluation so far (best.c), for --load-best and --early-stopping. */
typedef struct {
  int metric;          /* TRC_EVAL_*: lower is better for eval_loss, higher otherwise */
  int64_t patience;    /* --early-stopping (0: never stop) */
  double threshold;    /* --early-stopping-threshold */
  float *weights;      /* --load-best: the best evaluation's parameters; else NULL */
  uint64_t count;      /* parameters (f32) */
  int64_t step;        /* the step of the best evaluation; 0: none yet */
  double value;        /* its metric */
  int64_t bad_evals;   /* evaluations since the last improvement beyond the threshold */
} trc_best;

int trc_best_init(trc_best *b, const trc_options *o, uint64_t count, trc_error *err);
void trc_best_free(trc_best *b);
/* After an evaluation at `step` of the parameters `params`. */
void trc_best_update(trc_best *b, const trc_eval_result *r, int64_t step, const float *params);
/* 1 when --early-stopping's patience has run out. */
int trc_best_stops(const trc_best *b);

typedef struct {
  const trc_model *model;
  char *arena;
  trc_optimizer *opt;
  trc_sync *sync;
  trc_best *best;          /* its counters and weights are saved too */
  int64_t step;            /* optimizer steps done */
  int in_sync;             /* the ranks hold the same parameters */
  int64_t keep;            /* --save-total-limit: states kept, 0: all */
  const char *fingerprint; /* what shapes the run; a state saved by another run is refused */
} trc_run_state;

/* Makes DIR if missing (its parent must exist) and checks it is writable:
 * before training, not at the first save. */
int trc_state_prepare(const char *dir, trc_error *err);
/* Writes DIR/state-STEP.rank-R.safetensors atomically, then (after every
 * rank has) removes this rank's older ones beyond the newest st->keep.
 * Collective: every rank calls it. */
int trc_state_save(const char *dir, const trc_run_state *st, trc_error *err);
/* Loads the newest step saved by every rank. Collective. */
int trc_state_load(const char *dir, trc_run_state *st, trc_error *err);

/* ---- ignored labels (labels.c): cross_entropy(..., ignore = L) ---- */
/* The input whose labels may be ignored (has_ignore), -1 if none. The model's
 * loss is then a sum over the labels that count, which the runtime divides
 * by their number. */
int trc_ignore_input(const trc_model *m);
/* Labels that count (not ignored) in rows[0..count) of ds. */
int64_t trc_count_labels(const trc_model *m, const trc_dataset *ds, const int64_t *rows,
                         int64_t count);
/* The same for the batch now in the arena's input slot. */
int64_t trc_count_labels_in_arena(const trc_model *m, const char *arena);
/* Fails when none of the `rows` examples of the ignored input's file at path
 * has a label that counts: nothing to train on or evaluate. */
int trc_check_labels_count(const trc_model *m, const unsigned char *labels, int64_t rows,
                           const char *path, trc_error *err);

/* ---- pieces of trc_main (train.c) ---- */

/* Fails, naming what differs, unless every rank has the same model,
 * settings, mode, kinds of files and initial weights (agree.c). Collective. */
int trc_ranks_agree(const trc_model *m, const trc_options *o, const char *arena, trc_error *err);

/* Checks every output path of the run (this rank's: --save and --log on
 * rank 0, --dump-step) before any work: writable, none an input, no two the
 * same file; then removes the temp files interrupted saves left (outputs.c). */
int trc_check_outputs(const trc_model *m, const trc_options *o, int rank, trc_error *err);

/* Evaluation state, allocated once: a row list for one batch, metrics, and
 * the sums reduced across ranks (EVAL_SUMS scalars, then 3 per class, then
 * the confusion matrix when the metrics keep one). */
enum { EVAL_SUMS = 6 };
typedef struct {
  int64_t *rows;
  double *sums;
  int classify; /* predict + labels exist: accuracy, F1, CE loss */
  trc_metrics metrics;
} trc_evaluator;

int trc_evaluator_init(trc_evaluator *ev, const trc_model *model, trc_error *err);
void trc_evaluator_free(trc_evaluator *ev);
/* forward() over ds in batches (the last one padded), the counts summed
 * over all ranks (each passes its own slice); labels must be in
 * [0, predict_classes) (see trc_check_labels). */
void trc_evaluate(trc_evaluator *ev, const trc_model *model, const trc_train_config *cfg,
                  char *arena, const trc_dataset *ds, trc_eval_result *out);
int trc_check_labels(const trc_model *model, const trc_dataset *ds, const char *what,
                     trc_error *err);
/* The per-class precision, recall, F1, support and the confusion matrix of
 * the metrics (report.c); nothing without a confusion matrix. */
void trc_report_classes(const trc_metrics *mt, FILE *out);

typedef struct {
  int64_t step; /* optimizer steps done */
  double epoch, loss, lr, examples_per_s, seconds;
  double grad_norm;   /* before clipping (under MPI, the mean over the ranks) */
  int64_t syncs;      /* cumulative, see trc_sync */
  uint64_t comm_bytes;
  double comm_seconds;
  int64_t page_faults; /* inside the steps since the last record (whole process) */
} trc_step_record;

typedef struct {
  FILE *f; /* NULL: no log */
  const char *path;
  int failed; /* a write failed (said once on stderr) */
  trc_tensorboard tb;  /* --tensorboard: the same numbers as scalars (opened by the
                          caller, before or after trc_log_open; closed with the log) */
  const char *group;   /* the record being written: "train", "eval", "memory" */
  int64_t step;
} trc_log;

/* append: continue a resumed run's log instead of truncating it. A regular
 * file, a character device or a FIFO with a reader (see trc_open_stream). */
int trc_log_open(trc_log *log, const char *path, int append, trc_error *err);
void trc_log_close(trc_log *log);
void trc_log_step(trc_log *log, const trc_step_record *r);
void trc_log_eval(trc_log *log, int64_t step, double epoch, const trc_eval_result *r);
void trc_log_memory(trc_log *log, int64_t step, uint64_t planned, uint64_t high_water);
/* The per-class report of the last evaluation (nothing without a confusion
 * matrix), and which evaluation --load-best restored. */
void trc_log_classes(trc_log *log, int64_t step, const trc_metrics *mt);
void trc_log_best(trc_log *log, int64_t step, const trc_best *best);

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

/* ---- memory checked before it is touched (memory.c) ---- */

/* Whether cfg's optimizer keeps moment arrays m and v (optim.c). */
int trc_optimizer_needs_m(const trc_train_config *cfg);
int trc_optimizer_needs_v(const trc_train_config *cfg);
/* What the run maps that is known before it starts (the arena, the
 * optimizer's moments, --load-best's copy, the outer optimizer's arrays)
 * against the memory this process may use (trc_memory.h); fails naming
 * both. No check when that memory cannot be read, or under
 * TRAINC_NO_MEMORY_CHECK=1. */
int trc_check_memory(const trc_model *m, const trc_options *o, trc_error *err);

/* ---- stopping on a signal (stop.c) ---- */

/* From now on SIGTERM, SIGINT and SIGUSR1 (unless ignored) are recorded,
 * not fatal, once: the first asks the training loop to stop after the step
 * in flight; the handler gives them back their actions from before (the
 * default: the end of the process), so a second one ends it at once. */
enum { TRC_STOP_SIGNALS = 3 };
void trc_stop_catch(void);
/* Their actions from before again (after the training loop). */
void trc_stop_release(void);
/* At a step boundary: the signal every rank stops on now, or 0. `votes` is
 * the ranks' tally, zeroed before the first call and left to these calls. */
int trc_stop_agreed(float votes[TRC_STOP_SIGNALS], int ranks);
/* "SIGTERM", ... */
const char *trc_stop_signal_name(int signo);

/* ---- GEMMs (gemm.c, gemm_bf16.c) ---- */
/* One trc_gemm call and its partition: `parts` parts per matrix, each a
 * block of rows of C (split_rows) or of its columns. batch: the number of
 * matrices, trc_gemm's batch * heads. */
typedef struct {
  int64_t batch, heads, m, n, k, parts;
  int ta, tb, split_rows;
  const float *a, *b;
  float *c;
  int64_t lda, ldb, ldc, stride_a, stride_b, stride_c;
  int64_t head_stride_a, head_stride_b, head_stride_c;
  float beta;
} trc_gemm_job;
/* The offset of matrix i, (i / heads, i % heads), of a trc_gemm operand. */
static inline int64_t trc_gemm_at(int64_t i, int64_t heads, int64_t stride, int64_t head_stride) {
  return i / heads * stride + i % heads * head_stride;
}
trc_precision trc_get_precision(void);
/* The job on oneDNN's bf16 matmul, the same parts on the trainer's threads. */
void trc_gemm_bf16(const trc_gemm_job *j);
/* The oneDNN primitive caches (gemm_bf16.c, conv.c): a zeroed new entry at
 * the end of *items (len entries of `size` bytes, room for *cap, doubled
 * when full); NULL when out of memory. */
void *trc_cache_append(void **items, int *len, int *cap, size_t size);
/* Bytes of trc_conv2d's workspace so far (oneDNN's scratchpads and the
 * per-block weight gradients): memory outside the arena (conv.c). */
uint64_t trc_conv_workspace_bytes(void);
/* f32 to bf16, rounded to nearest even (NaN stays NaN). */
uint16_t trc_to_bf16(float x);

#endif
