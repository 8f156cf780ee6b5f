/* passes.h — the passes over the tensor graph: autodiff, then the schedule and
 * the memory plan that turn it into a Program every backend prints or builds.
 *
 * The whole interface of the passes stage, in pipeline order: autodiff, the
 * cost model, the checkpoint planner (which forward values the program keeps
 * and which it recomputes in the backward pass), the schedule and memory plan.
 * docs/planner.md explains the planner's model and policies. */
#ifndef TRAINC_PASSES_H
#define TRAINC_PASSES_H

#include "ir.h"

/* CONV: a library convolution's bias add, and the relu after it, in its
 * call (trc_conv2d applies them to each block of the output while it is in
 * the cache): where nothing else reads the convolution or the sum, the last
 * node becomes conv2d(x, w, bias) with relu or without (passes/conv.c). Runs
 * on the forward graph, before autodiff. */
void fuse_conv_epilogue(Graph *g);

/* ATTENTION: causal attention as lowering writes it (bmm, causal_softmax,
 * bmm, nothing else reading the scores or probabilities: no dropout on
 * them) becomes one causal_attention node, which stores no probabilities
 * (passes/attention.c); returns how many it fused. Runs on the forward
 * graph, before autodiff. The pipeline calls it with FUSED; under AUTO it
 * also keeps the graph without (WHOLE) for the planner to price against
 * (compile_program). */
typedef enum { ATTENTION_AUTO, ATTENTION_FUSED, ATTENTION_WHOLE } AttentionForm;
int fuse_attention(Graph *g);

/* HEAD: a loss that is cross_entropy over a bias-free linear layer of a
 * parameter (logits = x @ w or x @ w^T, read by nothing else but predict)
 * becomes the chunked loss head: linear_cross_entropy (`chunk` rows at a
 * time; HEAD_CHUNK_DEFAULT: the default size; HEAD_CHUNK_AUTO: the default
 * size, which the budget search may change) and head_loss, the new loss;
 * sets g->loss_head and g->loss_seed, and predict becomes x. HEAD_WHOLE
 * (the whole logits, as written) or any other loss: the graph is
 * unchanged. Runs on the forward graph, before autodiff. */
enum { HEAD_CHUNK_AUTO = -2, HEAD_WHOLE = -1, HEAD_CHUNK_DEFAULT = 0 };
void fuse_loss_head(Graph *g, int64_t chunk);

/* Appends the backward graph of g->loss with respect to every parameter.
 * Gradient contributions to a parameter are marked grad_of_param: their
 * kernels add into the parameter's gradient slot. Sets g->loss_seed
 * (unless the loss head made it). */
void autodiff(Graph *g);

/* POOL: relu_grad(y, maxpool_grad(y, dy)), the max-pool's gradient read by
 * nothing else, becomes one maxpool_grad that applies the relu's mask as it
 * stores (passes/pool.c): one pass over the image instead of two, the same
 * bits (e2e.fuse checks it against --no-fuse, which turns it off). Runs on
 * the graph after autodiff. */
void fuse_pool_relu_grad(Graph *g);

#define ARENA_ALIGN 64

/* What a loop kernel does besides its FLOPs that the cost model prices at
 * rates of its own: libm calls (kernel_math_calls), dropout's random
 * numbers (kernel_random_draws), and its rows of pooling windows
 * (kernel_short_row_work): their accesses and how many start, element by
 * element (window_*) or in a pool by rows of scratch (scratch_*). */
typedef struct {
  double math_calls, random_draws;
  double window_accesses, window_rows, scratch_accesses, scratch_rows;
} LoopWork;

LoopWork kernel_loop_work(const Kernel *k);

/* The step schedule's gradient buckets (buckets.c): the gradient region cut
 * into contiguous ranges that together cover it, each final after one
 * backward kernel, where its all-reduce can start. */
