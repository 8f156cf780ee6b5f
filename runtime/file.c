/* file.c — whole-file reads (plain or gzip) and atomic writes. */
#include "rt_internal.h"

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

static int read_plain(const char *path, unsigned char **data, size_t *len, trc_error *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return trc_fail_at(err, path, "cannot open: %s", strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(f);
    return trc_fail_at(err, path, "not a regular file");
  }
  size_t size = (size_t)st.st_size;
  unsigned char *buf = malloc(size ? size : 1);
  if (!buf) {
    fclose(f);
    return trc_fail_at(err, path, "out of memory reading %zu bytes", size);
  }
  size_t got = fread(buf, 1, size, f);
  int failed = ferror(f);
  fclose(f);
  if (failed || got != size) {
    free(buf);
    return trc_fail_at(err, path, "read failed");
  }
  *data = buf;
  *len = size;
  return 0;
}

/* The inflated size of a .gz is unknown up front: grow by doubling. */
static int read_gzip(const char *path, unsigned char **data, size_t *len, trc_error *err) {
  gzFile gz = gzopen(path, "rb");
  if (!gz) return trc_fail_at(err, path, "cannot open: %s", errno ? strerror(errno) : "zlib");
  size_t cap = 1 << 20, n = 0;
  unsigned char *buf = malloc(cap);
  for (;;) {
    if (!buf) {
      gzclose(gz);
      return trc_fail_at(err, path, "out of memory inflating");
    }
    unsigned chunk = cap - n > (1u << 30) ? (1u << 30) : (unsigned)(cap - n);
    int got = gzread(gz, buf + n, chunk);
    if (got < 0) {
      int code;
      const char *why = gzerror(gz, &code);
      trc_fail_at(err, path, "corrupt gzip data: %s", why);
      free(buf);
      gzclose(gz);
      return -1;
    }
    if (got == 0) break;
    n += (size_t)got;
    if (n == cap) {
      unsigned char *bigger = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
      if (!bigger) free(buf);
      buf = bigger;
      cap *= 2;
    }
  }
  gzclose(gz);
  *data = buf;
  *len = n;
  return 0;
}

int trc_read_file(const char *path, unsigned char **data, size_t *len, trc_error *err) {
  return ends_with(path, ".gz") ? read_gzip(path, data, len, err)
                                : read_plain(path, data, len, err);
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
  if (write_and_sync(f, tmp, write, ctx, err) != 0) {
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
