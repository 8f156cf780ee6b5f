#!/usr/bin/env bash
# Threads change nothing: every example trains to bitwise the same weights on
# --threads 1 and --threads 2. The trainers are built with
# -DTRC_PARALLEL_MIN_WORK=0, so that every loop the IR proved parallel
# (kernel_mark_parallel) runs on the threads whatever its size (runtime/
# trainc.h), the GEMMs run on OpenBLAS's OpenMP threads, and clipping's norm
# and the optimizer on the runtime's. The large examples are shrunk by sed
# (fewer layers, narrower, smaller batches: the same ops); 3 steps each.
# On one thread the steps after the first take no page fault (docs/
# trainer.md, *Memory and speed*: the arena and optimizer state are touched
# before step 1; the first step's GEMMs set up OpenBLAS's buffers). On two,
# a step now and then took a few (12 in one of 8 deep_mlp steps): not
# checked, the cause not established.
# usage: threads.sh TRAINC SOURCE_DIR WORKDIR
set -euo pipefail
trainc=$1 src=$2 work=$3
mkdir -p "$work"
PY=/usr/bin/python3
"$src/scripts/fetch-fashion-mnist" "$work/fashion" >/dev/null
[[ -d $work/kjv ]] || "$src/scripts/fetch-kjv" "$work/kjv" 32 >/dev/null
[[ -d $work/pairs ]] || "$PY" "$src/scripts/make-pair-data" "$work/pairs" >/dev/null
[[ -d $work/random ]] || { mkdir -p "$work/random" && "$PY" -c '
import numpy as np, sys
r = np.random.default_rng(7)
np.save(sys.argv[1] + "/x.npy", r.standard_normal((256, 1024), dtype=np.float32))
np.save(sys.argv[1] + "/label.npy", r.integers(0, 10, size=256, dtype=np.int32))' "$work/random"; }

ex=$src/examples
sed -e 's/^const T = 64 /const T = 32 /' -e 's/^const D = 128 /const D = 48 /' \
  -e 's/^const LAYERS = 4$/const LAYERS = 2/' -e 's/^  batch 32$/  batch 8/' \
  "$ex/gpt.nn" >"$work/gpt.nn"
sed -e 's/^const T = 64$/const T = 32/' -e 's/^const D = 768$/const D = 96/' \
  -e 's/^const LAYERS = 12$/const LAYERS = 2/' "$ex/gpt124m.nn" >"$work/gpt124m.nn"
sed -e 's/repeat 32 layer/repeat 3 layer/' -e 's/^  batch 512$/  batch 64/' \
  "$ex/deep_mlp.nn" >"$work/deep_mlp.nn"
for shrunk in gpt gpt124m deep_mlp; do
  [[ $(diff "$ex/$shrunk.nn" "$work/$shrunk.nn" | grep -c '^>') -ge 2 ]] ||
    { echo "FAIL: examples/$shrunk.nn no longer has the lines this test shrinks"; exit 1; }
done

fail=0
for case in "$ex/fashion_mlp.nn=fashion/train" "$ex/fashion_cnn.nn=fashion/train" \
  "$ex/pair_classifier.nn=pairs/train" "$work/gpt.nn=kjv/train" "$work/gpt124m.nn=kjv/train" \
  "$work/deep_mlp.nn=random"; do
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
