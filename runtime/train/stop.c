/* stop.c — graceful preemption (docs/trainer.md, Stopping): SIGTERM,
 * SIGINT or SIGUSR1 (which Open MPI's mpirun forwards to every rank and
 * lives on; on SIGTERM it ends the ranks before they can save) during
 * training asks the loop to stop after the step in flight;
 * train.c then saves the resumable state and exits with 128 + the signal's
 * number. The handler only records the signal.
 *
 * Under MPI every rank must stop at the same step, whichever got the signal.
 * The ranks vote without a blocking round of their own: each step boundary
 * finishes the sum of the votes started at the boundary before, which has
 * had a whole step to travel (with synchronous gradients the step's own
 * trc_comm_wait_all finishes it), and starts the next. So the ranks stop
 * together at the boundary after the signal's, for three floats per step. */
#define _DEFAULT_SOURCE /* sigaction */
#include "rt_train.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t caught;

/* The signals that stop training, in the order a vote prefers them, and
 * their actions before trc_stop_catch. */
static const int signals[TRC_STOP_SIGNALS] = {SIGTERM, SIGINT, SIGUSR1};
static const char *const names[TRC_STOP_SIGNALS] = {"SIGTERM", "SIGINT", "SIGUSR1"};
static struct sigaction before[TRC_STOP_SIGNALS];

static void restore(void) {
  for (int i = 0; i < TRC_STOP_SIGNALS; i++)
    sigaction(signals[i], &before[i], NULL); /* async-signal-safe */
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
  for (int i = 0; i < TRC_STOP_SIGNALS; i++) {
    sigaction(signals[i], NULL, &before[i]);
    /* ignored, as `nohup` and a shell's background jobs leave SIGINT: it stays so */
    if (before[i].sa_handler != SIG_IGN) sigaction(signals[i], &sa, NULL);
  }
}

void trc_stop_release(void) { restore(); }

const char *trc_stop_signal_name(int signo) {
  for (int i = 0; i < TRC_STOP_SIGNALS; i++)
    if (signals[i] == signo) return names[i];
  return "a signal";
}

int trc_stop_agreed(float votes[TRC_STOP_SIGNALS], int ranks) {
  if (ranks == 1) return caught;
  trc_comm_wait_all(); /* the votes started at the boundary before */
  for (int i = 0; i < TRC_STOP_SIGNALS; i++)
    if (votes[i] > 0) return signals[i];
  for (int i = 0; i < TRC_STOP_SIGNALS; i++) votes[i] = caught == signals[i];
  trc_comm_iallreduce_f32(votes, TRC_STOP_SIGNALS);
  return 0;
}
