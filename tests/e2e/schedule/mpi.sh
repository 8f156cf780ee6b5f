# mpi.sh — sourced by the tests that run trainers on 2 ranks (localsgd.sh,
# overlap.sh), in their work folder, with $trainc set and fail() defined:
# skips the test (exit 77) without mpirun or without an MPI-built trainc, and
# sets MPI_OPTS and MPIRUN (mpirun -np 2 with them).
command -v mpirun >/dev/null || { echo "SKIP: mpirun is not installed"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 # Open MPI's own allocations
MPI_OPTS=(--oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none
          --mca mpi_yield_when_idle 1)
MPIRUN=(mpirun -np 2 "${MPI_OPTS[@]}")
printf 'model p {\n  input x : f32[B, 4]\n  loss = mean(x)\n}\n' >probe.nn
if ! "$trainc" build --mpi probe.nn -o probe 2>probe.err >/dev/null; then
  grep -q "built without" probe.err && { echo "SKIP: this trainc was built without MPI"; exit 77; }
  cat probe.err
  fail "cannot build a trainer with --mpi"
fi
