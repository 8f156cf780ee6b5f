#!/usr/bin/env bash
# Activations stored in bf16 (`--compress bf16`, docs/planner.md), checked
# on real training (the values against PyTorch rounding alike are
# tests/torch's fashion_mlp_small_bf16):
#  - the plan stores values in bf16 ("STORE bf16"), and its stored
#    activations are exactly `off`'s less half the bytes of those values;
#  - off, every 2 and a budget train, and the measured arena high-water mark
#    equals the plan, as does the most the recomputed GEMMs took of their
#    rounded operands' buffer;
#  - the C trainer and the LLVM one, both with scalar math (as
#    tests/e2e/llvm.sh's cs and llvms), train to bitwise the same weights
#    (the same runtime calls round and widen), and those differ from the
#    uncompressed trainer's (the rounding happened);
#  - at the peak of `off` with bf16 storage, which `off` itself exceeds, the
#    plan predicts no more time than without --compress (its candidates are
#    a superset); on examples/deep_mlp.nn it recomputes nothing there, while
#    without --compress the same budget recomputes;
#  - the train block's `compress bf16` does what the flag does, and
#    --compress none overrides it;
#  - a bad --compress value, and bf16 storage on a CUDA backend (flag or
#    train block), are errors.
# usage: compress.sh TRAINC SOURCE_DIR WORKDIR MODEL.nn=DATA...
#   DATA: fashion or random, as tests/e2e/checkpoint.sh
set -euo pipefail
trainc=$1 src=$2 work=$3
shift 3
PY=/usr/bin/python3
rm -rf "$work" && mkdir -p "$work"
cflags=(--cflags "${TRAINC_TEST_CFLAGS:-} -O2 -Wall -Wextra -Werror")
fail=0
flunk() { echo "FAIL: $*"; fail=1; }

source "$src/tests/e2e/run_data.sh"

# plan_figure MODEL FIELD ARGS...: a figure of the JSON plan.
plan_figure() {
  local model=$1 field=$2
  shift 2
  "$trainc" plan "$model" --format json "$@" | "$PY" -c '
import json, sys
p = json.load(sys.stdin)
packed = sum(v["bytes"] for v in p["values"] if v["decision"] == "STORE bf16")
print({"stored": p["peak"]["stored_activations"], "total": p["peak"]["total"], "packed": packed,
       "operands": p["peak"]["bf16_operands"],
       "recompute_flops": int(p["flops"]["recompute"]),
       "recompute_us": int(1e6 * p["seconds"]["recompute"])}[sys.argv[1]])' "$field"
}
default_flags=$("$trainc" --help | sed -n 's/^ *--cflags FLAGS .*(default: \(.*\))$/\1/p')
[[ -n $default_flags ]] || { echo "FAIL: no default flags in trainc --help"; exit 1; }