typedef struct {
  uint64_t first, count;      /* floats of the gradient region */
  int first_param, n_params;  /* g->params[first_param .. first_param + n_params) */
  int ready;                  /* index into backward after which it is final; -1:
                                 before backward (no gradient reaches it) */
} GradBucket;

/* Buckets of at least this many bytes (bar the last): measured with
 * bench/localsgd.sh (bench/RESULTS.md). */
#define GRAD_BUCKET_BYTES (1u << 20)

/* A scheduled, memory-planned training program.
 * Arena layout: [parameters | gradients (same layout) | inputs | loss seed,
 * rng key, training flag | activations]. Parameters and gradients are each one contiguous f32 block so
 * that optimizers and all-reduces are single flat loops. */
typedef struct {
  const Graph *g;
  int *forward, n_forward;   /* node ids computed by forward(), in order */
  int *backward, n_backward; /* node ids computed by backward(), in order */
  uint64_t *offset;          /* per node id: byte offset of its value */
  int *live_until;           /* per node id with a range of its own: the last
                                step that reads it (steps count forward, then
                                backward; n_forward + n_backward: read by the
                                runtime after backward); -1 for the others */
  Kernel **kernels;          /* per node id: its loop nest (NULL: GEMM, leaf or fused) */
  LoopWork *loop_work;       /* per node id: the loop_work of its own loop nest,
                                counted when lowered (kept when fusion frees it) */
  bool memory_planned;       /* offsets and live_until are those of the steps now */
  uint64_t *scratch_offset;  /* per node id: where its node_scratch_bytes lie, a
                                region of its own for its step alone (0: none) */
  int *fused_into;           /* per node id: the step whose kernel computes it
                                inline (passes/fuse.c; it then has no step, no
                                storage and no kernel of its own), -1 others */
  int *stored_by;            /* per node id: the step whose kernel computes it
                                inline and also stores it, for its later readers
                                (passes/fuse.c: no step or kernel of its own, its
                                storage from that step on), -1 others */
  int n_fused;               /* how many values are fused or stored by a reader */
  int n_stored;              /* how many of those are stored by a reader */
  int *storage_root;         /* per node id: the value owning its storage (graph_storage_roots) */
  uint64_t param_offset, param_bytes;
  uint64_t trained_bytes;    /* the prefix of the parameters that trains (the rest
                                are frozen): the size of the gradient region */
  uint64_t grad_offset;      /* gradient of param p at offset[p] - param_offset + grad_offset */
  uint64_t input_offset, input_bytes;
  uint64_t seed_offset;
  uint64_t rng_key_offset, training_offset; /* dropout's key (u64) and train flag (f32) */
  uint64_t activation_offset, activation_bytes; /* peak of the planned workspace */
  uint64_t stored_bytes;     /* activations forward() leaves alive for backward() */
  uint64_t most_alive_bytes; /* the most activation bytes alive at one step: the
                                least activation_bytes any placement could reach */
  uint64_t arena_bytes;      /* the planned peak: the arena's high-water mark */
  /* The runtime's one buffer of GEMM operands rounded to bf16, outside the
   * arena (node_bf16_operand_bytes: its largest GEMM's): under precision
   * bf16, for every GEMM (parameters read from their bf16 copy); otherwise
   * for the `rounded` ones (--compress bf16's recomputed GEMMs). */
  uint64_t bf16_operand_bytes, rounded_operand_bytes;
  GradBucket *buckets;       /* in the order backward finishes them, roughly: */
  int n_buckets;             /* from the end of the region to its start */
  /* The cost model's prediction for the planned program (program_predict;
   * NULL and 0 before), under each precision a run may choose (the train
   * block's or --precision): per step node, its kernel's seconds in each
   * phase (its own and its fused members' shares), and a micro-batch's
   * share of the optimizer step (update_seconds). Trainers report those of
   * their run's precision beside what they measure (--kernel-times). */
  double (*kernel_seconds[TRC_PRECISION_COUNT])[3];
  double update_seconds[TRC_PRECISION_COUNT];
  bool priced_calibrated;    /* those figures from a --profile file, not the
                                built-in ones (the trainer says which) */
} Program;

