/* state.c — resumable training state (--save-state DIR, --resume DIR).
 *
 * Each rank writes its own file DIR/state-STEP.rank-R.safetensors: the
 * parameters under their names, the optimizer's moment arrays, the outer
 * optimizer's anchor and momentum and --load-best's best weights as flat F32
 * tensors, and in __metadata__ the counters (steps done, optimizer steps,
 * syncs, bytes and seconds of communication, the best evaluation's step and
 * value and the evaluations since it improved), a fingerprint of everything
 * that shapes the run (ranks, batch, schedule, seed, ...), and a CRC-32 over
 * the tensor data and those values, so a damaged file is refused rather than
 * resumed into another run.
 * The data order and every random number are functions of (seed, step), so
 * the step number restores them.
 *
 * A file is written atomically (temp file, fsync, rename, fsync of DIR).
 * Saving is: write the new file, wait for every rank (barrier), then delete
 * this rank's files older than the newest --save-total-limit ones. So at any
 * instant some step has a complete file on every rank, and --resume takes
 * the newest such step. */
#include "rt_io.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* The __metadata__ a state file carries: the counters, the fingerprint,
 * then "checksum", over the tensor data and these values. */
enum { N_COUNTERS = 9, N_KEYS = N_COUNTERS + 1, MAX_STATE_ARRAYS = 5 };
static const char *const meta_keys[N_KEYS] = {
    "step",         "optimizer_step", "in_sync",    "syncs",     "comm_bytes",
    "comm_seconds", "best_step",      "best_value", "bad_evals", "fingerprint"};
static const char *const *const counter_names = meta_keys;

static void state_path(char *out, size_t cap, const char *dir, int64_t step, int rank) {
  snprintf(out, cap, "%s/state-%" PRId64 ".rank-%d.safetensors", dir, step, rank);
}

/* The step of a file name of this rank's, or -1: only the names this file
 * writes count (no leading zeros, signs or spaces; nothing after them), so
 * a stray file never makes a step that cannot be loaded. */
static int64_t step_of(const char *name, int rank) {
  char *end, canonical[128];
  if (strncmp(name, "state-", 6) != 0 || !isdigit((unsigned char)name[6])) return -1;
  errno = 0;
  long long step = strtoll(name + 6, &end, 10);
  if (errno || step < 0) return -1;
  state_path(canonical, sizeof canonical, "", step, rank);
  return strcmp(name, canonical + 1) == 0 ? (int64_t)step : -1;
}

static int is_regular(const char *dir, const char *name) {
  char path[4096];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Calls fn for every state file of this rank in dir; returns the newest step
 * (-1 when none), or -2 when dir cannot be read. Names of other shapes, and
 * state names that are not regular files, are passed over. */
static int64_t scan_states(const char *dir, int rank, int64_t below,
                           void (*fn)(int64_t step, void *ctx), void *ctx) {
  DIR *d = opendir(dir);
  if (!d) return -2;
  int64_t newest = -1;
  for (struct dirent *e; (e = readdir(d));) {
    int64_t step = step_of(e->d_name, rank);
    if (step > newest && is_regular(dir, e->d_name)) newest = step;
    if (fn && step >= 0 && step < below) fn(step, ctx);
  }
  closedir(d);
  return newest;
}

/* The steps of this rank's states older than the one just saved. */
typedef struct {
  int64_t *steps;
  size_t n, cap;
  int failed;
} step_list;

static void add_step(int64_t step, void *ctx) {
  step_list *l = ctx;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    int64_t *grown = realloc(l->steps, cap * sizeof *grown);
    if (!grown) {
      l->failed = 1;
      return;
    }
    l->steps = grown, l->cap = cap;
  }
  l->steps[l->n++] = step;
}

static int newest_first(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x < y) - (x > y);
}

/* Keeps the newest `keep` states of this rank (0: all), `newest` being one:
 * removes the older ones beyond. Out of memory, it removes nothing. */
