#!/usr/bin/env bash
# half_weights.sh TRAINER MAKE_DATA — --init from F16, BF16 and mixed
# .safetensors (written by NumPy, half_weights.py) loads the exact f32 value
# of every element (checked through --save, which writes F32); other dtypes
# are refused by name.
NAME=half_weights
HERE=$(dirname "$(readlink -f "$0")")
. "$HERE/harness.sh" "$1" "$2" 64
"$TRAINER" --data d --steps 2 --quiet --save w0.safetensors >/dev/null || exit 1
"$PY" "$HERE/half_weights.py" write w0.safetensors w || exit 1
for kind in f16 bf16 mixed; do
  run "load_$kind" 0 "$TRAINER" --steps 0 --quiet --init "w_$kind.safetensors" \
    --save "out_$kind.safetensors"
  "$PY" "$HERE/half_weights.py" check "out_$kind.safetensors" "w_$kind.safetensors" ||
    fail "$kind: weights changed on loading"
done
run load_f64 1 "$TRAINER" --steps 0 --quiet --init w_f64.safetensors
expect load_f64 err "'fc1.weight' is F64, expected F32, BF16 or F16"
finish
