#!/usr/bin/env bash
# The LLVM backend against the C backend, on a quiet machine:
#  - compile time of each path for fashion_mlp, gpt and gpt124m: `trainc
#    build` (the C compiler), `trainc build --backend llvm` (LLVM object +
#    link), and `trainc run --steps 0` (JIT compile, then the runtime's
#    start: arena, weights initialized, no step), and of that the JIT's own
#    compile (--time-phases: LLVM's module, optimize and codegen);
#  - time to the first step under `trainc run` (--steps 1: the trainer's
#    "time to first step" line, from the process's start to step 1's);
#  - the median step time of the C-built and LLVM-built trainers, run
#    alternately ROUNDS times each (from each log record's examples_per_s;
#    the first step of a run left out).
# Data: Fashion-MNIST, the KJV text (T = 64) and random GPT-2 token ids.
# usage: bench/llvm.sh [BUILD_DIR] [STEPS] [ROUNDS] [MODEL...]
#   (default: build, 10, 3, fashion_mlp gpt gpt124m)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} steps=${2:-10} rounds=${3:-3}
shift $(($# < 3 ? $# : 3))
models=("$@")
((${#models[@]})) || models=(fashion_mlp gpt gpt124m)
trainc=$build/driver/trainc
work=$build/bench_llvm
mkdir -p "$work/tokens"
scripts/fetch-fashion-mnist "$work/fashion" >/dev/null
[[ -d $work/kjv ]] || scripts/fetch-kjv "$work/kjv" 64 >/dev/null
/usr/bin/python3 -c '
import numpy as np, sys
r = np.random.default_rng(7)
t = r.integers(0, 50257, size=(64, 65), dtype=np.int32)
np.save(sys.argv[1] + "/tokens.npy", t[:, :64]); np.save(sys.argv[1] + "/targets.npy", t[:, 1:])' "$work/tokens"

# LLVM's seconds (module + optimize + codegen) from `trainc run --time-phases`
jit_compile() { # model data
  "$trainc" run --time-phases "$1" --data "$2" --steps 0 --quiet 2>&1 >/dev/null |
    awk '/^LLVM seconds:/ { print $4 + $6 + $8 }'
}

# The trainer's "time to first step" (seconds from the process's start)
first_step() { # model data
  "$trainc" run "$1" --data "$2" --steps 1 2>&1 >/dev/null |
    awk '/^time to first step:/ { print $5 }'
}

seconds() { # command...: its wall-clock seconds
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}

median_step() { # log.jsonl batch: median seconds per step, first step left out
  sed -n 's/.*"examples_per_s":\([0-9.e+-]*\).*/\1/p' "$1" | tail -n +2 | awk -v b="$2" '{ print b / $1 }' |
    sort -g | awk '{ s[NR] = $1 } END { printf "%.4f", NR % 2 ? s[(NR + 1) / 2] : (s[NR / 2] + s[NR / 2 + 1]) / 2 }'
}

printf "%-12s %10s %10s %10s %12s %12s %12s %12s\n" model "cc (s)" "llvm (s)" "jit (s)" \
  "jit compile" "first step" "C step (s)" "LLVM step (s)"
declare -A data_of=([fashion_mlp]=fashion/train [gpt]=kjv/train [gpt124m]=tokens)
for name in "${models[@]}"; do
  data=$work/${data_of[$name]} model=examples/$name.nn
  batch=$(sed -n 's/^ *batch \([0-9]*\).*/\1/p' "$model" | head -n 1)
  cc=$(seconds "$trainc" build "$model" -o "$work/$name.c")
  llvm=$(seconds "$trainc" build --backend llvm "$model" -o "$work/$name.llvm")
  jit=$(seconds "$trainc" run "$model" --data "$data" --steps 0 --quiet)
  compile=$(jit_compile "$model" "$data")
  first=$(first_step "$model" "$data")
  c_steps=() llvm_steps=()
  for ((r = 0; r < rounds; r++)); do
    for how in c llvm; do
      "$work/$name.$how" --data "$data" --steps "$steps" --log-every 1 --quiet --log "$work/$name.$how.jsonl"
      m=$(median_step "$work/$name.$how.jsonl" "$batch")
      if [[ $how == c ]]; then c_steps+=("$m"); else llvm_steps+=("$m"); fi
    done
  done
  printf "%-12s %10.2f %10.2f %10.2f %12.2f %12.2f %12s %12s\n" "$name" "$cc" "$llvm" "$jit" \
    "$compile" "$first" \
    "$(printf '%s\n' "${c_steps[@]}" | sort -g | head -n 1)" "$(printf '%s\n' "${llvm_steps[@]}" | sort -g | head -n 1)"
done
echo "(step times: the best of $rounds alternating runs' medians over $steps steps)"
