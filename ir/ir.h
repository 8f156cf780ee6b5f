/* ir.h — the typed tensor graph, the op table and the loop-nest form of kernels.
 *
 * The whole interface of the IR stage. lower_ast() turns a parsed model into a
 * Graph whose every node has a static shape (B, the micro-batch, is a number
 * here). Every op is declared once, as a record of the op table ir/ops.def:
 * its class (leaf, view, GEMM or loop kernel), its model-file builtin name if
 * it has one, and its functions, which ir/ops/ defines in the file of its
 * family (pointwise.c, rows.c, ...): shape rule, cost, backward rule written
 * with other ops, kernel as a loop nest, attribute printer. Lowering, autodiff, the planner
 * and every backend read that table and the class and infer nothing from
 * which parts an op lacks, so adding an op is its record in ops.def and its
 * functions in ir/ops/ (a pointwise op: a backward rule and a scalar formula;
 * see docs/architecture.md).
 *
 * Invariants of a Graph:
 *   - nodes are in topological order: every input id is smaller than the node's;
 *   - ids [0, n_forward) are the forward graph; later ids are built by passes
 *     (autodiff) and may read forward values;
 *   - every node's shape is known and its element count fits in int64;
 *   - g->nodes never moves: its storage is reserved once, as address space
 *     for IR_MAX_NODES nodes whose pages the kernel commits as nodes are
 *     written, so a Node * stays valid until graph_free however the graph
 *     grows (pointers held across a growing array were two use-after-frees). */
#ifndef TRAINC_IR_H
#define TRAINC_IR_H

#include "frontend.h"
#include "trainc.h" /* the train config and its enums: the ABI shared with the runtime */

#define IR_MAX_RANK 8
#define IR_MAX_IN 4
/* Lowering refuses a model of more than IR_MAX_FORWARD nodes; autodiff adds
 * at most 8 nodes per forward node (div: 6, plus a sum or a copy for each
 * input) and recompute weaving at most one clone per forward node, so no
 * graph the passes build outgrows IR_MAX_NODES. */
#define IR_MAX_FORWARD TRAINC_MAX_OPS
#define IR_MAX_NODES (16 * IR_MAX_FORWARD)

typedef struct {
  int rank;
  int64_t dim[IR_MAX_RANK];
} Shape;

int64_t shape_numel(const Shape *s);
bool shape_equal(const Shape *a, const Shape *b);
/* Writes "[128, 784]" into buf and returns it. */
const char *shape_str(const Shape *s, char buf[128]);

/* The ops: one record each in ir/ops.def (name, class, model-file builtin,
 * arity, shape rule, cost, backward rule, kernel, attribute printer). Ops
 * marked "(bwd)" appear only in backward graphs. */
typedef enum {
#define OP(e, ...) e,
#include "ops.def"
#undef OP
  OP_COUNT
} OpKind;

/* What an op's node is for the passes and backends (ir/ops.def says more). */
typedef enum {
  OPC_LEAF, /* set by the runtime, never computed */
  OPC_VIEW, /* its input's storage (node_is_view): no code */
  OPC_GEMM, /* a matrix product: the backend's BLAS */
  OPC_CONV, /* a convolution pass: the backend's convolution library */
  OPC_CALL, /* a runtime function of its own: the chunked loss head */
  OPC_LOOP, /* a loop-nest kernel */
} OpClass;

typedef struct {
  trc_init_kind kind;
  double a, b;             /* normal: mean, std; uniform: low, high; xavier/he: gain */
  int64_t fan_in, fan_out;
} Init;

/* A model file may pin a value's checkpoint decision: store(x), recompute(x). */
typedef enum { PIN_NONE, PIN_STORE, PIN_RECOMPUTE } PinKind;
/* An op's constant arguments; what each field means is said per op in
 * ir/ops.def (e.g. matmul: i[0], i[1] = transpose flags; permute: i[0..rank)
 * = the axis order; reshape: shape = the new shape). */
typedef struct {
  double f[2];
  int64_t i[IR_MAX_RANK];
  Shape shape;
} Attr;

typedef struct {
  int id;
  OpKind op;
  DType dtype;
  Shape shape;
  int in[IR_MAX_IN];
  int nin;
  Attr attr;
  const char *name;        /* params and inputs: their full name; others: the
                              model-file variable it was assigned to, or NULL */
  SrcLoc loc;              /* the model-file expression it comes from */
  Init init;               /* OP_PARAM */
  bool decay;              /* OP_PARAM: weight decay applies */
  int64_t index_limit;     /* OP_INPUT: values must be < this (0: not an index) */
  bool has_ignore;         /* OP_INPUT labels of cross_entropy(..., ignore = L): */
  int64_t ignore_label;    /* L (< 0) is allowed too, and such rows count for nothing */
  bool frozen;             /* OP_PARAM: `freeze`d: no gradient, no optimizer state */
  bool transposed;         /* OP_PARAM: weight files hold it as [in, out] (`map ... transposed`) */
  char *file_name;         /* OP_PARAM: its name in weight files (`map`), NULL: `name` */
  int grad_of_param;       /* >= 0: this node ADDS its value into that param's
                              gradient slot instead of owning a buffer */
  int recompute_of;        /* >= 0: a backward-time recomputation of that
                              forward node (same op, same inputs' values) */
  bool rounded;            /* a GEMM recomputed under --compress bf16: its operands
                              rounded to bf16, accumulated in f32 (trc_gemm_rounded) */
  int origin;              /* backward nodes: the forward node whose backward
                              rule made them; -1 otherwise */
  PinKind pin;             /* the model file's store()/recompute() annotation */
  int scope;               /* made inside a def or repeat copy: its layer path is
                              Graph.scopes[scope - 1] ("block.3"); 0 at model level */
} Node;

