/* comm_mpi.c — the communication interface over MPI_COMM_WORLD (compiled only
 * into libtrainc_rt_mpi.a). MPI's default error handler is kept: a failed
 * call aborts the job rather than returning into a half-synchronized state. */
#include "rt_internal.h"

#include <limits.h>
#include <mpi.h>

static int world_rank, world_size = 1;

int trc_comm_init(int *argc, char ***argv, trc_error *err) {
  if (MPI_Init(argc, argv) != MPI_SUCCESS) return trc_fail(err, "MPI_Init failed");
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  return 0;
}

int trc_comm_rank(void) { return world_rank; }
int trc_comm_size(void) { return world_size; }

/* MPI counts are int: larger buffers go in INT_MAX-element pieces. */
static void allreduce(void *buf, uint64_t n, MPI_Datatype type, size_t elem) {
  char *p = buf;
  while (n > 0) {
    int count = n > INT_MAX ? INT_MAX : (int)n;
    MPI_Allreduce(MPI_IN_PLACE, p, count, type, MPI_SUM, MPI_COMM_WORLD);
    p += (size_t)count * elem;
    n -= (uint64_t)count;
  }
}

void trc_comm_allreduce_f32(float *buf, uint64_t n) { allreduce(buf, n, MPI_FLOAT, sizeof *buf); }
void trc_comm_allreduce_f64(double *buf, uint64_t n) { allreduce(buf, n, MPI_DOUBLE, sizeof *buf); }

/* The non-blocking sums in flight. A fixed table, so that every rank makes
 * the same calls: when it is full, the ones in it are finished first. */
enum { MAX_PENDING = 64 };
static MPI_Request pending[MAX_PENDING];
static int n_pending;

void trc_comm_wait_all(void) {
  MPI_Waitall(n_pending, pending, MPI_STATUSES_IGNORE);
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
void trc_comm_barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }

void trc_comm_finalize(int status) {
  if (status != 0 && world_size > 1) MPI_Abort(MPI_COMM_WORLD, status);
  MPI_Finalize();
}
