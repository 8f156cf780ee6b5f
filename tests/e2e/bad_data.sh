#!/usr/bin/env bash
# A malformed or mismatched data file gives a clear error and a non-zero exit.
# usage: bad_data.sh TRAINC SOURCE_DIR WORKDIR
set -euo pipefail
trainc=$1 src=$2 work=$3
mkdir -p "$work"
"$trainc" build "$src/examples/fashion_mlp.nn" -o "$work/fashion_bad" >/dev/null
expect_error() { # folder, pattern
  local out rc=0
  out=$("$work/fashion_bad" --data "$1" --steps 1 2>&1) || rc=$?
  if [[ $rc -eq 0 ]]; then echo "FAIL: $1 was accepted"; exit 1; fi
  if [[ $rc -ge 128 ]]; then echo "FAIL: crashed on $1 ($rc): $out"; exit 1; fi
  grep -q -- "$2" <<<"$out" || { echo "FAIL: expected '$2' in: $out"; exit 1; }
  echo "ok: $out"
}
npy() { # path, header dict, payload bytes
  local h=$2
  local pad=$(( (64 - (10 + ${#h} + 1) % 64) % 64 ))
  { printf '\x93NUMPY\x01\x00'; printf "\\x$(printf %02x $(( (${#h} + pad + 1) % 256 )))\\x$(printf %02x $(( (${#h} + pad + 1) / 256 )))";
    printf '%s%*s\n' "$h" "$pad" ""; head -c "$3" /dev/zero; } >"$1"
}
d=$work/bad; rm -rf "$d"; mkdir -p "$d"
npy "$d/label.npy" "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }" 16
printf 'not a numpy file at all' >"$d/image.npy"
expect_error "$d" "image.npy"
npy "$d/image.npy" "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 784), }" $((4 * 784 * 4))
expect_error "$d" "dtype"
npy "$d/image.npy" "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 783), }" $((4 * 783))
expect_error "$d" "image"
npy "$d/image.npy" "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 784), }" 100
expect_error "$d" "image.npy"
expect_error "$work/no-such-folder" "no-such-folder"
