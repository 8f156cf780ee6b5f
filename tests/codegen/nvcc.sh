#!/usr/bin/env bash
# Every model's CUDA trainer compiles with nvcc for sm_90, every warning an
# error, and links against cuBLAS; with no GPU or driver here, a built
# trainer says so and exits with status 1 (docs/cuda.md). One test, the
# models in sequence: nvcc is slow on two cores.
# usage: nvcc.sh TRAINC WORKDIR MODEL.nn...
set -euo pipefail
trainc=$1 work=$2
shift 2
mkdir -p "$work"
fail=0
for model in "$@"; do
  name=$(basename "$model" .nn)
  if ! "$trainc" build "$model" --backend cuda --cflags "-O3 -arch=sm_90 -Werror all-warnings" \
    -o "$work/$name" --keep-c "$work/$name.cu" >"$work/$name.log" 2>&1; then
    cat "$work/$name.log"
    echo "FAIL: $name: nvcc"
    fail=1
    continue
  fi
  echo "$name: compiled with nvcc -arch=sm_90 -Werror all-warnings"
done
# No GPU here: the first trainer that built must refuse to run, clearly.
first=$(basename "$1" .nn)
if [[ -x $work/$first ]]; then
  rc=0
  "$work/$first" --gradcheck >"$work/nogpu.out" 2>&1 || rc=$?
  if nvidia-smi >/dev/null 2>&1; then
    echo "a GPU is present: the no-GPU message is not tested"
  elif [[ $rc != 1 ]] || ! grep -q "^trainer: error: no usable GPU: cudaGetDeviceCount failed: " "$work/nogpu.out"; then
    echo "FAIL: without a GPU the trainer exited with $rc:"
    cat "$work/nogpu.out"
    fail=1
  else
    echo "without a GPU: exit 1, $(cat "$work/nogpu.out")"
  fi
fi
exit $fail
