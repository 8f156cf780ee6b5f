/* test_ops.c — the op table (ir/ops.def) agrees with itself: every op's
 * class matches the parts it has, so that the passes and backends, which
 * read the class and never infer it, get what they expect; a model-file
 * builtin is an op on one tensor with a backward rule. */
#include "ir.h"
#include "check.h"

#include <string.h>


/* The model-file builtin names, read from the table as ir/builtins.c does. */
static const char *const builtin_of[OP_COUNT] = {
#define OP(e, name, class, builtin, ...) [e] = builtin,
#include "ops.def"
#undef OP
};

int main(void) {
  for (int op = 0; op < OP_COUNT; op++) {
    const OpInfo *o = op_info((OpKind)op);
    const char *name = o->name;
    bool leaf = o->op_class == OPC_LEAF;
    CHECK(name && *name, "?");
    for (int other = 0; other < op; other++) CHECK(strcmp(op_info((OpKind)other)->name, name) != 0, name);
    CHECK(leaf == (o->arity == 0), name);                       /* computed ops have inputs */
    CHECK(leaf == !o->infer && leaf == !o->flops, name);        /* and a shape rule and a cost */
    CHECK(o->arity <= IR_MAX_IN, name);
    if (leaf) CHECK(!o->backward && !o->kernel, name);
    if (o->op_class == OPC_GEMM) CHECK(!o->kernel, name);     /* the backend's BLAS */
    if (o->op_class == OPC_LOOP) CHECK(o->kernel != NULL, name);
    if (builtin_of[op]) CHECK(o->arity == 1 && o->backward, name); /* NAME(x), differentiable */
  }
  /* Views have no code; the one that may add into a gradient slot (the
   * backward rule of reshape is a reshape) has a copy kernel for it. */
  CHECK(op_info(OP_SLICE)->op_class == OPC_VIEW, "slice");
  CHECK(op_info(OP_RESHAPE)->op_class == OPC_VIEW && op_info(OP_RESHAPE)->kernel, "reshape");
  Node slice = {.op = OP_SLICE, .grad_of_param = -1}, reshape = {.op = OP_RESHAPE, .grad_of_param = -1};
  CHECK(node_is_view(&slice) && node_is_view(&reshape), "slice, reshape");
  reshape.grad_of_param = 0;
  CHECK(!node_is_view(&reshape), "reshape into a gradient slot");
  return failures != 0;
}
