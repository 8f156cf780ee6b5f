#!/usr/bin/env bash
# Fusion changes no float: every example (shrunk, example_cases.sh) and every
# gradcheck model trains 3 steps to bitwise the same weights when built fused
# and with --no-fuse. The trainers are built with trainc's default compiler
# and flags (so an FMA contraction that fusion made possible would show),
# or with $TRAINC_TEST_CFLAGS -O2 under the sanitizers. Gradcheck models
# train on random data drawn for the inputs `--dump=ir` lists. At least one
# value must have been fused somewhere, or the comparison proves nothing.
# usage: fuse.sh TRAINC SOURCE_DIR WORKDIR
set -euo pipefail
trainc=$1 src=$2 work=$3
mkdir -p "$work"
source "$src/tests/e2e/example_cases.sh"
for model in "$src"/tests/e2e/gradcheck/*.nn; do
  name=$(basename "$model" .nn)
  "$trainc" check "$model" --dump=ir | "$PY" -c '
import numpy as np, re, sys
r = np.random.default_rng(3)
for line in sys.stdin:
    m = re.search(r"= input (\w+)(?: \{index < (\d+)\})?.* : (\w+)\[([\d, ]*)\]", line)
    if not m:
        continue
    name, limit, dtype, dims = m.groups()
    shape = (16,) + tuple(int(d) for d in dims.split(", ")[1:])
    if dtype == "f32":
        x = r.standard_normal(shape, dtype=np.float32)
    else:
        x = r.integers(0, int(limit) if limit else 256, size=shape).astype(
            np.int32 if dtype == "i32" else np.uint8)
    np.save(f"{sys.argv[1]}/{name}.npy", x)' "$(mkdir -p "$work/gc_$name" && echo "$work/gc_$name")"
  cases+=("$model=gc_$name")
done

cflags=()
[[ -n ${TRAINC_TEST_CFLAGS:-} ]] && cflags=(--cflags "$TRAINC_TEST_CFLAGS -O2 -fno-math-errno")
fail=0 total=0
for case in "${cases[@]}"; do
  model=${case%=*} data=$work/${case#*=} name=$(basename "${case%=*}" .nn)
  fused=$("$trainc" check "$model" --dump=schedule | grep -c '^  fused ' || true)
  total=$((total + fused))
  for mode in fused plain; do
    flag=() && [[ $mode == plain ]] && flag=(--no-fuse)
    "$trainc" build "$model" "${flag[@]}" -o "$work/$name.$mode" "${cflags[@]}" >/dev/null
    "$work/$name.$mode" --data "$data" --steps 3 --quiet --save "$work/$name.$mode.safetensors"
  done
  if cmp -s "$work/$name.fused.safetensors" "$work/$name.plain.safetensors"; then
    echo "$name: $fused values fused; the same weights fused and unfused"
  else
    echo "FAIL: $name: $fused values fused; different weights fused and unfused"
    fail=1
  fi
done
[[ $total -gt 0 ]] || { echo "FAIL: no value was fused anywhere"; fail=1; }
exit $fail
