#!/usr/bin/env bash
# best.sh TRAINER MAKE_DATA — the save strategy (docs/trainer.md, Resuming
# and Best weights), with the tiny trainer:
#  1. --save-total-limit K keeps exactly the newest K states, and resuming
#     from the newest one left still ends bitwise where an uninterrupted run
#     ends; a run with another value of a flag that shapes the weights
#     (--weight-decay, --early-stopping) cannot resume from them;
#  2. --load-best ends with the weights of the best evaluation in the log
#     (the lowest eval_loss, or the highest eval_accuracy), bitwise the
#     parameters of the state saved at that step, and evaluating them again
#     gives the logged value; a resumed run picks the same;
#  3. --early-stopping P --early-stopping-threshold X stops at the step that
#     Hugging Face's EarlyStoppingCallback rule gives on the evaluations of
#     the same run without it: once where an improvement resets the patience,
#     once where the threshold makes the same improvement too small to.
NAME=best
. "$(dirname "$0")/harness.sh" "$1" "$2" 400
mkdir t && "$MAKE_DATA" t 300 2 || exit 1
"$PY" -c 'import numpy' 2>/dev/null || { echo "SKIP: needs python3-numpy"; exit 77; }

states() { (cd "$1" && ls state-*.rank-0.safetensors 2>/dev/null | sort -t- -k2 -n | tr '\n' ' '); }

echo "1. --save-total-limit"
common=(--data d --steps 40 --quiet --save-state)
run limit3 0 "$TRAINER" "${common[@]}" s3 --save-every 5 --save-total-limit 3 \
  --save full.safetensors
s=.rank-0.safetensors
[ "$(states s3)" = "state-30$s state-35$s state-40$s " ] ||
  fail "--save-total-limit 3 left: $(states s3)"
run limit_all 0 "$TRAINER" "${common[@]}" s0 --save-every 5 --save-total-limit 0
[ "$(states s0 | wc -w)" -eq 8 ] || fail "--save-total-limit 0 left: $(states s0)"
run limit_default 0 "$TRAINER" "${common[@]}" s1 --save-every epoch
[ "$(states s1)" = "state-40$s " ] || fail "the default limit left: $(states s1)"
rm s3/state-40.rank-0.safetensors s3/state-35.rank-0.safetensors
run limit_resume 0 "$TRAINER" "${common[@]}" s3 --save-every 5 --save-total-limit 3 --resume s3 \
  --save resumed.safetensors
cmp -s full.safetensors resumed.safetensors || fail "resumed from the oldest state: other weights"
# a flag that shapes the weights is in the run's fingerprint: another value is refused
for flag in "--weight-decay 0.5" "--early-stopping 3 --eval-every-steps 5"; do
  run other_run 1 "$TRAINER" "${common[@]}" s3 --save-every 5 --resume s3 $flag
  expect other_run err "saved by a different run"
done
# --save-every epoch: 320 training rows / batch 32 / accumulate 2 = 5 steps an epoch
run every_epoch 0 "$TRAINER" --data d --steps 12 --quiet --save-state se --save-every epoch \
  --save-total-limit 0
[ "$(states se)" = "state-5$s state-10$s state-12$s " ] ||
  fail "--save-every epoch saved: $(states se)"

echo "2. --load-best"
# a constant, large learning rate: the evaluations go up and down (here the
# best eval_loss and eval_accuracy are the 7th evaluation's of 15)
bumpy=(--data d --eval-data t --steps 60 --lr 0.2 --schedule constant --warmup 0 --clip-norm 0
       --eval-every-epoch no --eval-every-steps 4 --log-every 1)
