#!/usr/bin/env bash
# The CUDA backend on a GPU machine, in one run of about 10 minutes (at
# most twice TIME_LIMIT more when the timed runs stall) (docs/cuda.md). NOT YET RUN ON A GPU: its checking logic is tested through
# the emulated backend (--emulate, CTest bench.gpu_check_emulate).
#  1. builds the CUDA and the C trainers of an MLP and a GPT
#     (examples/fashion_mlp.nn, examples/gpt.nn);
#  2. from the same initial weights and random data: one step's loss,
#     predictions and every gradient (--dump-step), and the losses of 5
#     optimizer steps, CUDA against C: relative error < 1e-4 (max |a - b| over
#     max |b| per tensor, floored at 1e-4 of the largest tensor's);
#     and the 5 steps' gradient norms (computed on the device) too;
#  3. the CUDA trainer's measured device high-water mark against the plan;
#  4. the CUDA trainer built with --no-fuse gives bitwise the fused one's
#     --dump-step (nvcc's --fmad=false: docs/cuda.md);
#  5. --precision bf16 (cuBLAS's bf16 GEMM on rounded copies, docs/cuda.md
#     *bf16 GEMMs*): one step's --dump-step, CUDA against C in bf16,
#     relative error < 1e-2 (bf16 products are exact in f32, so only the
#     order of accumulation differs, but a difference can flip a later
#     GEMM's rounding of an element by one bf16 step, 2^-8 to 2^-7 of it;
#     1e-2 is a guess that leaves room for rare flips, not a measured
#     bound), and the CUDA bf16 step not within 1e-4 of its fp32 step (so
#     a trainer that ignored bf16 fails);
#  6. times examples/gpt124m.nn at B=16, T=1024 in fp32 and in bf16
#     (tokens/s, and model FLOPs utilization: 6 x parameters x tokens/s over
#     PEAK_TFLOPS, default 67, an H100/H200's dense FP32 without tensor
#     cores, for both, so that the two compare), each bounded by TIME_LIMIT
#     seconds (default 300); and, from nvidia-smi sampled during each run,
#     the process's peak device memory beside what the trainer allocates by
#     plan (arena + AdamW's two moments + the input double buffers; the CUDA
#     context and cuBLAS's workspace come on top): printed, not checked.
# --emulate: the same checks with --backend cuda-emulate on tiny models
# (tests/torch/*_small.nn), the timing on gpt_small, and a check that the
# comparison fails on gradients from other weights.
# usage: bench/gpu-check.sh [--emulate] [BUILD_DIR]   (default: build)
set -euo pipefail
emulate=0
if [[ ${1:-} == --emulate ]]; then emulate=1; shift; fi
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
trainc=$build/driver/trainc
work=$build/gpu_check$([[ $emulate == 1 ]] && echo _emulate || true)
rm -rf "$work" && mkdir -p "$work"
PY=/usr/bin/python3
fail=0
if [[ $emulate == 1 ]]; then
  backend=cuda-emulate models=(tests/torch/fashion_mlp_small.nn tests/torch/gpt_small.nn)
else
  backend=cuda models=(examples/fashion_mlp.nn examples/gpt.nn)
fi

# Compares two .safetensors files tensor by tensor, relative error < TOL;
# with `expect-fail`, the comparison must find a difference (the check can
# fail). usage: compare CUDA.safetensors C.safetensors TOL [expect-fail]
compare() {
  "$PY" - "$@" <<'PY'
import sys
sys.path.insert(0, "tests/torch")
import numpy as np
import safetensors_np
cuda, _ = safetensors_np.read(sys.argv[1])
cpu, _ = safetensors_np.read(sys.argv[2])
tol = float(sys.argv[3])
expect_fail = len(sys.argv) > 4
worst, bad = 0.0, []
# A tensor that is zero in exact arithmetic (attention's key-bias gradient:
# softmax ignores a shift) holds rounding noise: its scale is floored at 1e-4
# of the largest tensor's.
floor = 1e-4 * max(float(np.max(np.abs(t))) for t in cpu.values())
for name, ref in cpu.items():
    got = cuda[name]
    rel = float(np.max(np.abs(got - ref)) / max(float(np.max(np.abs(ref))), floor, 1e-30))
    worst = max(worst, rel)
    if not rel < tol:
        bad.append(f"{name} {rel:.3g}")
if expect_fail:
    sys.exit(0 if bad else f"FAIL: no difference of {tol:g} or more found (worst {worst:.3g})")
print(f"  {len(cpu)} tensors (loss, predictions, every gradient): worst relative error {worst:.3g}")
sys.exit(f"FAIL: relative error >= {tol:g}: {', '.join(bad)}" if bad else 0)
PY
}

