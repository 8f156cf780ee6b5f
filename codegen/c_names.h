/* c_names.h — the C backend's functions and names (codegen-internal).
 *
 * Each distinct kernel body (ir.h's kernel_form) is one C function of its
 * buffers, named by op and value ("layernorm_ln_1"); forward() and backward()
 * call it with pointers named after the model's values
 * ("block_3_ln_1_weight"). Every name is a C identifier made of the model's
 * identifiers (themselves [A-Za-z_][A-Za-z0-9_]*, the scanner's rule) with
 * any other byte as '_', unique in the file, never a C keyword, a name the
 * generated file or its headers use, a macro's usual form (all capitals) or
 * a reserved one (leading '_'): such a name gets a `v_` prefix. */
#ifndef TRAINC_C_NAMES_H
#define TRAINC_C_NAMES_H

#include "c_family.h"

typedef struct {
  KernelForm form;            /* of its first kernel: parameters and code */
  int first;                  /* that kernel's node */
  const char *name;           /* the function; its parallel loops are NAME_loop<i> */
  char **param_names;         /* form.params' names: out, in0, in1, ..., x<i> */
  int *uses, n_uses, cap_uses; /* the kernels it computes, in program order */
} CFunction;

typedef struct {
  CFunction *fns; /* in the order of first use, forward then backward */
  int n_fns, cap_fns;
  int *fn_of;        /* node id → its function in fns, -1 when it has no kernel */
  KernelForm *forms; /* node id → its kernel's form (zero when it has none) */
  char **value;      /* node id → its pointer's name in forward() and backward() */
  char **owned;      /* every name above and those claimed after */
  int n_owned, cap_owned;
  NameMap taken;      /* the values' names: those of forward() and backward() */
  NameMap file_scope; /* functions and tables */
} CNames;

void c_names_build(CNames *c, const Program *p);
void c_names_free(CNames *c, const Program *p);
/* A free name for `text` at file scope (a table's), unique in the file. */
const char *c_names_claim_file_scope(CNames *c, const char *text);
/* A free name for `text` in a loop body whose names so far are `local`:
 * unique there and against the file scope (the body may shadow a value of
 * its function that it does not read). */
const char *c_names_claim_local(CNames *c, NameMap *local, const char *text);
/* The parameter names of fn as print_stmts_named takes them. */
BufNames c_function_buffers(const CFunction *fn);

#endif
