#!/usr/bin/env bash
# reports.sh TRAINER MAKE_DATA — what the trainer reports, checked with
# NumPy against the trainer's own files (docs/trainer.md, Evaluation, Logs):
#  1. grad_norm in a step record is the L2 norm of the step's gradients
#     before clipping: on a data set of exactly one batch, the norm of
#     --dump-step's gradients of the same weights;
#  2. eval_f1, the per-class precision / recall / F1 and the confusion matrix
#     of the last evaluation equal NumPy's, computed from the saved weights
#     and the evaluation files (the tiny model's forward pass in NumPy);
#  3. the validation split is drawn by the seed: the same seed evaluates the
#     same rows, another seed other rows.
NAME=reports
. "$(dirname "$0")/harness.sh" "$1" "$2" 400
"$PY" -c 'import numpy' 2>/dev/null || { echo "SKIP: needs python3-numpy"; exit 77; }

echo "1. grad_norm is the pre-clip gradient norm"
mkdir one && "$MAKE_DATA" one 32 5 || exit 1 # one batch: the step's window is these rows
run init 0 "$TRAINER" --steps 0 --save w0.safetensors --quiet
run dump 0 "$TRAINER" --data one --init w0.safetensors --dump-step dump.safetensors
for clip in 0 0.001; do
  run "step_$clip" 0 "$TRAINER" --data one --init w0.safetensors --steps 1 --validation 0 \
    --accumulate 1 --clip-norm "$clip" --log-every 1 --log "step_$clip.jsonl" --quiet
done
"$PY" - <<'EOF' || fail "grad_norm is not the norm of the step's gradients"
import json, struct
import numpy as np
raw = open("dump.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
grads = [np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], "<f4")
         for k, v in h.items() if k.startswith("grad.")]
assert len(grads) == 4
norm = float(np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads)))
for clip in ("0", "0.001"):
    logged = [json.loads(l) for l in open("step_%s.jsonl" % clip) if '"loss"' in l][0]["grad_norm"]
    # the same sums in another row order: float32 rounding apart
    assert abs(logged - norm) <= 1e-5 * norm, (clip, logged, norm)
assert norm > 100 * 0.001  # so the clipped run's record shows the norm before clipping
print("grad_norm %.6g, NumPy %.6g" % (logged, norm))
EOF

echo "2. F1, the per-class report and the confusion matrix"
mkdir t && "$MAKE_DATA" t 300 2 || exit 1
run train 0 "$TRAINER" --data d --eval-data t --steps 30 --log train.jsonl --save w.safetensors
expect train err "confusion matrix (rows: true class, columns: predicted):"
"$PY" - <<'EOF' || fail "the metrics differ from NumPy's"
import json, struct
import numpy as np
raw = open("w.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
w = {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], "<f4")
     .reshape(v["shape"]) for k, v in h.items() if k != "__metadata__"}
x, y = np.load("t/x.npy"), np.load("t/y.npy")
hidden = np.maximum(x @ w["fc1.weight"] + w["fc1.bias"], 0)
pred = np.argmax(hidden @ w["fc2.weight"] + w["fc2.bias"], axis=1)
cm = np.zeros((4, 4), np.int64)
np.add.at(cm, (y, pred), 1)
tp = np.diag(cm)
with np.errstate(invalid="ignore", divide="ignore"):
    precision = np.nan_to_num(tp / cm.sum(axis=0))
    recall = np.nan_to_num(tp / cm.sum(axis=1))
    f1 = np.nan_to_num(2 * tp / (cm.sum(axis=0) + cm.sum(axis=1)))
present = (cm.sum(axis=0) + cm.sum(axis=1)) > 0
records = [json.loads(l) for l in open("train.jsonl")]
report = [r for r in records if "confusion_matrix" in r]
assert len(report) == 1 and report[0]["confusion_matrix"] == cm.tolist(), (report, cm)
for key, want in (("precision", precision), ("recall", recall), ("f1", f1)):
    assert np.allclose(report[0][key], want, rtol=0, atol=1e-8), (key, report[0][key], want)
assert report[0]["support"] == cm.sum(axis=1).tolist()
last = [r for r in records if "eval_f1" in r][-1]
assert abs(last["eval_f1"] - f1[present].mean()) < 1e-8, (last, f1)  # 4 classes: macro
print("confusion matrix and macro-F1 %.4f as NumPy's" % last["eval_f1"])
EOF

echo "3. the validation split is drawn by the seed"
for seed in 1 2; do
  run "split_$seed" 0 "$TRAINER" --steps 0 --init w0.safetensors --data d --validation 0.5 \
    --seed "$seed" --quiet
done
[ "$(cat split_1.out)" != "$(cat split_2.out)" ] || fail "seeds 1 and 2 evaluated the same rows"
run split_1_again 0 "$TRAINER" --steps 0 --init w0.safetensors --data d --validation 0.5 \
  --seed 1 --quiet
cmp -s split_1.out split_1_again.out || fail "seed 1 twice evaluated different rows"

finish