/* ---- the pass pipeline (pipeline.c): every pass in order, one line each ----
 * (constant, --dump name, what the program is after it). The program-level
 * passes, STEPS on, each take the Program the one before left. */
#define TRAINC_PASSES(X)                                                     \
  X(AST, "ast", "the model file as the parser read it")                     \
  X(IR, "ir", "lowering: the forward graph")                                \
  X(CONV, "conv", "a convolution's bias and relu inside its library call")   \
  X(ATTENTION, "attention", "causal attention fused: no stored probabilities") \
  X(HEAD, "head", "the loss head chunked: linear + cross_entropy one call")  \
  X(GRAD, "grad", "autodiff: the backward graph added")                     \
  X(POOL, "pool", "a max-pool's gradient and the relu's before it one kernel") \
  X(WEAVE, "weave", "the planner's recomputes woven into backward")         \
  X(STEPS, "steps", "forward and backward steps; the fixed regions")        \
  X(KERNELS, "kernels", "each step's loops or library call")                \
  X(FUSE, "fuse", "pointwise steps fused into their reader")                \
  X(SCHEDULE, "schedule", "the memory plan: offsets, lifetimes, stored")    \
  X(PARALLEL, "parallel", "the loops proved parallel")                      \
  X(BUCKETS, "buckets", "the gradients' all-reduce buckets")

typedef enum {
  PASS_NONE = -1,
#define PASS_ENUM(id, name, doc) PASS_##id,
  TRAINC_PASSES(PASS_ENUM)
#undef PASS_ENUM
  PASS_COUNT
} Pass;

/* The pass's --dump name; pass_named: the pass of a name, PASS_NONE if none. */
const char *pass_name(Pass pass);
Pass pass_named(const char *name);
/* "ast, ir, ..., or buckets": the names for an error message. */
const char *pass_names_listed(void);

/* How program_build runs the program passes (NULL: every pass, buckets of
 * GRAD_BUCKET_BYTES, no dump). */
typedef struct {
  uint64_t bucket_bytes; /* the gradient buckets' least size; 0: GRAD_BUCKET_BYTES */
  Pass last;             /* stop after this pass (the planner's candidates stop
                            after SCHEDULE: their peak and time are known then) */
  Pass dump;             /* print the program after this pass to dump_out */
  FILE *dump_out;
  bool plain_fusion;     /* no stored fusions, which cost a second program
                            (fuse.c): the planner's candidates */
} ProgramOptions;

/* The program passes in order, STEPS to o->last, from a graph with its
 * backward pass (and the planner's recomputes). */
Program *program_build(const Graph *g, const ProgramOptions *o);
void program_free(Program *p);


/* What the trainer's descriptor says of predictions (trc_model's
 * has_predict .. head_w_vd): where they are, their classes and rows per
 * example; with the chunked loss head, x's place, w's, the row stats'. */
typedef struct {
  bool has, head;
  uint64_t offset;           /* the predictions, or the head's x */
  int64_t classes, rows;
  uint64_t weight_offset, stats_offset; /* the head's */
  int64_t dim;
  bool w_vd;
} PredictLayout;
PredictLayout program_predict_layout(const Program *p);

/* ---- the program passes, each with one contract (STEPS .. BUCKETS) ---- */

/* STEPS: a new Program of g: the live nodes ordered into forward (graph order
 * of the forward part) and backward (graph order of the rest), every leaf's
 * place in the fixed regions (parameters, gradients, inputs, scalars); no
 * kernels, no fusion, no activation placed. */
Program *program_steps(const Graph *g);
/* KERNELS: every step's loop nest (p->kernels; NULL for a library call). */
void program_lower_kernels(Program *p);
/* FUSE: the widest fusion (all steps, forward only, backward only) whose
 * arena is no larger than the unfused program's, or none, then unless
 * `plain`, the stored fusions too where the arena stays no larger (fuse.c;
 * nothing under g->train.no_fuse): fused_into and stored_by set, readers'
 * kernels rewritten, fused steps dropped. */
