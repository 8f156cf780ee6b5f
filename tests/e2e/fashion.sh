#!/usr/bin/env bash
# End to end on real data: build the Fashion-MNIST example, train it briefly,
# and require test accuracy far above chance (0.10); then check that weights
# saved, loaded and saved again are byte-identical, and that a trainer started
# from saved weights evaluates to the same accuracy.
# usage: fashion.sh TRAINC SOURCE_DIR WORKDIR
set -euo pipefail
trainc=$1 src=$2 work=$3
mkdir -p "$work"
"$src/scripts/fetch-fashion-mnist" "$work/data" >/dev/null
"$trainc" build "$src/examples/fashion_mlp.nn" -o "$work/fashion" --cflags "${TRAINC_TEST_CFLAGS:-} -O2 -Wall -Wextra -Werror"
bin=$work/fashion
"$bin" --data "$work/data/train" --eval-data "$work/data/test" --steps 300 --quiet \
  --log "$work/train.jsonl" --save "$work/trained.safetensors"
acc=$(grep eval_accuracy "$work/train.jsonl" | tail -n 1 | sed 's/.*"eval_accuracy": *\([0-9.e+-]*\).*/\1/')
echo "test accuracy after 300 steps: $acc"
awk -v a="$acc" 'BEGIN { exit !(a > 0.75) }' || { echo "FAIL: accuracy $acc is not above 0.75"; exit 1; }

# save -> load -> save gives identical bytes
"$bin" --steps 0 --init "$work/trained.safetensors" --save "$work/again.safetensors" --quiet
cmp "$work/trained.safetensors" "$work/again.safetensors"

# a trainer started from the saved weights evaluates to the same accuracy
"$bin" --steps 0 --init "$work/trained.safetensors" --eval-data "$work/data/test" --quiet --log "$work/eval.jsonl"
acc2=$(grep eval_accuracy "$work/eval.jsonl" | tail -n 1 | sed 's/.*"eval_accuracy": *\([0-9.e+-]*\).*/\1/')
[[ "$acc" == "$acc2" ]] || { echo "FAIL: reloaded weights evaluate to $acc2, trained ones to $acc"; exit 1; }
echo "round trip ok"
