/* test_input_files.c — input files that are not what they claim: FIFOs and
 * devices under data names (refused at once, never waited on), gzip streams
 * cut short, with trailing garbage or a bad CRC, a gzip header promising
 * little followed by a flood of zeros (inflated only up to the promise),
 * headers promising more than the file can hold; and the peak memory of a
 * load: one copy of the data, in the input's dtype. */
#define _DEFAULT_SOURCE /* mknod, makedev */
#include "test_util.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

static char dir[512];
static const trc_input pixels = {"image", TRC_U8, 2, {2, 784}, 0, 784, 0};
static const trc_input features = {"x", TRC_F32, 2, {2, 8}, 0, 32, 0};
static const trc_input labels = {"y", TRC_I32, 1, {2}, 0, 4, 0};

static const char *path_of(const char *name) {
  static char path[1024];
  test_path(path, sizeof path, dir, name);
  return path;
}

/* The IDX header of a u8 array [n, 784]. */
static void idx_header(unsigned char h[12], uint32_t n) {
  const unsigned char head[12] = {0, 0, 0x08, 2, n >> 24, n >> 16, n >> 8, n, 0, 0, 784 >> 8, 784 & 0xFF};
  memcpy(h, head, 12);
}

/* A gzip file of the IDX header of [n, 784] u8, then `zeros` zero bytes. */
static void write_gz_idx(const char *name, uint32_t n, uint64_t zeros) {
  unsigned char h[12];
  idx_header(h, n);
  gzFile gz = gzopen(path_of(name), "wb1");
  CHECK(gz && gzwrite(gz, h, sizeof h) == (int)sizeof h);
  static unsigned char block[1 << 20];
  for (uint64_t left = zeros; left > 0;) {
    unsigned k = left < sizeof block ? (unsigned)left : (unsigned)sizeof block;
    CHECK(gzwrite(gz, block, k) == (int)k);
    left -= k;
  }
  gzclose(gz);
}

static int load(const char *name, const trc_input *in, trc_error *err) {
  unsigned char *data = NULL;
  int64_t rows;
  int rc = trc_input_load_file(path_of(name), in, &data, &rows, err);
  free(data);
  return rc;
}

/* The bytes of a file, changed by `edit`, written back under another name. */
static void derive(const char *from, const char *to, void (*edit)(unsigned char **b, size_t *len)) {
  size_t len;
  unsigned char *b = test_read_file(path_of(from), &len);
  edit(&b, &len);
  CHECK(test_write_file(path_of(to), b, len) == 0);
  free(b);
}

static void drop_trailer_size(unsigned char **b, size_t *len) { *len -= 4; }
static void drop_trailer(unsigned char **b, size_t *len) { *len -= 8; }
static void flip_crc(unsigned char **b, size_t *len) { (*b)[*len - 8] ^= 1; }
static void add_garbage(unsigned char **b, size_t *len) {
  *b = realloc(*b, *len + 5);
  memcpy(*b + *len, "junk!", 5);
  *len += 5;
}

static void test_gzip_streams(void) {
  trc_error err;
  write_gz_idx("ok.idx.gz", 2, 2 * 784);
  CHECK(load("ok.idx.gz", &pixels, &err) == 0);
  derive("ok.idx.gz", "cut4.idx.gz", drop_trailer_size);
  CHECK_FAILS_WITH(load("cut4.idx.gz", &pixels, &err), err, "gzip stream cut short");
  CHECK(strstr(err.where, "cut4.idx.gz") != NULL);
  derive("ok.idx.gz", "cut8.idx.gz", drop_trailer);
  CHECK_FAILS_WITH(load("cut8.idx.gz", &pixels, &err), err, "gzip stream cut short");
  derive("ok.idx.gz", "crc.idx.gz", flip_crc);
  CHECK_FAILS_WITH(load("crc.idx.gz", &pixels, &err), err, "incorrect data check");
  derive("ok.idx.gz", "junk.idx.gz", add_garbage);
  CHECK_FAILS_WITH(load("junk.idx.gz", &pixels, &err), err,
                   "trailing bytes after the end of the gzip stream");

  /* gzip allows members back to back (`cat a.gz b.gz`): the content is theirs joined */
  FILE *f = fopen(path_of("two.idx.gz"), "wb");
  unsigned char h[12];
  idx_header(h, 3);
  gzFile gz = gzdopen(dup(fileno(f)), "wb");
  gzwrite(gz, h, sizeof h);
  gzwrite(gz, (unsigned char[784]){0}, 784);
  gzclose(gz);
  fseek(f, 0, SEEK_END);
  gz = gzdopen(dup(fileno(f)), "ab");
  gzwrite(gz, (unsigned char[2 * 784]){0}, 2 * 784);
  gzclose(gz);
  fclose(f);
  CHECK(load("two.idx.gz", &pixels, &err) == 0);

  /* the header promises 2^32-1 rows of 784 bytes: more than 1032 times the file */
  write_gz_idx("huge.idx.gz", 0xFFFFFFFFu, 10);
  CHECK_FAILS_WITH(load("huge.idx.gz", &pixels, &err), err, "more than a gzip file of");
}

/* VmRSS or VmHWM of this process in KiB. */
static long status_kib(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, key, strlen(key)) == 0) v = atol(line + strlen(key) + 1);
  if (f) fclose(f);
  return v;
}

static const char *peak_file;
static const trc_input *peak_input;
static int peak_expect_ok;

/* In a child: loads peak_file and exits with the growth of the peak RSS in
 * MiB, plus 1 (0: the load did not end as expected). */
