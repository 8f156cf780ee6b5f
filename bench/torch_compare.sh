#!/usr/bin/env bash
# trainc against Debian's PyTorch 1.13 on the same models (step time, peak RSS);
# see bench/torch_compare.py for what is measured and how. Results: bench/RESULTS.md.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for this command.
# usage: bench/torch_compare.sh [BUILD_DIR] [torch_compare.py options: --runs N --models a,b
#        --blas pthread,openmp --threads N (default 2, both sides) --force]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
exec env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
  /usr/bin/python3 bench/torch_compare.py "$build/driver/trainc" "$build/bench_torch" "$@"
