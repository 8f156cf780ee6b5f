#!/usr/bin/env bash
# trainc against upstream PyTorch 2 (eager, torch.compile, bf16 autocast) and
# JAX (jax.jit, fp32 and bf16 mixed precision) on the same models (step time,
# peak RSS); see bench/torch_compare.py for what is measured and how. Results:
# bench/RESULTS.md. The peers come from the virtual environment of
# scripts/install-peers (made first if missing).
# usage: bench/torch_compare.sh [BUILD_DIR] [torch_compare.py options: --runs N --models a,b
#        --precision fp32,bf16 --peers eager,compile,jax --threads N (default 2) --force]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
scripts/install-peers --quiet
py=${TRAINC_PEERS:-/opt/trainc-peers}/bin/python
exec "$py" bench/torch_compare.py "$build/driver/trainc" "$build/bench_torch" "$@"
