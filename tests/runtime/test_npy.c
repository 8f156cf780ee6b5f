/* test_npy.c — the .npy reader: valid files (written here, and by numpy when
 * Debian's python has it), conversions, and every kind of malformed file. */
#include "test_util.h"

#include <stdint.h>
#include <stdlib.h>

static const trc_input image_input = {"image", TRC_U8, 2, {4, 6}, 0, 6, 0};
static const trc_input label_input = {"label", TRC_I32, 1, {4}, 0, 4, 5};
static const trc_input feature_input = {"x", TRC_F32, 2, {4, 3}, 0, 12, 0};

static char dir[512];

/* Parses a .npy image built from hl bytes of raw header (preamble added). */
static int parse_header_bytes(const char *header, size_t hl, size_t data_bytes,
                              trc_array_header *h, trc_error *err) {
  size_t len = 10 + hl + data_bytes;
  unsigned char *buf = calloc(1, len);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)(hl & 0xFF);
  buf[9] = (unsigned char)(hl >> 8);
  memcpy(buf + 10, header, hl);
  int rc = trc_npy_parse(buf, len, h, err);
  free(buf);
  return rc;
}

static int parse_raw_header(const char *header, size_t data_bytes, trc_array_header *h,
                            trc_error *err) {
  return parse_header_bytes(header, strlen(header), data_bytes, h, err);
}

static void test_valid_headers(void) {
  trc_array_header h;
  trc_error err;
  float data[12] = {0};
  size_t len;
  unsigned char *buf = test_npy_bytes("<f4", 0, 2, (int64_t[]){3, 4}, data, sizeof data, &len);
  CHECK(trc_npy_parse(buf, len, &h, &err) == 0);
  CHECK(h.elem == TRC_ELEM_F32 && h.rank == 2 && h.dims[0] == 3 && h.dims[1] == 4);
  CHECK(h.count == 12 && h.data_bytes == 48 && h.data_offset == len - 48 &&
        h.data_offset % 64 == 0);
  CHECK(strcmp(h.type_name, "<f4") == 0);
  /* version 2.0: a 4-byte header length */
  unsigned char *v2 = malloc(len + 2);
  memcpy(v2, buf, 8);
  v2[6] = 2;
  v2[8] = buf[8], v2[9] = buf[9], v2[10] = 0, v2[11] = 0;
  memcpy(v2 + 12, buf + 10, len - 10);
  CHECK(trc_npy_parse(v2, len + 2, &h, &err) == 0 && h.count == 12 &&
        h.data_offset == len + 2 - 48);
  free(v2);
  free(buf);
  CHECK(parse_raw_header("{\"shape\":(2,),\"fortran_order\":False,\"descr\":\"|u1\"}", 2, &h,
                         &err) == 0);
  CHECK(h.elem == TRC_ELEM_U8 && h.count == 2);
  CHECK(parse_raw_header("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", 8, &h, &err) ==
        0);
  CHECK(h.rank == 0 && h.count == 1);
}

