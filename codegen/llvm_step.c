/* llvm_step.c — forward(), backward() and step(), the last built by
 * walking the step's operations (step.h). */
#include "llvm_gen.h"
#include "step.h"

/* ---- forward, backward, step ---- */

/* Kernel id's call and its --kernel-times mark (runtime/trainc.h). */
static void call_kernel(Gen *g, LLVMValueRef arena, int id, int site) {
  llvm_call_kernel(g, arena, id);
  LLVMValueRef at = i32c(g, site);
  call_ext(g, "trc_kernel_done", g->void_t, &at, 1);
}

Callee llvm_define_forward(Gen *g) {
  Callee c = define(g, "forward", g->void_t, &g->ptr, 1);
  call_ext(g, "trc_kernel_start", g->void_t, NULL, 0);
  for (int i = 0; i < g->p->n_forward; i++)
    call_kernel(g, LLVMGetParam(c.fn, 0), g->p->forward[i], step_site(g->p, g->p->forward, i));
  LLVMBuildRetVoid(g->b);
  return c;
}

/* `if (s) trc_step_bucket_ready(s, first, count)` for the buckets final
 * after backward kernel `at` (-1: before the first). */
static void buckets_ready(Gen *g, LLVMValueRef s, int at) {
  for (int b = 0; b < g->p->n_buckets; b++) {
    const GradBucket *bk = &g->p->buckets[b];
    if (bk->ready != at) continue;
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(g->b));
    LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(g->ctx, fn, "bucket_ready");
    LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(g->ctx, fn, "");
    LLVMBuildCondBr(g->b, LLVMBuildIsNotNull(g->b, s, ""), then, next);
    LLVMPositionBuilderAtEnd(g->b, then);
    LLVMValueRef args[3] = {s, u64c(g, bk->first), u64c(g, bk->count)};
    call_ext(g, "trc_step_bucket_ready", g->void_t, args, 3);
    LLVMBuildBr(g->b, next);
    LLVMPositionBuilderAtEnd(g->b, next);
  }
}

Callee llvm_define_backward(Gen *g) {
  LLVMTypeRef params[2] = {g->ptr, g->ptr};
  Callee c = define(g, "backward", g->void_t, params, 2);
  LLVMValueRef a = LLVMGetParam(c.fn, 0), s = LLVMGetParam(c.fn, 1);
  call_ext(g, "trc_kernel_start", g->void_t, NULL, 0);
  buckets_ready(g, s, -1);
  for (int i = 0; i < g->p->n_backward; i++) {
    call_kernel(g, a, g->p->backward[i], step_site(g->p, g->p->backward, i));
    buckets_ready(g, s, i);
  }
  LLVMBuildRetVoid(g->b);
  return c;
}

/* trc_step_NAME(s): the runtime's answer, of type ret. */
static LLVMValueRef ask(Gen *g, const char *name, LLVMTypeRef ret, LLVMValueRef s) {
  char full[64];
  snprintf(full, sizeof full, "trc_step_%s", name);
  return call_ext(g, full, ret, &s, 1);
}

/* `if (cond) trc_step_NAME(s);` and goes on after it. */
static void do_if(Gen *g, LLVMValueRef cond, const char *name, LLVMValueRef s) {
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(g->b));
  LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(g->ctx, fn, name);
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(g->ctx, fn, "");
  LLVMBuildCondBr(g->b, cond, then, next);
  LLVMPositionBuilderAtEnd(g->b, then);
  ask(g, name, g->void_t, s);
  LLVMBuildBr(g->b, next);
  LLVMPositionBuilderAtEnd(g->b, next);
}

/* What step(s) has built so far: its settings and named places (step.h). */
typedef struct {
  LLVMValueRef fn, s, a, window, average, overlap, seed, loss_sum, mean;
  LLVMValueRef loss_seed, loss, k;
  Loop window_loop;
} StepState;

static void build_settings(Gen *g, StepState *st) {
  StepPlaces places = step_places(g->p);
  LLVMValueRef zero32 = i32c(g, 0);
  st->loss_sum = LLVMBuildAlloca(g->b, g->f64, "loss_sum");
  LLVMBuildStore(g->b, LLVMConstReal(g->f64, 0), st->loss_sum);
  st->a = ask(g, "arena", g->ptr, st->s);
  LLVMSetValueName2(st->loss_seed = at(g, st->a, places.loss_seed), "loss_seed", 9);
  LLVMSetValueName2(st->loss = at(g, st->a, places.loss), "loss", 4);
  st->window = ask(g, "micro_batches", g->i64, st->s);
  st->average =
      LLVMBuildICmp(g->b, LLVMIntNE, ask(g, "averages_gradients", g->i32, st->s), zero32, "");
  LLVMValueRef overlaps = LLVMBuildICmp(g->b, LLVMIntNE, ask(g, "overlaps", g->i32, st->s), zero32, "");
  st->overlap = LLVMBuildAnd(g->b, st->average, overlaps, "overlap");
  st->seed = ask(g, "loss_seed", g->f32, st->s);
}