void program_fuse_widest(Program *p, bool plain);
/* SCHEDULE: every computed value's place in the activation region from its
 * lifetime (memplan.c); live_until, stored_bytes, most_alive_bytes, arena_bytes. Nothing to
 * do when the steps have not changed since the last plan (FUSE plans the
 * programs it compares). */
void program_plan_memory(Program *p);
/* PARALLEL: the kernels' parallel loops, eager selects and narrow
 * conversions marked (kernel_mark_parallel, kernel_mark_by_ranges), which
 * backends read. */
void program_mark_kernels(Program *p);
/* BUCKETS: the gradient region cut into buckets of at least bucket_bytes
 * (buckets.c); cutting again replaces them. */
void program_bucket_gradients(Program *p, uint64_t bucket_bytes);

/* Byte offset of the gradient slot of parameter node `param`. */
uint64_t program_grad_offset(const Program *p, int param);
/* The program after a pass as text (`--dump=<pass>`; golden tests): the
 * arena's regions, then one line per leaf, step and view in graph order with
 * what that pass knows of it (its kernel's loops; offset, bytes, lifetime,
 * what forward stores; its parallel loops), then the stored set or the
 * buckets. */
void program_print(FILE *out, const Program *p, Pass after);

/* ---- cost model: FLOPs and bytes per op, turned into seconds ---- */
typedef struct {
  double gemm_flops;      /* FLOP/s of the BLAS's GEMMs */
  double gemm_bf16_flops; /* FLOP/s of its GEMMs with bf16 operands (trc_gemm_rounded:
                             --compress bf16's recomputed GEMMs); optional in a
                             profile file, else gemm_flops times the default ratio */
  double loop_flops;      /* FLOP/s of generated loop nests */
  double bandwidth;       /* bytes/s of memory traffic */
  double kernel_overhead; /* seconds per kernel call */
  double cache_bandwidth; /* bytes/s of a kernel moving at most cache_bytes: */
  double cache_bytes;     /* values a step just made or soon reads again are in the
                             cache; optional in a profile file, else bandwidth
                             times the default ratio, and the default size */
  double attention_flops; /* fused attention (trc_causal_attention and its
                             gradient): FLOP/s, plus */
  double attention_block_seconds; /* per task (attention_blocks); optional,
                             else gemm_flops times the default ratio, and the default */
  double conv_flops;      /* FLOP/s of the convolution library's forward
                             pass, its layout reorders (conv_reorder_bytes)
                             priced apart at bandwidth (in profiles written
                             before the passes were timed apart: all three's);
                             optional, else gemm_flops times the default ratio */
  double conv_data_flops; /* the same for the data gradient's pass; optional,
                             else conv_flops */
  double conv_weight_flops; /* and the weight gradient's; optional, else
                             conv_flops */
  double conv_bf16_flops; /* the forward under precision bf16 (bf16 inputs, f32
                             accumulation), the gradients' passes at it times
                             their fp32 ratio to the forward; optional, else
                             conv_flops times the default ratio */
  double math_calls;      /* expf, logf, tanhf, erff evaluations a second in
                             loop kernels (kernel_math_calls), on top of their
                             FLOPs; optional, else loop_flops times the default
                             ratio */
  double window_accesses; /* loads and stores a second in rows of pooling
                             windows (kernel_short_row_work), on top of their
                             FLOPs; optional, else loop_flops times the default
                             ratio */
  double window_row_seconds; /* per row of windows started: a short row's
                             tail; optional (may be 0), else the default */
  double scratch_accesses; /* loads and stores a second in a pool by rows of
                             scratch (its rows of 14 or 28 columns and of a
                             plane's cells); optional, else window_accesses
                             times the default ratio */
  double scratch_row_seconds; /* per such row started; optional (may be 0),
                             else the default */
  double update_bandwidth; /* bytes/s of the optimizer step's passes
                             (update_bytes_per_float): streams read and written
                             back in place, which move faster than a kernel
                             writing a fresh output (bandwidth); optional, else
                             bandwidth times the default ratio */
  double gemm_matrix_seconds; /* per matrix of a batched GEMM call, beyond its
                             FLOPs: bmm's many small sgemm calls (attention's
                             heads) run below gemm_flops; optional, else the
                             default */
  double rng_draws;       /* dropout's random numbers a second in loop kernels
                             (kernel_random_draws), on top of their FLOPs;
                             optional, else math_calls times the default ratio */
  double gemm_element_seconds; /* per element of a GEMM's A, B and C
                             (gemm_elements), beyond its FLOPs: the BLAS packs
                             A and B and updates C, which a GEMM with a short
                             side does not hide; optional (may be 0), else 0:
                             GEMMs priced by their FLOPs alone */
  const char *source;     /* the file the figures were read from (the driver's
                             --profile); NULL: profile_default()'s */
} MachineProfile;

