/* internal.h — helpers shared by the files of the passes stage (not part of
 * its interface, which is passes.h). */
#ifndef TRAINC_PASSES_INTERNAL_H
#define TRAINC_PASSES_INTERNAL_H

#include "passes.h"

static inline uint64_t align_up(uint64_t x) { return (x + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN; }

static inline uint64_t node_bytes(const Node *n) {
  return (uint64_t)shape_numel(&n->shape) * (uint64_t)dtype_size(n->dtype);
}

/* Set by the runtime, never computed (inputs, parameters, the loss seed,
 * the dropout key and training flag). */
static inline bool is_leaf(const Node *n) { return op_info(n->op)->op_class == OPC_LEAF; }

/* A plan's predicted time over `off`'s: its recompute kernels less what
 * backward saves reading their values from the cache (the credit), never
 * below zero. The credit can exceed a recompute of a few microseconds
 * (fashion_cnn's cast of its u8 images, remade from 100 KB where the stored
 * value is read as 400 KB: 8 us against 4), a difference below what the
 * model resolves; priced below `off`, such a plan would make a larger
 * budget, where `off` fits, look slower than a smaller one. */
static inline double recompute_cost(double recompute_seconds, double cache_credit) {
  double cost = recompute_seconds - cache_credit;
  return cost > 0 ? cost : 0;
}

/* live[i]: node i must be computed (or is a leaf that is read): it reaches
 * the loss, the prediction or a parameter's gradient. Caller frees. */
bool *live_nodes(const Graph *g);

/* The fixed regions' layout: parameters (trained first), their gradients,
 * inputs, the scalars; activation_offset after them (memplan.c). */
void place_leaves(Program *p);

/* Candidates' true figures remembered across the budget searches of one
 * graph and profile (a sweep's budgets share most of their candidates). */
typedef struct PlanMemo PlanMemo;
PlanMemo *plan_memo_new(void);
void plan_memo_free(PlanMemo *memo);

/* plan_checkpoints without the message: NULL when no plan fits spec's
 * budget, *least_peak then the smallest peak found (the sweep asks this of
 * budgets it knows may be too small). memo (NULL: none) holds candidates
 * realized by earlier calls with the same graph and profile. */
Plan *plan_fitting(const Graph *g, CheckpointSpec spec, const MachineProfile *m,
                   const ProgramOptions *o, uint64_t *least_peak, PlanMemo *memo);

/* Which steps may fuse into their reader: a fused value computed in
 * forward() (FUSE_FORWARD), in backward() (FUSE_BACKWARD), both or none;
 * FUSE_ALL_STORED: both, and values with several readers into the first,
 * which stores them (stored_by). */
typedef enum { FUSE_NONE, FUSE_FORWARD, FUSE_BACKWARD, FUSE_ALL, FUSE_ALL_STORED } FuseScope;
/* Fuses the pointwise steps of scope into their one reader (fused_into), or
 * into the first of their readers, which then stores them for the others
 * (stored_by); rewrites the readers' kernels and drops the fused steps from
 * forward and backward. Runs on a program with kernels, before its memory
 * plan (program_fuse_widest picks the scope). */
void program_fuse(Program *p, FuseScope scope);
/* The step whose kernel computes id: id itself unless it was fused or is
 * stored by a reader. */
int fused_consumer(const Program *p, int id);

#endif
