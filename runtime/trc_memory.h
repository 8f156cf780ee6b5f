/* trc_memory.h — the memory this process may still use: the figure the
 * compiler's `checkpoint auto` plans for (driver/main.c) and the one a
 * trainer checks its plan against before it maps anything (memory.c).
 * Header-only, as trainc.h's inline helpers are, so that the compiler and
 * the runtime share one reading without either linking the other.
 *
 * The figure is the least of Linux's MemAvailable (/proc/meminfo) and the
 * room left under the cgroup mounted at /sys/fs/cgroup (a container's own):
 * v2 memory.max less memory.current ("max": no limit), else v1
 * memory/memory.limit_in_bytes less memory/memory.usage_in_bytes. A file
 * that cannot be read adds no limit.
 *
 * TRAINC_MEMORY_ROOT, for tests, is a folder read in place of / (its
 * proc/meminfo, sys/fs/cgroup/...), so that no test depends on the free
 * memory of the machine it runs on. */
#ifndef TRC_MEMORY_H
#define TRC_MEMORY_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  uint64_t bytes;     /* what may be used */
  const char *source; /* the figure that set it: "MemAvailable" or a cgroup file; NULL: none
                         could be read (bytes 0) */
} trc_memory_room;

/* The unsigned number after `key` at the start of a line of FILE ("" for
 * the file's first line) into *out, times `scale` (1024 for /proc/meminfo's
 * kB); returns 0 when there is none. */
static inline int trc_memory_read(const char *file, const char *key, uint64_t scale,
                                  uint64_t *out) {
  const char *root = getenv("TRAINC_MEMORY_ROOT");
  char path[4096], line[256];
  snprintf(path, sizeof path, "%s%s", root ? root : "", file);
  FILE *f = fopen(path, "r");
  int found = 0;
  unsigned long long v;
  while (f && !found && fgets(line, sizeof line, f))
    found = !strncmp(line, key, strlen(key)) &&
            sscanf(line + strlen(key), " %llu", &v) == 1 && v <= UINT64_MAX / scale;
  if (f) fclose(f);
  if (found) *out = (uint64_t)v * scale;
  return found;
}

/* A cgroup's room: LIMIT less USAGE; UINT64_MAX when LIMIT is "max" or
 * either file cannot be read. */
static inline uint64_t trc_memory_cgroup_room(const char *limit, const char *usage) {
  uint64_t max, used;
  if (!trc_memory_read(limit, "", 1, &max) || !trc_memory_read(usage, "", 1, &used))
    return UINT64_MAX;
  return max > used ? max - used : 0;
}

/* A figure that lowers the room, or the first one. */
static inline void trc_memory_limit(trc_memory_room *r, uint64_t bytes, const char *source) {
  if (bytes < r->bytes || !r->source) *r = (trc_memory_room){bytes, source};
}

static inline trc_memory_room trc_memory_available(void) {
  static const char v2[] = "/sys/fs/cgroup/memory.max";
  static const char v1[] = "/sys/fs/cgroup/memory/memory.limit_in_bytes";
  trc_memory_room r = {0, NULL};
  uint64_t meminfo;
  if (trc_memory_read("/proc/meminfo", "MemAvailable:", 1024, &meminfo))
    trc_memory_limit(&r, meminfo, "MemAvailable");
  const char *source = v2;
  uint64_t cgroup = trc_memory_cgroup_room(v2, "/sys/fs/cgroup/memory.current");
  if (cgroup == UINT64_MAX) {
    source = v1;
    cgroup = trc_memory_cgroup_room(v1, "/sys/fs/cgroup/memory/memory.usage_in_bytes");
  }
  if (cgroup != UINT64_MAX) trc_memory_limit(&r, cgroup, source);
  return r;
}

#endif
