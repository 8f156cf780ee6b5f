#!/usr/bin/env bash
# Step time of a model as built by two trainc binaries, e.g. main's and a
# branch's, to attribute a change: by default the GPT of issue 10
# (examples/gpt.nn at vocabulary 8192, context 128, width 256, batch 8, no
# dropout: torch_compare.py's "gpt"), or --model FILE. Runs alternate A, B,
# A, ... on random data (tests/e2e/random_data.py); each run's figure is the
# median step time (ms, from the `seconds` of --log-every 1, the first 3
# steps left out); the script prints the median and range over the runs.
# The load average must be below 0.5 first (bench/quiet.sh); --force runs
# anyway and says so. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset.
# --build-a/--build-b FLAGS: trainc build flags of one side (e.g. the same
# trainc with --loss-head whole against its default).
# usage: bench/gpt_ab.sh TRAINC_A TRAINC_B [--runs N] [--steps N] [--threads N] [--model FILE]
#                        [--precision fp32|bf16] [--build-a FLAGS] [--build-b FLAGS] [--force]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/quiet.sh
a=$1 b=$2
shift 2
runs=3 steps=15 threads=2 precision=fp32 force=0 build_a="" build_b="" model=""
while (($#)); do
  case $1 in
  --runs) runs=$2; shift 2 ;;
  --steps) steps=$2; shift 2 ;;
  --threads) threads=$2; shift 2 ;;
  --precision) precision=$2; shift 2 ;;
  --model) model=$2; shift 2 ;;
  --build-a) build_a=$2; shift 2 ;;
  --build-b) build_b=$2; shift 2 ;;
  --force) force=1; shift ;;
  *) echo "gpt_ab.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ -z $model ]]; then
  model=$work/gpt.nn
  sed -e 's/dropout = 0.1/dropout = 0/' -e 's/dropout(proj, 0.1)/proj/' \
    -e 's/const VOCAB = 256 /const VOCAB = 8192 /' -e 's/const T = 64 /const T = 128 /' \
    -e 's/const D = 128 /const D = 256 /' -e 's/batch 32/batch 8/' examples/gpt.nn >"$model"
  grep -q "const VOCAB = 8192" "$model" ||
    { echo "gpt_ab.sh: examples/gpt.nn changed" >&2; exit 1; }
fi
# shellcheck disable=SC2086 # the flags are words
"$a" build "$model" $build_a -o "$work/A" --keep-c "$work/A.c" >/dev/null
# shellcheck disable=SC2086
"$b" build "$model" $build_b -o "$work/B" >/dev/null
/usr/bin/python3 tests/e2e/random_data.py "$work/A.c" "$work/data" 1024
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
        seconds = [r["seconds"] for r in recs if "examples_per_s" in r]
        ms = [1e3 * (b - a) for a, b in zip(seconds, seconds[1:])][3:]
        per_run.append(statistics.median(ms))
    print("%s (%s): median %.1f ms/step, range %.1f-%.1f over %d runs" %
          (side, trainc, statistics.median(per_run), min(per_run), max(per_run), runs))
PY
