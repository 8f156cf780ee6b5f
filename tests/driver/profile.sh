#!/bin/sh
# `trainc calibrate` with the real C compiler, and what a profile's keys do:
#  1. the calibration program builds and runs, and its profile has every key
#     (profile_write's list: the keys `trainc plan` reads back) with a
#     positive value, and `trainc plan --profile` takes it;
#  2. update_bandwidth prices the optimizer step: the same profile with it
#     halved predicts twice the update and the same forward and backward;
#  3. conv_bf16_flops prices a CNN's convolutions under precision bf16 (a
#     lower one predicts a slower forward), and not under fp32;
#  4. gemm_matrix_seconds prices each matrix of a GEMM call: 1 ms more of it
#     adds 1 ms per matrix of the attention model's forward bmm (2 a layer,
#     each over batch x heads matrices; a bmm's traffic hides none of its
#     arithmetic); per call it would add a tenth of that;
#  5. gemm_element_seconds may be 0 (the calibration's fit found no cost per
#     element), never negative;
#  6. the rows of pooling windows: window_row_seconds prices the CNN's
#     max-pool gradients (rows of windows one by one: backward), not its
#     max-pools (by rows of scratch: forward), scratch_row_seconds the other
#     way round; each may be 0;
#  7. the convolution's passes each at their rate: conv_flops the forward,
#     conv_data_flops and conv_weight_flops the backward, not the forward.
# usage: profile.sh TRAINC MODEL.nn CNN.nn ATTENTION.nn BATCH HEADS LAYERS WORKDIR
set -eu
trainc=$1 model=$2 cnn=$3 attention=$4 batch=$5 heads=$6 layers=$7 work=$8
rm -rf "$work" && mkdir -p "$work"
fail=0
"$trainc" calibrate -o "$work/machine.profile"
for key in gemm_flops gemm_bf16_flops loop_flops bandwidth kernel_overhead cache_bandwidth cache_bytes \
  attention_flops attention_block_seconds conv_flops math_calls window_accesses update_bandwidth conv_bf16_flops \
  gemm_matrix_seconds rng_draws gemm_element_seconds window_row_seconds scratch_accesses scratch_row_seconds \
  conv_data_flops conv_weight_flops; do
  grep -Eq "^$key = [0-9.]+(e[+-][0-9]+)?$" "$work/machine.profile" || { echo "FAIL: calibrate wrote no $key"; fail=1; }
done
"$trainc" plan "$model" --profile "$work/machine.profile" >/dev/null || { echo "FAIL: plan refused the calibrated profile"; fail=1; }

# the calibrated profile without the keys set below,
# and with memory too fast to hide any arithmetic: a kernel is priced at the
# longer of its arithmetic and its traffic, and a calibration on a busy or
# sanitized build measures a bandwidth slow enough to hide a convolution's
grep -v -e '^update_bandwidth' -e '^conv_bf16_flops' -e '^gemm_matrix_seconds' -e '^bandwidth' \
  -e '^cache_bandwidth' "$work/machine.profile" >"$work/base.profile"
printf 'bandwidth = 1e13\ncache_bandwidth = 1e13\n' >>"$work/base.profile"
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

sed 's/^train {$/&\n  precision bf16/' "$cnn" >"$work/cnn_bf16.nn"
grep -q '^  precision bf16$' "$work/cnn_bf16.nn" || { echo "FAIL: no precision line added to $cnn"; fail=1; }
for precision in fp32 bf16; do
  planned=$cnn
  [ "$precision" = bf16 ] && planned=$work/cnn_bf16.nn
  for rate in 2e11 4e11; do
    printf 'conv_bf16_flops = %s\n' "$rate" | cat "$work/base.profile" - >"$work/conv.profile"
    "$trainc" plan "$planned" --policy off --profile "$work/conv.profile" --format json >"$work/cnn.$precision.$rate.json"
  done
done
/usr/bin/python3 - "$work" <<'PYEOF' || { echo "FAIL: conv_bf16_flops does not price bf16 convolutions alone"; fail=1; }
import json, sys
f = lambda p, r: json.load(open(f"{sys.argv[1]}/cnn.{p}.{r}.json"))["seconds"]["forward"]
assert f("bf16", "2e11") > f("bf16", "4e11"), (f("bf16", "2e11"), f("bf16", "4e11"))
assert f("fp32", "2e11") == f("fp32", "4e11")
PYEOF
for per in 1e-12 1e-3; do
  printf 'gemm_matrix_seconds = %s\n' "$per" | cat "$work/base.profile" - >"$work/matrix.profile"
  "$trainc" plan "$attention" --attention whole --policy off --profile "$work/matrix.profile" --format json \
    >"$work/attention.$per.json"
