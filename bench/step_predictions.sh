#!/usr/bin/env bash
# The cost model's predicted step against what a trainer measures, per
# model and precision: each model built with `checkpoint off` (nothing
# recomputed: the plan is the same whatever the prices) and the default
# profile, run with --kernel-times under --precision fp32 and bf16
# alternately on random data (tests/e2e/random_data.py); per run the
# measured micro-batch (its kernels and the rest: the optimizer step,
# loading the batch) beside the trainer's prediction for that precision
# (forward, backward and the update). Medians over the rounds. A model
# runs at least STEPS steps, and as many as its predicted step takes to
# fill 2 seconds (a 2 ms step timed over 5 steps is one hiccup away from
# double).
# Models: examples/deep_mlp.nn, examples/gpt124m.nn, the GPT of issue 10
# (torch_compare.py's "gpt", as bench/gpt_ab.sh writes it), examples/gpt.nn,
# examples/fashion_mlp.nn and examples/fashion_cnn.nn, or those given.
# Needs a quiet machine (bench/quiet.sh). PROFILE=FILE prices the plans
# with that machine profile (`trainc calibrate -o FILE`) instead of the
# default.
# usage: bench/step_predictions.sh [BUILD_DIR] [ROUNDS] [STEPS] [MODEL.nn ...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} rounds=${2:-3} steps=${3:-6}
shift $(($# < 3 ? $# : 3))
trainc=$build/driver/trainc PY=/usr/bin/python3
profile=(${PROFILE:+--profile "$PROFILE"})
source bench/quiet.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
models=("$@")
if ((${#models[@]} == 0)); then
  sed -e 's/dropout = 0.1/dropout = 0/' -e 's/dropout(proj, 0.1)/proj/' \
    -e 's/const VOCAB = 256 /const VOCAB = 8192 /' -e 's/const T = 64 /const T = 128 /' \
    -e 's/const D = 128 /const D = 256 /' -e 's/batch 32/batch 8/' examples/gpt.nn >"$work/gpt_issue10.nn"
  models=(examples/deep_mlp.nn examples/gpt124m.nn "$work/gpt_issue10.nn" examples/gpt.nn
          examples/fashion_mlp.nn examples/fashion_cnn.nn)
fi
for model in "${models[@]}"; do
  name=$(basename "$model" .nn)
  "$trainc" build "$model" --policy off "${profile[@]}" -o "$work/$name" --keep-c "$work/$name.c" >/dev/null
  "$PY" tests/e2e/random_data.py "$work/$name.c" "$work/$name.data" 1024
  "$trainc" plan "$model" --policy off "${profile[@]}" --format json | "$PY" -c '
import json, math, sys
print(min(500, max(int(sys.argv[1]), math.ceil(2.0 / json.load(sys.stdin)["seconds"]["step"]))))' "$steps" \
    >"$work/$name.steps"
done
wait_quiet || echo "(timing anyway: the figures of a busy machine mean little)"
for ((r = 0; r < rounds; r++)); do
  for model in "${models[@]}"; do
    name=$(basename "$model" .nn)
    for precision in fp32 bf16; do
      "$work/$name" --data "$work/$name.data" --steps "$(cat "$work/$name.steps")" --quiet --precision "$precision" \
        --kernel-times "$work/$name.$precision.$r.jsonl" 2>/dev/null
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$PY" - "$work" "$rounds" "${models[@]}" <<'PYEOF'
import json, os, statistics, sys
work, rounds, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print(f"medians of {rounds} runs, ms a micro-batch (measured: its kernels and the rest; predicted: forward, backward, update)")
print("| model | precision | measured step (range) | the rest | predicted step | predicted update | predicted / measured - 1 |")
print("|---|---|---|---|---|---|---|")
for model in models:
    name = os.path.basename(model)[:-3]
    for precision in ("fp32", "bf16"):
        heads = [json.loads(open(f"{work}/{name}.{precision}.{r}.jsonl").readline()) for r in range(rounds)]
        steps = [1e3 * h["measured"]["step"] for h in heads]
        step, rest = statistics.median(steps), statistics.median(1e3 * h["measured"]["rest"] for h in heads)
        p = heads[0]["predicted"]
        print(f"| {name} | {precision} | {step:.2f} ({min(steps):.2f}-{max(steps):.2f}) | {rest:.2f} | "
              f"{1e3 * p['step']:.2f} | {1e3 * p['update']:.2f} | {100 * (1e3 * p['step'] / step - 1):+.1f}% |")
PYEOF
