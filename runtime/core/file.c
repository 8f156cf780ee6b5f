/* file.c — reading inputs (plain, gzip or memory, as streams; regular files
 * only) and writing outputs: atomic writes (temp file, fsync, rename), logs
 * opened in place, the checks that keep an output off a device node or an
 * input, and the clean-up of temp files an interrupted write left. */
#include "rt_core.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

const char *trc_file_kind(unsigned mode) {
  return S_ISDIR(mode)    ? "a directory"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISSOCK(mode) ? "a socket"
         : S_ISLNK(mode)  ? "a symbolic link"
         : S_ISREG(mode)  ? "a regular file"
                          : "not a regular file";
}

/* ---- reading: plain files, gzip streams, memory ---- */

enum { GZ_CHUNK = 1 << 16, DEFLATE_MAX_RATIO = 1032 /* deflate's largest expansion */ };

/* Opens a regular file for reading. stat() first, so a FIFO or a device is
 * refused before open() could block on it or touch it; O_NONBLOCK and
 * fstat() again in case it was swapped in between. */
static int open_regular(const char *path, uint64_t *size, trc_error *err) {
  struct stat st;
  if (stat(path, &st) != 0) return trc_fail_at(err, path, "cannot open: %s", strerror(errno));
  if (!S_ISREG(st.st_mode))
    return trc_fail_at(err, path, "not a regular file (%s)", trc_file_kind(st.st_mode));
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return trc_fail_at(err, path, "cannot open: %s", strerror(errno));
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return trc_fail_at(err, path, "not a regular file");
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  *size = (uint64_t)st.st_size;
  return fd;
}

static int read_fd(trc_source *s, unsigned char *buf, uint64_t n, uint64_t *got, trc_error *err) {
  *got = 0;
  while (*got < n) {
    size_t want = n - *got > (1u << 30) ? (1u << 30) : (size_t)(n - *got);
    ssize_t r = read(s->fd, buf + *got, want);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return trc_fail_at(err, s->path, "read failed: %s", strerror(errno));
    if (r == 0) break;
    *got += (uint64_t)r;
  }
  return 0;
}

/* Refills the compressed input; returns the bytes available (0 at the end
 * of the file), or -1. */
static int64_t fill_input(trc_source *s, trc_error *err) {
  z_stream *z = s->z;
  if (z->avail_in > 0) return z->avail_in;
  uint64_t got;
  if (read_fd(s, s->in, GZ_CHUNK, &got, err)) return -1;
  z->next_in = s->in;
  z->avail_in = (uInt)got;
  return (int64_t)got;
}

/* After the end of one gzip member: another member (gzip allows several
 * back to back) or the end of the file; anything else is refused. */
static int next_member(trc_source *s, trc_error *err) {
  z_stream *z = s->z;
  if (z->avail_in == 1) { /* the magic may straddle a refill */
    s->in[0] = z->next_in[0];
    uint64_t got;
    if (read_fd(s, s->in + 1, GZ_CHUNK - 1, &got, err)) return -1;
    z->next_in = s->in;
    z->avail_in = (uInt)(got + 1);
  }
  int64_t avail = fill_input(s, err);
  if (avail < 0) return -1;
  if (avail == 0) {
    s->done = 1;
    return 0;
  }
  if (avail < 2 || z->next_in[0] != 0x1f || z->next_in[1] != 0x8b)
    return trc_fail_at(err, s->path, "trailing bytes after the end of the gzip stream");
  return inflateReset(z) == Z_OK ? 0 : trc_fail_at(err, s->path, "zlib: cannot restart");
}

static int read_gzip(trc_source *s, unsigned char *buf, uint64_t n, uint64_t *got, trc_error *err) {
  z_stream *z = s->z;
  *got = 0;
  while (*got < n && !s->done) {
    int64_t avail = fill_input(s, err);
    if (avail < 0) return -1;
    if (avail == 0)
      return trc_fail_at(err, s->path,
                         "gzip stream cut short (the file ends before its CRC and size trailer)");
    uint64_t want = n - *got > (1u << 30) ? (1u << 30) : n - *got;
    z->next_out = buf + *got;
    z->avail_out = (uInt)want;
    int rc = inflate(z, Z_NO_FLUSH);
    *got += want - z->avail_out;
    if (rc == Z_STREAM_END) {
      if (next_member(s, err)) return -1;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      return trc_fail_at(err, s->path, "corrupt gzip data: %s", z->msg ? z->msg : zError(rc));
    }
  }
  return 0;
}

int trc_source_open(trc_source *s, const char *path, trc_error *err) {
  memset(s, 0, sizeof *s);
  s->path = path;
  s->fd = open_regular(path, &s->size, err);
  if (s->fd < 0) return -1;
  if (!ends_with(path, ".gz")) return 0;
  s->z = calloc(1, sizeof *s->z);
  s->in = malloc(GZ_CHUNK);
  if (!s->z || !s->in || inflateInit2(s->z, 16 + MAX_WBITS) != Z_OK) { /* 16: gzip only */
    trc_source_close(s); /* inflateEnd is harmless on a stream never initialized */
    return trc_fail_at(err, path, "out of memory");
  }
  return 0;
}

