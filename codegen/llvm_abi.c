/* llvm_abi.c — the runtime's tables (trc_param, trc_input, trc_model as
 * trainc.h lays them out) and main(). */
#include "llvm_gen.h"
#include "step.h"

#include <stddef.h>

/* ---- the runtime's tables: trc_param, trc_input, trc_model (trainc.h) ----
 * Each struct is a list of (field, kind) from which both its LLVM type and
 * the check of that type's layout against the C compiler's are made. */

/* PRECISIONS: one f64 per precision (trc_precision); PHASES: three f64
 * (forward, backward, recompute) per precision. */
typedef enum { FK_PTR, FK_I32, FK_I64, FK_F32, FK_F64, FK_DIMS, FK_CONFIG, FK_PRECISIONS, FK_PHASES } FieldKind;

#define PARAM_FIELDS(X)                                                                            \
  X(name, PTR)                                                                                     \
  X(rank, I32) X(dims, DIMS) X(offset, I64) X(count, I64) X(init, I32) X(a, F32) X(b, F32)         \
      X(fan_in, I64) X(fan_out, I64) X(decay, I32) X(frozen, I32) X(file_name, PTR)               \
          X(transposed, I32)
#define INPUT_FIELDS(X)                                                                            \
  X(name, PTR)                                                                                     \
  X(dtype, I32) X(rank, I32) X(dims, DIMS) X(offset, I64) X(example_bytes, I64)                    \
      X(index_limit, I64)
#define KERNEL_SITE_FIELDS(X)                                                                      \
  X(op, PTR) X(value, PTR) X(line, I32) X(predicted, PHASES)
#define MODEL_FIELDS(X)                                                                            \
  X(name, PTR)                                                                                     \
  X(source, PTR) X(batch, I64) X(arena_bytes, I64) X(bf16_operand_bytes, I64)                   \
      X(rounded_operand_bytes, I64) X(param_offset, I64) X(param_count, I64)        \
      X(grad_offset, I64) X(trained_count, I64) X(allow_missing, PTR) X(allow_unexpected, PTR)    \
          X(n_params, I32) X(params, PTR) X(n_inputs, I32) X(inputs, PTR)          \
          X(loss_offset, I64) X(loss_seed_offset, I64) X(loss_kind, I32) X(has_predict, I32)       \
              X(predict_offset, I64) X(predict_classes, I64) X(predict_rows, I64)                  \
                  X(predict_head, I32) X(head_weight_offset, I64) X(head_stats_offset, I64)        \
                  X(head_dim, I64) X(head_w_vd, I32) X(label_input, I32) X(token_input, I32) X(has_ignore, I32)                       \
                      X(ignore_input, I32) X(ignore_label, I64) X(rng_key_offset, I64)             \
                      X(training_offset, I64) X(forward, PTR) X(backward, PTR) X(step, PTR)        \
                          X(checkpoint, PTR) X(n_kernel_sites, I32) X(kernel_sites, PTR)          \
                              X(predicted_update, PRECISIONS) X(predicted_calibrated, I32) X(defaults, CONFIG) X(device, PTR)
/* trc_train_config's kinds (TRC_TRAIN_CONFIG) as field kinds */
#define CFG_FK_I64 FK_I64
#define CFG_FK_U64 FK_I64
#define CFG_FK_F64 FK_F64
#define CFG_FK_BOOL FK_I32
#define CFG_FK_OPTIMIZER FK_I32
#define CFG_FK_SCHEDULE FK_I32
#define CFG_FK_PRECISION FK_I32
#define CFG_FK_METRICS FK_I32

#define FIELD_KIND(field, kind) FK_##kind,
#define CFG_KIND(kind, name, run, help) CFG_FK_##kind,
#define PARAM_INDEX(field, kind) PARAM_##field,
#define INPUT_INDEX(field, kind) INPUT_##field,
#define MODEL_INDEX(field, kind) MODEL_##field,
#define SITE_INDEX(field, kind) SITE_##field,
enum { PARAM_FIELDS(PARAM_INDEX) N_PARAM_FIELDS };
enum { KERNEL_SITE_FIELDS(SITE_INDEX) N_SITE_FIELDS };
enum { INPUT_FIELDS(INPUT_INDEX) N_INPUT_FIELDS };
enum { MODEL_FIELDS(MODEL_INDEX) N_MODEL_FIELDS };

