/* trainc.h — the ABI between the code trainc generates and the runtime.
 *
 * A generated trainer is one C file that includes this header and nothing
 * else of the runtime: it defines its kernels, forward(), backward(), the
 * training step step(), and a trc_model describing its arena, then calls
 * trc_main(). The compiler includes this header too (ir/ir.h), so the
 * train-config struct, its enums and their names exist once, for both sides.
 * The runtime library's own API (data, optimizers, files, communication)
 * is trainc_rt.h, which includes this one — as Lua's lauxlib.h stands on
 * lua.h.
 *
 * Layout contract (the compiler writes it, the runtime reads it):
 *   - one arena of `arena_bytes`, 64-byte aligned, allocated once;
 *   - all parameters are f32 and contiguous: [param_offset, +param_count*4),
 *     the trained ones first: [param_offset, +trained_count*4), then the
 *     frozen ones (`freeze`), which have no gradient and no optimizer state;
 *   - the trained parameters' gradients are contiguous with the same layout
 *     at grad_offset, so an optimizer or an all-reduce is one flat loop over
 *     trained_count floats;
 *   - each input has a fixed slot of batch*example_bytes at its offset;
 *   - forward() reads the inputs and parameters and writes loss (and predict);
 *   - backward() must follow forward(); it ADDS d(loss_seed*loss)/d(param)
 *     into the gradient region, where loss_seed is the f32 at
 *     loss_seed_offset (step() stores it before each micro-batch);
 *   - dropout reads a u64 key at rng_key_offset and an f32 flag at
 *     training_offset: step() has the runtime set the key before each
 *     training micro-batch (from seed and the micro-batch's index) and the
 *     flag to 1; evaluation and sampling set it to 0. So a kernel that is run
 *     again (recompute, backward) regenerates the same mask.
 *
 * The step (the generated step(), called by the runtime's loop over
 * optimizer steps): zero the gradients; for each micro-batch of the window,
 * load it, store the loss seed, forward, read the loss, backward; the
 * gradient all-reduce when the step averages gradients (started bucket by
 * bucket inside the last backward, or the whole region after it); clipping;
 * the optimizer; LocalSGD's parameter average when a round ends. The
 * trc_step_* functions below are what it calls for data, optimizer math and
 * communication; settings (window, clip, sync mode) stay run-time values
 * behind them. */
#ifndef TRAINC_H
#define TRAINC_H

#include <stdint.h>

