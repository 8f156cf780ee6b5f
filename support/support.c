/* support.c — memory, strings, source files, diagnostics (see support.h). */
#include "support.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* No caller can go on from here, so the report goes to stderr. */
static void out_of_memory(size_t n) {
  Diag d;
  diag_init(&d, stderr);
  diag_error(&d, NO_LOC, "out of memory (asked for %zu bytes)", n);
  exit(2);
}

void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) out_of_memory(n);
  return p;
}

void *xcalloc(size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p) out_of_memory(count * size);
  return p;
}

void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) out_of_memory(n);
  return q;
}

char *xstrndup(const char *s, size_t n) {
  char *p = xmalloc(n + 1);
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

char *xstrdup(const char *s) { return xstrndup(s, strlen(s)); }

char *xsprintf(const char *fmt, ...) {
  StrBuf sb = {0};
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(&sb, fmt, ap);
  va_end(ap);
  return sb_take(&sb);
}

/* ---- names ---- */

static size_t name_hash(const char *s) { /* FNV-1a */
  uint64_t h = 14695981039346656037ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return (size_t)h;
}

/* The slot of key, or the empty slot where it would go. */
static size_t name_slot(const NameMap *m, const char *key) {
  size_t i = name_hash(key) & (m->cap - 1);
  while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & (m->cap - 1);
  return i;
}

bool namemap_get(const NameMap *m, const char *key, int *value) {
  if (m->cap == 0) return false;
  size_t i = name_slot(m, key);
  if (!m->keys[i]) return false;
  if (value) *value = m->values[i];
  return true;
}

/* Doubles the table (kept at most half full, so probes stay short). */
static void namemap_grow(NameMap *m) {
  NameMap bigger = {.cap = m->cap ? 2 * m->cap : 16, .len = m->len};
  bigger.keys = xcalloc(bigger.cap, sizeof *bigger.keys);
  bigger.values = xmalloc(bigger.cap * sizeof *bigger.values);
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t j = name_slot(&bigger, m->keys[i]);
    bigger.keys[j] = m->keys[i];
    bigger.values[j] = m->values[i];
  }
  namemap_free(m);
  *m = bigger;
}

void namemap_put(NameMap *m, const char *key, int value) {
  if (2 * (m->len + 1) > m->cap) namemap_grow(m);
  size_t i = name_slot(m, key);
  if (!m->keys[i]) m->keys[i] = key, m->len++;
  m->values[i] = value;
}

void namemap_free(NameMap *m) {
  free(m->keys);
  free(m->values);
  *m = (NameMap){0};
}

static void sb_reserve(StrBuf *sb, size_t extra) {
  if (sb->len + extra + 1 <= sb->cap) return;
  size_t cap = sb->cap ? sb->cap : 64;
  while (cap < sb->len + extra + 1) cap *= 2;
  sb->data = xrealloc(sb->data, cap);
  sb->cap = cap;
}

void sb_appendn(StrBuf *sb, const char *s, size_t n) {
  sb_reserve(sb, n);
  memcpy(sb->data + sb->len, s, n);
  sb->len += n;
  sb->data[sb->len] = '\0';
}

void sb_append(StrBuf *sb, const char *s) { sb_appendn(sb, s, strlen(s)); }

void sb_vprintf(StrBuf *sb, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return;
  sb_reserve(sb, (size_t)n);
  vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
  sb->len += (size_t)n;
}

void sb_printf(StrBuf *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(sb, fmt, ap);
  va_end(ap);
}

char *sb_take(StrBuf *sb) {
  char *s = sb->data ? sb->data : xstrdup("");
  sb->data = NULL;
  sb->len = sb->cap = 0;
  return s;
}

void sb_free(StrBuf *sb) {
  free(sb->data);
  sb->data = NULL;
  sb->len = sb->cap = 0;
}

SourceFile *source_from_string(const char *path, const char *text) {
  SourceFile *f = xcalloc(1, sizeof *f);
  f->path = xstrdup(path);
  f->len = strlen(text);
  f->text = xstrndup(text, f->len);
  return f;
}

/* "a directory", "a FIFO", ... for messages about what a path is. */
static const char *file_kind(mode_t mode) {
  return S_ISDIR(mode)    ? "a directory"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISSOCK(mode) ? "a socket"
                          : "not a regular file";
}

/* Opens a regular file no larger than `limit` for reading. A FIFO or device
 * is refused before open() could block on it or read it without end. */
