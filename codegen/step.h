/* step.h — the training step, described once (codegen-internal).
 *
 * step(s) is one optimizer step, as llm.c's train_gpt2.c writes it. Its
 * operations, in order, are this list; the C and CUDA printer (c_step.c)
 * and the LLVM builder (llvm_step.c) each walk it, printing or building
 * each operation, so the step's logic lives here. A device backend
 * replaces the operations it does differently (StepForm.ops) and fills in
 * the ones that only a device has (copies up and down), which the host
 * backends leave empty. Evaluation does not run through step(): the
 * runtime calls forward() and backward(A, NULL) itself (a device's
 * eval_forward, docs/cuda.md). */
#ifndef TRAINC_STEP_H
#define TRAINC_STEP_H

#include "codegen.h"

/* (operation, what it does): the step's body in order. */
#define TRAINC_STEP_OPS(X)                                                                    \
  X(SETTINGS, "the run's settings: window, gradient averaging, overlap, loss seed")           \
  X(ZERO_GRADIENTS, "the gradient region to zero")                                            \
  X(WINDOW_BEGIN, "for each micro-batch k of the accumulation window:")                       \
  X(LOAD_MICRO_BATCH, "its rows, dropout key and training flag")                              \
  X(STORE_LOSS_SEED, "the loss seed backward scales the objective by")                        \
  X(INPUTS_TO_DEVICE, "a device's copy of them (host: nothing)")                              \
  X(FORWARD, "forward()")                                                                     \
  X(ADD_LOSS, "the micro-batch's loss added to the window's")                                 \
  X(BACKWARD, "backward(), handed the step on the last micro-batch when buckets overlap")     \
  X(WINDOW_END, "the end of the window")                                                      \
  X(LOSS_FROM_DEVICE, "a device's window loss read back (host: nothing)")                     \
  X(SYNC_GRADIENTS, "wait for the buckets' all-reduces, or all-reduce the whole region")      \
  X(MEAN_LOSS, "the window's mean loss; no update when it is not finite")                     \
  X(UPDATE, "clipping and the optimizer update")                                              \
  X(END_ROUND, "LocalSGD's parameter average when a round ends")

typedef enum {
#define STEP_ENUM(op, what) STEP_##op,
  TRAINC_STEP_OPS(STEP_ENUM)
#undef STEP_ENUM
  STEP_OPS
} StepOp;

/* The named places of step() in the arena, named so in the C it prints and
 * in the LLVM values it builds. */
typedef struct {
  uint64_t gradients, gradient_bytes; /* the trained parameters' gradients */
  uint64_t loss_seed, loss;           /* f32 each */
} StepPlaces;

static inline StepPlaces step_places(const Program *p) {
  return (StepPlaces){.gradients = p->grad_offset, .gradient_bytes = p->trained_bytes,
                      .loss_seed = p->seed_offset, .loss = p->offset[p->g->loss]};
}

/* The step's kernel calls as --kernel-times numbers them (the sites of
 * trc_kernel_done, runtime/trainc.h): forward()'s in order, then
 * backward()'s. Call i of the list ids (p->forward or p->backward) is site
 * step_site(p, ids, i); site s calls kernel step_site_node(p, s). */
static inline int step_sites(const Program *p) { return p->n_forward + p->n_backward; }
static inline int step_site(const Program *p, const int *ids, int i) {
  return (ids == p->backward ? p->n_forward : 0) + i;
}
static inline int step_site_node(const Program *p, int site) {
  return site < p->n_forward ? p->forward[site] : p->backward[site - p->n_forward];
}

#endif
