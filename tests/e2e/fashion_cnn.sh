#!/usr/bin/env bash
# The convolutional Fashion-MNIST example, briefly: build examples/fashion_cnn.nn
# (generated C held to -Werror), train 80 steps (the full run, 12 epochs, is
# bench/fashion_cnn.sh), and require the training loss to fall and the test
# accuracy to clear 0.6 (chance is 0.1).
# usage: fashion_cnn.sh TRAINC SOURCE_DIR WORKDIR
set -euo pipefail
trainc=$1 src=$2 work=$3
mkdir -p "$work"
"$src/scripts/fetch-fashion-mnist" "$work/data" >/dev/null
"$trainc" build "$src/examples/fashion_cnn.nn" -o "$work/cnn" --cflags "${TRAINC_TEST_CFLAGS:-} -O2 -Wall -Wextra -Werror"
"$work/cnn" --data "$work/data/train" --eval-data "$work/data/test" --steps 80 --log-every 10 --quiet \
  --log "$work/train.jsonl"
losses=$(sed -n 's/.*"loss":\([0-9.e+-]*\).*/\1/p' "$work/train.jsonl")
first=$(echo "$losses" | head -n 1) last=$(echo "$losses" | tail -n 1)
acc=$(sed -n 's/.*"eval_accuracy":\([0-9.e+-]*\).*/\1/p' "$work/train.jsonl" | tail -n 1)
echo "loss at step 10: $first, at step 80: $last; test accuracy: $acc"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.7 * a) }' || { echo "FAIL: the loss did not fall"; exit 1; }
awk -v a="$acc" 'BEGIN { exit !(a > 0.6) }' || { echo "FAIL: accuracy $acc is not above 0.6"; exit 1; }
