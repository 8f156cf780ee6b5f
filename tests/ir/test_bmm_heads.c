/* test_bmm_heads.c — bmm's head layout (ir/ops.def, gemm_dims in ir.h) as
 * attention uses it, B = 2, T = 3, H = 2 heads of D = 4 (C = 8):
 *  - the shapes: q k^T from q, k [B, T, C] read head-interleaved is
 *    [B, H, T, T]; probs @ v written head-interleaved is [B, T, C];
 *  - gemm_dims addresses element (b, h, t, d) of a head-interleaved operand
 *    where the permute the layout replaces, [B, T, H, D] → [B, H, T, D],
 *    took it from: ((b*T + t)*H + h)*D + d; of a plain one at its
 *    row-major index in [B, H, T, T];
 *  - the backward rule keeps each operand's layout (dq, dk, dv come out
 *    [B, T, C]); heads that do not divide C are an error, not a crash. */
#include "ir.h"
#include "check.h"

enum { B = 2, T = 3, H = 2, D = 4, C = H * D };

static int leaf(Graph *g, Shape s) {
  int x = graph_add(g, OP_PARAM, NULL, 0, NO_LOC, NULL);
  g->nodes[x].shape = s;
  return x;
}

static bool same_shape(const Graph *g, int x, Shape want) {
  return shape_equal(&g->nodes[x].shape, &want);
}

/* Matrix (b, h), row r, column c (of the stored matrix) as gemm_dims says. */
static int64_t gemm_index(int64_t ld, int64_t stride, int64_t head_stride, int b, int h, int r,
                          int c) {
  return b * stride + h * head_stride + r * ld + c;
}

/* Every element of an interleaved [B, T, C] operand (ld, strides) and of a
 * plain [B, H, T, T] one at the index the permuted layout gives it. */
static void check_addresses(int64_t ld, int64_t stride, int64_t head_stride, bool interleaved,
                            const char *what) {
  int64_t cols = interleaved ? D : T;
  bool ok = true;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int t = 0; t < T; t++)
        for (int c = 0; c < cols; c++) {
          int64_t want =
              interleaved ? ((b * T + t) * H + h) * D + c : ((b * H + h) * T + t) * T + c;
          ok &= gemm_index(ld, stride, head_stride, b, h, t, c) == want;
        }
  CHECK(ok, what);
}

int main(void) {
  Graph *g = graph_new();
  Shape btc = {.rank = 3, .dim = {B, T, C}}, bhtt = {.rank = 4, .dim = {B, H, T, T}};
  int q = leaf(g, btc), k = leaf(g, btc), v = leaf(g, btc);
  int qk[2] = {q, k};
  int scores = graph_add_bmm(g, qk, 0, 1, H, BMM_HEADS_A | BMM_HEADS_B, NO_LOC, NULL);
  CHECK(same_shape(g, scores, bhtt), "q k^T is [B, H, T, T]");
  int pv[2] = {scores, v};
  int y = graph_add_bmm(g, pv, 0, 0, H, BMM_HEADS_B | BMM_HEADS_C, NO_LOC, NULL);
  CHECK(same_shape(g, y, btc), "probs v is [B, T, C]");

  GemmDims d;
  gemm_dims(g, &g->nodes[scores], &d);
  CHECK(d.batch == B && d.heads == H && d.m == T && d.n == T && d.k == D, "q k^T's sizes");
  CHECK(d.trans_b && !d.trans_a, "k read transposed");
  check_addresses(d.lda, d.stride_a, d.head_stride_a, true, "q");
  check_addresses(d.ldb, d.stride_b, d.head_stride_b, true, "k");
  check_addresses(d.ldc, d.stride_c, d.head_stride_c, false, "scores");
  gemm_dims(g, &g->nodes[y], &d);
  CHECK(d.batch == B && d.heads == H && d.m == T && d.n == D && d.k == T, "probs v's sizes");
  check_addresses(d.lda, d.stride_a, d.head_stride_a, false, "probs");
  check_addresses(d.ldb, d.stride_b, d.head_stride_b, true, "v");
  check_addresses(d.ldc, d.stride_c, d.head_stride_c, true, "y");

  /* dprobs = dy v^T, dv = probs^T dy; dq = dscores k, dk = dscores^T q */
  int dy = leaf(g, btc), dscores = leaf(g, bhtt), dx[2] = {-1, -1};
  bool both[2] = {true, true};
  op_info(OP_BMM)->backward(g, y, dy, both, dx);
  CHECK(same_shape(g, dx[0], bhtt) && same_shape(g, dx[1], btc), "dprobs, dv");
  op_info(OP_BMM)->backward(g, scores, dscores, both, dx);
  CHECK(same_shape(g, dx[0], btc) && same_shape(g, dx[1], btc), "dq, dk");
  CHECK(g->nodes[dx[0]].attr.i[3] & BMM_HEADS_C && g->nodes[dx[1]].attr.i[3] & BMM_HEADS_C,
        "dq, dk written head-interleaved");

  Diag diag;
  diag_init(&diag, fopen("/dev/null", "w"));
  int three = graph_add_bmm(g, qk, 0, 1, 3, BMM_HEADS_A | BMM_HEADS_B, NO_LOC, &diag);
  CHECK(three < 0 && diag_count(&diag) == 1, "3 heads of C = 8: an error");
  fclose(diag.out);
  graph_free(g);
  return failures != 0;
}
