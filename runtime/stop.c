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

/* SIGTERM's and SIGINT's actions before trc_stop_catch. */
static const int signals[2] = {SIGTERM, SIGINT};
static struct sigaction before[2];

static void restore(void) {
  for (int i = 0; i < 2; i++) sigaction(signals[i], &before[i], NULL); /* async-signal-safe */
}

static void record(int signo) {
  caught = signo;
  restore(); /* a second signal acts as if the trainer did not catch them */
}

void trc_stop_catch(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = record;
  sa.sa_flags = SA_RESTART; /* a read or write the signal lands in goes on, not fails */
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 2; i++) {
    sigaction(signals[i], NULL, &before[i]);
    /* ignored, as `nohup` and a shell's background jobs leave SIGINT: it stays so */
    if (before[i].sa_handler != SIG_IGN) sigaction(signals[i], &sa, NULL);
  }
}

void trc_stop_release(void) { restore(); }

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
