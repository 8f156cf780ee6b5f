#!/usr/bin/env bash
# LocalSGD against synchronous data parallelism: two ranks (mpirun -np 2) on
# this machine train examples/fashion_mlp.nn on Fashion-MNIST (60k train; the
# 10k test images as the validation set, evaluated once at the end) for
# EPOCHS epochs at batch 128 per rank, with
#   sync gradients              (synchronous data parallel: one gradient all-reduce per step)
#   local_sgd K, K = 1 4 8 32   (parameters averaged every K steps)
# and reports, per configuration: syncs, bytes all-reduced per rank, seconds
# inside all-reduces, time per optimizer step (medians of REPS runs; the
# trained weights do not depend on the run, timings do) and final accuracy.
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are unset in this command only (this machine sets them;
# they selected a slower OpenBLAS sgemm kernel); each rank runs on one thread.
# Syncs, bytes and seconds come from the trainer's closing summary (they
# include the sync at the end of training, after the last logged step).
#
# `bench/localsgd.sh overlap` instead times `sync gradients` steps with the
# gradient all-reduce overlapped with backward (buckets started as backward
# finishes them; the default) and without (--no-overlap: the whole region
# after backward), on examples/fashion_localsgd.nn switched to `sync
# gradients` (Fashion-MNIST) and examples/deep_mlp.nn (random data), each
# built with several bucket sizes (trainc build --bucket). The two sides
# alternate run by run; the load average is printed before and after. ms per
# step: from the log's clock at the first step to the last, over the steps
# between (the first step's page faults left out); medians of REPS runs. The
# weights of the two sides must be bitwise equal (checked).
# usage: bench/localsgd.sh [BUILD_DIR] [EPOCHS] [REPS]   (default: build 4 3)
#        bench/localsgd.sh overlap [BUILD_DIR] [STEPS] [REPS]   (default: build 300 5;
#                                                      deep_mlp runs STEPS/30 + 2 steps)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/quiet.sh
part=sync
[[ ${1:-} != overlap ]] || { part=overlap; shift; }
build=${1:-build} epochs=${2:-4} reps=${3:-3}
[[ $part == sync ]] || { steps=${2:-300}; reps=${3:-5}; }
work=$build/bench_localsgd
mkdir -p "$work"
scripts/fetch-fashion-mnist >/dev/null
# mpi_yield_when_idle: a rank waiting in an all-reduce yields its core instead
# of spinning; on this shared 2-core machine spinning made a 2 MB all-reduce
# take ~200 ms (waiting on a descheduled peer) instead of ~14 ms.
mpi=(mpirun --oversubscribe -np 2 --bind-to none --mca btl self,vader
     --mca btl_vader_single_copy_mechanism none --mca mpi_yield_when_idle 1
     -x OPENBLAS_NUM_THREADS=1)
[[ $(id -u) -ne 0 ]] || mpi+=(--allow-run-as-root)
two_ranks() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 "${mpi[@]}" "$@"; }