typedef struct {
  const char *name;
  const FieldKind *kinds;
  const size_t *offsets; /* offsetof each field in the C struct */
  size_t size, n;
} StructInfo;

#define PARAM_OFFSET(field, kind) offsetof(trc_param, field),
#define INPUT_OFFSET(field, kind) offsetof(trc_input, field),
#define MODEL_OFFSET(field, kind) offsetof(trc_model, field),
#define SITE_OFFSET(field, kind) offsetof(trc_kernel_site, field),
#define CFG_OFFSET(kind, name, run, help) offsetof(trc_train_config, name),
static const FieldKind param_kinds[] = {PARAM_FIELDS(FIELD_KIND)},
                       input_kinds[] = {INPUT_FIELDS(FIELD_KIND)},
                       model_kinds[] = {MODEL_FIELDS(FIELD_KIND)},
                       site_kinds[] = {KERNEL_SITE_FIELDS(FIELD_KIND)},
                       config_kinds[] = {TRC_TRAIN_CONFIG(CFG_KIND)};
static const size_t param_offsets[] = {PARAM_FIELDS(PARAM_OFFSET)},
                    input_offsets[] = {INPUT_FIELDS(INPUT_OFFSET)},
                    model_offsets[] = {MODEL_FIELDS(MODEL_OFFSET)},
                    site_offsets[] = {KERNEL_SITE_FIELDS(SITE_OFFSET)},
                    config_offsets[] = {TRC_TRAIN_CONFIG(CFG_OFFSET)};
#define STRUCT_INFO(c_type, prefix)                                                                \
  {                                                                                                \
#c_type, prefix##_kinds, prefix##_offsets, sizeof(c_type),                                     \
        sizeof prefix##_kinds / sizeof prefix##_kinds[0]                                           \
  }
static const StructInfo param_info = STRUCT_INFO(trc_param, param),
                        input_info = STRUCT_INFO(trc_input, input),
                        model_info = STRUCT_INFO(trc_model, model),
                        site_info = STRUCT_INFO(trc_kernel_site, site),
                        config_info = STRUCT_INFO(trc_train_config, config);

static LLVMTypeRef struct_type(Gen *g, const StructInfo *s, Diag *diag);

static LLVMTypeRef field_type(Gen *g, FieldKind k, Diag *diag) {
  switch (k) {
  case FK_PTR:
    return g->ptr;
  case FK_I32:
    return g->i32;
  case FK_I64:
    return g->i64;
  case FK_F32:
    return g->f32;
  case FK_F64:
    return g->f64;
  case FK_DIMS:
    return LLVMArrayType2(g->i64, TRC_MAX_RANK);
  case FK_CONFIG:
    return struct_type(g, &config_info, diag);
  case FK_PRECISIONS:
    return LLVMArrayType2(g->f64, TRC_PRECISION_COUNT);
  case FK_PHASES:
    return LLVMArrayType2(LLVMArrayType2(g->f64, 3), TRC_PRECISION_COUNT);
  }
  return NULL;
}

/* The struct's LLVM type, checked field by field against the C layout of
 * trainc.h (a mismatch is a trainc bug: this table lags the header). */
static LLVMTypeRef struct_type(Gen *g, const StructInfo *s, Diag *diag) {
  LLVMTypeRef t = LLVMGetTypeByName2(g->ctx, s->name);
  if (t) return t;
  LLVMTypeRef fields[64];
  for (size_t i = 0; i < s->n; i++) fields[i] = field_type(g, s->kinds[i], diag);
  t = LLVMStructCreateNamed(g->ctx, s->name);
  LLVMStructSetBody(t, fields, (unsigned)s->n, 0);
  bool same = LLVMABISizeOfType(g->td, t) == s->size;
  for (size_t i = 0; i < s->n; i++)
    same = same && LLVMOffsetOfElement(g->td, t, (unsigned)i) == s->offsets[i];
  if (!same)
    diag_error(diag, NO_LOC, "LLVM: %s's layout differs from runtime/trainc.h's (a trainc bug)",
               s->name);
  return t;
}

/* A private constant C string. */
static LLVMValueRef cstring(Gen *g, const char *text) {
  LLVMValueRef init = LLVMConstStringInContext(g->ctx, text, (unsigned)strlen(text), 0);
  LLVMValueRef v = LLVMAddGlobal(g->mod, LLVMTypeOf(init), ".str");
  LLVMSetInitializer(v, init);
  LLVMSetGlobalConstant(v, 1);
  LLVMSetLinkage(v, LLVMPrivateLinkage);
  LLVMSetUnnamedAddress(v, LLVMGlobalUnnamedAddr);
  return v;
}