/* Figures for a typical 2-core AVX-512 machine (see docs/planner.md). */
MachineProfile profile_default(void);
/* Parses the text of a profile written by `trainc calibrate` (lines
 * `key = value`, `#` comments) into p; false after reporting what is wrong.
 * The passes do no I/O: the driver reads the file (and the machine's free
 * memory for `checkpoint auto`) and hands the figures down. */
bool profile_parse(const SourceFile *f, MachineProfile *p, Diag *diag);
void profile_write(FILE *out, const MachineProfile *p);
/* Predicted seconds of one node's kernel: the slower of its FLOPs (and its
 * loop work, node_loop_work) and its memory traffic, plus the per-call
 * overhead; 0 for leaves and views, which run no code. node_seconds builds
 * the node's kernel to count its loop work; a caller that has counted it
 * passes the count. */
double node_seconds(const Graph *g, const Node *n, const MachineProfile *m);
double node_seconds_counted(const Graph *g, const Node *n, LoopWork w, const MachineProfile *m);
/* g's chunked loss head's node_seconds with `chunk` rows at a time. */
double head_seconds_at(const Graph *g, const MachineProfile *m, int64_t chunk);
/* A loop node's work the FLOPs do not count (its kernel, built for the
 * count); zero for other nodes. */
LoopWork node_loop_work(const Graph *g, const Node *n);
/* Moving bytes: at cache_bandwidth up to cache_bytes, else at bandwidth. */
double memory_seconds(double bytes, const MachineProfile *m);
/* Predicted seconds of each node of p->g (a new array, one per node id): a
 * step with values fused into it (Program.fused_into, stored_by) is one
 * kernel call over all their FLOPs, moving their bytes less each fused
 * value's store and load (a stored one's load),
 * its time shared among them in proportion to their unfused node_seconds.
 * A scheduled kernel reads from memory, at `bandwidth`, the inputs that
 * have left the cache (more than cache_bytes moved since they last moved),
 * the rest as memory_seconds prices its traffic; an unscheduled node's is
 * its node_seconds. With cache_credit, also what the kernels outside
 * recomputation would take longer had the recomputed values they read been
 * stored since forward (read from memory): recomputation's saving beside
 * its cost. Linear in the graph. */
double *program_node_seconds(const Program *p, const MachineProfile *m, double *cache_credit);
/* What a node's time adds to: the forward or backward pass, or what the
 * plan adds to `off`'s step (recomputing, rounding to bf16 and widening
 * back). */
typedef enum { PHASE_FORWARD, PHASE_BACKWARD, PHASE_RECOMPUTE } StepPhase;
StepPhase node_phase(const Graph *g, const Node *n);
/* Fills p's kernel_seconds and update_seconds under m, for each precision. */
void program_predict(Program *p, const MachineProfile *m);
/* A micro-batch's share of the step's update (the gradients zeroed, their
 * norm, the optimizer's pass, precision bf16's weight copy): memory-bound
 * passes over the trained parameters, once per accumulation window. */
