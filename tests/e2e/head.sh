#!/usr/bin/env bash
# The chunked loss head (passes/head.c, runtime/kernels/head.c) against the
# whole logits it replaces (--loss-head whole), on a one-layer GPT whose
# output layer is examples/gpt.nn's (tied to the token embedding) and on an
# untied x @ w with ignored labels (tests/e2e/gradcheck/head_ignore.nn):
#  - --gradcheck in chunks of 4 rows (several chunks, the last one short);
#  - head_ignore.nn trained 4 steps of 2 micro-batches on labels ~40%
#    ignored, unevenly: chunks of 4 rows give the whole head's weights to
#    1e-5 (each window normalized by its labels that count, as whole);
#  - the plan: chunked stores at least the logits (B*T*V floats) less;
#  - 4 steps with accumulation 2: every logged loss and gradient norm and
#    the weights equal the whole trainer's to 1e-5 relative (float: other
#    GEMM shapes, w's gradient summed chunk by chunk), the evaluation's
#    accuracy exactly, its loss to 1e-5; --dump-step's predictions (rows
#    the runtime makes from x and w) and gradients the same way;
#  - sampling: the same text from the same weights;
#  (The LLVM backend's head against the C backend's: tests/e2e/llvm.sh on
#  the gradcheck models, tied.nn and head_ignore.nn among them.)
#  - the measured high-water mark equals the plan;
#  - --loss-head auto at its least peak (vocabulary 2048): chunks of half
#    the rows, a peak no plan of the default chunk reaches, bitwise the
#    weights of `off` in chunks of that size (C trainers, and under `trainc
#    run`), and the high-water mark of the plan;
#  - bad --loss-head values, and chunked with the CUDA backend, are errors.
# usage: head.sh TRAINC SOURCE_DIR WORKDIR
set -euo pipefail
trainc=$1 src=$2 work=$3
PY=/usr/bin/python3
rm -rf "$work" && mkdir -p "$work"
cflags=(--cflags "${TRAINC_TEST_CFLAGS:-} -O2")
fail=0

"$trainc" build "$src/tests/e2e/gradcheck/head_ignore.nn" --loss-head 4 -o "$work/gc" "${cflags[@]}" >/dev/null
"$work/gc" --gradcheck >"$work/gc.out" || { cat "$work/gc.out"; echo "FAIL: gradcheck in chunks of 4"; fail=1; }
grep -q "trc_linear_cross_entropy" <("$trainc" emit "$src/tests/e2e/gradcheck/head_ignore.nn" --loss-head 4 -o /dev/stdout) ||
  { echo "FAIL: head_ignore.nn has no chunked head"; fail=1; }

# ignored labels and accumulation: chunked (4 rows) against whole
ig=$work/ignore
for head in whole 4; do
  "$trainc" build "$src/tests/e2e/gradcheck/head_ignore.nn" --loss-head $head -o "$ig.$head" \
    --keep-c "$ig.$head.c" "${cflags[@]}" >/dev/null
done
"$PY" "$src/tests/e2e/random_data.py" "$ig.whole.c" "$ig.data" 48 3
"$PY" - "$ig.data" <<'PY'
import sys
import numpy as np
y = np.load(f"{sys.argv[1]}/next.npy")
y[np.random.default_rng(7).random(y.shape) < 0.4] = -100  # unevenly per micro-batch
np.save(f"{sys.argv[1]}/next.npy", y)
PY
for head in whole 4; do
  "$ig.$head" --data "$ig.data" --steps 4 --accumulate 2 --quiet --save "$ig.$head.safetensors"
done

sed -e 's/const T = 64 /const T = 16 /' -e 's/const D = 128 /const D = 32 /' \
  -e 's/const LAYERS = 4/const LAYERS = 1/' -e 's/^  batch 32/  batch 8\n  accumulate 2/' \
  "$src/examples/gpt.nn" >"$work/gpt.nn"
grep -q "accumulate 2" "$work/gpt.nn" || { echo "FAIL: gpt.nn's train block changed"; exit 1; }
for head in whole chunked 24; do
  "$trainc" build "$work/gpt.nn" --loss-head $head -o "$work/$head" --keep-c "$work/$head.c" "${cflags[@]}" >/dev/null
  "$trainc" plan "$work/gpt.nn" --loss-head $head --format json >"$work/$head.plan.json"
done
"$PY" "$src/tests/e2e/random_data.py" "$work/whole.c" "$work/data" 96
run=(--data "$work/data" --eval-data "$work/data" --metrics loss,accuracy --eval-every-steps 2 --steps 4
     --log-every 1 --quiet)