check_best() { # NAME METRIC: the log's best step, the saved weights, a fresh evaluation
  "$PY" - "$1" "$2" <<'EOF' || fail "$1: the best weights are not the best evaluation's"
import json, struct, sys
import numpy as np
name, metric = sys.argv[1], sys.argv[2]
records = [json.loads(l) for l in open(name + ".jsonl")]
evals = [r for r in records if metric in r]
lower = metric == "eval_loss"
best = evals[0]
for r in evals[1:]:  # strictly better replaces: the first of equals stays
    if (r[metric] < best[metric]) if lower else (r[metric] > best[metric]):
        best = r
said = [r for r in records if "best_step" in r]
assert len(said) == 1 and said[0]["best_step"] == best["step"], (said, best)
assert said[0]["best_metric"] == metric and said[0]["best_value"] == best[metric], said
assert evals[0]["step"] < best["step"] < evals[-1]["step"], "the best is the first or the last"

def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    h.pop("__metadata__", None)
    return {k: raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items()}
saved = tensors(name + ".safetensors")
state = tensors("%s.st/state-%d.rank-0.safetensors" % (name, best["step"]))
assert all(saved[k] == state[k] for k in saved), "the saved weights differ from the best step's"
last = tensors("%s.st/state-60.rank-0.safetensors" % name)
assert any(saved[k] != last[k] for k in saved), "the saved weights are the last step's"
again = [json.loads(l) for l in open(name + ".again.jsonl") if metric in l]
assert again[0][metric] == best[metric], (again, best)
print("%s: best %s at step %d of %d" % (name, best[metric], best["step"], evals[-1]["step"]))
EOF
}
for metric in eval_loss eval_accuracy; do
  run "best_$metric" 0 "$TRAINER" "${bumpy[@]}" --load-best --metric-for-best "$metric" \
    --log "best_$metric.jsonl" --save "best_$metric.safetensors" --save-state "best_$metric.st" \
    --save-every 4 --save-total-limit 0
  run "again_$metric" 0 "$TRAINER" --steps 0 --init "best_$metric.safetensors" --eval-data t \
    --log "best_$metric.again.jsonl" --quiet
  check_best "best_$metric" "$metric"
done
# resumed from a state after the best step: the state carries the best weights
cp -r best_eval_loss.st resume.st
rm -f $(ls resume.st/state-*.rank-0.safetensors | sort -t- -k2 -n | tail -n 5)
run best_resumed 0 "$TRAINER" "${bumpy[@]}" --load-best --save best_resumed.safetensors \
  --save-state resume.st --save-every 4 --save-total-limit 0 --resume resume.st
cmp -s best_eval_loss.safetensors best_resumed.safetensors ||
  fail "a resumed --load-best run saved other weights"
run best_noeval 2 "$TRAINER" --data d --steps 10 --validation 0 --load-best
expect best_noeval err "--load-best needs evaluation data"
run best_metric 2 "$TRAINER" --data d --steps 10 --load-best --metrics loss \
  --metric-for-best eval_f1
expect best_metric err "--metric-for-best eval_f1: the run does not compute it"

echo "3. --early-stopping"
run full_run 0 "$TRAINER" "${bumpy[@]}" --log full_run.jsonl
for threshold in 0 0.02; do
  run "stopped_$threshold" 0 "$TRAINER" "${bumpy[@]}" --log "stopped_$threshold.jsonl" \
    --early-stopping 6 --early-stopping-threshold "$threshold"
  expect "stopped_$threshold" err "stopped early at step"
  "$PY" - "$threshold" <<'EOF' || fail "early stopping (threshold $threshold): the wrong step"
import json, sys
threshold = float(sys.argv[1])
full = [json.loads(l) for l in open("full_run.jsonl")]
stopped = [json.loads(l) for l in open("stopped_%s.jsonl" % sys.argv[1])]
best, bad, expected, resets = None, 0, None, 0
for r in (r for r in full if "eval_loss" in r):  # EarlyStoppingCallback's rule
    v = r["eval_loss"]
    improves = best is not None and v < best
    resets += improves and best - v > threshold
    bad = 0 if best is None or (improves and best - v > threshold) else bad + 1
    if best is None or improves:
        best = v
    if bad >= 6:
        expected = r["step"]
        break
assert expected is not None and expected < 60, "no early stop in the full run: no test"
steps = [r["step"] for r in stopped if "loss" in r]
evals = [r for r in stopped if "eval_loss" in r]
assert evals == [r for r in full if "eval_loss" in r and r["step"] <= expected], "other evals"
assert max(steps) == expected, (max(steps), expected)
print("threshold %g: stopped at step %d of 60 (%d resets), as the rule says"
      % (threshold, expected, resets))
EOF
done

finish
