/* array.c — what the .npy and IDX readers share: element sizes and the check
 * that a header's shape matches the bytes that follow it. */
#include "rt_data.h"

size_t trc_elem_size(trc_elem_type elem) {
  switch (elem) {
  case TRC_ELEM_U8: return 1;
  case TRC_ELEM_I32: return 4;
  case TRC_ELEM_F32: return 4;
  case TRC_ELEM_I64: return 8;
  }
  return 0;
}

int trc_array_size(trc_array_header *h, trc_error *err) {
  uint64_t count = 1, bytes;
  for (int d = 0; d < h->rank; d++)
    if (!trc_mul_ok(count, (uint64_t)h->dims[d], &count))
      return trc_fail(err, "shape overflows 64 bits");
  if (!trc_mul_ok(count, trc_elem_size(h->elem), &bytes))
    return trc_fail(err, "shape overflows 64 bits");
  h->count = count;
  h->data_bytes = bytes;
  return 0;
}

int trc_array_check_payload(const trc_array_header *h, uint64_t len, trc_error *err) {
  uint64_t have = len - h->data_offset;
  if (have != h->data_bytes)
    return trc_fail(err,
                    "%s: the header promises %llu elements of %s (%llu bytes) but %llu "
                    "bytes follow it",
                    have < h->data_bytes ? "file truncated" : "trailing bytes",
                    (unsigned long long)h->count, h->type_name, (unsigned long long)h->data_bytes,
                    (unsigned long long)have);
  return 0;
}