for head in whole chunked 24; do
  "$work/$head" "${run[@]}" --save "$work/$head.safetensors" --log "$work/$head.jsonl" >"$work/$head.out"
  "$work/$head" --data "$work/data" --init "$work/whole.safetensors" --dump-step "$work/$head.dump.safetensors"
  "$work/$head" --steps 0 --init "$work/whole.safetensors" --sample 40 --prompt "And" --temperature 0 \
    >"$work/$head.sample" 2>/dev/null
done
for head in chunked 24; do
  cmp -s "$work/whole.sample" "$work/$head.sample" ||
    { echo "FAIL: $head samples other text than whole"; diff "$work/whole.sample" "$work/$head.sample" || true; fail=1; }
done

"$PY" - "$work" "$src/tests/torch" <<'PY' || fail=1
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[2])
import safetensors_np
w = sys.argv[1]
bad = []
def close(what, a, b, rtol=1e-5, floor=1e-30):
    """max |a - b| within rtol of b's largest magnitude (or of `floor`, for a
    tensor of rounding noise: attention's key bias has a zero gradient)"""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    err = np.max(np.abs(a - b)) / max(np.max(np.abs(b)), floor) if b.size else 0.0
    if a.shape != b.shape or not err <= rtol:
        bad.append(f"{what}: relative difference {err:.3g}")
# The head stores its output until backward reads dx there: dx and the row
# stats, which whole does not store; its chunk of logits is a scratch of
# its step alone.
logits, dx_stats = 8 * 16 * 256 * 4, 8 * 16 * (32 + 2) * 4
plans = {h: json.load(open(f"{w}/{h}.plan.json")) for h in ("whole", "chunked", "24")}
plan = {h: plans[h]["peak"] for h in plans}
heads = {h: plans[h]["loss_head"] for h in plans}
if heads["whole"] is not None or heads["chunked"]["chunk"] != 128 or heads["24"]["chunk"] != 24:
    bad.append(f"the plans' loss heads: {heads}")
for h in ("chunked", "24"):
    saved = plan["whole"]["stored_activations"] - plan[h]["stored_activations"]
    least = logits - dx_stats
    if saved < least:
        bad.append(f"{h}: stores {saved} bytes less than whole, not at least {least}")
records = lambda h: [json.loads(l) for l in open(f"{w}/{h}.jsonl")]
for h in ("chunked", "24"):
    for key in ("loss", "grad_norm"):
        a = [r[key] for r in records(h) if key in r and "step" in r]
        b = [r[key] for r in records("whole") if key in r and "step" in r]
        close(f"{h} {key}", a, b)
    ea = [r for r in records(h) if "eval_loss" in r]
    eb = [r for r in records("whole") if "eval_loss" in r]
    if not eb or [r["eval_accuracy"] for r in ea] != [r["eval_accuracy"] for r in eb]:
        bad.append(f"{h}: evaluation accuracy {[r.get('eval_accuracy') for r in ea]}, whole's "
                   f"{[r.get('eval_accuracy') for r in eb]}")
    close(f"{h} eval loss", [r["eval_loss"] for r in ea], [r["eval_loss"] for r in eb])
    mem = [r for r in records(h) if "arena_high_water" in r][-1]
    if mem["arena_high_water"] != mem["arena_planned"]:
        bad.append(f"{h}: high-water mark {mem['arena_high_water']}, planned {mem['arena_planned']}")
    for what in ("safetensors", "dump.safetensors"):
        a, _ = safetensors_np.read(f"{w}/{h}.{what}")
        b, _ = safetensors_np.read(f"{w}/whole.{what}")
        if sorted(a) != sorted(b):
            bad.append(f"{h} {what}: tensors {sorted(a)}, whole's {sorted(b)}")
            continue
        largest = max(float(np.max(np.abs(t))) for t in b.values())
        for name in b:
            close(f"{h} {what} {name}", a[name], b[name], floor=1e-3 * largest)
a, _ = safetensors_np.read(f"{w}/ignore.4.safetensors")
b, _ = safetensors_np.read(f"{w}/ignore.whole.safetensors")
for name in b:
    close(f"ignored labels, accumulate 2: {name}", a[name], b[name])
if bad:
    sys.exit("FAIL: " + "; ".join(bad))
print(f"chunked = whole to 1e-5 (losses, gradient norms, weights, dump-step, evaluation); "
      f"stored {plan['whole']['stored_activations']} -> {plan['chunked']['stored_activations']} bytes")
