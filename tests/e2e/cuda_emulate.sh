#!/usr/bin/env bash
# The CUDA backend through its emulation (docs/cuda.md): the .cu trainer,
# compiled as host C++ (`--backend cuda-emulate`), against the C trainer of
# the same model on the same random data (tests/e2e/random_data.py):
#  - N optimizer steps give the same weights and losses, and --dump-step the
#    same loss, predictions and gradients: bitwise where the C trainer's loops
#    call no libmvec function (the kernels are the same loop nests compiled
#    with the same flags, the GEMMs the same trc_gemm), else within a
#    relative 1e-5 of each tensor's largest element, floored at 1e-4 of the
#    largest tensor's (its vectorized expf, logf, tanhf, erff are libmvec's,
#    within 4 ulp of the scalar ones the emulated kernels call);
#  - the gradient norms of the log (computed on the device) too;
#  - its measured device high-water mark equals the plan;
#  - with trainer FLAGS (the optimizer, clipping), the same under them, and a
#    run saved after 2 steps and resumed for the third ends where the run of
#    3 did (the device's parameters and optimizer state go to the host when
#    saved and come back when resumed);
#  - with `gradcheck` (the gradcheck models; the examples have kinks and
#    take minutes), --gradcheck passes.
# usage: cuda_emulate.sh TRAINC MODEL.nn WORKDIR gradcheck|no-gradcheck [POLICY [FLAGS]]
set -euo pipefail
trainc=$1 model=$2 work=$3 gradcheck=$4 policy=${5:-off} flags=${6:-} steps=3
name=$(basename "$model" .nn)_${policy// /_}${flags:+_flags}
dir=$work/$name
mkdir -p "$dir"
PY=/usr/bin/python3
"$trainc" build "$model" --policy "$policy" -o "$dir/c" --keep-c "$dir/c.c" >"$dir/build.out"
# Open MPI's own allocations are never freed (as tests/e2e/schedule/mpi.sh)
grep -q ", MPI" "$dir/build.out" && export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0
"$trainc" build "$model" --policy "$policy" --backend cuda-emulate -o "$dir/cuda" --keep-c "$dir/cuda.cu" >/dev/null
batch=$(sed -n 's/^    \.batch = \([0-9]*\),$/\1/p' "$dir/c.c")
accumulate=$(sed -n 's/^        \.accumulate = \([0-9]*\),$/\1/p' "$dir/c.c")
"$PY" "$(dirname "$0")/random_data.py" "$dir/c.c" "$dir/data" $((batch * accumulate * (steps + 1)))
fail=0
for t in c cuda; do
  # shellcheck disable=SC2086 # the flags are words
  "$dir/$t" --data "$dir/data" --steps "$steps" --log-every 1 --quiet --save "$dir/$t.safetensors" \
    --log "$dir/$t.jsonl" $flags
  "$dir/$t" --data "$dir/data" --dump-step "$dir/$t.dump.safetensors"
done
if [[ -n $flags ]]; then
  rm -rf "$dir/state"
  # shellcheck disable=SC2086 # the flags are words
  "$dir/cuda" --data "$dir/data" --steps "$steps" --quiet --save-state "$dir/state" --save-every 2 \
    --save-total-limit 0 $flags
  rm "$dir/state/state-$steps".* # resumed from step 2's
  # shellcheck disable=SC2086
  "$dir/cuda" --data "$dir/data" --steps "$steps" --quiet --resume "$dir/state" \
    --save "$dir/resumed.safetensors" $flags
  cmp "$dir/cuda.safetensors" "$dir/resumed.safetensors" ||
    { echo "FAIL: $name: resumed after 2 steps, not the weights of 3 steps in one run"; fail=1; }
fi
# Bitwise, or (the C trainer's vectorized loops call libmvec's expf, logf,
# tanhf, erff, within 4 ulp of the scalar ones the emulated kernels call)
# within a relative 1e-5 of the largest element of each tensor.
"$PY" - "$dir" "$(dirname "$0")/../torch" <<'PY' || fail=1
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[2])
import safetensors_np
d = sys.argv[1]
bound, worst, bitwise = 1e-5, 0.0, True
for what in ("safetensors", "dump.safetensors"):
    c, _ = safetensors_np.read(f"{d}/c.{what}")
    cuda, _ = safetensors_np.read(f"{d}/cuda.{what}")
    floor = 1e-4 * max(float(np.max(np.abs(t))) for t in c.values()) # as bench/gpu-check.sh
    for name, ref in c.items():
        got = cuda[name]
        bitwise &= got.tobytes() == ref.tobytes()
        scale = max(float(np.max(np.abs(ref))), floor, 1e-30)
        worst = max(worst, float(np.max(np.abs(got - ref))) / scale)
records = lambda path: [json.loads(l) for l in open(path)]
c, cuda = records(f"{d}/c.jsonl"), records(f"{d}/cuda.jsonl")
losses = lambda rs: [r["loss"] for r in rs if "loss" in r and "step" in r]
if not losses(c) or len(losses(c)) != len(losses(cuda)):
    sys.exit(f"FAIL: losses: C {losses(c)}, emulated CUDA {losses(cuda)}")
norms = lambda rs: [r["grad_norm"] for r in rs if "grad_norm" in r]
if len(norms(c)) != len(losses(c)) or len(norms(c)) != len(norms(cuda)):
    sys.exit(f"FAIL: gradient norms: C {norms(c)}, emulated CUDA {norms(cuda)}")
if bitwise and norms(c) != norms(cuda): # the same gradients, the same order of additions
    sys.exit(f"FAIL: gradient norms not bitwise: C {norms(c)}, emulated CUDA {norms(cuda)}")
bitwise &= losses(c) == losses(cuda) and norms(c) == norms(cuda)
pairs = list(zip(losses(cuda), losses(c))) + list(zip(norms(cuda), norms(c)))
worst = max([worst] + [abs(a - b) / max(abs(b), 1e-30) for a, b in pairs])
mem = [r for r in cuda if "arena_high_water" in r][-1]
if mem["arena_high_water"] != mem["arena_planned"]:
    sys.exit(f"FAIL: device high-water mark {mem['arena_high_water']}, planned {mem['arena_planned']}")
if not worst < bound:
    sys.exit(f"FAIL: weights, --dump-step or losses differ from the C trainer's by {worst:.3g} (relative)")
how = "bitwise" if bitwise else f"not bitwise, within {worst:.2g} relative"
print(f"weights, --dump-step, losses and gradient norms as the C trainer's: {how}; "
      f"device peak = plan = {mem['arena_planned']} bytes")
PY
if [[ $gradcheck == gradcheck ]]; then
  "$dir/cuda" --gradcheck >"$dir/gradcheck.out" || { cat "$dir/gradcheck.out"; echo "FAIL: $name: gradcheck"; fail=1; }
fi
[[ $fail == 0 ]] && echo "$name: emulated CUDA trainer = C trainer ($steps steps, dump-step)" \
  "${gradcheck/no-gradcheck/(no gradcheck)}"
exit $fail
