#!/usr/bin/env bash
# bpe_reference.sh TOKENIZE_TOOL — the runtime's GPT-2 BPE against GPT-2's
# own algorithm (bpe_reference.py: encoder.py's pattern run by Python's
# `regex` module, merges by rank), on a vocabulary of 300 merges learned from
# random text that mixes scripts, digits, combining marks, Unicode spaces,
# emoji and contractions, then on other such text: the ids must be the same.
# Skipped without Debian's python3-regex.
NAME=bpe_reference
set -u
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
$PY -c 'import regex' 2>/dev/null || { echo "SKIP: needs python3-regex"; exit 77; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/trc-$NAME-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1
mkdir bpe
$PY "$here/bpe_reference.py" text 1 corpus.txt &&
  $PY "$here/bpe_reference.py" learn corpus.txt bpe 300 || exit 1
for seed in 2 3 4; do
  $PY "$here/bpe_reference.py" text $seed text.txt || exit 1
  $PY "$here/bpe_reference.py" encode bpe text.txt >want.txt || exit 1
  "$1" bpe text.txt >got.txt || exit 1
  if ! cmp -s want.txt got.txt; then
    echo "FAIL: text $seed: the ids differ from GPT-2's algorithm (first difference below)"
    diff want.txt got.txt | head -5
    exit 1
  fi
  echo "text $seed: $(wc -l <got.txt) tokens, the same"
done
echo "$NAME: all checks passed"
