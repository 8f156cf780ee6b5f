/* tensorboard.c — `--tensorboard DIR`: the scalars of the log (loss, lr,
 * evaluation metrics, memory) as a TensorBoard event file, written from the
 * format's definition with no TensorFlow or protobuf library:
 *
 *   file    = record*
 *   record  = u64 length | u32 masked_crc32c(length) | data | u32 masked_crc32c(data)
 *             (little-endian; masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8)
 *   data    = an Event protobuf:  1 wall_time (double), 2 step (int64),
 *             3 file_version (string, the first record: "brain.Event:2"),
 *             5 summary (Summary: repeated 1 value (Value: 1 tag, 2 simple_value float))
 *
 * tests/runtime/tensorboard.sh reads a trainer's file back with a reader of
 * its own. A write that fails is said once; training goes on, as with --log. */
#include "rt_io.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* ---- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) ---- */

uint32_t trc_crc32c(const void *data, size_t n) {
  static uint32_t table[256];
  if (!table[1])
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      table[i] = c;
    }
  const unsigned char *p = data;
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

static uint32_t masked_crc(const void *data, size_t n) {
  uint32_t c = trc_crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

/* ---- protobuf's wire format, into a fixed buffer ---- */

typedef struct {
  unsigned char b[512];
  size_t n;
} pb;

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_BYTES = 2, WIRE_FIXED32 = 5 };

static void put_varint(pb *p, uint64_t v) {
  do {
    p->b[p->n++] = (unsigned char)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
    v >>= 7;
  } while (v);
}

static void put_key(pb *p, int field, int wire) { put_varint(p, (uint64_t)(field << 3 | wire)); }

static void put_bytes(pb *p, int field, const void *data, size_t n) {
  put_key(p, field, WIRE_BYTES);
  put_varint(p, n);
  memcpy(p->b + p->n, data, n);
  p->n += n;
}

static void put_fixed(pb *p, int field, const void *le, size_t n) {
  put_key(p, field, n == 8 ? WIRE_FIXED64 : WIRE_FIXED32);
  memcpy(p->b + p->n, le, n); /* the host is little-endian (rt_core.h) */
  p->n += n;
}

/* An Event with its wall time and step; the caller adds the rest. */
static void begin_event(pb *e, int64_t step) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  double wall = (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
  e->n = 0;
  put_fixed(e, 1, &wall, 8);
  put_key(e, 2, WIRE_VARINT);
  put_varint(e, (uint64_t)step);
}

/* ---- the file ---- */

static void write_record(trc_tensorboard *tb, const pb *event) {
  unsigned char head[12];
  uint64_t len = event->n;
  memcpy(head, &len, 8);
  uint32_t head_crc = masked_crc(head, 8), data_crc = masked_crc(event->b, event->n);
  memcpy(head + 8, &head_crc, 4);
  fwrite(head, 1, 12, tb->f);
  fwrite(event->b, 1, event->n, tb->f);
  fwrite(&data_crc, 1, 4, tb->f);
  if (fflush(tb->f) == 0 || tb->failed) return;
  tb->failed = 1;
  fprintf(stderr, "%s: warning: cannot write the TensorBoard file: %s; training goes on\n",
          tb->path, strerror(errno));
}

int trc_tensorboard_open(trc_tensorboard *tb, const char *dir, trc_error *err) {
  memset(tb, 0, sizeof *tb);
  if (!dir) return 0;
  struct stat st;
  char host[256] = "localhost";
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return trc_fail_at(err, dir, "cannot make the TensorBoard folder: %s", strerror(errno));
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return trc_fail_at(err, dir, "--tensorboard: not a directory");
  gethostname(host, sizeof host - 1);
  host[strcspn(host, "/")] = '\0'; /* a file name, whatever the host is called */
  if ((size_t)snprintf(tb->path, sizeof tb->path, "%s/events.out.tfevents.%lld.%s.%ld", dir,
                       (long long)time(NULL), host, (long)getpid()) >= sizeof tb->path)
    return trc_fail_at(err, dir, "--tensorboard: the folder name is too long");
  if (!(tb->f = fopen(tb->path, "wbx")))
    return trc_fail_at(err, tb->path, "cannot create the TensorBoard file: %s", strerror(errno));
  pb e;
  static const char version[] = "brain.Event:2";
  begin_event(&e, 0);
  put_bytes(&e, 3, version, sizeof version - 1);
  write_record(tb, &e);
  return 0;
}

void trc_tensorboard_scalar(trc_tensorboard *tb, const char *tag, int64_t step, double value) {
  if (!tb->f) return;
  pb v = {.n = 0}, summary = {.n = 0}, e;
  float x = (float)value;
  size_t tag_len = strnlen(tag, 200);
  put_bytes(&v, 1, tag, tag_len);
  put_fixed(&v, 2, &x, 4);
  put_bytes(&summary, 1, v.b, v.n);
  begin_event(&e, step);
  put_bytes(&e, 5, summary.b, summary.n);
  write_record(tb, &e);
}

void trc_tensorboard_close(trc_tensorboard *tb) {
  if (tb->f) fclose(tb->f);
  tb->f = NULL;
}