losses_and_peak() {
  "$PY" - "$@" <<'PY'
import json, sys
read = lambda p: [json.loads(l) for l in open(p)]
cuda, cpu = read(sys.argv[1]), read(sys.argv[2])
loss = lambda rs: [r["loss"] for r in rs if "loss" in r and "step" in r]
norm = lambda rs: [r["grad_norm"] for r in rs if "grad_norm" in r]
rel = max(abs(a - b) / abs(b) for a, b in zip(loss(cuda), loss(cpu)))
print(f"  losses of {len(loss(cpu))} steps: CUDA {loss(cuda)}, C {loss(cpu)}; worst relative error {rel:.3g}")
rel_norm = max(abs(a - b) / abs(b) for a, b in zip(norm(cuda), norm(cpu)))
print(f"  gradient norms: CUDA {norm(cuda)}, C {norm(cpu)}; worst relative error {rel_norm:.3g}")
mem = [r for r in cuda if "arena_high_water" in r][-1]
print(f"  device peak: planned {mem['arena_planned']} bytes, measured {mem['arena_high_water']}")
errors = []
if not (len(loss(cuda)) == len(loss(cpu)) > 0 and rel < 1e-4):
    errors.append("losses differ")
if not (len(norm(cuda)) == len(norm(cpu)) > 0 and rel_norm < 1e-4):
    errors.append("gradient norms differ")
if mem["arena_planned"] != mem["arena_high_water"]:
    errors.append("the device high-water mark is not the plan")
sys.exit("FAIL: " + "; ".join(errors) if errors else 0)
PY
}

for model in "${models[@]}"; do
  name=$(basename "$model" .nn) dir=$work/$(basename "$model" .nn)
  mkdir -p "$dir"
  echo "== $name"
  "$trainc" build "$model" -o "$dir/cpu" --keep-c "$dir/cpu.c" >/dev/null
  "$trainc" build "$model" --backend "$backend" -o "$dir/cuda" >/dev/null
  "$trainc" build "$model" --backend "$backend" --no-fuse -o "$dir/cuda_unfused" >/dev/null
  batch=$(sed -n 's/^    \.batch = \([0-9]*\),$/\1/p' "$dir/cpu.c")
  "$PY" tests/e2e/random_data.py "$dir/cpu.c" "$dir/data" $((batch * 6))
  "$dir/cpu" --steps 0 --save "$dir/w0.safetensors" --quiet
  for t in cpu cuda; do
    "$dir/$t" --init "$dir/w0.safetensors" --data "$dir/data" --dump-step "$dir/$t.step.safetensors"
    "$dir/$t" --init "$dir/w0.safetensors" --data "$dir/data" --steps 5 --log-every 1 --quiet \
      --log "$dir/$t.jsonl" --save "$dir/$t.final.safetensors"
  done
  compare "$dir/cuda.step.safetensors" "$dir/cpu.step.safetensors" 1e-4 || fail=1
  "$dir/cuda_unfused" --init "$dir/w0.safetensors" --data "$dir/data" \
    --dump-step "$dir/unfused.step.safetensors"
  if cmp -s "$dir/cuda.step.safetensors" "$dir/unfused.step.safetensors"; then
    echo "  --no-fuse: the same --dump-step, bitwise"
  else
    echo "FAIL: the fused and unfused CUDA trainers' --dump-step differ"
    fail=1
  fi
  losses_and_peak "$dir/cuda.jsonl" "$dir/cpu.jsonl" || fail=1
  if [[ $emulate == 1 ]]; then # the comparison fails on another step's gradients
    "$dir/cpu" --init "$dir/cpu.final.safetensors" --data "$dir/data" --dump-step "$dir/other.safetensors"
    compare "$dir/cuda.step.safetensors" "$dir/other.safetensors" 1e-4 expect-fail || fail=1
  fi
  echo "  --precision bf16:"
  for t in cpu cuda; do
    "$dir/$t" --init "$dir/w0.safetensors" --data "$dir/data" --precision bf16 \
      --dump-step "$dir/$t.bf16.step.safetensors"
  done
  compare "$dir/cuda.bf16.step.safetensors" "$dir/cpu.bf16.step.safetensors" 1e-2 || fail=1
  echo "  and the CUDA bf16 step differs from the CUDA fp32 step:"
  compare "$dir/cuda.bf16.step.safetensors" "$dir/cuda.step.safetensors" 1e-4 expect-fail || fail=1
