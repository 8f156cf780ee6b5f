/* trainc_rt.h — the runtime library every generated trainer links.
 *
 * The runtime's own API: what trc_main is made of, for the runtime's files,
 * its tests and hand-written trainers. It owns what does not depend on the
 * model's math: the command line, data files (.npy, IDX), batching,
 * parameter init, optimizers, LR schedules, evaluation metrics, logs,
 * progress, weight files and communication between ranks. What generated
 * code sees of it — trc_model, trc_param, trc_input, the train config and
 * trc_main — is the ABI in trainc.h, included here. */
#ifndef TRAINC_RT_H
#define TRAINC_RT_H

#include "trainc.h"

#include <stddef.h>
#include <stdio.h>

/* ======================================================================
 * The pieces trc_main is made of. Tests (and future backends) call them
 * directly. Functions returning int return 0 on success and -1 on failure,
 * with the reason in a trc_error.
 * ====================================================================== */

#define TRC_RUNTIME_VERSION "0.1.0"

/* A function trc_main calls before the first step it runs, which returns
 * once the step's code can run (`trainc run` compiles the kernels on a
 * second thread while the trainer starts): its wait counts in the time to
 * first step, not in the step's. NULL: none. */
void trc_set_step_code_wait(void (*wait)(void));

/* `where` names the file (or flag) the message is about, empty when none;
 * the trainer prints "<where or 'trainer'>: error: <msg>". */
typedef struct {
  char where[512];
  char msg[1024];
} trc_error;

const char *trc_dtype_name(trc_dtype dtype);   /* "f32" "i32" "u8" */
const char *trc_precision_name(trc_precision p); /* "fp32" "bf16" */
size_t trc_dtype_size(trc_dtype dtype);

/* Checks a descriptor's internal consistency (every region inside the arena,
 * parameters inside the parameter region, counts matching dims, ...). */
int trc_model_check(const trc_model *model, trc_error *err);
/* The predict_classes logits of predict row `row` (0 <= row < batch *
 * predict_rows) after forward(): copied from the stored predictions, or,
 * with the chunked loss head (predict_head), computed from its x and w as
 * logits[c] = sum over k ascending of x[row, k] * w(c, k), in float. */
void trc_predict_row(const trc_model *model, const char *arena, int64_t row, float *logits);

/* ---- arena ---- */
/* 64-byte aligned (2 MiB aligned when >= 2 MiB, with MADV_HUGEPAGE), every
 * page touched and zeroed. Free with trc_arena_free. */
char *trc_arena_alloc(uint64_t bytes, trc_error *err);
void trc_arena_free(char *arena);

/* The plan's promise, checked (on the device's arena when the model has
 * one: filled and read back through its copies): the workspace (everything above parameters,
 * gradients, inputs and the loss seed, dropout key and training flag) is filled with a canary byte before
 * training; afterwards the highest byte no longer equal to it, rounded up to
 * the arena's 64-byte alignment, is the measured high-water mark, which must
 * equal arena_bytes (the planned peak). */
uint64_t trc_workspace_offset(const trc_model *m);
void trc_arena_poison(const trc_model *m, char *arena);
uint64_t trc_arena_high_water(const trc_model *m, char *arena);

/* ---- threads ---- */
#define TRC_MAX_THREADS 1024
/* Sets the number of threads trc_parallel_for and the BLAS run on (n >= 1;
 * --threads). Each of them, the caller included, flushes subnormal floats to
 * zero from then on (results and operands: x86's FTZ and DAZ). */
void trc_set_threads(int n);
/* What trc_gemm multiplies in from now on (the run's `precision`; fp32
 * until set): TRC_BF16 rounds A and B to bf16 and accumulates in f32. */
