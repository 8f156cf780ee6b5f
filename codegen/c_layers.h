/* c_layers.h — the C backend's loops over the layers of a repeat
 * (codegen-internal).
 *
 * Consecutive copies of a repeat (layer paths block.0, block.1, ...) whose
 * calls are alike — the same kernel functions in the same order, their
 * buffers in the same pattern, each within the layer in all or in none, the
 * same gradient buckets final after the same calls — differ only in numbers:
 * arena offsets, dropout streams, bucket ranges. Such a run is printed as one
 * loop over the layers, each number an affine form of the layer (as llm.c's
 * `params.ln1w + l * C`) or, where it is not one, read from a static table
 * with a row per layer; a layer that differs (the planner stored or recomputed other
 * values in it, a bucket boundary fell elsewhere) stays unrolled. Found from
 * the Program and the C backend's functions and names, never from op or
 * model names. */
#ifndef TRAINC_C_LAYERS_H
#define TRAINC_C_LAYERS_H

#include "c_names.h"

typedef enum { COL_OFFSET, COL_STREAM, COL_BUCKET_FIRST, COL_BUCKET_COUNT } LayerColumnKind;

/* A column of a layer table: a field of its rows. */
typedef struct {
  const char *name; /* the field; for an offset also the pointer in the loop */
  LayerColumnKind kind;
  DType dtype;      /* COL_OFFSET: the pointer's type */
  uint64_t *values; /* per row */
  bool affine;      /* values[r] = values[0] + r * stride: printed as that, not in the table */
  int64_t stride;
} LayerColumn;

typedef struct {
  int start, calls;  /* the calls [start, start + layers * calls) of the list */
  int layers;        /* rows, in layer order */
  int *layer;        /* per row: its copy number (block.<n>), ascending */
  int step;          /* 1: the loop runs the layers up (forward), -1: down */
  char *repeat;      /* the repeat's layer path ("block") */
  const char *table; /* the table's name */
  LayerColumn *cols;
  int n_cols, cap_cols;
  int *arg_at;       /* per call of a layer: its first entry in arg, arg_col */
  int *stream_at;    /* per call of a layer: its first entry in stream_col */
  const char **arg;  /* per buffer a call passes: its pointer's name */
  int *arg_col;      /* its column, -1: the same value in every layer (arg names it) */
  int *stream_col;   /* per stream a call passes: its column, -1: a constant */
  int *ready;        /* per call: the gradient buckets final after it */
  int *ready_col;    /* per call: the first of their (first, count) columns */
} LayerLoop;

typedef struct {
  LayerLoop *loops;
  int n, cap;
  int *loop_at; /* per call of the list: the loop starting there, -1 */
  int *loop_of; /* per call of the list: the loop it is in, -1 */
} LayerLoops;

/* The loops of the call list ids[0..n) (p->forward, or p->backward with its
 * buckets), their tables and names claimed in c. */
void layer_loops_find(LayerLoops *ll, const Program *p, CNames *c, const int *ids, int n);
void layer_loops_free(LayerLoops *ll);
/* `static const struct {...} block_fwd[12] = {...};` for each loop with
 * columns that are not affine in the layer. */
void layer_loops_print_tables(FILE *out, const LayerLoops *ll, const char *what);
/* Column k's value in layer l as C: `997093440 + l * 786432` (l - 1 for a
 * run from layer 1), or the table's `block_fwd[l].ln_1`. */
const char *layer_value(const LayerLoop *L, int k, char *buf, size_t size);

#endif