for arg in "$@"; do
  model=${arg%=*} data=$(data_dir "${arg#*=}" "$model")
  name=$(basename "$model" .nn)
  stored=$(plan_figure "$model" stored --policy off)
  packed=$(plan_figure "$model" packed --policy off --compress bf16)
  stored16=$(plan_figure "$model" stored --policy off --compress bf16)
  ((packed > 0)) || flunk "$name: nothing stored in bf16"
  ((stored16 == stored - packed / 2)) ||
    flunk "$name: stored $stored16 bytes in bf16, not off's $stored less half of $packed"

  lo=$(plan_figure "$model" total --policy all --compress bf16)
  hi=$(plan_figure "$model" total --policy off --compress bf16)
  for policy in off "every 2" "budget $(((lo + hi) / 2))"; do
    bin=$work/${name}_${policy// /_}
    "$trainc" build "$model" --policy "$policy" --compress bf16 -o "$bin" "${cflags[@]}" >/dev/null
    "$bin" --data "$data" --steps 4 --quiet --save "$bin.safetensors" --log "$bin.jsonl"
    read -r planned measured < <(arena_of "$bin.jsonl")
    [[ $planned == "$measured" ]] ||
      flunk "$name: '$policy' with bf16 storage planned $planned bytes, measured high-water mark $measured"
    echo "$name, $policy, compress bf16: arena planned = measured = $planned bytes"
    # the recomputed GEMMs' rounded operands: a buffer of the planned size
    read -r planned measured < <(operands_of "$bin.jsonl")
    [[ $planned == "$measured" && $planned == $(plan_figure "$model" operands --policy "$policy" --compress bf16) ]] ||
      flunk "$name: '$policy' planned $planned bytes of bf16 GEMM operands, took $measured"
    [[ $policy != "every 2" ]] || ((planned > 0)) || flunk "$name: '$policy' recomputes no GEMM with bf16 operands"
  done

  # the second backend, and the uncompressed trainer
  "$trainc" build "$model" --compress bf16 -o "$work/${name}_cs" \
    --cflags "$default_flags -fno-tree-vectorize -fno-tree-slp-vectorize" >/dev/null
  "$trainc" build --backend llvm --scalar-math "$model" --compress bf16 -o "$work/${name}_llvms" >/dev/null
  for how in cs llvms; do
    "$work/${name}_$how" --data "$data" --steps 4 --quiet --save "$work/${name}_$how.safetensors"
  done
  cmp -s "$work/${name}_cs.safetensors" "$work/${name}_llvms.safetensors" ||
    flunk "$name: the C and LLVM trainers (scalar math) train to different weights with bf16 storage"
  "$trainc" build "$model" -o "$work/${name}_f32" "${cflags[@]}" >/dev/null
  "$work/${name}_f32" --data "$data" --steps 4 --quiet --save "$work/${name}_f32.safetensors"
  ! cmp -s "$work/${name}_off.safetensors" "$work/${name}_f32.safetensors" ||
    flunk "$name: bf16 storage trains to the f32 trainer's very weights: nothing was rounded"

  # a budget below off's peak: bf16 storage never predicts more time
  ((hi < $(plan_figure "$model" total --policy off))) || flunk "$name: bf16 storage saves nothing at off"
  us16=$(plan_figure "$model" recompute_us --budget "$hi" --compress bf16)
  us32=$(plan_figure "$model" recompute_us --budget "$hi")
  ((us16 <= us32)) || flunk "$name: at budget $hi, predicted $us16 us with bf16 storage, $us32 us without"
done

# deep_mlp: at the peak of off with bf16 storage, storing in bf16 (about 1%
# of the step) beats recomputing layers (a GEMM each: 2 x 512 x 1024 x 1024
# FLOPs); what it may still remake is a bias add and ReLU (a few MFLOPs),
# which the backward pass then reads from the cache
deep=$src/examples/deep_mlp.nn
gemm=$((2 * 512 * 1024 * 1024))
hi=$(plan_figure "$deep" total --policy off --compress bf16)
flops16=$(plan_figure "$deep" recompute_flops --budget "$hi" --compress bf16)
flops32=$(plan_figure "$deep" recompute_flops --budget "$hi")
((flops16 < gemm && flops32 >= gemm)) ||
  flunk "deep_mlp: at budget $hi, recompute FLOPs $flops16 with bf16 storage, $flops32 without"

expect_error() { # what pattern command...
  local what=$1 pattern=$2
  shift 2
  if "$@" >"$work/err.out" 2>&1; then flunk "$what was accepted"; return; fi
  grep -q -- "$pattern" "$work/err.out" || { flunk "$what: unexpected message"; cat "$work/err.out"; }
}
model=${1%=*}
# the train block's setting, before its checkpoint setting or after
for where in first last; do
  if [[ $where == first ]]; then sed 's/^train {/train {\n  compress bf16/' "$model" >"$work/in_block.nn"
  else sed 's/^train {/train {\n  checkpoint off/; /^train {/,/^}/ s/^}$/  compress bf16\n}/' "$model" >"$work/in_block.nn"; fi
  [[ $("$trainc" plan "$work/in_block.nn" --policy off --format json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["compress"])') == bf16 ]] ||
    flunk "the train block's compress bf16 ($where) is not planned"
  [[ $(plan_figure "$work/in_block.nn" stored --policy off) == $(plan_figure "$model" stored --policy off --compress bf16) ]] ||
    flunk "the train block's compress bf16 ($where) stores other bytes than --compress bf16"
done
[[ $(plan_figure "$work/in_block.nn" packed --compress none) == 0 ]] || flunk "--compress none does not override the train block"
expect_error "the train block's compress with CUDA" "the train block's .compress bf16. needs --compress none" \
  "$trainc" emit "$work/in_block.nn" --backend cuda -o "$work/cuda.cu"
"$trainc" emit "$work/in_block.nn" --backend cuda --compress none -o "$work/cuda.cu" >/dev/null ||
  flunk "--compress none does not let the CUDA backend build a model whose train block says compress bf16"
expect_error "--compress fp8" "--compress takes bf16 or none, not 'fp8'" "$trainc" plan "$model" --compress fp8
expect_error "CUDA with bf16 storage" "the CUDA backends store no activations in bf16" \
  "$trainc" build "$model" --backend cuda-emulate --compress bf16 -o "$work/cuda"
exit $fail
