#!/usr/bin/env bash
# `precision bf16` on examples/fashion_mlp.nn (the train block's setting, and
# --precision fp32 overriding it), against fp32 from the same weights:
#  1. one step's loss and gradients on the first batch (--dump-step): the
#     loss within 2^-6 relative, every gradient within 2^-4 of its norm and
#     not equal (see below);
#  2. 200 steps each: the test accuracy within 0.02 of fp32's, and above 0.75;
#  3. bf16 runs are bitwise reproducible: run to run, and on 1 and 2 threads;
#  4. --gradcheck of the bf16 trainer runs in fp32 and says so; --precision
#     with --gradcheck is refused;
#  5. the parameters' bf16 copy (the GEMMs read weights from it) is never
#     stale: under TRAINC_CHECK_BF16_WEIGHTS=1 every GEMM that reads it
#     first compares it with a fresh rounding and stops the trainer if they
#     differ. Run where something other than the optimizer writes the
#     parameters: --load-best (then evaluated), --resume, LocalSGD with the
#     outer optimizer on 2 ranks (with mpirun), and frozen parameters (LoRA),
#     which the optimizer does not write.
#  6. the buffer the GEMMs round their operands into is the size `trainc
#     plan` gave it, and the largest GEMM takes all of it (the MLP, LoRA).
# The loss bound is derived: a bf16 GEMM rounds each input by at most 2^-9
# relative, so its result moves by at most 2^-8 of the magnitude |A||B|; 3
# forward GEMMs move the logits (O(1) at init) by at most 3 * 2^-8, and cross
# entropy (about 2.3 here) by at most the largest logit change: 2^-6 of the
# loss leaves a factor 2. (Measured: 3.2e-6.) The gradient bound is not: the
# same argument gives 6 * 2^-8 (3 forward, 2 backward-data and the weight
# GEMM) of magnitudes, but relative to a gradient's norm, which cancellation
# makes much smaller than its magnitude at init, the error measured 4.0e-2
# (h1.bias) against 2.6e-2 to 4e-4 for the others: 2^-4 is that with a
# margin of 1.5, and catches a wrong operand or transpose (errors near 1).
# usage: bf16.sh TRAINC SOURCE_DIR WORKDIR
set -euo pipefail
trainc=$1 src=$2 work=$3
PY=/usr/bin/python3
mkdir -p "$work"
"$src/scripts/fetch-fashion-mnist" "$work/data" >/dev/null
grep -q '^  seed 42$' "$src/examples/fashion_mlp.nn" ||
  { echo "FAIL: examples/fashion_mlp.nn no longer has the line this test extends"; exit 1; }
sed 's/^  seed 42$/  seed 42\n  precision bf16/' "$src/examples/fashion_mlp.nn" >"$work/mlp_bf16.nn"
"$trainc" build "$work/mlp_bf16.nn" -o "$work/mlp" --cflags "${TRAINC_TEST_CFLAGS:-} -O2"
bin=$work/mlp
"$bin" --help | grep -Eq '^  --precision fp32\|bf16 +bf16 ' ||
  { echo "FAIL: --help lacks precision bf16"; exit 1; }
data=(--data "$work/data/train" --quiet)

echo "1. one step"
"$bin" "${data[@]}" --dump-step "$work/step_bf16.safetensors"
"$bin" "${data[@]}" --precision fp32 --dump-step "$work/step_fp32.safetensors"
"$PY" - "$work/step_bf16.safetensors" "$work/step_fp32.safetensors" <<'PYEOF'
import json, struct, sys
import numpy as np
def read(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    h = json.loads(blob[8:8 + n]); h.pop("__metadata__", None)
    data = lambda e: blob[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]]
    return {k: np.frombuffer(data(e), "<f4").astype(np.float64) for k, e in h.items()}
b, f = read(sys.argv[1]), read(sys.argv[2])
bad = 0
loss = abs(b["loss"][0] - f["loss"][0]) / abs(f["loss"][0])
print(f"loss bf16 {b['loss'][0]:.6f} fp32 {f['loss'][0]:.6f}: {loss:.2e} relative")
bad += not (loss <= 2**-6)
for k in sorted(k for k in f if k.startswith("grad.")):
    rel = np.linalg.norm(b[k] - f[k]) / np.linalg.norm(f[k])
    print(f"{k}: {rel:.2e} of its norm")
    bad += not (0 < rel <= 2**-4)
same = sum(np.array_equal(b[k], f[k]) for k in f)
bad += same == len(f)  # bf16 must have changed something
sys.exit(1 if bad else 0)
PYEOF

echo "2. 200 steps"
accuracy() {
  grep eval_accuracy "$1" | tail -n 1 | sed 's/.*"eval_accuracy": *\([0-9.e+-]*\).*/\1/'
}
for p in bf16 fp32; do
  "$bin" "${data[@]}" --eval-data "$work/data/test" --steps 200 --precision $p \
    --log "$work/$p.jsonl" --save "$work/$p.safetensors"
done
acc_bf16=$(accuracy "$work/bf16.jsonl") acc_fp32=$(accuracy "$work/fp32.jsonl")
echo "test accuracy after 200 steps: bf16 $acc_bf16, fp32 $acc_fp32"
close='BEGIN { d = b - f; exit !(b > 0.75 && d < 0.02 && d > -0.02) }'
awk -v b="$acc_bf16" -v f="$acc_fp32" "$close" ||
  { echo "FAIL: bf16 accuracy $acc_bf16 not within 0.02 of fp32's $acc_fp32, or <= 0.75"; exit 1; }

echo "3. reproducible"
for run in a:1 b:1 c:2; do
  "$bin" "${data[@]}" --steps 5 --threads "${run#*:}" --save "$work/repro_${run%:*}.safetensors"
