#!/usr/bin/env bash
# The gradient check must be able to fail: build a model, drop the kernel that
# adds the output bias's gradient from the generated backward(), rebuild with
# the very command trainc used, and require --gradcheck to exit 1.
# usage: gradcheck_fails.sh TRAINC MODEL.nn WORKDIR
set -euo pipefail
trainc=$1 model=$2 work=$3
mkdir -p "$work"
cmd=$("$trainc" build "$model" -o "$work/broken" --keep-c "$work/broken.c" -v 2>&1 >/dev/null | tail -n 1)
"$work/broken" --gradcheck >/dev/null # intact: passes
line=$(grep -n 'line [0-9]*: sum_to' "$work/broken.c" | head -n 1 | cut -d: -f1)
[[ -n "$line" ]] || { echo "FAIL: no sum_to call to remove"; exit 1; }
sed -i "${line}d" "$work/broken.c"
$cmd
rc=0
"$work/broken" --gradcheck || rc=$?
[[ $rc -eq 1 ]] || { echo "FAIL: --gradcheck exited $rc on a broken backward"; exit 1; }
echo "ok: the broken backward was caught"
