#!/usr/bin/env bash
# Compile-time scaling (issue 14, item 6): models of N residual blocks, each
# three ops (x + relu(linear(x, 64)): a GEMM with its bias, relu, the
# residual add), compiled with `trainc emit --time-phases`, which prints the
# seconds of each compiler phase: parse, lower, autodiff, plan (the
# checkpoint planner's search), schedule (the schedules and memory plans it
# builds for its candidates and the chosen plan's kernels), emit (the C
# text). Two memories for `checkpoint auto`: ample (64 GiB: `off` fits) and
# tight (`off`'s planned peak less half its stored activations: the budget
# search decides). Before issue 14, `plan --policy auto` took 104 s at 500
# blocks and over 600 s at 1,000.
# Timings depend on the machine and its load: on a shared machine they are
# rough (run it on a quiet one for figures to report).
# usage: bench/scaling.sh [BUILD_DIR] [N...]   (default N: 100 1000 10000)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(100 1000 10000)
trainc=$build/driver/trainc
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

model() { # model N: N residual blocks of width 64
  cat <<NN
def block(x) {
  return x + relu(linear(x, 64))
}
model scaling {
  input x     : f32[B, 64]
  input label : i32[B]
  h      = repeat $1 block(x)
  logits = linear(h, 10)
  loss   = cross_entropy(logits, label)
  predict logits
}
train { batch 32 }
NN
}

# phases NN MEMORY -> "parse lower autodiff plan schedule emit total" (seconds)
phases() {
  local start end line
  start=$(date +%s.%N)
  line=$("$trainc" emit "$1" -o "$work/out.c" --policy auto --memory "$2" --time-phases \
         2>&1 >/dev/null | grep '^phase seconds:')
  end=$(date +%s.%N)
  awk -v l="$line" -v s="$start" -v e="$end" 'BEGIN {
    n = split(l, f, " ")
    for (i = 3; i < n; i += 2) t[f[i]] = f[i + 1]
    printf "%9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f", t["parse"], t["lower"], t["autodiff"],
           t["plan"], t["schedule"], t["emit"], e - s }'
}

printf '%-6s %-7s %9s %9s %9s %9s %9s %9s %9s\n' \
  blocks memory parse lower autodiff plan schedule emit total
for n in "${sizes[@]}"; do
  nn=$work/res_$n.nn
  model "$n" >"$nn"
  tight=$("$trainc" plan "$nn" --policy off --format json | python3 -c '
import json, sys
p = json.load(sys.stdin)["peak"]
print(p["total"] - p["stored_activations"] // 2)')
  printf '%-6s %-7s %s\n' "$n" ample "$(phases "$nn" 64GiB)"
  printf '%-6s %-7s %s\n' "$n" tight "$(phases "$nn" "$tight")"
done