/* ---- the train block, given meaning ---- */
/* `checkpoint off | all | sqrt | every N | budget SIZE | auto` (docs/planner.md). */
typedef enum { CKPT_OFF, CKPT_ALL, CKPT_SQRT, CKPT_EVERY, CKPT_BUDGET, CKPT_AUTO } CheckpointPolicy;
typedef struct {
  CheckpointPolicy policy;
  int64_t every;   /* CKPT_EVERY: store every N-th stage boundary */
  uint64_t budget; /* CKPT_BUDGET: bytes the whole peak must fit in;
                      CKPT_AUTO: the machine's memory, which the driver
                      fills in (--memory, else what is free) */
  bool compress;   /* `--compress bf16`: the plan may store values in bf16
                      (docs/planner.md, *Storing in bf16*) */
} CheckpointSpec;

/* The policy's forms, as error messages list them. */
#define CHECKPOINT_FORMS "off, all, sqrt, auto, every N or budget SIZE"
/* The policy a word names ("off", "all", "sqrt", "every", "budget", "auto"):
 * the one list of policy words, read by the train block and by the text form
 * below. False for any other word. */
bool checkpoint_policy_parse(const char *word, CheckpointPolicy *policy);
/* every and budget take a number after the word; the others nothing. */
bool checkpoint_policy_takes_number(CheckpointPolicy policy);
/* The text form (`--policy`): "off", "all", "sqrt", "auto", "every 4",
 * "budget 64MiB" → spec; false (spec untouched) for anything else. */
bool checkpoint_spec_parse(const char *text, CheckpointSpec *spec);
/* Writes the spec back in that form (a budget in bytes: "budget 1048576B"). */
const char *checkpoint_spec_str(const CheckpointSpec *spec, char buf[64]);

/* The compile-time settings, and the run-time ones the trainer is compiled
 * with as its defaults (trc_model.defaults; its flags override them). */
typedef struct {
  int64_t batch;             /* B, compiled into every shape */
  CheckpointSpec checkpoint;
  bool no_fuse;              /* `--no-fuse`: program_build fuses nothing */
  trc_train_config run;      /* runtime/trainc.h */
} TrainConfig;

/* True when the train block asks for more than one process (LocalSGD, data
 * parallelism): `trainc build` then links MPI. */
bool train_is_distributed(const TrainConfig *t);

/* Strings the graph owns (file name patterns). */
typedef struct {
  char **items;
  int n, cap;
} NameList;

typedef struct {
  const char *model_name;
  const char *source_path;
  Node *nodes;             /* IR_MAX_NODES reserved, n used; never moves */
  int n;
  int n_forward;           /* see the invariants above */
  int loss;                /* the node named `loss` (f32 scalar) */
  int predict;             /* the `predict` node, -1 if none */
  int labels;              /* the input whose values are class labels, -1 */
  int tokens;              /* the embedded token-id input [B, T] of a sequence
                              model with predict [B, T, vocab] (sampling feeds
                              it a context), -1 */
  int loss_seed;           /* OP_LOSS_SEED node, created by autodiff (or the
                              loss head, which reads it); -1 before */
  int loss_head;           /* the linear_cross_entropy node of a chunked loss
                              head (passes/head.c), -1 if none; predict is
                              then its input x */
  int rng_key, training;   /* OP_RNG_KEY / OP_TRAINING leaves (dropout), -1 if unused */
  int n_dropout;           /* dropout ops so far: each gets its own random stream */
  bool too_large;          /* lowering refused a node past IR_MAX_FORWARD (said once) */
  trc_loss_kind loss_kind;
  int *params;             /* param node ids, in declaration order, except that
                              frozen ones come after all others (weights.c) */
  int n_params, cap_params;
  int *inputs;             /* input node ids, in declaration order */
  int n_inputs, cap_inputs;
  TrainConfig train;
  NameList allow_missing;    /* `weights { allow_missing ... }`: file name patterns */
  NameList allow_unexpected; /* `weights { allow_unexpected ... }` */
  char **scopes;           /* layer paths of defs and repeat copies (Node.scope) */
  int n_scopes, cap_scopes;
} Graph;

/* ---- op table ---- */
typedef struct Kernel Kernel;

