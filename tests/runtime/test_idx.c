/* test_idx.c — the IDX reader (plain and .gz), datasets assembled from a
 * directory (file lookup order, symlinks, matching example counts), and the
 * real Fashion-MNIST test labels when the dataset package is installed. */
#include "test_util.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define FASHION "/usr/share/datasets/fashion-mnist"

static char dir[512];

/* An IDX image: type byte, dims, then `data` (already big-endian). */
static unsigned char *idx_bytes(unsigned char type, int rank, const uint32_t *dims,
                                const void *data, size_t data_bytes, size_t *len) {
  *len = 4 + 4 * (size_t)rank + data_bytes;
  unsigned char *b = malloc(*len);
  b[0] = b[1] = 0;
  b[2] = type;
  b[3] = (unsigned char)rank;
  for (int d = 0; d < rank; d++)
    for (int k = 0; k < 4; k++) b[4 + 4 * d + k] = (unsigned char)(dims[d] >> (24 - 8 * k));
  memcpy(b + 4 + 4 * rank, data, data_bytes);
  return b;
}

static void write_idx(const char *name, unsigned char type, int rank, const uint32_t *dims,
                      const void *data, size_t bytes) {
  char path[1024];
  size_t len;
  unsigned char *b = idx_bytes(type, rank, dims, data, bytes, &len);
  test_path(path, sizeof path, dir, name);
  if (strstr(name, ".gz")) {
    gzFile gz = gzopen(path, "wb");
    CHECK(gz && gzwrite(gz, b, (unsigned)len) == (int)len);
    gzclose(gz);
  } else {
    CHECK(test_write_file(path, b, len) == 0);
  }
  free(b);
}

static void test_parse(void) {
  trc_array_header h;
  trc_error err;
  uint8_t pixels[30] = {0};
  size_t len;
  unsigned char *b = idx_bytes(0x08, 3, (uint32_t[]){5, 2, 3}, pixels, 30, &len);
  CHECK(trc_idx_parse(b, len, &h, &err) == 0);
  CHECK(h.elem == TRC_ELEM_U8 && h.rank == 3 && h.dims[0] == 5 && h.dims[2] == 3);
  CHECK(h.count == 30 && h.data_offset == 16 && strcmp(h.type_name, "idx ubyte") == 0);
  CHECK_FAILS_WITH(trc_idx_parse(b, len - 1, &h, &err), err, "file truncated");
  CHECK_FAILS_WITH(trc_idx_parse(b, 10, &h, &err), err, "truncated inside the IDX dimensions");
  CHECK_FAILS_WITH(trc_idx_parse(b, 3, &h, &err), err, "bad magic");
  b[1] = 1;
  CHECK_FAILS_WITH(trc_idx_parse(b, len, &h, &err), err, "bad magic");
  b[1] = 0;
  b[2] = 0x0E;
  CHECK_FAILS_WITH(trc_idx_parse(b, len, &h, &err), err, "unsupported IDX element type 0x0e");
  b[2] = 0x08;
  b[3] = 0;
  CHECK_FAILS_WITH(trc_idx_parse(b, len, &h, &err), err, "rank 0");
  b[3] = 9;
  CHECK_FAILS_WITH(trc_idx_parse(b, len, &h, &err), err, "rank 9");
  free(b);
  /* dims that promise 2^32-1 squared bytes in a tiny buffer */
  b = idx_bytes(0x08, 2, (uint32_t[]){0xFFFFFFFFu, 0xFFFFFFFFu}, pixels, 4, &len);
  CHECK_FAILS_WITH(trc_idx_parse(b, len, &h, &err), err, "file truncated");
  free(b);
}

