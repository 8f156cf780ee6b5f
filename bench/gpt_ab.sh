#!/usr/bin/env bash
# Step time of the GPT of issue 10 (examples/gpt.nn at vocabulary 8192,
# context 128, width 256, batch 8, no dropout: torch_compare.py's "gpt") as
# built by two trainc binaries, e.g. main's and a branch's, to attribute a
# change. Runs alternate A, B, A, ... on random tokens; each run's figure is
# the median step time (ms, from examples_per_s of --log-every 1, the first
# 3 steps left out); the script prints the median and range over the runs.
# The load average must be below 0.5 first (bench/quiet.sh); --force runs
# anyway and says so. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset.
# --build-a/--build-b FLAGS: trainc build flags of one side (e.g. the same
# trainc with --loss-head whole against its default).
# usage: bench/gpt_ab.sh TRAINC_A TRAINC_B [--runs N] [--steps N] [--threads N]
#                        [--precision fp32|bf16] [--build-a FLAGS] [--build-b FLAGS] [--force]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/quiet.sh
a=$1 b=$2
shift 2
runs=3 steps=15 threads=2 precision=fp32 force=0 build_a="" build_b=""
while (($#)); do
  case $1 in
  --runs) runs=$2; shift 2 ;;
  --steps) steps=$2; shift 2 ;;
  --threads) threads=$2; shift 2 ;;
  --precision) precision=$2; shift 2 ;;
  --build-a) build_a=$2; shift 2 ;;
  --build-b) build_b=$2; shift 2 ;;
  --force) force=1; shift ;;
  *) echo "gpt_ab.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed -e 's/dropout = 0.1/dropout = 0/' -e 's/dropout(proj, 0.1)/proj/' \
  -e 's/const VOCAB = 256 /const VOCAB = 8192 /' -e 's/const T = 64 /const T = 128 /' \
  -e 's/const D = 128 /const D = 256 /' -e 's/batch 32/batch 8/' examples/gpt.nn >"$work/gpt.nn"
grep -q "const VOCAB = 8192" "$work/gpt.nn" ||
  { echo "gpt_ab.sh: examples/gpt.nn changed" >&2; exit 1; }
# shellcheck disable=SC2086 # the flags are words
"$a" build "$work/gpt.nn" $build_a -o "$work/A" >/dev/null
# shellcheck disable=SC2086
"$b" build "$work/gpt.nn" $build_b -o "$work/B" >/dev/null
mkdir -p "$work/data"
/usr/bin/python3 - "$work/data" <<'PY'
import sys, numpy as np
r = np.random.default_rng(1)
for k in ("tokens", "targets"):
    np.save(f"{sys.argv[1]}/{k}.npy", r.integers(0, 8192, (1024, 128), dtype=np.int32))
PY
if ((force)); then
  echo "--force: not waiting for a quiet machine; load average $(cut -d' ' -f1-3 /proc/loadavg)"
else
  wait_quiet
fi
for ((i = 0; i < runs; i++)); do
  for side in A B; do
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$work/$side" --data "$work/data" \
      --steps "$steps" --threads "$threads" --precision "$precision" --log-every 1 --log "$work/$side.$i.jsonl" \
      --quiet >/dev/null
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$work" "$runs" "$a" "$b" <<'PY'
import json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
for side, trainc in (("A", sys.argv[3]), ("B", sys.argv[4])):
    per_run = []
    for i in range(runs):
        recs = [json.loads(l) for l in open(f"{work}/{side}.{i}.jsonl")]
        ms = [8000.0 / r["examples_per_s"] for r in recs if "examples_per_s" in r][3:]
        per_run.append(statistics.median(ms))
    print("%s (%s): median %.1f ms/step, range %.1f-%.1f over %d runs" %
          (side, trainc, statistics.median(per_run), min(per_run), max(per_run), runs))
PY