static LLVMValueRef cstring_or_null(Gen *g, const char *text) {
  return text ? cstring(g, text) : LLVMConstNull(g->ptr);
}

/* A pattern list in the runtime's "a,b" form (namelist_join). */
static LLVMValueRef patterns(Gen *g, const NameList *list) {
  char *joined = namelist_join(list);
  LLVMValueRef v = cstring_or_null(g, joined);
  free(joined);
  return v;
}

static LLVMValueRef dims(Gen *g, const Shape *s) {
  LLVMValueRef d[TRC_MAX_RANK];
  for (int i = 0; i < TRC_MAX_RANK; i++) d[i] = i64c(g, i < s->rank ? s->dim[i] : 0);
  return LLVMConstArray2(g->i64, d, TRC_MAX_RANK);
}

static LLVMValueRef named_struct(Gen *g, const StructInfo *s, LLVMValueRef *v, Diag *diag) {
  return LLVMConstNamedStruct(struct_type(g, s, diag), v, (unsigned)s->n);
}

/* A private constant array of structs (NULL when empty). */
static LLVMValueRef table(Gen *g, const StructInfo *s, LLVMValueRef *rows, int n, const char *name,
                          Diag *diag) {
  if (n == 0) return LLVMConstNull(g->ptr);
  LLVMValueRef init = LLVMConstArray2(struct_type(g, s, diag), rows, (uint64_t)n);
  LLVMValueRef v = LLVMAddGlobal(g->mod, LLVMTypeOf(init), name);
  LLVMSetInitializer(v, init);
  LLVMSetGlobalConstant(v, 1);
  LLVMSetLinkage(v, LLVMInternalLinkage);
  return v;
}

static LLVMValueRef params_table(Gen *g, Diag *diag) {
  const Graph *gr = g->p->g;
  LLVMValueRef *rows = xcalloc((size_t)gr->n_params + 1, sizeof *rows);
  int *declared = graph_params_declared(gr);
  for (int i = 0; i < gr->n_params; i++) {
    const Node *n = &gr->nodes[declared[i]];
    LLVMValueRef v[N_PARAM_FIELDS] = {[PARAM_name] = cstring(g, n->name),
                                      [PARAM_rank] = i32c(g, n->shape.rank),
                                      [PARAM_dims] = dims(g, &n->shape),
                                      [PARAM_offset] = u64c(g, g->p->offset[n->id]),
                                      [PARAM_count] = i64c(g, shape_numel(&n->shape)),
                                      [PARAM_init] = i32c(g, n->init.kind),
                                      [PARAM_a] = float_const(g, n->init.a),
                                      [PARAM_b] = float_const(g, n->init.b),
                                      [PARAM_fan_in] = i64c(g, n->init.fan_in),
                                      [PARAM_fan_out] = i64c(g, n->init.fan_out),
                                      [PARAM_decay] = i32c(g, n->decay),
                                      [PARAM_frozen] = i32c(g, n->frozen),
                                      [PARAM_file_name] = cstring_or_null(g, n->file_name),
                                      [PARAM_transposed] = i32c(g, n->transposed)};
    rows[i] = named_struct(g, &param_info, v, diag);
  }
  free(declared);
  LLVMValueRef t = table(g, &param_info, rows, gr->n_params, "params", diag);
  free(rows);
  return t;
}

static LLVMValueRef inputs_table(Gen *g, Diag *diag) {
  const Graph *gr = g->p->g;
  LLVMValueRef *rows = xcalloc((size_t)gr->n_inputs + 1, sizeof *rows);
  for (int i = 0; i < gr->n_inputs; i++) {
    const Node *n = &gr->nodes[gr->inputs[i]];
    uint64_t example =
        (uint64_t)(shape_numel(&n->shape) / n->shape.dim[0]) * (uint64_t)dtype_size(n->dtype);
    LLVMValueRef v[N_INPUT_FIELDS] = {[INPUT_name] = cstring(g, n->name),
                                      [INPUT_dtype] = i32c(g, dtype_abi(n->dtype)),
                                      [INPUT_rank] = i32c(g, n->shape.rank),
                                      [INPUT_dims] = dims(g, &n->shape),
                                      [INPUT_offset] = u64c(g, g->p->offset[n->id]),
                                      [INPUT_example_bytes] = u64c(g, example),
                                      [INPUT_index_limit] = i64c(g, n->index_limit)};
    rows[i] = named_struct(g, &input_info, v, diag);
  }
  LLVMValueRef t = table(g, &input_info, rows, gr->n_inputs, "inputs", diag);
  free(rows);
  return t;
}