done
cmp "$work/repro_a.safetensors" "$work/repro_b.safetensors"
cmp "$work/repro_a.safetensors" "$work/repro_c.safetensors"

echo "4. gradcheck"
"$bin" --gradcheck >"$work/gradcheck.out" 2>"$work/gradcheck.err"
grep -q "runs in fp32" "$work/gradcheck.err" || { echo "FAIL: no fp32 note"; exit 1; }
if "$bin" --gradcheck --precision bf16 2>"$work/refused.err"; then
  echo "FAIL: --precision with --gradcheck accepted"; exit 1
fi
grep -q -- "--precision does nothing with --gradcheck" "$work/refused.err"

echo "5. the parameters' bf16 copy"
export TRAINC_CHECK_BF16_WEIGHTS=1
eval_data=(--eval-data "$work/data/test" --eval-every-epoch no)
# lr 0.05: accuracy peaks before the last step (step 10 of 12), so the best
# weights are loaded and evaluated again
"$bin" --data "$work/data/train" "${eval_data[@]}" --steps 12 --eval-every-steps 2 --lr 0.05 \
  --load-best --metric-for-best eval_accuracy 2>"$work/best.err" >/dev/null
grep -q "loaded the best weights: step 10," "$work/best.err" ||
  { cat "$work/best.err"; echo "FAIL: the best weights are not an earlier step's"; exit 1; }
rm -rf "$work/state"
"$bin" "${data[@]}" --steps 8 --save-state "$work/state" --save-every 4 --save-total-limit 0 \
  --save "$work/whole.safetensors"
rm "$work"/state/state-8.*
"$bin" "${data[@]}" --steps 8 --resume "$work/state" --save "$work/resumed.safetensors"
cmp "$work/whole.safetensors" "$work/resumed.safetensors"
sed 's/^  seed 42$/  seed 42\n  precision bf16/' "$src/examples/fashion_lora.nn" >"$work/lora.nn"
"$trainc" build "$work/lora.nn" -o "$work/lora" --cflags "${TRAINC_TEST_CFLAGS:-} -O2"
"$work/lora" "${data[@]}" --steps 6
if command -v mpirun >/dev/null && "$trainc" build --mpi "$work/mlp_bf16.nn" -o "$work/mlp_mpi" \
  --cflags "${TRAINC_TEST_CFLAGS:-} -O2" 2>"$work/mpi.err"; then
  ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 OMPI_ALLOW_RUN_AS_ROOT=1 \
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpirun -np 2 --oversubscribe \
    --mca btl self,vader --mca btl_vader_single_copy_mechanism none \
    --mca mpi_yield_when_idle 1 "$work/mlp_mpi" "${data[@]}" --steps 6 --local-sgd 2 \
    --outer-optimizer yes --outer-lr 0.7 --outer-momentum 0.9
else
  echo "(no mpirun or no MPI build: the LocalSGD case is not run)"
fi
echo "6. the rounded operands' buffer is the planned size"
source "$src/tests/e2e/run_data.sh"
operands_planned() {
  "$trainc" plan "$1" --format json | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["peak"]["bf16_operands"])'
}
unset TRAINC_CHECK_BF16_WEIGHTS
for run in mlp_bf16:mlp lora:lora; do
  "$work/${run#*:}" "${data[@]}" --steps 3 --log "$work/${run#*:}.jsonl"
  read -r planned measured < <(operands_of "$work/${run#*:}.jsonl")
  want=$(operands_planned "$work/${run%:*}.nn")
  ((planned > 0)) && [[ $planned == "$measured" && $planned == "$want" ]] ||
    { echo "FAIL: ${run#*:}: trainc plan $want bytes of bf16 GEMM operands, reserved $planned, took $measured"; exit 1; }
  echo "${run#*:}: bf16 GEMM operands planned = taken = $planned bytes"
done
# attention's bmm keep f32 operands under bf16 (their products are small:
# rounding cost more than bf16 saved); here their operands are the largest
# (the probabilities: 64 x 64 a sequence), so a plan that still counted
# them, or a runtime that still rounded them, would differ
cat >"$work/attn_bf16.nn" <<'EOF'
model attn {
  input x : f32[B, 64, 8]
  input y : i32[B, 64]
  h = linear(x, 8)
  a = causal_self_attention(h, 1)
  logits = linear(h + a, 5)
  loss = cross_entropy(logits, y)
}
train {
  batch 4
  precision bf16
}
EOF
"$trainc" build "$work/attn_bf16.nn" -o "$work/attn" --keep-c "$work/attn.c" --cflags "${TRAINC_TEST_CFLAGS:-} -O2" >/dev/null
bmm=$(grep -c '^static .*void bmm_' "$work/attn.c") f32=$(grep -c '\.f32 = 1' "$work/attn.c")
((bmm > 0)) && [[ $bmm == "$f32" ]] || { echo "FAIL: $bmm bmm kernels, $f32 GEMMs with f32 operands"; exit 1; }
"$work/attn" --data "$(data_dir random "$work/attn_bf16.nn")" --steps 3 --quiet --log "$work/attn.jsonl"
read -r planned measured < <(operands_of "$work/attn.jsonl")
want=$(operands_planned "$work/attn_bf16.nn")
((planned > 0)) && [[ $planned == "$measured" && $planned == "$want" ]] ||
  { echo "FAIL: attention: trainc plan $want bytes of bf16 GEMM operands, reserved $planned, took $measured"; exit 1; }
echo "attention: bmm in f32; bf16 GEMM operands planned = taken = $planned bytes"
echo "bf16 ok"
