/* passes.h — the passes over the tensor graph: autodiff, then the schedule and
 * the memory plan that turn it into a Program every backend prints or builds.
 *
 * The whole interface of the passes stage. Later issues add the checkpoint
 * planner between autodiff and the schedule (it decides which forward values
 * the Program keeps and which it recomputes). */
#ifndef TRAINC_PASSES_H
#define TRAINC_PASSES_H

#include "ir.h"

/* Appends the backward graph of g->loss with respect to every parameter.
 * Gradient contributions to a parameter are marked grad_of_param: their
 * kernels add into the parameter's gradient slot. Sets g->loss_seed. */
void autodiff(Graph *g);

#define ARENA_ALIGN 64

/* A scheduled, memory-planned training program.
 * Arena layout: [parameters | gradients (same layout) | inputs | loss seed,
 * rng key, training flag | activations]. Parameters and gradients are each one contiguous f32 block so
 * that optimizers and all-reduces are single flat loops. */
typedef struct {
  Graph *g;
  int *forward, n_forward;   /* node ids computed by forward(), in order */
  int *backward, n_backward; /* node ids computed by backward(), in order */
  uint64_t *offset;          /* per node id: byte offset of its value */
  Kernel **kernels;          /* per node id: its loop nest (NULL: GEMM or leaf) */
  uint64_t param_offset, param_bytes;
  uint64_t grad_offset;      /* gradient of param p at offset[p] - param_offset + grad_offset */
  uint64_t input_offset, input_bytes;
  uint64_t seed_offset;
  uint64_t rng_key_offset, training_offset; /* dropout's key (u64) and train flag (f32) */
  uint64_t activation_offset, activation_bytes; /* peak of the planned workspace */
  uint64_t arena_bytes;
} Program;

/* Orders the graph's live nodes into forward and backward, lowers every kernel
 * to its loop nest and gives every value an arena offset from liveness. */
Program *program_build(Graph *g);
void program_free(Program *p);

/* Byte offset of the gradient slot of parameter node `param`. */
uint64_t program_grad_offset(const Program *p, int param);

#endif