#ifdef __cplusplus /* the CUDA backend's .cu, compiled by nvcc or as host C++ */
extern "C" {
#endif

#define TRC_MAX_RANK 8

/* Enumerations as X-macro lists, X(ENUM_CONSTANT, "word"): the word is how
 * model files and the trainer's --help spell it. Expand with TRC_ENUM_VALUE
 * for the enum, TRC_ENUM_IDENT for the constants' names as strings (what the
 * compiler prints), TRC_ENUM_WORD for the words. */
#define TRC_ENUM_VALUE(e, word) e,
#define TRC_ENUM_IDENT(e, word) #e,
#define TRC_ENUM_WORD(e, word) word,
#define TRC_ENUM_ONE(e, word) +1

#define TRC_DTYPES(X) X(TRC_F32, "f32") X(TRC_I32, "i32") X(TRC_U8, "u8")
typedef enum { TRC_DTYPES(TRC_ENUM_VALUE) } trc_dtype;

typedef struct {
  const char *name;       /* model-file name: `image` → reads image.npy */
  trc_dtype dtype;
  int rank;               /* dims[0] is the micro-batch B */
  int64_t dims[TRC_MAX_RANK];
  uint64_t offset;        /* bytes into the arena */
  uint64_t example_bytes; /* bytes of one example (product of dims[1..]) */
  int64_t index_limit;    /* integer inputs used as indices (class labels,
                             token ids): every value must lie in [0, limit);
                             0 when the input is not an index */
} trc_input;

/* a, b of trc_param: normal: mean, std; uniform: low, high; xavier:
 * uniform ±sqrt(6/(fan_in+fan_out)) * a (gain); he: normal(0,
 * sqrt(2/fan_in)) * a (gain). */
#define TRC_INIT_KINDS(X)                                                                          \
  X(TRC_INIT_ZEROS, "zeros") X(TRC_INIT_ONES, "ones") X(TRC_INIT_NORMAL, "normal")                 \
  X(TRC_INIT_UNIFORM, "uniform") X(TRC_INIT_XAVIER, "xavier") X(TRC_INIT_HE, "he")
typedef enum { TRC_INIT_KINDS(TRC_ENUM_VALUE) } trc_init_kind;

/* Tensor names no parameter may take (the compiler refuses them): the
 * .safetensors header's own key, and the namespace of the arrays a state
 * file keeps beside the parameters (state.c: "trainc.optimizer.m", ...). */
#define TRC_SAFETENSORS_METADATA "__metadata__"
#define TRC_STATE_PREFIX "trainc."

/* Whether the pattern [pattern, end) matches all of name, where '*' matches
 * any run of characters (one-star backtracking: O(len^2)). The one glob of
 * the compiler (`freeze`, allowed patterns) and the runtime (--init). */
static inline int trc_glob_match(const char *pattern, const char *end, const char *name) {
  const char *p = pattern, *star = 0, *resume = 0;
  while (*name) {
    if (p < end && *p == '*') {
      star = p++;
      resume = name;
    } else if (p < end && *p == *name) {
      p++, name++;
    } else if (star) {
      p = star + 1;
      name = ++resume;
    } else {
      return 0;
    }
  }
  while (p < end && *p == '*') p++;
  return p == end;
}

typedef struct {
  const char *name;       /* as in the plan and in .safetensors files: "h1.weight" */
  int rank;
  int64_t dims[TRC_MAX_RANK];
  uint64_t offset;        /* bytes into the arena (inside the parameter region) */
  uint64_t count;         /* number of f32 elements */
  trc_init_kind init;
  float a, b;
  int64_t fan_in, fan_out;
  int decay;              /* 1 when weight decay applies (weights), 0 (biases, norms) */
  int frozen;             /* 1: never trained (after the trained ones in the arena) */
  const char *file_name;  /* its name in weight files (a `weights` block's `map`), NULL: name */
  int transposed;         /* 1: weight files hold this [out, in] matrix as [in, out] */
} trc_param;

#define TRC_OPTIMIZERS(X) X(TRC_SGD, "sgd") X(TRC_ADAMW, "adamw")
typedef enum { TRC_OPTIMIZERS(TRC_ENUM_VALUE) } trc_optimizer_kind;

#define TRC_SCHEDULES(X)                                                                           \
  X(TRC_SCHED_CONSTANT, "constant") X(TRC_SCHED_LINEAR, "linear") X(TRC_SCHED_COSINE, "cosine")
typedef enum { TRC_SCHEDULES(TRC_ENUM_VALUE) } trc_schedule_kind;

/* What the GEMMs multiply: fp32, or inputs rounded to bf16 with fp32
 * accumulation (weights, gradients and optimizer state stay fp32). */
#define TRC_PRECISIONS(X) X(TRC_FP32, "fp32") X(TRC_BF16, "bf16")
typedef enum { TRC_PRECISIONS(TRC_ENUM_VALUE) } trc_precision;
enum { TRC_PRECISION_COUNT = 0 TRC_PRECISIONS(TRC_ENUM_ONE) };

#define TRC_LOSS_KINDS(X)                                                                          \
  X(TRC_LOSS_CROSS_ENTROPY, "cross_entropy") X(TRC_LOSS_MSE, "mse") X(TRC_LOSS_OTHER, "other")
typedef enum { TRC_LOSS_KINDS(TRC_ENUM_VALUE) } trc_loss_kind;

/* trc_train_config.metrics bits: bit i is metric word i of TRC_METRIC_WORDS,
 * reported as "eval_" + the word. f1 is Hugging Face's eval_f1: class 1's F1
 * for two classes, macro-F1 for more; f1_macro and f1_binary name one. */
enum {
  TRC_METRIC_LOSS = 1,
  TRC_METRIC_ACCURACY = 2,
  TRC_METRIC_F1 = 4,
  TRC_METRIC_F1_MACRO = 8,
  TRC_METRIC_F1_BINARY = 16,
};
#define TRC_METRIC_WORDS "loss", "accuracy", "f1", "f1_macro", "f1_binary"

/* The train block's run-time settings, one row each:
 *   X(KIND, name, RUN, "help")
 * KIND is how the field is stored, printed and parsed (the TRC_CFG_TYPE_*
 * below): I64, U64, F64, BOOL (int, 0 or 1), OPTIMIZER and SCHEDULE (the
 * enums above), METRICS (TRC_METRIC_* bits). RUN is 1 when the setting
 * shapes the trained weights, so that a resumable state saved under another
 * value is refused (the run's fingerprint, runtime/train/train.c); eval and log
 * settings do not, and epochs and the validation split enter the
 * fingerprint as the step count and the number of training examples. The
 * compiler prints the defaults from this table (codegen/c_backend.c), the
 * trainer lists them in --help. Shapes (batch) and the checkpoint policy are
 * compile-time only and live in the compiler's TrainConfig (ir/ir.h). */
#define TRC_TRAIN_CONFIG(X)                                                                        \
  X(I64, accumulate, 1, "micro-batches per optimizer step")                                       \
  X(I64, epochs, 0, "passes over the data (when steps is 0)")                                     \
  X(I64, steps, 0, "optimizer steps (0: run the epochs)")                                         \
  X(OPTIMIZER, optimizer, 1, "sgd or adamw")                                                      \
  X(F64, lr, 1, "peak learning rate")                                                             \
  X(F64, momentum, 1, "sgd's momentum")                                                           \
  X(F64, weight_decay, 1, "weight decay (weights only, not biases or norm scales)")               \
  X(F64, beta1, 1, "adamw's beta1")                                                               \
  X(F64, beta2, 1, "adamw's beta2")                                                               \
  X(F64, eps, 1, "adamw's eps")                                                                   \
  X(BOOL, nesterov, 1, "sgd's Nesterov momentum")                                                 \
  X(SCHEDULE, schedule, 1, "learning-rate schedule: constant, linear or cosine")                  \
  X(I64, warmup, 1, "optimizer steps of linear warm-up from 0")                                   \
  X(F64, min_lr, 1, "floor of the linear or cosine decay")                                        \
  X(F64, clip_norm, 1, "global gradient-norm clip (0: off)")                                      \
  X(U64, seed, 1, "seed of init, shuffling, dropout and gradcheck data")                          \
  X(BOOL, eval_every_epoch, 0, "evaluate after every epoch")                                      \
  X(I64, eval_every_steps, 0, "also evaluate every N optimizer steps (0: not)")                   \
  X(METRICS, metrics, 0, "evaluation metrics")                                                    \
  X(I64, log_every, 0, "optimizer steps between log records")                                     \
  X(F64, validation, 0, "share of --data held out (drawn by the seed) without --eval-data")      \
  X(I64, local_sgd, 1, "MPI: optimizer steps between parameter averages")                         \
  X(I64, local_sgd_warmup, 1, "MPI: first steps synchronous (gradients averaged)")                \
  X(BOOL, sync_gradients, 1, "MPI: average gradients every step (data parallel)")                 \
  X(BOOL, sync_optimizer_state, 1, "MPI: average the optimizer state at each sync too")           \
  X(BOOL, outer_optimizer, 1, "MPI: Nesterov outer step at each sync (DiLoCo)")                   \
  X(F64, outer_lr, 1, "MPI: the outer step's learning rate")                                      \
  X(F64, outer_momentum, 1, "MPI: the outer step's momentum")                                     \
  X(PRECISION, precision, 1, "GEMM inputs: fp32, or bf16 with fp32 accumulation")

#define TRC_CFG_TYPE_I64 int64_t
#define TRC_CFG_TYPE_U64 uint64_t
#define TRC_CFG_TYPE_F64 double
#define TRC_CFG_TYPE_BOOL int
#define TRC_CFG_TYPE_OPTIMIZER trc_optimizer_kind
#define TRC_CFG_TYPE_SCHEDULE trc_schedule_kind
#define TRC_CFG_TYPE_METRICS unsigned
#define TRC_CFG_TYPE_PRECISION trc_precision

/* The train block's policy, as compiled in; the trainer's flags override it. */
typedef struct {
#define TRC_CFG_FIELD(kind, name, run, help) TRC_CFG_TYPE_##kind name;
  TRC_TRAIN_CONFIG(TRC_CFG_FIELD)
#undef TRC_CFG_FIELD
} trc_train_config;

/* ---- the step's calls into the runtime ----
 * The runtime's state of the optimizer step under way: which micro-batches,
 * this step's learning rate, the ranks, the optimizer and the pending
 * all-reduces. Valid only during the step() call it is passed to. */
typedef struct trc_step trc_step;

char *trc_step_arena(trc_step *s);
/* Micro-batches in this step's window: accumulate, or fewer at the end of an
 * epoch. */
int64_t trc_step_micro_batches(const trc_step *s);
/* 1 when this step averages gradients over the ranks: `sync gradients`, or a
 * step within local_sgd_warmup. */
int trc_step_averages_gradients(const trc_step *s);
/* 1 when averaged gradients are all-reduced bucket by bucket during the last
 * backward (more than one rank, and not --no-overlap). */
int trc_step_overlaps(const trc_step *s);
/* 1/window, or 1/(window*ranks) when the step averages gradients, so that
 * the gradient is that of the mean loss over every example of the window.
 * With ignored labels (the loss is a sum): 1 / the labels that count in the
 * window (of every rank, when averaged); 0 when none does. */
float trc_step_loss_seed(const trc_step *s);
/* The gradient region to zero before a window's first backward: a pass
 * only where the last update did not already leave it so. */
void trc_step_zero_gradients(trc_step *s);
/* Micro-batch k of the window into the arena: its rows into the input
 * slots, its dropout key and the training flag. */
void trc_step_micro_batch(trc_step *s, int64_t k);
/* Gradient floats [first, first + count) are final: starts their all-reduce
 * (non-blocking; nothing may touch them until trc_step_wait_gradients). */
void trc_step_bucket_ready(trc_step *s, uint64_t first, uint64_t count);
/* Waits for the buckets' all-reduces. */
void trc_step_wait_gradients(trc_step *s);
/* All-reduces the whole gradient region (blocking). */
void trc_step_allreduce_gradients(trc_step *s);
/* Scales the gradients to the run's clip_norm (nothing when it is 0); their
 * norm before clipping is what the log reports as grad_norm. */
void trc_step_clip_gradients(trc_step *s);
/* One update of every parameter by the run's optimizer at this step's
 * learning rate. */
void trc_step_update(trc_step *s);
/* 1 when this step ends a LocalSGD round (never when it averaged gradients):
 * the parameters are then averaged, with the optional outer step, by
 * trc_step_average_parameters. */
int trc_step_ends_round(const trc_step *s);
void trc_step_average_parameters(trc_step *s);

/* ---- the step on a device (the CUDA backend, docs/cuda.md) ----
 * A device that keeps the parameters and the optimizer's state and updates
 * them itself calls these instead of trc_step_clip_gradients and
 * trc_step_update, with the same arithmetic (trc_sgd_element and
 * trc_adamw_element below, the norm's fixed order of additions). */

/* One optimizer step's floats, rounded from double once, as PyTorch does. */
typedef struct {
  trc_optimizer_kind kind;
  int nesterov;
  float lr, momentum, weight_decay; /* SGD; weight_decay is 0 for undecayed parameters */
  float decay, b1, b2, c1, c2, eps, step_size, bc2_sqrt; /* AdamW; decay is 1 for undecayed */
  double clip_norm;                                      /* 0: no clipping */
} trc_update_scalars;

/* Counts the optimizer step, as trc_step_update does, and gives its floats. */
trc_update_scalars trc_step_update_scalars(trc_step *s);
/* The host's optimizer state, `count` floats each: SGD's momentum buffer or
 * AdamW's first moment, and AdamW's second; NULL where the run keeps none. */
void trc_step_optimizer_state(trc_step *s, float **m, float **v);
/* DiLoCo's outer optimizer (runtime/train/sync.c): the host's anchor and outer
 * momentum, `count` floats each (NULL without an outer optimizer), which a
 * device keeps current as it does the optimizer's state, and the floats of
 * its step (trc_outer_element). */
typedef struct {
  float mu, keep, push; /* momentum, 1 - lr, lr * momentum */
} trc_outer_scalars;
void trc_step_outer_state(trc_step *s, float **anchor, float **momentum);
trc_outer_scalars trc_step_outer_scalars(const trc_step *s);
/* The gradients' norm before clipping, as the device computed it (the log's
 * grad_norm). */
void trc_step_set_grad_norm(trc_step *s, double norm);

/* trc_step_average_parameters averages the optimizer's state with the
 * parameters (`sync parameters optimizer_state`, on more than one rank). A
 * device that averages them itself (and takes DiLoCo's outer step when
 * trc_step_outer_state has an anchor) says so with
 * trc_step_parameters_averaged. */
int trc_step_averages_with_state(const trc_step *s);
void trc_step_parameters_averaged(trc_step *s);
/* A device summed `floats` floats over the ranks, in `seconds` (the log's
 * sync counters; the time its all-reduces ran on the device). */
void trc_step_device_synced(trc_step *s, uint64_t floats, double seconds);
/* A device's check before it starts a sync: values[0..count) are floats
 * [first, first + count) of its parameters, gradients or optimizer state
 * (one of its arrays); a NaN or infinity ends every rank with the host's
 * message (docs/trainer.md, Divergence). */
typedef enum { TRC_CHECK_PARAMETERS, TRC_CHECK_GRADIENTS, TRC_CHECK_STATE } trc_check_what;
void trc_step_stop_unless_finite(trc_step *s, const float *values, uint64_t first,
                                 uint64_t count, trc_check_what what);

/* The squared norm's order of additions: in double, over the blocks of
 * trc_norm_block(n) floats (at most TRC_NORM_BLOCKS), element i of a block
 * into lane i % TRC_NORM_LANES in order, the lanes folded in halves, then
 * the blocks in order. */
#define TRC_NORM_BLOCKS 1024
#define TRC_NORM_LANES 8
uint64_t trc_norm_block(uint64_t n);

/* A device backend's side of the arena (the CUDA backend; docs/cuda.md).
 * The host arena stays the runtime's: it loads data, initializes, saves and
 * evaluates there, and the generated code copies what its device computes
 * from or into it. The runtime starts the device before any work and
 * measures the device's high-water mark through these copies. */
typedef struct {
  const char *name;  /* "cuda", or "cuda-emulate" */
  /* Finds the device and allocates its arena; returns 0, or 1 after printing
   * why not (no GPU, no driver, too little memory). */
  int (*start)(void);
  /* Bytes [offset, offset + bytes) of the arena, device -> host and back. */
  void (*download)(char *arena, uint64_t offset, uint64_t bytes);
  void (*upload)(const char *arena, uint64_t offset, uint64_t bytes);
  /* The device updates the parameters and the optimizer's state in step():
   * host_current copies them to the host (the arena's parameters, the
   * optimizer's m and v, NULL when absent) when the device's are newer;
   * host_changed says the host wrote them, so the device takes them again
   * before its next step. */
  void (*host_current)(char *arena, float *m, float *v);
  void (*host_changed)(void);
  /* Evaluation of a model with predictions and labels (NULL: the runtime
   * brings the predictions to the host and counts there): eval_forward is
   * forward() that counts the predictions of the batch's first `rows` label
   * rows on the device instead of copying them down; eval_counts adds what
   * it counted since it was last called (as trc_metrics_add would have:
   * labels counted, correct, per class true and false positives and false
   * negatives, the confusion matrix when `confusion` is not NULL, the sum of
   * the rows' cross-entropy in row order) and starts again from zero. */
  void (*eval_forward)(char *arena, int64_t rows);
  void (*eval_counts)(int64_t *examples, int64_t *correct, int64_t *true_pos,
                      int64_t *false_pos, int64_t *false_neg, int64_t *confusion,
                      double *ce_sum);
} trc_device;

/* ---- --kernel-times ----
 * forward() and backward() call trc_kernel_start() first and
 * trc_kernel_done(site) after each kernel: site is the call's position in
 * the step's call lists (forward()'s calls, then backward()'s), its row of
 * trc_model.kernel_sites. Both do nothing unless the run measures its
 * kernels (--kernel-times FILE); then each call adds the time since the
 * last mark to its site (runtime/train/kernel_times.c). */
typedef struct {
  const char *op;    /* the kernel's op (its step's) */
  const char *value; /* the value it makes, by name; NULL: unnamed */
  int line;          /* the model-file line */
  /* The cost model's seconds for one call under each precision the run may
   * choose (trc_precision), by what they add to: forward, backward,
   * recompute (a kernel with values fused into it may recompute some of them
   * in backward). */
  double predicted[TRC_PRECISION_COUNT][3];
} trc_kernel_site;

void trc_kernel_start(void);
void trc_kernel_done(int site);

typedef struct trc_model {
  const char *name;          /* model name from the file */
  const char *source;        /* the .nn path it was compiled from (for --help) */
  int64_t batch;             /* micro-batch B, compiled into every shape */
  uint64_t arena_bytes;
  /* The one buffer outside the arena that GEMMs with bf16 operands round
   * them into (kernels/gemm_bf16.c), as planned: under precision bf16, and
   * under fp32 for the GEMMs --compress bf16 recomputes; 0: none. */
  uint64_t bf16_operand_bytes, rounded_operand_bytes;
  uint64_t param_offset, param_count, grad_offset;
  uint64_t trained_count;    /* floats of the trained parameters: the gradient region */
  /* File name patterns ('*' wildcards, ',' between patterns; NULL: none) that
   * --init accepts missing from, or unexpected in, a weight file. */
  const char *allow_missing, *allow_unexpected;
  int n_params;
  const trc_param *params;
  int n_inputs;
  const trc_input *inputs;
  uint64_t loss_offset;      /* f32 scalar written by forward() */
  uint64_t loss_seed_offset; /* f32 scalar read by backward() */
  trc_loss_kind loss_kind;
  int has_predict;           /* predict_offset holds f32[B, predict_rows, predict_classes] */
  uint64_t predict_offset;
  int64_t predict_classes;
  int64_t predict_rows;      /* rows of scores per example: 1, or T of a sequence model */
  /* The chunked loss head (docs/planner.md, *The loss head*): predict is the
   * logits x @ op(w) of trc_linear_cross_entropy, never stored whole. Then
   * predict_offset holds x, f32[B, predict_rows, head_dim]; w is at
   * head_weight_offset, [predict_classes, head_dim] when head_w_vd, else
   * [head_dim, predict_classes]; after forward(), head_stats_offset holds
   * each row's loss (f32[B * predict_rows]) followed by its argmax (as f32),
   * which evaluation counts; sampling and --dump compute the rows they need
   * (trc_predict_row). 0 for a model whose predict is stored. */
  int predict_head;
  uint64_t head_weight_offset, head_stats_offset;
  int64_t head_dim;
  int head_w_vd;
  int label_input;           /* index into inputs of the class labels (predict_rows
                                per example), -1 if none */
  int token_input;           /* sequence models: the i32 input [B, predict_rows] of
                                token ids that sampling feeds a context, -1 if none */
  /* cross_entropy(..., ignore = L): the labels of input ignore_input may
   * also be L (< 0), and such rows count for nothing. The loss is then the
   * sum over the rows that count, which the runtime divides by their number
   * in the whole window (the loss seed). 0 without. */
  int has_ignore;
  int ignore_input;
  int64_t ignore_label;
  uint64_t rng_key_offset;   /* u64 dropout key, set per training micro-batch */
  uint64_t training_offset;  /* f32: 1 while training, 0 otherwise */
  void (*forward)(char *arena);
  /* step: NULL, or the step whose gradient buckets it hands to
   * trc_step_bucket_ready as they become final. */
  void (*backward)(char *arena, trc_step *step);
  /* One optimizer step (see above); returns the mean of its micro-batch
   * losses. When that is not finite, it returns after the gradient
   * all-reduce and before the update, and the runtime stops. */
  double (*step)(trc_step *step);
  const char *checkpoint;    /* the checkpoint policy it was planned with */
  int n_kernel_sites;        /* forward()'s and backward()'s kernel calls */
  const trc_kernel_site *kernel_sites;
  /* the cost model's seconds of a micro-batch's share of the optimizer step
   * (zeroing, norm, update) under each precision */
  double predicted_update[TRC_PRECISION_COUNT];
  /* 1: the predictions were priced with a machine profile (trainc calibrate,
   * --profile); 0: with trainc's built-in figures, another machine's */
  int predicted_calibrated;
  trc_train_config defaults;
  const trc_device *device;  /* NULL: the host arena is the only one (the C backend) */
} trc_model;

/* Runs the trainer's command line: parses flags, loads data, initializes or
 * loads weights, trains, evaluates, saves. Returns the process exit status:
 * 0 success, 1 runtime failure (bad data, NaN loss, failed gradcheck, I/O),
 * 2 bad command line. Never calls exit(); everything it allocates is freed. */
int trc_main(const trc_model *model, int argc, char **argv);

/* Every function of the runtime that generated code calls, one list: the
 * LLVM JIT (codegen/llvm_jit.c) resolves the modules' calls from it, so a
 * new entry point the backends call is added here beside its declaration
 * above. (The C and CUDA trainers reach them through this header.) */
#define TRC_ENTRY_POINTS(X)                                                                        \
  X(trc_main) X(trc_step_arena) X(trc_step_micro_batches) X(trc_step_averages_gradients)           \
  X(trc_step_overlaps) X(trc_step_loss_seed) X(trc_step_zero_gradients) X(trc_step_micro_batch)    \
  X(trc_step_bucket_ready) X(trc_step_wait_gradients) X(trc_step_allreduce_gradients)              \
  X(trc_step_clip_gradients)                                                                       \
  X(trc_step_update) X(trc_step_ends_round) X(trc_step_average_parameters) X(trc_conv2d)           \
  X(trc_gemm) X(trc_parallel_for) X(trc_linear_cross_entropy) X(trc_bf16_pack) X(trc_bf16_unpack)           \
  X(trc_gemm_rounded) X(trc_gemm_f32) X(trc_causal_attention) X(trc_causal_attention_grad) X(trc_kernel_start)    \
  X(trc_kernel_done)

/* ---- threads ----
 * A trainer computes on one set of threads (--threads N; by default
 * OMP_NUM_THREADS, else every CPU it may run on): the runtime's pool
 * (runtime/kernels/parallel.c), which runs the loop kernels, the runtime's flat
 * loops and the GEMMs (trc_gemm: single-threaded oneDNN calls). Idle
 * threads spin a few microseconds, then sleep. */

/* A loop body: iterations [lo, hi) of a loop whose iterations are
 * independent (for a kernel's loop, kernel_mark_parallel in ir/ir.h). */
typedef void (*trc_loop_body)(void *ctx, int64_t lo, int64_t hi);
/* Runs body over [0, n) on the trainer's threads, cut into one contiguous
 * block per thread by a fixed static partition: with T = min(threads, n),
 * thread t runs [t*q + min(t, r), (t+1)*q + min(t+1, r)) where q = n / T and
 * r = n % T (the caller is thread 0). Returns when every block is done.
 * Runs body(ctx, 0, n) on the caller when T is 1 or when called from inside
 * a body. Results must not depend on the partition: a body whose iterations
 * combine (a sum) combines fixed blocks of its own, as trc_grad_norm.
 * Not for two callers at once (a trainer has one). */
void trc_parallel_for(int64_t n, trc_loop_body body, void *ctx);
/* The number of threads trc_parallel_for runs on. */
int trc_threads(void);

/* C = op(A) op(B) + beta*C for batch x heads row-major matrices (matrix
 * (o, h) of X at x + o*stride_x + h*head_stride_x, row r at r*ldx: heads
 * interleaved in a row, [.., rows, heads*cols], or not; op transposes when
 * ta / tb), on the trainer's threads. The work is cut into single-threaded
 * oneDNN sgemm calls by a partition that depends on the shapes and the
 * machine only — for a batch of fewer than 8 (the heads not counted: one
 * call per head of a batch, as the CUDA backend makes, is cut the same
 * way), the larger of m and n is split into the largest power of two of
 * parts, at most 16 and at most twice the CPUs the process may run on,
 * that leaves each at least 128 — never on the
 * number of threads: a BLAS's own threading can change the result with the
 * thread count (OpenBLAS's did for K = 784: most of C), this does not. Under
 * precision bf16 (trc_set_precision) each part is a oneDNN matmul of A and
 * B rounded to bf16, accumulated in f32. */
void trc_gemm(int64_t batch, int64_t heads, int ta, int tb, int64_t m, int64_t n, int64_t k,
              const float *a, int64_t lda, int64_t stride_a, int64_t head_stride_a,
              const float *b, int64_t ldb, int64_t stride_b, int64_t head_stride_b, float beta,
              float *c, int64_t ldc, int64_t stride_c, int64_t head_stride_c);
/* trc_gemm with A and B rounded to bf16 whatever the precision (its bf16
 * path): a GEMM the plan recomputes under `--compress bf16`. */
void trc_gemm_rounded(int64_t batch, int64_t heads, int ta, int tb, int64_t m, int64_t n,
                      int64_t k, const float *a, int64_t lda, int64_t stride_a,
                      int64_t head_stride_a, const float *b, int64_t ldb, int64_t stride_b,
                      int64_t head_stride_b, float beta, float *c, int64_t ldc, int64_t stride_c,
                      int64_t head_stride_c);
/* trc_gemm in f32 whatever the precision: bmm's many small products, which
 * lose more to rounding their operands than bf16 gains them on the CPU. */
void trc_gemm_f32(int64_t batch, int64_t heads, int ta, int tb, int64_t m, int64_t n, int64_t k,
                  const float *a, int64_t lda, int64_t stride_a, int64_t head_stride_a,
                  const float *b, int64_t ldb, int64_t stride_b, int64_t head_stride_b, float beta,
                  float *c, int64_t ldc, int64_t stride_c, int64_t head_stride_c);

/* trc_gemm's dimensions by name, as a generated GEMM kernel holds them (a
 * static descriptor rather than twenty bare numbers); fields it leaves out
 * are 0, and batch and heads of 0 mean 1. trc_gemm_shaped is trc_gemm with
 * them: the same call, the same arithmetic. */
typedef struct {
  int64_t batch, heads;
  int trans_a, trans_b;
  int64_t m, n, k;
  int64_t lda, stride_a, head_stride_a;
  int64_t ldb, stride_b, head_stride_b;
  int64_t ldc, stride_c, head_stride_c;
  int accumulate; /* C += A B (beta 1) rather than C = A B */
  int rounded;    /* trc_gemm_rounded rather than trc_gemm */
  int f32;        /* trc_gemm_f32 rather than trc_gemm */
} trc_gemm_shape;

static inline void trc_gemm_shaped(const trc_gemm_shape *s, const float *a, const float *b,
                                   float *c) {
  (s->rounded ? trc_gemm_rounded : s->f32 ? trc_gemm_f32 : trc_gemm)(s->batch ? s->batch : 1, s->heads ? s->heads : 1, s->trans_a, s->trans_b, s->m, s->n,
           s->k, a, s->lda, s->stride_a, s->head_stride_a, b, s->ldb, s->stride_b,
           s->head_stride_b, s->accumulate ? 1.0f : 0.0f, c, s->ldc, s->stride_c,
           s->head_stride_c);
}

/* The chunked loss head: cross_entropy(x @ op(w), labels) and its
 * gradients without ever holding the [n, v] logits (docs/planner.md, *The
 * loss head*). x is [n, d]; w is [v, d] when w_vd (logits = x w^T), else
 * [d, v] (logits = x w); labels [n] are i32 in [0, v), or ignore_label when
 * has_ignore; *seed is the loss seed dl, set before forward(). Rows go in
 * blocks of `chunk` (the last may be shorter), each block's logits made in
 * `scratch` (chunk * v floats) by trc_gemm, then per row its max, argmax and
 * lse = max + logf(sum expf(l - max)) (the logsumexp kernel's arithmetic),
 * and in place g = (expf(l - lse) - onehot(label)) * dl * scale_r with
 * scale_r = 1/n (with ignore: 1 for a row that counts, 0 for an ignored
 * one); then the block's
 *   out[r*d .. r*d + d)  = dx rows: g @ op(w)^T (written, not added)
 *   dw                  += g^T x (in w's layout) when dw is not NULL
 *   out[n*d + r]         = the row's loss lse - l[label] (0 when ignored)
 *   out[n*d + n + r]     = the row's argmax as a float (the first maximum).
 * The loss itself (their mean, or their sum with ignore) is the graph's
 * next node. A seed of 0 (evaluation and sampling: trc_set_mode zeroes it)
 * wants no gradient: the logits' gradient and its two GEMMs are skipped, the
 * dx rows are 0 and dw is left as it is (what a 0 seed gives, but where a
 * logit is not finite). Blocks and partitions depend on the shapes only: the
 * same bits for any number of threads. */
void trc_linear_cross_entropy(int64_t n, int64_t d, int64_t v, int64_t chunk, int w_vd,
                              int has_ignore, int64_t ignore_label, const float *x,
                              const float *w, const int32_t *labels, const float *seed,
                              float *out, float *dw, float *scratch);

/* Causal self-attention per head (fused attention, docs/planner.md): q, k,
 * v and out [b, t, c], the heads interleaved in each row (c = heads * D);
 * out = softmax(q k^T * scale over the keys up to the row) v. Its gradient
 * from dy = d(out) into out [3, b, t, c]: dq, dk, dv. Neither holds more
 * than a block of rows' probabilities; the bits do not depend on the number
 * of threads (runtime/kernels/attention.c). */
void trc_causal_attention(int64_t b, int64_t t, int64_t c, int64_t heads, float scale,
                          const float *q, const float *k, const float *v, float *out);
/* The query rows of one of their blocks: as many as fill a block's
 * TRC_ATTENTION_BLOCK_FLOATS of scores (t of them a row), 1 to 64; each
 * (sequence, head, block) is one task (the compiler's cost model counts
 * them). */
enum { TRC_ATTENTION_BLOCK_FLOATS = 32768 };
static inline int64_t trc_attention_block_rows(int64_t t) {
  int64_t rows = TRC_ATTENTION_BLOCK_FLOATS / t;
  return rows < 1 ? 1 : rows > 64 ? 64 : rows;
}
void trc_causal_attention_grad(int64_t b, int64_t t, int64_t c, int64_t heads, float scale,
                               const float *q, const float *k, const float *v, const float *dy,
                               float *out);

/* Activations stored in bf16 (`--compress bf16`, docs/planner.md): pack
 * rounds n floats to bf16 (trc_round_bf16's rounding, to nearest even),
 * unpack widens n bf16 values back to floats (exact). On the trainer's
 * threads; the bits do not depend on how many. */
void trc_bf16_pack(int64_t n, const float *from, uint16_t *to);
void trc_bf16_unpack(int64_t n, const uint16_t *from, float *to);

/* A 2-D convolution as torch.nn.functional.conv2d computes it (square
 * kernel k, the same stride and zero padding on both axes) on NCHW images
 * [n, c, h, w] and OIHW weights [o, c, k, k], output [n, o, oh, ow]:
 *   TRC_CONV_FORWARD           a = x, b = w, out = y; plus bias[o] unless
 *                              bias is NULL, then max(y, 0) when relu
 *   TRC_CONV_BACKWARD_DATA     a = dy, b = w, out = dx
 *   TRC_CONV_BACKWARD_WEIGHTS  a = x, b = dy, out = dw (+= when accumulate)
 * on oneDNN's primitives, on the trainer's threads, cut into blocks of images
 * fixed by the shapes: bitwise the same for any number of threads
 * (runtime/kernels/conv.c). */
typedef enum { TRC_CONV_FORWARD, TRC_CONV_BACKWARD_DATA, TRC_CONV_BACKWARD_WEIGHTS } trc_conv_pass;
void trc_conv2d(int pass, int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t k,
                int64_t stride, int64_t pad, const float *a, const float *b, const float *bias,
                int relu, float *out, int accumulate);

/* ---- helpers for generated kernels ---- */

/* A kernel's parallel loop of n iterations and `work` innermost statements
 * in all: on the trainer's threads when work is at least
 * TRC_PARALLEL_MIN_WORK (starting the threads costs microseconds), else on
 * the caller. Compiling a trainer with -DTRC_PARALLEL_MIN_WORK=0 runs every
 * parallel loop on the threads (tests/e2e/threads.sh). */
#ifndef TRC_PARALLEL_MIN_WORK
#define TRC_PARALLEL_MIN_WORK 32768
#endif
static inline void trc_kernel_loop(int64_t n, int64_t work, trc_loop_body body, void *ctx) {
  if (work >= TRC_PARALLEL_MIN_WORK)
    trc_parallel_for(n, body, ctx);
  else
    body(ctx, 0, n);
}

/* Vector math. glibc's libmvec (2.35 and later, x86-64) has AVX2 and
 * AVX-512 versions of expf, logf, tanhf and erff, within 4 units in the last
 * place of the exact result (tests/codegen/vector_math.sh checks that bound
 * against libm over the whole float range). A generated file defines
 * TRC_VECTOR_MATH before including this header; for GCC these declarations
 * then say the vector versions exist, so a vectorized kernel loop calls them
 * instead of the scalar function once per element (with -fno-math-errno,
 * as trainc's default flags have; clang-19 is told the same by
 * -fveclib=libmvec). Trainers link -lmvec. */
#ifdef TRC_VECTOR_MATH
#include <math.h>
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) && \
    (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 35)
