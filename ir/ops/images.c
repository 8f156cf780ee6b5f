/* images.c — images [N, C, H, W]: padding, max and average pooling over
 * windows, im2col. */
#include "ops_internal.h"

#include <math.h>
#include <stdlib.h>

/* ------------------------------------------------------------------- images */

bool want_image(const Graph *g, Node *n, int64_t size, int64_t stride, Diag *diag) {
  if (!want_f32(g, n, 0, diag)) return false;
  const Shape *x = &in_node(g, n, 0)->shape;
  char sx[128];
  if (x->rank != 4) {
    diag_error(diag, n->loc, "%s needs an image batch [N, C, H, W], got %s", op_info(n->op)->name,
               shape_str(x, sx));
    return false;
  }
  if (size < 1 || stride < 1 || size > x->dim[2] || size > x->dim[3]) {
    diag_error(diag, n->loc, "%s: a %lldx%lld window does not fit the %lldx%lld image of %s", op_info(n->op)->name,
               (long long)size, (long long)size, (long long)x->dim[2], (long long)x->dim[3], shape_str(x, sx));
    return false;
  }
  return true;
}

int64_t windows(int64_t extent, int64_t size, int64_t stride) { return (extent - size) / stride + 1; }

/* Index of [n, c, h, w] in a [N, C, H, W] buffer, with n*C + c given as nc. */
static KExpr *image_index(Kernel *k, const Shape *s, KExpr *nc, KExpr *h, KExpr *w) {
  return k_iadd(k, k_imul(k, k_iadd(k, k_imul(k, nc, s->dim[2]), h), s->dim[3]), w);
}

bool infer_pad(const Graph *g, Node *n, Diag *diag) {
  if (!want_image(g, n, 1, 1, diag)) return false;
  n->shape = in_node(g, n, 0)->shape;
  n->shape.dim[2] += 2 * n->attr.i[0];
  n->shape.dim[3] += 2 * n->attr.i[0];
  return true;
}

void print_pad(FILE *out, const Node *n) { fprintf(out, " {pad=%lld}", (long long)n->attr.i[0]); }

/* out = x with attr.i[0] zeros around H and W (pad), or the interior of a
 * padded buffer (crop, its inverse). Loops over the smaller image. */
static Kernel *pad_kernel(const Graph *g, const Node *n, bool pad) {
  Kernel *k = kernel_new(n->id);
  if (pad) zero_output(k, n);
  const Shape *big = pad ? &n->shape : &in_node(g, n, 0)->shape, *small = pad ? &in_node(g, n, 0)->shape : &n->shape;
  int64_t p = n->attr.i[0];
  int nc, h, w;
  KStmt *loop = k_for(k, NULL, small->dim[0] * small->dim[1], &nc);
  loop = k_for(k, loop, small->dim[2], &h);
  loop = k_for(k, loop, small->dim[3], &w);
  KExpr *in_small = image_index(k, small, k_index(k, nc), k_index(k, h), k_index(k, w));
  KExpr *in_big = image_index(k, big, k_index(k, nc), k_iadd(k, k_index(k, h), k_iconst(k, p)),
                              k_iadd(k, k_index(k, w), k_iconst(k, p)));
  KExpr *src = pad ? in_small : in_big, *dst = pad ? in_big : in_small;
  k_store(k, loop, n->id, dst, k_load(k, n->in[0], src, false), accumulates(n));
  return k;
}

Kernel *kernel_pad(const Graph *g, const Node *n) { return pad_kernel(g, n, true); }
Kernel *kernel_crop(const Graph *g, const Node *n) { return pad_kernel(g, n, false); }

void bwd_pad(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Attr crop = {.i = {g->nodes[n].attr.i[0]}, .shape = g->nodes[g->nodes[n].in[0]].shape};
  dx[0] = add_with(g, OP_CROP, dy, &crop);
}

/* Loops over the windows of an [N, C, H, W] image (`img`) that give the
 * cells of `out` [N, C, OH, OW] (or, for im2col, its rows): nc, oh, ow. */
