/* comm.c — the communication interface for a trainer built without MPI: one
 * process, rank 0 of 1, so every sum over ranks is the value itself. */
#include "rt_train.h"

#include <stdlib.h>

int trc_comm_init(int *argc, char ***argv, trc_error *err) { return 0; }
int trc_comm_rank(void) { return 0; }
int trc_comm_size(void) { return 1; }
void trc_comm_allreduce_f32(float *buf, uint64_t n) {}
void trc_comm_allreduce_f64(double *buf, uint64_t n) {}
void trc_comm_iallreduce_f32(float *buf, uint64_t n) {}
void trc_comm_wait_all(void) {}
void trc_comm_barrier(void) {}
void trc_comm_finalize(int status) {}
void trc_comm_abort(int status) { exit(status); }
void trc_comm_set_timeout(double seconds) {}
