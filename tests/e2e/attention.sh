#!/usr/bin/env bash
# Fused causal attention (the ATTENTION pass, docs/planner.md *Attention
# without stored probabilities*); its numbers are checked elsewhere
# (e2e.gradcheck.attention_fused: finite differences; torch.gpt_small_fused:
# PyTorch on identical weights). Here:
#  - which attention is fused: --attention fused at any length, whole never;
#    dropout on the probabilities keeps the unfused form; auto (the default)
#    is the planner's choice: the form whose plan `trainc plan` predicts
#    faster (the predictions of --attention fused and whole; whole on two
#    small models, fused on examples/gpt.nn at T = 256; a model without
#    fusable attention has none to make), and under a budget only the fused
#    form fits, the fused one;
#  - the fused plan stores exactly the probabilities' bytes less than the
#    unfused one (off), and trains with its arena high-water mark = plan;
#  - fused and whole train a GPT without dropout to the same losses (within
#    1e-5 relative: other summation orders, not other arithmetic);
#  - a bad --attention value, and fused attention on a CUDA backend, are
#    errors.
# usage: attention.sh TRAINC SOURCE_DIR WORKDIR
set -euo pipefail
trainc=$1 src=$2 work=$3
PY=/usr/bin/python3
rm -rf "$work" && mkdir -p "$work"
fail=0
flunk() { echo "FAIL: $*"; fail=1; }
source "$src/tests/e2e/run_data.sh"

long=$src/tests/e2e/gradcheck/attention_fused.nn  # T = 130
short=$src/tests/torch/gpt_small.nn                # T = 12
dropped=$src/tests/e2e/gradcheck/attention.nn      # dropout on the probabilities
fused_calls() { # MODEL FLAGS...: lines calling trc_causal_attention in its C (layers alike share one)
  "$trainc" emit "$@" -o "$work/out.c" >/dev/null
  grep -c 'trc_causal_attention(' "$work/out.c" || true
}
[[ $(fused_calls "$long" --attention fused) == 1 ]] || flunk "--attention fused leaves T = 130 unfused"
[[ $(fused_calls "$short" --attention fused) == 1 ]] || flunk "--attention fused leaves gpt_small unfused"
[[ $(fused_calls "$long" --attention whole) == 0 ]] || flunk "--attention whole fuses"
[[ $(fused_calls "$dropped" --attention fused) == 0 ]] || flunk "attention with dropout on its probabilities is fused"

plan_of() { # MODEL FLAGS...: attention's form, whether chosen, the predicted step
  "$trainc" plan "$@" --format json | "$PY" -c '
import json, sys
p = json.load(sys.stdin)
print(p["attention"]["form"], p["attention"]["chosen"], p["seconds"]["step"])'
}
least_peak() { # MODEL FLAGS...: the least peak the planner names for an impossible budget
  { "$trainc" plan "$@" --budget 1 2>&1 || true; } | sed -n 's/.*model: .* (\([0-9]*\) bytes)$/\1/p'
}
# examples/gpt.nn at T = 256 without dropout: fused predicted the faster
sed 's/dropout = 0.1/dropout = 0/; s/dropout(proj, 0.1)/proj/; s/const T = 64 /const T = 256 /; s/batch 32/batch 4/' \
  "$src/examples/gpt.nn" >"$work/gpt256.nn"
for model in "$long" "$short" "$work/gpt256.nn"; do
  read -r _ _ fused_step < <(plan_of "$model" --attention fused)
  read -r _ _ whole_step < <(plan_of "$model" --attention whole)
  read -r form chosen step < <(plan_of "$model")
  faster=$("$PY" -c "import sys; print('fused' if float(sys.argv[1]) <= float(sys.argv[2]) else 'whole')" \
    "$fused_step" "$whole_step")
  [[ $form == "$faster" && $chosen == True ]] ||
    flunk "$model: auto chose $form (chosen: $chosen), predicted fused $fused_step s, whole $whole_step s"
  [[ $step == "$(plan_of "$model" --attention "$form" | cut -d' ' -f3)" ]] ||
    flunk "$model: auto's plan is not --attention $form's"
done
[[ $(plan_of "$dropped" | cut -d' ' -f1-2) == "whole False" ]] || flunk "attention with dropout offered a choice"
fused_least=$(least_peak "$long" --attention fused) whole_least=$(least_peak "$long" --attention whole)
if ((fused_least < whole_least)); then
  [[ $(plan_of "$long" --budget $(((fused_least + whole_least) / 2)) | cut -d' ' -f1) == fused ]] ||
    flunk "a budget only fused attention fits did not fuse it"
else
  flunk "fused attention's least peak $fused_least is not below whole's $whole_least"
fi

stored() { # MODEL FLAGS...: the plan's stored activations
  "$trainc" plan "$@" --policy off --format json | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["peak"]["stored_activations"])'
}
probabilities=$((2 * 2 * 130 * 130 * 4)) # [B, heads, T, T] floats
(($(stored "$long" --attention whole) - $(stored "$long" --attention fused) == probabilities)) ||
  flunk "fused attention does not store exactly the probabilities' $probabilities bytes less"

data=$(data_dir random "$long")
"$trainc" build "$long" --attention fused -o "$work/fused" --cflags "${TRAINC_TEST_CFLAGS:-} -O2" >/dev/null
"$work/fused" --data "$data" --steps 3 --quiet --log "$work/fused.jsonl"
read -r planned measured < <(arena_of "$work/fused.jsonl")
[[ $planned == "$measured" ]] || flunk "fused: arena planned $planned bytes, high-water mark $measured"

sed 's/dropout = 0.1/dropout = 0/; s/dropout(proj, 0.1)/proj/; s/const T = 64 /const T = 32 /; s/batch 32/batch 4/' \
  "$src/examples/gpt.nn" >"$work/gpt.nn"
kjv=$(data_dir kjv "$work/gpt.nn")
for form in fused whole; do
  "$trainc" build "$work/gpt.nn" --attention "$form" -o "$work/gpt_$form" --cflags "${TRAINC_TEST_CFLAGS:-} -O2" >/dev/null
  "$work/gpt_$form" --data "$kjv" --steps 5 --log-every 1 --quiet --log "$work/gpt_$form.jsonl"
done
"$PY" - "$work/gpt_fused.jsonl" "$work/gpt_whole.jsonl" <<'PYEOF' || flunk "fused and whole attention train to other losses"
import json, sys
loss = lambda p: [json.loads(l)["loss"] for l in open(p) if '"loss"' in l]
f, w = loss(sys.argv[1]), loss(sys.argv[2])
print("losses fused", f, "whole", w)
sys.exit(not (len(f) == len(w) == 5 and all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(f, w))))
PYEOF

expect_error() { # what pattern command...
  local what=$1 pattern=$2
  shift 2
  if "$@" >"$work/err.out" 2>&1; then flunk "$what was accepted"; return; fi
  grep -q -- "$pattern" "$work/err.out" || { flunk "$what: unexpected message"; cat "$work/err.out"; }
}
expect_error "--attention sparse" "--attention takes auto, fused or whole, not 'sparse'" \
  "$trainc" plan "$long" --attention sparse
expect_error "fused attention on CUDA" "the CUDA backends have no fused attention" \
  "$trainc" emit "$long" --backend cuda --attention fused -o "$work/x.cu"
exit $fail
