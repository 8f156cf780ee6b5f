#!/usr/bin/env bash
# The LLVM backend computes what the C backend computes. For each model these
# trainers train STEPS steps from the same seed:
#   cs    the C-built trainer with scalar math (trainc's default flags and no
#         vectorizer: expf, logf, tanhf, erff are libm's; its binary must
#         call no libmvec function, _ZGV*, but in the runtime's loss head)
#   llvms the LLVM-built trainer with --scalar-math (libm's functions too)
#   c     the default C-built trainer: GCC widens the loops it vectorizes
#         into glibc's libmvec vector functions (runtime/trainc.h)
#   llvm  the default LLVM-built trainer (`trainc build --backend llvm`): the
#         loop vectorizer widens them into libmvec's functions too
#   run   `trainc run` (LLVM's JIT in trainc's process), the same module
# Both backends make one function per distinct kernel (as many of each).
# Bitwise (the loss logs but the measurements, and the saved weights, cmp):
# llvms against cs (the same operations in the same order), and run against
# llvm (the same optimized module). Within a bound: c and llvm against cs,
# and llvm against c. They call the same libmvec functions, but not on the
# same elements: which loops are vectorized, at which width (AVX-512's 16
# lanes, AVX2's 8, SSE's 4: LLVM's epilogues take a narrower one), and which
# remainder elements stay scalar are each compiler's choice, and libmvec's
# versions differ from libm and from each other in the last bits (all within
# 4 ulp of the exact result; tests/codegen/vector_math.sh). Over the few
# steps these tests train that moves the loss and the gradient norm by less
# than REL = 1e-4 relative (seen: at most 3.2e-7), while a wrong kernel moves
# them by O(1). A weight moves by less than REL of its tensor's largest
# magnitude plus the sum of the steps' lr: an Adam step turns a gradient's
# last bits (a gradient near 0) into a move of up to lr (seen: 6% of lr on
# gpt124m after one step). An empirical bound for a few steps, not a proof:
# long runs drift apart further. Every other field of the logs must be
# equal. DATA "gradcheck": `trainc run --gradcheck` must pass first, then the
# trainers train on random rows.
# usage: llvm.sh TRAINC SOURCE_DIR WORKDIR STEPS MODEL.nn=DATA...
#   DATA: fashion (Fashion-MNIST), kjv and kjv64 (scripts/fetch-kjv, T = 32
#   and 64), pairs (scripts/make-pair-data), random (random rows for the
#   inputs the trainer's --help lists), gradcheck (`trainc run
#   --gradcheck`, then random). MODEL gpt-small is examples/gpt.nn at the
#   size of tests/e2e/gpt.sh (dropout kept). DATA@N trains on N ranks under
#   mpirun (the C- and LLVM-built trainers: `trainc run` refuses MPI models).
# TRAINC_TEST_ATTENTION=fused|whole: every build's --attention (default auto).
set -euo pipefail
trainc=$1 src=$2 work=$3 steps=$4
shift 4
mkdir -p "$work"
PY=/usr/bin/python3
fail=0
REL=1e-4
attention=(--attention "${TRAINC_TEST_ATTENTION:-auto}")
default_flags=$("$trainc" --help | sed -n 's/^ *--cflags FLAGS .*(default: \(.*\))$/\1/p')
[[ -n $default_flags ]] || { echo "FAIL: no default flags in trainc --help"; exit 1; }

# Random rows for every input, four batches' worth, as the trainer's
# --help lists them (dtype, shape, the range of index values).
random_data() { # trainer dir
  mkdir -p "$2"
  "$1" --help | "$PY" -c '
import re, sys, numpy as np
text = sys.stdin.read()
B = int(re.search(r"; B = (\d+)\)", text).group(1))
r = np.random.default_rng(7)
for name, dtype, dims, limit in re.findall(r"^  (\w+) +(f32|i32|u8)\[B((?:, \d+)*)\](?: +values in \[0, (\d+)\))?$", text, re.M):
    shape = [4 * B] + [int(d) for d in dims.split(", ")[1:]]
    if dtype == "f32":
        x = r.standard_normal(shape, dtype=np.float32)
    else:
        x = r.integers(0, int(limit) if limit else 256, size=shape).astype(np.int32 if dtype == "i32" else np.uint8)
    np.save(sys.argv[1] + "/" + name + ".npy", x)' "$2"
}

