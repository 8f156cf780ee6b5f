# Sourced by the schedule tests after `trainc=$1 src=$2 work=$3`, with the
# subfolders they want made fresh under $work: PY (Debian's Python, with
# NumPy, else the test is skipped), tools (the tests' Python helpers), the
# working folder made empty and entered, and fail MESSAGE.
# usage: . "$src/tests/e2e/schedule/preamble.sh" SUBFOLDER...
PY=/usr/bin/python3 tools=$src/tests/e2e/schedule/tools.py
$PY -c 'import numpy' 2>/dev/null || { echo "SKIP: needs python3-numpy"; exit 77; }
rm -rf "$work" && mkdir -p "$work"
(cd "$work" && mkdir -p "$@")
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
