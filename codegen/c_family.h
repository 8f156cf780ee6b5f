/* c_family.h — what the C and CUDA backends print alike (codegen-internal).
 *
 * Both backends print the op table's loop nests with one expression and
 * statement printer, the same forward/backward call lists with the gradient
 * buckets, the same step() (the trc_step_* sequence of trainc.h) and the same
 * tables for the runtime. What differs — how a kernel is called, where the
 * arena lives and what is copied between host and device — is a StepForm. */
#ifndef TRAINC_C_FAMILY_H
#define TRAINC_C_FAMILY_H

#include "codegen.h"
#include "step.h"

const char *c_type(DType t);
/* A float literal C and C++ read back to the same float. */
void print_float(FILE *out, double v);
/* A kernel's statements, `depth` levels indented, buffer b as `b<b>`. */
void print_stmts(FILE *out, KStmt **body, int n, int depth);
/* Names of buffers: names[i] for buffer ids[i] (a node id); random stream
 * streams[i] as the variable stream<i>. */
typedef struct {
  const int *ids;
  const char *const *names;
  int n;
  const int64_t *streams;
  int n_streams;
} BufNames;
/* The same with the buffers and streams of nm named as it says (the other
 * buffers b<b>, streams as numbers). */
void print_stmts_named(FILE *out, KStmt *const *body, int n, int depth, const BufNames *nm);
/* An index expression of loop variables (a bounded loop's limit) as C. */
void print_index(FILE *out, const KExpr *e);
/* Whether match(e, arg) holds for an expression of statements body[0..n). */
bool stmts_any_expr(KStmt *const *body, int n, bool (*match)(const KExpr *, int64_t),
                    int64_t arg);
/* A match for stmts_any_expr: e reads loop variable var. */
bool expr_is_var(const KExpr *e, int64_t var);
/* `  T *RESTRICT bN = (T *)(ARENA + offset);` for the buffers used[0..n_used)
 * (node ids, ascending; const but for node id's own). */
void print_buffer_list(FILE *out, const Program *p, int id, const int *used, int n_used,
                       const char *restrict_kw, const char *arena);
/* The same for every buffer statements body[0..n) touch (kernel_stmt_buffers). */
void print_stmt_buffers(FILE *out, const Program *p, int id, KStmt *const *body, int n,
                        const char *restrict_kw, const char *arena);
/* The node as a comment: op, inputs, type, gradient slot, recompute, name,
 * layer path, line. */
void print_node_comment(FILE *out, const Program *p, int id);
/* `/ * block.3 line N: op -> name * /` after a kernel's call. */
void print_call_comment(FILE *out, const Program *p, int id);
/* The same inside a loop over layers, the layer path less its first
 * layer_len bytes (the layer's own, "block.3"). */
void print_call_comment_in(FILE *out, const Program *p, int id, size_t layer_len);
/* The source path inside a C string or comment (octal escapes). */
void print_safe_path(FILE *out, const char *path);

/* The first lines: where the file comes from, the arena's size. */
void print_header_comment(FILE *out, const Program *p);

/* Every kernel, forward then backward, each after its node comment: library
 * calls (GEMMs, convolutions: op_calls_library) by gemm(), loop nests by
 * loop(). */
void print_kernels(FILE *out, const Program *p, void (*gemm)(FILE *, const Program *, int),
                   void (*loop)(FILE *, const Program *, int, const Kernel *));

/* How a backend's forward(), backward() and step() differ. Hooks may be
 * NULL (nothing printed there). */
typedef struct StepForm {
  const char *forward_def, *backward_def;            /* the functions' heads */
  const char *forward_call, *backward_call;          /* as step() calls them; backward_call
                                                        is completed by its step argument */
  const void *data;                                  /* the backend's, for declare and call */
  /* What forward() or backward() declares before its calls of kernels ids[0..n). */
  void (*declare)(FILE *out, const Program *p, const int *ids, int n, const void *data);
  /* A kernel's call, no newline. */
  void (*call)(FILE *out, const Program *p, int id, const void *data);
  /* Prints the calls of ids from `at` on as one loop when a loop over
   * layers starts there (the gradient buckets final inside it included)
   * and returns how many calls it printed, else 0. NULL: no loops. */
  int (*loop)(FILE *out, const Program *p, const struct StepForm *f, const int *ids, int at);
  /* The step's operations (step.h) this backend prints its own way; NULL:
   * the host's (nothing for a device's copies). */
  void (*ops[STEP_OPS])(FILE *out, const Program *p);
  /* The prefix of the step's communication calls (bucket_ready,
   * wait_gradients, allreduce_gradients, average_parameters; NULL: the
   * runtime's, "trc_step_"), which a device replaces with its own. */
  const char *comm_prefix;
} StepForm;

static inline const char *step_comm_prefix(const StepForm *f) {
  return f->comm_prefix ? f->comm_prefix : "trc_step_";
}

void print_forward_backward(FILE *out, const Program *p, const StepForm *f);

/* step(): the step's operations in order (c_step.c). */
void print_step(FILE *out, const Program *p, const StepForm *f);
/* The parameter and input tables, the trc_model descriptor (its fields in
 * declaration order, so that C++20 reads it too; .device = &DEVICE unless
 * device is NULL) and main(). */
void print_runtime_tables(FILE *out, const Program *p, const char *device);

#endif
