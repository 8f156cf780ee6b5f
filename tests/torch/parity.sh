#!/usr/bin/env bash
# PyTorch parity of one model: builds MODEL.nn, saves its seeded initial
# weights, makes one batch of random data, and checks with parity.py (the
# model written again in PyTorch, models.py: TORCH_MODEL) that
#   1. one step's loss, predictions and every gradient (--dump-step) agree;
#   2. the comparison flags one gradient off by 1e-3, one missing, and
#      PyTorch running on other weights (noise of 1e-2 of its norm added to
#      the last weight matrix, the head): so 1 can fail (parity.py step);
#   3. with `train` given: 10 optimizer steps (the train block's optimizer and
#      schedule) give the same loss at every step and the same weights.
# TRAINC_TEST_BACKEND=run: the trainer is `trainc run` (LLVM's JIT).
# TRAINC_TEST_COMPRESS=bf16: the trainer stores activations in bf16
# (`--compress bf16`), PyTorch rounds what it saves alike (parity.py).
# TRAINC_TEST_ATTENTION=fused|whole: the trainer's --attention (default auto).
# TRAINC_TEST_PYTHON: the Python with torch (default Debian's python3,
# skipped (77) when it has no torch). An hf_ TORCH_MODEL (hf_models.py) runs
# in the reference environment of scripts/install-peers: skipped only where
# that Python does not exist; a missing package there is a failure.
# usage: parity.sh TRAINC MODEL.nn TORCH_MODEL WORKDIR [train]
set -euo pipefail
trainc=$1 model=$2 torch_model=$3 work=$4 train=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
py=${TRAINC_TEST_PYTHON:-/usr/bin/python3}
if [[ $torch_model == hf_* ]]; then
  [[ -x $py ]] || { echo "SKIP: no $py (scripts/install-peers makes it)"; exit 77; }
  $py -c 'import torch, numpy, transformers' || { echo "FAIL: $py lacks a package"; exit 1; }
else
  $py -c 'import torch, numpy' 2>/dev/null || { echo "no torch in $py: skipped"; exit 77; }
fi
parity() { $py "$here/parity.py" "$@"; }
rm -rf "$work" && mkdir -p "$work"
flags=(--compress "${TRAINC_TEST_COMPRESS:-none}" --attention "${TRAINC_TEST_ATTENTION:-auto}")
export PARITY_SAVED=${TRAINC_TEST_COMPRESS:-f32}
trainer=("$trainc" run "${flags[@]}" "$model")
if [[ ${TRAINC_TEST_BACKEND:-c} != run ]]; then
  "$trainc" build "$model" "${flags[@]}" -o "$work/trainer" --cflags "${TRAINC_TEST_CFLAGS:-} -O2 -Wall -Wextra -Werror" >/dev/null
  trainer=("$work/trainer")
fi
run_trainer() { "${trainer[@]}" "$@"; }
run_trainer --help >"$work/help.txt"
batch=$(sed -n 's/.*; B = \([0-9]*\)).*/\1/p' "$work/help.txt")
run_trainer --steps 0 --save "$work/w0.safetensors" --quiet
parity data "$torch_model" "$work/w0.safetensors" "$work/data" "$batch" 1

# 1. one step, and 2. the negative checks
run_trainer --init "$work/w0.safetensors" --data "$work/data" --dump-step "$work/step.safetensors"
parity step "$torch_model" "$work/w0.safetensors" "$work/step.safetensors" "$work/data"

# 3. optimizer steps; the data is one batch, so every step sees the same examples
[[ "$train" == train ]] || exit 0
run_trainer --init "$work/w0.safetensors" --data "$work/data" --steps 10 --log "$work/train.jsonl" --log-every 1 \
  --save "$work/final.safetensors" --quiet
parity train "$torch_model" "$work/help.txt" "$work/w0.safetensors" "$work/final.safetensors" \
  "$work/train.jsonl" "$work/data"
