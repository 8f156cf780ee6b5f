/* arena.c — the one block of memory a trainer computes in. Allocated once,
 * asked for huge pages, and touched page by page before training starts: a
 * fresh page costs ~12 us here on first touch, which would otherwise land in
 * the first steps (see DESIGN.md, performance facts). */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include "rt_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE ((uint64_t)2 << 20)

char *trc_arena_alloc(uint64_t bytes, trc_error *err) {
  uint64_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 64;
  uint64_t size = (bytes + align - 1) / align * align;
  if (size < bytes || size > SIZE_MAX)
    return trc_fail(err, "arena of %llu bytes is too large", (unsigned long long)bytes), NULL;
  if (size == 0) size = align;
  void *p = NULL;
  if (posix_memalign(&p, (size_t)align, (size_t)size) != 0)
    return trc_fail(err, "cannot allocate the arena (%llu bytes)", (unsigned long long)size), NULL;
#ifdef MADV_HUGEPAGE
  if (align == HUGE_PAGE) (void)madvise(p, (size_t)size, MADV_HUGEPAGE); /* advice only */
#endif
  memset(p, 0, (size_t)size);
  return p;
}

void trc_arena_free(char *arena) {
  free(arena);
}
