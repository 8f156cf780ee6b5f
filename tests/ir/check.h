/* check.h — the ir tests' CHECK(cond, what): a failed condition is counted in
 * `failures` (each test's exit status) and reported with its file, line, what
 * it was about (a string) and the condition's text. */
#ifndef TESTS_IR_CHECK_H
#define TESTS_IR_CHECK_H

#include <stdio.h>

static int failures;
#define CHECK(cond, what)                                                                \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      failures++;                                                                        \
      fprintf(stderr, "%s:%d: %s: check failed: %s\n", __FILE__, __LINE__, what, #cond); \
    }                                                                                    \
  } while (0)

#endif
