#!/usr/bin/env bash
# Threads change nothing: every example trains to bitwise the same weights on
# --threads 1 and --threads 2. The trainers are built with
# -DTRC_PARALLEL_MIN_WORK=0, so that every loop the IR proved parallel
# (kernel_mark_parallel) runs on the threads whatever its size (runtime/
# trainc.h), the GEMMs and convolutions run on oneDNN, and clipping's norm
# and the optimizer on the runtime's. The large examples are shrunk
# (example_cases.sh); 3 steps each.
# On one thread the steps after the first take no page fault (docs/
# trainer.md, *Memory and speed*: the arena and optimizer state are touched
# before step 1; the first step's GEMMs set up oneDNN's kernels). On two,
# a step now and then took a few (12 in one of 8 deep_mlp steps): not
# checked, the cause not established.
# usage: threads.sh TRAINC SOURCE_DIR WORKDIR
set -euo pipefail
trainc=$1 src=$2 work=$3
mkdir -p "$work"
source "$src/tests/e2e/example_cases.sh"

fail=0
for case in "${cases[@]}"; do
  model=${case%=*} data=$work/${case#*=} name=$(basename "${case%=*}" .nn)
  "$trainc" build "$model" -o "$work/$name" --keep-c "$work/$name.c" --cflags \
    "${TRAINC_TEST_CFLAGS:-} -O2 -fno-math-errno -DTRC_PARALLEL_MIN_WORK=0 -Wall -Wextra -Werror" \
    >/dev/null
  loops=$(grep -c 'trc_kernel_loop(' "$work/$name.c")
  for threads in 1 2; do
    "$work/$name" --data "$data" --steps 3 --quiet --threads $threads \
      --save "$work/$name.$threads.safetensors" --log "$work/$name.$threads.jsonl" --log-every 1
  done
  faults=$("$PY" -c '
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
print(sum(r.get("page_faults", 0) for r in records if r.get("step", 0) > 1))' "$work/$name.1.jsonl")
  if [[ $faults != 0 && ${TRAINC_TEST_CFLAGS:-} != *sanitize* ]]; then # ASan maps shadow pages
    echo "FAIL: $name: $faults page faults in steps 2 and 3"
    fail=1
  fi
  if cmp -s "$work/$name.1.safetensors" "$work/$name.2.safetensors"; then
    echo "$name: $loops parallel loops; the same weights on 1 and 2 threads"
  else
    echo "FAIL: $name: different weights on 1 and 2 threads"
    fail=1
  fi
done
exit $fail
