#!/usr/bin/env bash
# Each model's fp32 step as a share of this machine's fp32 peak measured
# beside it (issue 23: "deep_mlp and GPT-2 124M steps at >= 80% of the
# fp32 peak"). On a VM whose speed drifts by a third within minutes
# (bench/RESULTS.md), a step's FLOP/s over a peak measured at another time
# says little; here every trainer run sits between two runs of
# bench/peak.c on every core, and its share is its FLOP/s over the mean of
# those two peaks. A step's FLOP/s: `trainc plan`'s FLOPs (forward,
# backward and recompute) per example times the run's median
# examples_per_s (--log-every 1, the first step left out), random data
# (tests/e2e/random_data.py). Medians over the rounds; every round's
# figures are printed too.
# usage: bench/peak_share.sh [BUILD_DIR] [ROUNDS] [STEPS] [MODEL.nn ...]
#        (default: build 3 6 examples/deep_mlp.nn examples/gpt124m.nn)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} rounds=${2:-3} steps=${3:-6}
shift $(($# < 3 ? $# : 3))
models=("$@")
((${#models[@]})) || models=(examples/deep_mlp.nn examples/gpt124m.nn)
trainc=$build/driver/trainc PY=/usr/bin/python3
source bench/quiet.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -fopenmp bench/peak.c -o "$work/peak"
for model in "${models[@]}"; do
  name=$(basename "$model" .nn)
  "$trainc" build "$model" -o "$work/$name" --keep-c "$work/$name.c" >/dev/null
  "$PY" tests/e2e/random_data.py "$work/$name.c" "$work/$name.data" 1024
  "$trainc" plan "$model" --format json | "$PY" -c '
import json, sys
p = json.load(sys.stdin)
print(sum(p["flops"].values()) / p["batch"])' >"$work/$name.flops_per_example"
done

peak() { # the 2-core fp32 figure, GFLOP/s
  "$work/peak" | sed -n 's/.*fp32 FMA.* \([0-9.][0-9.]*\) GFLOP\/s.*/\1/p'
}

wait_quiet || echo "(timing anyway: the figures of a busy machine mean little)"
peak >"$work/peak.0"
for ((r = 0; r < rounds; r++)); do
  for model in "${models[@]}"; do
    name=$(basename "$model" .nn)
    "$work/$name" --data "$work/$name.data" --steps "$steps" --precision fp32 --quiet --log-every 1 \
      --eval-every-steps 0 --log "$work/$name.$r.jsonl" >/dev/null
    peak >"$work/peak.after.$name.$r"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$PY" - "$work" "$rounds" "${models[@]}" <<'PYEOF'
import json, os, statistics, sys
work, rounds, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
read = lambda path: float(open(path).read())
# the peak measured just before each run: the one after the previous run
before, last = {}, f"{work}/peak.0"
for r in range(rounds):
    for model in models:
        name = os.path.basename(model)[:-3]
        before[name, r] = read(last)
        last = f"{work}/peak.after.{name}.{r}"
print("| model | round | GFLOP/s | peak before / after | share of the peak |")
print("|---|---|---|---|---|")
summary = []
for model in models:
    name = os.path.basename(model)[:-3]
    flops = read(f"{work}/{name}.flops_per_example")
    rates, shares = [], []
    for r in range(rounds):
        steps = [json.loads(l) for l in open(f"{work}/{name}.{r}.jsonl")]
        eps = statistics.median(s["examples_per_s"] for s in steps if "examples_per_s" in s and s["step"] > 1)
        rate, after = eps * flops / 1e9, read(f"{work}/peak.after.{name}.{r}")
        share = rate / ((before[name, r] + after) / 2)
        rates.append(rate), shares.append(share)
        print(f"| {name} | {r} | {rate:.1f} | {before[name, r]:.0f} / {after:.0f} | {100 * share:.1f}% |")
    summary.append(f"{name}: {statistics.median(rates):.1f} GFLOP/s, {100 * statistics.median(shares):.1f}% "
                   f"of the peak beside it (median of {rounds})")
print("\n".join(summary))
PYEOF