double update_seconds(const Program *p, const MachineProfile *m);
/* The bytes each trained float moves in that update under `run`. */
double update_bytes_per_float(const trc_train_config *run);

/* ---- the checkpoint planner ----
 * The forward graph is cut into stages at single-tensor boundaries (each
 * stage closed after a compute-heavy piece, so cheap pointwise tails are
 * recomputed from the stored GEMM output). Each stage is KEEP (its values
 * stored), SELECT (its values stored but its cheap ones, which loop kernels
 * remake from stored values without a GEMM: selective recomputation, per
 * value), CKPT (only its boundary stored, the rest recomputed) or DROP
 * (nothing stored). Recomputation happens just in time in the backward pass:
 * a recomputed value is rebuilt right before its first backward use, from the
 * nearest stored values, once.
 * A fifth mode, BF16, offered only under `--compress bf16`, is KEEP with
 * the values its backward reads only as GEMM operands, signs or gradient
 * scales (reads_bf16 in checkpoint.c) stored in bf16: half their bytes for
 * a rounding pass in forward and a widening one in backward. */
typedef enum { STAGE_KEEP, STAGE_SELECT, STAGE_BF16, STAGE_CKPT, STAGE_DROP } StageMode;

/* The per-stage figures the budget search optimizes over (its memory model). */
typedef struct {
  int n;                   /* stages 1..n; index 0 stands for the inputs */
  uint64_t *keep_bytes;    /* what its backward reads: stored when KEEP, rebuilt when dropped */
  uint64_t *boundary_bytes;/* stored when CKPT */
  uint64_t *free_bytes;    /* of keep_bytes, the boundary when no backward reads it:
                              a KEEP, SELECT or BF16 stage stores it only when the
                              stages after it are recomputed from it */
  uint64_t *select_bytes;  /* stored when SELECT: keep_bytes less its cheap values */
  double *select_seconds;  /* remaking its cheap values when SELECT */
  uint64_t *packed_bytes;  /* stored when BF16: keep_bytes with its packable values halved */
  double *packed_seconds;  /* rounding them in forward and widening them in backward */
  uint64_t *inner_bytes;   /* peak of its own backward: its kept values still needed
                              plus gradients in flight (measured without recompute) */
  uint64_t *transient_bytes; /* its largest value the backward does not read,
                              alive for a moment while a recompute passes */
  double *interior_seconds;/* recompute time of the stage minus its boundary */
  double *boundary_seconds;
  uint64_t fixed_bytes;    /* parameters, gradients, inputs, optimizer state, outputs */
} StageModel;

/* The model's peak and recompute time for modes[1..n] (see docs/planner.md). */
uint64_t stage_model_peak(const StageModel *sm, const StageMode *modes);
double stage_model_seconds(const StageModel *sm, const StageMode *modes);
/* The modes of least model time whose model peak fits in budget (a dynamic
 * program over segments, exact while its fronts and segments stay within
 * the limits of checkpoint.c; past them near-optimal, and never worse than
 * the best of off, every 1..4 and sqrt's period that fits); false when none
 * is found. */
bool stage_model_solve(const StageModel *sm, uint64_t budget, StageMode *modes);