void trc_set_precision(trc_precision p);
/* The precision set last: what the CUDA trainer's GEMMs read (trainc_cuda.h). */
trc_precision trc_get_precision(void);
/* Under bf16, the parameters' bf16 copy (gemm_bf16.c): GEMM operands that
 * lie in the parameter region are read from it instead of being rounded on
 * every call. Attached once the parameters are loaded (stale then); the
 * optimizer keeps it current as it updates (trc_bf16_weights_update on the
 * floats it wrote); anything else that writes the parameters calls
 * trc_bf16_weights_changed, and the next GEMM rounds them all again.
 * Attach returns -1 when out of memory; without a copy these do nothing. */
int trc_bf16_weights_attach(const float *params, uint64_t count, trc_error *err);
void trc_bf16_weights_detach(void);
void trc_bf16_weights_changed(void);
void trc_bf16_weights_update(uint64_t first, uint64_t count);
/* Bytes of the copy (0 without one). */
uint64_t trc_bf16_weights_bytes(void);
/* Whether bf16 is emulated on this CPU: oneDNN (2.6) has no bf16 kernels
 * below AVX512_CORE, so the GEMMs and convolutions round their inputs to
 * bf16 as ever and compute in f32 (gemm_bf16.c, conv.c): the bf16 results
 * up to the order of f32 sums, slower than fp32. TRAINC_BF16_EMULATE=1
 * emulates on any CPU, =0 never. */
int trc_bf16_emulated(void);
/* The one buffer GEMMs round their operands into (gemm_bf16.c), reserved at
 * the planned size (trc_model.bf16_operand_bytes or rounded_operand_bytes)
 * before the first step; -1 when out of memory. Unreserved, it grows. */
int trc_bf16_operands_reserve(uint64_t bytes, trc_error *err);
void trc_bf16_operands_release(void);
/* The most of it one GEMM has taken since the reservation. */
uint64_t trc_bf16_operands_high_water(void);

/* ---- array files: .npy and IDX, parsed from memory ---- */
typedef enum { TRC_ELEM_U8, TRC_ELEM_I32, TRC_ELEM_I64, TRC_ELEM_F32 } trc_elem_type;

typedef struct {
  trc_elem_type elem;
  int big_endian;          /* IDX stores big-endian, .npy here little-endian */
  char type_name[24];      /* as the file spells it: "<f4", "idx ubyte" */
  int rank;
  int64_t dims[TRC_MAX_RANK];
  uint64_t count;          /* product of dims */
  uint64_t data_offset;    /* where the elements start in the buffer */
  uint64_t data_bytes;     /* count * element size; equals len - data_offset */
} trc_array_header;

/* Both check the header completely against `len`: after success,
 * [data_offset, data_offset + data_bytes) lies inside the buffer. */
int trc_npy_parse(const void *buf, size_t len, trc_array_header *hdr, trc_error *err);
int trc_idx_parse(const void *buf, size_t len, trc_array_header *hdr, trc_error *err);

/* Reads a whole file; a name ending in ".gz" is inflated with zlib. */
int trc_read_file(const char *path, unsigned char **data, size_t *len, trc_error *err);

/* ---- datasets ---- */
typedef struct {
  unsigned char *data;     /* n * example_bytes, in the input's dtype */
  uint64_t example_bytes;
} trc_column;

typedef struct {
  int64_t n;               /* examples */
  int n_columns;           /* == model->n_inputs, same order */
  trc_column *columns;
  int owns_data;           /* 0 for views made by trc_dataset_view */
} trc_dataset;

/* Reads one input's file (.npy, .idx, .idx.gz by name) and converts it to the
 * input's dtype: u8 <- |u1; i32 <- <i4, <i8 or |u1 (range checked);
 * f32 <- <f4. Checks the per-example shape and the input's index_limit.
 * *data is malloc'ed, rows * example_bytes. */
int trc_input_load_file(const char *path, const trc_input *input, unsigned char **data,
                        int64_t *rows, trc_error *err);
/* The same for a file already in memory; `path` picks the format (".npy"
 * or IDX) and names the file in messages. */
int trc_input_parse(const char *path, const unsigned char *buf, size_t len,
                    const trc_input *input, unsigned char **data, int64_t *rows, trc_error *err);