__attribute__((simd("notinbranch"))) float expf(float);
__attribute__((simd("notinbranch"))) float logf(float);
__attribute__((simd("notinbranch"))) float tanhf(float);
__attribute__((simd("notinbranch"))) float erff(float);
#endif
#endif

/* Before the functions of a kernel whose loops worth vectorizing end in a
 * tail (ir.h's Kernel.short_rows: a row of 7 or 14 pooling windows, a
 * causal softmax's row that ends at the diagonal): GCC's dynamic vectorizer
 * cost model, which vectorizes such a row with a tail, where the default flags' very-cheap model (kept
 * for the permute loop GCC 12 miscompiles under the others,
 * tests/codegen/permute_loop.c) leaves it scalar. fashion_cnn's 2x2
 * max-pool gradient over 14x14 images ran 4x faster (bench/RESULTS.md).
 * Empty for other compilers. */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define TRC_SHORT_ROWS __attribute__((optimize("vect-cost-model=dynamic")))
#else
#define TRC_SHORT_ROWS
#endif

#ifdef __CUDACC__ /* callable from CUDA kernels too */
#define TRC_KERNEL_FN static inline __host__ __device__
#else
#define TRC_KERNEL_FN static inline
#endif

#include <string.h> /* memcpy */

/* a's bits where take_a, else b's, picked by a mask made of the condition:
 * in a loop GCC 12 leaves scalar, and in a vectorized loop's scalar tail, it
 * compiles a float `cond ? a : b` as a branch on the data, mispredicted as
 * often as the data decides (dropout's random mask; a max-pool's windows).
 * The same bits, no branch. A GPU selects without branching: CUDA keeps the
 * plain form. */
