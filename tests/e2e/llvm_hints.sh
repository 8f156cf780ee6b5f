#!/usr/bin/env bash
# The LLVM backend asks for no vectorization LLVM cannot do: `trainc run
# --verbose --gradcheck` (LLVM's warnings shown: codegen/llvm_target.c) of
# each model prints no LLVM note. attention_long.nn's causal softmax writes
# the zeros above the diagonal in a loop LLVM turns into a memset; with the
# short row's hint on it, the hint landed on the row loop around it, which
# LLVM then failed to vectorize and said so (codegen/llvm_kernels.c,
# fills_constants); attention.nn (T = 17: lane remainders of 1) and
# pool_tiles.nn (rows of 2 windows) had it on loops of a few trips
# (FEW_TRIPS). conv_pool.nn is left out: LLVM does not widen its max-pool
# gradient's rows of 4 windows, whose hint keeps O3 from unrolling them and
# widening across rows with gathers instead (codegen.golden.short_rows_llvm).
# Without --verbose no LLVM diagnostic reaches stderr
# (tests/e2e/llvm.sh).
# usage: llvm_hints.sh TRAINC MODEL.nn...
set -u
trainc=$1
shift
fail=0
for model in "$@"; do
  out=$("$trainc" run --verbose "$model" --gradcheck 2>&1 >/dev/null)
  if grep -q "LLVM: " <<<"$out"; then
    echo "FAIL: $model: LLVM could not honour a loop hint:"
    grep "LLVM: " <<<"$out"
    fail=1
  else
    echo "ok: $model: no LLVM note"
  fi
done
exit $fail
