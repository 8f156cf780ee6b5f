#!/usr/bin/env bash
# --kernel-times FILE (docs/trainer.md, *Kernel times*) and `trainc plan
# --measured FILE`. What is checked is behaviour, never how fast:
#  - every kernel call of forward() and backward() is one site, called once
#    per micro-batch (calls inside the loops over layers included, which
#    checks the sites the loops compute), also with --accumulate 2 and in
#    an LLVM trainer;
#  - the prediction in the trainer is the plan's: the sites' predicted
#    forward, backward and recompute seconds add up to `trainc plan`'s, and
#    the update is its update; under --precision bf16 (the model file says
#    nothing: fp32) they are the plan's of the model with `precision bf16`
#    in its train block, and the file says which precision ran;
#  - the file says whether a machine profile priced the predictions
#    (`calibrated`: a trainer built with --profile) or trainc's built-in
#    figures, which stderr then names;
#  - the measured phases add up to the measured step; recompute is measured
#    only where the plan recomputes (all: some; off: none); timing changes
#    no weight;
#  - `trainc plan --measured` shows the file's figures for the plan the
#    trainer was built with, and refuses another plan's file, a file that is
#    not one, and --measured outside `plan`; the flag on a CUDA trainer
#    (emulated) and on a folder is an error before training.
# usage: kernel_times.sh TRAINC SOURCE_DIR WORKDIR [llvm]
set -euo pipefail
trainc=$1 src=$2 work=$3 llvm=${4:-}
PY=/usr/bin/python3
rm -rf "$work" && mkdir -p "$work"
fail=0
flunk() { echo "FAIL: $*"; fail=1; }
source "$src/tests/e2e/run_data.sh"

model=$src/examples/gpt.nn # layers in loops; the chunked loss head
data=$(data_dir random "$model")

# the same model planned for precision bf16 (for the trainer run with --precision bf16)
sed 's/^  clip 1.0$/&\n  precision bf16/' "$model" >"$work/gpt_bf16.nn"
grep -q '^  precision bf16$' "$work/gpt_bf16.nn" || flunk "no precision line added to $model's train block"

# check_file FILE POLICY [PRECISION]: the file against `trainc plan` of
# POLICY, of the model planned for PRECISION (default fp32)
check_file() {
  local file=$1 policy=$2 precision=${3:-fp32} planned=$model
  [[ $precision == bf16 ]] && planned=$work/gpt_bf16.nn
  "$trainc" plan "$planned" --policy "$policy" --format json >"$work/plan.json"
  "$PY" - "$file" "$work/plan.json" "$policy" "$precision" <<'PYEOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
head, sites, plan = lines[0], lines[1:], json.load(open(sys.argv[2]))
assert head["model"] == plan["model"] and head["checkpoint"] == plan["policy"], head
assert head["precision"] == sys.argv[4], (head["precision"], sys.argv[4])
assert head["calibrated"] is False, head # built without --profile
assert head["arena_bytes"] == plan["peak"]["arena"], (head["arena_bytes"], plan["peak"]["arena"])
assert len(sites) == head["sites"] > 0 and [s["site"] for s in sites] == list(range(len(sites)))
bad = [s for s in sites if s["calls"] != 1]
assert not bad, f"sites not called once per micro-batch: {bad[:3]}"
m, p, t = head["measured"], head["predicted"], plan["seconds"]
for k in ("forward", "backward", "recompute", "update"):
    assert abs(p[k] - t[k]) <= 1e-6 * t["step"], (k, p[k], t[k])
# the trainer's overhead is in-run: recompute against the rest of this step
# (the plan's is against off's step, cache_credit included)
assert abs(p["overhead"] - t["recompute"] / (t["step"] - t["recompute"])) <= 1e-5, (p["overhead"], t)
assert abs(sum(s["predicted"] for s in sites) + p["update"] - p["step"]) <= 1e-6 * p["step"]
assert abs(sum(s["predicted_recompute"] for s in sites) - p["recompute"]) <= 1e-6 * p["step"]
assert all(0 <= s["predicted_recompute"] <= s["predicted"] for s in sites)
assert m["forward"] > 0 and m["backward"] > 0 and m["step"] > 0, m
assert abs(m["forward"] + m["backward"] + m["recompute"] + m["rest"] - m["step"]) <= 1e-6 * m["step"], m
assert abs(sum(s["seconds"] for s in sites) + m["rest"] - m["step"]) <= 1e-6 * m["step"], m
assert (m["recompute"] > 0) == (sys.argv[3] != "off") == (t["recompute"] > 0), (m, t)
print(sys.argv[3], "measured", m, "predicted", p)
PYEOF
}