typedef struct Plan {
  CheckpointSpec spec;
  ProgramOptions build;    /* how the chosen plan's program is built */
  int n_forward;           /* forward ids are [0, n_forward) in graph and source */
  bool *recompute;         /* per forward id: RECOMPUTE (else STORE) */
  int *stage;              /* per forward id: its stage (1..), 0 for leaves and dead values */
  bool *boundary;          /* per forward id: the value that ends its stage */
  bool *cheap;             /* per forward id: recomputed when its stage is SELECT */
  LoopWork *loop_work;     /* per forward id: node_loop_work, counted once */
  bool *packable;          /* per forward id: stored in bf16 when its stage is BF16 */
  bool *packed;            /* per forward id: stored in bf16 (decided) */
  bool *kept_back;         /* per forward id: stored although its stage's mode
                              recomputes it (the budget search's per-value choice) */
  bool rounded;            /* recomputed GEMMs round their operands to bf16
                              (Node.rounded): under --compress bf16, unless the
                              budget left no room for their operand buffer */
  int64_t head_chunk;      /* the loss head's rows per chunk as the budget search
                              chose them; 0: the graph's (passes/head.c's) */
  int64_t graph_chunk;     /* the graph's: the default, or --loss-head ROWS */
  StageModel model;
  StageMode *modes;        /* per stage, 1..model.n */
  Graph *graph;            /* the source graph with recompute nodes woven into backward */
  Program *program;        /* its schedule and memory plan (kernels lowered) */
  MachineProfile profile;
  double forward_seconds, backward_seconds, recompute_seconds;
  double cache_credit;     /* what backward saves reading recomputed values from the
                              cache (program_node_seconds): recompute_seconds less
                              this is what the plan adds to `off`'s step */
  double update_seconds;   /* a micro-batch's share of the optimizer step's (update_seconds) */
  double forward_flops, backward_flops, recompute_flops;
  uint64_t optimizer_bytes;/* optimizer state, outside the arena */
  uint64_t bf16_bytes;     /* precision bf16: the parameters' bf16 copy the GEMMs read */
  uint64_t operand_bytes;  /* the GEMM operands' bf16 buffer: the program's
                              bf16_operand_bytes under precision bf16, else its
                              rounded_operand_bytes */
  uint64_t peak_bytes;     /* arena + optimizer state + both bf16 buffers: what
                              the budget bounds */
  double schedule_seconds; /* of the time planning took, what the schedules and
                              memory plans of its candidates took (--time-phases) */
  struct PlanMemo *memo;   /* candidates realized by earlier searches of the same
                              graph and profile (a sweep's); not owned; NULL: none */
  struct {
    int fused;             /* attentions the plan's graph fuses */
    bool chosen;           /* the planner chose between fused and unfused
                              (--attention auto); then the other form's plan: */
    bool other_fits;
    double other_seconds;  /* its predicted micro-batch (plan_step_seconds) */
    uint64_t other_peak;   /* its peak; where it does not fit, the least it could */
  } attention;
} Plan;

/* A micro-batch's predicted time, the optimizer step's share included. */
double plan_step_seconds(const Plan *pl);
/* Its predicted recompute overhead: the recompute time (less what backward
 * saves reading recomputed values from the cache) over the step without. */
double plan_overhead(const Plan *pl);

/* WEAVE: plans g (after autodiff) under spec; for CKPT_AUTO, spec.budget is
 * the memory the caller found for it (`--memory`, else the machine's). Each
 * candidate is woven and built to SCHEDULE for its true peak and time; the
 * chosen one is built with o (NULL: program_build's defaults). Returns NULL
 * after reporting an impossible budget (naming the smallest feasible peak)
 * against g's source file. g is only read; the plan owns its rewritten graph
 * and program. */
Plan *plan_checkpoints(const Graph *g, CheckpointSpec spec, const MachineProfile *m,
                       const ProgramOptions *o, Diag *diag);
void plan_free(Plan *p);
/* The plan with the given stage modes, 1..n, n from a plan of the same graph,
 * and the forward values in kept_back (NULL: none) stored although their
 * modes recompute them (exhaustive searches in tests compare against the
 * planner with it). */
Plan *plan_with_modes(const Graph *g, const StageMode *modes, const bool *kept_back,
                      const MachineProfile *m);
/* What a trainer's --kernel-times measured (measured.c; docs/trainer.md,
 * *Kernel times*): seconds per micro-batch. */