data_dir() { # kind trainer
  case $1 in
  random) random_data "$2" "$work/random_$(basename "$2")" && echo "$work/random_$(basename "$2")" ;;
  fashion) "$src/scripts/fetch-fashion-mnist" "$work/fashion" >/dev/null && echo "$work/fashion/train" ;;
  kjv | kjv64) # T = 32 (gpt-small), 64 (examples/gpt.nn)
    local t=${1#kjv}
    [[ -d $work/$1 ]] || "$src/scripts/fetch-kjv" "$work/$1" "${t:-32}" >/dev/null
    echo "$work/$1/train" ;;
  pairs) [[ -d $work/pairs ]] || "$PY" "$src/scripts/make-pair-data" "$work/pairs" >/dev/null; echo "$work/pairs/train" ;;
  esac
}

# The log without its measurements (timings, page faults), one record a line.
losses() {
  "$PY" -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    for k in ("examples_per_s", "seconds", "comm_seconds", "page_faults"):
        r.pop(k, None)
    print(json.dumps(r, sort_keys=True))' "$1"
}

# Trainer b's log and weights against trainer a's, within the header's
# bounds; prints the largest differences.
near() { # a b
  if ! "$PY" - "$out.$1.losses" "$out.$2.losses" "$out.$1.safetensors" "$out.$2.safetensors" \
    "$REL" "$1 vs $2" <<'EOF'; then
import json, struct, sys
import numpy as np
ls, lv, ws, wv, rel, what = sys.argv[1:7]
rel = float(rel)
worst = {"loss": 0.0, "grad_norm": 0.0, "weights": 0.0}
ok, lr_sum = True, 0.0
for a, b in zip(open(ls), open(lv), strict=True):
    a, b = json.loads(a), json.loads(b)
    lr_sum += a.get("lr", 0.0)
    for k in ("loss", "grad_norm"):
        if k in a and k in b: # a step's record
            x, y = a.pop(k), b.pop(k)
            worst[k] = max(worst[k], abs(x - y) / max(abs(x), 1e-30))
    ok = ok and a == b
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    head.pop("__metadata__", None)
    return {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]],
                             dtype=np.float32) for k, v in head.items()}
ts, tv = tensors(ws), tensors(wv)
ok = ok and ts.keys() == tv.keys()
for k in ts: # the difference as a fraction of what the bound allows
    allowed = max(rel * float(np.abs(ts[k]).max(initial=0)) + lr_sum, 1e-30)
    worst["weights"] = max(worst["weights"], float(np.abs(ts[k] - tv[k]).max(initial=0)) / allowed)
print(f"  {what}: loss, grad norm {worst['loss']:.2g}, {worst['grad_norm']:.2g} relative;",
      f"weights {worst['weights']:.2g} of the bound")
sys.exit(0 if ok and max(worst["loss"], worst["grad_norm"]) <= rel and worst["weights"] <= 1 else 1)
EOF
    echo "FAIL: $name: the $2 trainer is not within the bounds of the $1 one"
    fail=1 model_fail=1
  fi
}

same() { # what, two files that must be equal
  if ! cmp -s "$2" "$3"; then
    echo "FAIL: $name: $1 differ: $2 $3"
    fail=1 model_fail=1
  fi
}