/* Loads every input of the model from DIR/NAME.{npy,idx,idx.gz}. */
int trc_dataset_load(const trc_model *model, const char *dir, trc_dataset *ds, trc_error *err);
/* Rows [first, first+count) of src, sharing its memory. */
int trc_dataset_view(const trc_dataset *src, int64_t first, int64_t count, trc_dataset *view,
                     trc_error *err);
void trc_dataset_free(trc_dataset *ds);
/* The validation split (holdout.c): moves n_held rows, drawn by the seed
 * (every subset of that size equally likely), to the end of ds; the other
 * rows stay first. Both parts keep their file order. */
int trc_dataset_hold_out(trc_dataset *ds, int64_t n_held, uint64_t seed, trc_error *err);
/* Copies rows[0..count) of every column into the inputs' arena slots. */
void trc_dataset_gather(const trc_dataset *ds, const trc_model *model, const int64_t *rows,
                        int64_t count, char *arena);

/* ---- counter-based random numbers ---- */
/* The value at `counter` of the stream `key`: no state, any order. */
uint64_t trc_rng_key(uint64_t seed, uint64_t stream, uint64_t substream);
uint64_t trc_rng_u64(uint64_t key, uint64_t counter);
double trc_rng_uniform(uint64_t key, uint64_t counter);  /* [0, 1) */
double trc_rng_normal(uint64_t key, uint64_t counter);   /* N(0, 1) */
/* perm <- a permutation of 0..n-1 that depends only on (seed, epoch). */
void trc_shuffle(int64_t *perm, int64_t n, uint64_t seed, uint64_t epoch);

/* Sets the dropout key and the training flag in an arena; out of training
 * also the loss seed to 0 (the loss head then makes no gradient). */
void trc_set_mode(const trc_model *model, char *arena, uint64_t rng_key, int training);

/* ---- parameter init ---- */
/* Param `index` of a model, keyed by (seed, index, element). */
void trc_init_param(const trc_param *param, int index, uint64_t seed, float *dst);
void trc_init_params(const trc_model *model, char *arena, uint64_t seed);

/* ---- optimizers (PyTorch semantics) ---- */
/* Hyperparameters as written (double); each update rounds its per-step
 * scalars to float once, as PyTorch does with Python floats. */
typedef struct {
  double lr, momentum, weight_decay;
  int nesterov;
} trc_sgd_hparams;

typedef struct {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;            /* 1 for the first update (bias correction) */
} trc_adamw_hparams;

/* One update of n elements from the gradient g[i] * scale (scale: the
 * clipping factor, trc_clip_scale; 1 when not clipping). SGD: `buf` is the
 * momentum buffer (unused, may be NULL, when momentum == 0), L2 decay added
 * to the gradient. AdamW: decoupled decay p -= lr*wd*p, bias-corrected
 * moments m, v. */
void trc_sgd_update(float *p, const float *g, float scale, float *buf, uint64_t n,
                    const trc_sgd_hparams *h);
void trc_adamw_update(float *p, const float *g, float scale, float *m, float *v, uint64_t n,
                      const trc_adamw_hparams *h);

typedef struct {
  trc_optimizer_kind kind;
  uint64_t count;          /* parameters (f32) */
  float *m, *v;            /* SGD: momentum in m; AdamW: moments; allocated once */
  int64_t step;            /* updates done */
  int gradients_zero;      /* the last update left every gradient 0, and no step has run since */
} trc_optimizer;

int trc_optimizer_init(trc_optimizer *opt, const trc_train_config *cfg, uint64_t count,
                       trc_error *err);
void trc_optimizer_free(trc_optimizer *opt);
/* The floats of the next update (it counts the step), for a device that
 * updates the parameters itself (trainc.h). */
trc_update_scalars trc_optimizer_scalars(trc_optimizer *opt, const trc_train_config *cfg,
                                         double lr);
/* Updates every parameter from its gradient times grad_scale (clipping's
 * factor); weight decay only where param->decay is 1. Each gradient is
 * zeroed as soon as it is read, while it is in the cache: the next step
 * adds into zeros without a pass of its own (trc_step_zero_gradients). */
