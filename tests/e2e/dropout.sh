#!/usr/bin/env bash
# Dropout is on while training and off in evaluation: with
# loss = mse(dropout(x, 0.25), x), evaluation gives exactly 0, while a training
# step (at lr 0, so the weights stay 1) drops a quarter of x (error x^2) and
# scales the rest by 4/3 (error x^2/9): mean(x^2)/3 in expectation, here
# between 0.15 and 0.6 for x ~ N(0, 1). Two training steps draw different
# masks, so their losses differ.
# usage: dropout.sh TRAINC WORKDIR
set -euo pipefail
trainc=$1 work=$2
mkdir -p "$work/data"
cat >"$work/dropout.nn" <<'NN'
model m {
  input x : f32[B, 64]
  param w : f32[64] = ones()
  loss = mse(dropout(x * w, 0.25), x)
}
train { batch 16; optimizer sgd(lr = 0) }
NN
python3 - "$work/data/x.npy" <<'PY'
import random, struct, sys
random.seed(1)
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (16, 64), }"
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack("<1024f", *(random.gauss(0, 1) for _ in range(1024))))
PY
"$trainc" build "$work/dropout.nn" -o "$work/dropout" --cflags "${TRAINC_TEST_CFLAGS:-} -O2 -Wall -Wextra -Werror" >/dev/null
"$work/dropout" --data "$work/data" --eval-data "$work/data" --steps 2 --log-every 1 --quiet --log "$work/log.jsonl"
train=$(sed -n 's/.*"loss":\([0-9.e+-]*\).*/\1/p' "$work/log.jsonl")
eval=$(sed -n 's/.*"eval_loss":\([0-9.e+-]*\).*/\1/p' "$work/log.jsonl")
echo "training losses: $(echo $train); evaluation loss: $eval"
[[ $eval == 0 ]] || { echo "FAIL: evaluation is not dropout-free"; exit 1; }
echo "$train" | awk '{ ok = ok && $1 > 0.15 && $1 < 0.6; v[NR] = $1 } BEGIN { ok = 1 } END { exit !(ok && NR == 2 && v[1] != v[2]) }' ||
  { echo "FAIL: training losses are not those of dropout with fresh masks"; exit 1; }