typedef struct {
  const char *name;
  OpClass op_class;
  int arity;
  /* Sets node->shape and dtype from its inputs and attrs; reports a located
   * error and returns false when they do not fit. */
  bool (*infer)(const Graph *g, Node *n, Diag *diag);
  /* Multiply-adds count as 2 FLOPs. */
  double (*flops)(const Graph *g, const Node *n);
  /* Given dy (the gradient of the objective w.r.t. n), adds gradient nodes for
   * the inputs i with want[i] and stores their ids in dx[i] (-1 elsewhere).
   * NULL for ops that are never differentiated (backward-only ops, leaves). */
  void (*backward)(Graph *g, int n, int dy, const bool want[IR_MAX_IN], int dx[IR_MAX_IN]);
  /* The op's kernel as a loop nest; NULL for leaves, GEMMs and the views that
   * never add into a gradient slot (slice). */
  Kernel *(*kernel)(const Graph *g, const Node *n);
  /* Writes the node's attributes for graph_print (" {...}"); NULL: none. */
  void (*print_attrs)(FILE *out, const Node *n);
} OpInfo;

const OpInfo *op_info(OpKind op);

/* The list as "a,b,c" (the runtime's form of pattern lists: names have no
 * ','), NULL when it is empty; the caller frees it. */
char *namelist_join(const NameList *l);
/* The parameters' node ids in declaration order (= id order), which the
 * trainer's tables keep: a parameter's seeded init and its place in weight
 * files do not move when another is frozen. The caller frees it. */
int *graph_params_declared(const Graph *g);
/* How many parameters train: params[0, n) are, the rest are frozen. */
int graph_trained_params(const Graph *g);
/* A parameter's name in weight files: its `map`ped name, else its own. */
const char *node_file_name(const Node *param);

/* A GEMM node as one BLAS call per batch, row-major: C = op(A) op(B) with
 * op(A) [m, k], op(B) [k, n]; matmul views each operand as one matrix [rows,
 * last dim], bmm as a batch of matrices (the last two dims). The batch has
 * two levels, batch x heads: product (o, h) of an operand starts at
 * o * stride_* + h * head_stride_* (heads == 1 but for a bmm with heads,
 * ops.def); accumulate: C += (beta = 1), the node adds into a parameter's
 * gradient slot. */
typedef struct {
  bool trans_a, trans_b, accumulate;
  bool rounded;            /* Node.rounded: A and B rounded to bf16 */
  bool f32;                /* A and B stay f32 under precision bf16
                              (gemm_rounds_under_bf16 false; not rounded) */
  int64_t m, n, k, batch, heads;
  int64_t lda, ldb, ldc;
  int64_t stride_a, stride_b, stride_c;
  int64_t head_stride_a, head_stride_b, head_stride_c;
} GemmDims;
void gemm_dims(const Graph *g, const Node *n, GemmDims *d);
/* The matrices a GEMM node's call multiplies (batch * heads); 0 for any
 * other node. */
int64_t gemm_matrices(const Graph *g, const Node *n);
/* The elements a GEMM node's matrices hold, A, B and C each (per matrix
 * m k + k n + m n), or the loss head's three GEMMs' chunk by chunk
 * (head_gemm_elements), or a convolution's run as GEMMs
 * (conv_weights_by_gemm); 0 for any other node. A BLAS packs A and B and
 * reads and writes C beside its arithmetic, which a GEMM with a short side
 * does not hide: the cost model prices them at
 * MachineProfile.gemm_element_seconds. */
double gemm_elements(const Graph *g, const Node *n);
/* Whether node n multiplies bf16 operands when the run's precision is bf16:
 * the matrix products and the loss head do; bmm's many small products do not
 * (rounding their operands took more time than bf16 saved:
 * bench/RESULTS.md), nor does any other node. */
bool gemm_rounds_under_bf16(const Node *n);
/* bmm's head layout bits (attr.i[3], ops.def): which of a, b and the
 * output c are stored head-interleaved, [lead..., rows, heads * cols]. */
enum { BMM_HEADS_A = 1, BMM_HEADS_B = 2, BMM_HEADS_C = 4 };
/* bmm of in[0], in[1] (transposed as ta, tb) over `heads` heads (0: none)
 * with the operands laid out as `layout` (BMM_HEADS_* bits). */
int graph_add_bmm(Graph *g, const int in[2], bool ta, bool tb, int64_t heads, int layout,
                  SrcLoc loc, Diag *diag);

/* A node of the conv ops as one trc_conv2d call (runtime/trainc.h): the
 * pass (trc_conv_pass), images [n, c, h, w], weights [o, c, k, k]; the
 * operands a and b are the node's inputs in order; bias: the forward pass
 * adds its third input, relu: then applies relu; accumulate: dw +=, the
 * weight gradient adds into its parameter's slot. */
typedef struct {
  int pass;
  int64_t n, c, h, w, o, k, stride, pad;
  bool bias, relu, accumulate;
} ConvDims;
void conv_dims(const Graph *g, const Node *n, ConvDims *d);
/* The pass's multiply-adds (2 FLOPs each) and its epilogue's FLOPs. */
double conv_flops(const ConvDims *d);
/* Bytes the convolution library's layout changes move on top of the
 * convolution: oneDNN computes on images of 16 channels or more in a
 * blocked layout (nChw16c), so each such image the pass reads or writes
 * is reordered from or into the arena's NCHW, read and written once more
 * (bench/RESULTS.md: fashion_cnn's first convolution spent half its time
 * there). The cost model prices them at memory bandwidth. */
