/* idx.c — the IDX format of the MNIST family, parsed strictly from memory.
 * Big-endian: bytes 0-1 zero, byte 2 the element type, byte 3 the rank, one
 * u32 per dimension, then the elements, filling the rest of the buffer. */
#include "rt_data.h"

#include <string.h>

static int set_type(trc_array_header *h, unsigned char code, trc_error *err) {
  static const struct {
    unsigned char code;
    trc_elem_type elem;
    const char *name;
  } known[] = {{0x08, TRC_ELEM_U8, "idx ubyte"},
               {0x0C, TRC_ELEM_I32, "idx int"},
               {0x0D, TRC_ELEM_F32, "idx float"}};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (known[i].code == code) {
      h->elem = known[i].elem;
      h->big_endian = 1;
      snprintf(h->type_name, sizeof h->type_name, "%s", known[i].name);
      return 0;
    }
  return trc_fail(err,
                  "unsupported IDX element type 0x%02x (supported: 0x08 ubyte, 0x0C int, "
                  "0x0D float)",
                  code);
}

uint64_t trc_idx_header_extent(const unsigned char *b, size_t n) {
  if (n < 4) return 4;
  if (b[0] != 0 || b[1] != 0 || b[3] < 1 || b[3] > TRC_MAX_RANK) return 0;
  return 4 + 4 * (uint64_t)b[3];
}

int trc_idx_parse_header(const void *buf, size_t len, trc_array_header *h, trc_error *err) {
  const unsigned char *b = buf;
  memset(h, 0, sizeof *h);
  if (len < 4 || b[0] != 0 || b[1] != 0) return trc_fail(err, "not an IDX file (bad magic)");
  if (set_type(h, b[2], err)) return -1;
  h->rank = b[3];
  if (h->rank < 1 || h->rank > TRC_MAX_RANK)
    return trc_fail(err, "IDX rank %d outside 1..%d", h->rank, TRC_MAX_RANK);
  h->data_offset = 4 + 4 * (uint64_t)h->rank;
  if (len < h->data_offset) return trc_fail(err, "file truncated inside the IDX dimensions");
  for (int d = 0; d < h->rank; d++) {
    const unsigned char *p = b + 4 + 4 * d;
    h->dims[d] =
        (int64_t)((uint64_t)p[0] << 24 | (uint64_t)p[1] << 16 | (uint64_t)p[2] << 8 | p[3]);
  }
  return trc_array_size(h, err);
}

int trc_idx_parse(const void *buf, size_t len, trc_array_header *h, trc_error *err) {
  return trc_idx_parse_header(buf, len, h, err) || trc_array_check_payload(h, len, err) ? -1 : 0;
}