static void test_big_endian_conversion(void) {
  trc_error err;
  unsigned char *data;
  int64_t rows;
  char path[1024];
  const unsigned char ints[] = {0, 0, 0, 7, 0, 0, 1, 2}; /* 7, 258 */
  write_idx("n.idx", 0x0C, 1, (uint32_t[]){2}, ints, sizeof ints);
  trc_input n = {"n", TRC_I32, 1, {2}, 0, 4, 0};
  test_path(path, sizeof path, dir, "n.idx");
  CHECK(trc_input_load_file(path, &n, &data, &rows, &err) == 0 && rows == 2);
  int32_t v[2];
  memcpy(v, data, sizeof v);
  CHECK(v[0] == 7 && v[1] == 258);
  free(data);
  const unsigned char floats[] = {0x3F, 0x80, 0, 0, 0xC0, 0x20, 0, 0}; /* 1.0, -2.5 */
  write_idx("f.idx", 0x0D, 2, (uint32_t[]){1, 2}, floats, sizeof floats);
  trc_input f = {"f", TRC_F32, 2, {1, 2}, 0, 8, 0};
  test_path(path, sizeof path, dir, "f.idx");
  CHECK(trc_input_load_file(path, &f, &data, &rows, &err) == 0 && rows == 1);
  float x[2];
  memcpy(x, data, sizeof x);
  CHECK(x[0] == 1.0f && x[1] == -2.5f);
  free(data);
  CHECK_FAILS_WITH(trc_input_load_file(path, &n, &data, &rows, &err), err,
                   "expected dtype i32 for input 'n', found idx float");
}

/* image u8[B, 6] and label i32[B] in [0, 10), batch 2. */
static const trc_input two_inputs[] = {
    {"image", TRC_U8, 2, {2, 6}, 0, 6, 0},
    {"label", TRC_I32, 1, {2}, 64, 4, 10},
};
static const trc_model two_input_model = {
    .name = "m", .batch = 2, .arena_bytes = 128, .n_inputs = 2, .inputs = two_inputs};

static void test_dataset_from_directory(void) {
  uint8_t pixels[30], labels[5] = {3, 1, 4, 1, 5};
  for (int i = 0; i < 30; i++) pixels[i] = (uint8_t)i;
  write_idx("image.idx.gz", 0x08, 3, (uint32_t[]){5, 2, 3}, pixels, 30);
  write_idx("label.idx", 0x08, 1, (uint32_t[]){5}, labels, 5);
  trc_dataset ds;
  trc_error err;
  CHECK(trc_dataset_load(&two_input_model, dir, &ds, &err) == 0);
  CHECK(ds.n == 5 && ds.n_columns == 2);
  char arena[128] = {0};
  trc_dataset_gather(&ds, &two_input_model, (int64_t[]){4, 1}, 2, arena);
  CHECK(memcmp(arena, pixels + 24, 6) == 0 && memcmp(arena + 6, pixels + 6, 6) == 0);
  int32_t got[2];
  memcpy(got, arena + 64, sizeof got);
  CHECK(got[0] == 5 && got[1] == 1);
  trc_dataset tail;
  CHECK(trc_dataset_view(&ds, 3, 2, &tail, &err) == 0 && tail.n == 2);
  trc_dataset_gather(&tail, &two_input_model, (int64_t[]){0, 1}, 2, arena);
  CHECK(memcmp(arena, pixels + 18, 12) == 0);
  trc_dataset_free(&tail);
  CHECK_FAILS_WITH(trc_dataset_view(&ds, 4, 2, &tail, &err), err, "outside");
  trc_dataset_free(&ds);

  /* label.npy comes before label.idx, and must have as many examples */
  char path[1024];
  test_path(path, sizeof path, dir, "label.npy");
  int32_t four[4] = {0, 1, 2, 3};
  CHECK(test_write_npy(path, "<i4", 1, (int64_t[]){4}, four, sizeof four) == 0);
  CHECK_FAILS_WITH(trc_dataset_load(&two_input_model, dir, &ds, &err), err, "has 4 examples but");
  CHECK(strstr(err.where, "label.npy") != NULL);
  unlink(path);
  test_path(path, sizeof path, dir, "image.idx.gz");
  unlink(path);
  CHECK_FAILS_WITH(trc_dataset_load(&two_input_model, dir, &ds, &err), err,
                   "no file for input 'image' (looked for image.npy, image.idx, image.idx.gz)");
  CHECK_FAILS_WITH(trc_dataset_load(&two_input_model, "/nonexistent-dir", &ds, &err), err,
                   "cannot open");
  test_path(path, sizeof path, dir, "label.idx");
  CHECK_FAILS_WITH(trc_dataset_load(&two_input_model, path, &ds, &err), err, "not a directory");
}

/* cross_entropy(..., ignore = -100) with every label ignored has nothing to
 * learn from or evaluate: refused at load, naming the file (issue 26). */
