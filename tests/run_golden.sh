#!/bin/sh
# run_golden.sh EXPECTED_FILE CMD [ARGS...]
#
# Runs CMD, captures its stdout and stderr together plus a last line
# `[exit N]`, and compares that with EXPECTED_FILE (diff -u; the exit status
# is diff's). With UPDATE_GOLDEN=1 in the environment it writes EXPECTED_FILE
# instead: review the change before keeping it.
#
# Output that does not end in a newline gets one before `[exit N]`.
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 EXPECTED_FILE CMD [ARGS...]" >&2
  exit 2
fi
expected=$1
shift
actual=$(mktemp) || exit 2
trap 'rm -f "$actual"' EXIT

"$@" >"$actual" 2>&1
status=$?
if [ -s "$actual" ] && [ -n "$(tail -c 1 "$actual")" ]; then
  echo >>"$actual"
fi
echo "[exit $status]" >>"$actual"

if [ "${UPDATE_GOLDEN:-}" = 1 ]; then
  cp "$actual" "$expected" && echo "updated $expected"
  exit
fi
diff -u "$expected" "$actual"