/* n <= 3: a site's phases, or one value per precision */
static LLVMValueRef f64_array(Gen *g, const double *x, unsigned n) {
  LLVMValueRef v[TRC_PRECISION_COUNT > 3 ? TRC_PRECISION_COUNT : 3];
  for (unsigned i = 0; i < n; i++) v[i] = LLVMConstReal(g->f64, x[i]);
  return LLVMConstArray2(g->f64, v, n);
}

/* A site's predicted seconds: forward, backward, recompute under each precision. */
static LLVMValueRef site_seconds(Gen *g, int id) {
  LLVMValueRef rows[TRC_PRECISION_COUNT];
  for (int precision = 0; precision < TRC_PRECISION_COUNT; precision++) {
    double (*sec)[3] = g->p->kernel_seconds[precision];
    rows[precision] = f64_array(g, sec ? sec[id] : (const double[3]){0, 0, 0}, 3);
  }
  return LLVMConstArray2(LLVMArrayType2(g->f64, 3), rows, TRC_PRECISION_COUNT);
}

/* kernel_sites, as c_family.c's print_kernel_sites fills it. */
static LLVMValueRef kernel_sites_table(Gen *g, Diag *diag) {
  const Program *p = g->p;
  int n = step_sites(p);
  LLVMValueRef *rows = xcalloc((size_t)n + 1, sizeof *rows);
  for (int site = 0; site < n; site++) {
    int id = step_site_node(p, site);
    const Node *nd = &p->g->nodes[id];
    LLVMValueRef v[N_SITE_FIELDS] = {[SITE_op] = cstring(g, op_info(nd->op)->name),
                                     [SITE_value] = cstring_or_null(g, nd->name),
                                     [SITE_line] = i32c(g, nd->loc.line),
                                     [SITE_predicted] = site_seconds(g, id)};
    rows[site] = named_struct(g, &site_info, v, diag);
  }
  LLVMValueRef t = table(g, &site_info, rows, n, "kernel_sites", diag);
  free(rows);
  return t;
}

/* trc_train_config values by kind, as their field types hold them. */
#define CFG_CONST_I64(g, v) i64c(g, v)
#define CFG_CONST_U64(g, v) u64c(g, v)
#define CFG_CONST_F64(g, v) LLVMConstReal((g)->f64, v)
#define CFG_CONST_BOOL(g, v) i32c(g, v)
#define CFG_CONST_OPTIMIZER(g, v) i32c(g, v)
#define CFG_CONST_SCHEDULE(g, v) i32c(g, v)
#define CFG_CONST_PRECISION(g, v) i32c(g, v)
#define CFG_CONST_METRICS(g, v) i32c(g, (int64_t)(v))

static LLVMValueRef defaults(Gen *g, const trc_train_config *c, Diag *diag) {
#define CFG_VALUE(kind, name, run, help) CFG_CONST_##kind(g, c->name),
  LLVMValueRef v[] = {TRC_TRAIN_CONFIG(CFG_VALUE)};
#undef CFG_VALUE
  return named_struct(g, &config_info, v, diag);
}

static int input_index(const Graph *g, int node) {
  for (int i = 0; i < g->n_inputs; i++)
    if (g->inputs[i] == node) return i;
  return -1;
}

/* The input whose labels cross_entropy(..., ignore = L) reads, -1 if none. */
static int ignore_input(const Graph *g) {
  for (int i = 0; i < g->n_inputs; i++)
    if (g->nodes[g->inputs[i]].has_ignore) return i;
  return -1;
}

