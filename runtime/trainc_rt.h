/* trainc_rt.h — the runtime library every generated trainer links.
 *
 * The whole interface of the runtime. A generated trainer is one C file that
 * defines its kernels and a `trc_model` describing its arena, then calls
 * trc_main(). The runtime owns what does not depend on the model's math: the
 * command line, data files (.npy, IDX), batching, parameter init, optimizers,
 * LR schedules, evaluation metrics, logs, progress and weight files.
 *
 * Layout contract with generated code (codegen/ writes, the runtime reads):
 *   - one arena of `arena_bytes`, 64-byte aligned, allocated once;
 *   - all parameters are f32 and contiguous: [param_offset, +param_count*4);
 *   - their gradients are contiguous with the same layout at grad_offset, so an
 *     optimizer (and, later, an MPI all-reduce) is one flat loop over floats;
 *   - each input has a fixed slot of batch*example_bytes at its offset;
 *   - forward() reads the inputs and parameters and writes loss (and predict);
 *   - backward() must follow forward(); it ADDS d(loss_seed*loss)/d(param) into
 *     the gradient region, where loss_seed is the f32 the runtime stores at
 *     loss_seed_offset before each micro-batch (1/accumulate for plain means).
 *     The runtime zeroes the gradients at the start of each optimizer step. */
#ifndef TRAINC_RT_H
#define TRAINC_RT_H

#include <stddef.h>
#include <stdint.h>

#define TRC_MAX_RANK 8

typedef enum { TRC_F32, TRC_I32, TRC_U8 } trc_dtype;

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

typedef enum {
  TRC_INIT_ZEROS,
  TRC_INIT_ONES,
  TRC_INIT_NORMAL,  /* a = mean, b = std */
  TRC_INIT_UNIFORM, /* a = low,  b = high */
  TRC_INIT_XAVIER,  /* uniform ±sqrt(6/(fan_in+fan_out)) * a (gain, default 1) */
  TRC_INIT_HE,      /* normal(0, sqrt(2/fan_in)) * a (gain, default 1) */
} trc_init_kind;

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
} trc_param;

typedef enum { TRC_SGD, TRC_ADAMW } trc_optimizer_kind;
typedef enum { TRC_SCHED_CONSTANT, TRC_SCHED_LINEAR, TRC_SCHED_COSINE } trc_schedule_kind;
typedef enum { TRC_LOSS_CROSS_ENTROPY, TRC_LOSS_MSE, TRC_LOSS_OTHER } trc_loss_kind;

enum { /* trc_train_config.metrics bits */
  TRC_METRIC_LOSS = 1,
  TRC_METRIC_ACCURACY = 2,
  TRC_METRIC_F1 = 4,
};

/* The train block's policy, as compiled in; the trainer's flags override it. */
typedef struct {
  int64_t accumulate;        /* micro-batches per optimizer step (>= 1) */
  int64_t epochs;            /* used when steps == 0 */
  int64_t steps;             /* optimizer steps; 0 = run `epochs` epochs */
  trc_optimizer_kind optimizer;
  double lr, momentum, weight_decay, beta1, beta2, eps;
  int nesterov;
  trc_schedule_kind schedule;
  int64_t warmup;            /* optimizer steps of linear warm-up from 0 */
  double min_lr;             /* floor of linear/cosine decay */
  double clip_norm;          /* global gradient-norm clip; 0 = off */
  uint64_t seed;
  int eval_every_epoch;      /* 1: evaluate after every epoch */
  int64_t eval_every_steps;  /* > 0: also every N optimizer steps */
  unsigned metrics;          /* TRC_METRIC_* bits */
  int64_t log_every;         /* optimizer steps between log lines (>= 1) */
  double val_split;          /* fraction of --data held out when no --eval-data */
} trc_train_config;

typedef struct trc_model {
  const char *name;          /* model name from the file */
  const char *source;        /* the .nn path it was compiled from (for --help) */
  int64_t batch;             /* micro-batch B, compiled into every shape */
  uint64_t arena_bytes;
  uint64_t param_offset, param_count, grad_offset;
  int n_params;
  const trc_param *params;
  int n_inputs;
  const trc_input *inputs;
  uint64_t loss_offset;      /* f32 scalar written by forward() */
  uint64_t loss_seed_offset; /* f32 scalar read by backward() */
  trc_loss_kind loss_kind;
  int has_predict;           /* predict_offset holds f32[B, predict_classes] */
  uint64_t predict_offset;
  int64_t predict_classes;
  int label_input;           /* index into inputs of the class labels, -1 if none */
  void (*forward)(char *arena);
  void (*backward)(char *arena);
  trc_train_config defaults;
} trc_model;

/* Runs the trainer's command line: parses flags, loads data, initializes or
 * loads weights, trains, evaluates, saves. Returns the process exit status. */
int trc_main(const trc_model *model, int argc, char **argv);

#endif