double conv_reorder_bytes(const ConvDims *d);
/* Whether the runtime runs the pass as one sgemm an image, not on oneDNN's
 * primitive: the weight gradient of images of one channel
 * (runtime/kernels/conv.c, weights_by_sgemm: oneDNN's primitive ran
 * fashion_cnn's first at ~8 GFLOP/s on AMD Zen 3). Such a pass reorders
 * nothing; it writes each image's k k shifted copies and multiplies
 * dy [o, oh ow] by them, its elements in gemm_elements; under bf16 it
 * rounds the copies and a copy of dy first. conv_im2col_bytes: the bytes
 * those passes move (bf16: the run's precision). */
bool conv_weights_by_gemm(const ConvDims *d);
double conv_im2col_bytes(const ConvDims *d, bool bf16);

/* A linear_cross_entropy node (the chunked loss head, ir/ops/head.c) as
 * one trc_linear_cross_entropy call: n rows of width d, v classes, `chunk`
 * rows at a time; w is [v, d] when w_vd, else [d, v]; adds_dw: w trains,
 * its gradient is added into its slot. The output holds dx ([n, d]), then
 * from float stats_at each row's loss and then its argmax; the chunk's
 * logits go to a scratch of scratch_bytes (node_scratch_bytes). */
typedef struct {
  int64_t n, d, v, chunk;
  bool w_vd, has_ignore, adds_dw;
  int64_t ignore_label;
  int64_t stats_at;
  uint64_t scratch_bytes;
  bool planner_chooses; /* --loss-head auto: the budget search may change chunk */
} HeadDims;
void head_dims(const Graph *g, const Node *n, HeadDims *h);
/* What a training call of the head does beside its GEMMs' arithmetic,
 * which they do not hide (measured: bench/RESULTS.md). Passes over w: each
 * chunk's logits and dx GEMMs read w, and its weight-gradient GEMM reads
 * and writes w's gradient; less the one read of w its operands count
 * (bytes, from the cache while w and its gradient, in_play, fit there).
 * The rows' own work: each chunk's logits read back and rewritten with
 * their gradient (row_bytes, from the cache while one chunk's logits,
 * row_in_play, fit there), and two expf a logit (math_calls: the row's sum
 * of exponentials, then its gradient). */
typedef struct {
  double bytes, in_play;
  double row_bytes, row_in_play, math_calls;
} HeadPasses;
HeadPasses head_passes(const HeadDims *h);
/* The elements of the head's GEMMs' operands and results, all chunks'
 * (gemm_elements). */
double head_gemm_elements(const HeadDims *h);
/* A causal_attention or causal_attention_grad node (ir/ops/attention.c)
 * as one trc_causal_attention(_grad) call: q, k, v [b, t, c], the heads
 * interleaved in each row (c = heads * D), the scores' scale. */
typedef struct {
  int64_t b, t, c, heads;
  double scale;
} AttentionDims;
void attention_dims(const Graph *g, const Node *n, AttentionDims *d);
/* The FLOPs of the call (grad: of its gradient), and its tasks: a block
 * of query rows of one head of one sequence each (trc_attention_block_rows),
 * which the cost model prices too. */
double attention_flops(const AttentionDims *d, bool grad);
int64_t attention_blocks(const AttentionDims *d);
/* The bytes a library call needs for its step alone besides its output
 * (the loss head's chunk of logits); 0 for every other node. */
uint64_t node_scratch_bytes(const Graph *g, const Node *n);

/* The bytes a library call's GEMMs round their operands into when they run
 * with bf16 operands (precision bf16, or a `rounded` GEMM): the largest of
 * its calls' A and B copies, each padded to BF16_COPY_ALIGN bytes, as the
 * runtime's bf16 GEMM lays them out in its one operand buffer
 * (runtime/kernels/gemm_bf16.c). weights_copied: a parameter operand of a
 * one-matrix call is read from the parameters' own bf16 copy (precision
 * bf16) and takes none. 0 for every node without a GEMM. */
#define BF16_COPY_ALIGN 64
uint64_t node_bf16_operand_bytes(const Graph *g, const Node *n, bool weights_copied);

/* GEMM, CONV and CALL nodes: a library call, no loop nest. */
bool op_calls_library(OpKind op);

/* ---- building graphs (used by lowering and by passes) ---- */
Graph *graph_new(void);
void graph_free(Graph *g);
/* Appends a node and infers its shape; on a shape error reports through
 * diag and returns -1, as for an input id < 0 (a value whose error was
 * reported). With a diag (lowering a model file) a graph holds at most
 * IR_MAX_FORWARD nodes: the first node past it is refused with one error
 * (too_large set), the later ones silently. With diag == NULL (the passes)
 * any failure is a compiler bug (abort). */
/* The layer path node id was made in ("block.3"), a backward or recompute
 * node's that of the forward node it comes from; NULL at model level. */
