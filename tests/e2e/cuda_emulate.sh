#!/usr/bin/env bash
# The CUDA backend through its emulation (docs/cuda.md): the .cu trainer,
# compiled as host C++ (`--backend cuda-emulate`), against the C trainer of
# the same model on the same random data (tests/e2e/random_data.py):
#  - N optimizer steps give bitwise the same weights and losses, and
#    --dump-step the same loss, predictions and gradients: the kernels are
#    the same loop nests, each element computed by one thread with the
#    operations of the C loop in their order, the GEMMs the same trc_gemm.
#    Both are compiled without vectorization (SCALAR_FLAGS: trainc's default
#    flags, the sanitizers' under ASan, and no vectorizer): a vectorized C
#    loop calls libmvec's expf, logf, tanhf, erff (within 4 ulp of the scalar
#    ones, tests/codegen/vector_math.sh), and which elements a loop takes
#    through them depends on the loop, which the CUDA kernel's grid changes.
#    The C trainer's convolutions are im2col + GEMM, as the CUDA backend's
#    (--conv-im2col; by default they are oneDNN's), its loss head stores
#    the whole logits and its attention the whole probabilities, as the
#    CUDA backend's (--loss-head whole, --attention whole);
#  - the gradient norms of the log (computed on the device) too, and the
#    evaluation's loss and metrics (counted on the device for models with
#    predictions and labels);
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
default_flags=$("$trainc" --help | sed -n 's/^ *--cflags FLAGS .*(default: \(.*\))$/\1/p')
[[ -n $default_flags ]] || { echo "FAIL: no default --cflags in trainc --help"; exit 1; }
SCALAR_FLAGS="$default_flags -fno-tree-vectorize -fno-tree-slp-vectorize"
"$trainc" build "$model" --policy "$policy" -o "$dir/c" --keep-c "$dir/c.c" --conv-im2col --loss-head whole --attention whole \
  --cflags "$SCALAR_FLAGS" >"$dir/build.out"
# Open MPI's own allocations are never freed (as tests/e2e/schedule/mpi.sh)
grep -q ", MPI" "$dir/build.out" && export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0
"$trainc" build "$model" --policy "$policy" --backend cuda-emulate -o "$dir/cuda" \
  --keep-c "$dir/cuda.cu" --cflags "$SCALAR_FLAGS" >/dev/null
batch=$(sed -n 's/^    \.batch = \([0-9]*\),$/\1/p' "$dir/c.c")
accumulate=$(sed -n 's/^        \.accumulate = \([0-9]*\),$/\1/p' "$dir/c.c")
"$PY" "$(dirname "$0")/random_data.py" "$dir/c.c" "$dir/data" $((batch * accumulate * (steps + 1)))
fail=0
evaluation=(--eval-data "$dir/data")
if grep -q '\.has_predict = 1' "$dir/c.c" && ! grep -q '\.label_input = -1' "$dir/c.c"; then
  evaluation+=(--metrics loss,accuracy,f1_macro)
fi
for t in c cuda; do
  # shellcheck disable=SC2086 # the flags are words
  "$dir/$t" --data "$dir/data" --steps "$steps" --log-every 1 --quiet --save "$dir/$t.safetensors" \
    --log "$dir/$t.jsonl" "${evaluation[@]}" $flags
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
"$PY" - "$dir" "$(dirname "$0")/../torch" <<'PY' || fail=1
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[2])
import safetensors_np
d = sys.argv[1]
for what in ("safetensors", "dump.safetensors"):
    c, _ = safetensors_np.read(f"{d}/c.{what}")
    cuda, _ = safetensors_np.read(f"{d}/cuda.{what}")
    for name, ref in c.items():
        if cuda[name].tobytes() != ref.tobytes():
            diff = float(np.max(np.abs(cuda[name] - ref)))
            sys.exit(f"FAIL: {what} {name}: not bitwise the C trainer's (max difference "
                     f"{diff:.3g})")
records = lambda path: [json.loads(l) for l in open(path)]
c, cuda = records(f"{d}/c.jsonl"), records(f"{d}/cuda.jsonl")
losses = lambda rs: [r["loss"] for r in rs if "loss" in r and "step" in r]
norms = lambda rs: [r["grad_norm"] for r in rs if "grad_norm" in r]
if not losses(c) or losses(c) != losses(cuda) or norms(c) != norms(cuda) or \
        len(norms(c)) != len(losses(c)):
    sys.exit(f"FAIL: losses, gradient norms: C {losses(c)} {norms(c)}, "
             f"emulated CUDA {losses(cuda)} {norms(cuda)}")
evals = lambda rs: [r for r in rs if "eval_loss" in r]
if not evals(c) or evals(c) != evals(cuda):
    sys.exit(f"FAIL: evaluation: C {evals(c)}, emulated CUDA {evals(cuda)}")
mem = [r for r in cuda if "arena_high_water" in r][-1]
if mem["arena_high_water"] != mem["arena_planned"]:
    sys.exit(f"FAIL: device high-water mark {mem['arena_high_water']}, planned {mem['arena_planned']}")
print("weights, --dump-step, losses, gradient norms, evaluation: bitwise the C trainer's; "
      f"device peak = plan = {mem['arena_planned']} bytes")
PY
if [[ $gradcheck == gradcheck ]]; then
  "$dir/cuda" --gradcheck >"$dir/gradcheck.out" || { cat "$dir/gradcheck.out"; echo "FAIL: $name: gradcheck"; fail=1; }
fi
[[ $fail == 0 ]] && echo "$name: emulated CUDA trainer = C trainer ($steps steps, dump-step)" \
  "${gradcheck/no-gradcheck/(no gradcheck)}"
exit $fail