done

# Throughput: GPT-2 124M at B=16, T=1024 (the emulation: gpt_small, 2 steps).
if [[ $emulate == 1 ]]; then
  timed=tests/torch/gpt_small.nn batch=4 T=12 steps=2
else
  timed=$work/gpt124m_b16_t1024.nn batch=16 T=1024 steps=${STEPS:-6}
  sed -e 's/^const T = 64$/const T = 1024/' -e 's/^  batch 4$/  batch 16/' examples/gpt124m.nn >"$timed"
  grep -q '^const T = 1024$' "$timed" && grep -q '^  batch 16$' "$timed" || { echo "FAIL: gpt124m.nn changed"; exit 1; }
fi
dir=$work/timing && mkdir -p "$dir"
echo "== $(basename "$timed" .nn): B=$batch, T=$T"
"$trainc" build "$timed" --backend "$backend" -o "$dir/cuda" --keep-c "$dir/cuda.cu" | tail -1
"$PY" tests/e2e/random_data.py "$dir/cuda.cu" "$dir/data" $((batch * (steps + 1)))
params=$(sed -n 's/.*\.param_count = \([0-9]*\),.*/\1/p' "$dir/cuda.cu")
for precision in fp32 bf16; do
  echo "  --precision $precision"
  rc=0 sampler=
  if [[ $emulate == 0 ]] && command -v nvidia-smi >/dev/null; then # the process's device memory
    nvidia-smi --query-compute-apps=used_memory --format=csv,noheader,nounits -lms 200 \
      >"$dir/memory.$precision.csv" 2>/dev/null &
    sampler=$!
  fi
  timeout "${TIME_LIMIT:-300}" "$dir/cuda" --data "$dir/data" --steps "$steps" --log-every 1 --quiet \
    --precision "$precision" --log "$dir/log.$precision.jsonl" || rc=$?
  if [[ -n $sampler ]]; then
    kill "$sampler" 2>/dev/null || true
    arena=$(sed -n 's/^    \.arena_bytes = \([0-9]*\),$/\1/p' "$dir/cuda.cu")
    inputs=$(sed -n 's/.*trc_cuda_layout layout = {[^}]*, \([0-9]*\)u};/\1/p' "$dir/cuda.cu")
    peak=$(sort -n "$dir/memory.$precision.csv" | tail -1)
    copies=
    if [[ $precision == bf16 ]]; then copies="; the GEMMs' bf16 copies come on top"; fi
    echo "  device memory: ${peak:-?} MiB at the peak (nvidia-smi); by plan $(( (arena + 8 * params \
      + 2 * inputs) / 1048576 )) MiB (arena $((arena / 1048576)) MiB + AdamW's moments + input buffers$copies)"
  fi
  if [[ $rc == 124 ]]; then
    echo "FAIL: $steps steps did not finish in ${TIME_LIMIT:-300} s"
    fail=1
  elif [[ $rc != 0 ]]; then
    echo "FAIL: the trainer exited with $rc"
    fail=1
  else
    "$PY" - "$dir/log.$precision.jsonl" "$batch" "$T" "$params" "${PEAK_TFLOPS:-67}" <<'PY' || fail=1
import json, statistics, sys
log, B, T, N, peak = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
rates = [r["examples_per_s"] for r in map(json.loads, open(log)) if "examples_per_s" in r][1:]
if not rates:
    sys.exit("FAIL: no timed steps after the first")
tokens = statistics.median(rates) * T
mfu = 6 * N * tokens / (peak * 1e12)
print(f"  {N} parameters; median of {len(rates)} steps after the first: {tokens:.0f} tokens/s, "
      f"MFU {100 * mfu:.2f}% of {peak:g} TFLOP/s (6 x parameters x tokens/s)")
PY
  fi
done
[[ $fail == 0 ]] && echo "gpu-check: all checks passed (backend $backend)" || echo "gpu-check: FAILED"
exit $fail