typedef struct {
  Kernel *k;
  const Shape *img;
  int64_t size, stride, oh_n, ow_n;
  KStmt *cell;       /* the innermost loop over windows */
  int nc, oh, ow;
  int i, j;          /* set by window_elem: the loops over one window */
} Windows;

static Windows windows_open(Kernel *k, const Shape *img, const Attr *a, bool channels_inside, int *c) {
  Windows wd = {.k = k, .img = img, .size = a->i[0], .stride = a->i[1]};
  k->short_rows = true;
  wd.oh_n = windows(img->dim[2], wd.size, wd.stride);
  wd.ow_n = windows(img->dim[3], wd.size, wd.stride);
  if (channels_inside) { /* im2col: n, oh, ow, c so that a row of columns is contiguous */
    KStmt *l = k_for(k, NULL, img->dim[0], &wd.nc);
    l = k_for(k, l, wd.oh_n, &wd.oh);
    l = k_for(k, l, wd.ow_n, &wd.ow);
    wd.cell = k_for(k, l, img->dim[1], c);
  } else {
    KStmt *l = k_for(k, NULL, img->dim[0] * img->dim[1], &wd.nc);
    l = k_for(k, l, wd.oh_n, &wd.oh);
    wd.cell = k_for(k, l, wd.ow_n, &wd.ow);
  }
  wd.cell->short_row = true;
  return wd;
}

/* Index of the cell in [N*C, OH, OW]. */
static KExpr *window_cell(Windows *wd) {
  Kernel *k = wd->k;
  return k_iadd(k, k_imul(k, k_iadd(k, k_imul(k, k_index(k, wd->nc), wd->oh_n), k_index(k, wd->oh)), wd->ow_n),
                k_index(k, wd->ow));
}

/* Opens loops i, j over the window under `parent`; returns the image index
 * of element (i, j), with nc the image's n*C + c. */
static KExpr *window_elem(Windows *wd, KStmt *parent, KExpr *nc, KStmt **inner) {
  Kernel *k = wd->k;
  KStmt *l = k_for(k, parent, wd->size, &wd->i);
  *inner = k_for(k, l, wd->size, &wd->j);
  KExpr *h = k_iadd(k, k_imul(k, k_index(k, wd->oh), wd->stride), k_index(k, wd->i));
  KExpr *w = k_iadd(k, k_imul(k, k_index(k, wd->ow), wd->stride), k_index(k, wd->j));
  return image_index(k, wd->img, nc, h, w);
}

/* The element (i, j) of the window, numbered i*size + j, as a float. */
static KExpr *window_pos(Windows *wd) {
  Kernel *k = wd->k;
  return k_to_float(k, k_iadd(k, k_imul(k, k_index(k, wd->i), wd->size), k_index(k, wd->j)));
}

/* Window ops' gradients have the input's shape and the op's window. */
static Attr window_back(const Graph *g, int n) {
  Attr a = g->nodes[n].attr;
  a.shape = g->nodes[g->nodes[n].in[0]].shape;
  return a;
}

/* attr.i[0], attr.i[1]: the window's size and stride; a max-pool
 * gradient's attr.i[2]: the relu mask. */
void print_window(FILE *out, const Node *n) {
  fprintf(out, " {size=%lld, stride=%lld%s}", (long long)n->attr.i[0], (long long)n->attr.i[1],
          n->op == OP_MAXPOOL_GRAD && n->attr.i[2] ? ", relu" : "");
}

bool infer_pool(const Graph *g, Node *n, Diag *diag) {
  int64_t size = n->attr.i[0], stride = n->attr.i[1];
  if (!want_image(g, n, size, stride, diag)) return false;
  const Shape *x = &in_node(g, n, 0)->shape;
  n->shape = (Shape){.rank = 4,
                     .dim = {x->dim[0], x->dim[1], windows(x->dim[2], size, stride), windows(x->dim[3], size, stride)}};
  return true;
}

/* The most a pool's row of scratch holds: a plane's window rows folded,
 * OH x W floats (16 KiB; a CPU thread's stack, a GPU thread's local memory). */
enum { POOL_ROW_FLOATS = 4096 };

