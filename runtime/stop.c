/* stop.c — graceful preemption (docs/trainer.md, Stopping): SIGTERM or
 * SIGINT during training asks the loop to stop after the step in flight;
 * train.c then saves the resumable state and exits with 128 + the signal's
 * number. The handler only records the signal.
 *
 * Under MPI every rank must stop at the same step, whichever got the signal.
 * The ranks vote without a blocking round of their own: each step boundary
 * finishes the sum of the votes started at the boundary before, which has
 * had a whole step to travel (with synchronous gradients the step's own
 * trc_comm_wait_all finishes it), and starts the next. So the ranks stop
 * together at the boundary after the signal's, for two floats per step. */
#define _DEFAULT_SOURCE /* sigaction */
#include "rt_internal.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t caught;

static void set_action(int signo, void (*handler)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESTART; /* a read or write the signal lands in goes on, not fails */
  sigemptyset(&sa.sa_mask);
  sigaction(signo, &sa, NULL);
}

static void record(int signo) {
  caught = signo;
  set_action(SIGTERM, SIG_DFL); /* sigaction is async-signal-safe */
  set_action(SIGINT, SIG_DFL);
}

void trc_stop_catch(void) {
  set_action(SIGTERM, record);
  set_action(SIGINT, record);
}

void trc_stop_release(void) {
  set_action(SIGTERM, SIG_DFL);
  set_action(SIGINT, SIG_DFL);
}

int trc_stop_agreed(float votes[2], int ranks) {
  if (ranks == 1) return caught;
  trc_comm_wait_all(); /* the votes started at the boundary before */
  int agreed = votes[1] > 0 ? SIGTERM : votes[0] > 0 ? SIGINT : 0;
  if (!agreed) {
    votes[0] = caught == SIGINT;
    votes[1] = caught == SIGTERM;
    trc_comm_iallreduce_f32(votes, 2);
  }
  return agreed;
}