PY

# --loss-head auto, on the small GPT with a vocabulary of 2048 (its chunk of
# logits then counts at the peak): at the least peak the budget search
# finds with it, a chunk of half the rows (the default holds them all) and
# no plan of the default chunk fits; trained, the weights are bitwise those
# of `off` in chunks of that size, and the high-water mark is the plan
least_peak() { # trainc plan arguments...: the smallest peak the error names
  { "$trainc" plan "$@" --budget 1 2>&1 || true; } | sed -n 's/.* (\([0-9]*\) bytes)$/\1/p'
}
sed -e 's/^const VOCAB = 256 /const VOCAB = 2048 /' "$work/gpt.nn" >"$work/wide.nn"
least=$(least_peak "$work/wide.nn" --loss-head auto)
"$trainc" plan "$work/wide.nn" --loss-head auto --budget "$least" --format json >"$work/auto.plan.json"
"$PY" -c 'import json, sys; h = json.load(open(sys.argv[1]))["loss_head"]
assert (h["chunk"], h["default_chunk"], h["planner_chooses"]) == (64, 128, True), h' "$work/auto.plan.json" ||
  { echo "FAIL: --loss-head auto at its least peak $least: not 64 rows a chunk"; fail=1; }
(( $(least_peak "$work/wide.nn") > least )) ||
  { echo "FAIL: the default chunk fits $least bytes too: auto gained nothing"; fail=1; }
"$trainc" build "$work/wide.nn" --loss-head auto --budget "$least" -o "$work/auto" --keep-c "$work/auto.c" \
  "${cflags[@]}" >"$work/auto.build"
grep -q ", loss head 64 rows a chunk)" "$work/auto.build" ||
  { echo "FAIL: trainc build does not say the chosen chunk: $(cat "$work/auto.build")"; fail=1; }
"$trainc" build "$work/wide.nn" --loss-head 64 --policy off -o "$work/off64" "${cflags[@]}" >/dev/null
"$PY" "$src/tests/e2e/random_data.py" "$work/auto.c" "$work/wide.data" 32
for t in auto off64; do
  "$work/$t" --data "$work/wide.data" --steps 4 --quiet --save "$work/$t.safetensors" --log "$work/$t.jsonl"
done
cmp -s "$work/auto.safetensors" "$work/off64.safetensors" ||
  { echo "FAIL: --loss-head auto at $least trains to other weights than off in chunks of 64"; fail=1; }
# the LLVM backend (`trainc run`) takes the planner's chunk too
"$trainc" run --loss-head auto --budget "$least" "$work/wide.nn" --data "$work/wide.data" --steps 4 --quiet \
  --save "$work/auto.run.safetensors"
"$trainc" run --loss-head 64 --policy off "$work/wide.nn" --data "$work/wide.data" --steps 4 --quiet \
  --save "$work/off64.run.safetensors"
cmp -s "$work/auto.run.safetensors" "$work/off64.run.safetensors" ||
  { echo "FAIL: trainc run --loss-head auto at $least: other weights than off in chunks of 64"; fail=1; }
"$PY" -c 'import json, sys; m = [json.loads(l) for l in open(sys.argv[1]) if "arena_high_water" in l][-1]
assert m["arena_high_water"] == m["arena_planned"], m' "$work/auto.jsonl" ||
  { echo "FAIL: --loss-head auto: the high-water mark is not the plan"; fail=1; }

expect_error() { # message, trainc arguments...
  local want=$1
  shift
  if "$trainc" "$@" >"$work/err.out" 2>&1; then echo "FAIL: trainc $* succeeded"; fail=1
  elif ! grep -qF -- "$want" "$work/err.out"; then echo "FAIL: trainc $*: $(cat "$work/err.out")"; fail=1; fi
}
expect_error "--loss-head takes whole, chunked, auto or a number of rows, not 'some'" plan "$work/gpt.nn" --loss-head some
expect_error "--loss-head takes whole, chunked, auto or a number of rows, not '0'" plan "$work/gpt.nn" --loss-head 0
expect_error "the CUDA backends have no chunked loss head" emit "$work/gpt.nn" --backend cuda --loss-head chunked -o "$work/x.cu"
expect_error "the CUDA backends have no chunked loss head" emit "$work/gpt.nn" --backend cuda --loss-head auto -o "$work/x.cu"
[[ $fail == 0 ]] && echo "head: gradcheck in chunks, chunked = whole, sampling, auto's chunk, errors"
exit $fail
