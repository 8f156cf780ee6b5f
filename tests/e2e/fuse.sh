#!/usr/bin/env bash
# Fusion changes no float: every example (shrunk, example_cases.sh) and every
# gradcheck model trains 3 steps to bitwise the same weights when built fused
# and with --no-fuse with scalar math (trainc's default compiler and flags,
# the vectorizer off: libm's expf, tanhf, ... everywhere; so an FMA
# contraction that fusion made possible would show); with the default flags,
# where the compiler picks which elements go through libmvec's vector
# functions (within 4 ulp of libm's, not bitwise; a fused loop nest is
# vectorized differently), one step's loss, prediction and gradients
# (--dump-step) agree to within 1e-6 of the largest of each (the gradients:
# of the largest gradient). Not the weights after 3 steps: AdamW turns a
# gradient that is zero but for rounding (an attention key's bias) into
# steps of lr, whichever rounding it is, so those weights differ by lr
# where libmvec's rounding differs (it did, on an AMD machine). Under the
# sanitizers: $TRAINC_TEST_CFLAGS -O2, bitwise only. Gradcheck models train
# on random data drawn for the inputs `--dump=ir` lists. At least one value
# must have been fused somewhere, or the comparison proves nothing.
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

default_flags=$("$trainc" --help | sed -n 's/^ *--cflags FLAGS .*(default: \(.*\))$/\1/p')
builds=(scalar default) # scalar: bitwise; default: bounded
scalar_flags=(--cflags "$default_flags -fno-tree-vectorize -fno-tree-slp-vectorize")
if [[ -n ${TRAINC_TEST_CFLAGS:-} ]]; then
  builds=(scalar) scalar_flags=(--cflags "$TRAINC_TEST_CFLAGS -O2 -fno-math-errno")
fi

# within_bound A B: the dumps A and B differ by at most 1e-6 of the largest
# value of each tensor (of every gradient, for the gradients).
within_bound() {
  "$PY" - "$1" "$2" <<'PY'
import json, struct, sys
import numpy as np
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    return {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]],
                             dtype=np.float32) for k, v in head.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
grads = max(float(np.abs(v).max()) for k, v in a.items() if k.startswith("grad."))
scale = {k: grads if k.startswith("grad.") else float(np.abs(v).max()) for k, v in a.items()}
worst = max(float(np.abs(a[k] - b[k]).max() / max(scale[k], 1e-30)) for k in a)
print(f"{worst:.1e}")
sys.exit(0 if worst <= 1e-6 and a.keys() == b.keys() else 1)
PY
}

fail=0 total=0
for case in "${cases[@]}"; do
  model=${case%=*} data=$work/${case#*=} name=$(basename "${case%=*}" .nn)
  fused=$("$trainc" check "$model" --dump=schedule | grep -c '^  fused ' || true)
  pooled=$("$trainc" check "$model" --dump=pool | grep -c ' = maxpool_grad .*relu}' || true) # the pool pass's
  total=$((total + fused + pooled))
  fused="$fused values and $pooled relu gradients"
  for build in "${builds[@]}"; do
    flags=() && [[ $build == scalar ]] && flags=("${scalar_flags[@]}")
    for mode in fused plain; do
      flag=() && [[ $mode == plain ]] && flag=(--no-fuse)
      "$trainc" build "$model" "${flag[@]}" -o "$work/$name.$mode" "${flags[@]}" >/dev/null
      if [[ $build == scalar ]]; then
        "$work/$name.$mode" --data "$data" --steps 3 --quiet --save "$work/$name.$mode.$build"
      else
        "$work/$name.$mode" --data "$data" --quiet --dump-step "$work/$name.$mode.$build"
      fi
    done
  done
  if ! cmp -s "$work/$name.fused.scalar" "$work/$name.plain.scalar"; then
    echo "FAIL: $name: $fused fused; different weights fused and unfused (scalar math)"
    fail=1
  elif [[ ${builds[*]} != *default* ]] || cmp -s "$work/$name.fused.default" "$work/$name.plain.default"; then
    echo "$name: $fused fused; the same weights fused and unfused"
  elif diff=$(within_bound "$work/$name.fused.default" "$work/$name.plain.default"); then
    echo "$name: $fused fused; the same weights with scalar math, one step within $diff with libmvec"
  else
    echo "FAIL: $name: fused and unfused steps differ by $diff of the largest with libmvec"
    fail=1
  fi
done
[[ $total -gt 0 ]] || { echo "FAIL: no value was fused anywhere"; fail=1; }
exit $fail
