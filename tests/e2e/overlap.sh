#!/usr/bin/env bash
# Gradient all-reduce overlapped with backward (docs/trainer.md, Distributed
# training): with gradients averaged, each bucket's all-reduce starts in the
# last backward as soon as the bucket is final. With two ranks every element
# is one sum a + b in either order, so overlapped and whole-region all-reduces
# must give the very same weights, bit for bit:
#  1. `sync gradients`, accumulate 2 (buckets only in the window's last
#     backward), a residual MLP with layernorm, buckets of 64 bytes (about
#     one per parameter: many points inside backward);
#  2. LocalSGD's warm-up steps (they average gradients), then local rounds;
#  3. the same with the default bucket size, and the sync counters logged
#     are the same with and without overlap;
#  4. `sync gradients` with the chunked loss head (logits = r2 @ w): w's
#     gradient is made in forward(), so its bucket starts at the top of the
#     window's last backward.
# usage: overlap.sh TRAINC SOURCE_DIR WORKDIR
set -euo pipefail
trainc=$1 src=$2 work=$3
. "$src/tests/e2e/schedule/preamble.sh" train
. "$src/tests/e2e/schedule/mpi.sh"

# model NAME BUCKET TRAIN_SETTINGS... (one per argument); HEAD=1: the output
# layer a bias-free x @ w, which becomes the chunked loss head
model() {
  local name=$1 bucket=$2 logits='linear(r2, 4)'
  shift 2
  [[ ${HEAD:-0} == 1 ]] && logits='r2 @ w'
  {
    printf 'model ov {\n  input x : f32[B, 8]\n  input y : i32[B]\n  h = relu(linear(x, 32))\n'
    [[ ${HEAD:-0} == 1 ]] && printf '  param w : f32[32, 4] = normal(0, 0.1)\n'
    printf '  r = h + relu(linear(layernorm(h), 32))\n  r2 = r + relu(linear(layernorm(r), 32))\n'
    printf '  logits = %s\n  loss = cross_entropy(logits, y)\n  predict logits\n}\n' "$logits"
    printf 'train {\n  batch 8\n  optimizer adamw(lr = 0.01)\n  clip 1\n  seed 3\n  log_every 1\n'
    printf '  %s\n' "$@"
    printf '}\n'
  } >"$name.nn"
  # -v shows the compiler command on stderr (kept to rebuild an edited copy)
  "$trainc" build -v "$name.nn" -o "$name" --bucket "$bucket" --keep-c "$name.c" \
    --cflags "${TRAINC_TEST_CFLAGS:-} -O2" >/dev/null 2>"$name.cc"
}

$PY "$tools" data train 256 1

# run NAME TAG [FLAGS...]: 2 ranks, 10 steps, weights in NAME.TAG.safetensors
run() {
  local name=$1 tag=$2
  shift 2
  "${MPIRUN[@]}" ./"$name" --data train --steps 10 --quiet --save "$name.$tag.safetensors" \
    --log "$name.$tag.jsonl" "$@"
}

model dp 64 "sync gradients" "accumulate 2"
model warm 64 "local_sgd 4" "local_sgd_warmup 3"
model dp_default 1MiB "sync gradients" "accumulate 2"
HEAD=1 model dp_head 64 "sync gradients" "accumulate 2"
grep -q trc_linear_cross_entropy dp_head.c || fail "dp_head.c has no chunked loss head"
buckets=$(grep -c 'trc_step_bucket_ready(s' dp.c)
[ "$buckets" -ge 8 ] || fail "expected a bucket per parameter or so, dp.c has $buckets"
echo "dp.c: $buckets buckets started inside backward"
for m in dp warm dp_default dp_head; do
  run $m overlap
  run $m whole --no-overlap
  $PY "$tools" same $m.overlap.safetensors $m.whole.safetensors ||
    fail "$m: overlapped and whole-region all-reduces give different weights"
  echo "ok: $m: the same weights, overlapped or not"
done
for key in syncs comm_bytes; do
  a=$($PY "$tools" log $key 10 dp.overlap.jsonl) b=$($PY "$tools" log $key 10 dp.whole.jsonl)
  [ "$a" = "$b" ] || fail "$key after 10 steps: $a overlapped, $b not"
done
[ "$($PY "$tools" log syncs 10 dp.overlap.jsonl)" -eq 10 ] || fail "expected one gradient sync a step"
# the test can tell: dp.c with its first bucket started at the top of
# backward, before the kernels that finish it, ends elsewhere
$PY - dp.c early.c <<'MOVE'
import sys
lines = open(sys.argv[1]).read().split("\n")
first = next(i for i, l in enumerate(lines) if "trc_step_bucket_ready(s" in l)
top = lines.index("static void backward(char *A, trc_step *s) {")
lines.insert(top + 1, lines.pop(first))
open(sys.argv[2], "w").write("\n".join(lines))
MOVE
head -n 1 dp.cc | sed -e 's| dp\.c | early.c |' -e 's| -o dp | -o early |' >early.cc
sh early.cc
run early overlap
$PY "$tools" differ early.overlap.safetensors dp.whole.safetensors >/dev/null ||
  fail "a bucket all-reduced before backward finished it gave the right weights"
echo "ok: a bucket started too early is caught"