const char *node_layer_path(const Graph *g, int id);
/* Sets the layer path of nodes [first, g->n) that have none yet. */
void graph_set_scope(Graph *g, int first, const char *path);

int graph_add(Graph *g, OpKind op, const int *in, int nin, SrcLoc loc, Diag *diag);
int graph_add_attr(Graph *g, OpKind op, const int *in, int nin, double f0, int64_t i0,
                   int64_t i1, SrcLoc loc, Diag *diag);
int graph_add_op(Graph *g, OpKind op, const int *in, int nin, const Attr *attr, SrcLoc loc,
                 Diag *diag);
/* A node whose output is its input's storage: a node of a VIEW op (slice,
 * reshape) unless it adds into a parameter's gradient slot, where its kernel
 * copies. The memory plan gives a view its source's offset plus
 * view_offset() bytes and schedules no code for it. */
bool node_is_view(const Node *n);
/* Whether every forward node that reads v is one of readers[0, n) (the
 * graph's passes that fuse a pattern check its values have no other use). */
bool graph_read_only_by(const Graph *g, int v, const int *readers, int n);
uint64_t view_offset(const Graph *g, const Node *n);
/* Per node (a new array): the node that owns the storage it reads through a
 * view (chain); the node itself when it is not a view. */
int *graph_storage_roots(const Graph *g);
/* Broadcast a gradient back to / sum it down to the shape of node `like`. */
int graph_expand_to(Graph *g, int x, int like);
int graph_sum_to(Graph *g, int x, int like);
/* Number of bytes of one element of a dtype. */
int dtype_size(DType t);
trc_dtype dtype_abi(DType t); /* the runtime's value of the same type */

/* A graph with g's model, train block, parameters, inputs and layer paths but no nodes;
 * nodes are then added back with graph_push (passes that rebuild a graph). */
Graph *graph_copy_header(const Graph *g);
/* Appends a copy of n (name duplicated) as the next node; returns its id. */
int graph_push(Graph *g, const Node *n);

/* Prints the graph as text, one node a line (`--dump=ir`; golden tests). */
void graph_print(FILE *out, const Graph *g);

/* ---- AST → Graph ---- */
/* Lowers the model `model_name` (NULL: the only model in the file) and the
 * train block. Reports every error it finds; returns NULL if there was any. */
/* How conv2d lowers: to the conv ops (a library call: the C and LLVM
 * backends), or to im2col of the padded input and one GEMM (the CUDA
 * backend, which has no convolution library call). */
typedef enum { CONV_LIBRARY, CONV_IM2COL } ConvForm;
Graph *lower_ast(const Ast *ast, const char *model_name, ConvForm conv, Diag *diag);

/* ---- kernels as loop nests ----
 * A kernel is a list of statements over loops of constant extent; a loop
 * may instead run to a bound that depends on the variables of the loops
 * around it (`limit`: a causal row's columns c <= t), its extent then the
 * bound's static maximum. Expressions
 * index buffers, which are graph node ids; the backend maps each id to its
 * storage (arena offset). Locals are f32 scalars declared in a statement
 * list and visible to the rest of it. Index expressions are int64. */
typedef enum {
  KE_CONST,  /* f: float constant */
  KE_ICONST, /* i: integer constant */
  KE_INDEX,  /* var: the value of loop variable `var` */
  KE_LOCAL,  /* var: the value of local `var`; of a row local, its element
                at index a (i: the row's extent) */
  KE_LOAD,   /* buf[a] — f32, or the integer buffer's value widened to int64 */
  KE_UNARY,  /* op(a) */
  KE_BINARY, /* a op b */
  KE_SELECT, /* a > 0 ? b : c (float condition) */
  KE_EQ,     /* a == b on two integers or two floats, as 1.0f / 0.0f */
  KE_TO_FLOAT, /* (float)a, a integer */
  KE_RANDOM, /* uniform [0, 1) at counter a of stream i under the key in buf
                (an OP_RNG_KEY leaf): trc_kernel_uniform in trainc.h */
} KExprKind;

typedef enum { KU_NEG, KU_EXP, KU_LOG, KU_TANH, KU_ERF, KU_SQRT } KUnaryOp;
typedef enum { KB_ADD, KB_SUB, KB_MUL, KB_DIV, KB_MAX, KB_MIN } KBinaryOp;

typedef struct KExpr KExpr;
struct KExpr {
  KExprKind kind;
  int op;       /* KUnaryOp or KBinaryOp */
  double f;
  int64_t i;
  int var;      /* KE_INDEX, KE_LOCAL */
  int buf;      /* KE_LOAD */
  bool is_int;  /* the expression is an integer (index) expression */
  bool eager;   /* KE_SELECT: both arms may be evaluated whatever the
                   condition (kernel_mark_by_ranges) */
  bool narrow;  /* KE_TO_FLOAT: a's value fits in 32 bits for every value of
                   the loop variables (kernel_mark_by_ranges) */
  KExpr *a, *b, *c;
};

