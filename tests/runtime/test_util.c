/* test_util.c — see test_util.h. */
#include "test_util.h"

#include <stdlib.h>

int test_failures;

int test_finish(const char *name) {
  if (test_failures)
    fprintf(stderr, "%s: %d check(s) failed\n", name, test_failures);
  else
    printf("%s: all checks passed\n", name);
  return test_failures ? 1 : 0;
}

void test_make_dir(char *out, size_t cap) {
  const char *tmp = getenv("TMPDIR");
  snprintf(out, cap, "%s/trc-test-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (!mkdtemp(out)) {
    perror("mkdtemp");
    exit(1);
  }
}

void test_remove_dir(const char *dir) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

void test_path(char *out, size_t cap, const char *dir, const char *name) {
  snprintf(out, cap, "%s/%s", dir, name);
}

int test_write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t wrote = fwrite(data, 1, n, f);
  return fclose(f) == 0 && wrote == n ? 0 : -1;
}

unsigned char *test_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)n + 1);
  *len = fread(buf, 1, (size_t)n, f);
  fclose(f);
  return buf;
}

unsigned char *test_npy_bytes(const char *descr, int fortran, int rank, const int64_t *dims,
                              const void *data, size_t data_bytes, size_t *len) {
  char header[512], shape[256] = "";
  size_t n = 0;
  for (int d = 0; d < rank; d++)
    n += (size_t)snprintf(shape + n, sizeof shape - n, "%lld,%s", (long long)dims[d],
                          d + 1 < rank ? " " : "");
  int h = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }",
                   descr, fortran ? "True" : "False", shape);
  while ((10 + h + 1) % 64) header[h++] = ' '; /* numpy pads the preamble to 64 bytes */
  header[h++] = '\n';
  *len = 10 + (size_t)h + data_bytes;
  unsigned char *buf = malloc(*len);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)(h & 0xFF);
  buf[9] = (unsigned char)(h >> 8);
  memcpy(buf + 10, header, (size_t)h);
  if (data_bytes) memcpy(buf + 10 + h, data, data_bytes);
  return buf;
}

int test_write_npy(const char *path, const char *descr, int rank, const int64_t *dims,
                   const void *data, size_t data_bytes) {
  size_t len;
  unsigned char *buf = test_npy_bytes(descr, 0, rank, dims, data, data_bytes, &len);
  int rc = test_write_file(path, buf, len);
  free(buf);
  return rc;
}

int test_python_has(const char *module) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "%s -c 'import %s' >/dev/null 2>&1", TEST_PYTHON, module);
  return system(cmd) == 0;
}

double test_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  u = (u + 0x7fffu + (u >> 16 & 1)) & 0xffff0000u;
  memcpy(&x, &u, sizeof x);
  return x;
}
