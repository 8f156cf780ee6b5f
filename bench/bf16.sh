#!/usr/bin/env bash
# fp32 against `--precision bf16` on examples/fashion_mlp.nn and
# examples/fashion_cnn.nn (Fashion-MNIST) and examples/gpt.nn (the King
# James Bible): ROUNDS rounds, each training
# both models in both precisions with their compiled defaults, the order of
# fp32 and bf16 alternating from round to round (a machine's drift hits
# both). Prints per model and precision the median wall time of a run, the
# median training rate from the logs, and the final evaluation of each run
# (fashion: test accuracy; gpt: test loss in nats/byte). The benchmark's own
# command unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (bench/fashion_mlp.sh).
# Extra flags go to every run: `bench/bf16.sh build 1 --steps 20` is a quick
# check that it runs (timings on a busy machine mean nothing).
# usage: bench/bf16.sh [BUILD_DIR] [ROUNDS] [TRAINER FLAGS...]   (default: build 3)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-3}
shift $(($# < 2 ? $# : 2))
out=$build/bench_bf16
mkdir -p "$out"
scripts/fetch-fashion-mnist >/dev/null
scripts/fetch-kjv data/kjv >/dev/null
"$build/driver/trainc" build examples/fashion_mlp.nn -o "$out/fashion_mlp"
"$build/driver/trainc" build examples/fashion_cnn.nn -o "$out/fashion_cnn"
"$build/driver/trainc" build examples/gpt.nn -o "$out/gpt"
fashion="--data data/fashion/train --eval-data data/fashion/test"
declare -A data=([fashion_mlp]=$fashion [fashion_cnn]=$fashion
                 [gpt]="--data data/kjv/train --eval-data data/kjv/test")
for ((r = 1; r <= rounds; r++)); do
  order="fp32 bf16"
  ((r % 2)) || order="bf16 fp32"
  for model in fashion_mlp fashion_cnn gpt; do
    for p in $order; do
      log=$out/$model.$p.$r.jsonl
      start=$(date +%s.%N)
      # shellcheck disable=SC2086 # the data flags are words
      env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$out/$model" ${data[$model]} --quiet \
        --precision "$p" --log "$log" "$@"
      echo "$(date +%s.%N) - $start" | bc >"$log.seconds"
      echo "round $r: $model $p done in $(cat "$log.seconds") s"
    done
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
print("%-12s %-5s %10s %14s  %s" % ("model", "prec", "median s", "median rate", "final eval per run"))
for model in ("fashion_mlp", "fashion_cnn", "gpt"):
    for p in ("fp32", "bf16"):
        seconds, rates, finals = [], [], []
        for r in range(1, rounds + 1):
            log = "%s/%s.%s.%d.jsonl" % (out, model, p, r)
            seconds.append(float(open(log + ".seconds").read()))
            records = [json.loads(line) for line in open(log)]
            rates += [x["examples_per_s"] for x in records if "examples_per_s" in x]
            evals = [x for x in records if "eval_loss" in x]
            key = "eval_loss" if model == "gpt" else "eval_accuracy"
            finals.append("%.4f" % evals[-1][key] if evals else "-")
        rate = "%.1f ex/s" % statistics.median(rates) if rates else "-"
        print("%-12s %-5s %10.2f %14s  %s" % (model, p, statistics.median(seconds), rate,
                                            " ".join(finals)))
print("final eval: fashion test accuracy, gpt test loss (nats/byte)")
PY