/* Whether a pool of image x runs by rows (pool_by_rows): windows of 2 or
 * more that tile each image row (stride = size, W a multiple of it), a
 * plane's folded rows within POOL_ROW_FLOATS. */
static bool pools_by_rows(const Shape *x, const Attr *a) {
  int64_t size = a->i[0], oh = windows(x->dim[2], size, a->i[1]);
  return size >= 2 && a->i[1] == size && x->dim[3] % size == 0 && oh * x->dim[3] <= POOL_ROW_FLOATS;
}

/* t = x(0), then t = op(t, x(i + 1)) for i < size - 1: a window's line
 * folded in order, x(i) its element i (`at`). Returns t's local. */
static int fold_line(Kernel *k, KStmt *parent, KBinaryOp op, int64_t size,
                     KExpr *(*at)(Kernel *, KExpr *, const void *), const void *ctx) {
  int t, i;
  k_local(k, parent, at(k, k_iconst(k, 0), ctx), &t);
  KStmt *rest = k_for(k, parent, size - 1, &i);
  k_set(k, rest, t, k_binary(k, op, k_localv(k, t), at(k, k_iadd(k, k_index(k, i), k_iconst(k, 1)), ctx)));
  return t;
}

typedef struct {
  int buf;
  const Shape *x;
  KExpr *nc, *first_row, *column;
} ImageColumn;

/* Element i of a column's window line: (nc, first_row + i, column). */
static KExpr *column_at(Kernel *k, KExpr *i, const void *ctx) {
  const ImageColumn *c = ctx;
  return k_load(k, c->buf, image_index(k, c->x, c->nc, k_iadd(k, c->first_row, i), c->column), false);
}

typedef struct {
  const KStmt *row;
  KExpr *first;
} RowRun;

/* Element i of a window's run in the row: first + i. */
static KExpr *run_at(Kernel *k, KExpr *i, const void *ctx) {
  const RowRun *r = ctx;
  return k_row_at(k, r->row, k_iadd(k, r->first, i));
}

/* A pool by rows, a plane at a time, in two passes that vectorize: each
 * output row's window rows folded column by column into a row of scratch
 * (OH x W, the plane's), then each window's run of `size` in that scratch
 * folded, the plane's cells one flat loop. The max comes out as the
 * element-by-element kernel's but for NaNs and zeros' signs (a window all
 * NaN gives NaN, not -inf); a mean's sum in another order. GCC 12 ran
 * fashion_cnn's max-pools 1.3-1.7x faster so (bench/RESULTS.md): a row of 7
 * windows with each window's loops inside left most vector lanes idle. */
static Kernel *pool_by_rows(const Graph *g, const Node *n, bool max) {
  const Shape *x = &in_node(g, n, 0)->shape;
  int64_t size = n->attr.i[0], oh_n = n->shape.dim[2], ow_n = n->shape.dim[3], w_n = x->dim[3];
  KBinaryOp op = max ? KB_MAX : KB_ADD;
  Kernel *k = kernel_new(n->id);
  k->short_rows = true;
  int nc, oh, w, cell;
  KStmt *plane = k_for(k, NULL, x->dim[0] * x->dim[1], &nc);
  KStmt *row = k_row(k, plane, oh_n * w_n);
  KStmt *columns = k_for(k, k_for(k, plane, oh_n, &oh), w_n, &w);
  columns->short_row = true;
  ImageColumn c = {n->in[0], x, k_index(k, nc), k_imul(k, k_index(k, oh), size), k_index(k, w)};
  int folded = fold_line(k, columns, op, size, column_at, &c);
  k_set_at(k, columns, row, k_iadd(k, k_imul(k, k_index(k, oh), w_n), k_index(k, w)), k_localv(k, folded));
  KStmt *cells = k_for(k, plane, oh_n * ow_n, &cell);
  cells->short_row = true;
  RowRun r = {row, k_imul(k, k_index(k, cell), size)};
  int v = fold_line(k, cells, op, size, run_at, &r);
  KExpr *value = max ? k_localv(k, v) : k_binary(k, KB_MUL, k_localv(k, v), k_const(k, 1.0 / (double)(size * size)));
  k_store(k, cells, n->id, k_iadd(k, k_imul(k, k_index(k, nc), oh_n * ow_n), k_index(k, cell)), value, accumulates(n));
  return k;
}