static FILE *open_regular(const char *path, off_t limit, Diag *diag) {
  struct stat st;
  char b[32];
  if (stat(path, &st) != 0) {
    diag_file_error(diag, path, "cannot open: %s", strerror(errno));
    return NULL;
  }
  if (!S_ISREG(st.st_mode)) {
    diag_file_error(diag, path, "not a regular file (%s)", file_kind(st.st_mode));
    return NULL;
  }
  if (st.st_size > limit) {
    diag_file_error(diag, path, "%lld bytes; a model file may be at most %s", (long long)st.st_size,
                    format_bytes((uint64_t)limit, b));
    return NULL;
  }
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  FILE *fp = fd < 0 ? NULL : fdopen(fd, "rb");
  if (!fp) {
    diag_file_error(diag, path, "cannot open: %s", strerror(errno));
    if (fd >= 0) close(fd);
  }
  return fp;
}

SourceFile *source_read(const char *path, Diag *diag) {
  FILE *fp = open_regular(path, MAX_SOURCE_BYTES, diag);
  if (!fp) return NULL;
  StrBuf sb = {0};
  char chunk[65536];
  size_t n;
  while (sb.len <= MAX_SOURCE_BYTES && (n = fread(chunk, 1, sizeof chunk, fp)) > 0)
    sb_appendn(&sb, chunk, n);
  bool failed = ferror(fp), grew = sb.len > MAX_SOURCE_BYTES;
  fclose(fp);
  if (failed || grew) {
    diag_file_error(diag, path, "%s", grew ? "grew past the size limit while being read" : "cannot read");
    sb_free(&sb);
    return NULL;
  }
  SourceFile *f = xcalloc(1, sizeof *f);
  f->path = xstrdup(path);
  f->len = sb.len;
  f->text = sb_take(&sb);
  return f;
}

/* ---- output files ---- */

static void folder_of(const char *path, char *out, size_t cap) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    snprintf(out, cap, ".");
  else
    snprintf(out, cap, "%.*s", (int)(slash == path ? 1 : slash - path), path);
}

static bool same_inode(const struct stat *x, const struct stat *y) {
  return x->st_dev == y->st_dev && x->st_ino == y->st_ino;
}

bool same_file(const char *a, const char *b) {
  struct stat x, y;
  bool has_a = stat(a, &x) == 0, has_b = stat(b, &y) == 0;
  if (has_a || has_b) return has_a && has_b && same_inode(&x, &y);
  const char *na = strrchr(a, '/') ? strrchr(a, '/') + 1 : a;
  const char *nb = strrchr(b, '/') ? strrchr(b, '/') + 1 : b;
  char fa[4096], fb[4096];
  folder_of(a, fa, sizeof fa);
  folder_of(b, fb, sizeof fb);
  return !strcmp(na, nb) && stat(fa, &x) == 0 && stat(fb, &y) == 0 && same_inode(&x, &y);
}

bool output_path_ok(const char *path, bool stream, Diag *diag) {
  struct stat st;
  char folder[4096];
  if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
    if (stream && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) return true;
    diag_file_error(diag, path, "refusing to write over %s", file_kind(st.st_mode));
    return false;
  }
  /* Opening is the one sure test: access() says yes to root in a folder
   * such as /sys, where creating a file then fails (and the linker said so
   * only after a whole compile). An existing file is opened without O_TRUNC,
   * so it stays as it is; an absent one is created and removed. */
  bool exists = stat(path, &st) == 0, dangling = !exists && lstat(path, &st) == 0;
  folder_of(path, folder, sizeof folder);
  if (dangling) { /* a symlink to nothing yet: writing creates its target, elsewhere */
    if (access(folder, W_OK | X_OK) == 0) return true;
    diag_file_error(diag, path, "cannot create (folder %s): %s", folder, strerror(errno));
    return false;
  }
  int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | (exists ? 0 : O_CREAT | O_EXCL), 0666);
  if (fd >= 0) {
    close(fd);
    if (!exists) unlink(path);
    return true;
  }
  if (exists) {
    diag_file_error(diag, path, "cannot write: %s", strerror(errno));
    return false;
  }
  diag_file_error(diag, path, "cannot create (folder %s): %s", folder, strerror(errno));
  return false;
}

FILE *output_open(const char *path, Diag *diag) {
  int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0666);
  struct stat st;
  FILE *f = NULL;
  if (fd >= 0 && fstat(fd, &st) == 0 && (!S_ISREG(st.st_mode) || ftruncate(fd, 0) == 0)) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    f = fdopen(fd, "w");
  }
  if (f) return f;
  int e = errno;
  if (fd >= 0) close(fd);
  diag_file_error(diag, path, "cannot write: %s", e == ENXIO ? "a FIFO that no process reads" : strerror(e));
  return NULL;
}

void source_free(SourceFile *f) {
  if (!f) return;
  free(f->path);
  free(f->text);
  free(f);
}

void diag_init(Diag *d, FILE *out) {
  d->out = out ? out : stderr;
  d->errors = 0;
  d->max_errors = 20;
}

