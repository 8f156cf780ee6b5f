#!/usr/bin/env bash
# Trains every example (and the gradient-check models' checks) for a few
# steps with a fixed seed and prints one SHA-256 per result: run it with two
# trainc builds and diff the outputs to show that a change of the compiler
# leaves the generated trainers' arithmetic bit for bit as it was.
# usage: bench/weights-fingerprint.sh TRAINC WORKDIR [STEPS]
# FINGERPRINT_CFLAGS=FLAGS builds the trainers with --cflags FLAGS (e.g. the
# default flags and -fno-tree-vectorize -fno-tree-slp-vectorize: libm's
# scalar math everywhere, so that which loops GCC vectorizes, and hence
# where libmvec replaces libm, cannot differ between the two builds).
set -euo pipefail
trainc=$(realpath "$1") work=$2 steps=${3:-4}
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$work"
work=$(realpath "$work")
PY=/usr/bin/python3
"$src/scripts/fetch-fashion-mnist" "$work/fashion" >/dev/null
[[ -d $work/kjv ]] || "$src/scripts/fetch-kjv" "$work/kjv" 64 >/dev/null
[[ -d $work/pairs ]] || "$PY" "$src/scripts/make-pair-data" "$work/pairs" >/dev/null
if [[ ! -d $work/tokens ]]; then # GPT-2 ids for gpt124m: random, fixed
  mkdir -p "$work/tokens"
  "$PY" -c '
import numpy as np, sys
r = np.random.default_rng(7)
t = r.integers(0, 50257, size=(16, 65), dtype=np.int32)
np.save(sys.argv[1] + "/tokens.npy", t[:, :64]); np.save(sys.argv[1] + "/targets.npy", t[:, 1:])' "$work/tokens"
fi
if [[ ! -d $work/random ]]; then # deep_mlp: random rows, fixed
  mkdir -p "$work/random"
  "$PY" -c '
import numpy as np, sys
r = np.random.default_rng(7)
np.save(sys.argv[1] + "/x.npy", r.standard_normal((1024, 1024), dtype=np.float32))
np.save(sys.argv[1] + "/label.npy", r.integers(0, 10, size=1024, dtype=np.int32))' "$work/random"
fi

cflags=()
[[ -n ${FINGERPRINT_CFLAGS:-} ]] && cflags=(--cflags "$FINGERPRINT_CFLAGS")

train() { # model data [trainer flags...]: weights after $steps steps
  local model=$1 data=$2 name
  shift 2
  name=$(basename "$model" .nn)
  "$trainc" build "$model" -o "$work/$name" "${cflags[@]}" "$@" >/dev/null
  "$work/$name" --data "$data" --steps "$steps" --seed 3 --quiet --save "$work/$name.safetensors"
  echo "$(sha256sum <"$work/$name.safetensors" | cut -c1-16)  $name"
}

train "$src/examples/fashion_mlp.nn" "$work/fashion/train"
train "$src/examples/fashion_cnn.nn" "$work/fashion/train"
train "$src/examples/deep_mlp.nn" "$work/random"
train "$src/examples/pair_classifier.nn" "$work/pairs/train"
train "$src/examples/gpt.nn" "$work/kjv/train"
train "$src/examples/gpt124m.nn" "$work/tokens"
for policy in all sqrt "every 2"; do
  "$trainc" build "$src/examples/gpt.nn" --policy "$policy" -o "$work/gpt_ckpt" "${cflags[@]}" \
    >/dev/null
  "$work/gpt_ckpt" --data "$work/kjv/train" --steps "$steps" --seed 3 --quiet --save "$work/gpt_ckpt.safetensors"
  echo "$(sha256sum <"$work/gpt_ckpt.safetensors" | cut -c1-16)  gpt checkpoint $policy"
done
"$trainc" build "$src/examples/fashion_localsgd.nn" -o "$work/localsgd" "${cflags[@]}" >/dev/null
mpirun --allow-run-as-root --oversubscribe -np 2 "$work/localsgd" --data "$work/fashion/train" \
  --steps 20 --seed 3 --quiet --save "$work/localsgd.safetensors"
echo "$(sha256sum <"$work/localsgd.safetensors" | cut -c1-16)  fashion_localsgd (2 ranks, 20 steps)"
for model in "$src"/tests/e2e/gradcheck/*.nn; do
  name=$(basename "$model" .nn)
  "$trainc" build "$model" -o "$work/gc_$name" "${cflags[@]}" >/dev/null
  "$work/gc_$name" --gradcheck --seed 3 >"$work/gc_$name.txt" || true
  echo "$(sha256sum <"$work/gc_$name.txt" | cut -c1-16)  gradcheck $name"
done
