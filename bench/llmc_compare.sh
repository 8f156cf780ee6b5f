#!/usr/bin/env bash
# GPT-2 124M training steps: trainc's examples/gpt124m.nn (dropout edited out)
# against llm.c's CPU trainer train_gpt2.c, both at B = 4, T = 64, fp32, AdamW,
# on random weights and random token ids (a step's time does not depend on
# them). llm.c is built here, in a temporary folder, from its public source
# (https://github.com/karpathy/llm.c, given as a checkout or a bare git
# directory), with its own flags -Ofast -march=native -fopenmp and run with 2
# OpenMP threads; nothing of it is kept. Its loop is shortened to STEPS+1
# steps and its text sampling left out (sed on the main loop only; its
# kernels are untouched). Reported: median step time, tokens/s and effective
# GFLOP/s (6 x 124.4M parameters x tokens/s) of each, alternating runs.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for both.
# usage: bench/llmc_compare.sh LLMC_SOURCE [BUILD_DIR] [RUNS] [STEPS]   (defaults: build, 3, 10)
set -euo pipefail
llmc=$(realpath "$1")
cd "$(dirname "$0")/.."
build=${2:-build} runs=${3:-3} steps=${4:-10}
work=$(mktemp -d /tmp/llmc_compare.XXXXXX)
trap 'rm -rf "$work"' EXIT
PY=/usr/bin/python3
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- llm.c, built from its source in $work/llmc ----
mkdir -p "$work/llmc"
if [[ -d $llmc/.git || -f $llmc/train_gpt2.c ]]; then
  cp -r "$llmc/." "$work/llmc"
else # a bare git directory (as `fetch` leaves it)
  git --git-dir="$llmc" archive HEAD | tar -x -C "$work/llmc"
fi
sed -i -e "s/for (int step = 0; step <= 40; step++)/for (int step = 0; step <= $steps; step++)/" \
  -e 's/if (step > 0 \&\& step % 20 == 0)/if (0)/' "$work/llmc/train_gpt2.c"
grep -q "step <= $steps;" "$work/llmc/train_gpt2.c" || { echo "llmc_compare: train_gpt2.c's loop not found"; exit 1; }
gcc -Ofast -march=native -fopenmp -I"$work/llmc" "$work/llmc/train_gpt2.c" -o "$work/llmc/train_gpt2" -lm
"$PY" - "$work/llmc" <<'PY'
import sys, numpy as np
d = sys.argv[1]
L, C, NH, V, Vp, maxT = 12, 768, 12, 50257, 50304, 1024
rng = np.random.default_rng(0)
header = np.zeros(256, np.int32)
header[:8] = [20240326, 3, maxT, V, L, NH, C, Vp]
sizes = [Vp * C, maxT * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C, L * C, L * C,
         L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C, C, C]
ones = {2, 8, 14}  # layernorm weights
with open(f"{d}/gpt2_124M.bin", "wb") as f:
    header.tofile(f)
    for i, n in enumerate(sizes):
        (np.ones(n, np.float32) if i in ones else (rng.standard_normal(n) * 0.02).astype(np.float32)).tofile(f)
import os
os.makedirs(f"{d}/dev/data/tinyshakespeare", exist_ok=True)
for split in ("train", "val"):
    tokens = rng.integers(0, V, 200_000).astype(np.uint16)
    h = np.zeros(256, np.int32)
    h[:3] = [20240520, 1, len(tokens)]
    with open(f"{d}/dev/data/tinyshakespeare/tiny_shakespeare_{split}.bin", "wb") as f:
        h.tofile(f)
        tokens.tofile(f)
PY

# ---- trainc ----
mkdir -p "$work/trainc/data"
sed -e 's/dropout = 0.1/dropout = 0/' -e 's/dropout(proj, 0.1)/proj/' examples/gpt124m.nn >"$work/trainc/gpt124m.nn"
"$PY" -c '
import sys, numpy as np
r = np.random.default_rng(0)
for k in ("tokens", "targets"): np.save(f"{sys.argv[1]}/{k}.npy", r.integers(0, 50257, (64, 64), dtype=np.int32))' "$work/trainc/data"
"$build/driver/trainc" build "$work/trainc/gpt124m.nn" -o "$work/trainc/gpt124m" >/dev/null

median() { sort -g | awk '{ s[NR] = $1 } END { m = NR % 2 ? s[(NR + 1) / 2] : (s[NR / 2] + s[NR / 2 + 1]) / 2; printf "%.1f", m }'; }
tc=() lc=()
for ((r = 1; r <= runs; r++)); do
  (cd "$work/llmc" && OMP_NUM_THREADS=2 ./train_gpt2 >"$work/llmc.out")
  # step 0 touches fresh memory: left out, as on the trainc side
  l=$(sed -n 's/^step \([0-9]*\): train loss .* (took \(.*\) ms)/\1 \2/p' "$work/llmc.out" | awk '$1 > 0 { print $2 }' | median)
  "$work/trainc/gpt124m" --data "$work/trainc/data" --steps "$steps" --log-every 1 --quiet --log "$work/trainc.jsonl"
  t=$(sed -n 's/.*"examples_per_s":\([0-9.e+-]*\).*/\1/p' "$work/trainc.jsonl" | tail -n +2 | awk '{ print 4000 / $1 }' | median)
  echo "run $r: trainc $t ms/step, llm.c $l ms/step"
  tc+=("$t") lc+=("$l")
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
t=$(printf '%s\n' "${tc[@]}" | median) l=$(printf '%s\n' "${lc[@]}" | median)
awk -v t="$t" -v l="$l" -v tr="${tc[*]}" -v lr="${lc[*]}" 'BEGIN {
  n = 124439808; tok = 4 * 64
  printf "| side | ms/step (median; runs) | tokens/s | effective GFLOP/s |\n|---|---|---|---|\n"
  printf "| trainc | %.1f (%s) | %.0f | %.1f |\n", t, tr, tok / (t / 1000), 6 * n * tok / (t / 1000) / 1e9
  printf "| llm.c train_gpt2.c | %.1f (%s) | %.0f | %.1f |\n", l, lr, tok / (l / 1000), 6 * n * tok / (l / 1000) / 1e9
  printf "trainc / llm.c tokens/s: %.2fx\n", l / t }'
