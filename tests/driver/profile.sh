#!/bin/sh
# `trainc calibrate` with the real C compiler, and what a profile's keys do:
#  1. the calibration program builds and runs, and its profile has every key
#     (profile_write's list: the keys `trainc plan` reads back) with a
#     positive value, and `trainc plan --profile` takes it;
#  2. update_bandwidth prices the optimizer step: the same profile with it
#     halved predicts twice the update and the same forward and backward.
# usage: profile.sh TRAINC MODEL.nn WORKDIR
set -eu
trainc=$1 model=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fail=0
"$trainc" calibrate -o "$work/machine.profile"
for key in gemm_flops gemm_bf16_flops loop_flops bandwidth kernel_overhead cache_bandwidth cache_bytes \
  attention_flops attention_block_seconds conv_flops math_calls window_accesses update_bandwidth; do
  grep -Eq "^$key = [0-9.]+(e[+-][0-9]+)?$" "$work/machine.profile" || { echo "FAIL: calibrate wrote no $key"; fail=1; }
done
"$trainc" plan "$model" --profile "$work/machine.profile" >/dev/null || { echo "FAIL: plan refused the calibrated profile"; fail=1; }

grep -v '^update_bandwidth' "$work/machine.profile" >"$work/base.profile"
printf 'update_bandwidth = 2e10\n' | cat "$work/base.profile" - >"$work/fast.profile"
printf 'update_bandwidth = 1e10\n' | cat "$work/base.profile" - >"$work/slow.profile"
"$trainc" plan "$model" --profile "$work/fast.profile" --format json >"$work/fast.json"
"$trainc" plan "$model" --profile "$work/slow.profile" --format json >"$work/slow.json"
/usr/bin/python3 - "$work/fast.json" "$work/slow.json" <<'PYEOF' || { echo "FAIL: update_bandwidth does not price the update"; fail=1; }
import json, sys
fast, slow = (json.load(open(p))["seconds"] for p in sys.argv[1:])
# the JSON prints 6 significant digits
assert abs(slow["update"] - 2 * fast["update"]) <= 1e-5 * slow["update"] and fast["update"] > 0, (fast, slow)
assert fast["forward"] == slow["forward"] and fast["backward"] == slow["backward"], (fast, slow)
PYEOF
exit $fail