cflags="${TRAINC_TEST_CFLAGS:-} -O2"
for policy in all off; do
  "$trainc" build "$model" --policy "$policy" -o "$work/gpt_$policy" --cflags "$cflags" >/dev/null
  "$work/gpt_$policy" --data "$data" --steps 3 --quiet --kernel-times "$work/$policy.jsonl" 2>"$work/$policy.err"
  grep -q "^  measured  forward" "$work/$policy.err" || flunk "$policy: no measured line on stderr"
  check_file "$work/$policy.jsonl" "$policy" || flunk "$policy: kernel times"
done
grep -q "predicted with trainc's built-in machine profile" "$work/off.err" || flunk "built-in figures not named"
# a trainer built with --profile says its predictions are that profile's
printf 'gemm_flops = 1e11\nloop_flops = 1e10\nbandwidth = 2e10\nkernel_overhead = 1e-6\n' >"$work/machine.profile"
calibrated() { # calibrated TRAINER: its kernel times say "calibrated": true, and stderr no word of built-in figures
  "$1" --data "$data" --steps 2 --quiet --kernel-times "$1.jsonl" 2>"$1.err"
  "$PY" -c 'import json, sys; sys.exit(json.loads(open(sys.argv[1]).readline())["calibrated"] is not True)' "$1.jsonl" &&
    ! grep -q "built-in machine profile" "$1.err"
}
"$trainc" build "$model" --policy off --profile "$work/machine.profile" -o "$work/gpt_profiled" --cflags "$cflags" >/dev/null
calibrated "$work/gpt_profiled" || flunk "--profile: the predictions not said to be the profile's"
# timing changes no arithmetic: the same weights with and without it
"$work/gpt_all" --data "$data" --steps 3 --quiet --save "$work/timed.safetensors" --kernel-times "$work/t.jsonl" 2>/dev/null
"$work/gpt_all" --data "$data" --steps 3 --quiet --save "$work/untimed.safetensors"
cmp -s "$work/timed.safetensors" "$work/untimed.safetensors" || flunk "--kernel-times changed the trained weights"
"$work/gpt_all" --data "$data" --steps 2 --accumulate 2 --quiet --kernel-times "$work/acc.jsonl" 2>/dev/null
"$PY" -c 'import json, sys; h = json.loads(open(sys.argv[1]).readline()); sys.exit(not (h["steps"] == 1 and h["micro_batches"] == 2))' \
  "$work/acc.jsonl" || flunk "--accumulate 2: not 2 micro-batches in the one step timed"
check_file "$work/acc.jsonl" all || flunk "--accumulate 2: kernel times"
# --precision bf16: the GEMMs' predictions are those of bf16 operands
"$work/gpt_all" --data "$data" --steps 3 --quiet --precision bf16 --kernel-times "$work/bf16.jsonl" 2>"$work/bf16.err"
grep -q "micro-batches, precision bf16; per micro-batch" "$work/bf16.err" || flunk "--precision bf16: not named on stderr"
check_file "$work/bf16.jsonl" all bf16 || flunk "--precision bf16: kernel times"
"$PY" - "$work/all.jsonl" "$work/bf16.jsonl" <<'PYEOF' || flunk "--precision bf16: GEMMs not predicted faster, or loops predicted otherwise"
import json, sys
fp32, bf16 = ([json.loads(x) for x in list(open(p))[1:]] for p in sys.argv[1:])
gemm = [a["predicted"] > b["predicted"] for a, b in zip(fp32, bf16) if a["op"] == "matmul"]
loops = [a["predicted"] == b["predicted"] for a, b in zip(fp32, bf16) if a["op"] in ("gelu", "layernorm", "add")]
sys.exit(not (gemm and all(gemm) and loops and all(loops)))
PYEOF
"$work/gpt_all" --data "$data" --steps 1 --quiet --kernel-times "$work/one.jsonl" 2>"$work/one.err"
[[ ! -e $work/one.jsonl ]] && grep -q "no step after the first" "$work/one.err" ||
  flunk "--steps 1: a file was written, or no word why not"

if [[ $llvm == llvm ]]; then
  "$trainc" build "$model" --policy all --backend llvm -o "$work/gpt_llvm" >/dev/null
  "$work/gpt_llvm" --data "$data" --steps 3 --quiet --kernel-times "$work/llvm.jsonl" 2>/dev/null
  check_file "$work/llvm.jsonl" all || flunk "LLVM trainer: kernel times"
  "$work/gpt_llvm" --data "$data" --steps 3 --quiet --precision bf16 --kernel-times "$work/llvm_bf16.jsonl" 2>/dev/null
  check_file "$work/llvm_bf16.jsonl" all bf16 || flunk "LLVM trainer, --precision bf16: kernel times"
  "$trainc" build "$model" --policy off --backend llvm --profile "$work/machine.profile" -o "$work/gpt_llvm_profiled" >/dev/null
  calibrated "$work/gpt_llvm_profiled" || flunk "LLVM trainer, --profile: the predictions not said to be the profile's"
  for precision in fp32 bf16; do
    c_file=$work/all.jsonl llvm_file=$work/llvm.jsonl
    [[ $precision == bf16 ]] && c_file=$work/bf16.jsonl llvm_file=$work/llvm_bf16.jsonl
    "$PY" - "$c_file" "$llvm_file" <<'PYEOF' || flunk "the LLVM trainer's sites differ from the C trainer's ($precision)"
