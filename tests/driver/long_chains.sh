#!/bin/sh
# Long flat chains and deep nesting (issue 14, item 5): `x + x + ...` with
# 100k terms (also `*` and a const of 100k ones, and --dump=ast printing it)
# compiles: no walker recurses as deep as a chain is long. Nesting (brackets,
# calls, '-') is bounded by the parser's stack: deeper is one located error.
# Either way never a crash (exit 139 was a stack overflow).
# usage: long_chains.sh TRAINC
set -u
trainc=$1
work=$(mktemp -d) || exit 2
trap 'rm -rf "$work"' EXIT
failures=0

# chain N SEP TERM: TERM SEP TERM SEP ... (N terms) on one line
chain() { awk -v n="$1" -v sep="$2" -v t="$3" 'BEGIN { for (i = 1; i < n; i++) printf "%s%s", t, sep; print t }'; }

model() { # model BODY-LINE [CONST-LINE]
  printf '%s\nmodel m {\n  input x : f32[B, 4]\n  %s\n  loss = mean(h)\n}\n' "${2:-}" "$1"
}

expect() { # expect NAME WANTED-STATUS ARGS...
  name=$1 want=$2
  shift 2
  "$trainc" "$@" >"$work/out" 2>"$work/err"
  got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL $name: exit $got, expected $want"
    head -c 600 "$work/err"
    failures=$((failures + 1))
  else
    echo "ok   $name (exit $got)"
  fi
}

model "h = $(chain 100000 ' + ' x)" >"$work/add.nn"
model "h = $(chain 100000 ' * ' x)" >"$work/mul.nn"
model "h = x * D" "const D = $(chain 100000 + 1)" >"$work/const.nn"
expect "x + x + ... (100k terms)" 0 check "$work/add.nn"
expect "x * x * ... (100k terms)" 0 check "$work/mul.nn"
expect "const D = 1 + 1 + ... (100k terms)" 0 check "$work/const.nn" --dump=ir
grep -q 'mul_scalar %0 {100000}' "$work/out" || { echo "FAIL const: D is not 100000"; failures=$((failures + 1)); }
expect "--dump=ast of the 100k chain" 0 check "$work/add.nn" --dump=ast
[ "$(tr -cd '(' <"$work/out" | wc -c)" -ge 99999 ] || { echo "FAIL --dump=ast: the chain is not printed"; failures=$((failures + 1)); }

# Nesting: 4000 calls deep fits the parser's stack and compiles; 20000 is
# one located error.
nest() { awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) printf "relu("; printf "x"; for (i = 0; i < n; i++) printf ")"; print "" }'; }
model "h = $(nest 4000)" >"$work/nest.nn"
model "h = $(nest 20000)" >"$work/deep.nn"
expect "relu(relu(...)) 4000 deep" 0 check "$work/nest.nn"
expect "relu(relu(...)) 20000 deep" 1 check "$work/deep.nn"
[ "$(grep -c 'error:' "$work/err")" -eq 1 ] && grep -q 'deep.nn:4:[0-9]*: error: nesting too deep' "$work/err" ||
  { echo "FAIL deep nesting: not one located error"; cat "$work/err" | head -c 400; failures=$((failures + 1)); }
# An error at the end of a 1 MB line: the source line is shown clipped to
# the part around the caret (in one write; it was a write per byte).
model "h = $(chain 250000 ' + ' x) + y" >"$work/wide.nn"
expect "an error at the end of a 1 MB line" 1 check "$work/wide.nn"
[ "$(wc -c <"$work/err")" -lt 600 ] && grep -q "wide.nn:4:1000007: error: undefined name 'y'" "$work/err" ||
  { echo "FAIL wide line: not one short located error"; head -c 600 "$work/err"; failures=$((failures + 1)); }

# The one size limit (TRAINC_MAX_OPS, a million operations): a file past it
# is one error where it passes it, before any lowering.
model "h = $(chain 1000002 + x)" >"$work/huge.nn"
expect "a file of 1000001 operations" 1 check "$work/huge.nn"
[ "$(grep -c 'error:' "$work/err")" -eq 1 ] && grep -q 'more than 1000000 operations' "$work/err" ||
  { echo "FAIL op limit: not one error"; head -c 400 "$work/err"; failures=$((failures + 1)); }
exit $((failures > 0))
