#!/usr/bin/env bash
# The emulated CUDA trainer on 2 ranks (docs/cuda.md): with NCCL (emulated:
# its all-reduces are the runtime's MPI sums on the device's regions) and
# without (TRAINC_CUDA_NCCL=0: gradient buckets copied to the host as
# backward finishes them, their all-reduce started there, as in the C
# trainer; averages on host copies). The weights after 6 steps must be
# bitwise the C trainer's, with and without --no-overlap, for `sync
# gradients` (accumulate 2, clipping, buckets of 64 bytes), for LocalSGD with
# synchronous warm-up steps (its average on the device), for LocalSGD with
# the optimizer state averaged (on the device too), and for DiLoCo's outer
# step with the optimizer state averaged (on the device too; a state saved
# after 4 steps and resumed ends at the 6-step run's weights).
# With NCCL the log's sync seconds count the all-reduces' time on the device
# (comm_seconds > 0). And one rank's NaN gradient stops the job
# before the sync with the C trainer's message and exit status, NCCL or not,
# in buckets or as one region; and one with infinite weights before a
# LocalSGD average.
# usage: cuda_emulate_mpi.sh TRAINC SOURCE_DIR WORKDIR
set -euo pipefail
trainc=$1 src=$2 work=$3
PY=/usr/bin/python3 tools=$src/tests/e2e/schedule/tools.py
$PY -c 'import numpy' 2>/dev/null || { echo "SKIP: needs python3-numpy"; exit 77; }
rm -rf "$work" && mkdir -p "$work/train"
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
. "$src/tests/e2e/schedule/mpi.sh"
default_flags=$("$trainc" --help | sed -n 's/^ *--cflags FLAGS .*(default: \(.*\))$/\1/p')
[[ -n $default_flags ]] || fail "no default --cflags in trainc --help"
$PY "$tools" data train 256 1

for case in "dp:sync gradients:accumulate 2" "warm:local_sgd 2:local_sgd_warmup 1" \
  "state:local_sgd 2:sync parameters optimizer_state" \
  "outer:local_sgd 2:outer_optimizer nesterov(lr = 0.7, momentum = 0.9)
  sync parameters optimizer_state"; do
  IFS=: read -r name s1 s2 <<<"$case"
  {
    printf 'model m {\n  input x : f32[B, 8]\n  input y : i32[B]\n  h = relu(linear(x, 32))\n'
    printf '  r = h + relu(linear(layernorm(h), 32))\n  logits = linear(r, 4)\n'
    printf '  loss = cross_entropy(logits, y)\n  predict logits\n}\n'
    printf 'train {\n  batch 8\n  optimizer adamw(lr = 0.01)\n  clip 1\n  seed 3\n  %s\n  %s\n}\n' "$s1" "$s2"
  } >"$name.nn"
  # the emulated trainer calls libm's expf and logf; so must the C one (no
  # vectorizer: GCC vectorizes logsumexp's short rows across rows, with libmvec)
  "$trainc" build "$name.nn" --bucket 64 -o "$name.c.bin" >/dev/null \
    --cflags "$default_flags -fno-tree-vectorize -fno-tree-slp-vectorize"
  "$trainc" build "$name.nn" --bucket 64 --backend cuda-emulate -o "$name.cuda.bin" --keep-c "$name.cu" >/dev/null
  grep -q "trc_cuda_step_bucket_ready(s, [0-9]*, [0-9]*);" "$name.cu" || fail "$name: no buckets"
  for run in c:overlap:1 cuda:overlap:1 cuda:whole:1 cuda:overlap:0 cuda:whole:0; do
    IFS=: read -r t tag nccl <<<"$run"
    TRAINC_CUDA_NCCL=$nccl "${MPIRUN[@]}" "./$name.$t.bin" --data train --steps 6 --quiet \
      --save "$name.$t.$tag.$nccl.safetensors" $([[ $tag == whole ]] && echo --no-overlap) \
      --log "$name.$t.$tag.$nccl.jsonl"
  done
  $PY - "$name.cuda.overlap.1.jsonl" <<'PY' || fail "$name: no NCCL time in the sync seconds"