void trc_optimizer_step(trc_optimizer *opt, const trc_model *model, const trc_train_config *cfg,
                        char *arena, double lr, float grad_scale);
/* PyTorch's clip_grad_norm_ in two parts: the L2 norm of g (summed in fixed
 * blocks: bitwise the same on any number of threads), and the factor the
 * update multiplies the gradient by so that its norm is at most max_norm
 * (1 when it is already, or when max_norm is 0). The gradient itself is
 * never rewritten: the update applies the factor as it reads it. */
double trc_grad_norm(const float *g, uint64_t n);
float trc_clip_scale(double norm, double max_norm);

/* LR of optimizer step `step` (0-based) of `total` (Hugging Face schedules). */
double trc_schedule_lr(const trc_train_config *cfg, int64_t step, int64_t total);

/* ---- evaluation metrics ---- */
/* The confusion matrix is kept up to this many classes (a language model's
 * vocabulary gets the per-class counts only). */
#define TRC_CONFUSION_MAX_CLASSES 32

typedef struct {
  int64_t classes;
  int64_t examples, correct;
  int64_t *true_pos, *false_pos, *false_neg;   /* per class, allocated once */
  int64_t *confusion;                          /* [true class][predicted class], or NULL
                                                  above TRC_CONFUSION_MAX_CLASSES */
  double ce_sum;                               /* sum of per-example cross-entropy */
} trc_metrics;

int trc_metrics_init(trc_metrics *mt, int64_t classes, trc_error *err);
void trc_metrics_reset(trc_metrics *mt);
void trc_metrics_free(trc_metrics *mt);
/* Adds `rows` predictions (f32 logits [rows, classes]) against labels in
 * [0, classes), stored as `label_dtype` (i32 or u8). */
void trc_metrics_add(trc_metrics *mt, const float *logits, const void *labels,
                     trc_dtype label_dtype, int64_t rows);
/* The same from each row's cross-entropy and argmax already computed (the
 * chunked loss head's row stats, trc_model.predict_head). */
void trc_metrics_add_rows(trc_metrics *mt, const float *row_loss, const float *argmax,
                          const void *labels, trc_dtype label_dtype, int64_t rows);
double trc_metrics_accuracy(const trc_metrics *mt);
/* Class c's precision TP/(TP+FP), recall TP/(TP+FN), F1 2TP/(2TP+FP+FN)
 * (each 0 when its denominator is, as scikit-learn's zero_division) and
 * support TP+FN (how often it is the label). */
double trc_metrics_precision(const trc_metrics *mt, int64_t c);
double trc_metrics_recall(const trc_metrics *mt, int64_t c);
double trc_metrics_f1(const trc_metrics *mt, int64_t c);
int64_t trc_metrics_support(const trc_metrics *mt, int64_t c);
/* Mean F1 over the classes that occur in labels or predictions
 * (f1_score(average="macro")). */
double trc_metrics_macro_f1(const trc_metrics *mt);
/* Hugging Face's eval_f1: class 1's F1 for two classes (f1_score's
 * average="binary"), macro-F1 for more; NaN before any example. */
double trc_metrics_task_f1(const trc_metrics *mt);
double trc_metrics_cross_entropy(const trc_metrics *mt);   /* mean per example */

/* What an evaluation reports, "eval_" + TRC_METRIC_WORDS: metric i is
 * computed when bit i of the run's metrics is set (loss always). */
#define TRC_EVAL_NAMES "eval_loss", "eval_accuracy", "eval_f1", "eval_f1_macro", "eval_f1_binary"
enum { TRC_EVAL_LOSS, TRC_EVAL_ACCURACY, TRC_EVAL_F1, TRC_EVAL_F1_MACRO, TRC_EVAL_F1_BINARY,
       TRC_EVAL_METRICS };

/* ---- weights: .safetensors ---- */
typedef struct {
  const char *name;
  int rank;
  const int64_t *dims;
  const float *data;
} trc_tensor;