overlap() {
  if [[ ! -d $work/random ]]; then # deep_mlp: random rows, fixed
    mkdir -p "$work/random"
    /usr/bin/python3 -c '
import numpy as np, sys
r = np.random.default_rng(7)
np.save(sys.argv[1] + "/x.npy", r.standard_normal((2048, 1024), dtype=np.float32))
np.save(sys.argv[1] + "/label.npy", r.integers(0, 10, size=2048, dtype=np.int32))' "$work/random"
  fi
  sed -e 's/^  local_sgd 8 .*/  sync gradients/' -e '/^  eval every/d' examples/fashion_localsgd.nn >"$work/ov_fashion.nn"
  sed -e 's/^  seed 42/  seed 42\n  sync gradients/' examples/deep_mlp.nn >"$work/ov_deep.nn"
  # model:data:steps:bucket sizes (fashion: 8KiB is one bucket a layer, 4MiB one in all;
  # deep_mlp: a layer is 4 MiB)
  local cases=("fashion:data/fashion/train:$steps:8KiB 256KiB 4MiB"
               "deep:$work/random:$((steps / 30 + 2)):1MiB 16MiB 64MiB 1GiB")
  local runs=() c name data n sizes b
  for c in "${cases[@]}"; do
    IFS=: read -r name data n sizes <<<"$c"
    for b in $sizes; do
      "$build/driver/trainc" build "$work/ov_$name.nn" -o "$work/ov_${name}_$b" --bucket "$b" \
        --keep-c "$work/ov_${name}_$b.c" >/dev/null
      runs+=("$name:$data:$n:$b")
    done
  done
  wait_quiet
  local r run side flag
  for r in $(seq "$reps"); do
    for run in "${runs[@]}"; do
      IFS=: read -r name data n b <<<"$run"
      for side in overlap whole; do
        flag=()
        [[ $side == overlap ]] || flag=(--no-overlap)
        two_ranks "$work/ov_${name}_$b" --data "$data" --steps "$n" --log-every 1 "${flag[@]}" \
          --log "$work/ov_${name}_$b.$side.r$r.jsonl" --save "$work/ov_${name}_$b.$side.safetensors" \
          >/dev/null 2>"$work/ov_${name}_$b.$side.r$r.err" </dev/null
      done
      cmp -s "$work/ov_${name}_$b.overlap.safetensors" "$work/ov_${name}_$b.whole.safetensors" ||
        { echo "$name, buckets $b: overlapped and whole all-reduces gave different weights"; exit 1; }
    done
  done
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  /usr/bin/python3 - "$work" "$reps" "${runs[@]}" <<'PY'
import json, statistics, sys
work, reps, runs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def timing(stem, r):
    """ms per step and ms inside all-reduces per step, after the first step."""
    recs = [json.loads(l) for l in open(f"{stem}.r{r}.jsonl") if '"loss"' in l]
    first, last = recs[0], recs[-1]
    steps = last["step"] - first["step"]
    return tuple(1e3 * (last[k] - first[k]) / steps for k in ("seconds", "comm_seconds"))
print("| model | bucket size | buckets | ms per step, overlap | ms per step, --no-overlap |"
      " ms in all-reduce per step, overlap | ms in all-reduce per step, --no-overlap |")
print("|---|---|---|---|---|---|---|")
for run in runs:
    name, _, n, b = run.split(":")
    stem = f"{work}/ov_{name}_{b}"
    buckets = open(f"{stem}.c").read().count("trc_step_bucket_ready(s")
    cols = []
    for side in ("overlap", "whole"):
        t = [timing(f"{stem}.{side}", r) for r in range(1, reps + 1)]
        cols.append((statistics.median(x[0] for x in t), statistics.median(x[1] for x in t)))
    print(f"| {name} ({n} steps) | {b} | {buckets} | {cols[0][0]:.1f} | {cols[1][0]:.1f} |"
          f" {cols[0][1]:.1f} | {cols[1][1]:.1f} |")
PY
}
if [[ $part == overlap ]]; then
  overlap
  exit 0
fi

configs=("sync gradients" "local_sgd 1" "local_sgd 4" "local_sgd 8" "local_sgd 32")
for i in "${!configs[@]}"; do
  # the example's model and policy, evaluated at the end only, plus the sync setting
  sed -e '/^  eval every/d' -e "s/^  epochs .*/  epochs $epochs/" \
      -e "s/^  seed 42/  seed 42\n  ${configs[$i]}\n  log_every 1000000/" \
      examples/fashion_mlp.nn >"$work/c$i.nn"
  "$build/driver/trainc" build --mpi "$work/c$i.nn" -o "$work/c$i" >/dev/null
done

for r in $(seq "$reps"); do
  for i in "${!configs[@]}"; do
    two_ranks "$work/c$i" --data data/fashion/train --eval-data data/fashion/test \
      --log "$work/c$i.r$r.jsonl" >/dev/null 2>"$work/c$i.r$r.err" </dev/null
  done
done

/usr/bin/python3 - "$work" "$reps" "${configs[@]}" <<'PY'
import json, re, statistics, sys
work, reps, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
summary = re.compile(r"trained (\d+) steps .* in ([0-9.]+) s, \d+ examples/s on 2 ranks, (\d+) syncs, ([0-9.]+) MB in ([0-9.]+) s")
print("| configuration | syncs | MB all-reduced per rank | s in all-reduce | ms per step | test accuracy |")
print("|---|---|---|---|---|---|")
for i, name in enumerate(configs):
    runs = range(1, reps + 1)
    sums = [summary.search(open(f"{work}/c{i}.r{r}.err").read()).groups() for r in runs]
    accs = {[json.loads(l) for l in open(f"{work}/c{i}.r{r}.jsonl") if "eval_accuracy" in l][-1]
            ["eval_accuracy"] for r in runs}
    assert len(accs) == 1, f"{name}: runs disagree on accuracy {accs}"
    assert len({s[2:4] for s in sums}) == 1, f"{name}: runs disagree on syncs or bytes"
    steps, syncs, mb = int(sums[0][0]), sums[0][2], sums[0][3]
    comm = statistics.median(float(s[4]) for s in sums)
    step_ms = statistics.median(1e3 * float(s[1]) / steps for s in sums)
    print(f"| `{name}` | {syncs} | {mb} | {comm:.2f} | {step_ms:.2f} | {accs.pop():.4f} |")
PY
