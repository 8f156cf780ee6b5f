#!/usr/bin/env bash
# Trains examples/fashion_cnn.nn on all of Fashion-MNIST (60k train, 10k test)
# with its compiled defaults (12 epochs) and prints the per-epoch evaluation
# and the time. The benchmark's own command unsets OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE (this machine sets them; they select a slower sgemm kernel).
# usage: bench/fashion_cnn.sh [BUILD_DIR] [TRAINER FLAGS...]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
scripts/fetch-fashion-mnist >/dev/null
"$build/driver/trainc" build examples/fashion_cnn.nn -o "$build/bench_fashion_cnn"
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
  "$build/bench_fashion_cnn" --data data/fashion/train --eval-data data/fashion/test --quiet \
  --log "$build/bench_fashion_cnn.jsonl" "$@"
tail -n 1 "$build/bench_fashion_cnn.jsonl"
