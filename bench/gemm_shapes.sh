#!/usr/bin/env bash
# Every GEMM shape of a model timed alone on one thread (bench/gemm_shapes.c):
# trc_gemm as the trainer runs it, against oneDNN's and OpenBLAS's sgemm (fp32) and its bf16
# matmul with pre-reordered weights (bf16) on the whole matrix — what a part
# loses against the library's best case. The shapes are read from the
# trainer's C (`trainc emit`: its trc_gemm_shape descriptors, batched
# attention products left out); B is taken to be a parameter unless A is
# transposed (true of the examples' linear layers: forward and input
# gradient read the weight as B, the weight gradient reads two activations).
# It first prints the one-core peaks of bench/peak.c (fp32 FMA in AVX-512 or
# AVX2, AVX512_BF16's dot product where the CPU has it; AMX is not measured
# there) to compare them with. Needs a quiet machine.
# usage: bench/gemm_shapes.sh [BUILD_DIR] [MODEL.nn ...]
#        (default: build, examples/deep_mlp.nn and examples/gpt124m.nn)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift $(($# ? 1 : 0))
models=("$@")
((${#models[@]})) || models=(examples/deep_mlp.nn examples/gpt124m.nn)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -Iruntime -I/usr/include/x86_64-linux-gnu/openblas-openmp bench/gemm_shapes.c "$build/runtime/libtrainc_rt.a" -ldnnl \
  /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so -lz -lm -fopenmp \
  -o "$work/gemm_shapes"
source bench/quiet.sh
wait_quiet || echo "(timing anyway: the figures of a busy machine mean little)"
cc -O2 -fopenmp bench/peak.c -o "$work/peak"
OMP_NUM_THREADS=1 "$work/peak"
for model in "${models[@]}"; do
  echo "== $model"
  "$build/driver/trainc" emit "$model" -o "$work/model.c" >/dev/null
  grep -o 'trc_gemm_shape dims = {[^}]*}' "$work/model.c" | grep -v '\.batch' |
    sed -E 's/.*\.m = ([0-9]+), \.n = ([0-9]+), \.k = ([0-9]+)(.*)/\1 \2 \3 \4/' |
    while read -r m n k rest; do
      ta=0 tb=0
      [[ $rest == *trans_a* ]] && ta=1
      [[ $rest == *trans_b* ]] && tb=1
      echo "$m $n $k $ta $tb"
    done | sort -u | while read -r m n k ta tb; do
      OMP_NUM_THREADS=1 "$work/gemm_shapes" "$m" "$n" "$k" "$ta" "$tb" $((1 - ta))
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