static void test_malformed_headers(void) {
  trc_array_header h;
  trc_error err;
  const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  size_t len;
  float two[2] = {1, 2};
  unsigned char *buf = test_npy_bytes("<f4", 0, 1, (int64_t[]){2}, two, sizeof two, &len);
  CHECK_FAILS_WITH(trc_npy_parse(buf, 5, &h, &err), err, "bad magic");
  buf[1] = 'X';
  CHECK_FAILS_WITH(trc_npy_parse(buf, len, &h, &err), err, "bad magic");
  buf[1] = 'N';
  buf[6] = 4;
  CHECK_FAILS_WITH(trc_npy_parse(buf, len, &h, &err), err, "unsupported .npy version 4");
  buf[6] = 1;
  CHECK_FAILS_WITH(trc_npy_parse(buf, len - 1, &h, &err), err, "file truncated");
  CHECK_FAILS_WITH(trc_npy_parse(buf, 40, &h, &err), err, "truncated inside the .npy header");
  free(buf);
  CHECK(parse_raw_header(good, 8, &h, &err) == 0);
  CHECK_FAILS_WITH(parse_raw_header(good, 12, &h, &err), err, "trailing bytes");
  CHECK_FAILS_WITH(
      parse_raw_header("{'descr': '>f8', 'fortran_order': False, 'shape': (2,)}", 16, &h, &err),
      err, "unsupported dtype '>f8'");
  CHECK_FAILS_WITH(
      parse_raw_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2,)}", 8, &h, &err), err,
      "fortran_order");
  CHECK_FAILS_WITH(parse_raw_header("{'descr': '<f4', 'shape': (2,)}", 8, &h, &err), err, "lacks");
  CHECK_FAILS_WITH(parse_raw_header("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                                    "'shape': (2,)}",
                                    8, &h, &err),
                   err, "repeated");
  CHECK_FAILS_WITH(parse_raw_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), "
                                    "'extra': 1}",
                                    8, &h, &err),
                   err, "unexpected key");
  CHECK_FAILS_WITH(
      parse_raw_header("{'descr': '<f4', 'fortran_order': Fals, 'shape': (2,)}", 8, &h, &err), err,
      "malformed");
  CHECK_FAILS_WITH(
      parse_raw_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", 8, &h, &err),
      err, "malformed");
  CHECK_FAILS_WITH(
      parse_raw_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", 8, &h, &err),
      err, "malformed");
  CHECK_FAILS_WITH(
      parse_raw_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", 8, &h, &err),
      err, "malformed");
  /* A header that lies about the size: no allocation, no read past the end. */
  CHECK_FAILS_WITH(parse_raw_header("{'descr': '<f4', 'fortran_order': False, "
                                    "'shape': (1000000000000,)}",
                                    8, &h, &err),
                   err, "file truncated");
  CHECK_FAILS_WITH(parse_raw_header("{'descr': '<f4', 'fortran_order': False, "
                                    "'shape': (4611686018427387904, 8)}",
                                    8, &h, &err),
                   err, "overflows");
  CHECK_FAILS_WITH(parse_raw_header("{'descr': '<f4', 'fortran_order': False, "
                                    "'shape': (99999999999999999999,)}",
                                    8, &h, &err),
                   err, "64 bits");
  CHECK_FAILS_WITH(parse_raw_header("{'descr': '<f4', 'fortran_order': False, "
                                    "'shape': (1,1,1,1,1,1,1,1,1)}",
                                    4, &h, &err),
                   err, "more than 8");
  /* a NUL byte inside a string: '|u1\0' is not '|u1' (issue 26) */
  static const char nul_descr[] = "{'descr': '|u1\0', 'fortran_order': False, 'shape': (2,)}";
  CHECK_FAILS_WITH(parse_header_bytes(nul_descr, sizeof nul_descr - 1, 2, &h, &err), err,
                   "malformed .npy header");
}

/* Writes an .npy into the test dir and loads it for `in`. */
static int load(const char *name, const char *descr, int rank, const int64_t *dims,
                const void *data, size_t bytes, const trc_input *in, unsigned char **out,
                int64_t *rows, trc_error *err) {
  char path[1024];
  test_path(path, sizeof path, dir, name);
  if (test_write_npy(path, descr, rank, dims, data, bytes)) return -2;
  *out = NULL;
  return trc_input_load_file(path, in, out, rows, err);
}