import json, sys
key = lambda s: (s["op"], s["value"], s["line"])
c, l = ([json.loads(x) for x in list(open(p))[1:]] for p in sys.argv[1:])
# the same calls, and the same predictions (the C trainer's printed to 7 digits)
sys.exit(len(c) != len(l) or any(key(a) != key(b) or abs(a["predicted"] - b["predicted"]) > 1e-6 * b["predicted"]
                                  for a, b in zip(c, l)))
PYEOF
  done
fi

# trainc plan --measured
"$trainc" plan "$model" --policy all --measured "$work/all.jsonl" >"$work/plan.txt"
grep -q "^measured micro-batch time ($work/all.jsonl, 2 steps, precision fp32): .*; +[0-9.]*%)$" "$work/plan.txt" ||
  { flunk "plan --measured: no measured line"; cat "$work/plan.txt"; }
"$trainc" plan "$model" --policy all --measured "$work/all.jsonl" --format json | "$PY" -c '
import json, sys
d, head = json.load(sys.stdin), json.loads(open(sys.argv[1]).readline())
m = d["measured"]
assert m["file"] == sys.argv[1] and m["steps"] == head["steps"], m
assert all(abs(m[k] - head["measured"][k]) <= 1e-5 * head["measured"]["step"] for k in ("forward", "backward", "recompute", "rest", "step"))
assert abs(m["overhead"] - head["measured"]["overhead"]) <= 1e-5
assert m["precision"] == head["precision"] and abs(m["predicted_step"] - head["predicted"]["step"]) <= 1e-5 * m["step"], m
' "$work/all.jsonl" || flunk "plan --measured --format json"

expect_error() { # what status pattern command...
  local what=$1 status=$2 pattern=$3 rc=0
  shift 3
  "$@" >"$work/err.out" 2>&1 || rc=$?
  [[ $rc == "$status" ]] || flunk "$what: exit $rc, not $status"
  grep -q -- "$pattern" "$work/err.out" || { flunk "$what: unexpected message"; cat "$work/err.out"; }
}
"$trainc" plan "$model" --policy all --measured "$work/bf16.jsonl" >"$work/plan_bf16.txt"
grep -q "^measured micro-batch time ($work/bf16.jsonl, 2 steps, precision bf16): " "$work/plan_bf16.txt" &&
  grep -q "^  (the prediction above is for precision fp32; the trainer's for its bf16 run: [0-9.]* ms" \
    "$work/plan_bf16.txt" || { flunk "plan --measured of a bf16 run: precision not named"; cat "$work/plan_bf16.txt"; }
expect_error "another plan's file" 1 "all.jsonl: error: measured another plan: model gpt, checkpoint all" \
  "$trainc" plan "$model" --policy off --measured "$work/all.jsonl"
echo '{"loss": 1}' >"$work/log.jsonl"
expect_error "a log as the file" 1 "log.jsonl: error: not a trainer's --kernel-times file" \
  "$trainc" plan "$model" --measured "$work/log.jsonl"
expect_error "a missing file" 1 "nothing.jsonl" "$trainc" plan "$model" --measured "$work/nothing.jsonl"
expect_error "--measured with build" 2 "--measured go with the plan command" \
  "$trainc" build "$model" --measured "$work/all.jsonl" -o "$work/x"
expect_error "--measured with --sweep" 2 "not with --sweep" \
  "$trainc" plan "$model" --sweep --measured "$work/all.jsonl"
mkdir -p "$work/folder"
expect_error "--kernel-times on a folder" 1 "folder" \
  "$work/gpt_all" --data "$data" --steps 2 --quiet --kernel-times "$work/folder"
if command -v "${CXX:-c++}" >/dev/null; then
  "$trainc" build "$model" --backend cuda-emulate --attention whole --loss-head whole -o "$work/gpt_cuda" >/dev/null
  expect_error "--kernel-times on a CUDA trainer" 1 "kernel-times: a CUDA trainer's kernels run asynchronously" \
    "$work/gpt_cuda" --data "$data" --steps 2 --quiet --kernel-times "$work/cuda.jsonl"
fi
exit $fail