/* The descriptor `model`, as c_backend.c's print_model fills it. */
LLVMValueRef llvm_define_model(Gen *g, Callee forward, Callee backward, Callee step, Diag *diag) {
  const Program *p = g->p;
  const Graph *gr = p->g;
  char spec[64];
  const PredictLayout pl = program_predict_layout(p);
  const int ignore = ignore_input(gr);
  LLVMValueRef v[N_MODEL_FIELDS] = {
      [MODEL_name] = cstring(g, gr->model_name),
      [MODEL_source] = cstring(g, gr->source_path),
      [MODEL_batch] = i64c(g, gr->train.batch),
      [MODEL_arena_bytes] = u64c(g, p->arena_bytes),
      [MODEL_bf16_operand_bytes] = u64c(g, p->bf16_operand_bytes),
      [MODEL_rounded_operand_bytes] = u64c(g, p->rounded_operand_bytes),
      [MODEL_param_offset] = u64c(g, p->param_offset),
      [MODEL_param_count] = u64c(g, p->param_bytes / 4),
      [MODEL_grad_offset] = u64c(g, p->grad_offset),
      [MODEL_trained_count] = u64c(g, p->trained_bytes / 4),
      [MODEL_allow_missing] = patterns(g, &gr->allow_missing),
      [MODEL_allow_unexpected] = patterns(g, &gr->allow_unexpected),
      [MODEL_n_params] = i32c(g, gr->n_params),
      [MODEL_params] = params_table(g, diag),
      [MODEL_n_inputs] = i32c(g, gr->n_inputs),
      [MODEL_inputs] = inputs_table(g, diag),
      [MODEL_loss_offset] = u64c(g, p->offset[gr->loss]),
      [MODEL_loss_seed_offset] = u64c(g, p->seed_offset),
      [MODEL_loss_kind] = i32c(g, gr->loss_kind),
      [MODEL_has_predict] = i32c(g, pl.has),
      [MODEL_predict_offset] = u64c(g, pl.offset),
      [MODEL_predict_classes] = i64c(g, pl.classes),
      [MODEL_predict_rows] = i64c(g, pl.rows),
      [MODEL_predict_head] = i32c(g, pl.head),
      [MODEL_head_weight_offset] = u64c(g, pl.weight_offset),
      [MODEL_head_stats_offset] = u64c(g, pl.stats_offset),
      [MODEL_head_dim] = i64c(g, pl.dim),
      [MODEL_head_w_vd] = i32c(g, pl.w_vd),
      [MODEL_label_input] = i32c(g, gr->labels >= 0 ? input_index(gr, gr->labels) : -1),
      [MODEL_token_input] = i32c(g, gr->tokens >= 0 ? input_index(gr, gr->tokens) : -1),
      [MODEL_has_ignore] = i32c(g, ignore >= 0),
      [MODEL_ignore_input] = i32c(g, ignore >= 0 ? ignore : 0),
      [MODEL_ignore_label] = i64c(g, ignore >= 0 ? gr->nodes[gr->inputs[ignore]].ignore_label : 0),
      [MODEL_rng_key_offset] = u64c(g, p->rng_key_offset),
      [MODEL_training_offset] = u64c(g, p->training_offset),
      [MODEL_forward] = forward.fn,
      [MODEL_backward] = backward.fn,
      [MODEL_step] = step.fn,
      [MODEL_checkpoint] = cstring(g, checkpoint_spec_str(&gr->train.checkpoint, spec)),
      [MODEL_n_kernel_sites] = i32c(g, step_sites(p)),
      [MODEL_kernel_sites] = kernel_sites_table(g, diag),
      [MODEL_predicted_update] = f64_array(g, p->update_seconds, TRC_PRECISION_COUNT),
      [MODEL_predicted_calibrated] = i32c(g, p->priced_calibrated),
      [MODEL_defaults] = defaults(g, &gr->train.run, diag),
      [MODEL_device] = LLVMConstNull(g->ptr)}; /* the host arena only */
  LLVMValueRef init = named_struct(g, &model_info, v, diag);
  LLVMValueRef model = LLVMAddGlobal(g->mod, LLVMTypeOf(init), "model");
  LLVMSetInitializer(model, init);
  LLVMSetGlobalConstant(model, 1);
  LLVMSetLinkage(model, LLVMInternalLinkage);
  return model;
}

/* int main(int argc, char **argv) { return trc_main(&model, argc, argv); } */
void llvm_define_main(Gen *g, LLVMValueRef model) {
  LLVMTypeRef params[2] = {g->i32, g->ptr};
  Callee c = define(g, "main", g->i32, params, 2);
  LLVMValueRef args[3] = {model, LLVMGetParam(c.fn, 0), LLVMGetParam(c.fn, 1)};
  LLVMBuildRet(g->b, call_ext(g, "trc_main", g->i32, args, 3));
}