static void measure_load(void) {
  long before = status_kib("VmRSS:");
  trc_error err;
  unsigned char *data = NULL;
  int64_t rows;
  int rc = trc_input_load_file(peak_file, peak_input, &data, &rows, &err);
  long grew = status_kib("VmHWM:") - before;
  if ((rc == 0) != peak_expect_ok) {
    fprintf(stderr, "%s: %s\n", peak_file, rc ? err.msg : "accepted");
    _exit(0);
  }
  free(data);
  _exit((int)(grew / 1024 + 1 > 255 ? 255 : grew / 1024 + 1));
}

/* How much loading `name` in a child process grew its peak RSS, in MiB. */
static long peak_mib(const char *name, const trc_input *in, int expect_ok) {
  peak_file = path_of(name);
  peak_input = in;
  peak_expect_ok = expect_ok;
  pid_t pid = fork();
  if (pid == 0) measure_load();
  int status;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) > 0 ? WEXITSTATUS(status) - 1 : -1;
}

static void test_inflates_only_the_promise(void) {
  /* 2 images promised, then 256 MiB of zeros: refused after 2 x 784 + 1 bytes */
  write_gz_idx("flood.idx.gz", 2, (uint64_t)256 << 20);
  trc_error err;
  CHECK_FAILS_WITH(load("flood.idx.gz", &pixels, &err), err, "trailing bytes");
  long mib = peak_mib("flood.idx.gz", &pixels, 0);
  printf("test_input_files: a 256 MiB gzip flood grew the peak RSS by %ld MiB\n", mib);
  CHECK(mib >= 0 && mib < 16);
}

static void test_one_copy_in_memory(void) {
  /* 32 MiB of f32 features: the load holds them once (twice would be 64) */
  const int64_t rows = (32 << 20) / 32;
  float *x = calloc((size_t)rows * 8, sizeof *x);
  for (int64_t i = 0; i < rows * 8; i++) x[i] = (float)(i % 1000);
  CHECK(test_write_npy(path_of("x.npy"), "<f4", 2, (int64_t[]){rows, 8}, x,
                       (size_t)rows * 32) == 0);
  long mib = peak_mib("x.npy", &features, 1);
  printf("test_input_files: loading 32 MiB of f32 grew the peak RSS by %ld MiB\n", mib);
  CHECK(mib >= 32 && mib < 44);
  unsigned char *data;
  int64_t n;
  trc_error err;
  CHECK(trc_input_load_file(path_of("x.npy"), &features, &data, &n, &err) == 0 && n == rows);
  CHECK(memcmp(data, x, (size_t)rows * 32) == 0);
  free(data);
  free(x);

  /* i64 labels become i32 through a small buffer: values across its chunks */
  const int64_t count = 50000;
  int64_t *y = malloc((size_t)count * sizeof *y);
  for (int64_t i = 0; i < count; i++) y[i] = i % 7 - 3;
  CHECK(test_write_npy(path_of("y.npy"), "<i8", 1, (int64_t[]){count}, y,
                       (size_t)count * 8) == 0);
  CHECK(trc_input_load_file(path_of("y.npy"), &labels, &data, &n, &err) == 0 && n == count);
  int ok = 1;
  for (int64_t i = 0; i < count; i++) {
    int32_t v;
    memcpy(&v, data + 4 * i, 4);
    ok &= v == y[i];
  }
  CHECK(ok);
  free(data);
  y[41234] = (int64_t)1 << 40;
  CHECK(test_write_npy(path_of("y.npy"), "<i8", 1, (int64_t[]){count}, y,
                       (size_t)count * 8) == 0);
  CHECK_FAILS_WITH(trc_input_load_file(path_of("y.npy"), &labels, &data, &n, &err), err,
                   "value at row 41234 does not fit in i32");
  free(y);
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "test_input_files: FAIL: a read blocked on a FIFO\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}

static void test_not_regular_files(void) {
  trc_error err;
  unsigned char *buf;
  size_t len;
  signal(SIGALRM, on_alarm);
  alarm(20); /* a blocked open() is a failure, not a hang */
  CHECK(mkfifo(path_of("fifo.npy"), 0600) == 0);
  CHECK_FAILS_WITH(load("fifo.npy", &features, &err), err, "not a regular file (a FIFO)");
  CHECK(mkfifo(path_of("fifo.idx.gz"), 0600) == 0);
  CHECK_FAILS_WITH(load("fifo.idx.gz", &pixels, &err), err, "not a regular file (a FIFO)");
  CHECK_FAILS_WITH(trc_read_file(path_of("fifo.npy"), &buf, &len, &err), err, "a FIFO");
  CHECK(mkdir(path_of("d.npy"), 0700) == 0);
  CHECK_FAILS_WITH(load("d.npy", &features, &err), err, "not a regular file (a directory)");
  /* a device that reads forever, behind a symlink, as /dev/zero would be */
  char zero[1024];
  test_path(zero, sizeof zero, dir, "zero");
  if (mknod(zero, S_IFCHR | 0600, makedev(1, 5)) == 0) {
    CHECK(symlink(zero, path_of("z.idx.gz")) == 0);
    CHECK_FAILS_WITH(load("z.idx.gz", &pixels, &err), err,
                     "not a regular file (a character device)");
    CHECK_FAILS_WITH(trc_read_file(zero, &buf, &len, &err), err, "character device");
  } else {
    printf("test_input_files: mknod: %s; skipping the device check\n", strerror(errno));
  }
  alarm(0);
}

int main(void) {
  test_make_dir(dir, sizeof dir);
  test_gzip_streams();
  test_inflates_only_the_promise();
  test_one_copy_in_memory();
  test_not_regular_files();
  test_remove_dir(dir);
  return test_finish("test_input_files");
}
