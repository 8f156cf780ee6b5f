#!/usr/bin/env bash
# Builds a model (generated C held to -Wall -Wextra -Werror) and checks every
# parameter's gradient against central finite differences (trainer --gradcheck).
# With a POLICY, the trainer is planned with that checkpoint policy, so the
# gradients are computed with recomputation in the backward pass.
# usage: gradcheck.sh TRAINC MODEL.nn WORKDIR [POLICY]
set -euo pipefail
trainc=$1 model=$2 work=$3 policy=${4:-off}
name=$(basename "$model" .nn)_${policy// /_}
mkdir -p "$work"
"$trainc" build "$model" --policy "$policy" -o "$work/gc_$name" --cflags "${TRAINC_TEST_CFLAGS:-} -O2 -Wall -Wextra -Werror"
"$work/gc_$name" --gradcheck