void trc_source_memory(trc_source *s, const char *path, const void *buf, size_t len) {
  memset(s, 0, sizeof *s);
  s->path = path;
  s->fd = -1;
  s->mem = buf;
  s->size = len;
}

int trc_source_read(trc_source *s, void *buf, uint64_t n, uint64_t *got, trc_error *err) {
  int rc = 0;
  if (s->z) {
    rc = read_gzip(s, buf, n, got, err);
  } else if (s->fd < 0) { /* memory */
    *got = n < s->size - s->pos ? n : s->size - s->pos;
    if (*got) memcpy(buf, s->mem + s->pos, (size_t)*got);
  } else {
    rc = read_fd(s, buf, n, got, err);
  }
  s->pos += *got;
  return rc;
}

uint64_t trc_source_max_size(const trc_source *s) {
  uint64_t bound;
  if (!s->z) return s->size;
  return trc_mul_ok(s->size, DEFLATE_MAX_RATIO, &bound) ? bound : UINT64_MAX;
}

int trc_source_at_end(trc_source *s, trc_error *err) {
  unsigned char extra;
  uint64_t got;
  if (trc_source_read(s, &extra, 1, &got, err)) return -1;
  return got == 0 ? 0 : trc_fail_at(err, s->path, "trailing bytes after the data");
}

void trc_source_close(trc_source *s) {
  if (s->z) inflateEnd(s->z);
  free(s->z);
  free(s->in);
  if (s->fd >= 0) close(s->fd);
  s->z = NULL;
  s->in = NULL;
  s->fd = -1;
}

/* The whole content in one buffer; a gzip file's grows by doubling, up to
 * what its compressed size can inflate to. */
static int read_all(trc_source *s, unsigned char **data, size_t *len, trc_error *err) {
  uint64_t cap = s->z ? (1u << 20) : s->size, n = 0, limit = trc_source_max_size(s), got;
  unsigned char *buf = NULL;
  for (;;) {
    unsigned char *bigger = cap > SIZE_MAX ? NULL : realloc(buf, cap ? (size_t)cap : 1);
    if (!bigger) {
      free(buf);
      return trc_fail_at(err, s->path, "out of memory reading %llu bytes", (unsigned long long)cap);
    }
    buf = bigger;
    if (trc_source_read(s, buf + n, cap - n, &got, err)) break;
    n += got;
    if (n < cap || cap >= limit) {
      if (trc_source_at_end(s, err)) break;
      *data = buf;
      *len = (size_t)n;
      return 0;
    }
    cap = cap > limit / 2 ? limit : cap * 2;
  }
  free(buf);
  return -1;
}

int trc_read_file(const char *path, unsigned char **data, size_t *len, trc_error *err) {
  trc_source s;
  if (trc_source_open(&s, path, err)) return -1;
  int rc = read_all(&s, data, len, err);
  trc_source_close(&s);
  return rc;
}

/* Directory part of `path` ("." when none), written into out. */
static void directory_of(const char *path, char *out, size_t cap) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    snprintf(out, cap, ".");
  else if (slash == path)
    snprintf(out, cap, "/");
  else
    snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

static int fsync_directory(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

/* mkstemp makes the file 0600; give it the mode a plain fopen would. */
static void set_default_mode(int fd) {
  mode_t mask = umask(0);
  umask(mask);
  (void)fchmod(fd, 0666 & ~mask);
}

/* Fills and closes the temp file; 0 only when every byte reached the disk. */
static int write_and_sync(FILE *f, const char *tmp, trc_write_fn write, const void *ctx,
                          trc_error *err) {
  int rc = write(f, ctx, err);
  if (rc == 0 && (fflush(f) != 0 || fsync(fileno(f)) != 0))
    rc = trc_fail(err, "cannot write %s: %s", tmp, strerror(errno));
  if (rc == 0 && ferror(f)) rc = trc_fail(err, "cannot write %s", tmp);
  if (fclose(f) != 0 && rc == 0) rc = trc_fail(err, "cannot write %s: %s", tmp, strerror(errno));
  return rc;
}

int trc_check_can_create(const char *path, trc_error *err) {
  char dir[4096];
  directory_of(path, dir, sizeof dir);
  if (access(dir, W_OK | X_OK) != 0)
    return trc_fail_at(err, path, "cannot create a file in %s: %s", dir, strerror(errno));
  return 0;
}

int trc_check_output(const char *path, int stream, trc_error *err) {
  struct stat st;
  if ((stream ? stat(path, &st) : lstat(path, &st)) != 0)
    return errno == ENOENT ? trc_check_can_create(path, err)
                           : trc_fail_at(err, path, "cannot check: %s", strerror(errno));
  int ok = S_ISREG(st.st_mode) || (stream ? S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)
                                          : S_ISLNK(st.st_mode));
  if (!ok && stream)
    return trc_fail_at(err, path, "is %s; this output goes to a regular file, a character device "
                       "or a FIFO", trc_file_kind(st.st_mode));
  if (!ok)
    return trc_fail_at(err, path,
                       "is %s, not a regular file; refusing to replace it (the file is written "
                       "under a temp name, then renamed over this one)",
                       trc_file_kind(st.st_mode));
  if (!stream) return trc_check_can_create(path, err); /* the temp file goes beside it */
  if (access(path, W_OK) != 0) return trc_fail_at(err, path, "cannot write: %s", strerror(errno));
  return 0;
}