static void remove_old_states(const char *dir, int rank, int64_t newest, int64_t keep) {
  step_list older = {0};
  if (keep == 0) return;
  scan_states(dir, rank, newest, add_step, &older);
  if (!older.failed && older.n > 0) {
    qsort(older.steps, older.n, sizeof *older.steps, newest_first);
    for (size_t i = (size_t)keep - 1; i < older.n; i++) {
      char path[4096];
      state_path(path, sizeof path, dir, older.steps[i], rank);
      unlink(path);
    }
  }
  free(older.steps);
}

/* A temp file of this rank's interrupted state save. */
static int is_own_state(const char *base, const void *rank) {
  return step_of(base, *(const int *)rank) >= 0;
}

int trc_state_prepare(const char *dir, trc_error *err) {
  char probe[4096];
  struct stat st;
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return trc_fail_at(err, dir, "cannot make the state folder: %s", strerror(errno));
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return trc_fail_at(err, dir, "--save-state: not a directory");
  snprintf(probe, sizeof probe, "%s/state", dir);
  if (trc_check_can_create(probe, err)) return -1;
  int rank = trc_comm_rank();
  trc_remove_temp_files(dir, is_own_state, &rank);
  return 0;
}

/* ---- what is saved ---- */

typedef struct {
  const char *name;
  float *data;
} state_array;

static int state_arrays(const trc_run_state *st, state_array *out) {
  int n = 0;
  if (st->opt->m) out[n++] = (state_array){TRC_STATE_PREFIX "optimizer.m", st->opt->m};
  if (st->opt->v) out[n++] = (state_array){TRC_STATE_PREFIX "optimizer.v", st->opt->v};
  if (st->sync->anchor) out[n++] = (state_array){TRC_STATE_PREFIX "outer.anchor", st->sync->anchor};
  if (st->sync->momentum)
    out[n++] = (state_array){TRC_STATE_PREFIX "outer.momentum", st->sync->momentum};
  if (st->best->weights) out[n++] = (state_array){TRC_STATE_PREFIX "best", st->best->weights};
  return n;
}

static void format_counters(const trc_run_state *st, char values[N_COUNTERS][32]) {
  snprintf(values[0], 32, "%" PRId64, st->step);
  snprintf(values[1], 32, "%" PRId64, st->opt->step);
  snprintf(values[2], 32, "%d", st->in_sync);
  snprintf(values[3], 32, "%" PRId64, st->sync->syncs);
  snprintf(values[4], 32, "%" PRIu64, st->sync->bytes);
  snprintf(values[5], 32, "%.17g", st->sync->seconds);
  snprintf(values[6], 32, "%" PRId64, st->best->step);
  snprintf(values[7], 32, "%.17g", st->best->value);
  snprintf(values[8], 32, "%" PRId64, st->best->bad_evals);
}

/* The checksum continues over the metadata values, each with its NUL. */
static uint32_t checksum_values(uint32_t crc, const char *const values[N_KEYS]) {
  for (int i = 0; i < N_KEYS; i++)
    crc = (uint32_t)crc32_z(crc, (const unsigned char *)values[i], strlen(values[i]) + 1);
  return crc;
}

static void format_checksum(char out[32], uint32_t crc) { snprintf(out, 32, "crc32:%08x", crc); }

/* The parameters and every state array are finite; `doing` leads the
 * message ("refusing to save non-finite state"). */
static int check_state_finite(const trc_run_state *st, const char *doing, trc_error *err) {
  const trc_model *m = st->model;
  state_array arrays[MAX_STATE_ARRAYS];
  int n_arrays = state_arrays(st, arrays);
  char what[128];
  snprintf(what, sizeof what, "%s: parameter", doing);
  if (trc_check_block_finite(m, (const float *)(st->arena + m->param_offset), what, err))
    return -1;
  for (int i = 0; i < n_arrays; i++) {
    snprintf(what, sizeof what, "%s: %s of parameter", doing, arrays[i].name);
    if (trc_check_range_finite(m, arrays[i].data, 0, m->trained_count, what, err)) return -1;
  }
  return 0;
}

