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
void trc_comm_barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }

void trc_comm_abort(int status) { MPI_Abort(MPI_COMM_WORLD, status); }

void trc_comm_finalize(int status) {
  if (status != 0 && world_size > 1) MPI_Abort(MPI_COMM_WORLD, status);
  MPI_Finalize();
}
