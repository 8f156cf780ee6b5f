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
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are unset in this command only (see
# DESIGN.md); each rank runs OpenBLAS on one thread (2 ranks, 2 cores).
# Syncs, bytes and seconds come from the trainer's closing summary (they
# include the sync at the end of training, after the last logged step).
# usage: bench/localsgd.sh [BUILD_DIR] [EPOCHS] [REPS]   (default: build 4 3)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} epochs=${2:-4} reps=${3:-3}
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
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 "${mpi[@]}" \
      "$work/c$i" --data data/fashion/train --eval-data data/fashion/test \
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
