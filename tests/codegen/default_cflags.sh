#!/usr/bin/env bash
# The C compiler, with the flags `trainc build` uses by default (read from
# `trainc --help`), compiles a generated loop nest that GCC 12.2 miscompiled at
# plain -O3 -march=native (permute_loop.c), and the result is right.
# usage: default_cflags.sh TRAINC permute_loop.c WORKDIR
set -euo pipefail
trainc=$1 src=$2 work=$3
mkdir -p "$work"
flags=$("$trainc" --help | sed -n 's/^ *--cflags FLAGS .*(default: \(.*\))$/\1/p')
[[ -n $flags ]] || { echo "FAIL: no default flags in trainc --help"; exit 1; }
echo "default flags: $flags"
cc=$("$trainc" --help | sed -n 's/^ *--cc CC .*(default: \$CC, else \(.*\))$/\1/p')
echo "compiler: ${CC:-$cc}"
${CC:-$cc} $flags -std=c11 "$src" -o "$work/permute_loop"
"$work/permute_loop"