TRC_KERNEL_FN float trc_pickf(int take_a, float a, float b) {
#ifdef __CUDACC__
  return take_a ? a : b;
#else
  uint32_t bits_a, bits_b, mask = -(uint32_t)(take_a != 0);
  memcpy(&bits_a, &a, sizeof bits_a), memcpy(&bits_b, &b, sizeof bits_b);
  bits_a = (bits_a & mask) | (bits_b & ~mask);
  memcpy(&a, &bits_a, sizeof a);
  return a;
#endif
}

/* fmaxf and fminf (a NaN operand yields the other one): the C library's are
 * calls that GCC does not inline or vectorize. Picked by a mask
 * (trc_pickf), both tests evaluated: as `b != b ? a : a > b ? a : b` GCC 12
 * branched on the data where it did not vectorize (a 2x2 max-pool over
 * 14x14 images ran 11x slower; by rows of scratch, the 7-wide one's rows'
 * tails made it 2.6x slower: bench/RESULTS.md). */
TRC_KERNEL_FN float trc_maxf(float a, float b) { return trc_pickf((b != b) | (a > b), a, b); }
TRC_KERNEL_FN float trc_minf(float a, float b) { return trc_pickf((b != b) | (a < b), a, b); }

/* A kernel's max or min reduction in its 16 lanes (ir.h's K_LANES): lane[l] =
 * trc_maxf(lane[l], e[l]) for every l (trc_minf for min), e the next 16
 * elements. GCC 12 vectorizes no loop of trc_maxf, whatever its form (every
 * softmax's max pass ran scalar, a branch an element), so under GCC and clang
 * the lanes are vectors and the two selects masks: the same answers. Two
 * vectors of 8: the width GCC stores the group in (its 256-bit preference on
 * these targets), so that each load is forwarded from one store. */