/* Writes F32 tensors in order, atomically (temp file, fsync, rename, fsync
 * of the directory): `path` is either untouched or complete. */
int trc_safetensors_write(const char *path, const char *model_name, const trc_tensor *tensors,
                          int n, trc_error *err);
/* The same with more __metadata__: n_meta (key, value) string pairs. */
int trc_safetensors_write_meta(const char *path, const char *model_name, const char *const *meta,
                               int n_meta, const trc_tensor *tensors, int n, trc_error *err);

typedef struct {
  char *name;
  char dtype[16];
  int rank;
  int64_t dims[TRC_MAX_RANK];
  uint64_t begin, end;     /* byte offsets into the data section */
} trc_st_entry;

typedef struct {
  int n;
  trc_st_entry *entries;   /* in file order */
  uint64_t data_start;     /* data section offset in the file: 8 + header length */
  char *model_name;        /* __metadata__.trainc_model, or NULL */
  int n_meta;
  char **meta;             /* every __metadata__ pair: key, value, key, value, ... */
} trc_st_header;

/* Strict parse of a whole safetensors file held in memory: JSON syntax,
 * known dtypes, shapes matching byte ranges, ranges contiguous and covering
 * exactly the data section. */
int trc_safetensors_parse(const void *buf, size_t len, trc_st_header *hdr, trc_error *err);
/* Reads the file at path and parses its header; on success the caller frees
 * *buf and trc_st_header_free(hdr); on failure nothing is left allocated. */
int trc_safetensors_load(const char *path, unsigned char **buf, trc_st_header *hdr, trc_error *err);
void trc_st_header_free(trc_st_header *hdr);

/* Each parameter under its file name (trc_param.file_name, else its name),
 * transposed where the model says so, as F32. */
int trc_save_weights(const trc_model *model, const char *arena, const char *path, trc_error *err);
/* File name patterns ("a.*,b.*"; NULL: none) accepted besides the model's
 * own (trc_model.allow_missing, allow_unexpected): --allow-missing, ... */
typedef struct {
  const char *missing, *unexpected;
} trc_allowed;
/* Every parameter must be present under its file name as F32, BF16 or F16
 * with its exact (file) shape, and every tensor must be some parameter's —
 * except those the model's patterns or `allow` accept: a missing parameter
 * then keeps what the arena holds (its seeded init), an unexpected tensor
 * is ignored, and both are said on stderr. Otherwise the error lists the
 * missing and unexpected names and the shape mismatches. A PyTorch pickle
 * is refused with the command that converts it. */
int trc_load_weights_allowing(const trc_model *model, char *arena, const char *path,
                              const trc_allowed *allow, trc_error *err);
/* trc_load_weights_allowing with the model's patterns only. */
int trc_load_weights(const trc_model *model, char *arena, const char *path, trc_error *err);

/* ---- communication between ranks ----
 * Two implementations with one interface: comm.c (libtrainc_rt.a: one
 * process, rank 0 of 1, every reduction the identity) and comm_mpi.c
 * (libtrainc_rt_mpi.a: MPI_COMM_WORLD). trc_main calls init and finalize. */
int trc_comm_init(int *argc, char ***argv, trc_error *err);
int trc_comm_rank(void);
int trc_comm_size(void);
/* In-place sums over all ranks; every rank gets the same bits. */
void trc_comm_allreduce_f32(float *buf, uint64_t n);
void trc_comm_allreduce_f64(double *buf, uint64_t n);
/* The same, non-blocking: starts the sum of buf (which nothing may touch
 * until trc_comm_wait_all returns) and lets the sums started before it
 * progress (MPI moves a non-blocking collective on only inside MPI calls).
 * Every rank must start the same sums in the same order. */
void trc_comm_iallreduce_f32(float *buf, uint64_t n);
/* Waits for every sum started. */
void trc_comm_wait_all(void);
void trc_comm_barrier(void);
/* Ends communication. A status other than 0 aborts every rank of the job
 * (MPI_Abort), so that no rank waits forever on one that failed. */
