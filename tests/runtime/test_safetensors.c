/* test_safetensors.c — weights files: bitwise round trips, the strict header
 * parser's rejections, model-level load checks, atomic replacement, and the
 * format as an independent Python reader sees it. */
#include "test_util.h"

#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[512];

/* A safetensors image from a header string and `data_len` zero bytes. */
static unsigned char *st_bytes(const char *header, size_t data_len, size_t *len) {
  size_t h = strlen(header);
  *len = 8 + h + data_len;
  unsigned char *b = calloc(1, *len);
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
  memcpy(b + 8, header, h);
  return b;
}

static int parse_header_text(const char *header, size_t data_len, trc_error *err) {
  size_t len;
  unsigned char *b = st_bytes(header, data_len, &len);
  trc_st_header h;
  int rc = trc_safetensors_parse(b, len, &h, err);
  if (rc == 0) trc_st_header_free(&h);
  free(b);
  return rc;
}

static void test_round_trip(void) {
  char path[1024];
  test_path(path, sizeof path, dir, "rt.safetensors");
  uint32_t bits[6] = {0x7FC00001u, 0x80000000u, 0x00000001u, 0x7F800000u, 0x3F800000u, 0xC0490FDBu};
  float a[6], c[4] = {1, 2, 3, 4}, s[1] = {42};
  memcpy(a, bits, sizeof a); /* NaN payload, -0, denormal, inf: must survive bit for bit */
  const int64_t a_dims[2] = {2, 3}, c_dims[1] = {4};
  const trc_tensor t[3] = {{"layer.0.weight", 2, a_dims, a},
                           {"we\"ird\\name\xc3\xa9", 1, c_dims, c},
                           {"scalar", 0, NULL, s}};
  trc_error err;
  CHECK(trc_safetensors_write(path, "tiny \"model\"", t, 3, &err) == 0);
  size_t len;
  unsigned char *file = test_read_file(path, &len);
  trc_st_header h;
  CHECK(file && trc_safetensors_parse(file, len, &h, &err) == 0);
  if (!file) return;
  CHECK(h.n == 3 && h.data_start % 8 == 0 && h.data_start + 44 == len);
  CHECK(h.model_name && strcmp(h.model_name, "tiny \"model\"") == 0);
  for (int i = 0; i < h.n && h.n == 3; i++) {
    const trc_st_entry *e = &h.entries[i];
    CHECK(strcmp(e->name, t[i].name) == 0 && strcmp(e->dtype, "F32") == 0);
    CHECK(e->rank == t[i].rank);
    for (int d = 0; d < e->rank; d++) CHECK(e->dims[d] == t[i].dims[d]);
    CHECK(memcmp(file + h.data_start + e->begin, t[i].data, e->end - e->begin) == 0);
  }
  CHECK(h.n == 3 && h.entries[0].begin == 0 && h.entries[1].begin == 24 && h.entries[2].end == 44);
  trc_st_header_free(&h);
  free(file);
}

