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
# usage: bench/localsgd.sh [BUILD_DIR] [EPOCHS] [REPS]   (default: build 3 3)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} epochs=${2:-3} reps=${3:-3}
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
      "$work/c$i" --data data/fashion/train --eval-data data/fashion/test --quiet \
      --log "$work/c$i.r$r.jsonl" >/dev/null
  done
done

/usr/bin/python3 - "$work" "$reps" "${configs[@]}" <<'PY'
import json, statistics, sys
work, reps, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("| configuration | syncs | MB all-reduced per rank | s in all-reduce | ms per step | test accuracy |")
print("|---|---|---|---|---|---|")
rows = []
for i, name in enumerate(configs):
    runs = [[json.loads(l) for l in open(f"{work}/c{i}.r{r}.jsonl")] for r in range(1, reps + 1)]
    last = [[x for x in run if "loss" in x][-1] for run in runs]
    evals = [[x for x in run if "eval_accuracy" in x][-1] for run in runs]
    accs = {e["eval_accuracy"] for e in evals}
    assert len(accs) == 1, f"{name}: runs disagree on accuracy {accs}"
    comm = statistics.median(x["comm_seconds"] for x in last)
    step_ms = statistics.median(1e3 * x["seconds"] / x["step"] for x in last)
    print(f"| `{name}` | {last[0]['syncs']} | {last[0]['comm_bytes'] / 1e6:.1f} | {comm:.2f} | "
          f"{step_ms:.2f} | {accs.pop():.4f} |")
PY