void trc_comm_finalize(int status);
/* Ends every rank of the job now with `status` (MPI_Abort): for a rank that
 * must not enter a collective the others wait in. One process: exit(). */
void trc_comm_abort(int status);
/* The longest one rank waits in one collective (all-reduce, barrier) for the
 * others before it ends the job with a message; 0: no limit. */
void trc_comm_set_timeout(double seconds);

/* ---- command line ---- */
typedef struct {
  const char *data_dir, *eval_dir, *init_path, *save_path, *log_path;
  trc_allowed allow;       /* --allow-missing, --allow-unexpected (for --init) */
  const char *state_dir, *resume_dir; /* --save-state, --resume */
  int64_t save_every;      /* optimizer steps between state saves; -1: every epoch */
  int64_t save_total_limit; /* states kept: the newest K (default 1); 0: all */
  int load_best;           /* --load-best: end with the best evaluation's weights */
  int metric_for_best;     /* TRC_EVAL_*: what --load-best and --early-stopping compare */
  int64_t early_stopping;  /* patience in evaluations; 0: off */
  double early_stopping_threshold; /* an improvement must exceed it */
  const char *dump_path;   /* --dump-step FILE */
  trc_train_config cfg;    /* model->defaults with the flags applied */
  int steps_given;         /* --steps was on the command line */
  int quiet, gradcheck, help, version;
  int no_overlap;          /* --no-overlap: averaged gradients all-reduced after
                              backward, not bucket by bucket during it */
  const char *text_path, *eval_text_path; /* --text, --eval-text: instead of the folders */
  const char *pairs_path, *eval_pairs_path; /* --pairs, --eval-pairs: sentence pairs */
  const char *pair_fields; /* --pair-fields A,B,LABEL: the pairs' field names */
  const char *tokenizer;   /* --tokenizer: "bytes" (default) or a BPE or WordPiece folder */
  const char *tensorboard_dir; /* --tensorboard DIR */
  const char *kernel_times_path; /* --kernel-times FILE */
  int64_t sample;          /* tokens to generate after training (0: none) */
  const char *prompt;      /* their context (NULL: a newline) */
  double temperature;      /* 0: greedy; default 1 */
  int64_t top_k;           /* 0: every token */
  double top_p;            /* in (0, 1]; 1: every token */
  double comm_timeout;     /* --comm-timeout seconds (MPI), 0: none; default 300 */
  int64_t threads;         /* --threads; 0: the default (trainc.h) */
} trc_options;

int trc_parse_args(const trc_model *model, int argc, char **argv, trc_options *opt,
                   trc_error *err);
void trc_print_usage(const trc_model *model, const char *prog, FILE *out);

/* ---- sampling from a sequence model (sample.c) ---- */
typedef struct trc_tokenizer trc_tokenizer; /* see tokenizer.c's section below */
typedef struct {
  double temperature; /* 0: the arg-max */
  int64_t top_k;      /* 0: every token */
  double top_p;       /* in (0, 1]; 1: every token */
  uint64_t seed;      /* keys the random numbers */
} trc_sample_settings;
/* Generates `count` tokens after `prompt` (tokenized by tok; at least one
 * token, each below the token input's limit): each step runs forward() in
 * evaluation mode on the last T tokens (row 0 of the batch, zero-padded
 * after them; causal models ignore the padding) and draws the next token at
 * the last position from softmax(logits / temperature) over the ids that the
 * tokenizer, the predictions and the embedding all have, kept to the top_k
 * most likely, then to the fewest most likely holding top_p of the mass.
 * Writes the prompt and each token's bytes to out, then a newline. Needs
 * trc_can_sample(model). */
int trc_can_sample(const trc_model *model); /* an embedded token input and predict */
int trc_sample(const trc_model *model, char *arena, const trc_tokenizer *tok, const char *prompt,
               int64_t count, const trc_sample_settings *s, FILE *out, trc_error *err);