typedef struct {
  double forward, backward, recompute, rest, step, overhead; /* rest: the update when predicted */
} MeasuredPhases;
typedef struct {
  const char *path;
  char *model, *checkpoint;
  char *precision; /* the run's ("fp32", "bf16"); NULL in a file from before the key */
  uint64_t arena_bytes;
  int64_t steps;
  MeasuredPhases measured, predicted; /* predicted: the trainer's, for the run's precision */
} MeasuredTimes;
/* Reads the file's first line; false after saying why. */
bool measured_parse(const SourceFile *f, MeasuredTimes *m, Diag *diag);
/* Whether it measured the trainer of pl (model, checkpoint, arena); false
 * after saying what differs. */
bool measured_matches(const MeasuredTimes *m, const Plan *pl, Diag *diag);
void measured_free(MeasuredTimes *m);

typedef enum { PLAN_TABLE, PLAN_JSON, PLAN_DOT } PlanFormat;
/* Per forward value: stage, name, op, line, shape, bytes, STORE / RECOMPUTE /
 * transient; then the peak by category and the predicted times, and what a
 * run measured when given (NULL: none). */
void plan_print(FILE *out, const Plan *pl, PlanFormat format, const MeasuredTimes *measured);

/* The trade-off curve: budgets from the least peak to `off`'s. */
typedef struct {
  uint64_t budget, peak;
  double overhead; /* predicted recompute time / the rest of the step (plan JSON's overhead) */
  double added;    /* what the search minimizes over the same: the recompute
                      time, plus what the loss head's chunk adds against the
                      graph's (less, where a larger chunk is faster) */
  int64_t head_chunk; /* the loss head's rows per chunk; 0: no chunked head */
  bool fits;
} SweepPoint;
/* compress: under --compress bf16 (CheckpointSpec.compress). */
SweepPoint *plan_sweep(const Graph *g, const MachineProfile *m, bool compress, int *count);
void sweep_print(FILE *out, const SweepPoint *pts, int n);
void sweep_json(FILE *out, const SweepPoint *pts, int n, const char *model, bool compress);
void sweep_svg(FILE *out, const SweepPoint *pts, int n, const char *title);

/* ---- the whole pipeline ---- */
/* The passes from source text to the planned Program, in two parts so that
 * the caller can pick the checkpoint policy from the graph's train block. */
typedef struct {
  const char *model;  /* the model to compile when the file holds several */
  ConvForm conv;
  bool no_fuse;       /* --no-fuse */
  int64_t head_chunk; /* --loss-head: rows per chunk, or HEAD_CHUNK_DEFAULT, _AUTO, HEAD_WHOLE */
  AttentionForm attention; /* --attention */
  Pass dump;          /* print the program after this pass (PASS_NONE: none) */
  FILE *dump_out;
  uint64_t bucket_bytes; /* 0: GRAD_BUCKET_BYTES */
} CompileOptions;

typedef struct {
  Ast *ast;
  Graph *graph;      /* after GRAD; after WEAVE, the one the plan was made of */
  Graph *unfused;    /* --attention auto where the graph fuses attention: the
                        graph without, which WEAVE prices against it; after
                        WEAVE, the one it did not choose (else NULL) */
  int fused_attention; /* the attentions c->graph fuses (ATTENTION) */
  Plan *plan;        /* after WEAVE: the woven graph and its Program */
  double seconds[PASS_COUNT]; /* per pass run; the program passes are in
                                 WEAVE's (plan->schedule_seconds) */
} Compilation;

/* AST, IR, GRAD: false after reporting an error. */
bool compile_graph(Compilation *c, SourceFile *src, const CompileOptions *o, Diag *diag);
/* WEAVE and the program passes: false after reporting an error. With
 * c->unfused, plans both graphs and keeps the faster predicted step of
 * those that fit (Plan.attention says which and what the other took). */
bool compile_program(Compilation *c, CheckpointSpec spec, const MachineProfile *m,
                     const CompileOptions *o, Diag *diag);
void compilation_free(Compilation *c);

#endif