static void test_rejections(void) {
  trc_error err;
  const char *ok = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  CHECK(parse_header_text(ok, 8, &err) == 0);
  CHECK(parse_header_text("{}", 0, &err) == 0);
  CHECK(parse_header_text(
            " {\"__metadata__\":{\"a\":\"b\"},\"w\":{\"shape\":[],\"data_offsets\":[0,2],"
            "\"dtype\":\"BF16\"}}   ",
            2, &err) == 0);
  static const struct {
    const char *header;
    size_t data;
    const char *why;
  } bad[] = {
      {"", 0, "expected '{'"},
      {"[]", 0, "expected '{'"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", 8,
       "end of the header"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},}", 8, "a string"},
      {"{\"w\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "do not hold"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "do not hold"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12, "cover 8 bytes"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "starts at byte 4"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
       "\"v\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
       12, "overlap"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
       "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
       8, "appears twice"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 0, "needs dtype, shape and data_offsets"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8,
       "unexpected key"},
      {"{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
       "repeated"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
       "non-negative integer"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, "an integer"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", 8, "leading zeros"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,8]}}", 8,
       "below 2^64"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
       "overflows"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
       "more than 8"},
      {"{\"w\\x\":{}}", 0, "valid string character"},
      {"{\"w\\u0000\":{}}", 0, "valid string character"},
      {"{\"w\\ud800\":{}}", 0, "valid string character"},
      {"{\"w\\udc00x\":{}}", 0, "valid string character"},
      {"{\"w\xff\":{}}", 0, "valid string character"},
      {"{\"w\xc0\xaf\":{}}", 0, "valid string character"},
      {"{\"w\xed\xa0\x80\":{}}", 0, "valid string character"},
      {"{\"w\x01\":{}}", 0, "valid string character"},
      {"{\"w", 0, "closing"},
      {"{\"w\\", 0, "closing"},
      {"{\"w\":", 0, "expected '{'"},
      {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "__metadata__ repeated"},
      {"{\"__metadata__\":{\"a\":1}}", 0, "a string"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", 8, "expected ']'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECK_FAILS_WITH(parse_header_text(bad[i].header, bad[i].data, &err), err, bad[i].why);
  unsigned char tiny[7] = {0};
  trc_st_header h;
  CHECK_FAILS_WITH(trc_safetensors_parse(tiny, sizeof tiny, &h, &err), err, "too short");
  unsigned char lying[16] = {0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, '{', '}'};
  CHECK_FAILS_WITH(trc_safetensors_parse(lying, sizeof lying, &h, &err), err, "does not fit");
}

/* W f32[2, 3] (decay) and b f32[3]. */
static const trc_param params[] = {
    {"W", 2, {2, 3}, 0, 6, TRC_INIT_NORMAL, 0, 1, 2, 3, 1, 0, NULL, 0},
    {"b", 1, {3}, 24, 3, TRC_INIT_UNIFORM, -1, 1, 0, 0, 0, 0, NULL, 0},
};
static const trc_model model = {.name = "m",
                                .batch = 1,
                                .arena_bytes = 128,
                                .param_offset = 0,
                                .param_count = 9, .trained_count = 9,
                                .grad_offset = 64,
                                .n_params = 2,
                                .params = params};

static void test_model_weights(void) {
  char path[1024], other[1024];
  char arena[128], copy[128];
  trc_error err;
  test_path(path, sizeof path, dir, "m.safetensors");
  trc_init_params(&model, arena, 5);
  CHECK(trc_save_weights(&model, arena, path, &err) == 0);
  memcpy(copy, arena, sizeof copy);
  memset(arena, 0, 36);
  CHECK(trc_load_weights(&model, arena, path, &err) == 0);
  CHECK(memcmp(arena, copy, 36) == 0);

  const float z[8] = {0};
  const int64_t d23[2] = {3, 2}, d3[1] = {3}, d2[1] = {2};
  const trc_tensor wrong[3] = {{"W", 2, d23, z}, {"c", 1, d2, z}, {"d", 1, d3, z}};
  test_path(other, sizeof other, dir, "wrong.safetensors");
  CHECK(trc_safetensors_write(other, "m", wrong, 3, &err) == 0);
  CHECK_FAILS_WITH(trc_load_weights(&model, arena, other, &err), err,
                   "'W' has shape [3, 2], the model expects [2, 3]; missing 'b'; unexpected 'c'; "
                   "unexpected 'd'");
  CHECK(strstr(err.where, "wrong.safetensors") != NULL);
  CHECK(memcmp(arena, copy, 36) == 0); /* nothing loaded from a mismatched file */
  size_t len;
  unsigned char *file = test_read_file(path, &len);
  file[12] = '#';
  CHECK(test_write_file(other, file, len) == 0);
  CHECK_FAILS_WITH(trc_load_weights(&model, arena, other, &err), err, "malformed JSON");
  free(file);
  test_path(other, sizeof other, dir, "missing.safetensors");
  CHECK_FAILS_WITH(trc_load_weights(&model, arena, other, &err), err, "cannot open");
  CHECK_FAILS_WITH(trc_save_weights(&model, arena, "/nonexistent-dir/w.safetensors", &err), err,
                   "cannot create");
}

/* Weight-file names (trc_param.file_name, transposed; the model's and the
 * caller's allowed patterns): W [2, 3] is "enc.w" [3, 2] in files, "head"
 * may be missing ("he*"), "pool.*" tensors may be present. */
static const trc_param named_params[] = {
    {"W", 2, {2, 3}, 0, 6, TRC_INIT_NORMAL, 0, 1, 2, 3, 1, 0, "enc.w", 1},
    {"b", 1, {3}, 32, 3, TRC_INIT_UNIFORM, -1, 1, 0, 0, 0, 0, NULL, 0},
    {"head", 1, {2}, 48, 2, TRC_INIT_ONES, 0, 0, 0, 0, 0, 0, NULL, 0},
};
static const trc_model named_model = {.name = "m", .batch = 1, .arena_bytes = 192,
                                      .param_offset = 0, .param_count = 14, .trained_count = 14,
                                      .grad_offset = 64, .allow_missing = "x,he*",
                                      .allow_unexpected = "pool.*", .n_params = 3,
                                      .params = named_params};

static void write_tensors(const char *path, const trc_tensor *t, int n) {
  trc_error err;
  CHECK(trc_safetensors_write(path, "m", t, n, &err) == 0);
}

static void test_file_names(void) {
  char path[1024], other[1024];
  float arena[48] = {0}, w[6] = {1, 2, 3, 4, 5, 6}, b[3] = {7, 8, 9}, head[2] = {5, 5};
  trc_error err;
  memcpy(arena, w, sizeof w), memcpy(arena + 8, b, sizeof b), memcpy(arena + 12, head, 8);
  test_path(path, sizeof path, dir, "named.safetensors");
  CHECK(trc_save_weights(&named_model, (const char *)arena, path, &err) == 0);
  unsigned char *buf;
  trc_st_header h;
  CHECK(trc_safetensors_load(path, &buf, &h, &err) == 0);
  CHECK(h.n == 3 && !strcmp(h.entries[0].name, "enc.w") && h.entries[0].dims[0] == 3 &&
        h.entries[0].dims[1] == 2 && !strcmp(h.entries[1].name, "b"));
  const float *saved_w = (const float *)(buf + h.data_start + h.entries[0].begin);
  const float transposed[6] = {1, 4, 2, 5, 3, 6};
  CHECK(memcmp(saved_w, transposed, sizeof transposed) == 0);
  trc_st_header_free(&h);
  free(buf);

  /* back in: W transposed again; a file without head and with pool.x */
  const int64_t d32[2] = {3, 2}, d3[1] = {3}, d1[1] = {1};
  const float pool[1] = {0};
  const trc_tensor partial[3] = {{"enc.w", 2, d32, transposed}, {"b", 1, d3, b},
                                 {"pool.x", 1, d1, pool}};
  test_path(other, sizeof other, dir, "partial.safetensors");
  write_tensors(other, partial, 3);
  float loaded[48] = {0};
  loaded[12] = loaded[13] = 42; /* head keeps what the arena holds */
  CHECK(trc_load_weights(&named_model, (char *)loaded, other, &err) == 0);
  CHECK(memcmp(loaded, w, sizeof w) == 0 && memcmp(loaded + 8, b, sizeof b) == 0);
  CHECK(loaded[12] == 42 && loaded[13] == 42);

  /* b missing and q unexpected: errors, unless the caller allows them */
  const trc_tensor lacking[2] = {{"enc.w", 2, d32, transposed}, {"q", 1, d1, pool}};
  write_tensors(other, lacking, 2);
  CHECK_FAILS_WITH(trc_load_weights(&named_model, (char *)loaded, other, &err), err,
                   "1 missing, 1 unexpected: missing 'b'; unexpected 'q' (--allow-missing");
  const trc_allowed allow = {"b", "q,r"};
  CHECK(trc_load_weights_allowing(&named_model, (char *)loaded, other, &allow, &err) == 0);

  /* a shape mismatch is no missing tensor: allowing everything does not help */
  const trc_tensor wrong[1] = {{"enc.w", 1, d3, b}};
  write_tensors(other, wrong, 1);
  const trc_allowed all = {"*", "*"};
  CHECK_FAILS_WITH(trc_load_weights_allowing(&named_model, (char *)loaded, other, &all, &err),
                   err, "'enc.w' has shape [3], the model expects [3, 2] (its parameter "
                        "transposed)");

  /* torch.save's zip and a bare pickle */
  const unsigned char zip[] = "PK\3\4 not safetensors", pickle[] = "\x80\x02}q\0.";
  CHECK(test_write_file(other, zip, sizeof zip) == 0);
  CHECK_FAILS_WITH(trc_load_weights(&named_model, (char *)loaded, other, &err), err,
                   "a PyTorch pickle (pytorch_model.bin), not .safetensors; convert it");
  CHECK(test_write_file(other, pickle, sizeof pickle) == 0);
  CHECK_FAILS_WITH(trc_load_weights(&named_model, (char *)loaded, other, &err), err,
                   "PyTorch pickle");
}

static int count_temp_files(void) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".tmp-") != NULL;
  if (d) closedir(d);
  return n;
}