static void test_every_label_ignored(void) {
  trc_model m = two_input_model;
  m.has_ignore = 1, m.ignore_input = 1, m.ignore_label = -100;
  char sub[1024], path[1100];
  test_path(sub, sizeof sub, dir, "ignored");
  CHECK(mkdir(sub, 0700) == 0);
  uint8_t pixels[18] = {0};
  snprintf(path, sizeof path, "%s/image.npy", sub);
  CHECK(test_write_npy(path, "|u1", 2, (int64_t[]){3, 6}, pixels, sizeof pixels) == 0);
  snprintf(path, sizeof path, "%s/label.npy", sub);
  int32_t none[3] = {-100, -100, -100}, one[3] = {-100, 2, -100};
  CHECK(test_write_npy(path, "<i4", 1, (int64_t[]){3}, none, sizeof none) == 0);
  trc_dataset ds;
  trc_error err;
  CHECK_FAILS_WITH(trc_dataset_load(&m, sub, &ds, &err), err,
                   "every label of input 'label' is -100, the ignored label");
  CHECK(strstr(err.where, "label.npy") != NULL);
  CHECK(test_write_npy(path, "<i4", 1, (int64_t[]){3}, one, sizeof one) == 0);
  CHECK(trc_dataset_load(&m, sub, &ds, &err) == 0);
  trc_dataset_free(&ds);
}

static void test_corrupt_gzip(void) {
  char path[1024];
  unsigned char junk[64] = {0};
  size_t len;
  unsigned char *buf = NULL;
  trc_error err;
  write_idx("z.idx.gz", 0x08, 1, (uint32_t[]){64}, junk, 64);
  test_path(path, sizeof path, dir, "z.idx.gz");
  unsigned char *gz = test_read_file(path, &len);
  gz[len / 2] ^= 0xFF;
  gz[len - 3] ^= 0xFF; /* the CRC or length field */
  CHECK(test_write_file(path, gz, len) == 0);
  CHECK_FAILS_WITH(trc_read_file(path, &buf, &len, &err), err, "corrupt gzip");
  free(gz);
}

/* The Fashion-MNIST test set through symlinks, as users point at it. */
static void test_fashion_mnist(void) {
  if (access(FASHION "/t10k-labels-idx1-ubyte.gz", R_OK) != 0 ||
      access(FASHION "/t10k-images-idx3-ubyte.gz", R_OK) != 0) {
    printf("test_idx: %s not installed; skipping the Fashion-MNIST check\n", FASHION);
    return;
  }
  char sub[1024], link[1100];
  test_path(sub, sizeof sub, dir, "fashion");
  CHECK(mkdir(sub, 0700) == 0);
  snprintf(link, sizeof link, "%s/label.idx.gz", sub);
  CHECK(symlink(FASHION "/t10k-labels-idx1-ubyte.gz", link) == 0);
  snprintf(link, sizeof link, "%s/image.idx.gz", sub);
  CHECK(symlink(FASHION "/t10k-images-idx3-ubyte.gz", link) == 0);
  static const trc_input inputs[] = {
      {"image", TRC_U8, 2, {128, 784}, 0, 784, 0},
      {"label", TRC_I32, 1, {128}, 128 * 784, 4, 10},
  };
  trc_model m = {
      .name = "fashion", .batch = 128, .arena_bytes = 128 * 788, .n_inputs = 2, .inputs = inputs};
  trc_dataset ds;
  trc_error err;
  CHECK(trc_dataset_load(&m, sub, &ds, &err) == 0); /* checks every label in [0, 10) */
  CHECK(ds.n == 10000);
  int64_t per_class[10] = {0};
  for (int64_t r = 0; r < ds.n; r++) {
    int32_t y;
    memcpy(&y, ds.columns[1].data + 4 * r, 4);
    if (y >= 0 && y < 10) per_class[y]++;
  }
  for (int c = 0; c < 10; c++) CHECK(per_class[c] == 1000);
  trc_dataset_free(&ds);
}

int main(void) {
  test_make_dir(dir, sizeof dir);
  test_parse();
  test_big_endian_conversion();
  test_dataset_from_directory();
  test_every_label_ignored();
  test_corrupt_gzip();
  test_fashion_mnist();
  test_remove_dir(dir);
  return test_finish("test_idx");
}