/* Max- or average-pool: out[nc, oh, ow] = max or mean of the window. */
static Kernel *pool_kernel(const Graph *g, const Node *n, bool max) {
  if (pools_by_rows(&in_node(g, n, 0)->shape, &n->attr)) return pool_by_rows(g, n, max);
  Kernel *k = kernel_new(n->id);
  int unused;
  Windows wd = windows_open(k, &in_node(g, n, 0)->shape, &n->attr, false, &unused);
  int acc;
  k_local(k, wd.cell, k_const(k, max ? -INFINITY : 0), &acc);
  KStmt *inner;
  KExpr *x = k_load(k, n->in[0], window_elem(&wd, wd.cell, k_index(k, wd.nc), &inner), false);
  k_set(k, inner, acc, k_binary(k, max ? KB_MAX : KB_ADD, k_localv(k, acc), x));
  KExpr *v = max ? k_localv(k, acc)
                 : k_binary(k, KB_MUL, k_localv(k, acc), k_const(k, 1.0 / (double)(wd.size * wd.size)));
  k_store(k, wd.cell, n->id, window_cell(&wd), v, accumulates(n));
  return k;
}

Kernel *kernel_maxpool(const Graph *g, const Node *n) { return pool_kernel(g, n, true); }
Kernel *kernel_avgpool(const Graph *g, const Node *n) { return pool_kernel(g, n, false); }

void bwd_maxpool(Graph *g, int n, int dy, const bool want[], int dx[]) {
  int in[2] = {g->nodes[n].in[0], dy};
  dx[0] = graph_add_op(g, OP_MAXPOOL_GRAD, in, 2, &g->nodes[n].attr, no_loc, NULL);
}

/* Whether a pooling gradient's windows (attr) cover its image [N, C, H, W]
 * exactly once: stride = size, H and W multiples of it. Each element of dx
 * then gets one window's value, stored, with no zeroing pass before and no
 * read of dx (on fashion_cnn's first pool 6x faster than zero and add). */
static bool windows_tile(const Shape *img, const Attr *a) {
  int64_t size = a->i[0];
  return a->i[1] == size && img->dim[2] % size == 0 && img->dim[3] % size == 0;
}

/* The store of a window element of a pooling gradient: an add where windows
 * overlap or leave elements out (after zero_output) or where the node adds
 * into a parameter's gradient slot. */
static bool pool_grad_adds(const Node *n) { return accumulates(n) || !windows_tile(&n->shape, &n->attr); }

static void zero_uncovered(Kernel *k, const Node *n) {
  if (!windows_tile(&n->shape, &n->attr)) zero_output(k, n);
}

/* dx gets each window's dy at its first maximum (PyTorch's choice on ties):
 * one pass finds the position, a second gives dy where the position matches;
 * with attr.i[2] (the POOL pass, passes/pool.c) that value then goes
 * through relu_grad's select on x, the relu's output the pool read:
 * relu_grad(x, maxpool_grad(x, dy)) as one kernel. */
Kernel *kernel_maxpool_grad(const Graph *g, const Node *n) {
  Kernel *k = kernel_new(n->id);
  zero_uncovered(k, n);
  int unused, best, at;
  Windows wd = windows_open(k, &n->shape, &n->attr, false, &unused);
  k_local(k, wd.cell, k_const(k, -INFINITY), &best);
  k_local(k, wd.cell, k_const(k, 0), &at);
  KStmt *inner;
  KExpr *x = k_load(k, n->in[0], window_elem(&wd, wd.cell, k_index(k, wd.nc), &inner), false);
  k_set(k, inner, at, k_select(k, k_binary(k, KB_SUB, x, k_localv(k, best)), window_pos(&wd), k_localv(k, at)));
  k_set(k, inner, best, k_binary(k, KB_MAX, k_localv(k, best), x));
  KExpr *dy = k_load(k, n->in[1], window_cell(&wd), false);
  KExpr *pixel = window_elem(&wd, wd.cell, k_index(k, wd.nc), &inner);
  KExpr *d = k_binary(k, KB_SUB, k_localv(k, at), window_pos(&wd)); /* an integer: 0 at the maximum */
  KExpr *here = k_binary(k, KB_SUB, k_const(k, 0.5), k_binary(k, KB_MUL, d, d));
  KExpr *v = k_select(k, here, dy, k_const(k, 0));
  if (n->attr.i[2]) v = k_select(k, k_load(k, n->in[0], pixel, false), v, k_const(k, 0));
  k_store(k, inner, n->id, pixel, v, pool_grad_adds(n));
  return k;
}

