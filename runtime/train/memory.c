/* memory.c — a trainer's memory checked before it is touched: an arena
 * larger than the free memory but smaller than RAM would otherwise be found
 * only when the mapping or the OOM killer fails, maybe hours in. The figure
 * it is checked against is the one `checkpoint auto` plans for
 * (trc_memory.h). */
#include "rt_train.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "trc_memory.h"

typedef struct {
  uint64_t arena, optimizer, copies; /* copies: --load-best, the outer optimizer, bf16 */
} planned_bytes;

static planned_bytes planned(const trc_model *m, const trc_options *o) {
  const trc_train_config *c = &o->cfg;
  uint64_t params = m->param_count * sizeof(float);
  uint64_t moments = (uint64_t)(trc_optimizer_needs_m(c) + trc_optimizer_needs_v(c));
  uint64_t copies = (uint64_t)(o->load_best != 0) + (c->outer_optimizer ? 2 : 0);
  uint64_t bf16 = c->precision == TRC_BF16 && !m->device ? params / 2 : 0; /* gemm_bf16.c */
  return (planned_bytes){m->arena_bytes, moments * params, copies * params + bf16};
}

static double mib(uint64_t bytes) { return (double)bytes / 1048576.0; }

int trc_check_memory(const trc_model *m, const trc_options *o, trc_error *err) {
  const char *off = getenv("TRAINC_NO_MEMORY_CHECK");
  if (off && !strcmp(off, "1")) return 0;
  planned_bytes p = planned(m, o);
  uint64_t need = p.arena + p.optimizer + p.copies; /* each below the address space */
  trc_memory_room room = trc_memory_available();
  if (!room.source || need <= room.bytes) return 0; /* unreadable: nothing to check against */
  return trc_fail(err,
                  "this run needs %" PRIu64 " bytes (%.1f MiB: arena %" PRIu64
                  ", optimizer state %" PRIu64 ", copies of the parameters %" PRIu64
                  ") but %" PRIu64 " bytes (%.1f MiB) may be used (%s); build the trainer with "
                  "`checkpoint auto --memory SIZE` or a smaller batch (TRAINC_NO_MEMORY_CHECK=1 "
                  "skips this check)",
                  need, mib(need), p.arena, p.optimizer, p.copies, room.bytes, mib(room.bytes),
                  room.source);
}
