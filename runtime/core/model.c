/* model.c — facts about a trc_model descriptor, and its consistency check
 * (a generated descriptor that lies would otherwise corrupt memory). */
#include "rt_core.h"

#include <math.h>
#include <string.h>

const char *trc_dtype_name(trc_dtype dtype) {
  static const char *const words[] = {TRC_DTYPES(TRC_ENUM_WORD)};
  return (unsigned)dtype < sizeof words / sizeof words[0] ? words[dtype] : "?";
}

size_t trc_dtype_size(trc_dtype dtype) {
  switch (dtype) {
  case TRC_F32: return 4;
  case TRC_I32: return 4;
  case TRC_U8: return 1;
  }
  return 0;
}

uint64_t trc_input_example_elems(const trc_input *in) {
  uint64_t n = 1;
  for (int d = 1; d < in->rank; d++) n *= (uint64_t)in->dims[d];
  return n;
}

/* 1 when [offset, offset+bytes) lies inside [0, limit). */
void trc_param_parts(const trc_model *m, int64_t lo, int64_t hi, trc_param_part_fn fn,
                     void *ctx) {
  for (int i = 0; i < m->n_params; i++) {
    const trc_param *p = &m->params[i];
    int64_t first = (int64_t)((p->offset - m->param_offset) / sizeof(float));
    int64_t end = first + (int64_t)p->count;
    int64_t from = first > lo ? first : lo, to = end < hi ? end : hi;
    if (from < to) fn(ctx, i, (uint64_t)(from - first), (uint64_t)(to - first));
  }
}

int trc_frozen_params(const trc_model *m, uint64_t *floats) {
  int n = 0;
  *floats = 0;
  for (int i = 0; i < m->n_params; i++)
    if (m->params[i].frozen) n++, *floats += m->params[i].count;
  return n;
}

static int region_inside(uint64_t offset, uint64_t bytes, uint64_t limit) {
  uint64_t end;
  return trc_add_ok(offset, bytes, &end) && end <= limit;
}

/* Product of dims[from..rank), 0 when a dim is negative or it overflows. */
static uint64_t dims_product(const int64_t *dims, int from, int rank) {
  uint64_t n = 1;
  for (int d = from; d < rank; d++)
    if (dims[d] < 0 || !trc_mul_ok(n, (uint64_t)dims[d], &n)) return 0;
  return n;
}

static int check_input(const trc_model *m, int i, trc_error *err) {
  const trc_input *in = &m->inputs[i];
  if (!in->name || !in->name[0]) return trc_fail(err, "input %d has no name", i);
  if (in->rank < 1 || in->rank > TRC_MAX_RANK || in->dims[0] != m->batch)
    return trc_fail(err, "input '%s': rank must be 1..%d with dims[0] == batch", in->name,
                    TRC_MAX_RANK);
  uint64_t elems = dims_product(in->dims, 1, in->rank), bytes;
  if (elems == 0 || !trc_mul_ok(elems, trc_dtype_size(in->dtype), &bytes) ||
      bytes != in->example_bytes)
    return trc_fail(err, "input '%s': example_bytes %llu does not match its dims", in->name,
                    (unsigned long long)in->example_bytes);
  uint64_t slot;
  if (!trc_mul_ok(bytes, (uint64_t)m->batch, &slot) ||
      !region_inside(in->offset, slot, m->arena_bytes))
    return trc_fail(err, "input '%s': slot outside the arena", in->name);
  if (in->index_limit < 0 || (in->index_limit > 0 && in->dtype == TRC_F32))
    return trc_fail(err, "input '%s': index_limit needs an integer input", in->name);
  return 0;
}

