/* fuzz_readers.c — libFuzzer over the runtime's readers of untrusted bytes:
 * .npy and IDX (header parse, then checks and conversion into an input of
 * each dtype, index limits included) and safetensors. Every input must be
 * parsed or rejected with a message — never a crash, an overread (ASan) or
 * undefined behaviour (UBSan).
 *
 * Byte 0 picks the reader (% 3: npy, IDX, safetensors) and, for arrays, the
 * input it is loaded into (/ 3 % 3: u8, i32 with index limit, f32); the rest
 * is the file. Seeds: tests/runtime/fuzz_seeds/. */
#include "trainc_rt.h"

#include <stdlib.h>

static const trc_input targets[] = {
    {"image", TRC_U8, 2, {1, 4}, 0, 4, 0},
    {"label", TRC_I32, 1, {1}, 0, 4, 10},
    {"x", TRC_F32, 3, {1, 2, 2}, 0, 16, 0},
};

static void fuzz_array(int idx, const trc_input *target, const uint8_t *data, size_t size) {
  trc_array_header h;
  trc_error err;
  unsigned char *out;
  int64_t rows;
  if (idx)
    trc_idx_parse(data, size, &h, &err);
  else
    trc_npy_parse(data, size, &h, &err);
  if (trc_input_parse(idx ? "fuzz.idx" : "fuzz.npy", data, size, target, &out, &rows, &err) == 0)
    free(out);
}

static void fuzz_safetensors(const uint8_t *data, size_t size) {
  trc_st_header h;
  trc_error err;
  if (trc_safetensors_parse(data, size, &h, &err) == 0) trc_st_header_free(&h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const unsigned pick = data[0];
  if (pick % 3 == 2)
    fuzz_safetensors(data + 1, size - 1);
  else
    fuzz_array(pick % 3 == 1, &targets[pick / 3 % 3], data + 1, size - 1);
  return 0;
}