typedef enum {
  KS_FOR,    /* for var in [0, extent), or [0, limit) when it has one: body */
  KS_LOCAL,  /* float local var = value; or, with extent > 0 and no value,
                a row: float var[extent], scratch private to the loop
                iterations it is declared in (k_row) */
  KS_SET,    /* local var = value; a row's element var[index] = value */
  KS_STORE,  /* buf[index] = value, or += when accumulate */
} KStmtKind;

typedef struct KStmt KStmt;
struct KStmt {
  KStmtKind kind;
  int var;
  int64_t extent;
  /* KS_FOR: NULL, or the loop's run-time bound — an affine integer
   * expression of the variables of enclosing loops (no loads, no locals)
   * whose value is in [0, extent] in every iteration of them. Whatever reads
   * a loop nest reads it: the backends run [0, limit); the analyses (the
   * parallel proof, the cost model's work) take the extent, which covers
   * every run-time bound; fusion refuses a bounded loop, which is no
   * perfect nest over all elements. */
  KExpr *limit;
  KStmt **body;
  int nbody, capbody;
  int buf;
  KExpr *index, *value;
  bool accumulate;
  bool parallel; /* KS_FOR at a kernel's top level: its iterations are
                    independent (kernel_mark_parallel) */
  bool short_row; /* KS_FOR: the short row that makes its kernel's
                     short_rows (below): the loop to vectorize whatever its
                     trip count */
};

struct Kernel {
  int node;     /* the graph node it computes */
  KStmt **body;
  int nbody, capbody;
  int n_vars;   /* loop variables are 0..n_vars-1 */
  int n_locals; /* locals are 0..n_locals-1 */
  /* Its loops worth vectorizing end in a tail: a short row of cells with
   * a few loops of their own inside (a row of 7 or 14 pooling windows, or
   * a pool's row of 14 or 28 columns to fold, ops/images.c), or a row that
   * ends at run time (k_for_bounded: a causal softmax's columns). A vectorizer must finish them with a scalar or
   * masked tail, which GCC's very-cheap cost model (the default flags)
   * never does. The C backend asks GCC for its dynamic cost model in such
   * a kernel's functions (TRC_SHORT_ROWS, runtime/trainc.h). */
  bool short_rows;
  void *pool;   /* private: all expression and statement memory */
};

/* The buffers (node ids) statements body[0..n) load, store or draw random
 * numbers from, each once, ascending: returns their count and sets *ids to
 * an array the caller frees. */
int kernel_stmt_buffers(KStmt *const *body, int n, int **ids);
/* A top-level loop of one trip around one loop becomes that loop, its
 * variable read as 0: threads split a kernel's outermost loop only, and a
 * nest [1, T, C] (a bias add at batch 1) would otherwise run on one. */
void kernel_drop_unit_loops(Kernel *k);
/* Whether statements body[0..n) store into buffer buf. */
bool kernel_stmts_store(KStmt *const *body, int n, int buf);

/* How many times the kernel evaluates expf, logf, tanhf or erff (a loop
 * bounded at run time counted at its extent, the most it runs): the cost
 * model prices them apart from the FLOPs (MachineProfile.math_calls). */
double kernel_math_calls(const Kernel *k);
/* How many random numbers it draws (KE_RANDOM: dropout's counter hash, two
 * 64-bit multiplies and shifts a number, which vectorize poorly), counted
 * the same way and priced apart (MachineProfile.rng_draws). */
double kernel_random_draws(const Kernel *k);
/* A window kernel's work in its rows of windows (the short_row loops of a
 * fixed extent, ops/images.c): the loads and stores it makes there (a load
 * that two statements of one loop body share counts once, a read or set of
 * a row local's element is one) and how many times such a row starts. Rows
 * of 7 or 14 cells vectorize poorly, so the cost model prices them at
 * calibrated rates (MachineProfile.window_accesses, window_row_seconds),
 * not as FLOPs; a pool by rows of scratch (`scratch`: it declares a row
 * local), whose rows run in vectors, at rates of its own (scratch_*). */
typedef struct {
  double accesses, runs;
  bool scratch;
} ShortRowWork;
ShortRowWork kernel_short_row_work(const Kernel *k);

/* Builders, for op kernels in ir/ops/ and for tests. */
Kernel *kernel_new(int node);
void kernel_free(Kernel *k);
KStmt *k_for(Kernel *k, KStmt *parent, int64_t extent, int *var);
/* A loop over [0, limit), limit as KStmt.limit says, extent its maximum. */
KStmt *k_for_bounded(Kernel *k, KStmt *parent, int64_t extent, KExpr *limit, int *var);
KStmt *k_local(Kernel *k, KStmt *parent, KExpr *value, int *local);
KStmt *k_set(Kernel *k, KStmt *parent, int local, KExpr *value);
/* A row local of `extent` floats, its elements set and read by index (an
 * integer expression of loop variables, within [0, extent)). */