static int same_inode(const struct stat *x, const struct stat *y) {
  return x->st_dev == y->st_dev && x->st_ino == y->st_ino;
}

/* Paths of files yet to be made are one file when their directories are and
 * their last components are equal. */
int trc_same_file(const char *a, const char *b) {
  struct stat x, y;
  int has_a = stat(a, &x) == 0, has_b = stat(b, &y) == 0;
  if (has_a || has_b) return has_a && has_b && same_inode(&x, &y);
  char da[4096], db[4096];
  directory_of(a, da, sizeof da);
  directory_of(b, db, sizeof db);
  const char *na = strrchr(a, '/') ? strrchr(a, '/') + 1 : a;
  const char *nb = strrchr(b, '/') ? strrchr(b, '/') + 1 : b;
  return strcmp(na, nb) == 0 && stat(da, &x) == 0 && stat(db, &y) == 0 && same_inode(&x, &y);
}

int trc_open_stream(const char *path, int append, trc_error *err) {
  if (trc_check_output(path, 1, err)) return -1;
  int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | (append ? O_APPEND : 0), 0666);
  if (fd < 0 && errno == ENXIO) return trc_fail_at(err, path, "is a FIFO that no process reads");
  if (fd < 0) return trc_fail_at(err, path, "cannot open for writing: %s", strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 ||
      !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
    close(fd);
    return trc_fail_at(err, path, "is not a regular file, character device or FIFO");
  }
  if (S_ISREG(st.st_mode) && !append && ftruncate(fd, 0) != 0) {
    close(fd);
    return trc_fail_at(err, path, "cannot truncate: %s", strerror(errno));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

/* ".BASE.tmp-XXXXXX", XXXXXX being mkstemp's six letters or digits: 1, with
 * BASE copied into base. */
static int temp_name_base(const char *name, char *base, size_t cap) {
  size_t n = strlen(name), tail = sizeof ".tmp-XXXXXX" - 1;
  if (name[0] != '.' || n < 1 + 1 + tail || n - tail - 1 >= cap) return 0;
  if (strncmp(name + n - tail, ".tmp-", 5) != 0) return 0;
  for (size_t i = n - 6; i < n; i++)
    if (!isalnum((unsigned char)name[i])) return 0;
  memcpy(base, name + 1, n - tail - 1);
  base[n - tail - 1] = '\0';
  return 1;
}

void trc_remove_temp_files(const char *dir, int (*is_ours)(const char *base, const void *ctx),
                           const void *ctx) {
  DIR *d = opendir(dir);
  if (!d) return;
  char base[1024], path[4096];
  for (struct dirent *e; (e = readdir(d));)
    if (temp_name_base(e->d_name, base, sizeof base) && is_ours(base, ctx) &&
        (size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < sizeof path)
      unlink(path);
  closedir(d);
}

static int is_temp_of(const char *base, const void *name) { return strcmp(base, name) == 0; }

void trc_remove_temps_of(const char *path) {
  char dir[4096];
  directory_of(path, dir, sizeof dir);
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  trc_remove_temp_files(dir, is_temp_of, base);
}

int trc_write_atomic(const char *path, trc_write_fn write, const void *ctx, trc_error *err) {
  char dir[4096], tmp[4096];
  directory_of(path, dir, sizeof dir);
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  if (!base[0]) return trc_fail_at(err, path, "not a file name");
  if ((size_t)snprintf(tmp, sizeof tmp, "%s/.%s.tmp-XXXXXX", dir, base) >= sizeof tmp)
    return trc_fail_at(err, path, "path too long");
  int fd = mkstemp(tmp);
  if (fd < 0) return trc_fail_at(err, path, "cannot create a file in %s: %s", dir, strerror(errno));
  set_default_mode(fd);
  FILE *f = fdopen(fd, "wb");
  if (!f) {
    close(fd);
    unlink(tmp);
    return trc_fail_at(err, path, "cannot write: %s", strerror(errno));
  }
  /* the name is checked again just before the rename, which would replace
   * whatever it is */
  if (write_and_sync(f, tmp, write, ctx, err) != 0 || trc_check_output(path, 0, err) != 0) {
    unlink(tmp);
    return trc_set_where(err, path);
  }
  if (rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    return trc_fail_at(err, path, "cannot rename the temp file into place: %s", strerror(e));
  }
  if (fsync_directory(dir) != 0)
    return trc_fail_at(err, path, "written, but syncing directory %s failed: %s", dir,
                       strerror(errno));
  return 0;
}
