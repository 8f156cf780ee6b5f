#!/usr/bin/env bash
# doc_blocks.sh TRAINC ROOT — every model file shown in README.md and
# docs/*.md (a fenced block with a line that starts `model NAME {`) passes `trainc
# check`, so the docs cannot drift from the language. A block meant to fail
# opens with ```nn fails: it must fail, and the next fenced block must be,
# line for line, what `trainc check m.nn` prints for it (the docs' error
# examples). A failure names the document and the block's first line.
set -u
trainc=$(realpath "$1") root=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/trc-docblocks-XXXXXX")
trap 'rm -rf "$work"' EXIT
# one file per fenced block that holds a model: DOC:LINE.nn (the fence's
# line); a failing one is DOC:LINE.fails, the block after it DOC:LINE.expected
for doc in "$root"/README.md "$root"/docs/*.md; do
  awk -v out="$work" -v name="$(basename "$doc")" '
    function save(path) { printf "%s", text > path; close(path) }
    /^```/ {
      if (inside) {
        if (expecting) { save(out "/" name ":" failing ".expected"); expecting = 0 }
        else if (fails) { save(out "/" name ":" start ".fails"); failing = start; expecting = 1 }
        else if (model) save(out "/" name ":" start ".nn")
        inside = 0
      } else { inside = 1; start = NR; text = ""; model = 0; fails = ($0 ~ /^```nn fails/) }
      next
    }
    inside { text = text $0 "\n"; if ($0 ~ /^model [A-Za-z_][A-Za-z0-9_]* \{/) model = 1 }
  ' "$doc"
done
blocks=0 failed=0
report() { # file, what went wrong, output
  failed=$((failed + 1))
  local where
  where=$(basename "$1"); where=${where%.*}
  echo "FAIL: the model block of ${where%:*} at line ${where##*:} $2:"
  echo "$3" | head -8
}
for f in "$work"/*.nn; do
  [[ -e $f ]] || continue
  blocks=$((blocks + 1))
  if ! out=$("$trainc" check "$f" 2>&1); then
    report "$f" "does not pass trainc check" "$(echo "$out" | sed "s|$f|block|")"
  fi
done
for f in "$work"/*.fails; do
  [[ -e $f ]] || continue
  blocks=$((blocks + 1))
  dir=$(mktemp -d "$work/fails-XXXXXX")
  cp "$f" "$dir/m.nn"
  if out=$(cd "$dir" && "$trainc" check m.nn 2>&1); then
    report "$f" "is meant to fail but passes trainc check" "$out"
  elif [[ ! -e ${f%.fails}.expected ]]; then
    report "$f" "is meant to fail but no block after it shows the error" "$out"
  elif ! diff=$(diff <(printf '%s\n' "$out") "${f%.fails}.expected"); then
    report "$f" "fails, but not as the block after it says (diff: trainc, docs)" "$diff"
  fi
done
echo "$blocks model blocks, $failed failed"
[[ $blocks -gt 0 && $failed -eq 0 ]]
