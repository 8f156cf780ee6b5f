/* build.c — compiles an emitted C file into a trainer executable.
 * The compiler runs through execvp with an argument vector (no shell), so
 * nothing in a path or in --cflags is ever interpreted as a command. */
#include "codegen.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  char **items;
  int n, cap;
} Argv;

static void push(Argv *a, const char *s) { VEC_PUSH(a->items, a->n, a->cap, xstrdup(s)); }

/* Splits a flag string on blanks (no quoting: flags are words). */
static void push_words(Argv *a, const char *flags) {
  const char *p = flags;
  while (*p) {
    while (*p == ' ' || *p == '\t') p++;
    const char *start = p;
    while (*p && *p != ' ' && *p != '\t') p++;
    if (p > start) VEC_PUSH(a->items, a->n, a->cap, xstrndup(start, (size_t)(p - start)));
  }
}

static int run(Argv *a, bool verbose) {
  if (verbose) {
    for (int i = 0; i < a->n; i++) fprintf(stderr, "%s%s", i ? " " : "", a->items[i]);
    fputc('\n', stderr);
  }
  VEC_PUSH(a->items, a->n, a->cap, NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execvp(a->items[0], a->items);
    fprintf(stderr, "trainc: error: cannot run the C compiler '%s': %s\n", a->items[0], strerror(errno));
    _exit(127);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool build_c(const char *c_path, const char *exe_path, const BuildOptions *opt) {
  Argv a = {0};
  const char *cc = opt->cc ? opt->cc : getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
  push_words(&a, cc);
  push_words(&a, opt->cflags);
  push(&a, "-std=c11");
  push(&a, "-I");
  push(&a, opt->rt_include);
  push(&a, c_path);
  push(&a, "-o");
  push(&a, exe_path);
  push(&a, opt->rt_lib);
  push_words(&a, opt->blas_lib);
  if (opt->mpi_libs) push_words(&a, opt->mpi_libs);
  push(&a, "-lz");
  push(&a, "-lm");
  int rc = run(&a, opt->verbose);
  for (int i = 0; i < a.n; i++) free(a.items[i]);
  free(a.items);
  if (rc != 0) fprintf(stderr, "trainc: error: the C compiler failed (exit %d) on %s\n", rc, c_path);
  return rc == 0;
}
