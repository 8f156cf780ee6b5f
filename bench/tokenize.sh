#!/usr/bin/env bash
# Tokenizer throughput (runtime/data/tokenizer.c) on the King James Bible
# (scripts/fetch-kjv): the byte tokenizer, and GPT-2's BPE with MERGES merges
# learned from the text's first 300 KB by tests/runtime/bpe_reference.py
# (GPT-2's own algorithm; needs python3-regex). Prints tokens, seconds (best
# of 3, reading the file included) and MB/s of each. Nothing here is a model: it times the step that
# `--text` runs once at start-up.
# usage: bench/tokenize.sh [BUILD_DIR] [MERGES]   (default: build, 5000)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} merges=${2:-5000}
tool=$build/tests/runtime/tokenize_tool
scripts/fetch-kjv data/kjv >/dev/null
bpe=$build/bench_bpe_$merges
mkdir -p "$bpe"
head -c 300000 data/kjv/kjv.txt >"$bpe/corpus.txt"
[ -f "$bpe/merges.txt" ] ||
  /usr/bin/python3 tests/runtime/bpe_reference.py learn "$bpe/corpus.txt" "$bpe" "$merges"
bytes=$(wc -c <data/kjv/kjv.txt)
for spec in bytes "$bpe"; do
  best=
  for _ in 1 2 3; do
    t0=$(date +%s.%N)
    tokens=$("$tool" "$spec" data/kjv/kjv.txt count)
    t=$(echo "$(date +%s.%N) - $t0" | bc -l)
    if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then best=$t; fi
  done
  printf '%-28s %9d tokens  %6.3f s  %6.1f MB/s\n' "$(basename "$spec")" "$tokens" "$best" \
    "$(echo "$bytes / $best / 1000000" | bc -l)"
done