static void build_add_loss(Gen *g, StepState *st) {
  LLVMValueRef loss = LLVMBuildFPExt(g->b, LLVMBuildLoad2(g->b, g->f32, st->loss, ""), g->f64, "");
  LLVMBuildStore(g->b, LLVMBuildFAdd(g->b, LLVMBuildLoad2(g->b, g->f64, st->loss_sum, ""), loss, ""),
                 st->loss_sum);
}

/* backward(A, k == window - 1 && overlap ? s : NULL) */
static void build_backward(Gen *g, StepState *st, Callee backward) {
  LLVMValueRef last = LLVMBuildICmp(g->b, LLVMIntEQ, st->k,
                                    LLVMBuildSub(g->b, st->window, i64c(g, 1), ""), "");
  LLVMValueRef hand = LLVMBuildSelect(g->b, LLVMBuildAnd(g->b, last, st->overlap, ""), st->s,
                                      LLVMConstNull(g->ptr), "");
  call(g, backward, (LLVMValueRef[]){st->a, hand}, 2);
}

/* The mean loss; returns it at once when it is not finite (no update: the
 * runtime stops). */
static void build_mean_loss(Gen *g, StepState *st) {
  st->mean = LLVMBuildFDiv(g->b, LLVMBuildLoad2(g->b, g->f64, st->loss_sum, ""),
                           LLVMBuildSIToFP(g->b, st->window, g->f64, ""), "mean");
  Callee fabs64 = llvm_intrinsic(g, "llvm.fabs", g->f64);
  LLVMValueRef finite = LLVMBuildFCmp(g->b, LLVMRealONE, call(g, fabs64, &st->mean, 1),
                                      LLVMConstReal(g->f64, INFINITY), "");
  LLVMBasicBlockRef update = LLVMAppendBasicBlockInContext(g->ctx, st->fn, "update");
  LLVMBasicBlockRef stop = LLVMAppendBasicBlockInContext(g->ctx, st->fn, "not_finite");
  LLVMBuildCondBr(g->b, finite, update, stop);
  LLVMPositionBuilderAtEnd(g->b, stop);
  LLVMBuildRet(g->b, st->mean);
  LLVMPositionBuilderAtEnd(g->b, update);
}

/* One operation of the step (step.h) as c_step.c prints it for the host. */
static void build_op(Gen *g, StepState *st, StepOp op, Callee forward, Callee backward) {
  switch (op) {
  case STEP_SETTINGS: build_settings(g, st); break;
  case STEP_ZERO_GRADIENTS:
    call_ext(g, "trc_step_zero_gradients", g->void_t, &st->s, 1);
    break;
  case STEP_WINDOW_BEGIN: st->k = llvm_loop_begin(g, st->window, &st->window_loop); break;
  case STEP_LOAD_MICRO_BATCH:
    call_ext(g, "trc_step_micro_batch", g->void_t, (LLVMValueRef[]){st->s, st->k}, 2);
    break;
  case STEP_STORE_LOSS_SEED: LLVMBuildStore(g->b, st->seed, st->loss_seed); break;
  case STEP_INPUTS_TO_DEVICE: break;
  case STEP_FORWARD: call(g, forward, &st->a, 1); break;
  case STEP_ADD_LOSS: build_add_loss(g, st); break;
  case STEP_BACKWARD: build_backward(g, st, backward); break;
  case STEP_WINDOW_END: llvm_loop_end(g, &st->window_loop); break;
  case STEP_LOSS_FROM_DEVICE: break;
  case STEP_SYNC_GRADIENTS:
    do_if(g, st->overlap, "wait_gradients", st->s);
    do_if(g, LLVMBuildAnd(g->b, st->average, LLVMBuildNot(g->b, st->overlap, ""), ""),
          "allreduce_gradients", st->s);
    break;
  case STEP_MEAN_LOSS: build_mean_loss(g, st); break;
  case STEP_UPDATE:
    ask(g, "clip_gradients", g->void_t, st->s);
    ask(g, "update", g->void_t, st->s);
    break;
  case STEP_END_ROUND:
    do_if(g, LLVMBuildICmp(g->b, LLVMIntNE, ask(g, "ends_round", g->i32, st->s), i32c(g, 0), ""),
          "average_parameters", st->s);
    break;
  case STEP_OPS: break;
  }
}

/* step(s): the step's operations (step.h) in order, returning the mean loss. */
Callee llvm_define_step(Gen *g, Callee forward, Callee backward) {
  Callee c = define(g, "step", g->f64, &g->ptr, 1);
  StepState st = {.fn = c.fn, .s = LLVMGetParam(c.fn, 0)};
  for (int op = 0; op < STEP_OPS; op++) build_op(g, &st, (StepOp)op, forward, backward);
  LLVMBuildRet(g->b, st.mean);
  return c;
}

