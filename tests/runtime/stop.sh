#!/usr/bin/env bash
# stop.sh TRAINER MAKE_DATA [MPI_TRAINER] — stopping on a signal
# (docs/trainer.md, Stopping), with the tiny trainer, whose TINY_RAISE
# raises a signal inside a given step (deterministic, no sleeps):
#  1. SIGTERM mid-training finishes the step, logs it, saves the state, says
#     so and exits 143; resuming gives bitwise the uninterrupted run's weights;
#  2. SIGINT exits 130; without --save-state it says that nothing was saved;
#     started with SIGINT ignored (nohup), the trainer leaves it ignored;
#  3. a second signal ends the process at once: no message, no state;
#  4. under mpirun -np 2 (MPI_TRAINER), a signal to rank 1 alone stops both
#     ranks at the same step with both states saved; resuming gives bitwise
#     the uninterrupted job's weights;
#  5. SIGUSR1 to mpirun, which forwards it (on SIGTERM Open MPI's mpirun ends
#     the ranks before they can save): both ranks stop at one step, exit 138.
NAME=stop
MPI_TRAINER=${3:-}
. "$(dirname "$0")/harness.sh" "$1" "$2" 400
TRAIN=(--data d --steps 20 --quiet)
# SIGINT's default action for what follows (a shell's background job, and
# so maybe this test, starts with SIGINT ignored)
DEFAULT_INT=("$PY" -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])')

echo "1. SIGTERM: the step finished, the state saved, exit 143, resumed bitwise"
run full 0 "$TRAINER" "${TRAIN[@]}" --save full.safetensors
run term 143 env TINY_RAISE=15,7,1 "$TRAINER" "${TRAIN[@]}" --save-state st --save-every 5 \
  --save term.safetensors --log term.jsonl
expect term err "tiny_trainer: stopped by SIGTERM after step 7; state saved in \
st/state-7.rank-0.safetensors; resume with --resume st"
[ -e st/state-7.rank-0.safetensors ] || fail "SIGTERM: no state of step 7"
grep -q '^{"step":7,"epoch"' term.jsonl || fail "SIGTERM: the log lacks step 7"
[ ! -e term.safetensors ] || fail "SIGTERM: the weights of an unfinished run were saved"
run resumed 0 "$TRAINER" "${TRAIN[@]}" --resume st --save resumed.safetensors
cmp -s full.safetensors resumed.safetensors || fail "the resumed run's weights differ"

echo "2. SIGINT: exit 130; without --save-state nothing is saved; ignored stays ignored"
run int 130 "${DEFAULT_INT[@]}" env TINY_RAISE=2,3,1 "$TRAINER" "${TRAIN[@]}"
expect int err "tiny_trainer: stopped by SIGINT after step 3; no state saved (no --save-state)"
run ignored 0 sh -c 'trap "" INT; exec "$@"' sh env TINY_RAISE=2,3,1 "$TRAINER" "${TRAIN[@]}"

echo "3. a second signal ends the process at once"
run twice 143 env TINY_RAISE=15,7,2 "$TRAINER" "${TRAIN[@]}" --save-state st2
! grep -q "stopped by" twice.err || fail "a second signal: the trainer still stopped gracefully"
[ -z "$(ls st2)" ] || fail "a second signal: a state was saved"

if [ -n "$MPI_TRAINER" ] && command -v mpirun >/dev/null; then
  echo "4. under MPI, a signal to one rank stops both at the same step"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 # Open MPI's own allocations
  MPI=(mpirun --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none
       --mca mpi_yield_when_idle 1)
  run mpi_full 0 "${MPI[@]}" -np 2 "$MPI_TRAINER" "${TRAIN[@]}" --save mpi_full.safetensors
  # MPMD: rank 1 alone gets SIGTERM in its 7th step; the ranks agree one step later
  run mpi_term 143 "${MPI[@]}" -np 1 "$MPI_TRAINER" "${TRAIN[@]}" --save-state mst : \
    -np 1 env TINY_RAISE=15,7,1 "$MPI_TRAINER" "${TRAIN[@]}" --save-state mst
  expect mpi_term err "stopped by SIGTERM after step 8; state saved in \
mst/state-8.rank-*.safetensors; resume with --resume mst"
  [ "$(ls mst)" = "state-8.rank-0.safetensors
state-8.rank-1.safetensors" ] || fail "under MPI: the ranks' states are $(ls mst)"
  run mpi_resumed 0 "${MPI[@]}" -np 2 "$MPI_TRAINER" "${TRAIN[@]}" --resume mst \
    --save mpi_resumed.safetensors
  cmp -s mpi_full.safetensors mpi_resumed.safetensors ||
    fail "under MPI: the resumed weights differ"

  echo "5. SIGUSR1 to mpirun stops every rank at one step"
  "${MPI[@]}" -np 2 "$MPI_TRAINER" --data d --steps 300000 --log-every 100 --quiet \
    --log usr1.jsonl --save-state ust >usr1.out 2>usr1.err &
  job=$!
  for _ in $(seq 300); do [ -s usr1.jsonl ] && break; sleep 0.1; done # training has begun
  kill -USR1 "$job"
  wait "$job"
  rc=$?
  [ "$rc" -eq 138 ] || fail "SIGUSR1 to mpirun: exit $rc, expected 138"
  expect usr1 err "stopped by SIGUSR1 after step"
  saved=$(ls ust | sed 's/\.rank-[01]\././' | uniq)
  [ "$(ls ust | wc -l)" -eq 2 ] && [ "$(echo "$saved" | wc -l)" -eq 1 ] ||
    fail "SIGUSR1 to mpirun: the ranks' states are $(ls ust)"
fi

finish