static int check_param(const trc_model *m, int i, trc_error *err) {
  const trc_param *p = &m->params[i];
  if (!p->name || !p->name[0]) return trc_fail(err, "param %d has no name", i);
  if (p->rank < 0 || p->rank > TRC_MAX_RANK || dims_product(p->dims, 0, p->rank) != p->count)
    return trc_fail(err, "param '%s': count %llu does not match its dims", p->name,
                    (unsigned long long)p->count);
  uint64_t bytes;
  if (p->offset < m->param_offset || p->offset % 4 != 0 || !trc_mul_ok(p->count, 4, &bytes) ||
      !region_inside(p->offset - m->param_offset, bytes, m->param_count * 4))
    return trc_fail(err, "param '%s': outside the parameter region", p->name);
  if ((p->offset - m->param_offset < m->trained_count * 4) == (p->frozen != 0))
    return trc_fail(err, "param '%s': %s, but %s the trained prefix", p->name,
                    p->frozen ? "frozen" : "trained", p->frozen ? "inside" : "outside");
  if (p->transposed && p->rank != 2)
    return trc_fail(err, "param '%s': transposed, but of rank %d", p->name, p->rank);
  if (p->file_name && (!p->file_name[0] || !strcmp(p->file_name, TRC_SAFETENSORS_METADATA)))
    return trc_fail(err, "param '%s': file name '%s' is empty or reserved", p->name,
                    p->file_name);
  if ((unsigned)p->init > TRC_INIT_HE)
    return trc_fail(err, "param '%s': unknown init kind", p->name);
  if ((p->init == TRC_INIT_XAVIER && p->fan_in + p->fan_out <= 0) ||
      (p->init == TRC_INIT_HE && p->fan_in <= 0))
    return trc_fail(err, "param '%s': init needs positive fan_in/fan_out", p->name);
  return 0;
}

static int check_config(const trc_train_config *c, trc_error *err) {
  if ((unsigned)c->optimizer > TRC_ADAMW || (unsigned)c->schedule > TRC_SCHED_COSINE)
    return trc_fail(err, "defaults: unknown optimizer or schedule kind");
  if (c->accumulate < 1) return trc_fail(err, "defaults: accumulate must be >= 1");
  if (c->steps < 0 || (c->steps == 0 && c->epochs < 1) || c->warmup < 0 || c->eval_every_steps < 0)
    return trc_fail(err,
                    "defaults: need steps >= 1 or epochs >= 1, and warmup, eval_every_steps >= 0");
  if (c->log_every < 1) return trc_fail(err, "defaults: log_every must be >= 1");
  if (c->local_sgd < 1 || c->local_sgd_warmup < 0)
    return trc_fail(err, "defaults: local_sgd must be >= 1 and local_sgd_warmup >= 0");
  if (!(c->outer_lr >= 0 && c->outer_momentum >= 0 && c->outer_momentum < 1))
    return trc_fail(err, "defaults: outer lr must be >= 0 and outer momentum in [0, 1)");
  if (!(c->validation >= 0 && c->validation < 1))
    return trc_fail(err, "defaults: validation must be in [0, 1)");
  if (!isfinite(c->lr) || c->lr < 0) return trc_fail(err, "defaults: lr must be finite and >= 0");
  return 0;
}

/* 1 when `floats` f32 values at `offset` lie inside the arena, 4-aligned. */
static int floats_inside(const trc_model *m, uint64_t offset, uint64_t floats) {
  uint64_t bytes;
  return offset % 4 == 0 && trc_mul_ok(floats, 4, &bytes) &&
         region_inside(offset, bytes, m->arena_bytes);
}

/* The stored logits [B, rows, classes], or the head's x [B, rows, dim], w
 * [classes, dim] and per-row stats [2, B * rows]. */
static int check_predict(const trc_model *m, trc_error *err) {
  uint64_t rows, x, w;
  if (m->predict_classes < 1 || m->predict_rows < 1 ||
      !trc_mul_ok((uint64_t)m->batch, (uint64_t)m->predict_rows, &rows))
    return trc_fail(err, "model descriptor: predict outside the arena");
  if (!m->predict_head) {
    if (!trc_mul_ok(rows, (uint64_t)m->predict_classes, &x) ||
        !floats_inside(m, m->predict_offset, x))
      return trc_fail(err, "model descriptor: predict outside the arena");
    return 0;
  }
  if (m->head_dim < 1) return trc_fail(err, "model descriptor: the loss head needs head_dim >= 1");
  if (!trc_mul_ok(rows, (uint64_t)m->head_dim, &x) || !floats_inside(m, m->predict_offset, x))
    return trc_fail(err, "model descriptor: the loss head's x outside the arena");
  if (!trc_mul_ok((uint64_t)m->predict_classes, (uint64_t)m->head_dim, &w) ||
      !floats_inside(m, m->head_weight_offset, w))
    return trc_fail(err, "model descriptor: the loss head's weight outside the arena");
  if (!trc_mul_ok(rows, 2, &rows) || !floats_inside(m, m->head_stats_offset, rows))
    return trc_fail(err, "model descriptor: the loss head's row stats outside the arena");
  return 0;
}

