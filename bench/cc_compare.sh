#!/usr/bin/env bash
# The C compiler that builds trainers: GCC 12 (trainc's default `cc`, with
# -fvect-cost-model=very-cheap against its miscompile, tests/codegen/
# permute_loop.c) against clang-19 (-fveclib=libmvec), on the same models:
# build time, and the median step time of STEPS steps (the first 2 left out)
# over RUNS alternating runs each, at --threads THREADS. Run it on a quiet
# machine (the load average is printed before and after); OPENBLAS_CORETYPE
# and OPENBLAS_L2_SIZE are unset for the trainers.
# usage: bench/cc_compare.sh [BUILD_DIR] [RUNS] [STEPS] [THREADS]   (default build 3 12 2)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} runs=${2:-3} steps=${3:-12} threads=${4:-2}
trainc=$build/driver/trainc work=$build/bench_cc
mkdir -p "$work"
scripts/fetch-fashion-mnist "$work/fashion" >/dev/null
[[ -d $work/kjv ]] || scripts/fetch-kjv "$work/kjv" 64 >/dev/null
declare -A cflags=([gcc]="-O3 -march=native -mprefer-vector-width=512 -fvect-cost-model=very-cheap -fno-math-errno"
                   [clang]="-O3 -march=native -mprefer-vector-width=512 -fno-math-errno -fveclib=libmvec")
declare -A cc=([gcc]=gcc-12 [clang]=clang-19)
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
median_ms() { # log.jsonl batch
  /usr/bin/python3 -c '
import json, statistics, sys
r = [json.loads(l) for l in open(sys.argv[1]) if "examples_per_s" in l][2:]
print("%.1f" % (1e3 * statistics.median(int(sys.argv[2]) / x["examples_per_s"] for x in r)))' "$@"
}
for case in gpt=kjv/train=32 fashion_cnn=fashion/train=128; do
  IFS== read -r model data batch <<<"$case"
  for c in gcc clang; do
    start=$(date +%s.%N)
    "$trainc" build "examples/$model.nn" -o "$work/${model}_$c" --cc "${cc[$c]}" \
      --cflags "${cflags[$c]}" >/dev/null
    echo "$model: built by ${cc[$c]} in $(echo "$(date +%s.%N) - $start" | bc) s"
  done
  for r in $(seq "$runs"); do
    line="$model run $r:"
    for c in gcc clang; do
      env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$work/${model}_$c" --data "$work/$data" \
        --steps "$steps" --threads "$threads" --quiet --log "$work/$c.jsonl" --log-every 1
      line+=" ${cc[$c]} $(median_ms "$work/$c.jsonl" "$batch") ms/step;"
    done
    echo "$line"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