#define TRC_LANES 16
#if defined(__GNUC__) && !defined(__CUDACC__)
typedef float trc_lanes_f32 __attribute__((vector_size(8 * sizeof(float))));
typedef int32_t trc_lanes_i32 __attribute__((vector_size(8 * sizeof(int32_t))));

TRC_KERNEL_FN void trc_lanes_take(float *lane, const float *e, int max) {
  for (int half = 0; half < TRC_LANES; half += 8) {
    trc_lanes_f32 a, b;
    trc_lanes_i32 a_bits, b_bits;
    __builtin_memcpy(&a, lane + half, sizeof a);
    __builtin_memcpy(&b, e + half, sizeof b);
    trc_lanes_i32 keep = (b != b) | (max ? a > b : a < b); /* -1 where lane's a stays */
    __builtin_memcpy(&a_bits, &a, sizeof a);
    __builtin_memcpy(&b_bits, &b, sizeof b);
    trc_lanes_i32 taken = (a_bits & keep) | (b_bits & ~keep);
    __builtin_memcpy(lane + half, &taken, sizeof taken);
  }
}
#else
TRC_KERNEL_FN void trc_lanes_take(float *lane, const float *e, int max) {
  for (int l = 0; l < TRC_LANES; l++)
    lane[l] = max ? trc_maxf(lane[l], e[l]) : trc_minf(lane[l], e[l]);
}
#endif
/* Before a reduction's loop over a group of 16 lanes (a sum's, or the one
 * that computes a group for trc_lanes_maxf): GCC unrolls a 16-iteration
 * loop whole before its loop vectorizer runs; its block vectorizer then
 * leaves a group's selects as branches, and its loop vectorizer takes the
 * 16 unrolled statements of a sum across groups instead (8 groups a vector,
 * the loads strided: a causal softmax over 8 x 4 x 128 rows of 128 took
 * 830 us on one thread, 490 with the group kept a loop). */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define TRC_GROUP_LOOP _Pragma("GCC unroll 1")
