/* arena.c — the one block of memory a trainer computes in (and the
 * optimizer state, allocated the same way). Allocated once, asked for huge
 * pages, and touched page by page before training starts: a fresh page costs
 * ~12 us here on first touch, which would otherwise land in the first steps. */
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
    return trc_fail(err, "cannot allocate %llu bytes", (unsigned long long)size), NULL;
#ifdef MADV_HUGEPAGE
  if (align == HUGE_PAGE) (void)madvise(p, (size_t)size, MADV_HUGEPAGE); /* advice only */
#endif
  memset(p, 0, (size_t)size);
  return p;
}

void trc_arena_free(char *arena) {
  free(arena);
}

#define CANARY 0xA5
#define ARENA_ALIGN 64

uint64_t trc_workspace_offset(const trc_model *m) {
  uint64_t top = m->grad_offset + 4 * m->param_count;
  for (int i = 0; i < m->n_inputs; i++) {
    uint64_t end = m->inputs[i].offset + (uint64_t)m->batch * m->inputs[i].example_bytes;
    if (end > top) top = end;
  }
  uint64_t slots[][2] = {{m->loss_seed_offset, 4}, {m->rng_key_offset, 8}, {m->training_offset, 4}};
  for (int i = 0; i < 3; i++)
    if (slots[i][0] + slots[i][1] > top) top = slots[i][0] + slots[i][1];
  return top < m->arena_bytes ? top : m->arena_bytes;
}

/* With a device, its workspace is the one kernels write: the canary goes
 * there and the measurement reads it back. */
void trc_arena_poison(const trc_model *m, char *arena) {
  uint64_t from = trc_workspace_offset(m);
  memset(arena + from, CANARY, (size_t)(m->arena_bytes - from));
  if (m->device) m->device->upload(arena, from, m->arena_bytes - from);
}

uint64_t trc_arena_high_water(const trc_model *m, char *arena) {
  uint64_t from = trc_workspace_offset(m), top = m->arena_bytes;
  if (m->device) m->device->download(arena, from, top - from);
  while (top > from && (unsigned char)arena[top - 1] == CANARY) top--;
  return (top + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}
