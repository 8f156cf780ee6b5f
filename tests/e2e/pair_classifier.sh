#!/usr/bin/env bash
# The sentence-pair example trains: on scripts/make-pair-data's synthetic
# paraphrase task (chance 0.50; the best threshold on word overlap reaches
# about 0.58), the classifier trained for 2 epochs (625 steps, a larger lr
# than the example's 4 epochs) must reach eval_accuracy and eval_f1 of at
# least 0.90 on held-out pairs.
# usage: pair_classifier.sh TRAINC SOURCE_DIR WORKDIR
set -euo pipefail
trainc=$1 src=$2 work=$3
mkdir -p "$work"
"$src/scripts/make-pair-data" "$work/data" --train 20000 --test 2000 --seed 2 >/dev/null
"$trainc" build "$src/examples/pair_classifier.nn" -o "$work/pairs" --cflags "${TRAINC_TEST_CFLAGS:-} -O2 -Wall -Wextra -Werror" >/dev/null
"$work/pairs" --data "$work/data/train" --eval-data "$work/data/test" --epochs 2 --lr 2e-2 --quiet \
  --log "$work/train.jsonl" | tail -n 1
last=$(grep eval_accuracy "$work/train.jsonl" | tail -n 1)
metric() { sed "s/.*\"$1\": *\([0-9.e+-]*\).*/\1/" <<<"$last"; }
acc=$(metric eval_accuracy) f1=$(metric eval_f1)
awk -v a="$acc" -v f="$f1" 'BEGIN { exit !(a >= 0.90 && f >= 0.90) }' ||
  { echo "FAIL: eval_accuracy $acc, eval_f1 $f1: not both >= 0.90"; exit 1; }
echo "ok: eval_accuracy $acc, eval_f1 $f1"
