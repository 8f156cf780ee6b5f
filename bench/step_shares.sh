#!/usr/bin/env bash
# Where a step goes (issue 23, item 3: "the non-GEMM share of the GPT and
# GPT-2 124M steps before and after"): the model's trainer built as trainc
# builds it and with --no-fuse (no loop fusion, no pool pass: the step
# before fusion), or with the flags in $BASELINE_FLAGS instead of --no-fuse
# (e.g. BASELINE_FLAGS='--cflags "-O3 -march=native"': another compiler
# flag set), run alternately, each run's --kernel-times split into
#   - GEMMs and library calls: the sites whose op is of class GEMM, CONV or
#     CALL in ir/ops.def (matmul, bmm, convolutions, the chunked loss head,
#     fused attention; op_calls_library),
#   - loop kernels: every other site,
#   - outside the kernels: the optimizer step, the gradients' zeroing and
#     norm, loading the micro-batch (the report's "rest"),
# per micro-batch, medians over the rounds. Random data
# (tests/e2e/random_data.py).
# usage: bench/step_shares.sh [BUILD_DIR] [ROUNDS] [STEPS] MODEL.nn [TRAINC BUILD FLAGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} rounds=${2:-2} steps=${3:-6} nn=${4:?usage: bench/step_shares.sh [BUILD_DIR] [ROUNDS] [STEPS] MODEL.nn [FLAGS...]}
shift 4
name=$(basename "$nn" .nn)
trainc=$build/driver/trainc work=$build/bench_step_shares/$name
PY=/usr/bin/python3
source bench/quiet.sh
rm -rf "$work" && mkdir -p "$work"
"$trainc" emit "$nn" "$@" -o "$work/$name.c" >/dev/null
"$PY" tests/e2e/random_data.py "$work/$name.c" "$work/data" 1024
"$trainc" build "$nn" "$@" -o "$work/fused" >/dev/null
baseline=${BASELINE_FLAGS:---no-fuse}
eval "baseline_flags=($baseline)"
"$trainc" build "$nn" "$@" "${baseline_flags[@]}" -o "$work/unfused" >/dev/null
# the op names of library calls, from the op table
awk -F'[(,]' '/^OP\(/ { gsub(/[" ]/, "", $3); gsub(/ /, "", $4); if ($4 ~ /^(GEMM|CONV|CALL)$/) print $3 }' \
  ir/ops.def >"$work/library_ops"
wait_quiet
for r in $(seq "$rounds"); do
  for build_name in unfused fused; do
    "$work/$build_name" --data "$work/data" --steps "$steps" --quiet --kernel-times "$work/kt_${build_name}_$r.jsonl" \
      2>/dev/null
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$PY" - "$work" "$rounds" "$baseline" <<'PYEOF'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
library = set(open(f"{work}/library_ops").read().split())

def shares(path):
    lines = [json.loads(l) for l in open(path)]
    head, sites = lines[0], lines[1:]
    lib = sum(s["seconds"] for s in sites if s["op"] in library)
    loops = sum(s["seconds"] for s in sites if s["op"] not in library)
    per_op = {}
    for s in sites:
        if s["op"] not in library: per_op[s["op"]] = per_op.get(s["op"], 0) + s["seconds"]
    return head["measured"]["step"], lib, loops, head["measured"]["rest"], per_op

print(f"model {json.loads(open(f'{work}/kt_fused_1.jsonl').readline())['model']}, medians of {rounds} runs (ms a micro-batch)")
print("| build | step | GEMMs and library calls | loop kernels | outside the kernels | largest loops (ms) |")
print("|---|---|---|---|---|---|")
for build in ("unfused", "fused"):
    runs = [shares(f"{work}/kt_{build}_{r}.jsonl") for r in range(1, rounds + 1)]
    step, lib, loops, rest = (statistics.median(r[k] for r in runs) * 1e3 for k in range(4))
    ops = {op: statistics.median(r[4].get(op, 0) for r in runs) * 1e3 for op in runs[0][4]}
    top = ", ".join(f"{op} {t:.1f}" for op, t in sorted(ops.items(), key=lambda x: -x[1])[:5])
    label = sys.argv[3] if build == "unfused" else "as built"
    print(f"| {label} | {step:.1f} | {lib:.1f} ({lib / step:.0%}) | {loops:.1f} ({loops / step:.0%}) | "
          f"{rest:.1f} ({rest / step:.0%}) | {top} |")
PYEOF