#else
#define TRC_GROUP_LOOP
#endif
TRC_KERNEL_FN void trc_lanes_maxf(float *lane, const float *e) { trc_lanes_take(lane, e, 1); }
TRC_KERNEL_FN void trc_lanes_minf(float *lane, const float *e) { trc_lanes_take(lane, e, 0); }

/* An eager select (ir.h's kernel_mark_by_ranges): c > 0 ? a : b with
 * both a and b evaluated, as a function's arguments are, so that a C
 * compiler may vectorize it instead of branching around a load. Picked
 * by a mask (trc_pickf): dropout's loop, scalar until its draw converted
 * from 32 bits, branched on the random mask, mispredicted at dropout's
 * rate (fashion_cnn's dropout 2.9-3.1 ms a step, 1.2-1.4 by the mask). */
TRC_KERNEL_FN float trc_selectf(float c, float a, float b) { return trc_pickf(c > 0.0f, a, b); }

/* The bits of x rounded to bf16, to nearest even; a NaN stays a NaN (its
 * quiet bit set, so that dropping the low half cannot make it infinite).
 * What precision bf16 does to a GEMM's inputs: the CUDA trainer's rounding
 * kernel calls it, and so does the C trainer's GEMM (kernels/gemm_bf16.c)
 * where it does not round 16 at a time with AVX512_BF16's instruction
 * (tests/runtime/test_kernel_helpers.c checks that the two agree). */
