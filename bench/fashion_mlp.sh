#!/usr/bin/env bash
# Trains examples/fashion_mlp.nn on all of Fashion-MNIST (60k train, 10k test)
# with its compiled defaults and prints the per-epoch evaluation.
# The benchmark's own command unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
# (this machine sets them; they select a slower sgemm kernel).
# usage: bench/fashion_mlp.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
scripts/fetch-fashion-mnist >/dev/null
"$build/driver/trainc" build examples/fashion_mlp.nn -o "$build/bench_fashion"
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
  "$build/bench_fashion" --data data/fashion/train --eval-data data/fashion/test --quiet \
  --log "$build/bench_fashion.jsonl"