/* ---- gradient check ---- */
/* Fills the inputs with seeded random data and compares backward() with
 * central differences of forward() for up to 24 elements of every parameter,
 * whose values must already be in the arena. Prints a table to `out`.
 * Returns 0 when every checked element agrees, 1 when one does not. */
int trc_gradcheck(const trc_model *model, char *arena, uint64_t seed, FILE *out, trc_error *err);

/* ---- one step, dumped (--dump-step) ---- */
/* Loads data_dir, runs forward and backward (loss seed 1, gradients zeroed
 * first, training mode with the dropout key of the first training
 * micro-batch under `seed`) on its rows 0..B-1 in file order, and writes a
 * .safetensors file with "loss" (f32[]), "predict" (f32[B, classes], or
 * [B, T, classes] when predict_rows > 1; when the model has one) and
 * "grad.<param>" for every parameter, in parameter order. */
int trc_dump_step(const trc_model *model, char *arena, const char *data_dir, uint64_t seed,
                  const char *path, trc_error *err);

/* ---- tokenizers (tokenizer.c) ---- */
/* "bytes": one token per byte, ids 0..255. Otherwise a folder holding BERT's
 * WordPiece (uncased, as Hugging Face's BertTokenizerFast; wordpiece.c):
 * vocab.txt, one token a line, its id the line's number from 0, with [UNK]
 * (a tokenizer_config.json there must not make it cased);
 * or GPT-2's byte-level BPE: vocab.json ({"token": id}, ids exactly 0..n-1,
 * every byte a token) and merges.txt (one "LEFT RIGHT" pair a line, by rank;
 * a first "#version" line is skipped), both in GPT-2's byte alphabet (space
 * is 'Ġ'). Errors name the file and what is wrong. */
int trc_tokenizer_load(const char *spec, trc_tokenizer **out, trc_error *err);
/* The BPE from the two files' contents, held in memory (for tests). */
int trc_tokenizer_parse(const char *vocab, size_t vocab_len, const char *merges,
                        size_t merges_len, trc_tokenizer **out, trc_error *err);
/* The WordPiece from vocab.txt's content (for tests). */
int trc_tokenizer_parse_wordpiece(const char *vocab, size_t len, trc_tokenizer **out,
                                  trc_error *err);
void trc_tokenizer_free(trc_tokenizer *t);
int64_t trc_tokenizer_vocab(const trc_tokenizer *t); /* ids are below this */
/* <|endoftext|>'s id (WordPiece: [SEP]'s), or -1: what joins documents */
int32_t trc_tokenizer_eot(const trc_tokenizer *t);
int trc_tokenizer_needs_utf8(const trc_tokenizer *t); /* 1 but for bytes */
int trc_tokenizer_is_wordpiece(const trc_tokenizer *t);

typedef struct {
  int32_t *ids;
  uint64_t n, cap;
} trc_tokens;
int trc_tokens_push(trc_tokens *tk, int32_t id, trc_error *err);
void trc_tokens_free(trc_tokens *tk);
/* Appends the ids of text[0..len) to out. The BPE needs valid UTF-8 (its
 * pre-tokenizer splits by Unicode classes): anything else fails, naming the
 * byte offset; the byte tokenizer takes any bytes. */
int trc_tokenizer_encode(const trc_tokenizer *t, const unsigned char *text, size_t len,
                         trc_tokens *out, trc_error *err);
/* The bytes of token `id` (below the vocabulary size). */
const unsigned char *trc_tokenizer_token(const trc_tokenizer *t, int32_t id, size_t *len);
/* The offset of the first byte that is not valid UTF-8, len when none. */
size_t trc_utf8_invalid_at(const unsigned char *s, size_t len);

/* ---- text data: --text FILE (text.c) ---- */
/* Fails unless `tok` can feed the model: a sequence model whose only inputs
 * are the token input and the labels, both [B, T], with every id of the
 * tokenizer below both their index limits. */
