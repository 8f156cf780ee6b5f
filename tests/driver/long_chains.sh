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

fail() { # fail MESSAGE: counts a failure and shows the start of stderr
  echo "FAIL $1"
  head -c 600 "$work/err"
  failures=$((failures + 1))
}

# chain N SEP TERM: TERM SEP TERM SEP ... (N terms) on one line
chain() {
  awk -v n="$1" -v sep="$2" -v t="$3" \
    'BEGIN { for (i = 1; i < n; i++) printf "%s%s", t, sep; print t }'
}

# nest N: relu(relu(...(x)...)), N calls deep
nest() {
  awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) printf "relu("; printf "x"
                         for (i = 0; i < n; i++) printf ")"; print "" }'
}

model() { # model BODY-LINE [CONST-LINE]: the body is on line 4
  printf '%s\nmodel m {\n  input x : f32[B, 4]\n  %s\n  loss = mean(h)\n}\n' "${2:-}" "$1"
}

expect() { # expect NAME WANTED-STATUS ARGS...: trainc ARGS, within 120 s (124: timed out)
  name=$1 want=$2
  shift 2
  timeout 120 "$trainc" "$@" >"$work/out" 2>"$work/err"
  got=$?
  if [ "$got" -eq "$want" ]; then
    echo "ok   $name"
  else
    fail "$name: exit $got, expected $want"
  fi
}

one_error() { # one_error PATTERN: stderr holds one error, matching PATTERN
  [ "$(grep -c 'error:' "$work/err")" -eq 1 ] && grep -q "$1" "$work/err"
}

model "h = $(chain 100000 ' + ' x)" >"$work/add.nn"
model "h = $(chain 100000 ' * ' x)" >"$work/mul.nn"
model "h = x * D" "const D = $(chain 100000 + 1)" >"$work/const.nn"
expect "x + x + ... (100k terms)" 0 check "$work/add.nn"
expect "x * x * ... (100k terms)" 0 check "$work/mul.nn"
expect "const D = 1 + 1 + ... (100k terms)" 0 check "$work/const.nn" --dump=ir
grep -q 'mul_scalar %0 {100000}' "$work/out" || fail "const: D is not 100000"
expect "--dump=ast of the 100k chain" 0 check "$work/add.nn" --dump=ast
[ "$(tr -cd '(' <"$work/out" | wc -c)" -ge 99999 ] || fail "--dump=ast: the chain is not printed"

# Nesting: 4000 calls deep fits the parser's stack and compiles; 20000 is
# one located error.
model "h = $(nest 4000)" >"$work/nest.nn"
model "h = $(nest 20000)" >"$work/deep.nn"
expect "relu(relu(...)) 4000 deep" 0 check "$work/nest.nn"
expect "relu(relu(...)) 20000 deep" 1 check "$work/deep.nn"
one_error 'deep.nn:4:[0-9]*: error: nesting too deep' || fail "deep nesting: not one located error"

# An error at the end of a 1 MB line: the source line is shown clipped to
# the part around the caret (in one write; it was a write per byte).
model "h = $(chain 250000 ' + ' x) + y" >"$work/wide.nn"
expect "an error at the end of a 1 MB line" 1 check "$work/wide.nn"
[ "$(wc -c <"$work/err")" -lt 600 ] && one_error "wide.nn:4:1000007: error: undefined name 'y'" ||
  fail "wide line: not one short located error"

# Many names: 100,000 variables, and one name assigned 20,000 times (its
# parameters h, h_1, h_2, ...): hash tables, not scans (80k names took 44 s).
# expect's timeout only catches a quadratic search; the work is a second or less.
awk 'BEGIN { print "model m {\n  input x : f32[B, 4]\n  v0 = x"
             for (i = 1; i <= 100000; i++) printf "  v%d = v%d\n", i, i - 1
             for (i = 0; i < 20000; i++) print "  h = linear(x, 4)"
             print "  loss = mean(v100000 + h)\n}" }' >"$work/names.nn"
expect "100,000 names, one of them 20,000 times" 0 check "$work/names.nn"

# The one size limit (TRAINC_MAX_OPS, a million operations): a file past it
# is one error where it passes it, before any lowering; so is a graph past it
# (nested repeats: two million nodes), where lowering adds the node past it.
# (Here, not a tests/ir/invalid model: those seed the compiler's fuzzer, and
# a million nodes under its instrumentation take longer than its timeout.)
model "h = $(chain 1000002 + x)" >"$work/huge.nn"
expect "a file of 1000001 operations" 1 check "$work/huge.nn"
one_error 'more than 1000000 operations, the limit' || fail "op limit: not one error"
printf '%s\n' 'def inner(x) {' '  return relu(x) + x' '}' 'def outer(x) {' \
  '  return repeat 1000 inner(x)' '}' >"$work/repeats.nn"
model "h = repeat 1000 outer(x)" >>"$work/repeats.nn"
expect "repeats unrolled past 1000000 operations" 1 check "$work/repeats.nn"
one_error 'repeats.nn:2:10: error: the model has more than 1000000 operations here' ||
  fail "op limit in lowering: not one located error"
exit $((failures > 0))
