#!/usr/bin/env bash
# Builds a model (generated C held to -Wall -Wextra -Werror) and checks every
# parameter's gradient against central finite differences (trainer --gradcheck).
# usage: gradcheck.sh TRAINC MODEL.nn WORKDIR
set -euo pipefail
trainc=$1 model=$2 work=$3
name=$(basename "$model" .nn)
mkdir -p "$work"
"$trainc" build "$model" -o "$work/gc_$name" --cflags "${TRAINC_TEST_CFLAGS:-} -O2 -Wall -Wextra -Werror"
"$work/gc_$name" --gradcheck