void bwd_avgpool(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Attr a = window_back(g, n);
  dx[0] = add_with(g, OP_AVGPOOL_GRAD, dy, &a);
}

/* dx[window elements] += dy / size^2 (= where the windows tile dx). */
Kernel *kernel_avgpool_grad(const Graph *g, const Node *n) {
  Kernel *k = kernel_new(n->id);
  zero_uncovered(k, n);
  int unused;
  Windows wd = windows_open(k, &n->shape, &n->attr, false, &unused);
  KExpr *dy = k_binary(k, KB_MUL, k_load(k, n->in[0], window_cell(&wd), false),
                       k_const(k, 1.0 / (double)(wd.size * wd.size)));
  KStmt *inner;
  KExpr *pixel = window_elem(&wd, wd.cell, k_index(k, wd.nc), &inner);
  k_store(k, inner, n->id, pixel, dy, pool_grad_adds(n));
  return k;
}

bool infer_im2col(const Graph *g, Node *n, Diag *diag) {
  if (!infer_pool(g, n, diag)) return false;
  const Shape *x = &in_node(g, n, 0)->shape;
  int64_t k = n->attr.i[0];
  n->shape = (Shape){.rank = 3, .dim = {x->dim[0], n->shape.dim[2] * n->shape.dim[3], x->dim[1] * k * k}};
  return true;
}

/* col[n, oh*OW + ow, (c*k + i)*k + j] = x[n, c, oh*s + i, ow*s + j] (im2col),
 * or dx[...] += dcol[...] (col2im). */
static Kernel *im2col_kernel(const Graph *g, const Node *n, bool forward) {
  Kernel *k = kernel_new(n->id);
  if (!forward) zero_output(k, n);
  const Shape *img = forward ? &in_node(g, n, 0)->shape : &n->shape;
  int c;
  Windows wd = windows_open(k, img, &n->attr, true, &c);
  int64_t ksz = wd.size, channels = img->dim[1];
  KExpr *nc = k_iadd(k, k_imul(k, k_index(k, wd.nc), channels), k_index(k, c));
  KStmt *inner;
  KExpr *pixel = window_elem(&wd, wd.cell, nc, &inner);
  KExpr *row = k_iadd(k, k_imul(k, k_index(k, wd.nc), wd.oh_n * wd.ow_n),
                      k_iadd(k, k_imul(k, k_index(k, wd.oh), wd.ow_n), k_index(k, wd.ow)));
  KExpr *col = k_iadd(k, k_imul(k, k_iadd(k, k_imul(k, k_index(k, c), ksz), k_index(k, wd.i)), ksz),
                      k_index(k, wd.j));
  KExpr *cell = k_iadd(k, k_imul(k, row, channels * ksz * ksz), col);
  KExpr *src = forward ? pixel : cell, *dst = forward ? cell : pixel;
  k_store(k, inner, n->id, dst, k_load(k, n->in[0], src, false), forward ? accumulates(n) : true);
  return k;
}

Kernel *kernel_im2col(const Graph *g, const Node *n) { return im2col_kernel(g, n, true); }
Kernel *kernel_col2im(const Graph *g, const Node *n) { return im2col_kernel(g, n, false); }

void bwd_im2col(Graph *g, int n, int dy, const bool want[], int dx[]) {
  Attr a = window_back(g, n);
  dx[0] = add_with(g, OP_COL2IM, dy, &a);
}
