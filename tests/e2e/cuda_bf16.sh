#!/usr/bin/env bash
# `precision bf16` on the CUDA backend (docs/cuda.md, docs/trainer.md *Mixed
# precision*), through its emulation: the .cu trainer compiled as host C++,
# whose cuBLAS calls are emulated faithfully (cublasSgemmStridedBatched in
# fp32 whatever the run's precision, as cuBLAS; cublasGemmStridedBatchedEx
# on the bf16 copies the trainer rounds on the device), against the C
# trainer of the same model on the same random data, both run with
# --precision bf16:
#  1. 3 steps' weights, losses and gradient norms, and --dump-step's loss,
#     predictions and gradients: bitwise the C trainer's. Bitwise, not
#     within a tolerance, because here nothing differs: the device's
#     rounding kernel rounds as the C trainer's GEMM does (trc_round_bf16,
#     tests/runtime/test_kernel_helpers.c), and the emulated
#     bf16 GEMM multiplies those bf16 numbers with the C trainer's own bf16
#     GEMM (f32 accumulation, the same partition). On a GPU cuBLAS
#     accumulates in its own order, so there the two differ by rounding
#     (bench/gpu-check.sh's bf16 check has the tolerance);
#  2. the same trainer under --precision fp32 gives other gradients and
#     other weights: a trainer that ignored bf16 would fail here;
#  3. where trainc has the CUDA backend (nvcc), the GPU trainer nvcc builds
#     calls cublasGemmStridedBatchedEx and has the rounding kernel. Before
#     this path every GEMM was cublasSgemmStridedBatched, which ignores bf16
#     on a GPU; the emulation followed the run's precision all the same (its
#     cuBLAS was the C trainer's trc_gemm, which reads it), so 1 and 2
#     passed there and 3 failed; the old generated code under today's
#     emulation fails 1.
# Both trainers are built without vectorization, as in cuda_emulate.sh.
# usage: cuda_bf16.sh TRAINC MODEL.nn WORKDIR
set -euo pipefail
trainc=$1 model=$2 work=$3 steps=3
dir=$work/$(basename "$model" .nn)
mkdir -p "$dir"
PY=/usr/bin/python3
default_flags=$("$trainc" --help | sed -n 's/^ *--cflags FLAGS .*(default: \(.*\))$/\1/p')
[[ -n $default_flags ]] || { echo "FAIL: no default --cflags in trainc --help"; exit 1; }
SCALAR_FLAGS="$default_flags -fno-tree-vectorize -fno-tree-slp-vectorize"
"$trainc" build "$model" -o "$dir/c" --keep-c "$dir/c.c" --conv-im2col --loss-head whole --attention whole --cflags "$SCALAR_FLAGS" \
  >"$dir/build.out"
# Open MPI's own allocations are never freed (as cuda_emulate.sh)
grep -q ", MPI" "$dir/build.out" && export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0
"$trainc" build "$model" --backend cuda-emulate -o "$dir/cuda" --cflags "$SCALAR_FLAGS" >/dev/null
batch=$(sed -n 's/^    \.batch = \([0-9]*\),$/\1/p' "$dir/c.c")
accumulate=$(sed -n 's/^        \.accumulate = \([0-9]*\),$/\1/p' "$dir/c.c")
"$PY" "$(dirname "$0")/random_data.py" "$dir/c.c" "$dir/data" $((batch * accumulate * (steps + 1)))
for run in c:bf16 cuda:bf16 cuda:fp32; do
  t=${run%:*} p=${run#*:}
  "$dir/$t" --data "$dir/data" --precision "$p" --steps "$steps" --log-every 1 --quiet \
    --save "$dir/$t.$p.safetensors" --log "$dir/$t.$p.jsonl"
  "$dir/$t" --data "$dir/data" --precision "$p" --quiet --dump-step "$dir/$t.$p.dump.safetensors"
done
"$PY" - "$dir" "$(dirname "$0")/../torch" <<'PY'
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[2])
import safetensors_np
d = sys.argv[1]
read = lambda stem: safetensors_np.read(f"{d}/{stem}.safetensors")[0]
for what in ("", ".dump"):
    c, cuda = read(f"c.bf16{what}"), read(f"cuda.bf16{what}")
    for name, ref in c.items():
        if cuda[name].tobytes() != ref.tobytes():
            diff = float(np.max(np.abs(cuda[name] - ref)))
            sys.exit(f"FAIL: bf16{what} {name}: not bitwise the C trainer's (max difference {diff:.3g})")
records = lambda stem: [json.loads(l) for l in open(f"{d}/{stem}.jsonl")]
logged = lambda rs: [(r["loss"], r["grad_norm"]) for r in rs if "step" in r and "grad_norm" in r]
c, cuda = logged(records("c.bf16")), logged(records("cuda.bf16"))
if not c or c != cuda:
    sys.exit(f"FAIL: bf16 (loss, gradient norm) per step: C {c}, emulated CUDA {cuda}")
print(f"bf16: emulated CUDA = C trainer, bitwise (weights, --dump-step, {len(c)} losses and norms)")
for what in ("", ".dump"):
    bf16, fp32 = read(f"cuda.bf16{what}"), read(f"cuda.fp32{what}")
    changed = [n for n in bf16 if n != "loss" and bf16[n].tobytes() != fp32[n].tobytes()]
    if not changed:
        sys.exit(f"FAIL: emulated CUDA{what or ' weights'}: bf16 = fp32 (is bf16 ignored?)")
    # a tensor zero in exact arithmetic (attention's key-bias gradient) is
    # measured against 1e-4 of the largest tensor's values, as gpu-check.sh
    floor = 1e-4 * max(float(np.max(np.abs(t))) for t in fp32.values())
    worst = max(float(np.max(np.abs(bf16[n] - fp32[n]))) / max(float(np.max(np.abs(fp32[n]))), floor)
                for n in changed)
    print(f"bf16 against fp32{what or ' weights'}: {len(changed)} of {len(bf16)} tensors differ, "
          f"at most by {worst:.2g} of the tensor's largest value")
PY
# A sanitized build's runtime cannot be linked by nvcc (codegen.nvcc, labelled
# long, is skipped there too)
if [[ $default_flags == *-fsanitize* ]]; then
  echo "sanitized trainc: the GPU trainer's bf16 GEMM not checked (nvcc)"
elif "$trainc" build "$model" --backend cuda -o "$dir/gpu" >"$dir/gpu.out" 2>&1; then
  nm "$dir/gpu" >"$dir/gpu.nm"
  if ! grep -q ' U cublasGemmStridedBatchedEx' "$dir/gpu.nm" ||
    ! grep -q trc_round_bf16_kernel "$dir/gpu.nm"; then
    echo "FAIL: the GPU trainer has no bf16 GEMM (cublasGemmStridedBatchedEx, the rounding kernel)"
    exit 1
  fi
  echo "GPU trainer (nvcc): calls cublasGemmStridedBatchedEx, has trc_round_bf16_kernel"
elif grep -q "the CUDA backend is off" "$dir/gpu.out"; then
  echo "no nvcc: the GPU trainer's bf16 GEMM not checked"
else
  cat "$dir/gpu.out"
  echo "FAIL: nvcc build"
  exit 1
fi