KStmt *k_row(Kernel *k, KStmt *parent, int64_t extent);
KStmt *k_set_at(Kernel *k, KStmt *parent, const KStmt *row, KExpr *index, KExpr *value);
KExpr *k_row_at(Kernel *k, const KStmt *row, KExpr *index);
KStmt *k_store(Kernel *k, KStmt *parent, int buf, KExpr *index, KExpr *value, bool accumulate);
KExpr *k_const(Kernel *k, double f);
KExpr *k_iconst(Kernel *k, int64_t i);
KExpr *k_index(Kernel *k, int var);
KExpr *k_localv(Kernel *k, int local);
KExpr *k_load(Kernel *k, int buf, KExpr *index, bool is_int);
KExpr *k_unary(Kernel *k, KUnaryOp op, KExpr *a);
KExpr *k_binary(Kernel *k, KBinaryOp op, KExpr *a, KExpr *b);
KExpr *k_select(Kernel *k, KExpr *cond, KExpr *a, KExpr *b);
KExpr *k_eq(Kernel *k, KExpr *a, KExpr *b);
KExpr *k_to_float(Kernel *k, KExpr *a);
KExpr *k_random(Kernel *k, int key_buf, int64_t stream, KExpr *counter);
/* Integer index arithmetic: a*stride + b, folding constants. */
KExpr *k_iadd(Kernel *k, KExpr *a, KExpr *b);
KExpr *k_imul(Kernel *k, KExpr *a, int64_t c);

/* Parallel loops. Sets `parallel` on every top-level loop of k whose
 * iterations may run at once, on any threads, in any order, with bitwise the
 * result of running them in sequence — proved from the loop nest, not
 * declared by the op (ir/parallel.c). A loop is parallel when
 *   - it reads and sets no local declared outside it (a reduction into an
 *     outer local, as sum and cross_entropy's total, keeps it sequential;
 *     a row's own reductions live in locals declared inside the row), and
 *   - for every buffer it stores to, every store and load of that buffer in
 *     it is at an affine index (constants plus loop variables times
 *     constants: no value loaded from memory), all with one coefficient
 *     c > 0 of the loop's variable i, and all within c consecutive elements
 *     over the inner loops' ranges: iteration i then touches only
 *     [c*i + lo, c*i + lo + c) of that buffer, which no other iteration
 *     reads or writes; or every such index is X * M plus such an affine
 *     form, X a value loaded from memory and M > 0 one constant (a row
 *     picked by id, as embedding_grad's scatter), and all iterations' slabs
 *     lie within [0, M): iteration i then touches only elements whose
 *     residue modulo M is in its slab.
 * Each iteration runs its statements in order, so every float is computed
 * by the same operations in the same order as sequentially. The proof takes
 * the buffers of one kernel to be disjoint (the memory plan's promise, the C
 * backend's `restrict`). Inner loops are never marked. program_build marks
 * every kernel it lowers (Program.kernels); backends read the flag. */
void kernel_mark_parallel(Kernel *k);
/* Marks what the ranges of k's loop variables make safe. Each select of k
 * `eager` when every load in its two arms reads inside its buffer (node
 * buf of g: its shape's elements) for every value
 * of the loop variables within their loops' extents: the indices affine,
 * their range over the extents in bounds. A backend may then evaluate both
 * arms before choosing, which lets a C compiler vectorize the select.
 * And each conversion to float `narrow` when its integer operand fits in
 * 32 bits the same way (or is a load from an integer buffer, i32 or u8):
 * a backend may then convert from 32 bits, which vectorizes where 64-bit
 * integers to float do not (AVX2 has no such instruction), with the same
 * float. program_build marks every kernel it lowers. */
void kernel_mark_by_ranges(const Graph *g, Kernel *k);
/* What every kernel goes through before a backend prints it, in order:
 * kernel_drop_unit_loops, kernel_mark_parallel, kernel_mark_by_ranges
 * (program_mark_kernels; the calibration program's kernels too). */
void kernel_prepare(const Graph *g, Kernel *k);
/* Index expression e of k as *konst + sum of coef[v] * v over k's loop
 * variables (coef: k->n_vars entries); false when it is not affine (a load,
 * a product of two variables, an overflow). */
bool kexpr_affine(const Kernel *k, const KExpr *e, int64_t *coef, int64_t *konst);
/* The range [*lo, *hi] of index expression e of k with each loop variable v
 * over [0, extent[v]); false when e is not affine or uses a variable whose
 * extent is 0 (no loop), or on an overflow. */
bool kexpr_range(const Kernel *k, const KExpr *e, const int64_t *extent, int64_t *lo,
                 int64_t *hi);

/* How a backend runs a parallel loop (the same for every backend, so that
 * they split the same work the same way): s runs through the runtime's
 * trc_kernel_loop when it is a marked loop of more than one iteration; its
 * iterations go to a thread `chunk` at a time (n_chunks of them), and
 * `work` (its innermost statements in all, capped at 9e18) decides whether
 * it runs on the threads. A loop with no loop inside (a flat pointwise
 * loop) goes in chunks of a constant count, so that a compiler vectorizes
 * the loop over one chunk, from 0 to a constant (GCC's very-cheap cost
 * model, trainc's default, vectorizes only such loops); 1 for the others,
 * whose inner loops have bounds of their own. `work` counts a bounded
 * loop's iterations at its extent (a causal row at T columns: twice the
 * real work of a causal softmax, which only shifts where the threshold
 * falls). */