TRC_KERNEL_FN uint16_t trc_round_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  uint32_t rounded = (u + 0x7fffu + (u >> 16 & 1)) >> 16, quiet_nan = u >> 16 | 0x40;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded); /* no branch */
}

#include <math.h> /* sqrtf, exp, log */

/* Evaluation's numbers of one row of logits, the host's and a device's
 * (metrics.c, the CUDA trainer): the index of the largest logit (the first
 * on ties, as argmax does), and -log softmax(x)[label] by the stable
 * log-sum-exp in double. */
TRC_KERNEL_FN int64_t trc_argmax_row(const float *x, int64_t n) {
  int64_t best = 0;
  for (int64_t c = 1; c < n; c++)
    if (x[c] > x[best]) best = c;
  return best;
}

TRC_KERNEL_FN double trc_cross_entropy_row(const float *x, int64_t n, int64_t label) {
  double max = x[0], sum = 0.0;
  for (int64_t c = 1; c < n; c++)
    if (x[c] > max) max = x[c];
  for (int64_t c = 0; c < n; c++) sum += exp((double)x[c] - max);
  return max + log(sum) - x[label];
}

/* DiLoCo's outer step on one element of the average x: delta = anchor - x
 * is the outer gradient, u = mu*u + delta, and the Nesterov step from the
 * anchor, anchor - lr*(delta + mu*u), written as x + ((1-lr)*delta -
 * lr*mu*u) so that lr = 1, mu = 0 leaves x untouched bit for bit (adding a
 * zero is skipped: it would turn -0 into +0); x is the next anchor. */