enum { CARET_CONTEXT = 100 }; /* bytes shown on each side of the caret */

/* Prints the source line of loc and a caret under its column. Tabs are kept
 * so that the caret lines up in a terminal; other control bytes print as
 * '?'. Of a long line only CARET_CONTEXT bytes each side of the column show,
 * cut ends marked "...". Both lines go out in one write from a buffer on the
 * stack (stderr is unbuffered: byte by byte, the caret of a 1 MB line was
 * a million write calls; and out of memory reports through here too). */
static void print_caret(FILE *out, SrcLoc loc) {
  if (!loc.file || loc.line < 1) return;
  const char *p = loc.file->text, *end = p + loc.file->len;
  for (int line = 1; line < loc.line && p < end; line++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    p = nl ? nl + 1 : end;
  }
  const char *eol = memchr(p, '\n', (size_t)(end - p));
  if (!eol) eol = end;
  const char *at = loc.col - 1 < eol - p ? p + loc.col - 1 : eol;
  const char *from = at - p > CARET_CONTEXT ? at - CARET_CONTEXT : p;
  const char *to = eol - at > CARET_CONTEXT ? at + CARET_CONTEXT : eol;
  char buf[4 * CARET_CONTEXT + 32], *b = buf;
  b += sprintf(b, "%s", from > p ? "  ..." : "  ");
  for (const char *q = from; q < to; q++) *b++ = *q == '\t' || (unsigned char)*q >= 0x20 ? *q : '?';
  b += sprintf(b, "%s", to < eol ? "...\n  " : "\n  ");
  if (from > p) b += sprintf(b, "   ");
  for (const char *q = from; q < at; q++) *b++ = *q == '\t' ? '\t' : ' ';
  b += sprintf(b, "^\n");
  fwrite(buf, 1, (size_t)(b - buf), out);
}

/* The one place messages are formatted: at loc when it points into a file,
 * else at path (a whole file), else at "trainc". */
static void report(Diag *d, SrcLoc loc, const char *path, const char *kind, const char *fmt, va_list ap) {
  if (loc.file)
    fprintf(d->out, "%s:%d:%d: %s: ", loc.file->path, loc.line, loc.col, kind);
  else
    fprintf(d->out, "%s: %s: ", path ? path : "trainc", kind);
  vfprintf(d->out, fmt, ap);
  fputc('\n', d->out);
  print_caret(d->out, loc);
}

static void count_error(Diag *d, SrcLoc loc, const char *path, const char *fmt, va_list ap) {
  d->errors++;
  int limit = d->max_errors > 0 ? d->max_errors : 20;
  if (d->errors <= limit) report(d, loc, path, "error", fmt, ap);
  else if (d->errors == limit + 1)
    fprintf(d->out, "trainc: too many errors, stopping here\n");
}

void diag_verror(Diag *d, SrcLoc loc, const char *fmt, va_list ap) { count_error(d, loc, NULL, fmt, ap); }

void diag_file_error(Diag *d, const char *path, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  count_error(d, NO_LOC, path, fmt, ap);
  va_end(ap);
}

void diag_error(Diag *d, SrcLoc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_verror(d, loc, fmt, ap);
  va_end(ap);
}

void diag_note(Diag *d, SrcLoc loc, const char *fmt, ...) {
  if (d->errors > (d->max_errors > 0 ? d->max_errors : 20)) return;
  va_list ap;
  va_start(ap, fmt);
  report(d, loc, NULL, "note", fmt, ap);
  va_end(ap);
}

void diag_internal_error(const char *fmt, ...) {
  Diag d;
  diag_init(&d, stderr);
  va_list ap;
  va_start(ap, fmt);
  report(&d, NO_LOC, NULL, "internal error", fmt, ap);
  va_end(ap);
  abort();
}

const char *format_bytes(uint64_t bytes, char buf[32]) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) {
    snprintf(buf, 32, "%llu B", (unsigned long long)bytes);
    return buf;
  }
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, u++;
  snprintf(buf, 32, "%.1f %s", v, units[u]);
  return buf;
}

bool parse_size(const char *text, uint64_t *bytes) {
  static const struct { const char *name; double scale; } units[] = {
      {"", 1},          {"B", 1},         {"KB", 1e3},      {"MB", 1e6},       {"GB", 1e9},
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  char *end;
  if (!text || !(*text >= '0' && *text <= '9')) return false;
  double v = strtod(text, &end);
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strcmp(end, units[i].name) != 0) continue;
    double b = v * units[i].scale;
    if (!(b < 9007199254740992.0) || b != (double)(uint64_t)b) return false;
    *bytes = (uint64_t)b;
    return true;
  }
  return false;
}