/* The weight of the head's class c at feature k, in either layout of w. */
static float head_weight(const trc_model *m, const float *w, int64_t c, int64_t k) {
  return m->head_w_vd ? w[c * m->head_dim + k] : w[k * m->predict_classes + c];
}

void trc_predict_row(const trc_model *m, const char *arena, int64_t row, float *logits) {
  const int64_t classes = m->predict_classes;
  if (!m->predict_head) {
    memcpy(logits, arena + m->predict_offset + (uint64_t)(row * classes) * sizeof(float),
           (size_t)classes * sizeof(float));
    return;
  }
  const float *x = (const float *)(arena + m->predict_offset) + row * m->head_dim;
  const float *w = (const float *)(arena + m->head_weight_offset);
  for (int64_t c = 0; c < classes; c++) {
    float sum = 0.0f;
    for (int64_t k = 0; k < m->head_dim; k++) sum += x[k] * head_weight(m, w, c, k);
    logits[c] = sum;
  }
}

/* -1, or an integer input with one value per row of predict. */
static int valid_row_input(const trc_model *m, int i) {
  if (i == -1) return 1;
  return i >= 0 && i < m->n_inputs && m->has_predict && m->inputs[i].dtype != TRC_F32 &&
         trc_input_example_elems(&m->inputs[i]) == (uint64_t)m->predict_rows;
}

int trc_model_check(const trc_model *m, trc_error *err) {
  if (!m->name || !m->forward || !m->backward || !m->step || m->batch < 1)
    return trc_fail(err, "model descriptor: name, forward, backward, step and batch >= 1 are "
                         "required");
  uint64_t region;
  if (!trc_mul_ok(m->param_count, 4, &region) ||
      !region_inside(m->param_offset, region, m->arena_bytes) ||
      m->trained_count > m->param_count ||
      !region_inside(m->grad_offset, m->trained_count * 4, m->arena_bytes) ||
      m->param_offset % 4 || m->grad_offset % 4)
    return trc_fail(err, "model descriptor: parameter or gradient region outside the arena");
  if (!region_inside(m->loss_offset, 4, m->arena_bytes) ||
      !region_inside(m->loss_seed_offset, 4, m->arena_bytes) || m->loss_offset % 4 ||
      m->loss_seed_offset % 4 || !region_inside(m->rng_key_offset, 8, m->arena_bytes) ||
      !region_inside(m->training_offset, 4, m->arena_bytes) || m->rng_key_offset % 8 ||
      m->training_offset % 4)
    return trc_fail(err, "model descriptor: loss, loss seed, rng key or training flag outside the arena");
  if ((unsigned)m->loss_kind > TRC_LOSS_OTHER)
    return trc_fail(err, "model descriptor: unknown loss kind");
  if (m->has_ignore &&
      (m->ignore_input < 0 || m->ignore_input >= m->n_inputs || m->ignore_label >= 0 ||
       m->inputs[m->ignore_input].dtype != TRC_I32 || m->inputs[m->ignore_input].index_limit < 1))
    return trc_fail(err, "model descriptor: ignored labels need an i32 index input and a "
                         "negative label");
  if (m->predict_head && !m->has_predict)
    return trc_fail(err, "model descriptor: the loss head needs predict");
  if (m->has_predict && check_predict(m, err)) return -1;
  if (m->n_inputs < 0 || m->n_params < 0 || (m->n_inputs && !m->inputs) ||
      (m->n_params && !m->params))
    return trc_fail(err, "model descriptor: inputs or params missing");
  for (int i = 0; i < m->n_inputs; i++)
    if (check_input(m, i, err)) return -1;
  if (!valid_row_input(m, m->label_input))
    return trc_fail(err, "model descriptor: label_input must name an integer input with one "
                         "value per row of predict, or be -1");
  if (!valid_row_input(m, m->token_input))
    return trc_fail(err, "model descriptor: token_input must name an integer input with one "
                         "value per row of predict, or be -1");
  for (int i = 0; i < m->n_params; i++)
    if (check_param(m, i, err)) return -1;
  return check_config(&m->defaults, err);
}
