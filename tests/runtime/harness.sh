# harness.sh — what the runtime's shell tests share, sourced as
#   NAME=test_name; . harness.sh TRAINER MAKE_DATA ROWS
# the trainer and the data maker from the command line, a temporary working
# folder (the current directory, removed at exit) holding ROWS examples in
# d/, failure counting and the run / expect checks.
set -u
TRAINER=$1 MAKE_DATA=$2
PY=/usr/bin/python3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/trc-$NAME-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1
FAILED=0
fail() { echo "FAIL: $*" >&2; FAILED=$((FAILED + 1)); }
mkdir d && "$MAKE_DATA" d "$3" 1 || exit 1

# run NAME EXPECTED_STATUS ARGS...: output in NAME.out / NAME.err (bounded: a hang fails)
run() {
  local name=$1 want=$2
  shift 2
  timeout 60 "$@" >"$name.out" 2>"$name.err"
  local got=$?
  [ "$got" -eq "$want" ] || { fail "$name: exit $got, expected $want"; cat "$name.err" >&2; }
}

# expect NAME out|err TEXT: that output of run NAME contains TEXT
expect() { grep -qF -- "$3" "$1.$2" || { fail "$1: $2 lacks '$3'"; cat "$1.$2" >&2; }; }

finish() {
  if [ "$FAILED" -ne 0 ]; then
    echo "$NAME: $FAILED failure(s)"
    exit 1
  fi
  echo "$NAME: all checks passed"
}
