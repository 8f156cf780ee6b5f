#!/usr/bin/env bash
# Resumable state (docs/trainer.md, Resuming): a trainer killed with SIGKILL at
# random points (during steps and during saves) and resumed each time with
# --resume ends with weights bitwise equal to an uninterrupted run's; leftover
# temp files of interrupted saves are ignored; a damaged state file or one
# saved by a different run is refused, never half-used. With mpirun: the same
# on 2 ranks with LocalSGD, an outer optimizer and a rank killed.
# usage: resume.sh TRAINC SOURCE_DIR WORKDIR
set -euo pipefail
trainc=$1 src=$2 work=$3
. "$src/tests/e2e/schedule/preamble.sh" train

# model NAME TRAIN_SETTINGS... (one per argument)
model() {
  local name=$1
  shift
  {
    printf 'model res {\n  input x : f32[B, 8]\n  input y : i32[B]\n  h = relu(linear(x, 256))\n'
    printf '  logits = linear(h, 4)\n  loss = cross_entropy(logits, y)\n  predict logits\n}\n'
    printf 'train {\n  batch 16\n  accumulate 3\n  optimizer adamw(lr = 3e-3)\n'
    printf '  schedule cosine(warmup = 10)\n  clip 1.0\n  eval every epoch\n  validation 0.2\n'
    printf '  %s\n' "$@"
    printf '}\n'
  } >"$name.nn"
  "$trainc" build "$name.nn" -o "$name" --cflags "${TRAINC_TEST_CFLAGS:-} -O2" >/dev/null
}

# newest_step DIR RANK: the newest complete state of that rank, -1 if none
newest_step() {
  local best=-1 f s
  for f in "$1"/state-*.rank-"$2".safetensors; do
    [ -e "$f" ] || continue
    s=${f##*/state-}
    s=${s%%.*}
    [ "$s" -gt "$best" ] && best=$s
  done
  echo "$best"
}

# saved_by_all DIR RANKS: whether every rank has a complete state in DIR (a
# kill during the first save can leave one rank's and not the other's: then
# there is nothing to resume, and --resume says so)
saved_by_all() {
  local r
  for r in $(seq 0 $(($2 - 1))); do [ "$(newest_step "$1" "$r")" -ge 0 ] || return 1; done
}

# interrupted TOTAL DIR RANKS LAUNCH... : runs the command until it exits 0,
# each time killing it (SIGKILL to the newest process of its tree, i.e. the
# trainer or one rank) once the state folder has passed a random step, then
# resuming.
interrupted() {
  local kills=0 total=$1 dir=$2 ranks=$3
  shift 3
  for _ in $(seq 20); do
    local resume=()
    saved_by_all "$dir" "$ranks" && resume=(--resume "$dir")
    local target=$(($(newest_step "$dir" 0) + 1 + RANDOM % (total / 3)))
    "$@" "${resume[@]}" >/dev/null 2>>interrupted.err &
    local job=$! victim
    while kill -0 "$job" 2>/dev/null && [ "$(newest_step "$dir" 0)" -lt "$target" ]; do sleep 0.01; done
    victim=$(pgrep -n -P "$job" || true)
    victim=$( [ -n "$victim" ] && pgrep -n -P "$victim" || echo "$victim")
    kill -9 "${victim:-$job}" 2>/dev/null || true
    if wait "$job"; then
      echo "   finished after $kills kills"
      return 0
    fi
    kills=$((kills + 1))
  done
  fail "did not finish after 20 attempts"
}

$PY "$tools" data train 1000 4

echo "1. one process, killed at random points"
model one "epochs 12"
./one --data train --save full.safetensors --quiet >/dev/null
total=204 # 12 epochs x ceil(50 / 3) windows: 800 training rows (validation 0.2) / batch 16
interrupted "$total" st 1 ./one --data train --save-state st --save-every 1 --save resumed.safetensors --quiet
cmp full.safetensors resumed.safetensors || fail "resumed weights differ from the uninterrupted run's"
temps=$(find st -name '.*tmp-*' | wc -l)
echo "   bitwise equal; $temps temp files of interrupted saves were left and ignored"

echo "2. a damaged or foreign state is refused"
rm -rf st2 && ./one --data train --steps 20 --save-state st2 --save-every 5 --quiet >/dev/null
: >st2/.state-25.rank-0.safetensors.tmp-XXXXXX # an interrupted save's leftover
newest=st2/state-20.rank-0.safetensors
head -c 1000 "$newest" >cut && mv cut "$newest"
if ./one --data train --steps 20 --resume st2 --quiet 2>damaged.err; then fail "a truncated state was accepted"; fi
grep -q "state-20.rank-0.safetensors: error:" damaged.err || { cat damaged.err; fail "no clear message for a truncated state"; }
rm -rf st3 && ./one --data train --steps 20 --save-state st3 --save-every 5 --quiet >/dev/null
if ./one --data train --steps 20 --seed 9 --resume st3 --quiet 2>foreign.err; then fail "a state of another seed was accepted"; fi
grep -q "saved by a different run" foreign.err || { cat foreign.err; fail "no clear message for a foreign state"; }
if ./one --data train --resume empty-folder --quiet 2>none.err; then fail "--resume of a missing folder succeeded"; fi

if command -v mpirun >/dev/null; then
  echo "3. two ranks (LocalSGD, outer optimizer), a rank killed at random points"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0
  MPIRUN=(mpirun --oversubscribe -np 2 --mca btl self,vader --mca btl_vader_single_copy_mechanism none
          --mca mpi_yield_when_idle 1)
  model two "steps 90" "local_sgd 4" "outer_optimizer nesterov(lr = 0.7, momentum = 0.9)"
  "${MPIRUN[@]}" ./two --data train --save full2.safetensors --quiet >/dev/null
  interrupted 90 stm 2 "${MPIRUN[@]}" ./two --data train --save-state stm --save-every 1 --save resumed2.safetensors --quiet
  cmp full2.safetensors resumed2.safetensors || fail "resumed 2-rank weights differ from the uninterrupted run's"
  echo "   bitwise equal"
else
  echo "3. skipped: mpirun is not installed"
fi
echo ok
