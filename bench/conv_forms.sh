#!/usr/bin/env bash
# The two forms of conv2d on examples/fashion_cnn.nn (without dropout, as
# bench/torch_compare.py times it): oneDNN's convolutions (the default) against
# im2col + one GEMM (`trainc build --conv-im2col`, the CUDA backend's form).
# ROUNDS rounds of STEPS steps each, the two trainers alternating (the order
# swapped every round); prints per form the median step time (the log's
# examples_per_s after the first logged window, as ms per step of 128) and
# its range, with the load average before and after. Waits for a quiet
# machine (bench/quiet.sh); FORCE=1 runs anyway (timings then mean nothing:
# `FORCE=1 bench/conv_forms.sh build 1 20` checks that it runs).
# usage: bench/conv_forms.sh [BUILD_DIR] [ROUNDS] [STEPS] [TRAINER FLAGS...]
#        (default: build 3 60; --threads 2 unless given)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-3}
steps=${3:-60}
shift $(($# < 3 ? $# : 3))
out=$build/bench_conv_forms
mkdir -p "$out"
source bench/quiet.sh
scripts/fetch-fashion-mnist >/dev/null
sed 's/dropout(flatten(pool2), 0.25)/flatten(pool2)/' examples/fashion_cnn.nn >"$out/fashion_cnn.nn"
"$build/driver/trainc" build "$out/fashion_cnn.nn" -o "$out/onednn" >/dev/null
"$build/driver/trainc" build "$out/fashion_cnn.nn" --conv-im2col -o "$out/im2col" >/dev/null
[[ " $* " == *" --threads "* ]] || set -- --threads 2 "$@"
if [[ ${FORCE:-0} == 1 ]]; then echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"; else wait_quiet; fi
for ((r = 1; r <= rounds; r++)); do
  order="onednn im2col"
  ((r % 2)) || order="im2col onednn"
  for form in $order; do
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$out/$form" --data data/fashion/train --quiet \
      --steps "$steps" --log-every 10 --log "$out/$form.$r.jsonl" "$@"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for form in ("onednn", "im2col"):
    ms = []
    for r in range(1, rounds + 1):
        records = [json.loads(line) for line in open("%s/%s.%d.jsonl" % (out, form, r))]
        rates = [x["examples_per_s"] for x in records if "examples_per_s" in x][1:]
        ms.append(1000 * 128 / statistics.median(rates))
    print("%-7s %8.1f ms/step (%.1f-%.1f over %d runs)" % (form, statistics.median(ms), min(ms),
                                                          max(ms), rounds))
PY
