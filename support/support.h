/* support.h — the base every compiler stage may use: memory, growable strings,
 * source files and diagnostics. It knows nothing about the model language.
 *
 * Diagnostics follow the compilers users know:
 *     file:line:col: error: message        (a place in a model or profile file)
 *       source line
 *           ^
 *     file: error: message                 (a whole file: one that cannot be
 *                                           read or written, a plan for it)
 *     trainc: error: message               (nowhere: a flag, the C compiler)
 * Every error of the compiler — stages, driver and the helpers here — is
 * reported through a Diag, and callers check diag_count() to decide whether
 * they may go on; nothing else prints errors. (The C compiler's own messages
 * are its output, not trainc's.) */
#ifndef TRAINC_SUPPORT_H
#define TRAINC_SUPPORT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- memory: abort with a message on exhaustion, never return NULL ---- */
void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xsprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Grow a (ptr, len, cap) array so that one more element fits. */
#define VEC_PUSH(ptr, len, cap, value)                                         \
  do {                                                                         \
    if ((len) == (cap)) {                                                      \
      (cap) = (cap) ? 2 * (cap) : 8;                                           \
      (ptr) = xrealloc((ptr), (size_t)(cap) * sizeof *(ptr));                  \
    }                                                                          \
    (ptr)[(len)++] = (value);                                                  \
  } while (0)

/* ---- names: a hash table from strings to ints ----
 * Open addressing; keys are not copied, so they must outlive the map. Name
 * lookups in a compiler must not be a scan: 80k names in a scope took 44 s
 * as a linear strcmp search. A zeroed NameMap is an empty one. */
typedef struct {
  const char **keys; /* NULL: an empty slot */
  int *values;
  size_t cap, len; /* cap: 0 or a power of two */
} NameMap;

/* True when key is present; *value (when value is not NULL) is its value. */
bool namemap_get(const NameMap *m, const char *key, int *value);
/* Adds key or replaces its value. */
void namemap_put(NameMap *m, const char *key, int value);
void namemap_free(NameMap *m);

/* ---- growable string ---- */
typedef struct {
  char *data; /* always NUL-terminated once anything was appended */
  size_t len, cap;
} StrBuf;

void sb_append(StrBuf *sb, const char *s);
void sb_appendn(StrBuf *sb, const char *s, size_t n);
void sb_printf(StrBuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_vprintf(StrBuf *sb, const char *fmt, va_list ap);
char *sb_take(StrBuf *sb); /* hands the string over; sb is empty afterwards */
void sb_free(StrBuf *sb);

/* The one size limit of a model: at most this many operations, counted in
 * the file as parsed (operators, calls, repeats) and in the graph as
 * lowered (every node, with defs inlined and repeats unrolled). Past it the
 * compiler stops with one located error; every later stage then stays
 * within IR_MAX_NODES (ir.h). */
#define TRAINC_MAX_OPS 1000000

/* ---- source files and locations ---- */
typedef struct Diag Diag;

typedef struct {
  char *path; /* as given by the user, used in messages */
  char *text; /* whole file, NUL-terminated */
  size_t len;
} SourceFile;

typedef struct {
  const SourceFile *file; /* NULL for locations that point nowhere */
  int line, col;          /* 1-based; col counts bytes */
} SrcLoc;

/* Model files are at most this long (real ones are kilobytes): a larger
 * file, or a FIFO or device (`trainc check /dev/zero`), is refused up front. */
#define MAX_SOURCE_BYTES (16 << 20)

/* Reads a whole regular file of at most MAX_SOURCE_BYTES; on failure reports
 * "path: error: ..." and returns NULL. */
SourceFile *source_read(const char *path, Diag *diag);
SourceFile *source_from_string(const char *path, const char *text);
void source_free(SourceFile *f);

/* ---- output files ---- */
/* True when both paths name one file: one device and inode (through links),
 * or for files not made yet, one name in one folder. */
bool same_file(const char *a, const char *b);
/* Checks before any work that `path` can take an output, by opening it: an
 * absent path is created and removed again, an existing regular file (or
 * symlink to one) opened for writing without truncating it; when `stream`, also
 * a character device or FIFO, written in place (-o /dev/stdout). A directory,
 * device node or socket is never written over. Reports through diag. */
bool output_path_ok(const char *path, bool stream, Diag *diag);
/* fopen(path, "w") that never blocks: a FIFO must have a reader already.
 * Reports through diag and returns NULL on failure. */
FILE *output_open(const char *path, Diag *diag);

/* ---- diagnostics ---- */
struct Diag {
  FILE *out;     /* where messages go (stderr by default) */
  int errors;    /* errors reported so far */
  int max_errors;/* stop reporting (but keep counting) past this many; 0 = 20 */
};

/* A location that points nowhere: the message starts "trainc: ". */
#define NO_LOC ((SrcLoc){0})

void diag_init(Diag *d, FILE *out);
void diag_error(Diag *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_verror(Diag *d, SrcLoc loc, const char *fmt, va_list ap);
/* An error about a whole file known by its path (NULL: nowhere). */
void diag_file_error(Diag *d, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_note(Diag *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A broken invariant of the compiler (a bug, not bad input), where no caller
 * can go on: "trainc: internal error: ..." on stderr, then abort(). */
_Noreturn void diag_internal_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int diag_count(const Diag *d) { return d->errors; }

/* ---- sizes ---- */
/* Formats a byte count the way plans show it: "64.0 MiB", "512 B". */
const char *format_bytes(uint64_t bytes, char buf[32]);
/* Reads "64MiB", "1.5GB", "4096" (bytes; units B KB MB GB KiB MiB GiB TiB, as
 * in model files). False unless the whole text is a whole number of bytes. */
bool parse_size(const char *text, uint64_t *bytes);

#endif
