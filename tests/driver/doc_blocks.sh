#!/usr/bin/env bash
# doc_blocks.sh TRAINC ROOT — every model file shown in README.md and
# docs/*.md (a fenced block with a line that starts `model NAME {`) passes `trainc
# check`, so the docs cannot drift from the language. A failure names the
# document and the block's first line.
set -u
trainc=$1 root=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/trc-docblocks-XXXXXX")
trap 'rm -rf "$work"' EXIT
# one file per fenced block that holds a model: DOC:LINE.nn (the fence's line)
for doc in "$root"/README.md "$root"/docs/*.md; do
  awk -v out="$work" -v name="$(basename "$doc")" '
    /^```/ { if (inside) { if (model) { f = out "/" name ":" start ".nn"; printf "%s", text > f; close(f) }
                           inside = 0 } else { inside = 1; start = NR; text = ""; model = 0 }
             next }
    inside { text = text $0 "\n"; if ($0 ~ /^model [A-Za-z_][A-Za-z0-9_]* \{/) model = 1 }
  ' "$doc"
done
blocks=0 failed=0
for f in "$work"/*.nn; do
  [[ -e $f ]] || continue
  blocks=$((blocks + 1))
  if ! out=$("$trainc" check "$f" 2>&1); then
    failed=$((failed + 1))
    where=$(basename "$f" .nn)
    echo "FAIL: the model block of ${where%:*} at line ${where##*:} does not pass trainc check:"
    echo "$out" | sed "s|$f|block|" | head -5
  fi
done
echo "$blocks model blocks, $failed failed"
[[ $blocks -gt 0 && $failed -eq 0 ]]