import json, sys
sys.exit(0 if sum(json.loads(l).get("comm_seconds", 0) for l in open(sys.argv[1])) > 0 else 1)
PY
  if [[ $name == outer ]]; then # the device's anchor and momentum: saved and taken back
    rm -rf outer.state
    "${MPIRUN[@]}" ./outer.cuda.bin --data train --steps 6 --quiet --save-state outer.state \
      --save-every 4 --save-total-limit 0
    rm outer.state/state-6.*
    "${MPIRUN[@]}" ./outer.cuda.bin --data train --steps 6 --quiet --resume outer.state \
      --save outer.resumed.safetensors
    cmp -s outer.cuda.overlap.1.safetensors outer.resumed.safetensors ||
      fail "outer: resumed after 4 steps, not the weights of 6 steps in one run"
  fi
  for nccl in 1 0; do
    cmp -s "$name.c.overlap.1.safetensors" "$name.cuda.overlap.$nccl.safetensors" ||
      fail "$name: TRAINC_CUDA_NCCL=$nccl: the emulated CUDA trainer's weights are not the C's"
    cmp -s "$name.cuda.overlap.$nccl.safetensors" "$name.cuda.whole.$nccl.safetensors" ||
      fail "$name: TRAINC_CUDA_NCCL=$nccl: overlapped and whole-region all-reduces differ"
  done
  echo "$name ($s1, $s2): 2 ranks, emulated CUDA = C, bitwise, with and without overlap and NCCL"
done

# Runs program STEM on 2 ranks, rank 1 on DATA, as the C trainer and as the
# emulated CUDA one with NCCL and without: each must stop before the first
# sync with the C trainer's error line (matching PATTERN) and exit status.
stops_as_c() { # what, stem, rank 1's data, pattern, trainer flags...
  local what=$1 stem=$2 data=$3 pattern=$4 want="" got rc t nccl
  shift 4
  for run in c:1 cuda:1 cuda:0; do
    IFS=: read -r t nccl <<<"$run"
    rc=0
    TRAINC_CUDA_NCCL=$nccl timeout 120 mpirun "${MPI_OPTS[@]}" -np 1 "./$stem.$t.bin" \
      --data train "$@" : -np 1 "./$stem.$t.bin" --data "$data" "$@" \
      >/dev/null 2>"$stem.$t.$nccl.err" || rc=$?
    got="exit $rc: $(grep -m1 'error: rank' "$stem.$t.$nccl.err" || true)"
    [[ $t == c ]] && want=$got
    [[ $got == *"$pattern"*"before sync 1; stopping every rank"* && $got == "$want" ]] ||
      fail "$what (TRAINC_CUDA_NCCL=$nccl): $t: $got; C: $want"
  done
  echo "$what: the emulated CUDA trainer stops as the C one: $want"
}

# rank 1's inputs at +-3e38 overflow its forward pass: its gradients are NaN
mkdir -p bad && cp train/y.npy bad/ &&
  $PY -c 'import numpy as n; n.save("bad/x.npy", n.sign(n.load("train/x.npy")) * n.float32(3e38))'
stops_as_c "a NaN gradient on rank 1, in buckets" dp bad "the gradient of parameter" --steps 2
stops_as_c "a NaN gradient on rank 1, one region" dp bad "the gradient of parameter" --steps 2 \
  --no-overlap
# rank 1's inputs at 3e37 x N(0, 1): its loss is finite, its first SGD step
# (lr 1000) overflows its weights, which LocalSGD's average then checks
printf 'model m {\n  input x : f32[B, 8]\n  input y : i32[B]\n  logits = linear(x, 4)\n' >avg.nn
printf '  loss = cross_entropy(logits, y)\n  predict logits\n}\n' >>avg.nn
printf 'train {\n  batch 8\n  optimizer sgd(lr = 1000)\n  seed 3\n  local_sgd 1\n}\n' >>avg.nn
"$trainc" build --mpi avg.nn -o avg.c.bin >/dev/null
"$trainc" build --mpi avg.nn --backend cuda-emulate -o avg.cuda.bin >/dev/null
mkdir -p big && cp train/y.npy big/ &&
  $PY -c 'import numpy as n; n.save("big/x.npy", n.load("train/x.npy") * n.float32(3e37))'
stops_as_c "infinite weights on rank 1 before LocalSGD's average" avg big "parameter 'logits" \
  --steps 2 --schedule constant
