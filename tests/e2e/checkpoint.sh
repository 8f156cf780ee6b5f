#!/usr/bin/env bash
# The checkpoint planner keeps its two promises, checked on real training:
#  - every policy trains to bitwise the same weights as `checkpoint off`
#    (recomputation runs the same kernels on the same values);
#  - the trainer's measured arena high-water mark equals the planned peak.
# Policies: off, all, sqrt, every 2, a budget halfway between the least
# peak (all) and off's, and one a tenth of that range under off's (SELECT
# stages: selective recomputation; the GPT keeps values back one by one at the
# midway one). An impossible budget is an error naming the
# smallest feasible one. Models with dropout (the CNN, the GPT) check that
# recomputed dropout regenerates its masks.
# usage: checkpoint.sh TRAINC SOURCE_DIR WORKDIR MODEL.nn=DATA...
#   DATA: fashion (Fashion-MNIST), kjv (scripts/fetch-kjv, T = 32), pairs
#   (scripts/make-pair-data), random (tests/e2e/random_data.py: random rows);
#   gpt-small builds examples/gpt.nn at the size of tests/e2e/gpt.sh (dropout
#   kept).
# TRAINC_TEST_BACKEND=run: the trainers are `trainc run` (LLVM's JIT).
set -euo pipefail
trainc=$1 src=$2 work=$3
shift 3
mkdir -p "$work"
PY=/usr/bin/python3
fail=0

source "$src/tests/e2e/run_data.sh"

total_peak() { "$trainc" plan "$1" --policy "$2" --format json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["peak"]["total"])'; }

for arg in "$@"; do
  model=${arg%=*} data=$(data_dir "${arg#*=}" "${arg%=*}")
  if [[ $model == gpt-small ]]; then
    sed -e 's/^const T = 64 /const T = 32 /' -e 's/^const D = 128 /const D = 48 /' \
      -e 's/^const LAYERS = 4$/const LAYERS = 2/' -e 's/^  batch 32$/  batch 8/' "$src/examples/gpt.nn" >"$work/gpt_small.nn"
    model=$work/gpt_small.nn
  fi
  name=$(basename "$model" .nn)
  lo=$(total_peak "$model" all) hi=$(total_peak "$model" off)
  # and one just under off's peak, where stages are SELECT: selective
  # recomputation of their cheap values (the gpt-small must have some)
  policies=(off all sqrt "every 2" "budget $(((lo + hi) / 2))" "budget $((hi - (hi - lo) / 10))")
  if [[ $name == gpt_small && $("$trainc" plan "$model" --policy "${policies[5]}") != *"RECOMPUTE (selective)"* ]]; then
    echo "FAIL: $name: no selective recomputation at ${policies[5]}"
    fail=1
  fi
  # and for the gpt-small a budget between all's and off's peaks (midway,
  # else the first of the eighths) that keeps values back one by one (the
  # per-value step), so that those plans too are checked below
  if [[ $name == gpt_small ]]; then
    kept=
    for eighth in 4 1 2 3 5 6 7; do
      budget="budget $((lo + (hi - lo) * eighth / 8))"
      if [[ $("$trainc" plan "$model" --policy "$budget") == *"(kept back: spares"* ]]; then
        kept=$budget
        break
      fi
    done
    if [[ -z $kept ]]; then
      echo "FAIL: $name: no value kept back at any eighth between all's and off's peaks"
      fail=1
    else
      policies[4]=$kept
    fi
  fi
  for policy in "${policies[@]}"; do
    tag=${policy// /_}
    bin=$work/${name}_$tag
    trainer=("$trainc" run --policy "$policy" "$model")
    if [[ ${TRAINC_TEST_BACKEND:-c} != run ]]; then
      "$trainc" build "$model" --policy "$policy" -o "$bin" --cflags "${TRAINC_TEST_CFLAGS:-} -O2 -Wall -Wextra -Werror" >/dev/null
      trainer=("$bin")
    fi
    "${trainer[@]}" --data "$data" --steps 6 --quiet --save "$bin.safetensors" --log "$bin.jsonl"
    if ! cmp -s "$work/${name}_off.safetensors" "$bin.safetensors"; then
      echo "FAIL: $name: policy '$policy' trains to different weights than off"
      fail=1
    fi
    read -r planned measured < <(arena_of "$bin.jsonl")
    if [[ "$planned" != "$measured" ]]; then
      echo "FAIL: $name: policy '$policy' planned $planned bytes, measured high-water mark $measured"
      fail=1
    fi
    echo "$name, checkpoint $policy: weights as off, arena planned = measured = $planned bytes"
  done
  # An impossible budget names the smallest feasible one.
  if "$trainc" plan "$model" --budget 1KiB >"$work/impossible.out" 2>&1; then
    echo "FAIL: $name: a 1 KiB budget was accepted"
    fail=1
  fi
  grep -q "error: budget 1.0 KiB (1024 bytes) is below the smallest peak trainc can plan for this model: .* ([0-9]* bytes)" "$work/impossible.out" ||
    { echo "FAIL: $name: unexpected message for an impossible budget:"; cat "$work/impossible.out"; fail=1; }
done
exit $fail