int trc_state_save(const char *dir, const trc_run_state *st, trc_error *err) {
  const trc_model *m = st->model;
  state_array arrays[MAX_STATE_ARRAYS];
  int n_arrays = state_arrays(st, arrays);
  if (check_state_finite(st, "refusing to save non-finite state", err))
    return trc_set_where(err, dir);
  trc_tensor *t = calloc((size_t)(m->n_params + n_arrays), sizeof *t);
  if (!t) return trc_fail_at(err, dir, "out of memory");
  for (int i = 0; i < m->n_params; i++) {
    const trc_param *p = &m->params[i];
    t[i] = (trc_tensor){p->name, p->rank, p->dims, (const float *)(st->arena + p->offset)};
  }
  const int64_t count = (int64_t)m->trained_count; /* optimizer state: trained ones only */
  for (int i = 0; i < n_arrays; i++)
    t[m->n_params + i] = (trc_tensor){arrays[i].name, 1, &count, arrays[i].data};
  char counters[N_COUNTERS][32], checksum[32], path[4096];
  const char *values[N_KEYS], *meta[2 * (N_KEYS + 1)];
  format_counters(st, counters);
  for (int i = 0; i < N_COUNTERS; i++) values[i] = counters[i];
  values[N_COUNTERS] = st->fingerprint;
  uint32_t crc = 0;
  for (int i = 0; i < m->n_params + n_arrays; i++)
    crc = (uint32_t)crc32_z(crc, (const unsigned char *)t[i].data,
                            (i < m->n_params ? m->params[i].count : m->trained_count) *
                                sizeof(float));
  format_checksum(checksum, checksum_values(crc, values));
  for (int i = 0; i < N_KEYS; i++) meta[2 * i] = meta_keys[i], meta[2 * i + 1] = values[i];
  meta[2 * N_KEYS] = "checksum", meta[2 * N_KEYS + 1] = checksum;
  int rank = trc_comm_rank();
  state_path(path, sizeof path, dir, st->step, rank);
  int rc = trc_safetensors_write_meta(path, m->name, meta, N_KEYS + 1, t, m->n_params + n_arrays,
                                      err);
  free(t);
  if (rc) return trc_set_where(err, path);
  trc_comm_barrier(); /* every rank has this step before any older one goes */
  remove_old_states(dir, rank, st->step, st->keep);
  return 0;
}

/* ---- loading ---- */

static const char *meta_value(const trc_st_header *h, const char *key) {
  for (int i = 0; i < h->n_meta; i++)
    if (strcmp(h->meta[2 * i], key) == 0) return h->meta[2 * i + 1];
  return NULL;
}

/* A flipped bit in the tensors or the counters would resume silently into
 * another run: the file's checksum must match what it holds. */
static int check_checksum(const trc_st_header *h, const unsigned char *buf, trc_error *err) {
  const char *values[N_KEYS], *stored = meta_value(h, "checksum");
  for (int i = 0; i < N_KEYS; i++)
    if (!(values[i] = meta_value(h, meta_keys[i])))
      return trc_fail(err, "not a trainc state file: '%s' missing", meta_keys[i]);
  if (!stored)
    return trc_fail(err, "has no checksum (saved by an older trainer?): cannot tell it is intact");
  uint64_t data_bytes = 0;
  for (int i = 0; i < h->n; i++)
    if (h->entries[i].end > data_bytes) data_bytes = h->entries[i].end;
  char computed[32];
  uint32_t crc = (uint32_t)crc32_z(0, buf + h->data_start, data_bytes);
  format_checksum(computed, checksum_values(crc, values));
  if (strcmp(stored, computed) != 0)
    return trc_fail(err, "damaged: the checksum says %.40s, the contents give %s; this state "
                         "cannot be resumed from", stored, computed);
  return 0;
}

