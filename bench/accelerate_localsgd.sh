#!/usr/bin/env bash
# Accelerate's LocalSGD against trainc's, side by side: two processes on this
# machine train examples/fashion_mlp.nn's MLP on Fashion-MNIST (60k images, one
# shard of each epoch per process, batch 128 per process, AdamW with the
# example's cosine schedule, from the same initial weights) for EPOCHS epochs
# with gradient accumulation A = 2 and LocalSGD K = 8, and report syncs, MB
# all-reduced per process, the training loop's wall time, ms per optimizer step
# and the test accuracy (10k images, after training).
#   accelerate  bench/accelerate_localsgd.py under torchrun (gloo, one thread a
#               process): Accelerate's example, local_sgd.step() once per batch,
#               so it averages every K batches = every K/A optimizer steps.
#   trainc      `trainc build --mpi` of the same model under mpirun -np 2 (one
#               thread a rank), --accumulate A and --local-sgd K, which counts
#               optimizer steps (K*A batches between averages), and --local-sgd
#               K/A, which averages as often as Accelerate does.
# Rounds alternate the sides; medians of REPS; the load average is printed
# before and after. Peers from scripts/install-peers.
# usage: bench/accelerate_localsgd.sh [BUILD_DIR] [EPOCHS] [REPS]   (default: build 2 3)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/quiet.sh
build=${1:-build} epochs=${2:-2} reps=${3:-3}
k=8 a=2
work=$build/bench_accelerate
mkdir -p "$work"
scripts/install-peers --quiet
scripts/fetch-fashion-mnist >/dev/null
py=${TRAINC_PEERS:-/opt/trainc-peers}/bin/python
sed -e '/^  eval every/d' -e "s/^  epochs .*/  epochs $epochs/" \
    -e "s/^  seed 42/  seed 42\n  accumulate $a\n  log_every 1000000/" \
    examples/fashion_localsgd.nn >"$work/lsgd.nn"
"$build/driver/trainc" build --mpi "$work/lsgd.nn" -o "$work/lsgd" >/dev/null
"$work/lsgd" --steps 0 --save "$work/w0.safetensors" --quiet
"$work/lsgd" --help >"$work/help.txt"
mpi=(mpirun --oversubscribe -np 2 --bind-to none --mca btl self,vader
     --mca btl_vader_single_copy_mechanism none --mca mpi_yield_when_idle 1)
[[ $(id -u) -ne 0 ]] || mpi+=(--allow-run-as-root)

trainc_side() { # K, round
  "${mpi[@]}" "$work/lsgd" --data data/fashion/train --eval-data data/fashion/test \
    --init "$work/w0.safetensors" --threads 1 --local-sgd "$1" --log "$work/trainc_k$1.r$2.jsonl" \
    >/dev/null 2>"$work/trainc_k$1.r$2.err" </dev/null
}
accelerate_side() { # round
  OMP_NUM_THREADS=1 "$py" -m torch.distributed.run --standalone --nproc_per_node 2 \
    bench/accelerate_localsgd.py "$work/w0.safetensors" "$work/help.txt" data/fashion \
    "$epochs" "$k" "$a" >"$work/accelerate.r$1.json" 2>"$work/accelerate.r$1.err" </dev/null
}

wait_quiet
for r in $(seq "$reps"); do
  accelerate_side "$r"
  trainc_side "$k" "$r"
  trainc_side "$((k / a))" "$r"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

"$py" - "$work" "$reps" "$k" "$a" <<'PY'
import json, re, statistics, sys
work, reps, k, a = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rounds = range(1, reps + 1)
summary = re.compile(r"trained (\d+) steps .* in ([0-9.]+) s, \d+ examples/s on 2 ranks, "
                     r"(\d+) syncs, ([0-9.]+) MB in ([0-9.]+) s")
rows = []
acc = [json.loads(open(f"{work}/accelerate.r{r}.json").read().strip().splitlines()[-1])
       for r in rounds]
rows.append((f"Accelerate LocalSGD(local_sgd_steps={k}), gradient_accumulation_steps={a}",
             acc[0]["optimizer_steps"], acc[0]["syncs"], acc[0]["mb_allreduced"],
             statistics.median(x["seconds"] for x in acc),
             statistics.median(x["accuracy"] for x in acc)))
for kk in (k, k // a):
    sums = [summary.search(open(f"{work}/trainc_k{kk}.r{r}.err").read()).groups() for r in rounds]
    accs = [[json.loads(l) for l in open(f"{work}/trainc_k{kk}.r{r}.jsonl") if "eval_accuracy" in l]
            [-1]["eval_accuracy"] for r in rounds]
    rows.append((f"trainc --local-sgd {kk} --accumulate {a}", int(sums[0][0]), int(sums[0][2]),
                 float(sums[0][3]), statistics.median(float(s[1]) for s in sums),
                 statistics.median(accs)))
base = rows[0][4]
print("| run | optimizer steps | syncs | MB all-reduced per process | training s (median) |"
      " ms per optimizer step | speed-up vs Accelerate | test accuracy |")
print("|---|---|---|---|---|---|---|---|")
for name, steps, syncs, mb, s, accuracy in rows:
    print(f"| {name} | {steps} | {syncs} | {mb:.1f} | {s:.2f} | {1e3 * s / steps:.2f} |"
          f" {base / s:.2f}x | {accuracy:.4f} |")
PY
