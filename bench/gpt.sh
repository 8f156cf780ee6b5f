#!/usr/bin/env bash
# Trains examples/gpt.nn with its compiled defaults (2000 steps of 32 x 64
# bytes) on the King James Bible (scripts/fetch-kjv), then prints the final
# test loss next to the text's unigram entropy (computed here, from the
# bytes), the step rate, and a sample. The benchmark's own command unsets
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE.
# usage: bench/gpt.sh [BUILD_DIR] [TRAINER FLAGS...]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
scripts/fetch-kjv data/kjv >/dev/null
"$build/driver/trainc" build examples/gpt.nn -o "$build/bench_gpt"
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
  "$build/bench_gpt" --data data/kjv/train --eval-data data/kjv/test --quiet \
  --log "$build/bench_gpt.jsonl" --save "$build/bench_gpt.safetensors" "$@"
python3 - data/kjv/kjv.txt "$build/bench_gpt.jsonl" <<'PY'
import collections, json, math, statistics, sys
text = open(sys.argv[1], "rb").read()
entropy = -sum(c / len(text) * math.log(c / len(text)) for c in collections.Counter(text).values())
records = [json.loads(line) for line in open(sys.argv[2])]
evals = [r for r in records if "eval_loss" in r]
rates = [r["examples_per_s"] for r in records if "examples_per_s" in r]
print("unigram entropy of the text: %.4f nats/byte (%.3f bits)" % (entropy, entropy / math.log(2)))
print("test loss at step %d: %.4f nats/byte (%.3f bits), accuracy %.4f" %
      (evals[-1]["step"], evals[-1]["eval_loss"], evals[-1]["eval_loss"] / math.log(2), evals[-1]["eval_accuracy"]))
print("median %.1f sequences/s over %d log records" % (statistics.median(rates), len(rates)))
PY
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
  "$build/bench_gpt" --steps 0 --init "$build/bench_gpt.safetensors" --quiet \
  --sample 300 --prompt "And God said" --temperature 0.8
