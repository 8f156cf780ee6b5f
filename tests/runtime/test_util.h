/* test_util.h — what the runtime's tests share: checks that count failures,
 * temp directories, and writers for the files the runtime reads. */
#ifndef TRAINC_TEST_UTIL_H
#define TRAINC_TEST_UTIL_H

#include "trainc_rt.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

extern int test_failures;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                     \
      test_failures++;                                                                             \
    }                                                                                              \
  } while (0)

#define CHECK_NEAR(a, b, tol)                                                                      \
  do {                                                                                             \
    double a_ = (a), b_ = (b);                                                                     \
    if (!(fabs(a_ - b_) <= (tol))) {                                                               \
      fprintf(stderr, "%s:%d: %s = %.9g, expected %.9g (tol %g)\n", __FILE__, __LINE__, #a, a_,    \
              b_, (double)(tol));                                                                  \
      test_failures++;                                                                             \
    }                                                                                              \
  } while (0)

/* The call failed and its message contains `needle`. */
#define CHECK_FAILS_WITH(call, err, needle)                                                        \
  do {                                                                                             \
    int rc_ = (call);                                                                              \
    if (rc_ == 0 || !strstr((err).msg, (needle))) {                                                \
      fprintf(stderr, "%s:%d: expected failure mentioning '%s' from %s, got rc %d: %s\n",          \
              __FILE__, __LINE__, needle, #call, rc_, (err).msg);                                  \
      test_failures++;                                                                             \
    }                                                                                              \
  } while (0)

/* Prints the outcome; the test's exit status. */
int test_finish(const char *name);

/* A fresh directory under $TMPDIR (or /tmp), removed by test_remove_dir. */
void test_make_dir(char *out, size_t cap);
void test_remove_dir(const char *dir);
void test_path(char *out, size_t cap, const char *dir, const char *name);

int test_write_file(const char *path, const void *data, size_t n);
/* Reads a file into a malloc'ed buffer. */
unsigned char *test_read_file(const char *path, size_t *len);

/* A version 1.0 .npy image in memory (malloc'ed) and on disk. */
unsigned char *test_npy_bytes(const char *descr, int fortran, int rank, const int64_t *dims,
                              const void *data, size_t data_bytes, size_t *len);
int test_write_npy(const char *path, const char *descr, int rank, const int64_t *dims,
                   const void *data, size_t data_bytes);

/* 1 when Debian's python has these modules ("numpy", "torch"). */
int test_python_has(const char *module);

#define TEST_PYTHON "/usr/bin/python3"
#define TEST_SKIP 77 /* ctest SKIP_RETURN_CODE */

/* x rounded to bf16, to nearest even (finite x): what trc_gemm and
 * trc_conv2d multiply under precision bf16. */
double test_bf16(float x);

#endif
