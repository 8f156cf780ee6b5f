#!/usr/bin/env bash
# The loss head's chunk as a time-memory trade (docs/planner.md, *The
# chunk as a choice*), measured on random tokens (a step's time does not
# depend on them). Two sides of one trainc, alternating A, B, A, ... each
# round; each run is --kernel-times over --steps steps (the first not
# timed), and the script prints per side the head's measured and predicted
# time a micro-batch and the step's, one line a run.
#   --chunks "256 128 64": one side per --loss-head value, checkpoint off
#     (the head's price against its chunk: passes/cost.c's pass_seconds);
#   --budget SIZE: two sides, the default chunk and --loss-head auto, both
#     planned for SIZE (what the chunk's choice buys at a tight budget).
# The load average must be below 0.5 first (bench/quiet.sh); --force runs
# anyway and says so. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset.
# usage: bench/head_chunk.sh TRAINC MODEL.nn (--chunks LIST | --budget SIZE)
#                            [--rounds N] [--steps N] [--threads N] [--force]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/quiet.sh
trainc=$1 model=$2
shift 2
chunks="" budget="" rounds=2 steps=5 threads=2 force=0
while (($#)); do
  case $1 in
  --chunks) chunks=$2; shift 2 ;;
  --budget) budget=$2; shift 2 ;;
  --rounds) rounds=$2; shift 2 ;;
  --steps) steps=$2; shift 2 ;;
  --threads) threads=$2; shift 2 ;;
  --force) force=1; shift ;;
  *) echo "head_chunk.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -n $chunks || -n $budget ]] || { echo "head_chunk.sh: give --chunks LIST or --budget SIZE" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sides=()
if [[ -n $budget ]]; then
  for head in chunked auto; do
    "$trainc" build "$model" --budget "$budget" --loss-head $head -o "$work/$head" --keep-c "$work/$head.c" >/dev/null
    "$trainc" plan "$model" --budget "$budget" --loss-head $head | grep -E '^  total peak|loss head' | sed "s/^/$head: /"
    sides+=("$head")
  done
else
  for c in $chunks; do
    "$trainc" build "$model" --policy off --loss-head "$c" -o "$work/$c" --keep-c "$work/$c.c" >/dev/null
    sides+=("$c")
  done
fi
/usr/bin/python3 tests/e2e/random_data.py "$work/${sides[0]}.c" "$work/data" 256
if ((force)); then
  echo "--force: not waiting for a quiet machine; load average $(cut -d' ' -f1-3 /proc/loadavg)"
else
  wait_quiet
fi
for ((i = 0; i < rounds; i++)); do
  for side in "${sides[@]}"; do
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$work/$side" --data "$work/data" --steps "$steps" \
      --threads "$threads" --quiet --kernel-times "$work/kt.jsonl" >/dev/null 2>"$work/stderr" ||
      { cat "$work/stderr" >&2; exit 1; }
    /usr/bin/python3 - "$work/kt.jsonl" "$side" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
run, head = rows[0], [r for r in rows[1:] if r["op"] == "linear_cross_entropy"][0]
print("%-8s head %8.2f ms (predicted %8.2f)   step %8.1f ms (predicted %8.1f)" % (
    sys.argv[2], 1e3 * head["seconds"], 1e3 * head["predicted"], 1e3 * run["measured"]["step"],
    1e3 * run["predicted"]["step"]), flush=True)
PY
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