static int parse_counters(const trc_st_header *h, trc_run_state *st, trc_error *err) {
  double v[N_COUNTERS];
  for (int i = 0; i < N_COUNTERS; i++) {
    const char *text = meta_value(h, counter_names[i]);
    char *end;
    errno = 0;
    v[i] = text ? strtod(text, &end) : -1;
    if (!text || errno || end == text || *end || !(v[i] >= 0))
      return trc_fail(err, "not a trainc state file: counter '%s' missing or bad",
                      counter_names[i]);
  }
  st->step = (int64_t)v[0];
  st->opt->step = (int64_t)v[1];
  st->in_sync = v[2] != 0;
  st->sync->syncs = (int64_t)v[3];
  st->sync->bytes = (uint64_t)v[4];
  st->sync->seconds = v[5];
  st->best->step = (int64_t)v[6];
  st->best->value = v[7];
  st->best->bad_evals = (int64_t)v[8];
  return 0;
}

static int check_fingerprint(const trc_st_header *h, const trc_run_state *st, trc_error *err) {
  const char *saved = meta_value(h, "fingerprint");
  if (!saved) return trc_fail(err, "not a trainc state file (no fingerprint)");
  if (strcmp(saved, st->fingerprint) != 0)
    return trc_fail(err,
                    "saved by a different run: it has [%s], this run is [%s]; resume with the "
                    "same model, flags and number of ranks",
                    saved, st->fingerprint);
  return 0;
}

static const trc_st_entry *find_tensor(const trc_st_header *h, const char *name) {
  for (int i = 0; i < h->n; i++)
    if (strcmp(h->entries[i].name, name) == 0) return &h->entries[i];
  return NULL;
}

/* Copies tensor `name` of `count` floats into dst. */
static int copy_tensor(const trc_st_header *h, const unsigned char *buf, const char *name,
                       uint64_t count, void *dst, trc_error *err) {
  const trc_st_entry *e = find_tensor(h, name);
  if (!e || strcmp(e->dtype, "F32") || e->end - e->begin != count * sizeof(float))
    return trc_fail(err, "tensor '%s' is missing or has the wrong size", name);
  memcpy(dst, buf + h->data_start + e->begin, e->end - e->begin);
  return 0;
}

static int copy_tensors(const trc_st_header *h, const unsigned char *buf, trc_run_state *st,
                        trc_error *err) {
  const trc_model *m = st->model;
  state_array arrays[MAX_STATE_ARRAYS];
  int n_arrays = state_arrays(st, arrays);
  if (h->n != m->n_params + n_arrays)
    return trc_fail(err, "holds %d tensors; this run saves %d", h->n, m->n_params + n_arrays);
  for (int i = 0; i < m->n_params; i++)
    if (copy_tensor(h, buf, m->params[i].name, m->params[i].count, st->arena + m->params[i].offset,
                    err))
      return -1;
  for (int i = 0; i < n_arrays; i++)
    if (copy_tensor(h, buf, arrays[i].name, m->trained_count, arrays[i].data, err)) return -1;
  return 0;
}

static int load_file(const char *path, trc_run_state *st, trc_error *err) {
  unsigned char *buf;
  trc_st_header h;
  if (trc_safetensors_load(path, &buf, &h, err)) return -1;
  int rc = check_checksum(&h, buf, err) || check_fingerprint(&h, st, err) ||
                   parse_counters(&h, st, err) || copy_tensors(&h, buf, st, err) ||
                   check_state_finite(st, "non-finite state", err)
               ? -1
               : 0;
  trc_st_header_free(&h);
  free(buf);
  return rc ? trc_set_where(err, path) : 0;
}

int trc_state_load(const char *dir, trc_run_state *st, trc_error *err) {
  int rank = trc_comm_rank();
  int64_t newest = scan_states(dir, rank, 0, NULL, NULL), common, latest;
  if (newest == -2) return trc_fail_at(err, dir, "cannot read the state folder: %s", strerror(errno));
  /* the newest step that every rank has saved (-1 when one has none) */
  if (trc_ranks_min_max(newest, &common, &latest, err)) return -1;
  if (common < 0)
    return trc_fail_at(err, dir, "no saved state%s (files state-STEP.rank-%d.safetensors)",
                       trc_comm_size() > 1 ? " for every rank" : "", rank);
  char path[4096];
  state_path(path, sizeof path, dir, common, rank);
  return load_file(path, st, err);
}
