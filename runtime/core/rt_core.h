/* rt_core.h — the base the runtime's folders stand on: errors, checked
 * size arithmetic, random streams, the model descriptor's facts, files
 * (read as streams, written atomically), finiteness, JSON and UTF-8, the
 * train config field by field. Not installed. */
#ifndef TRAINC_RT_CORE_H
#define TRAINC_RT_CORE_H

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
 * (the optimizer's, initialization's normal numbers, the gradients' norm)
 * are also compiled for AVX2 and AVX-512 and picked at load time. Each
 * element is computed by the same IEEE operations in every clone (no FMA
 * contraction in ISO C mode; the norm's sum is written out lane by lane,
 * an order no clone changes), so results are bitwise the same. */
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

#endif
