#!/usr/bin/env bash
# Builds a model (generated C held to -Wall -Wextra -Werror) and checks every
# parameter's gradient against central finite differences (trainer --gradcheck).
# With a POLICY, the trainer is planned with that checkpoint policy, so the
# gradients are computed with recomputation in the backward pass.
# TRAINC_TEST_BACKEND=run: the same check through `trainc run` (LLVM's JIT).
# TRAINC_TEST_ATTENTION=fused|whole: the build's --attention (default auto).
# usage: gradcheck.sh TRAINC MODEL.nn WORKDIR [POLICY]
set -euo pipefail
trainc=$1 model=$2 work=$3 policy=${4:-off}
attention=(--attention "${TRAINC_TEST_ATTENTION:-auto}")
name=$(basename "$model" .nn)_${policy// /_}
mkdir -p "$work"
if [[ ${TRAINC_TEST_BACKEND:-c} == run ]]; then
  exec "$trainc" run "${attention[@]}" --policy "$policy" "$model" --gradcheck
fi
"$trainc" build "${attention[@]}" "$model" --policy "$policy" -o "$work/gc_$name" --cflags "${TRAINC_TEST_CFLAGS:-} -O2 -Wall -Wextra -Werror"
"$work/gc_$name" --gradcheck