static void test_loading_and_conversion(void) {
  trc_error err;
  unsigned char *data;
  int64_t rows;
  uint8_t pixels[24];
  for (int i = 0; i < 24; i++) pixels[i] = (uint8_t)(10 * i);
  CHECK(load("a.npy", "|u1", 3, (int64_t[]){4, 2, 3}, pixels, 24, &image_input, &data, &rows,
             &err) == 0);
  CHECK(rows == 4 && memcmp(data, pixels, 24) == 0);
  free(data);

  float f[24] = {0};
  CHECK_FAILS_WITH(
      load("b.npy", "<f4", 2, (int64_t[]){4, 6}, f, sizeof f, &image_input, &data, &rows, &err),
      err, "expected dtype u8 for input 'image', found <f4");
  CHECK(strstr(err.where, "b.npy") != NULL);
  CHECK_FAILS_WITH(
      load("c.npy", "|u1", 2, (int64_t[]){3, 8}, pixels, 24, &image_input, &data, &rows, &err), err,
      "expected shape [N, 6]");
  CHECK_FAILS_WITH(
      load("d.npy", "|u1", 2, (int64_t[]){0, 6}, pixels, 0, &image_input, &data, &rows, &err), err,
      "N >= 1");

  int64_t wide[4] = {0, 4, 1, 3};
  CHECK(load("e.npy", "<i8", 1, (int64_t[]){4}, wide, sizeof wide, &label_input, &data, &rows,
             &err) == 0);
  int32_t narrow[4];
  memcpy(narrow, data, sizeof narrow);
  CHECK(narrow[0] == 0 && narrow[1] == 4 && narrow[2] == 1 && narrow[3] == 3);
  free(data);
  wide[2] = (int64_t)1 << 40;
  CHECK_FAILS_WITH(
      load("f.npy", "<i8", 1, (int64_t[]){4}, wide, sizeof wide, &label_input, &data, &rows, &err),
      err, "row 2 does not fit in i32");
  uint8_t small[4] = {1, 2, 3, 4};
  CHECK(load("g.npy", "|u1", 1, (int64_t[]){4}, small, 4, &label_input, &data, &rows, &err) == 0);
  memcpy(narrow, data, sizeof narrow);
  CHECK(narrow[3] == 4);
  free(data);
  int32_t labels[4] = {0, 1, 9, 3};
  CHECK_FAILS_WITH(load("h.npy", "<i4", 1, (int64_t[]){4}, labels, sizeof labels, &label_input,
                        &data, &rows, &err),
                   err, "value 9 at row 2 is outside [0, 5)");
  labels[2] = -1;
  CHECK_FAILS_WITH(load("i.npy", "<i4", 1, (int64_t[]){4}, labels, sizeof labels, &label_input,
                        &data, &rows, &err),
                   err, "value -1 at row 2");
  CHECK_FAILS_WITH(trc_input_load_file("/nonexistent/x.npy", &label_input, &data, &rows, &err), err,
                   "cannot open");
}

/* Files exactly as numpy writes them. */
static void test_numpy_files(void) {
  if (!test_python_has("numpy")) {
    printf("test_npy: numpy not available to %s; skipping the numpy-written files\n", TEST_PYTHON);
    return;
  }
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "%s -c \"import numpy as np; d='%s';"
           "np.save(d+'/x.npy', np.arange(12, dtype=np.float32).reshape(4, 3) / 8);"
           "np.save(d+'/y.npy', np.array([4, 0, 2, 1], dtype=np.int64));"
           "np.save(d+'/f.npy', np.asfortranarray(np.ones((4, 3), dtype=np.float32)));"
           "np.save(d+'/d.npy', np.ones((4, 3)))\"",
           TEST_PYTHON, dir);
  CHECK(system(cmd) == 0);
  char path[1024];
  trc_error err;
  unsigned char *data;
  int64_t rows;
  test_path(path, sizeof path, dir, "x.npy");
  CHECK(trc_input_load_file(path, &feature_input, &data, &rows, &err) == 0 && rows == 4);
  if (data) {
    float x[12];
    memcpy(x, data, sizeof x);
    CHECK(x[0] == 0.0f && x[5] == 5.0f / 8 && x[11] == 11.0f / 8);
    free(data);
  }
  test_path(path, sizeof path, dir, "y.npy");
  CHECK(trc_input_load_file(path, &label_input, &data, &rows, &err) == 0 && rows == 4);
  free(data);
  test_path(path, sizeof path, dir, "f.npy");
  CHECK_FAILS_WITH(trc_input_load_file(path, &feature_input, &data, &rows, &err), err,
                   "fortran_order");
  test_path(path, sizeof path, dir, "d.npy");
  CHECK_FAILS_WITH(trc_input_load_file(path, &feature_input, &data, &rows, &err), err,
                   "unsupported dtype '<f8'");
}

int main(void) {
  test_make_dir(dir, sizeof dir);
  test_valid_headers();
  test_malformed_headers();
  test_loading_and_conversion();
  test_numpy_files();
  test_remove_dir(dir);
  return test_finish("test_npy");
}