TRC_KERNEL_FN void trc_outer_element(float *x, float *anchor, float *momentum,
                                     trc_outer_scalars o) {
  const float delta = *anchor - *x;
  *momentum = o.mu * *momentum + delta;
  const float t = o.keep * delta - o.push * *momentum;
  if (t != 0.0f) *x += t;
  *anchor = *x;
}

/* One element of torch.optim.SGD, dampening 0: d = g + wd*p;
 * buf = momentum*buf + d; p -= lr * (nesterov ? d + momentum*buf : buf)
 * (the first step's buf = d falls out of buf starting at zero); without
 * momentum p -= lr*d and buf is not touched. */
TRC_KERNEL_FN void trc_sgd_element(float *p, float g, float *buf, float lr, float mu, float wd,
                                   int nesterov) {
  const float d = g + wd * *p;
  if (mu == 0.0f) {
    *p -= lr * d;
    return;
  }
  *buf = mu * *buf + d;
  *p -= lr * (nesterov ? d + mu * *buf : *buf);
}

/* One element of torch.optim.AdamW (single-tensor path): p *= 1 - lr*wd;
 * m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
 * p -= (lr/bc1) * m / (sqrt(v)/sqrt(bc2) + eps). */
TRC_KERNEL_FN void trc_adamw_element(float *p, float g, float *m, float *v, float decay,
                                     const trc_update_scalars *u) {
  *p *= decay;
  *m = u->b1 * *m + u->c1 * g;
  *v = u->b2 * *v + u->c2 * (g * g);
  *p -= u->step_size * (*m / (sqrtf(*v) / u->bc2_sqrt + u->eps));
}

/* splitmix64's output function. */
TRC_KERNEL_FN uint64_t trc_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Dropout's random numbers: uniform in [0, 1) (24 bits), a pure function of
 * the u64 key stored at `key` (the arena's rng_key slot), the op's stream and
 * the element's index. The 24 bits convert to float from 32 bits (the same
 * value): x86 converts a 64-bit integer to float in vectors only with
 * AVX-512DQ, and that one conversion kept GCC 12 from vectorizing the whole
 * draw on AVX2, whose 64-bit multiplies it does vectorize (fashion_cnn's
 * dropout loop ran 1.6x faster on one Zen 3 core). */
TRC_KERNEL_FN float trc_kernel_uniform(const int32_t *key, uint64_t stream, int64_t counter) {
  uint64_t k = (uint64_t)(uint32_t)key[0] | (uint64_t)(uint32_t)key[1] << 32;
  uint64_t z = trc_mix64(trc_mix64(k + 0x9E3779B97F4A7C15ull * (stream + 1)) +
                         0x9E3779B97F4A7C15ull * ((uint64_t)counter + 1));
  return (float)(int32_t)(z >> 40) * 0x1.0p-24f;
}

#ifdef __cplusplus
}
#endif

#endif