done
/usr/bin/python3 - "$work" "$batch" "$heads" "$layers" <<'PYEOF' || { echo "FAIL: gemm_matrix_seconds does not price each matrix"; fail=1; }
import json, sys
work, batch, heads, layers = sys.argv[1], *map(int, sys.argv[2:])
f = lambda per: json.load(open(f"{work}/attention.{per}.json"))["seconds"]["forward"]
added, matrices = f("1e-3") - f("1e-12"), 2 * batch * heads * layers
# the JSON prints 6 significant digits
assert abs(added - 1e-3 * matrices) <= 1e-5 * f("1e-3"), (added, matrices)
PYEOF
grep -v '^gemm_element_seconds' "$work/machine.profile" >"$work/no_element.profile"
for per in 0 -1e-9; do
  printf 'gemm_element_seconds = %s\n' "$per" | cat "$work/no_element.profile" - >"$work/element.profile"
  if "$trainc" plan "$model" --profile "$work/element.profile" >/dev/null 2>&1; then accepted=yes; else accepted=no; fi
  [ "$per" = 0 ] && [ $accepted = no ] && { echo "FAIL: gemm_element_seconds = 0 refused"; fail=1; }
  [ "$per" != 0 ] && [ $accepted = yes ] && { echo "FAIL: gemm_element_seconds = $per taken"; fail=1; }
done
grep -v -e '^window_row_seconds' -e '^scratch_row_seconds' "$work/base.profile" >"$work/no_rows.profile"
for rows in "0 0" "1e-6 0" "0 1e-6"; do
  set -- $rows
  printf 'window_row_seconds = %s\nscratch_row_seconds = %s\n' "$1" "$2" | cat "$work/no_rows.profile" - >"$work/rows.profile"
  "$trainc" plan "$cnn" --policy off --profile "$work/rows.profile" --format json >"$work/rows.$1.$2.json" ||
    { echo "FAIL: row seconds $1, $2 refused"; fail=1; }
done
/usr/bin/python3 - "$work" <<'PYEOF' || { echo "FAIL: the row seconds do not price their rows alone"; fail=1; }
import json, sys
f = lambda w, s: json.load(open(f"{sys.argv[1]}/rows.{w}.{s}.json"))["seconds"]
none, windows, scratch = f("0", "0"), f("1e-6", "0"), f("0", "1e-6")
assert windows["backward"] > none["backward"] and windows["forward"] == none["forward"], (none, windows)
assert scratch["forward"] > none["forward"] and scratch["backward"] == none["backward"], (none, scratch)
PYEOF
grep -v -e '^conv_flops' -e '^conv_data_flops' -e '^conv_weight_flops' "$work/base.profile" >"$work/no_conv.profile"
for rates in "2e11 2e11 2e11" "1e11 2e11 2e11" "2e11 1e11 2e11" "2e11 2e11 1e11"; do
  set -- $rates
  printf 'conv_flops = %s\nconv_data_flops = %s\nconv_weight_flops = %s\n' "$1" "$2" "$3" |
    cat "$work/no_conv.profile" - >"$work/passes.profile"
  "$trainc" plan "$cnn" --policy off --profile "$work/passes.profile" --format json >"$work/passes.$1.$2.$3.json"
done
/usr/bin/python3 - "$work" <<'PYEOF' || { echo "FAIL: the convolution's passes are not priced at their own rates"; fail=1; }
import json, sys
f = lambda *r: json.load(open(f"{sys.argv[1]}/passes.{'.'.join(r)}.json"))["seconds"]
base, fwd, data, weight = f("2e11", "2e11", "2e11"), f("1e11", "2e11", "2e11"), f("2e11", "1e11", "2e11"), f("2e11", "2e11", "1e11")
assert fwd["forward"] > base["forward"] and fwd["backward"] == base["backward"], (base, fwd)
for slow in data, weight:
    assert slow["backward"] > base["backward"] and slow["forward"] == base["forward"], (base, slow)
PYEOF
exit $fail