# The functions of a trainer that call libmvec (_ZGV*), but the runtime's
# loss head (head_rows, runtime/kernels/head.c) and fused attention's rows
# (softmax_rows, softmax_grad_rows, runtime/kernels/attention.c), which
# always do: they are the same code in the C and LLVM trainers.
vector_math_callers() {
  objdump -d --no-show-raw-insn "$1" |
    awk '/^[0-9a-f]+ <.*>:$/ { fn = $2 } /call.*<_ZGV/ { print fn }' | sort -u |
    grep -v '^<\(head_rows\|softmax_rows\|softmax_grad_rows\)\.' || true
}
for arg in "$@"; do
  model=${arg%=*} data=${arg#*=} ranks=1 launch=()
  if [[ $data == *@* ]]; then
    ranks=${data#*@} data=${data%@*}
    launch=(mpirun --allow-run-as-root --oversubscribe -np "$ranks" --mca mpi_yield_when_idle 1)
    export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 # Open MPI's own allocations
  fi
  if [[ $model == gpt-small ]]; then
    sed -e 's/^const T = 64 /const T = 32 /' -e 's/^const D = 128 /const D = 48 /' \
      -e 's/^const LAYERS = 4$/const LAYERS = 2/' -e 's/^  batch 32$/  batch 8/' "$src/examples/gpt.nn" >"$work/gpt_small.nn"
    model=$work/gpt_small.nn
  fi
  name=$(basename "$model" .nn) model_fail=0
  out=$work/$name
  "$trainc" build "${attention[@]}" "$model" -o "$out.c.bin" >/dev/null
  "$trainc" build "${attention[@]}" "$model" -o "$out.cs.bin" \
    --cflags "$default_flags -fno-tree-vectorize -fno-tree-slp-vectorize" >/dev/null
  if [[ -n $(vector_math_callers "$out.cs.bin") ]]; then
    echo "FAIL: $name: the scalar-math C trainer calls libmvec"
    fail=1 model_fail=1
  fi
  "$trainc" build "${attention[@]}" --backend llvm "$model" -o "$out.llvm.bin" >/dev/null
  "$trainc" build "${attention[@]}" --backend llvm --scalar-math "$model" -o "$out.llvms.bin" >/dev/null
  if [[ -n $(vector_math_callers "$out.llvms.bin") ]]; then
    echo "FAIL: $name: the --scalar-math LLVM trainer calls libmvec"
    fail=1 model_fail=1
  fi
  # one function per distinct kernel in both backends (ir.h's kernel_form)
  c_fns=$("$trainc" emit "${attention[@]}" "$model" -o "$out.c" >/dev/null && grep -c 'noinline' "$out.c")
  llvm_fns=$("$trainc" emit "${attention[@]}" --backend llvm "$model" -o "$out.ll" >/dev/null &&
    grep -cE '^define .*@k[0-9]+\(' "$out.ll")
  if [[ $c_fns != "$llvm_fns" ]]; then
    echo "FAIL: $name: $llvm_fns LLVM kernel functions, $c_fns C ones"
    fail=1 model_fail=1
  fi
  if [[ $data == gradcheck ]]; then # the C trainer's: tests/e2e/gradcheck.sh
    "$trainc" run "${attention[@]}" "$model" --gradcheck --seed 3 >"$out.run.txt" ||
      { echo "FAIL: $name: trainc run --gradcheck"; cat "$out.run.txt"; fail=1 model_fail=1; }
    data=random
  fi
  flags=(--data "$(data_dir "$data" "$out.c.bin")" --steps "$steps" --seed 3 --log-every 1)
  # the LLVM trainers on 3 threads, the others on the default count: parallel
  # loops and trc_gemm give the same bits on any number
  for how in c cs llvm llvms; do
    threads=()
    [[ $how == llvm* ]] && threads=(--threads 3)
    "${launch[@]}" "$out.$how.bin" "${flags[@]}" --quiet "${threads[@]}" \
      --save "$out.$how.safetensors" --log "$out.$how.jsonl"
  done
  hows=(c cs llvm llvms)
  if ((ranks == 1)); then
    # not quiet: its time to first step counts the JIT's whole compile, which
    # step 1 waits for (--time-phases: LLVM's seconds, one thread after the other)
    "$trainc" run "${attention[@]}" --time-phases "$model" "${flags[@]}" \
      --save "$out.run.safetensors" --log "$out.run.jsonl" 2>"$out.run.err"
    hows+=(run)
    # an LLVM diagnostic (a loop hint it could not honour: a hint the backend
    # should not have given) must not reach trainc run's stderr
    if grep -q "^warning: \|^remark: \|^error: " "$out.run.err"; then
      echo "FAIL: $name: LLVM diagnostics on trainc run's stderr"
      grep "^warning: \|^remark: \|^error: " "$out.run.err"
      fail=1 model_fail=1
    fi
    if ! awk '/^time to first step:/ { first = $5 } /^LLVM seconds:/ { llvm = $4 + $6 + $8 }
              END { exit !(first != "" && llvm != "" && first + 0.02 >= llvm) }' \
      "$out.run.err"; then
      echo "FAIL: $name: trainc run's time to first step is shorter than its compile"
      cat "$out.run.err"
      fail=1 model_fail=1
    fi
  fi
  for how in "${hows[@]}"; do losses "$out.$how.jsonl" >"$out.$how.losses"; done
  pairs=(cs:llvms)
  ((ranks == 1)) && pairs+=(llvm:run)
  for pair in "${pairs[@]}"; do
    a=${pair%:*} b=${pair#*:}
    same "weights" "$out.$a.safetensors" "$out.$b.safetensors"
    same "loss logs" "$out.$a.losses" "$out.$b.losses"
  done
  near cs c
  near cs llvm
  near c llvm
  ((model_fail)) || echo "$name, $steps steps, $ranks rank(s): the same losses and weights from" \
    "${pairs[*]} (cs: C, llvms: LLVM, both scalar math), the libmvec trainers' within bounds"
done
exit $fail
