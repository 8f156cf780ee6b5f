/* comm_mpi.c — the communication interface over MPI_COMM_WORLD (compiled only
 * into libtrainc_rt_mpi.a). MPI's default error handler is kept: a failed
 * call aborts the job rather than returning into a half-synchronized state.
 *
 * A watchdog thread bounds every collective: a rank that waits in one
 * longer than the timeout (--comm-timeout; a peer stopped, hung or far
 * slower) says so and exits, and mpirun then ends the other ranks. The
 * collectives themselves are the blocking ones, untouched; the watchdog only
 * reads a deadline that each sets before and clears after. */
#include "rt_train.h"

#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static int world_rank, world_size = 1;
/* Where this rank runs and, with 2 ranks, the one it waits for: the
 * watchdog's message names them (across hosts, "the other ranks" does not
 * say which machine or link to look at). */
static char own_host[MPI_MAX_PROCESSOR_NAME], peer_host[MPI_MAX_PROCESSOR_NAME];

static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  pthread_t thread;
  int started, idle;  /* idle: waiting for a deadline to be set */
  double timeout;     /* seconds; 0: none */
  double deadline;    /* CLOCK_MONOTONIC seconds; 0: not in a collective */
  const char *doing;  /* the collective waited in */
} watchdog = {.lock = PTHREAD_MUTEX_INITIALIZER};

static double monotonic_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void give_up(void) {
  char late[MPI_MAX_PROCESSOR_NAME + 32] = "a rank";
  if (world_size == 2) snprintf(late, sizeof late, "rank %d on %s", 1 - world_rank, peer_host);
  fprintf(stderr,
          "trainer: error: rank %d on %s: the %s has waited %.0f s for the other ranks "
          "(--comm-timeout); %s is stopped, hung, far slower or unreachable; ending the job\n",
          world_rank, own_host, watchdog.doing, watchdog.timeout, late);
  fflush(stderr);
  _exit(1); /* MPI cannot be called from this thread; mpirun ends the others */
}

static void *watch(void *unused) {
  pthread_mutex_lock(&watchdog.lock);
  for (;;) {
    while (watchdog.deadline == 0) {
      watchdog.idle = 1;
      pthread_cond_wait(&watchdog.wake, &watchdog.lock);
      watchdog.idle = 0;
    }
    double deadline = watchdog.deadline;
    if (monotonic_now() >= deadline) give_up();
    struct timespec until = {(time_t)deadline, (long)((deadline - (double)(time_t)deadline) * 1e9)};
    pthread_cond_timedwait(&watchdog.wake, &watchdog.lock, &until); /* then look again */
  }
  return unused;
}

static void start_watchdog(void) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&watchdog.wake, &attr);
  pthread_condattr_destroy(&attr);
  watchdog.started = pthread_create(&watchdog.thread, NULL, watch, NULL) == 0;
  if (watchdog.started) pthread_detach(watchdog.thread);
}

void trc_comm_set_timeout(double seconds) {
  watchdog.timeout = seconds;
  if (seconds > 0 && world_size > 1 && !watchdog.started) start_watchdog();
}

/* Wakes the watchdog only when it sleeps without a deadline: a collective
 * costs a lock, not a thread switch. */
static void arm(const char *doing) {
  if (!watchdog.started || watchdog.timeout <= 0) return;
  pthread_mutex_lock(&watchdog.lock);
  watchdog.deadline = monotonic_now() + watchdog.timeout;
  watchdog.doing = doing;
  if (watchdog.idle) pthread_cond_signal(&watchdog.wake);
  pthread_mutex_unlock(&watchdog.lock);
}

static void disarm(void) {
  if (!watchdog.started) return;
  pthread_mutex_lock(&watchdog.lock);
  watchdog.deadline = 0;
  pthread_mutex_unlock(&watchdog.lock);
}

int trc_comm_init(int *argc, char ***argv, trc_error *err) {
  if (MPI_Init(argc, argv) != MPI_SUCCESS) return trc_fail(err, "MPI_Init failed");
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  int len;
  MPI_Get_processor_name(own_host, &len);
  if (world_size == 2) /* each sends its name and receives the other's */
    MPI_Sendrecv(own_host, sizeof own_host, MPI_CHAR, 1 - world_rank, 0, peer_host, sizeof peer_host,
                 MPI_CHAR, 1 - world_rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return 0;
}

int trc_comm_rank(void) { return world_rank; }
int trc_comm_size(void) { return world_size; }

/* MPI counts are int: larger buffers go in INT_MAX-element pieces. */
static void allreduce(void *buf, uint64_t n, MPI_Datatype type, size_t elem) {
  char *p = buf;
  arm("all-reduce");
  while (n > 0) {
    int count = n > INT_MAX ? INT_MAX : (int)n;
    MPI_Allreduce(MPI_IN_PLACE, p, count, type, MPI_SUM, MPI_COMM_WORLD);
    p += (size_t)count * elem;
    n -= (uint64_t)count;
  }
  disarm();
}

void trc_comm_allreduce_f32(float *buf, uint64_t n) { allreduce(buf, n, MPI_FLOAT, sizeof *buf); }
void trc_comm_allreduce_f64(double *buf, uint64_t n) { allreduce(buf, n, MPI_DOUBLE, sizeof *buf); }

void trc_comm_barrier(void) {
  arm("barrier");
  MPI_Barrier(MPI_COMM_WORLD);
  disarm();
}

void trc_comm_abort(int status) { MPI_Abort(MPI_COMM_WORLD, status); }

/* The non-blocking sums in flight. A fixed table, so that every rank makes
 * the same calls: when it is full, the ones in it are finished first. */
enum { MAX_PENDING = 64 };
static MPI_Request pending[MAX_PENDING];
static int n_pending;

void trc_comm_wait_all(void) {
  arm("all-reduce");
  MPI_Waitall(n_pending, pending, MPI_STATUSES_IGNORE);
  disarm();
  n_pending = 0;
}

void trc_comm_iallreduce_f32(float *buf, uint64_t n) {
  while (n > 0) {
    if (n_pending == MAX_PENDING) trc_comm_wait_all();
    int count = n > INT_MAX ? INT_MAX : (int)n;
    MPI_Iallreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                   &pending[n_pending++]);
    buf += count;
    n -= (uint64_t)count;
  }
  int done;
  MPI_Testall(n_pending, pending, &done, MPI_STATUSES_IGNORE);
  if (done) n_pending = 0;
}

void trc_comm_finalize(int status) {
  if (status != 0 && world_size > 1) MPI_Abort(MPI_COMM_WORLD, status);
  MPI_Finalize();
}