typedef struct {
  int64_t chunk, n_chunks, work;
} KParallelLoop;
bool kstmt_parallel_loop(const KStmt *s, KParallelLoop *pl);

/* A loop nest on a grid of threads (the CUDA backend's kernels). The chain
 * of a top-level loop is that loop and, while a chain loop's body is local
 * declarations and one loop that is not a reduction, that loop. A chain loop
 * is a grid loop when its iterations touch disjoint elements given the grid
 * loops chosen before it (each the same in the two iterations compared): the
 * test of kernel_mark_parallel, with those loops' variables fixed, the other
 * chain loops around it over their whole range, and the chain's locals above
 * it readable (never set inside it); a bounded loop (limit) is never a grid
 * loop, its trip count not being one. Loops are tried outermost first, again
 * until none is added, so a column loop inside a row loop (a column sum)
 * qualifies and then lets its column-block loop qualify. A thread is one
 * combination of the grid loops' iterations; it runs the chain with those
 * variables fixed and the other loops in order, so every element is written
 * by one thread with the operations of the sequential nest in their order:
 * bitwise the same result. `threads` is the product of the grid loops'
 * extents (1 when there is none). */
#define K_CHAIN_MAX 16
typedef struct {
  int n;                           /* chain loops, outermost first */
  const KStmt *loop[K_CHAIN_MAX];
  bool grid[K_CHAIN_MAX];
  int64_t threads;
} KGrid;
KGrid kernel_grid(const Kernel *k, const KStmt *top);

/* Reductions in lanes. A reduction loop is a KS_FOR whose body is the one
 * statement `t = t op e` (KS_SET of a local t declared outside it; op
 * KB_ADD, KB_MAX or KB_MIN; e does not read t): a row's sum, max, sum of
 * exps. Its value is defined in K_LANES lanes, so that it vectorizes and
 * every backend computes bitwise the same float: lane l starts from t's
 * value before the loop when l is 0, else from op's identity (0, -inf,
 * +inf), and takes the iterations c with c % K_LANES == l in increasing
 * order; then for w = K_LANES/2, ..., 2, 1, lane l = lane l op lane l+w for
 * every l < w; t is lane 0. A loop of fewer than K_LANES iterations (a
 * pooling window) runs in sequence instead; for a bounded loop that is its
 * extent (whatever its run-time bound: a causal row of 3 columns in a
 * 128-column softmax still goes through the lanes, so that the lane of
 * every column is its index's, as in the unbounded row). Returns whether
 * loop is a reduction loop, and its op and local. */
#define K_LANES TRC_LANES /* trainc.h: the lanes of generated C's trc_lanes_maxf */
bool kstmt_is_reduction(const KStmt *loop, KBinaryOp *op, int *local);

/* A reduction loop as the lanes split it: iterations [0, full) in groups of
 * K_LANES (iteration i to lane i % K_LANES), then [full, extent) to lanes
 * 0, 1, ...; then the halving combine. A bounded loop's (limit non-NULL)
 * end is limit's value and full that rounded down to a multiple of
 * K_LANES, both at run time. Returns false for a loop that runs in
 * sequence (not a reduction, or fewer than K_LANES iterations). */
typedef struct {
  KBinaryOp op;
  int local;
  int64_t full, extent; /* a loop without limit */
  const KExpr *limit;
} KLaneSplit;
bool kstmt_lane_split(const KStmt *loop, KLaneSplit *split);

/* A kernel's canonical form: its code with its buffers as parameters, so
 * that kernels which differ only in the buffers they touch (the layers of a
 * repeat) are one function of those buffers in every backend. The
 * parameters are the node's own buffer, the values it stores besides
 * (ascending), then its inputs in order, then the other buffers (values
 * fused into it, the dropout key), ascending — those
 * the code touches; a GEMM's are A, B, C. `code` is the same text for two
 * kernels exactly when one function of the parameters computes both: the
 * statements with buffers as parameter positions, constants, extents,
 * parallel marks, the parameters' roles and element types, a GEMM's
 * gemm_dims. Dropout's random streams (KE_RANDOM's i: one per dropout op)
 * are parameters too, `streams` in order of first use, so that the dropouts
 * of every layer share one function. k is the node's kernel, NULL for a
 * GEMM. */
/* KP_IN0 + k: input k; KP_STORED: a value the kernel computes inline and
 * stores besides its own (passes/fuse.c), written like KP_OUT */
typedef enum { KP_STORED = -3, KP_OUT = -2, KP_OTHER = -1, KP_IN0 = 0 } KParamRole;
typedef struct {
  char *code;
  int *params;       /* node ids, in parameter order */
  KParamRole *roles; /* each parameter's role */
  int n_params;
  int64_t *streams;  /* the random streams the kernel draws from */
  int n_streams;
} KernelForm;
KernelForm kernel_form(const Graph *g, int id, const Kernel *k);
/* The parameter position of buffer buf (a node id), -1 when it is none. */
int kernel_form_param(const KernelForm *f, int buf);
/* The position of random stream `stream` among f's, -1 when it is none. */
int kernel_form_stream(const KernelForm *f, int64_t stream);
void kernel_form_free(KernelForm *f);

#endif