int trc_text_check_model(const trc_model *m, const trc_tokenizer *tok, trc_error *err);
/* Reads FILE — plain text, or JSON Lines (a name ending in .jsonl: one object
 * a line with a "text" string; the documents joined by the tokenizer's
 * <|endoftext|>, or a newline byte when it has none); either may be .gz —
 * tokenizes it, and cuts the tokens into windows of T + 1: example i is
 * tokens [iT, iT + T) in the token input and [iT + 1, iT + T + 1) in the
 * labels (the next token at every position). */
int trc_text_load(const trc_model *m, const trc_tokenizer *tok, const char *path,
                  trc_dataset *ds, trc_error *err);
/* The tokens of a file's content held in memory (`name`'s suffix says
 * whether it is JSON Lines), appended to out. */
int trc_text_tokenize(const trc_tokenizer *tok, const char *name, const unsigned char *data,
                      size_t len, trc_tokens *out, trc_error *err);

/* ---- sentence pairs: --pairs FILE (pairs.c) ---- */
/* The names of a pairs file's fields: --pair-fields A,B,LABEL (default
 * text_a,text_b,label); B empty: one sentence an example. */
typedef struct {
  char a[128], b[128], label[128];
} trc_pair_fields;
int trc_pair_fields_parse(const char *spec, trc_pair_fields *f, trc_error *err);
/* How many of a pair's na and nb tokens are kept so that they fit in
 * `budget`, as Hugging Face's truncation="longest_first": the shorter keeps
 * its tokens up to half the budget, the longer (b on a tie) the rest. */
void trc_pair_truncate(int64_t na, int64_t nb, int64_t budget, int64_t *ka, int64_t *kb);
/* One example as Hugging Face's tokenizer(a, b, truncation=True,
 * padding="max_length", max_length=T): ids [CLS] a [SEP] b [SEP] (b NULL:
 * [CLS] a [SEP]) then [PAD]s; types 0 up to the first [SEP], 1 after it, 0
 * on the padding; mask 1 on the tokens, 0 on the padding. T each. Needs a
 * WordPiece tokenizer with [CLS], [SEP] and [PAD]. */
int trc_pair_encode(const trc_tokenizer *tok, const char *a, size_t a_len, const char *b,
                    size_t b_len, int64_t T, int32_t *ids, int32_t *types, int32_t *mask,
                    trc_error *err);
/* Fails unless the pairs can feed the model: inputs input_ids [B, T],
 * optionally token_type_ids and attention_mask [B, T], and its labels [B];
 * nothing else. T is input_ids'. */
int trc_pairs_check_model(const trc_model *m, const trc_tokenizer *tok, trc_error *err);
/* Reads FILE (.tsv or .jsonl, either may be .gz) into one example a line;
 * a bad line fails with where = "FILE:LINE". */
int trc_pairs_load(const trc_model *m, const trc_tokenizer *tok, const char *path,
                   const trc_pair_fields *fields, trc_dataset *ds, trc_error *err);
/* The same for a file's content held in memory; `path` names it. */
int trc_pairs_parse(const trc_model *m, const trc_tokenizer *tok, const char *path,
                    const trc_pair_fields *fields, const unsigned char *data, size_t len,
                    trc_dataset *ds, trc_error *err);

/* ---- TensorBoard event files: --tensorboard DIR (tensorboard.c) ---- */
/* DIR/events.out.tfevents.SECONDS.HOST.PID: TFRecord records (length,
 * masked CRC-32C of the length, an Event protobuf, masked CRC-32C of it);
 * the first Event says the file version, each scalar is an Event with a
 * Summary of one simple_value. Flushed after every record. */
typedef struct {
  FILE *f; /* NULL: not writing */
  char path[4096];
  int failed; /* a write failed (said once on stderr) */
} trc_tensorboard;
int trc_tensorboard_open(trc_tensorboard *tb, const char *dir, trc_error *err);
void trc_tensorboard_scalar(trc_tensorboard *tb, const char *tag, int64_t step, double value);
void trc_tensorboard_close(trc_tensorboard *tb);
/* CRC-32C (Castagnoli), as TFRecord frames use it before masking. */
uint32_t trc_crc32c(const void *data, size_t n);

#endif