/* A save that fails half-way (file size limit) leaves the old file intact
 * and no temp file behind. */
static void test_atomic_replace(void) {
  char path[1024];
  trc_error err;
  test_path(path, sizeof path, dir, "atomic.safetensors");
  const float one[1] = {1};
  const int64_t d1[1] = {1};
  const trc_tensor small = {"w", 1, d1, one};
  CHECK(trc_safetensors_write(path, "m", &small, 1, &err) == 0);
  size_t before_len, after_len;
  unsigned char *before = test_read_file(path, &before_len);
  pid_t pid = fork();
  if (pid == 0) {
    static float big[1 << 16];
    const int64_t dbig[1] = {1 << 16};
    const trc_tensor large = {"w", 1, dbig, big};
    struct rlimit limit = {4096, 4096};
    signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &limit);
    int rc = trc_safetensors_write(path, "m", &large, 1, &err);
    _exit(rc != 0 && strstr(err.msg, "write") ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  unsigned char *after = test_read_file(path, &after_len);
  CHECK(after && after_len == before_len && memcmp(before, after, before_len) == 0);
  CHECK(count_temp_files() == 0);
  free(before);
  free(after);
}

/* An independent reader: json + struct + numpy, as a user would write it. */
static void test_python_reader(void) {
  if (!test_python_has("numpy")) {
    printf("test_safetensors: numpy not available to %s; skipping the Python reader\n",
           TEST_PYTHON);
    return;
  }
  char path[1024], cmd[4096];
  test_path(path, sizeof path, dir, "py.safetensors");
  float w[6] = {0.5f, -1.25f, 3.0f, 1e-30f, -0.0f, 65504.0f}, b[3] = {7, 8, 9};
  const int64_t dw[2] = {2, 3}, db[1] = {3};
  const trc_tensor t[2] = {{"h1.weight", 2, dw, w}, {"h1.bias", 1, db, b}};
  trc_error err;
  CHECK(trc_safetensors_write(path, "pymodel", t, 2, &err) == 0);
  snprintf(cmd, sizeof cmd,
           "%s -c \"import json, struct, numpy as np\n"
           "raw = open('%s', 'rb').read()\n"
           "n = struct.unpack('<Q', raw[:8])[0]\n"
           "assert n %% 8 == 0\n"
           "h = json.loads(raw[8:8 + n])\n"
           "assert h['__metadata__'] == {'format': 'pt', 'trainc_model': 'pymodel'}, h\n"
           "data = raw[8 + n:]\n"
           "def get(k):\n"
           "    e = h[k]; b, end = e['data_offsets']; assert e['dtype'] == 'F32'\n"
           "    return np.frombuffer(data[b:end], dtype='<f4').reshape(e['shape'])\n"
           "w = get('h1.weight'); b = get('h1.bias')\n"
           "assert w.shape == (2, 3) and b.shape == (3,)\n"
           "assert (w == np.array([[0.5, -1.25, 3.0], [1e-30, -0.0, 65504.0]], "
           "dtype=np.float32)).all()\n"
           "assert (b == np.array([7, 8, 9], dtype=np.float32)).all()\n"
           "assert len(data) == 36\n\"",
           TEST_PYTHON, path);
  CHECK(system(cmd) == 0);
}

int main(void) {
  test_make_dir(dir, sizeof dir);
  test_round_trip();
  test_rejections();
  test_model_weights();
  test_file_names();
  test_atomic_replace();
  test_python_reader();
  test_remove_dir(dir);
  return test_finish("test_safetensors");
}
