#!/usr/bin/env bash
# The CUDA backend through its emulation (docs/cuda.md): the .cu trainer,
# compiled as host C++ (`--backend cuda-emulate`), against the C trainer of
# the same model on the same random data (tests/e2e/random_data.py):
#  - N optimizer steps give bitwise the same weights and losses (the kernels
#    are the same loop nests compiled with the same flags, the GEMMs the same
#    OpenBLAS calls: any difference is a bug of the backend);
#  - --dump-step gives bitwise the same loss, predictions and gradients;
#  - its measured device high-water mark equals the plan;
#  - with `gradcheck` (the gradcheck models; the examples have kinks and
#    take minutes), --gradcheck passes.
# usage: cuda_emulate.sh TRAINC MODEL.nn WORKDIR gradcheck|no-gradcheck [POLICY]
set -euo pipefail
trainc=$1 model=$2 work=$3 gradcheck=$4 policy=${5:-off} steps=3
name=$(basename "$model" .nn)_${policy// /_}
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
  "$dir/$t" --data "$dir/data" --steps "$steps" --log-every 1 --quiet --save "$dir/$t.safetensors" --log "$dir/$t.jsonl"
  "$dir/$t" --data "$dir/data" --dump-step "$dir/$t.dump.safetensors"
done
cmp -s "$dir/c.safetensors" "$dir/cuda.safetensors" ||
  { echo "FAIL: $name: weights after $steps steps differ from the C trainer's"; fail=1; }
cmp -s "$dir/c.dump.safetensors" "$dir/cuda.dump.safetensors" ||
  { echo "FAIL: $name: --dump-step (loss, predictions, gradients) differs from the C trainer's"; fail=1; }
"$PY" - "$dir/c.jsonl" "$dir/cuda.jsonl" <<'PY' || fail=1
import json, sys
def records(path):
    return [json.loads(l) for l in open(path)]
c, cuda = records(sys.argv[1]), records(sys.argv[2])
losses = lambda rs: [r["loss"] for r in rs if "loss" in r and "step" in r]
if losses(c) != losses(cuda) or not losses(c):
    sys.exit(f"FAIL: losses differ: C {losses(c)}, emulated CUDA {losses(cuda)}")
mem = [r for r in cuda if "arena_high_water" in r][-1]
if mem["arena_high_water"] != mem["arena_planned"]:
    sys.exit(f"FAIL: device high-water mark {mem['arena_high_water']}, planned {mem['arena_planned']}")
print(f"losses {losses(cuda)} as the C trainer's; device peak = plan = {mem['arena_planned']} bytes")
PY
if [[ $gradcheck == gradcheck ]]; then
  "$dir/cuda" --gradcheck >"$dir/gradcheck.out" || { cat "$dir/gradcheck.out"; echo "FAIL: $name: gradcheck"; fail=1; }
fi
[[ $fail == 0 ]] && echo "$name: emulated CUDA trainer = C trainer, bitwise ($steps steps, dump-step)" \
  "${gradcheck/no-gradcheck/(no gradcheck)}"
exit $fail
