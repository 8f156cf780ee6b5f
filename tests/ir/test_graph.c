/* test_graph.c — a graph's node storage never moves (ir.h): a Node * taken
 * before the graph grows stays valid and keeps pointing at its node. A graph
 * whose array was reallocated as it grew would fail here (and under ASan
 * report the read of a freed node). */
#include "ir.h"

int main(void) {
  Graph *g = graph_new();
  int x = graph_add(g, OP_PARAM, NULL, 0, (SrcLoc){0}, NULL);
  g->nodes[x].shape = (Shape){.rank = 1, .dim = {4}};
  const Node *first = &g->nodes[x], *storage = g->nodes;
  int last = x;
  for (int i = 0; i < 20000; i++) last = graph_add(g, OP_NEG, &last, 1, (SrcLoc){0}, NULL);
  int failures = 0;
  if (g->nodes != storage || first->op != OP_PARAM || first->shape.dim[0] != 4) failures++;
  if (g->n != 20001 || g->nodes[last].in[0] != last - 1 || g->nodes[last].shape.dim[0] != 4) failures++;
  if (failures) fprintf(stderr, "test_graph: the node storage moved or lost nodes\n");
  graph_free(g);
  return failures != 0;
}
