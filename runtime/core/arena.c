/* arena.c — the one block of memory a trainer computes in (and the
 * optimizer state, allocated the same way). Fresh anonymous memory, asked
 * for huge pages, and touched page by page before training starts, on the
 * trainer's threads: a fresh 4 KiB page costs ~12 us here on first touch,
 * which would otherwise land in the first steps. The kernel zeroes each page
 * as it is first touched; that zeroing is the whole cost (no second pass in
 * user space), and several threads fault their own 2 MiB pages at once. */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE, MAP_ANONYMOUS */
#include "rt_core.h"

#include <string.h>
#include <sys/mman.h>

/* Under AddressSanitizer the bytes of a mapping outside the arena are
 * poisoned, so that a write past the arena's end is reported as it was when
 * the arena came from malloc. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#endif

#define HUGE_PAGE ((uint64_t)2 << 20)
#define PAGE ((uint64_t)4096)

/* The mapping an arena lies in, kept just below the arena (in the page
 * before it, which nothing else uses). */
typedef struct {
  void *base;
  size_t length;
} mapping;

static mapping *mapping_of(char *arena) { return (mapping *)(arena - sizeof(mapping)); }

/* Bytes [0, bytes) at `at`, cut into 2 MiB blocks for the trainer's
 * threads. */
typedef struct {
  char *at;
  uint64_t bytes;
} block_job;

static int64_t blocks(const block_job *j) {
  return (int64_t)((j->bytes + HUGE_PAGE - 1) / HUGE_PAGE);
}

/* The end of blocks [lo, hi)'s bytes (they start at lo·HUGE_PAGE). */
static uint64_t blocks_end(const block_job *j, int64_t hi) {
  return (uint64_t)hi * HUGE_PAGE < j->bytes ? (uint64_t)hi * HUGE_PAGE : j->bytes;
}

/* Writes one byte of every page in blocks [lo, hi): each write faults in a
 * zeroed page (a huge page where the kernel has one). */
static void touch_blocks(void *ctx, int64_t lo, int64_t hi) {
  const block_job *j = ctx;
  volatile char *at = j->at;
  for (uint64_t i = (uint64_t)lo * HUGE_PAGE; i < blocks_end(j, hi); i += PAGE) at[i] = 0;
}

char *trc_arena_alloc(uint64_t bytes, trc_error *err) {
  uint64_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 64;
  uint64_t size = bytes ? (bytes + PAGE - 1) / PAGE * PAGE : PAGE;
  /* room for the alignment and for the page that holds the mapping record */
  uint64_t length = size + (align == HUGE_PAGE ? HUGE_PAGE : 0) + PAGE;
  if (size < bytes || length < size || length > SIZE_MAX)
    return trc_fail(err, "arena of %llu bytes is too large", (unsigned long long)bytes), NULL;
  void *base = mmap(NULL, (size_t)length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                    -1, 0);
  if (base == MAP_FAILED)
    return trc_fail(err, "cannot allocate %llu bytes", (unsigned long long)length), NULL;
  uintptr_t first = (uintptr_t)base + PAGE;
  char *arena = (char *)((first + align - 1) / align * align);
  *mapping_of(arena) = (mapping){base, (size_t)length};
#ifdef MADV_HUGEPAGE
  if (align == HUGE_PAGE) (void)madvise(arena, (size_t)size, MADV_HUGEPAGE); /* advice only */
#endif
  block_job job = {arena, size};
  trc_parallel_for(blocks(&job), touch_blocks, &job);
  ASAN_POISON_MEMORY_REGION(base, (size_t)((char *)mapping_of(arena) - (char *)base));
  ASAN_POISON_MEMORY_REGION(arena + bytes, (size_t)((char *)base + length - (arena + bytes)));
  return arena;
}

void trc_arena_free(char *arena) {
  if (!arena) return;
  mapping m = *mapping_of(arena);
  ASAN_UNPOISON_MEMORY_REGION(m.base, m.length);
  munmap(m.base, m.length);
}

#define CANARY 0xA5
#define ARENA_ALIGN 64

uint64_t trc_workspace_offset(const trc_model *m) {
  uint64_t top = m->grad_offset + 4 * m->trained_count;
  for (int i = 0; i < m->n_inputs; i++) {
    uint64_t end = m->inputs[i].offset + (uint64_t)m->batch * m->inputs[i].example_bytes;
    if (end > top) top = end;
  }
  uint64_t slots[][2] = {{m->loss_seed_offset, 4}, {m->rng_key_offset, 8}, {m->training_offset, 4}};
  for (int i = 0; i < 3; i++)
    if (slots[i][0] + slots[i][1] > top) top = slots[i][0] + slots[i][1];
  return top < m->arena_bytes ? top : m->arena_bytes;
}

/* The canary over blocks [lo, hi). */
static void fill_blocks(void *ctx, int64_t lo, int64_t hi) {
  const block_job *j = ctx;
  uint64_t start = (uint64_t)lo * HUGE_PAGE;
  memset(j->at + start, CANARY, (size_t)(blocks_end(j, hi) - start));
}

/* With a device, its workspace is the one kernels write: the canary goes
 * there and the measurement reads it back. On the host, the fill runs on
 * the trainer's threads. */
void trc_arena_poison(const trc_model *m, char *arena) {
  uint64_t from = trc_workspace_offset(m);
  block_job job = {arena + from, m->arena_bytes - from};
  trc_parallel_for(blocks(&job), fill_blocks, &job);
  if (m->device) m->device->upload(arena, from, m->arena_bytes - from);
}

uint64_t trc_arena_high_water(const trc_model *m, char *arena) {
  uint64_t from = trc_workspace_offset(m), top = m->arena_bytes;
  if (m->device) m->device->download(arena, from, top - from);
  while (top > from && (unsigned char)arena[top - 1] == CANARY) top--;
  return (top + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}
