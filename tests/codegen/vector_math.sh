#!/usr/bin/env bash
# The vector math of generated kernels (vector_math.c), built the way
# `trainc build` builds trainers: the compiler and flags `trainc --help`
# names, runtime/trainc.h, -lmvec. The loops must call glibc's libmvec
# vector functions (_ZGV*_expf, ...: else the kernels' math is not
# vectorized and this test says so), and their results must be within the
# bound of libm over the whole float range.
# usage: vector_math.sh TRAINC vector_math.c RUNTIME_DIR WORKDIR
set -euo pipefail
trainc=$1 src=$2 rt=$3 work=$4
mkdir -p "$work"
help=$("$trainc" --help)
flags=$(sed -n 's/^ *--cflags FLAGS .*(default: \(.*\))$/\1/p' <<<"$help")
cc=$(sed -n 's/^ *--cc CC .*(default: \$CC, else \(.*\))$/\1/p' <<<"$help")
[[ -n $flags && -n $cc ]] || { echo "FAIL: no default compiler or flags in trainc --help"; exit 1; }
cc=${CC:-$cc}
echo "compiler: $cc; flags: $flags"
$cc $flags -std=c11 -I "$rt" "$src" -o "$work/vector_math" -lmvec -lm
# GCC (declarations in trainc.h) vectorizes all four; clang-19's
# -fveclib=libmvec knows only expf and logf of them (tanhf, erff stay libm's).
want="expf logf tanhf erff"
[[ $cc == *clang* ]] && want="expf logf"
for f in $want; do
  nm "$work/vector_math" | grep -Eq "_ZGV[A-Za-z0-9]+_$f(@|$)" ||
    { echo "FAIL: $f is not called as a vector function"; exit 1; }
done
"$work/vector_math"
