#!/usr/bin/env bash
# non_finite.sh TRAINER MAKE_DATA — NaN and infinities never pass silently
# (docs/trainer.md): an f32 input holding one is refused at load, naming the
# file, row and column; --init weights holding one are refused, naming the
# tensor and element; weights or state that became non-finite while the loss
# stayed finite are not saved; a non-finite loss has its own step in the log.
NAME=non_finite
. "$(dirname "$0")/harness.sh" "$1" "$2" 200

"$TRAINER" --data d --steps 2 --quiet --save w.safetensors >/dev/null || exit 1

# poke FILE KIND INDEX VALUE: float INDEX of an .npy's data (KIND npy) or of
# tensor KIND of a .safetensors file becomes VALUE
poke() {
  "$PY" - "$@" <<'EOF'
import json, struct, sys
path, kind, index, value = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
raw = bytearray(open(path, "rb").read())
if kind == "npy":
    start = 10 + struct.unpack("<H", raw[8:10])[0]
else:
    n = struct.unpack("<Q", raw[:8])[0]
    start = 8 + n + json.loads(raw[8:8 + n])[kind]["data_offsets"][0]
raw[start + 4 * index:start + 4 * index + 4] = struct.pack("<f", value)
open(path, "wb").write(raw)
EOF
}

echo "1. a NaN or infinity in an f32 input"
cp -r d nan && poke nan/x.npy npy $((7 * 8 + 5)) nan
run nan_input 1 "$TRAINER" --data nan --steps 5 --quiet --save nan.safetensors
expect nan_input err "nan/x.npy: error: input 'x': value nan at row 7, column 5 is not finite"
[ ! -e nan.safetensors ] || fail "trained on a NaN input"
cp -r d inf && poke inf/x.npy npy 199 -inf
run inf_eval 1 "$TRAINER" --data d --eval-data inf --steps 5 --quiet
expect inf_eval err "inf/x.npy: error: input 'x': value -inf at row 24, column 7 is not finite"

echo "2. non-finite --init weights"
cp w.safetensors bad.safetensors && poke bad.safetensors fc2.weight 9 nan
run nan_init 1 "$TRAINER" --steps 0 --init bad.safetensors --eval-data d
expect nan_init err "bad.safetensors: error: non-finite weights: parameter 'fc2.weight' is nan at element 9"

echo "3. weights that overflowed with a finite loss are not saved"
# AdamW moves each weight by about lr: at 1e40 (infinite as f32) the second
# step's update overflows the weights, after its loss was computed
cp w.safetensors before.safetensors
run overflow 1 "$TRAINER" --data d --steps 2 --lr 1e40 --quiet --save w.safetensors
# (the sign of the infinity follows the initial weights)
expect overflow err \
  "w.safetensors: error: refusing to save non-finite weights: parameter 'fc1.weight' is "
expect overflow err "inf at element 0"
cmp -s w.safetensors before.safetensors || fail "non-finite weights replaced the saved file"
run overflow_state 1 "$TRAINER" --data d --steps 2 --lr 1e40 --quiet --save-state st
expect overflow_state err "st: error: refusing to save non-finite state: parameter 'fc1.weight'"
[ ! -e st/state-2.rank-0.safetensors ] || fail "non-finite state was saved"

echo "4. a non-finite loss: stderr and the log name the same step"
# lr 0 at step 1 (warm-up), then 1e19: step 3's forward overflows
run nan_loss 1 "$TRAINER" --data d --steps 3 --lr 1e20 --quiet --log nan.jsonl --log-every 1
expect nan_loss err "the training loss is nan at step 3"
[ "$(cut -d, -f1 nan.jsonl | tr '\n' ' ')" = '{"step":1 {"step":2 {"step":3 ' ] ||
  fail "the log's steps: $(cut -d, -f1 nan.jsonl | tr '\n' ' ')"
tail -n 1 nan.jsonl | grep -q '"loss":null' || fail "the log's last record has a loss"

finish
