#!/usr/bin/env bash
# mpi.sh TRAINER MAKE_DATA — guards of a job of 2 ranks (docs/trainer.md,
# Distributed training), with the tiny trainer built for MPI:
#  1. one rank's NaN gradient (its loss finite) ends the job before the
#     parameter sync would spread it: nothing saved, the rank and tensor named;
#  2. ranks started with different --lr / --seed / --steps are refused at
#     start, naming what differs;
#  3. a rank stopped with SIGSTOP ends the job after --comm-timeout with a
#     message, instead of leaving the other spinning; a timeout past what the
#     watchdog's timed wait can represent is refused (it used to spin);
#  4. --load-best and --early-stopping decide alike on both ranks (the
#     evaluation is summed over them): the job ends at the same step on
#     both, says the best step, and saves every rank's state.
command -v mpirun >/dev/null || { echo "SKIP: mpirun is not installed"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 # Open MPI's own allocations
MPI_OPTS=(--oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none
          --mca mpi_yield_when_idle 1)
NAME=mpi
. "$(dirname "$0")/harness.sh" "$1" "$2" 400

echo "1. one rank's NaN gradient stops the job before the sync"
# MPMD: rank 0 plain, rank 1 with the NaN
timeout 120 mpirun "${MPI_OPTS[@]}" -np 1 "$TRAINER" --data d --steps 6 --quiet --save w.safetensors : \
  -np 1 env TINY_NAN_GRADIENT=1 "$TRAINER" --data d --steps 6 --quiet --save w.safetensors \
  >nan.out 2>nan.err
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "a NaN on one rank: exit $rc"
expect nan err "rank 1: parameter 'fc2.bias' is nan at element 1 before sync 1"
[ ! -e w.safetensors ] || fail "rank 0 saved weights after rank 1's NaN"

echo "2. ranks started with different settings"
timeout 120 mpirun "${MPI_OPTS[@]}" -np 1 "$TRAINER" --data d --steps 20 --lr 0.1 --quiet : \
  -np 1 "$TRAINER" --data d --steps 30 --lr 0.1 --seed 4 --quiet >flags.out 2>flags.err
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "ranks with different flags: exit $rc"
expect flags err "the ranks were started with different settings: --steps, --seed, initial weights"
[ ! -s flags.out ] || fail "ranks with different flags trained"

echo "3. a stopped rank ends the job after --comm-timeout"
mpirun "${MPI_OPTS[@]}" -np 2 "$TRAINER" --data d --steps 100000000 --log-every 1000 --quiet \
  --log run.jsonl --comm-timeout 3 >stopped.out 2>stopped.err &
job=$!
for _ in $(seq 300); do [ -s run.jsonl ] && break; sleep 0.1; done # training has begun
victim=$(pgrep -n -P "$job")
[ -n "$victim" ] && kill -STOP "$victim"
for _ in $(seq 60); do kill -0 "$job" 2>/dev/null || break; sleep 1; done
if kill -0 "$job" 2>/dev/null; then # still running: end what this test started
  fail "the job still runs 60 s after a rank was stopped"
  [ -n "$victim" ] && kill -CONT "$victim" && kill -KILL "$victim"
  kill -KILL "$job"
fi
wait "$job"
rc=$?
[ "$rc" -ne 0 ] || fail "a stopped rank: the job exited 0"
expect stopped err "the all-reduce has waited 3 s for the other ranks (--comm-timeout)"

echo "3b. a --comm-timeout past what the timed wait can represent is refused"
timeout 30 mpirun "${MPI_OPTS[@]}" -np 2 "$TRAINER" --data d --steps 5 --quiet \
  --comm-timeout 1e19 >huge.out 2>huge.err
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "--comm-timeout 1e19: exit $rc"
expect huge err "--comm-timeout: at most 1e+09 seconds"

echo "4. --load-best and --early-stopping on 2 ranks"
timeout 120 mpirun "${MPI_OPTS[@]}" -np 2 "$TRAINER" --data d --steps 40 --lr 0.2 \
  --schedule constant --eval-every-steps 2 --load-best --early-stopping 3 \
  --early-stopping-threshold 0.05 --save-state st4 --save-every 4 --save-total-limit 2 \
  --log best.jsonl --save best.safetensors >best.out 2>best.err
rc=$?
[ "$rc" -eq 0 ] || { fail "--load-best --early-stopping on 2 ranks: exit $rc"; cat best.err >&2; }
expect best err "loaded the best weights: step"
grep -q '"best_step"' best.jsonl || fail "2 ranks: no best_step record in the log"
last=$(sed -n 's/^{"step":\([0-9]*\),"epoch".*"loss".*/\1/p' best.jsonl | tail -n 1)
for r in 0 1; do
  [ -e "st4/state-$last.rank-$r.safetensors" ] || fail "rank $r has no state of the last step $last"
done

finish
